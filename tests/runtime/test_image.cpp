// Image decoding and preprocessing: every pixel format (gray, gray+alpha, RGB, RGBA, 16-bit,
// JPEG, BMP) to BT.601 gray with alpha over white; every bad file (missing, empty, corrupt,
// truncated, a directory); resizing rules; batch packing with white padding and normalisation.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "runtime/image.h"
#include "runtime/stb.h"

using namespace ocrt;
namespace fs = std::filesystem;

namespace {

std::string temp(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("ocrt_test_image_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

// Writes raw 8-bit samples with `channels` per pixel as a PNG through stb_image_write.
std::string write_png(const std::string& name, int w, int h, int channels, const std::vector<uint8_t>& samples) {
  const std::string path = temp(name);
  REQUIRE(stbi_write_png(path.c_str(), w, h, channels, samples.data(), w * channels));
  return path;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("images decode to BT.601 gray, alpha over white", "[image]") {
  // Gray, gray+alpha, RGB, RGBA: one 2x1 image each.
  GrayImage g = load_gray_image(write_png("g.png", 2, 1, 1, {0, 200}));
  CHECK(g.width == 2);
  CHECK(g.height == 1);
  CHECK(g.pixels == std::vector<uint8_t>{0, 200});
  GrayImage ga = load_gray_image(write_png("ga.png", 2, 1, 2, {0, 255, 0, 0}));  // opaque black, transparent black
  CHECK(ga.pixels == std::vector<uint8_t>{0, 255});
  GrayImage rgb = load_gray_image(write_png("rgb.png", 2, 1, 3, {255, 0, 0, 10, 20, 30}));
  CHECK((int)rgb.pixels[0] == (int)std::lround(0.299 * 255));
  CHECK((int)rgb.pixels[1] == (int)std::lround(0.299 * 10 + 0.587 * 20 + 0.114 * 30));
  GrayImage rgba = load_gray_image(write_png("rgba.png", 2, 1, 4, {0, 0, 255, 255, 0, 0, 0, 51}));
  CHECK((int)rgba.pixels[0] == (int)std::lround(0.114 * 255));
  CHECK((int)rgba.pixels[1] == (int)std::lround(0.8 * 255));  // black at alpha 0.2 over white
  // 16-bit PNGs (written by tools/reference/images.py).
  const std::string dir = std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/images/";
  GrayImage g16 = load_gray_image(dir + "gray16.png");
  REQUIRE(g16.width == 5);
  REQUIRE(g16.height == 3);
  for (int i = 0; i < 15; ++i) CHECK((int)g16.pixels[(size_t)i] == (int)std::lround(255.0 * i / 14));
  GrayImage rgba16 = load_gray_image(dir + "rgba16.png");
  CHECK((int)rgba16.pixels[0] == (int)std::lround(0.299 * 255));
  CHECK(std::abs((int)rgba16.pixels[1] - 127) <= 1);
  // JPEG and BMP through stb_image_write.
  std::vector<uint8_t> flat(8 * 8, 90);
  const std::string jpg = temp("flat.jpg"), bmp = temp("flat.bmp");
  REQUIRE(stbi_write_jpg(jpg.c_str(), 8, 8, 1, flat.data(), 95));
  REQUIRE(stbi_write_bmp(bmp.c_str(), 8, 8, 1, flat.data()));
  for (uint8_t v : load_gray_image(jpg).pixels) CHECK(std::abs((int)v - 90) <= 2);
  CHECK(load_gray_image(bmp).pixels == flat);
}

TEST_CASE("bad image files give clear errors naming the file", "[image]") {
  CHECK_THROWS_WITH(load_gray_image(temp("missing.png")), Catch::Contains("missing.png: no such file"));
  const std::string empty = temp("empty.png"), junk = temp("junk.png"), cut = temp("cut.png");
  write_bytes(empty, "");
  write_bytes(junk, "this is not an image at all");
  CHECK_THROWS_WITH(load_gray_image(empty), Catch::Contains("empty.png: the image file is empty"));
  CHECK_THROWS_WITH(load_gray_image(junk), Catch::Contains("junk.png: not an image ocrt can decode"));
  // A PNG cut in half.
  std::vector<uint8_t> px(64 * 32, 128);
  const std::string whole = write_png("whole.png", 64, 32, 1, px);
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_bytes(cut, bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(load_gray_image(cut), Catch::Contains("cut.png"));
  CHECK_THROWS_WITH(load_gray_image(fs::temp_directory_path().string()), Catch::Contains("is a directory"));
}

TEST_CASE("resize_to_height keeps the aspect ratio, leaves 32-high images alone, never makes width 0", "[image]") {
  GrayImage img;
  img.width = 100, img.height = 64;
  img.pixels.assign(100 * 64, 200);
  GrayImage r = resize_to_height(img, 32);
  CHECK(r.width == 50);
  CHECK(r.height == 32);
  for (uint8_t v : r.pixels) CHECK(v == 200);  // flat stays flat, both filters
  GrayImage same;
  same.width = 7, same.height = 32;
  same.pixels.assign(7 * 32, 0);
  same.pixels[5] = 77;
  CHECK(resize_to_height(same, 32).pixels == same.pixels);
  GrayImage tall;
  tall.width = 1, tall.height = 1000;
  tall.pixels.assign(1000, 10);
  CHECK(resize_to_height(tall, 32).width == 1);
  GrayImage dot;
  dot.width = 1, dot.height = 1;
  dot.pixels = {42};
  GrayImage up = resize_to_height(dot, 32);
  CHECK(up.width == 32);
  for (uint8_t v : up.pixels) CHECK(v == 42);
  // Shrinking averages: a 2x2 checkerboard of 0/255 becomes mid-gray at height 1.
  GrayImage cb;
  cb.width = 2, cb.height = 2;
  cb.pixels = {0, 255, 255, 0};
  CHECK(std::abs((int)resize_to_height(cb, 1).pixels[0] - 128) <= 1);
}

TEST_CASE("pack_batch pads with white to a multiple of 4 and the widest line, then normalises", "[image]") {
  GrayImage a, b;
  a.width = 5, a.height = 2, a.pixels.assign(10, 0);
  b.width = 9, b.height = 2, b.pixels.assign(18, 255);
  std::vector<int64_t> widths;
  Tensor t = pack_batch({a, b}, BatchSpec{}, &widths);
  CHECK(t.shape() == Shape{2, 1, 2, 12});
  CHECK(widths == std::vector<int64_t>{8, 12});
  const auto v = t.to_vector<float>();
  CHECK(v[0] == -1.0f);      // black
  CHECK(v[5] == 1.0f);       // padding is white
  CHECK(v[24 + 3] == 1.0f);  // white
  CHECK(padded_width(1) == 4);
  CHECK(padded_width(4) == 4);
  CHECK(padded_width(5) == 8);
  GrayImage c;
  c.width = 3, c.height = 3, c.pixels.assign(9, 0);
  CHECK_THROWS_WITH(pack_batch({a, c}, BatchSpec{}), Catch::Contains("line 1 is 3 pixels high, line 0 is 2"));
}

TEST_CASE("save_gray_png round-trips", "[image]") {
  GrayImage img;
  img.width = 3, img.height = 2, img.pixels = {1, 2, 3, 250, 251, 252};
  const std::string path = temp("roundtrip.png");
  save_gray_png(path, img);
  CHECK(load_gray_image(path).pixels == img.pixels);
}
