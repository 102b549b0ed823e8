// Augmentation properties on images from 1x1 to 32x200 with extreme parameters: no crash, the
// stated output sizes, the invariants of each step (a blur stays within the input's range, an
// erosion never brightens, padding keeps the original inside), determinism for a seed, and
// the validation of AugmentOptions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "train/augment.h"

using namespace ocrt;
using namespace ocrt::train;

namespace {

// A line-like test image: light paper (230..255) with dark ink strokes, drawn from a seed.
GrayImage test_image(int64_t w, int64_t h, uint64_t seed = 1) {
  GrayImage img;
  img.width = w, img.height = h;
  img.pixels.resize((size_t)(w * h));
  SampleRng rng(seed);
  for (auto& p : img.pixels) p = (uint8_t)(rng.uniform() < 0.2 ? rng.integer(0, 60) : rng.integer(230, 255));
  return img;
}

GrayImage constant(int64_t w, int64_t h, uint8_t v) {
  GrayImage img;
  img.width = w, img.height = h;
  img.pixels.assign((size_t)(w * h), v);
  return img;
}

bool same(const GrayImage& a, const GrayImage& b) {
  return a.width == b.width && a.height == b.height && a.pixels == b.pixels;
}

void check_shape(const GrayImage& img, int64_t w, int64_t h) {
  CHECK(img.width == w);
  CHECK(img.height == h);
  CHECK((int64_t)img.pixels.size() == img.width * img.height);
}

const std::vector<std::pair<int64_t, int64_t>> kSizes = {{1, 1}, {2, 2}, {7, 3}, {3, 7}, {32, 1}, {1, 32}, {32, 200}, {200, 32}};

// Every option at its limit, every step always on (pads kept moderate so the huge blur stays quick).
AugmentOptions extreme_options() {
  AugmentOptions o;
  o.p_blur = o.p_noise = o.p_contrast = o.p_geometry = o.p_morph = o.p_pad = 1;
  o.max_blur_sigma = 50, o.max_noise = 255, o.contrast = 0.999, o.brightness = 255;
  o.max_rotate_deg = 45, o.max_shear = 1, o.morph_kernel = 5, o.max_pad = 20;
  return o;
}

}  // namespace

TEST_CASE("gaussian_blur: same size, stays within the input's range, any sigma", "[augment]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (auto [w, h] : kSizes) {
    const GrayImage img = test_image(w, h);
    const auto [lo, hi] = std::minmax_element(img.pixels.begin(), img.pixels.end());
    for (double sigma : {0.3, 1.2, 5.0, 1e6, 1e300, inf}) {
      const GrayImage out = gaussian_blur(img, sigma);
      check_shape(out, w, h);
      for (uint8_t p : out.pixels) {
        CHECK(p >= *lo);
        CHECK(p <= *hi);
      }
    }
    CHECK(same(gaussian_blur(img, 0), img));
    CHECK(same(gaussian_blur(img, -3), img));
    CHECK(same(gaussian_blur(constant(w, h, 77), 2.5), constant(w, h, 77)));
  }
  // A huge sigma is a box average over the (clamped) kernel: a 1x3 row [0, 0, 255] blurs to
  // its mean in every pixel, 85.
  GrayImage row = constant(3, 1, 0);
  row.pixels[2] = 255;
  CHECK(same(gaussian_blur(row, 1e9), constant(3, 1, 85)));
  CHECK_THROWS_WITH(gaussian_blur(row, std::nan("")), Catch::Contains("sigma is NaN"));
}

