// Augmentations for training lines (see augment.h): blur, noise, contrast, rotation/shear,
// erosion/dilation and padding jitter, each written as a plain loop over 8-bit gray pixels.
//
// Every step is safe on any image size down to 1x1: kernels are clamped to the image, every
// pixel read is checked against the bounds (taps outside the image are left out, or read as
// the background when rotating), and parameters that are not finite are rejected before any
// allocation.
#include "train/augment.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace ocrt::train {

namespace {

constexpr double kPi = 3.14159265358979323846;

GrayImage blank(int64_t width, int64_t height, uint8_t value) {
  GrayImage out;
  out.width = width, out.height = height;
  out.pixels.assign((size_t)(width * height), value);
  return out;
}

}  // namespace

void check_image(const GrayImage& image, const char* op) {
  OCRT_CHECK(image.width > 0 && image.height > 0, op, ": the image is empty (", image.width, "x", image.height, ")");
  OCRT_CHECK((int64_t)image.pixels.size() == image.width * image.height, op, ": the image holds ",
             image.pixels.size(), " pixels, expected ", image.width, "x", image.height);
}

void check_finite(double v, const char* op, const char* name) {
  OCRT_CHECK(std::isfinite(v), op, ": ", name, " must be finite, got ", v);
}

uint8_t to_u8(double v) { return (uint8_t)std::clamp<long>(std::lround(v), 0, 255); }

void AugmentOptions::validate() const {
  auto prob = [](double p, const char* name) {
    OCRT_CHECK(p >= 0 && p <= 1, "augment options: ", name, " must be a probability in [0, 1], got ", p);
  };
  auto range = [](double v, double lo, double hi, const char* name) {
    OCRT_CHECK(v >= lo && v <= hi, "augment options: ", name, " must be in [", lo, ", ", hi, "], got ", v);
  };
  prob(p_blur, "p_blur");
  prob(p_noise, "p_noise");
  prob(p_contrast, "p_contrast");
  prob(p_geometry, "p_geometry");
  prob(p_morph, "p_morph");
  prob(p_pad, "p_pad");
  range(max_blur_sigma, 0, 50, "max_blur_sigma");
  range(max_noise, 0, 255, "max_noise");
  OCRT_CHECK(contrast >= 0 && contrast < 1, "augment options: contrast must be in [0, 1) (the factor 1 - contrast ",
             "must stay positive), got ", contrast);
  range(brightness, 0, 255, "brightness");
  range(max_rotate_deg, 0, 45, "max_rotate_deg");
  range(max_shear, 0, 1, "max_shear");
  OCRT_CHECK(morph_kernel >= 1 && morph_kernel <= 5, "augment options: morph_kernel must be in [1, 5], got ",
             morph_kernel);
  OCRT_CHECK(max_pad >= 0 && max_pad <= 1000, "augment options: max_pad must be in [0, 1000], got ", max_pad);
}

uint8_t paper_value(const GrayImage& image) {
  check_image(image, "paper_value");
  // Each border pixel once: top and bottom rows, then the left and right columns between them.
  std::vector<uint8_t> border;
  const int64_t w = image.width, h = image.height;
  for (int64_t x = 0; x < w; ++x) {
    border.push_back(image.at(x, 0));
    if (h > 1) border.push_back(image.at(x, h - 1));
  }
  for (int64_t y = 1; y + 1 < h; ++y) {
    border.push_back(image.at(0, y));
    if (w > 1) border.push_back(image.at(w - 1, y));
  }
  const size_t mid = border.size() / 2;
  std::nth_element(border.begin(), border.begin() + (std::ptrdiff_t)mid, border.end());
  return border[mid];
}

GrayImage add_noise(const GrayImage& image, double stddev, SampleRng& rng) {
  check_image(image, "add_noise");
  check_finite(stddev, "add_noise", "stddev");
  OCRT_CHECK(stddev >= 0, "add_noise: stddev must be >= 0, got ", stddev);
  if (stddev == 0) return image;
  GrayImage out = image;
  double z[256];  // normals in chunks: a quarter of the generator calls of one normal() a pixel
  for (size_t i = 0; i < out.pixels.size(); i += 256) {
    const size_t n = std::min<size_t>(256, out.pixels.size() - i);
    rng.normals(z, n);
    for (size_t k = 0; k < n; ++k) out.pixels[i + k] = to_u8(out.pixels[i + k] + stddev * z[k]);
  }
  return out;
}

