// Scan simulation (see scan.h): each effect a plain loop over 8-bit gray pixels, composed by
// degrade() in the order a page goes through: printed (ink), on paper (shading), scanned
// (blur, resolution, noise, dust), post-processed (threshold, JPEG).
#include "train/scan.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "train/augment.h"

namespace ocrt::train {

namespace {

constexpr double kPi = 3.14159265358979323846;

// The value at fraction q (0..1) of the sorted pixels, by counting (256 bins).
uint8_t percentile(const GrayImage& image, double q) {
  int64_t hist[256] = {};
  for (uint8_t v : image.pixels) ++hist[v];
  const auto rank = (int64_t)std::floor(q * (double)(image.pixels.size() - 1));
  int64_t seen = 0;
  for (int v = 0; v < 256; ++v) {
    seen += hist[v];
    if (seen > rank) return (uint8_t)v;
  }
  return 255;
}

// The JPEG standard's luminance quantisation table (ITU-T T.81, Annex K.1), row-major.
constexpr int kLumaTable[64] = {16, 11, 10, 16, 24,  40,  51,  61,  12, 12, 14, 19, 26,  58,  60,  55,
                                14, 13, 16, 24, 40,  57,  69,  56,  14, 17, 22, 29, 51,  87,  80,  62,
                                18, 22, 37, 56, 68,  109, 103, 77,  24, 35, 55, 64, 81,  104, 113, 92,
                                49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99};

}  // namespace

void ScanOptions::validate() const {
  auto prob = [](double p, const char* name) {
    OCRT_CHECK(p >= 0 && p <= 1, "scan options: ", name, " must be a probability in [0, 1], got ", p);
  };
  auto range = [](double v, double lo, double hi, const char* name) {
    OCRT_CHECK(v >= lo && v <= hi, "scan options: ", name, " must be in [", lo, ", ", hi, "], got ", v);
  };
  for (auto [p, name] : {std::pair{p_crop, "p_crop"}, {p_margin, "p_margin"}, {p_skew, "p_skew"}, {p_curve, "p_curve"},
                         {p_ink, "p_ink"}, {p_paper, "p_paper"}, {p_blur, "p_blur"}, {p_lowres, "p_lowres"},
                         {p_noise, "p_noise"}, {p_speckle, "p_speckle"}, {p_binarize, "p_binarize"}, {p_jpeg, "p_jpeg"}})
    prob(p, name);
  range(max_crop, 0, 0.3, "max_crop");
  range(max_margin, 0, 4, "max_margin");
  range(max_skew_deg, 0, 10, "max_skew_deg");
  range(max_curve, 0, 0.5, "max_curve");
  range(max_ink, 0, 0.2, "max_ink");
  range(max_shade, 0, 255, "max_shade");
  range(max_blur, 0, 0.2, "max_blur");
  range(min_lowres_height, 4, 1000, "min_lowres_height");
  range(max_noise, 0, 64, "max_noise");
  range(max_speckle, 0, 0.05, "max_speckle");
}

std::vector<std::string> ScanOptions::preset_names() {
  return {"none", "scan", "binarized", "lowres", "blur-noise", "jpeg", "speckle", "warped", "paper", "ink", "crop"};
}

ScanOptions ScanOptions::preset(const std::string& name) {
  ScanOptions o;
  if (name == "scan") return o;
  // Every other preset starts from nothing and turns on its effects at a fixed strength: the
  // parameter is drawn from the upper half of its range, so the effect always shows.
  ScanOptions n;
  n.p_crop = n.p_margin = n.p_skew = n.p_curve = n.p_ink = n.p_paper = 0;
  n.p_blur = n.p_lowres = n.p_noise = n.p_speckle = n.p_binarize = n.p_jpeg = 0;
  n.fixed_strength = true;
  if (name == "none") return n;
  if (name == "binarized") n.p_binarize = n.p_blur = 1;
  else if (name == "lowres") n.p_lowres = 1, n.min_lowres_height = 12;
  else if (name == "blur-noise") n.p_blur = n.p_noise = 1;
  else if (name == "jpeg") n.p_jpeg = 1;
  else if (name == "speckle") n.p_speckle = 1;
  else if (name == "warped") n.p_skew = n.p_curve = 1;
  else if (name == "paper") n.p_paper = 1;
  else if (name == "ink") n.p_ink = 1;
  else if (name == "crop") n.p_crop = 1;
  else {
    std::string names;
    for (const auto& p : preset_names()) names += (names.empty() ? "" : ", ") + p;
    fail("scan preset: unknown name '", name, "' (one of: ", names, ")");
  }
  return n;
}

GrayImage crop_rows(const GrayImage& image, int64_t top, int64_t bottom) {
  check_image(image, "crop_rows");
  OCRT_CHECK(top >= 0 && bottom >= 0 && top + bottom < image.height, "crop_rows: cannot cut ", top, " + ", bottom,
             " rows from an image ", image.height, " high");
  GrayImage out;
  out.width = image.width, out.height = image.height - top - bottom;
  out.pixels.assign(image.pixels.begin() + (std::ptrdiff_t)(top * image.width),
                    image.pixels.begin() + (std::ptrdiff_t)((image.height - bottom) * image.width));
  return out;
}

GrayImage curve_baseline(const GrayImage& image, double amplitude, double period, double phase, uint8_t background) {
  check_image(image, "curve_baseline");
  check_finite(amplitude, "curve_baseline", "amplitude");
  check_finite(period, "curve_baseline", "period");
  check_finite(phase, "curve_baseline", "phase");
  OCRT_CHECK(period > 0, "curve_baseline: period must be > 0, got ", period);
  if (amplitude == 0) return image;
  // The extra rows are bounded by the image height: a shift beyond it only adds paper.
  const double a = std::min(std::abs(amplitude), (double)image.height) * (amplitude < 0 ? -1 : 1);
  const int64_t extra = (int64_t)std::ceil(std::abs(a));
  const int64_t w = image.width, h = image.height, out_h = h + 2 * extra;
  GrayImage out;
  out.width = w, out.height = out_h;
  out.pixels.assign((size_t)(w * out_h), background);
  for (int64_t x = 0; x < w; ++x) {
    const double shift = a * std::sin(2 * kPi * (double)x / period + phase);
    for (int64_t oy = 0; oy < out_h; ++oy) {
      const double sy = (double)(oy - extra) - shift;  // source row of this output row
      const double fy = std::floor(sy);
      const auto y0 = (int64_t)fy;
      const double t = sy - fy;
      auto read = [&](int64_t y) { return y >= 0 && y < h ? (double)image.at(x, y) : (double)background; };
      if (y0 < -1 || y0 >= h) continue;
      out.pixels[(size_t)(oy * w + x)] = to_u8((1 - t) * read(y0) + t * read(y0 + 1));
    }
  }
  return out;
}

GrayImage shade_paper(const GrayImage& image, double shade, double angle, double cx, double cy) {
  check_image(image, "shade_paper");
  for (auto [v, name] : {std::pair{shade, "shade"}, {angle, "angle"}, {cx, "cx"}, {cy, "cy"}})
    check_finite(v, "shade_paper", name);
  OCRT_CHECK(shade >= 0 && shade <= 255, "shade_paper: shade must be in [0, 255], got ", shade);
  GrayImage out = image;
  const double w = (double)image.width, h = (double)image.height;
  const double dx = std::cos(angle), dy = std::sin(angle);
  // A ramp in [0, 1] along the direction, plus a Gaussian bump about a third of the line wide;
  // the bump is a product of a column and a row factor, computed once each.
  std::vector<double> bump_x((size_t)image.width), bump_y((size_t)image.height);
  for (int64_t x = 0; x < image.width; ++x) {
    const double bx = ((x + 0.5) / w - cx) / 0.33;
    bump_x[(size_t)x] = std::exp(-0.5 * bx * bx);
  }
  for (int64_t y = 0; y < image.height; ++y) {
    const double by = ((y + 0.5) / h - cy) / 2.0;
    bump_y[(size_t)y] = std::exp(-0.5 * by * by);
  }
  for (int64_t y = 0; y < image.height; ++y) {
    const double v = (y + 0.5) / h;
    for (int64_t x = 0; x < image.width; ++x) {
      const double u = (x + 0.5) / w;
      const double ramp = 0.5 + 0.5 * std::clamp((u - 0.5) * dx + (v - 0.5) * dy, -1.0, 1.0);
      const double s = shade / 255.0 * std::min(1.0, 0.6 * ramp + 0.6 * bump_x[(size_t)x] * bump_y[(size_t)y]);
      out.pixels[(size_t)(y * image.width + x)] = to_u8(image.at(x, y) * (1 - s));
    }
  }
  return out;
}

GrayImage speckle(const GrayImage& image, int64_t count, uint8_t ink, uint8_t paper, SampleRng& rng) {
  check_image(image, "speckle");
  OCRT_CHECK(count >= 0, "speckle: count must be >= 0, got ", count);
  GrayImage out = image;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t x = rng.integer(0, image.width - 1), y = rng.integer(0, image.height - 1);
    const int64_t size = rng.integer(1, 2);
    const uint8_t v = rng.uniform() < 0.5 ? ink : paper;
    for (int64_t yy = y; yy < std::min(y + size, image.height); ++yy)
      for (int64_t xx = x; xx < std::min(x + size, image.width); ++xx) out.pixels[(size_t)(yy * image.width + xx)] = v;
  }
  return out;
}