TEST_CASE("gaussian_blur equals the separable blur pixel by pixel, tall images and small ones", "[augment]") {
  // A plain reference: each pixel's row pass and column pass over the taps inside the image,
  // renormalised. The blur keeps only the rows its column pass still needs (a ring of 2 ry + 1);
  // a row taken from the wrong slot would be off by far more than the one level of rounding
  // (the two may add in other orders: fused or not).
  auto reference = [](const GrayImage& img, double sigma) {
    const int64_t w = img.width, h = img.height;
    const int64_t rx = (int64_t)std::min(std::ceil(3 * sigma), (double)(w - 1));
    const int64_t ry = (int64_t)std::min(std::ceil(3 * sigma), (double)(h - 1));
    auto tap = [&](int64_t k) {
      const double t = (double)k / sigma;
      return std::exp(-0.5 * t * t);
    };
    std::vector<double> rows((size_t)(w * h));
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        double sum = 0, norm = 0;
        for (int64_t k = -rx; k <= rx; ++k)
          if (x + k >= 0 && x + k < w) sum += tap(k) * img.at(x + k, y), norm += tap(k);
        rows[(size_t)(y * w + x)] = sum / norm;
      }
    std::vector<int> out((size_t)(w * h));
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        double sum = 0, norm = 0;
        for (int64_t k = -ry; k <= ry; ++k)
          if (y + k >= 0 && y + k < h) sum += tap(k) * rows[(size_t)((y + k) * w + x)], norm += tap(k);
        out[(size_t)(y * w + x)] = (int)to_pixel(sum / norm);
      }
    return out;
  };
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> pixel(0, 255);
  for (auto [w, h] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {5, 40}, {40, 5}, {37, 61}, {120, 9}})
    for (double sigma : {0.5, 0.75, 1.7, 4.0, 30.0}) {
      INFO(w << "x" << h << " sigma " << sigma);
      GrayImage img;
      img.width = w, img.height = h;
      img.pixels.resize((size_t)(w * h));
      for (auto& p : img.pixels) p = (uint8_t)pixel(rng);
      const GrayImage got = gaussian_blur(img, sigma);
      const std::vector<int> want = reference(img, sigma);
      int worst = 0;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs((int)got.pixels[i] - want[i]));
      CHECK(worst <= 1);
    }
}

TEST_CASE("add_noise: same size, deterministic per seed, saturates at huge stddev", "[augment]") {
  for (auto [w, h] : kSizes) {
    const GrayImage img = test_image(w, h);
    SampleRng a(5), b(5);
    const GrayImage na = add_noise(img, 10, a), nb = add_noise(img, 10, b);
    check_shape(na, w, h);
    CHECK(same(na, nb));
    SampleRng z(5);
    CHECK(same(add_noise(img, 0, z), img));
    SampleRng big(9);
    for (uint8_t p : add_noise(img, 1e9, big).pixels) CHECK((p == 0 || p == 255));
  }
  const GrayImage img = test_image(32, 200);
  SampleRng a(1), b(2);
  CHECK(!same(add_noise(img, 8, a), add_noise(img, 8, b)));
  SampleRng r(1);
  CHECK_THROWS_WITH(add_noise(img, -1, r), Catch::Contains("stddev must be >= 0"));
  CHECK_THROWS_WITH(add_noise(img, std::numeric_limits<double>::infinity(), r), Catch::Contains("must be finite"));
}

TEST_CASE("adjust_contrast: identity at 1 and 0, flat at contrast 0, clamped to 0..255", "[augment]") {
  for (auto [w, h] : kSizes) {
    const GrayImage img = test_image(w, h);
    CHECK(same(adjust_contrast(img, 1, 0), img));
    const GrayImage flat = adjust_contrast(img, 0, 0);
    check_shape(flat, w, h);
    CHECK(std::all_of(flat.pixels.begin(), flat.pixels.end(), [&](uint8_t p) { return p == flat.pixels[0]; }));
    CHECK(same(adjust_contrast(img, 1, 1000), constant(w, h, 255)));
    CHECK(same(adjust_contrast(img, 1, -1000), constant(w, h, 0)));
    check_shape(adjust_contrast(img, 1e6, 0), w, h);
  }
  CHECK_THROWS_WITH(adjust_contrast(test_image(4, 4), -0.5, 0), Catch::Contains("contrast must be >= 0"));
  CHECK_THROWS_WITH(adjust_contrast(test_image(4, 4), 1, std::nan("")), Catch::Contains("brightness must be finite"));
}