GrayImage adjust_contrast(const GrayImage& image, double contrast, double brightness) {
  check_image(image, "adjust_contrast");
  check_finite(contrast, "adjust_contrast", "contrast");
  check_finite(brightness, "adjust_contrast", "brightness");
  OCRT_CHECK(contrast >= 0, "adjust_contrast: contrast must be >= 0 (a negative factor inverts), got ", contrast);
  // Stretching about the mean keeps the line's overall tone, so paper and ink move apart (or
  // together) instead of the whole line drifting to black or white.
  double mean = 0;
  for (uint8_t p : image.pixels) mean += p;
  mean /= (double)image.pixels.size();
  GrayImage out = image;
  for (uint8_t& p : out.pixels) p = to_u8((p - mean) * contrast + mean + brightness);
  return out;
}

// Forward map about the centre c: p' = R S (p - c) with S = [[1, shear], [0, 1]] and R the
// rotation. With y pointing down, a counter-clockwise turn on screen is
// R = [[cos, sin], [-sin, cos]]. det(R S) = 1, so the inverse always exists:
// (R S)^-1 = S^-1 R^-1 = [[1, -shear], [0, 1]] [[cos, -sin], [sin, cos]].
// Each output pixel centre is mapped back into the source and sampled bilinearly; a
// neighbour outside the source reads as the background.
GrayImage rotate_shear(const GrayImage& image, double degrees, double shear, uint8_t background) {
  check_image(image, "rotate_shear");
  check_finite(degrees, "rotate_shear", "degrees");
  check_finite(shear, "rotate_shear", "shear");
  OCRT_CHECK(std::abs(degrees) <= 90, "rotate_shear: |degrees| must be <= 90, got ", degrees);
  OCRT_CHECK(std::abs(shear) <= 2, "rotate_shear: |shear| must be <= 2, got ", shear);
  if (degrees == 0 && shear == 0) return image;
  const double a = degrees * kPi / 180, c = std::cos(a), s = std::sin(a);
  const double w = (double)image.width, h = (double)image.height;
  // Forward matrix M = R S.
  const double m00 = c, m01 = c * shear + s, m10 = -s, m11 = -s * shear + c;
  // Bounding box of the transformed corners (relative to the centre).
  double min_x = 0, max_x = 0, min_y = 0, max_y = 0;
  for (double cx : {-w / 2, w / 2})
    for (double cy : {-h / 2, h / 2}) {
      const double x = m00 * cx + m01 * cy, y = m10 * cx + m11 * cy;
      min_x = std::min(min_x, x), max_x = std::max(max_x, x);
      min_y = std::min(min_y, y), max_y = std::max(max_y, y);
    }
  // The small slack keeps a rounding error (cos(tiny) * w = w + 1e-13) from adding a column.
  const int64_t out_w = std::max<int64_t>(1, (int64_t)std::ceil(max_x - min_x - 1e-6));
  const int64_t out_h = std::max<int64_t>(1, (int64_t)std::ceil(max_y - min_y - 1e-6));
  // Inverse matrix S^-1 R^-1, multiplied out.
  const double i00 = c - shear * s, i01 = -s - shear * c, i10 = s, i11 = c;
  GrayImage out = blank(out_w, out_h, background);
  const int64_t sw = image.width, sh = image.height;
  auto read = [&](int64_t x, int64_t y) -> double {
    return (x >= 0 && x < sw && y >= 0 && y < sh) ? image.at(x, y) : background;
  };
  for (int64_t oy = 0; oy < out_h; ++oy)
    for (int64_t ox = 0; ox < out_w; ++ox) {
      const double qx = ox + 0.5 - out_w / 2.0, qy = oy + 0.5 - out_h / 2.0;
      // Source position in pixel-index coordinates (pixel (i, j) has its centre at i + 0.5).
      const double px = i00 * qx + i01 * qy + w / 2 - 0.5, py = i10 * qx + i11 * qy + h / 2 - 0.5;
      if (px <= -1 || py <= -1 || px >= sw || py >= sh) continue;  // no neighbour inside: background
      const double fx = std::floor(px), fy = std::floor(py);
      const double ax = px - fx, ay = py - fy;
      const int64_t x0 = (int64_t)fx, y0 = (int64_t)fy;
      const double v = (1 - ay) * ((1 - ax) * read(x0, y0) + ax * read(x0 + 1, y0)) +
                       ay * ((1 - ax) * read(x0, y0 + 1) + ax * read(x0 + 1, y0 + 1));
      out.pixels[(size_t)(oy * out_w + ox)] = to_u8(v);
    }
  return out;
}

