// Scan simulation: every step on images from 1x1 up with extreme parameters (no crash, the
// stated sizes), each step's own invariant (binarize gives two values, area downsampling keeps
// the mean, JPEG at quality 100 is nearly lossless, specks land inside), every preset, the
// determinism of degrade() for a seed, and the validation of ScanOptions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "train/scan.h"

using namespace ocrt;
using namespace ocrt::train;

namespace {

// Light paper with dark strokes, drawn from a seed (as in test_augment.cpp).
GrayImage test_image(int64_t w, int64_t h, uint64_t seed = 1) {
  GrayImage img;
  img.width = w, img.height = h;
  img.pixels.resize((size_t)(w * h));
  SampleRng rng(seed);
  for (auto& p : img.pixels) p = (uint8_t)(rng.uniform() < 0.2 ? rng.integer(0, 60) : rng.integer(200, 255));
  return img;
}

double mean(const GrayImage& img) {
  double s = 0;
  for (uint8_t v : img.pixels) s += v;
  return s / (double)img.pixels.size();
}

void check_consistent(const GrayImage& img) {
  CHECK(img.width >= 1);
  CHECK(img.height >= 1);
  CHECK((int64_t)img.pixels.size() == img.width * img.height);
}

const std::vector<std::pair<int64_t, int64_t>> kSizes = {{1, 1}, {2, 2}, {9, 3}, {3, 9}, {40, 1}, {1, 40}, {300, 48}};

ScanOptions everything_on() {
  ScanOptions o;
  o.p_crop = o.p_margin = o.p_skew = o.p_curve = o.p_ink = o.p_paper = 1;
  o.p_blur = o.p_lowres = o.p_noise = o.p_speckle = o.p_binarize = o.p_jpeg = 1;
  o.max_crop = 0.3, o.max_margin = 4, o.max_skew_deg = 10, o.max_curve = 0.5, o.max_ink = 0.2;
  o.max_shade = 255, o.max_blur = 0.2, o.min_lowres_height = 4, o.max_noise = 64, o.max_speckle = 0.05;
  return o;
}

}  // namespace

TEST_CASE("crop_rows keeps the rows between the cuts", "[scan]") {
  const GrayImage img = test_image(5, 6);
  const GrayImage out = crop_rows(img, 2, 1);
  REQUIRE(out.height == 3);
  REQUIRE(out.width == 5);
  for (int64_t y = 0; y < 3; ++y)
    for (int64_t x = 0; x < 5; ++x) CHECK(out.at(x, y) == img.at(x, y + 2));
  CHECK(crop_rows(img, 0, 0).pixels == img.pixels);
  CHECK_THROWS_WITH(crop_rows(img, 3, 3), Catch::Contains("cannot cut"));
  CHECK_THROWS_WITH(crop_rows(img, -1, 0), Catch::Contains("cannot cut"));
  CHECK_THROWS_WITH(crop_rows(test_image(1, 1), 0, 1), Catch::Contains("cannot cut"));
}

TEST_CASE("curve_baseline: a copy at amplitude 0, taller by twice the amplitude, columns shifted", "[scan]") {
  const GrayImage img = test_image(30, 10);
  CHECK(curve_baseline(img, 0, 50, 1, 255).pixels == img.pixels);
  const GrayImage out = curve_baseline(img, 2.5, 60, 0, 255);
  CHECK(out.width == 30);
  CHECK(out.height == 10 + 2 * 3);
  // Column 0 has shift sin(0) = 0: the image sits 3 rows down, paper above and below.
  for (int64_t y = 0; y < 10; ++y) CHECK(out.at(0, y + 3) == img.at(0, y));
  for (int64_t y : {0, 1, 2, 13, 14, 15}) CHECK(out.at(0, y) == 255);
  // A whole period at amplitude 1: each column's ink moved, none lost (sums of darkness agree
  // within the bilinear rounding).
  for (auto [w, h] : kSizes) {
    const GrayImage t = test_image(w, h, 3);
    for (double a : {-1e9, -3.0, 0.4, 7.0, 1e9}) check_consistent(curve_baseline(t, a, 1e-3, 2, 255));
  }
  CHECK_THROWS_WITH(curve_baseline(img, 1, 0, 0, 255), Catch::Contains("period must be > 0"));
  CHECK_THROWS_WITH(curve_baseline(img, std::nan(""), 10, 0, 255), Catch::Contains("amplitude must be finite"));
}