TEST_CASE("rotate_shear: exact copy at 0, grows to the bounding box, reads stay in bounds", "[augment]") {
  for (auto [w, h] : kSizes) {
    const GrayImage img = test_image(w, h);
    CHECK(same(rotate_shear(img, 0, 0, 255), img));
    for (double deg : {-90.0, -45.0, -1.5, 0.0, 1e-9, 1.5, 45.0, 90.0})
      for (double shear : {-2.0, -0.25, 0.0, 0.25, 2.0}) {
        const GrayImage out = rotate_shear(img, deg, shear, 255);
        REQUIRE((int64_t)out.pixels.size() == out.width * out.height);
        CHECK(out.width >= 1);
        CHECK(out.height >= 1);
        // The canvas never exceeds the transformed bounding box (|M| entries are at most 3).
        CHECK(out.width <= 3 * (w + h) + 1);
        CHECK(out.height <= 3 * (w + h) + 1);
        // A constant image on the same background stays constant: every sample is either an
        // in-bounds pixel or the background, never garbage.
        const GrayImage flat = rotate_shear(constant(w, h, 200), deg, shear, 200);
        CHECK(std::all_of(flat.pixels.begin(), flat.pixels.end(), [](uint8_t p) { return p == 200; }));
      }
    // A quarter turn swaps the sides; a tiny angle adds no row or column.
    check_shape(rotate_shear(img, 90, 0, 255), h, w);
    check_shape(rotate_shear(img, 1e-9, 0, 255), w, h);
  }
  // Counter-clockwise on screen: a dot at the right end of the middle row goes to the top.
  GrayImage dot = constant(5, 3, 255);
  dot.pixels[1 * 5 + 4] = 0;
  const GrayImage turned = rotate_shear(dot, 90, 0, 255);
  check_shape(turned, 3, 5);
  CHECK(turned.at(1, 0) == 0);
  CHECK(std::count(turned.pixels.begin(), turned.pixels.end(), 0) == 1);
  // A horizontal shear of a 1-wide column moves its rows sideways and widens the canvas.
  check_shape(rotate_shear(constant(1, 10, 0), 0, 1, 255), 11, 10);
  const GrayImage img = test_image(8, 8);
  CHECK_THROWS_WITH(rotate_shear(img, 91, 0, 255), Catch::Contains("|degrees| must be <= 90"));
  CHECK_THROWS_WITH(rotate_shear(img, 0, 2.5, 255), Catch::Contains("|shear| must be <= 2"));
  CHECK_THROWS_WITH(rotate_shear(img, std::nan(""), 0, 255), Catch::Contains("degrees must be finite"));
}

TEST_CASE("morph: same size, erosion darkens, dilation brightens, kernel clamped", "[augment]") {
  for (auto [w, h] : kSizes) {
    const GrayImage img = test_image(w, h);
    CHECK(same(morph(img, true, 1), img));
    CHECK(same(morph(img, false, 1), img));
    for (int64_t k : {2, 3, 5, 1000}) {
      const GrayImage e = morph(img, true, k), d = morph(img, false, k);
      check_shape(e, w, h);
      check_shape(d, w, h);
      for (size_t i = 0; i < img.pixels.size(); ++i) {
        CHECK(e.pixels[i] <= img.pixels[i]);
        CHECK(d.pixels[i] >= img.pixels[i]);
      }
    }
  }
  // One ink dot grows to the 3x3 window under erosion (clipped at the image edge)...
  GrayImage dot = constant(5, 4, 255);
  dot.pixels[1 * 5 + 1] = 0;
  const GrayImage grown = morph(dot, true, 3);
  CHECK(std::count(grown.pixels.begin(), grown.pixels.end(), 0) == 9);
  // ...and vanishes under dilation.
  CHECK(same(morph(dot, false, 2), constant(5, 4, 255)));
  // A kernel wider than the image covers the whole of a 1x3 row from its middle pixel.
  GrayImage row = constant(3, 1, 255);
  row.pixels[0] = 10;
  CHECK(morph(row, true, 1000).pixels[1] == 10);
  CHECK_THROWS_WITH(morph(dot, true, 0), Catch::Contains("kernel must be >= 1"));
}

