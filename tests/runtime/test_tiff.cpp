// TIFF input (runtime/tiff.h): files written here with libtiff in the forms scanners produce
// (8-bit gray, bilevel CCITT Group 4, RGB with LZW, 16-bit gray, several pages, a bottom-up
// orientation) read back pixel for pixel; and hostile ones (a header claiming 10^10 pixels, a
// file cut short, garbage after the magic) refused with a message naming the file.
#include <catch2/catch.hpp>
#include <tiffio.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/image.h"
#include "runtime/tiff.h"
#include "temp_dir.h"

using namespace ocrt;
using ocrt::testing::TempDir;
namespace fs = std::filesystem;

namespace {

struct PageSpec {
  uint32_t width = 0, height = 0;
  uint16_t bits = 8, samples = 1, photometric = PHOTOMETRIC_MINISBLACK, compression = COMPRESSION_NONE;
  uint16_t orientation = ORIENTATION_TOPLEFT;
  std::vector<uint8_t> rows;  // packed rows as the file stores them
};

std::string write_tiff(const fs::path& path, const std::vector<PageSpec>& pages) {
  TIFF* tif = TIFFOpen(path.c_str(), "w");
  REQUIRE(tif != nullptr);
  for (const PageSpec& p : pages) {
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, p.width);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, p.height);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, p.bits);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, p.samples);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, p.photometric);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, p.compression);
    TIFFSetField(tif, TIFFTAG_ORIENTATION, p.orientation);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, p.height);
    if (pages.size() > 1) TIFFSetField(tif, TIFFTAG_SUBFILETYPE, FILETYPE_PAGE);
    const size_t row_bytes = ((size_t)p.width * p.bits * p.samples + 7) / 8;
    REQUIRE(p.rows.size() == row_bytes * p.height);
    for (uint32_t y = 0; y < p.height; ++y)
      REQUIRE(TIFFWriteScanline(tif, const_cast<uint8_t*>(p.rows.data() + y * row_bytes), y, 0) == 1);
    REQUIRE(TIFFWriteDirectory(tif) == 1);
  }
  TIFFClose(tif);
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

PageSpec gray8(uint32_t w, uint32_t h, uint8_t base) {
  PageSpec p;
  p.width = w, p.height = h;
  for (uint32_t y = 0; y < h; ++y)
    for (uint32_t x = 0; x < w; ++x) p.rows.push_back((uint8_t)(base + 3 * x + 7 * y));
  return p;
}

// A TIFF written byte by byte: one uncompressed 8-bit gray page whose directory says
// width x height, followed by `data_bytes` bytes of pixels (fewer than that needs, on purpose).
std::string handmade_tiff(uint32_t width, uint32_t height, uint32_t data_bytes) {
  std::string f = std::string("II*\0", 4);
  auto u16 = [&](uint16_t v) { f += (char)(v & 0xff), f += (char)(v >> 8); };
  auto u32 = [&](uint32_t v) { for (int k = 0; k < 4; ++k) f += (char)((v >> (8 * k)) & 0xff); };
  u32(8);  // the first directory
  const uint16_t n = 8;
  const uint32_t data_at = 8 + 2 + 12 * n + 4;
  u16(n);
  auto entry = [&](uint16_t tag, uint16_t type, uint32_t value) {
    u16(tag), u16(type), u32(1);
    if (type == 3) u16((uint16_t)value), u16(0);
    else u32(value);
  };
  entry(256, 4, width);
  entry(257, 4, height);
  entry(258, 3, 8);
  entry(259, 3, 1);
  entry(262, 3, 1);
  entry(273, 4, data_at);
  entry(278, 4, height);
  entry(279, 4, (uint32_t)((uint64_t)width * height));
  u32(0);  // no next directory
  f.append(data_bytes, '\x80');
  return f;
}

}  // namespace