GrayImage binarize(const GrayImage& image, double fraction) {
  check_image(image, "binarize");
  check_finite(fraction, "binarize", "fraction");
  OCRT_CHECK(fraction >= 0 && fraction <= 1, "binarize: fraction must be in [0, 1], got ", fraction);
  const double ink = percentile(image, 0.02), paper = percentile(image, 0.5);
  GrayImage out = image;
  if (paper <= ink) {
    std::fill(out.pixels.begin(), out.pixels.end(), (uint8_t)255);
    return out;
  }
  const double threshold = ink + fraction * (paper - ink);
  for (auto& v : out.pixels) v = v <= threshold ? 0 : 255;
  return out;
}

GrayImage jpeg_blocks(const GrayImage& image, int quality) {
  check_image(image, "jpeg_blocks");
  OCRT_CHECK(quality >= 1 && quality <= 100, "jpeg_blocks: quality must be in [1, 100], got ", quality);
  // The IJG scaling of the table for a quality.
  const int scale = quality < 50 ? 5000 / quality : 200 - 2 * quality;
  double q[64];
  for (int i = 0; i < 64; ++i) q[i] = std::clamp((kLumaTable[i] * scale + 50) / 100, 1, 255);
  // cos((2x + 1) u pi / 16) for x, u in 0..7, with the DCT's normalisation folded in.
  double basis[8][8];
  for (int u = 0; u < 8; ++u)
    for (int x = 0; x < 8; ++x)
      basis[u][x] = (u == 0 ? std::sqrt(0.125) : 0.5) * std::cos((2 * x + 1) * u * kPi / 16);
  GrayImage out = image;
  const int64_t w = image.width, h = image.height;
  for (int64_t by = 0; by < h; by += 8)
    for (int64_t bx = 0; bx < w; bx += 8) {
      double block[8][8], coef[8][8], tmp[8][8];
      for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 8; ++x)
          block[y][x] = image.at(std::min(bx + x, w - 1), std::min(by + y, h - 1)) - 128.0;
      // Forward DCT, rows then columns.
      for (int y = 0; y < 8; ++y)
        for (int u = 0; u < 8; ++u) {
          double s = 0;
          for (int x = 0; x < 8; ++x) s += basis[u][x] * block[y][x];
          tmp[y][u] = s;
        }
      for (int v = 0; v < 8; ++v)
        for (int u = 0; u < 8; ++u) {
          double s = 0;
          for (int y = 0; y < 8; ++y) s += basis[v][y] * tmp[y][u];
          coef[v][u] = std::round(s / q[v * 8 + u]) * q[v * 8 + u];
        }
      // Inverse: columns then rows.
      for (int y = 0; y < 8; ++y)
        for (int u = 0; u < 8; ++u) {
          double s = 0;
          for (int v = 0; v < 8; ++v) s += basis[v][y] * coef[v][u];
          tmp[y][u] = s;
        }
      for (int y = 0; y < 8 && by + y < h; ++y)
        for (int x = 0; x < 8 && bx + x < w; ++x) {
          double s = 0;
          for (int u = 0; u < 8; ++u) s += basis[u][x] * tmp[y][u];
          out.pixels[(size_t)((by + y) * w + bx + x)] = to_u8(s + 128.0);
        }
    }
  return out;
}