TEST_CASE("shade_paper darkens, never brightens, and is a copy at shade 0", "[scan]") {
  const GrayImage img = test_image(50, 20);
  CHECK(shade_paper(img, 0, 1, 0.5, 0.5).pixels == img.pixels);
  const GrayImage out = shade_paper(img, 200, 0.3, 0.2, 0.5);
  REQUIRE(out.pixels.size() == img.pixels.size());
  bool darker = false;
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    CHECK(out.pixels[i] <= img.pixels[i]);
    darker = darker || out.pixels[i] < img.pixels[i];
  }
  CHECK(darker);
  for (auto [w, h] : kSizes) check_consistent(shade_paper(test_image(w, h), 255, 10, -5, 7));
  CHECK_THROWS_WITH(shade_paper(img, 256, 0, 0, 0), Catch::Contains("shade must be in [0, 255]"));
  CHECK_THROWS_WITH(shade_paper(img, 10, INFINITY, 0, 0), Catch::Contains("angle must be finite"));
}

TEST_CASE("the lower scan resolution (resize_to_height) keeps the aspect ratio and the mean", "[scan]") {
  const GrayImage img = test_image(300, 48);
  const GrayImage out = resize_to_height(img, 16);
  CHECK(out.height == 16);
  CHECK(out.width == 100);
  // An area average over whole pixels: every output pixel is a weighted mean of its sources,
  // so the image mean is kept up to the rounding of each output pixel to an integer (0.5).
  CHECK(std::abs(mean(out) - mean(img)) <= 0.5);
  // A factor that does not divide the size still keeps the mean within the rounding.
  const GrayImage odd = resize_to_height(img, 13);
  CHECK(odd.height == 13);
  CHECK(std::abs(mean(odd) - mean(img)) <= 0.5 + 1e-9);
  // Upward works too (bilinear), keeping the aspect ratio.
  const GrayImage up = resize_to_height(test_image(2, 1), 3);
  CHECK(up.width == 6);
  for (auto [w, h] : kSizes)
    for (int64_t t : {1, 2, 5}) check_consistent(resize_to_height(test_image(w, h), t));
  CHECK_THROWS_WITH(resize_to_height(img, 0), Catch::Contains("height must be >= 1"));
}

TEST_CASE("speckle draws specks inside the image, in the two given values", "[scan]") {
  GrayImage flat;
  flat.width = 40, flat.height = 10;
  flat.pixels.assign(400, 128);
  SampleRng rng(5);
  const GrayImage out = speckle(flat, 30, 0, 255, rng);
  std::set<int> values(out.pixels.begin(), out.pixels.end());
  CHECK(values.count(0) == 1);
  CHECK(values.count(255) == 1);
  for (int v : values) CHECK((v == 0 || v == 128 || v == 255));
  for (auto [w, h] : kSizes) {
    SampleRng r(1);
    check_consistent(speckle(test_image(w, h), 1000, 0, 255, r));
  }
  CHECK(speckle(flat, 0, 0, 255, rng).pixels == flat.pixels);
  CHECK_THROWS_WITH(speckle(flat, -1, 0, 255, rng), Catch::Contains("count must be >= 0"));
}

TEST_CASE("binarize gives pure black and white, ink stays ink", "[scan]") {
  const GrayImage img = test_image(60, 20);
  const GrayImage out = binarize(img, 0.5);
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    CHECK((out.pixels[i] == 0 || out.pixels[i] == 255));
    if (img.pixels[i] <= 60) CHECK(out.pixels[i] == 0);     // ink (<= 60) is below any threshold
    if (img.pixels[i] >= 200) CHECK(out.pixels[i] == 255);  // paper (>= 200) is above it
  }
  GrayImage flat;
  flat.width = 3, flat.height = 2;
  flat.pixels.assign(6, 90);
  CHECK(binarize(flat, 0.5).pixels == std::vector<uint8_t>(6, 255));  // no contrast: all paper
  for (auto [w, h] : kSizes)
    for (double f : {0.0, 1.0}) check_consistent(binarize(test_image(w, h), f));
  CHECK_THROWS_WITH(binarize(img, 1.5), Catch::Contains("fraction must be in [0, 1]"));
}