TEST_CASE("tiff: 8-bit gray, bilevel G4, RGB LZW and 16-bit pages read back", "[tiff]") {
  TempDir dir("tiff");
  SECTION("8-bit gray") {
    const PageSpec p = gray8(40, 20, 10);
    const std::string bytes = write_tiff(dir.path / "gray.tif", {p});
    CHECK(is_tiff(bytes.data(), bytes.size()));
    const GrayImage img = decode_gray_image(bytes.data(), bytes.size(), "gray.tif");
    REQUIRE(img.width == 40);
    REQUIRE(img.height == 20);
    CHECK(img.pixels == p.rows);
    CHECK(load_gray_image((dir.path / "gray.tif").string()).pixels == p.rows);
  }
  SECTION("bilevel, min-is-white, CCITT Group 4 (what fax and document scanners write)") {
    PageSpec p;
    p.width = 100, p.height = 30, p.bits = 1, p.photometric = PHOTOMETRIC_MINISWHITE, p.compression = COMPRESSION_CCITTFAX4;
    p.rows.assign(13 * 30, 0);  // 0 is white
    for (uint32_t y = 10; y < 20; ++y)
      for (uint32_t x = 20; x < 60; ++x) p.rows[y * 13 + x / 8] |= (uint8_t)(0x80 >> (x % 8));
    const std::string bytes = write_tiff(dir.path / "g4.tif", {p});
    const GrayImage img = decode_gray_image(bytes.data(), bytes.size(), "g4.tif");
    REQUIRE(img.width == 100);
    for (int64_t y = 0; y < 30; ++y)
      for (int64_t x = 0; x < 100; ++x) {
        const bool ink = y >= 10 && y < 20 && x >= 20 && x < 60;
        REQUIRE((int)img.at(x, y) == (ink ? 0 : 255));
      }
  }
  SECTION("RGB with LZW: the same gray as a PNG of those colours") {
    PageSpec p;
    p.width = 3, p.height = 1, p.samples = 3, p.photometric = PHOTOMETRIC_RGB, p.compression = COMPRESSION_LZW;
    p.rows = {255, 0, 0, 0, 255, 0, 10, 20, 30};
    const std::string bytes = write_tiff(dir.path / "rgb.tif", {p});
    const GrayImage img = decode_gray_image(bytes.data(), bytes.size(), "rgb.tif");
    REQUIRE(img.width == 3);
    CHECK((int)img.at(0, 0) == 76);   // 0.299 * 255
    CHECK((int)img.at(1, 0) == 150);  // 0.587 * 255
    CHECK((int)img.at(2, 0) == 18);   // 0.299*10 + 0.587*20 + 0.114*30 = 18.16
  }
  SECTION("16-bit gray") {
    PageSpec p;
    p.width = 2, p.height = 1, p.bits = 16;
    p.rows = {0x00, 0x00, 0xff, 0xff};  // 0 and 65535, little-endian as the file is
    const std::string bytes = write_tiff(dir.path / "g16.tif", {p});
    const GrayImage img = decode_gray_image(bytes.data(), bytes.size(), "g16.tif");
    CHECK((int)img.at(0, 0) == 0);
    CHECK((int)img.at(1, 0) == 255);
  }
  SECTION("a bottom-up page is read the way it is shown") {
    PageSpec p = gray8(4, 3, 0);
    p.orientation = ORIENTATION_BOTLEFT;
    const std::string bytes = write_tiff(dir.path / "botleft.tif", {p});
    const GrayImage img = decode_gray_image(bytes.data(), bytes.size(), "botleft.tif");
    REQUIRE(img.height == 3);
    for (int64_t x = 0; x < 4; ++x) CHECK((int)img.at(x, 0) == (int)p.rows[(size_t)(2 * 4 + x)]);  // the last stored row on top
  }
}

TEST_CASE("tiff: every page of a multi-page file", "[tiff]") {
  TempDir dir("tiff-pages");
  const std::vector<PageSpec> pages = {gray8(10, 10, 0), gray8(20, 5, 50), gray8(7, 3, 100)};
  const std::string bytes = write_tiff(dir.path / "three.tif", pages);
  CHECK(tiff_page_count(bytes.data(), bytes.size(), "three.tif") == 3);
  for (int64_t i = 0; i < 3; ++i) {
    const GrayImage img = decode_tiff_page(bytes.data(), bytes.size(), "three.tif", i);
    CHECK(img.width == pages[(size_t)i].width);
    CHECK(img.pixels == pages[(size_t)i].rows);
  }
  CHECK(decode_gray_image(bytes.data(), bytes.size(), "three.tif").pixels == pages[0].rows);  // the first page
  CHECK_THROWS_WITH(decode_tiff_page(bytes.data(), bytes.size(), "three.tif", 3),
                    Catch::Contains("three.tif: no page 4 (the TIFF has 3)"));
  CHECK_THROWS_WITH(decode_tiff_page(bytes.data(), bytes.size(), "three.tif", -1), Catch::Contains("no page 0"));
  // The budget applies per page, and names the page.
  CHECK_THROWS_WITH(decode_tiff_page(bytes.data(), bytes.size(), "three.tif", 1, 99),
                    Catch::Contains("three.tif (page 2 of 3): the image is too large (20x5 = 100 pixels; at most 99"));
}

TEST_CASE("tiff: hostile files are refused with a message", "[tiff]") {
  SECTION("a header that claims 10^10 pixels is refused before anything is allocated") {
    const std::string f = handmade_tiff(100000, 100000, 16);
    CHECK(is_tiff(f.data(), f.size()));
    CHECK_THROWS_WITH(decode_gray_image(f.data(), f.size(), "huge.tif"),
                      Catch::Contains("huge.tif: the image is too large (100000x100000 = 10000000000 pixels"));
  }
  SECTION("pixels cut short") {
    const std::string f = handmade_tiff(64, 64, 100);  // 4096 bytes needed
    CHECK_THROWS_WITH(decode_gray_image(f.data(), f.size(), "short.tif"), Catch::Contains("short.tif: "));
  }
  SECTION("a directory cut short, and garbage after the magic") {
    const std::string f = handmade_tiff(64, 64, 4096);
    for (size_t keep : {4ul, 8ul, 20ul, 60ul}) {
      INFO(keep);
      CHECK_THROWS_WITH(decode_gray_image(f.data(), keep, "cut.tif"), Catch::Contains("cut.tif: "));
      CHECK_THROWS_WITH(tiff_page_count(f.data(), keep, "cut.tif"), Catch::Contains("cut.tif: "));
    }
    std::string garbage = std::string("MM\0*", 4) + std::string(200, '\xff');
    CHECK_THROWS_WITH(decode_gray_image(garbage.data(), garbage.size(), "garbage.tif"), Catch::Contains("garbage.tif: "));
  }
  SECTION("what is not a TIFF") {
    CHECK_FALSE(is_tiff("II*", 3));
    CHECK_FALSE(is_tiff("\x89PNG\r\n\x1a\n", 8));
    CHECK_THROWS_WITH(tiff_page_count("\x89PNG\r\n\x1a\n", 8, "a.png"), Catch::Contains("a.png: not a TIFF file"));
  }
}
