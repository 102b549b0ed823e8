// Hostile image files (issue 23, items 1-4): every file here is built byte by byte in the test.
// A file cut short in any format is an error, never an image read from zeros or uninitialised
// memory; a header's size is checked against the pixel budget before anything is allocated;
// a top-down BMP reads like the same image bottom-up; an empty file and a huge PNG say what is
// wrong. The limits themselves are described in runtime/image.h.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/image.h"
#include "runtime/stb.h"
#include "temp_dir.h"

using namespace ocrt;

namespace {

std::string write_file(const ocrt::testing::TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = (dir.path / name).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

void append(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), (size_t)size);
}

// A w x h gray pattern that differs from row to row and column to column.
std::vector<uint8_t> pattern(int w, int h) {
  std::vector<uint8_t> px((size_t)w * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) px[(size_t)(y * w + x)] = (uint8_t)((x * 7 + y * 31) % 251);
  return px;
}

std::string pgm(int w, int h, const std::vector<uint8_t>& px) {
  return "P5\n" + std::to_string(w) + " " + std::to_string(h) + "\n255\n" + std::string(px.begin(), px.end());
}

void put_le32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + (size_t)i] = (char)(v >> (8 * i) & 0xFF);
}
uint32_t get_le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | (uint8_t)s[at + (size_t)i];
  return v;
}

std::string be32(uint32_t v) {
  return {(char)(v >> 24), (char)(v >> 16 & 0xFF), (char)(v >> 8 & 0xFF), (char)(v & 0xFF)};
}

}  // namespace

TEST_CASE("an image file cut short is an error in every format", "[image]") {
  ocrt::testing::TempDir dir("hostile-truncated");
  const int w = 64, h = 32;
  const std::vector<uint8_t> px = pattern(w, h);
  std::string png, bmp, tga, jpg;
  REQUIRE(stbi_write_png_to_func(append, &png, w, h, 1, px.data(), w));
  REQUIRE(stbi_write_bmp_to_func(append, &bmp, w, h, 1, px.data()));
  REQUIRE(stbi_write_tga_to_func(append, &tga, w, h, 1, px.data()));
  REQUIRE(stbi_write_jpg_to_func(append, &jpg, w, h, 1, px.data(), 90));
  const std::vector<std::pair<std::string, std::string>> files = {
      {"a.pgm", pgm(w, h, px)}, {"a.png", png}, {"a.bmp", bmp}, {"a.tga", tga}, {"a.jpg", jpg}};
  for (const auto& [name, bytes] : files) {
    INFO(name);
    const GrayImage whole = load_gray_image(write_file(dir, name, bytes));
    CHECK(whole.width == w);
    CHECK(whole.height == h);
    if (name != "a.jpg") CHECK(whole.pixels == px);
    // The first half of the file, and the whole file less its last byte (one pixel short for
    // PGM, BMP and TGA).
    for (size_t keep : {bytes.size() / 2, bytes.size() - 1}) {
      if (name == "a.png" && keep == bytes.size() - 1) continue;  // the end of IEND's CRC: not needed
      if (name == "a.jpg" && keep == bytes.size() - 1) continue;  // half of the end marker
      INFO("kept " << keep << " of " << bytes.size() << " bytes");
      const std::string cut = write_file(dir, "cut-" + name, bytes.substr(0, keep));
      CHECK_THROWS_WITH(load_gray_image(cut), Catch::Contains("cut-" + name));
    }
  }
  // The case of the issue: the first half of a PGM says so.
  const std::string half = write_file(dir, "half.pgm", pgm(w, h, px).substr(0, pgm(w, h, px).size() / 2));
  CHECK_THROWS_WITH(load_gray_image(half), Catch::Contains("half.pgm: the image file is truncated"));
}