TEST_CASE("pad: sizes add up, the original sits inside the background", "[augment]") {
  for (auto [w, h] : kSizes) {
    const GrayImage img = test_image(w, h);
    CHECK(same(pad(img, 0, 0, 0, 0, 255), img));
    const GrayImage out = pad(img, 3, 1, 0, 2, 250);
    check_shape(out, w + 4, h + 2);
    for (int64_t y = 0; y < out.height; ++y)
      for (int64_t x = 0; x < out.width; ++x) {
        const bool inside = x >= 3 && x < 3 + w && y < h;
        CHECK(out.at(x, y) == (inside ? img.at(x - 3, y) : 250));
      }
    check_shape(pad(img, 1000, 1000, 1000, 0, 0), w + 2000, h + 1000);
  }
  const GrayImage img = test_image(4, 4);
  CHECK_THROWS_WITH(pad(img, -1, 0, 0, 0, 255), Catch::Contains("pad: left must be in [0, 100000], got -1"));
  CHECK_THROWS_WITH(pad(img, 0, 0, 0, 100001, 255), Catch::Contains("bottom"));
}

TEST_CASE("paper_value: the median of the border, for dark-on-light and light-on-dark", "[augment]") {
  CHECK(paper_value(constant(1, 1, 42)) == 42);
  GrayImage line = constant(40, 12, 240);
  for (int64_t x = 5; x < 35; ++x) line.pixels[(size_t)(6 * 40 + x)] = 0;  // ink inside
  line.pixels[0] = 0;                                                     // a speck on the border
  CHECK(paper_value(line) == 240);
  GrayImage inverted = constant(40, 12, 20);
  inverted.pixels[(size_t)(6 * 40 + 10)] = 255;
  CHECK(paper_value(inverted) == 20);
  for (auto [w, h] : kSizes) CHECK_NOTHROW(paper_value(test_image(w, h)));
}

TEST_CASE("augment: every size survives every step at its limit, output is a function of the seed", "[augment]") {
  const AugmentOptions extreme = extreme_options();
  for (auto [w, h] : kSizes) {
    const GrayImage img = test_image(w, h);
    for (uint64_t seed : {1u, 2u, 3u, 99u}) {
      SampleRng a(seed), b(seed);
      const GrayImage oa = augment(img, extreme, a), ob = augment(img, extreme, b);
      REQUIRE((int64_t)oa.pixels.size() == oa.width * oa.height);
      CHECK(oa.width >= 1);  // (shear and rotation keep the area, not each side)
      CHECK(oa.height >= 1);
      CHECK(same(oa, ob));
      SampleRng c(seed), d(seed);
      CHECK(same(augment(img, AugmentOptions{}, c), augment(img, AugmentOptions{}, d)));
    }
  }
  // Different seeds give different lines when every step runs.
  const GrayImage img = test_image(32, 200);
  AugmentOptions always;
  always.p_blur = always.p_noise = always.p_contrast = always.p_geometry = always.p_morph = always.p_pad = 1;
  SampleRng s1(1), s2(2);
  CHECK(!same(augment(img, always, s1), augment(img, always, s2)));
  // With every probability 0 the line is untouched.
  AugmentOptions never;
  never.p_blur = never.p_noise = never.p_contrast = never.p_geometry = never.p_morph = never.p_pad = 0;
  SampleRng s3(3);
  CHECK(same(augment(img, never, s3), img));
}

TEST_CASE("augment: takes the same number of draws whatever the image and options", "[augment]") {
  SampleRng a(17), b(17), c(17);
  augment(test_image(1, 1), AugmentOptions{}, a);
  augment(test_image(32, 200), extreme_options(), b);
  AugmentOptions never;
  never.p_blur = never.p_noise = never.p_contrast = never.p_geometry = never.p_morph = never.p_pad = 0;
  augment(test_image(7, 3), never, c);
  const uint64_t next = a.next();
  CHECK(b.next() == next);
  CHECK(c.next() == next);
}

