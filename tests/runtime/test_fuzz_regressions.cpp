// Regressions found by fuzzing (fuzz/, scripts/fuzz.sh, docs/reliability.md): each test holds
// one defect to its fix. The inputs that showed them are also in fuzz/corpus/, replayed by
// `ctest -L fuzz`.
#include <catch2/catch.hpp>

#include <filesystem>

#include "models/charset.h"
#include "runtime/image.h"
#include "runtime/stb.h"
#include "temp_dir.h"
#include "train/data.h"

using namespace ocrt;

namespace {

std::string be32(uint32_t v) {
  return {(char)(v >> 24), (char)(v >> 16 & 0xFF), (char)(v >> 8 & 0xFF), (char)(v & 0xFF)};
}

GrayImage flat(int64_t w, int64_t h, uint8_t v = 255) {
  GrayImage img;
  img.width = w, img.height = h;
  img.pixels.assign((size_t)(w * h), v);
  return img;
}

}  // namespace

// A valid image one pixel high and 16 Mpixels wide (a PNG of a few KB) passes the decoder's
// pixel budget; resized to a line's height it would be 512 M x 32 pixels and take over 100 GB
// of buffers. Resizing now refuses a result larger than the decoder's budget.
TEST_CASE("fuzz regression: resizing a flat, wide image to line height is bounded", "[image][fuzz]") {
  // 20000 x 1 would become 640000 x 32 (20.5 Mpixels): refused, naming both sizes.
  CHECK_THROWS_WITH(resize_to_height(flat(20000, 1), 32),
                    Catch::Contains("20000x1 image would become 640000x32") && Catch::Contains("16777216"));
  // Lines of every ordinary size still resize.
  CHECK(resize_to_height(flat(16384, 32), 32).width == 16384);
  CHECK(resize_to_height(flat(4000, 100), 32).width == 1280);
  CHECK(resize_to_height(flat(16384, 1), 32).width == 524288);  // exactly the budget
  CHECK(resize_to_height(flat(1, 1000000), 32).width == 1);
}

// stb_image (Debian 12's libstb-dev, 2022-09) builds a JPEG Huffman table into a 257-entry
// array without checking that the table's 16 code counts sum to at most 256: a DHT segment of
// 16 counts of 255 wrote 3823 bytes past the array, already in the header call that reads the
// size (fuzz/corpus/image/crash-04de6fde...). Such a table is now refused before stb_image
// sees the file.
TEST_CASE("fuzz regression: a JPEG Huffman table of more than 256 codes is refused", "[image][fuzz]") {
  std::string jpeg = "\xFF\xD8\xFF\xC4";
  jpeg += std::string("\x00\x13\x00", 3);  // length 19: one table, class 0 id 0
  jpeg += std::string(16, '\xFF');          // 16 counts of 255: 4080 codes
  jpeg += "\xFF\xD9";
  CHECK_THROWS_WITH(decode_gray_image(jpeg.data(), jpeg.size(), "dht.jpg"),
                    Catch::Contains("dht.jpg: a corrupt JPEG (the Huffman table at byte 6 declares more than 256 codes)"));
  // The same table after an APP segment whose bytes hold FF C4 (not a marker there) and a scan.
  std::string later = "\xFF\xD8\xFF\xE0" + std::string("\x00\x04\xFF\xC4", 4) +  // APP0 holding bytes FF C4
                      "\xFF\xDA" + std::string("\x00\x02", 2) +                     // a scan header
                      std::string("\x12\xFF\x00\x34\xFF\xD0", 6) +                // its data, a RST marker
                      jpeg.substr(2);
  CHECK_THROWS_WITH(decode_gray_image(later.data(), later.size(), "later.jpg"),
                    Catch::Contains("Huffman table at byte 22 declares more than 256"));
  // A table whose counts the end of the file cuts short: stb_image reads zeros there, and the
  // counts it has already add up to 472 (fuzz/corpus/image/crash-4a422785...).
  const std::string cut = "\xFF\xD8\xFF\xC4" + std::string("\x00\x40\x00\x00\xFF\xD9", 6);
  CHECK_THROWS_WITH(decode_gray_image(cut.data(), cut.size(), "cut.jpg"),
                    Catch::Contains("Huffman table at byte 6 declares more than 256"));
  // A table of exactly 256 codes is left to the decoder (which refuses this file for other reasons).
  const std::string full = "\xFF\xD8\xFF\xC4" + std::string("\x00\x13\x00", 3) + std::string(14, '\0') +
                           "\x01\xFF" + "\xFF\xD9";
  CHECK_THROWS_WITH(decode_gray_image(full.data(), full.size(), "full.jpg"), !Catch::Contains("Huffman table at byte"));
  // Fill bytes before SOI: stb_image reads FF FF D8 as SOI (fuzz/corpus/image/crash-6cd82e0d...,
  // a 10-minute run's find: the check took such a file for something other than a JPEG).
  const std::string filled = "\xFF\xFF\xFF" + jpeg.substr(1);
  CHECK_THROWS_WITH(decode_gray_image(filled.data(), filled.size(), "filled.jpg"),
                    Catch::Contains("filled.jpg: a corrupt JPEG (the Huffman table at byte 8 declares more than 256"));
}