GrayImage degrade(const GrayImage& image, const ScanOptions& opt, SampleRng& rng, double text_height) {
  check_image(image, "degrade");
  opt.validate();
  OCRT_CHECK(std::isfinite(text_height) && text_height >= 0, "degrade: text_height must be finite and >= 0, got ",
             text_height);
  // Every coin and parameter first, in a fixed order and count (as augment() does). With
  // fixed_strength, magnitudes come from the upper half of their ranges.
  const double lo = opt.fixed_strength ? 0.5 : 0.0;
  auto mag = [&](double max) { return max * rng.uniform(lo, 1.0); };
  const double h = text_height > 0 ? text_height : (double)image.height;
  const bool do_crop = rng.uniform() < opt.p_crop;
  const double crop_top = mag(opt.max_crop), crop_bottom = mag(opt.max_crop);
  const bool do_margin = rng.uniform() < opt.p_margin;
  double margins[4];
  for (double& m : margins) m = mag(opt.max_margin);
  const bool do_skew = rng.uniform() < opt.p_skew;
  const double skew = mag(opt.max_skew_deg) * (rng.uniform() < 0.5 ? -1 : 1);
  const bool do_curve = rng.uniform() < opt.p_curve;
  const double curve = mag(opt.max_curve), periods = rng.uniform(1, 4), phase = rng.uniform(0, 2 * kPi);
  const bool do_ink = rng.uniform() < opt.p_ink;
  const bool spread = rng.uniform() < 0.5;
  const double ink_size = mag(opt.max_ink);
  const bool do_paper = rng.uniform() < opt.p_paper;
  const double shade = mag(opt.max_shade), angle = rng.uniform(0, 2 * kPi), cx = rng.uniform(), cy = rng.uniform();
  const bool do_blur = rng.uniform() < opt.p_blur;
  const double blur = mag(opt.max_blur);
  const bool do_lowres = rng.uniform() < opt.p_lowres;
  const double lowres = rng.uniform();
  const bool do_noise = rng.uniform() < opt.p_noise;
  const double noise = mag(opt.max_noise);
  const bool do_speckle = rng.uniform() < opt.p_speckle;
  const double specks = mag(opt.max_speckle);
  const bool do_binarize = rng.uniform() < opt.p_binarize;
  const double threshold = rng.uniform(0.35, 0.65);
  const bool do_jpeg = rng.uniform() < opt.p_jpeg;
  const int quality = (int)rng.integer(15, opt.fixed_strength ? 40 : 70);
  SampleRng noise_rng(rng.next()), speckle_rng(rng.next());

  const uint8_t paper = paper_value(image);
  GrayImage out = image;
  if (do_crop) {
    // Never more than the rows there are: keep at least one, and half the line.
    const auto top = std::min<int64_t>((int64_t)(crop_top * h), (image.height - 1) / 4);
    const auto bottom = std::min<int64_t>((int64_t)(crop_bottom * h), (image.height - 1) / 4);
    out = crop_rows(out, top, bottom);
  } else if (do_margin) {
    auto px = [&](double m) { return std::min<int64_t>((int64_t)(m * h), 4000); };
    out = pad(out, px(margins[0]) * 2, px(margins[1]) * 2, px(margins[2]), px(margins[3]), paper);
  }
  if (do_skew) out = rotate_shear(out, skew, 0, paper);
  if (do_curve) out = curve_baseline(out, curve * h, periods * (double)out.width, phase, paper);
  if (do_ink) out = morph(out, spread, 1 + (int64_t)std::lround(ink_size * h));
  if (do_paper) out = shade_paper(out, shade, angle, cx, cy);
  if (do_blur) out = gaussian_blur(out, std::max(0.3, blur * h));
  if (do_lowres) {
    // A scan at a lower resolution: the line drawn min_lowres_height .. 0.8 h rows high.
    const double top_h = 0.8 * (double)out.height;
    if (top_h > opt.min_lowres_height) {
      const double target = opt.min_lowres_height + (top_h - opt.min_lowres_height) *
                                                        (opt.fixed_strength ? 0.5 * lowres : lowres);
      out = resize_to_height(out, std::max<int64_t>(1, std::llround(target)));  // area average
    }
  }
  if (do_noise) out = add_noise(out, noise, noise_rng);
  if (do_speckle) {
    const auto count = (int64_t)std::llround(specks * (double)out.width * (double)out.height);
    out = speckle(out, count, 0, paper, speckle_rng);
  }
  if (do_binarize) out = binarize(out, threshold);
  if (do_jpeg) out = jpeg_blocks(out, quality);
  return out;
}

}  // namespace ocrt::train