TEST_CASE("an image's size is checked from its header before anything is allocated", "[image]") {
  ocrt::testing::TempDir dir("hostile-size");
  // A 19 KB BMP whose header claims 16000 x 16000 pixels of 24 bits (768 MB of pixels).
  std::string bmp(54, '\0');
  bmp[0] = 'B', bmp[1] = 'M';
  put_le32(bmp, 2, 54 + 19000);
  put_le32(bmp, 10, 54);  // pixel data offset
  put_le32(bmp, 14, 40);  // BITMAPINFOHEADER
  put_le32(bmp, 18, 16000);
  put_le32(bmp, 22, 16000);
  bmp[26] = 1;   // planes
  bmp[28] = 24;  // bits per pixel
  bmp += std::string(19000, '\x80');
  CHECK_THROWS_WITH(load_gray_image(write_file(dir, "huge.bmp", bmp)),
                    Catch::Contains("huge.bmp: the image is too large (16000x16000 = 256000000 pixels; at most 16777216"));
  // The budget is the caller's to raise or lower.
  const std::string small = write_file(dir, "small.pgm", pgm(100, 100, pattern(100, 100)));
  CHECK_THROWS_WITH(load_gray_image(small, 9999), Catch::Contains("small.pgm: the image is too large (100x100"));
  CHECK(load_gray_image(small, 10000).pixels == pattern(100, 100));
  CHECK(kDefaultMaxImagePixels == 16777216);
  // Decodes in many threads at once share the in-flight budget and all finish.
  std::vector<std::thread> threads;
  std::vector<int> ok(16, 0);
  const std::string big = write_file(dir, "big.pgm", pgm(4096, 4096, std::vector<uint8_t>(4096 * 4096, 7)));
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] { ok[(size_t)t] = load_gray_image(t % 2 ? big : small).width > 0; });
  for (auto& t : threads) t.join();
  CHECK(ok == std::vector<int>(16, 1));
}

TEST_CASE("a top-down BMP (negative height) reads like the same image bottom-up", "[image]") {
  ocrt::testing::TempDir dir("hostile-topdown");
  const int w = 897, h = 41;
  const std::vector<uint8_t> px = pattern(w, h);
  std::string up;
  REQUIRE(stbi_write_bmp_to_func(append, &up, w, h, 1, px.data()));  // 24-bit, bottom-up
  const size_t offset = get_le32(up, 10), row = ((size_t)w * 3 + 3) / 4 * 4;
  REQUIRE(up.size() >= offset + row * h);
  std::string down = up.substr(0, offset);
  for (int y = h - 1; y >= 0; --y) down += up.substr(offset + row * (size_t)y, row);
  put_le32(down, 22, (uint32_t)-h);
  const GrayImage a = load_gray_image(write_file(dir, "up.bmp", up));
  const GrayImage b = load_gray_image(write_file(dir, "down.bmp", down));
  CHECK(a.pixels == px);
  CHECK(b.width == w);
  CHECK(b.height == h);
  CHECK(b.pixels == px);
}

TEST_CASE("an empty file and a huge PNG say what is wrong", "[image]") {
  ocrt::testing::TempDir dir("hostile-png");
  CHECK_THROWS_WITH(load_gray_image(write_file(dir, "empty.png", "")),
                    Catch::Contains("empty.png: the image file is empty (0 bytes)"));
  // PNG headers (signature and IHDR) of 8-bit gray images; stb_image refuses the first one's
  // header outright (over 2^30 bytes), the second passes its header but not ocrt's budget.
  auto png_header = [](uint32_t w, uint32_t h) {
    std::string s = "\x89PNG\r\n\x1a\n";
    s += be32(13) + "IHDR" + be32(w) + be32(h) + std::string("\x08\x00\x00\x00\x00", 5) + be32(0);
    return s + be32(0) + "IEND" + be32(0);
  };
  CHECK_THROWS_WITH(load_gray_image(write_file(dir, "huge.png", png_header(60000, 60000))),
                    Catch::Contains("huge.png: the image is too large (60000x60000 = 3600000000 pixels"));
  CHECK_THROWS_WITH(load_gray_image(write_file(dir, "big.png", png_header(5000, 5000))),
                    Catch::Contains("big.png: the image is too large (5000x5000"));
}