// stb_image grows its buffer for a PNG's compressed data to each IDAT chunk's declared length
// (up to 2^30 bytes) before reading the chunk: an 82-byte PNG whose IDAT says 2^30 bytes
// follow made it allocate 1 GiB (fuzz/corpus/image/oom-86238cff...), and a few decoding
// threads would take the machine down. A chunk longer than the rest of the file is now
// refused, as a truncated file, before stb_image reads it.
TEST_CASE("fuzz regression: a PNG chunk longer than the file is refused before decoding", "[image][fuzz]") {
  std::string png = "\x89PNG\r\n\x1a\n";
  png += be32(13) + "IHDR" + be32(24) + be32(10) + std::string("\x08\x00\x00\x00\x00", 5) + be32(0);
  png += be32(1u << 30) + "IDAT" + std::string("\x78\xda\x63\x00\x00", 5);
  CHECK_THROWS_WITH(decode_gray_image(png.data(), png.size(), "idat.png"),
                    Catch::Contains("idat.png: the image file is truncated (" + std::to_string(png.size()) +
                                    " bytes; its PNG chunk at byte 33 says 1073741824 bytes follow)"));
}

// stb_image reads a binary PGM/PPM header's numbers into an int without a bound: a width of
// 1122222222222... overflowed it (undefined behaviour; fuzz/corpus/image/crash-ce2f6695...).
// Such a header is now refused before stb_image reads it; numbers up to 2^31 - 1 are left to
// the size checks.
TEST_CASE("fuzz regression: a PGM/PPM header number over 2^31 - 1 is refused", "[image][fuzz]") {
  for (const std::string header : {"P5\n1 11222222222\n255\n", "P6 # comment\n99999999999 1 255\n",
                                   "P5\n1 1\n\t2147483648 "}) {
    INFO(header);
    CHECK_THROWS_WITH(decode_gray_image(header.data(), header.size(), "big.pgm"),
                      Catch::Contains("big.pgm: a corrupt PGM/PPM header (a number over 2147483647)"));
  }
  const std::string wide = "P5\n2147483647 1\n255\n";
  CHECK_THROWS_WITH(decode_gray_image(wide.data(), wide.size(), "wide.pgm"), Catch::Contains("too large"));
}

// stb_image "removes the white matte" of a PSD's first three channels whenever the file has
// four or more (RGBA, CMYK, or the 11 of fuzz/corpus/image/crash-b4900377...): color / alpha +
// 255 (1 - 1 / alpha) falls below 0 where a channel is darker than the matte, and the float is
// cast to an unsigned char (undefined behaviour, UBSan). Such files are refused before stb_image;
// gray and RGB PSDs (1 to 3 channels) still decode.
TEST_CASE("fuzz regression: a PSD of 4 or more channels is refused, an RGB one decodes", "[image][fuzz]") {
  auto psd = [](int channels, uint8_t value) {
    std::string f = "8BPS";
    f += std::string("\0\1", 2) + std::string(6, '\0');                 // version 1, reserved
    f += std::string{(char)0, (char)channels} + be32(2) + be32(3);       // channels, height 2, width 3
    f += std::string("\0\x08\0\x03", 4);                                 // 8 bits, RGB mode
    f += be32(0) + be32(0) + be32(0) + std::string(2, '\0');            // no sections; raw data
    f += std::string((size_t)(channels * 2 * 3), (char)value);           // planar channels
    return f;
  };
  for (int channels : {4, 5, 11}) {
    INFO(channels);
    const std::string f = psd(channels, 20);
    CHECK_THROWS_WITH(decode_gray_image(f.data(), f.size(), "layers.psd"),
                      Catch::Contains("layers.psd: a Photoshop (PSD) file of " + std::to_string(channels) +
                                      " channels") &&
                          Catch::Contains("1 to 3 channels"));
  }
  const std::string rgb = psd(3, 200);
  const GrayImage img = decode_gray_image(rgb.data(), rgb.size(), "rgb.psd");
  CHECK(img.width == 3);
  CHECK(img.height == 2);
  CHECK(img.pixels == std::vector<uint8_t>(6, 200));
}

// A JPEG cut short was "cannot decode the image (expected marker)", or even "(bad png sig)", a
// reason left over from another format (fuzz/corpus/image/seed_truncated.jpg). A decoder that
// ran out of bytes now says the file is truncated.
TEST_CASE("fuzz regression: a JPEG cut short says it is truncated", "[image][fuzz]") {
  std::vector<uint8_t> px(64 * 32);
  for (size_t i = 0; i < px.size(); ++i) px[i] = (uint8_t)(i * 37 % 251);
  std::string jpg;
  REQUIRE(stbi_write_jpg_to_func([](void* out, void* data, int n) { static_cast<std::string*>(out)->append((const char*)data, (size_t)n); },
                                 &jpg, 64, 32, 1, px.data(), 90));
  const std::string half = jpg.substr(0, jpg.size() / 2);
  CHECK_THROWS_WITH(decode_gray_image(half.data(), half.size(), "half.jpg"),
                    Catch::Contains("half.jpg: the image file is truncated"));
}

TEST_CASE("fuzz regression: training's start-up check reports a line too wide to resize", "[data][fuzz]") {
  ocrt::testing::TempDir dir("fuzz-wide-line");
  const std::string path = (dir.path / "wide.png").string();
  save_gray_png(path, flat(20000, 1, 0));
  const auto report = train::validate_samples({{path, "a"}}, nn::Charset::ascii(), 32);
  REQUIRE(report.good.empty());
  REQUIRE(report.counts.count(train::Problem::bad_image) == 1);
  const std::string& detail = report.examples.at(train::Problem::bad_image).at(0);
  CHECK_THAT(detail, Catch::Contains(path) && Catch::Contains("would become 640000x32"));
}
