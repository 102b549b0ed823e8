// Training data sources and the start-up check: label files (relative paths, CRLF, missing tab),
// folders of pairs, and every kind of bad sample counted, listed and kept out.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "runtime/image.h"
#include "train/data.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::train;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = ocrt::testing::process_temp_dir("data-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

void image(const fs::path& p, int64_t w, int64_t h) {
  GrayImage img;
  img.width = w, img.height = h, img.pixels.assign((size_t)(w * h), 255);
  save_gray_png(p.string(), img);
}

}  // namespace

TEST_CASE("label files: paths relative to the file, CRLF, empty lines, malformed lines fail", "[data]") {
  const fs::path d = fresh_dir("labels");
  fs::create_directories(d / "img");
  write(d / "train.tsv", "img/a.png\thello\r\n\nimg/b.png\tworld wide\n");
  auto s = read_source((d / "train.tsv").string());
  REQUIRE(s.size() == 2);
  CHECK(s[0].path == (d / "img/a.png").string());
  CHECK(s[0].text == "hello");
  CHECK(s[1].text == "world wide");
  write(d / "bad.tsv", "img/a.png\tok\nno tab here\n");
  CHECK_THROWS_WITH(read_source((d / "bad.tsv").string()), Catch::Contains("bad.tsv line 2: expected 'path<TAB>text'"));
  CHECK_THROWS_WITH(read_source((d / "nope.tsv").string()), Catch::Contains("no such label file or folder"));
}

TEST_CASE("folders of pairs: name.png + name.gt.txt, sorted, unlabelled images ignored", "[data]") {
  const fs::path d = fresh_dir("pairs");
  image(d / "b.png", 40, 32);
  write(d / "b.gt.txt", "second\n");
  image(d / "a.png", 40, 32);
  write(d / "a.gt.txt", "first");
  image(d / "c.png", 40, 32);  // no .gt.txt
  auto s = read_sources({d.string()});
  REQUIRE(s.size() == 2);
  CHECK(s[0].text == "first");
  CHECK(s[1].text == "second");
}

TEST_CASE("validation counts and lists every kind of bad sample and keeps the good ones", "[data]") {
  const fs::path d = fresh_dir("validate");
  image(d / "ok.png", 64, 32);     // 64 wide: 17 frames
  image(d / "small.png", 8, 32);   // 8 wide: 3 frames
  image(d / "tall.png", 20, 64);   // resized to 10 -> padded 12 wide: 4 frames
  write(d / "corrupt.png", "not a png");
  write(d / "empty.png", "");
  const std::vector<Sample> samples = {
      {(d / "ok.png").string(), "fine"},
      {(d / "missing.png").string(), "x"},
      {(d / "corrupt.png").string(), "x"},
      {(d / "empty.png").string(), "x"},
      {(d / "ok.png").string(), ""},
      {(d / "ok.png").string(), "caf\xc3\xa9"},  // é is not ASCII
      {(d / "ok.png").string(), "bad\xff"},
      {(d / "small.png").string(), "aa"},   // needs 3 frames: fits exactly
      {(d / "small.png").string(), "aaa"},  // needs 5 > 3
      {(d / "tall.png").string(), "abcd"},  // needs 4: fits
  };
  ValidationReport r = validate_samples(samples, nn::Charset::ascii());
  CHECK(r.total == 10);
  REQUIRE(r.good.size() == 3);
  CHECK(r.good[0].sample.text == "fine");
  CHECK(r.good[0].width == 64);
  CHECK(r.good[1].sample.text == "aa");
  CHECK(r.good[2].width == 12);
  CHECK(r.counts[Problem::missing_image] == 1);
  CHECK(r.counts[Problem::bad_image] == 2);
  CHECK(r.counts[Problem::empty_label] == 1);
  CHECK(r.counts[Problem::unknown_characters] == 1);
  CHECK(r.counts[Problem::invalid_utf8] == 1);
  CHECK(r.counts[Problem::too_long_for_image] == 1);
  CHECK(r.bad() == 7);
  const std::string summary = r.summary();
  CHECK_THAT(summary, Catch::Contains("10 samples, 3 usable, 7 with problems"));
  CHECK_THAT(summary, Catch::Contains("'\xc3\xa9'"));
  CHECK_THAT(summary, Catch::Contains("needs 5 frames"));
  CHECK_THAT(summary, Catch::Contains("empty.png: the image file is empty"));
  CHECK(frames_needed({1, 1, 2, 2, 2, 3}) == 9);
}