TEST_CASE("augment: rejects empty images and bad options, naming the field", "[augment]") {
  SampleRng rng(1);
  GrayImage empty;
  CHECK_THROWS_WITH(augment(empty, AugmentOptions{}, rng), Catch::Contains("the image is empty (0x0)"));
  GrayImage wrong = test_image(4, 4);
  wrong.pixels.pop_back();
  CHECK_THROWS_WITH(augment(wrong, AugmentOptions{}, rng), Catch::Contains("holds 15 pixels, expected 4x4"));
  CHECK_NOTHROW(AugmentOptions{}.validate());
  CHECK_NOTHROW(extreme_options().validate());

  auto bad = [](auto set, const char* field) {
    AugmentOptions o;
    set(o);
    CHECK_THROWS_WITH(o.validate(), Catch::Contains(field));
    SampleRng r(1);
    CHECK_THROWS_WITH(augment(test_image(8, 8), o, r), Catch::Contains(field));
  };
  bad([](AugmentOptions& o) { o.p_blur = -0.1; }, "p_blur");
  bad([](AugmentOptions& o) { o.p_noise = 1.5; }, "p_noise");
  bad([](AugmentOptions& o) { o.p_contrast = std::nan(""); }, "p_contrast");
  bad([](AugmentOptions& o) { o.p_geometry = 2; }, "p_geometry");
  bad([](AugmentOptions& o) { o.p_morph = -1; }, "p_morph");
  bad([](AugmentOptions& o) { o.p_pad = 1.01; }, "p_pad");
  bad([](AugmentOptions& o) { o.max_blur_sigma = -1; }, "max_blur_sigma");
  bad([](AugmentOptions& o) { o.max_noise = std::numeric_limits<double>::infinity(); }, "max_noise");
  bad([](AugmentOptions& o) { o.contrast = 1; }, "contrast");
  bad([](AugmentOptions& o) { o.brightness = -5; }, "brightness");
  bad([](AugmentOptions& o) { o.max_rotate_deg = 46; }, "max_rotate_deg");
  bad([](AugmentOptions& o) { o.max_shear = 1.5; }, "max_shear");
  bad([](AugmentOptions& o) { o.morph_kernel = 0; }, "morph_kernel");
  bad([](AugmentOptions& o) { o.max_pad = -1; }, "max_pad");
}

TEST_CASE("gaussian_blur equals the per-pixel definition, bit for bit", "[augment]") {
  // The plain loop: each output pixel sums its taps inside the image (k ascending) and divides
  // by their sum, rows first, then columns. The library's loops reorder only which pixel is
  // worked on, never the additions of one pixel, so the results agree exactly.
  auto naive = [](const GrayImage& img, double sigma) {
    const int64_t w = img.width, h = img.height;
    const int64_t rx = (int64_t)std::min(std::ceil(3 * sigma), (double)(w - 1));
    const int64_t ry = (int64_t)std::min(std::ceil(3 * sigma), (double)(h - 1));
    auto tap = [&](int64_t k) { const double t = (double)k / sigma; return std::exp(-0.5 * t * t); };
    std::vector<double> rows((size_t)(w * h));
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        double s = 0, n = 0;
        for (int64_t k = std::max(-rx, -x); k <= std::min(rx, w - 1 - x); ++k) s += tap(k) * img.at(x + k, y), n += tap(k);
        rows[(size_t)(y * w + x)] = s / n;
      }
    GrayImage out = img;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        double s = 0, n = 0;
        for (int64_t k = std::max(-ry, -y); k <= std::min(ry, h - 1 - y); ++k)
          s += tap(k) * rows[(size_t)((y + k) * w + x)], n += tap(k);
        out.pixels[(size_t)(y * w + x)] = (uint8_t)std::clamp<long>(std::lround(s / n), 0, 255);
      }
    return out;
  };
  for (auto [w, h] : kSizes)
    for (double sigma : {0.3, 1.0, 2.7, 9.0}) {
      INFO(w << "x" << h << " sigma " << sigma);
      const GrayImage img = test_image(w, h, 11);
      CHECK(gaussian_blur(img, sigma).pixels == naive(img, sigma).pixels);
    }
}