TEST_CASE("jpeg_blocks: close at quality 100, blockier at 10, any size", "[scan]") {
  const GrayImage img = test_image(37, 19);
  const GrayImage fine = jpeg_blocks(img, 100), coarse = jpeg_blocks(img, 10);
  auto error = [&](const GrayImage& out) {
    double e = 0;
    for (size_t i = 0; i < img.pixels.size(); ++i) e += std::abs((double)out.pixels[i] - img.pixels[i]);
    return e / (double)img.pixels.size();
  };
  // Quality 100 quantises every coefficient with step 1: each is off by at most 0.5, and the
  // orthonormal inverse spreads that to at most 0.5 * 8 per pixel (the sum of 64 basis values
  // of magnitude <= 1/8 each); on average far less.
  CHECK(error(fine) < 1.5);
  CHECK(error(coarse) > error(fine));
  // A flat image is flat after any quality (only the DC term, quantised).
  GrayImage flat;
  flat.width = 16, flat.height = 8;
  flat.pixels.assign(128, 200);
  const GrayImage f = jpeg_blocks(flat, 5);
  CHECK(std::set<uint8_t>(f.pixels.begin(), f.pixels.end()).size() == 1);
  for (auto [w, h] : kSizes) check_consistent(jpeg_blocks(test_image(w, h), 1));
  CHECK_THROWS_WITH(jpeg_blocks(img, 0), Catch::Contains("quality must be in [1, 100]"));
  CHECK_THROWS_WITH(jpeg_blocks(img, 101), Catch::Contains("quality must be in [1, 100]"));
}

TEST_CASE("degrade: every size survives every step at its limit, and the result is a pure function of the seed", "[scan]") {
  const ScanOptions all = everything_on();
  for (auto [w, h] : kSizes)
    for (uint64_t seed = 0; seed < 6; ++seed) {
      INFO(w << "x" << h << " seed " << seed);
      SampleRng a(seed), b(seed);
      const GrayImage x = degrade(test_image(w, h), all, a), y = degrade(test_image(w, h), all, b);
      check_consistent(x);
      CHECK(x.pixels == y.pixels);
      CHECK(a.next() == b.next());
    }
  // Every preset runs on every size.
  for (const auto& name : ScanOptions::preset_names())
    for (auto [w, h] : kSizes) {
      SampleRng r(3);
      check_consistent(degrade(test_image(w, h), ScanOptions::preset(name), r));
    }
  // "none" is the identity.
  SampleRng r(1);
  const GrayImage img = test_image(100, 40);
  CHECK(degrade(img, ScanOptions::preset("none"), r).pixels == img.pixels);
  // The number of draws does not depend on the image or on which steps run.
  SampleRng p(9), q(9);
  degrade(test_image(1, 1), ScanOptions::preset("none"), p);
  degrade(test_image(300, 48), all, q);
  CHECK(p.next() == q.next());
}

TEST_CASE("degrade presets show their effect", "[scan]") {
  const GrayImage img = test_image(200, 40, 7);
  auto run = [&](const char* name, uint64_t seed = 1) {
    SampleRng r(seed);
    return degrade(img, ScanOptions::preset(name), r);
  };
  const GrayImage bin = run("binarized");
  CHECK(std::set<uint8_t>(bin.pixels.begin(), bin.pixels.end()).size() <= 2);
  CHECK(run("lowres").height < img.height);
  CHECK(run("crop").height < img.height);
  CHECK(run("warped").height > img.height);
  CHECK(run("jpeg").pixels != img.pixels);
  CHECK(run("speckle").pixels != img.pixels);
  CHECK(mean(run("paper")) < mean(img));
  CHECK_THROWS_WITH(ScanOptions::preset("photocopy"), Catch::Contains("unknown name 'photocopy'"));
}

TEST_CASE("ScanOptions::validate names the field that is out of range", "[scan]") {
  auto bad = [](auto change, const char* field) {
    ScanOptions o;
    change(o);
    CHECK_THROWS_WITH(o.validate(), Catch::Contains(field));
  };
  bad([](ScanOptions& o) { o.p_jpeg = 1.5; }, "p_jpeg");
  bad([](ScanOptions& o) { o.p_crop = -0.1; }, "p_crop");
  bad([](ScanOptions& o) { o.max_crop = 0.31; }, "max_crop");
  bad([](ScanOptions& o) { o.max_curve = std::nan(""); }, "max_curve");
  bad([](ScanOptions& o) { o.max_noise = 65; }, "max_noise");
  bad([](ScanOptions& o) { o.min_lowres_height = 3; }, "min_lowres_height");
  bad([](ScanOptions& o) { o.max_speckle = 0.06; }, "max_speckle");
  ScanOptions().validate();
  everything_on().validate();
  SampleRng r(1);
  GrayImage empty;
  CHECK_THROWS_WITH(degrade(empty, ScanOptions(), r), Catch::Contains("empty"));
}