// A min (erode) or max (dilate) filter over a kx x ky window, done as a row pass then a column
// pass (the extreme over a rectangle is the extreme of the row extremes). The window covers
// offsets -(k-1)/2 .. k/2, so an even kernel leans right/down by one pixel.
GrayImage morph(const GrayImage& image, bool erode, int64_t kernel) {
  check_image(image, "morph");
  OCRT_CHECK(kernel >= 1, "morph: kernel must be >= 1, got ", kernel);
  const int64_t w = image.width, h = image.height;
  const int64_t kx = std::min(kernel, w), ky = std::min(kernel, h);
  auto pick = [erode](uint8_t a, uint8_t b) { return erode ? std::min(a, b) : std::max(a, b); };
  GrayImage rows = image;
  if (kx > 1)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        uint8_t v = image.at(x, y);
        for (int64_t k = -(kx - 1) / 2; k <= kx / 2; ++k)
          if (x + k >= 0 && x + k < w) v = pick(v, image.at(x + k, y));
        rows.pixels[(size_t)(y * w + x)] = v;
      }
  GrayImage out = rows;
  if (ky > 1)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        uint8_t v = rows.at(x, y);
        for (int64_t k = -(ky - 1) / 2; k <= ky / 2; ++k)
          if (y + k >= 0 && y + k < h) v = pick(v, rows.at(x, y + k));
        out.pixels[(size_t)(y * w + x)] = v;
      }
  return out;
}

GrayImage pad(const GrayImage& image, int64_t left, int64_t right, int64_t top, int64_t bottom, uint8_t background) {
  check_image(image, "pad");
  const int64_t limit = 100000;
  const int64_t amounts[4] = {left, right, top, bottom};
  const char* names[4] = {"left", "right", "top", "bottom"};
  for (int i = 0; i < 4; ++i)
    OCRT_CHECK(amounts[i] >= 0 && amounts[i] <= limit, "pad: ", names[i], " must be in [0, ", limit, "], got ", amounts[i]);
  GrayImage out = blank(image.width + left + right, image.height + top + bottom, background);
  for (int64_t y = 0; y < image.height; ++y)
    std::copy_n(image.pixels.begin() + (std::ptrdiff_t)(y * image.width), image.width,
                out.pixels.begin() + (std::ptrdiff_t)((y + top) * out.width + left));
  return out;
}

GrayImage augment(const GrayImage& image, const AugmentOptions& opt, SampleRng& rng) {
  check_image(image, "augment");
  opt.validate();
  // Draw everything first, in a fixed order and count, so that one step's probability or
  // parameters never shift the random numbers another step sees.
  const bool do_pad = rng.uniform() < opt.p_pad;
  int64_t pads[4];
  for (int64_t& p : pads) p = rng.integer(0, opt.max_pad);
  const bool do_geometry = rng.uniform() < opt.p_geometry;
  const double degrees = rng.uniform(-opt.max_rotate_deg, opt.max_rotate_deg);
  const double shear = rng.uniform(-opt.max_shear, opt.max_shear);
  const bool do_morph = rng.uniform() < opt.p_morph;
  const bool erode = rng.uniform() < 0.5;
  const bool do_blur = rng.uniform() < opt.p_blur;
  const double sigma = rng.uniform(std::min(0.3, opt.max_blur_sigma), opt.max_blur_sigma);
  const bool do_contrast = rng.uniform() < opt.p_contrast;
  const double contrast = rng.uniform(1 - opt.contrast, 1 + opt.contrast);
  const double brightness = rng.uniform(-opt.brightness, opt.brightness);
  const bool do_noise = rng.uniform() < opt.p_noise;
  const double stddev = rng.uniform(std::min(2.0, opt.max_noise), opt.max_noise);
  SampleRng noise_rng(rng.next());  // per-pixel draws come from their own stream

  // The paper value is taken once, from the input, so padding and rotation fill with the
  // same tone.
  const uint8_t paper = paper_value(image);
  GrayImage out = image;
  if (do_pad) out = pad(out, pads[0], pads[1], pads[2], pads[3], paper);
  if (do_geometry) out = rotate_shear(out, degrees, shear, paper);
  if (do_morph) out = morph(out, erode, opt.morph_kernel);
  if (do_blur) out = gaussian_blur(out, sigma);
  if (do_contrast) out = adjust_contrast(out, contrast, brightness);
  if (do_noise) out = add_noise(out, stddev, noise_rng);
  return out;
}

}  // namespace ocrt::train
