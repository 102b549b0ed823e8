// Pages without a model (infer/page.h): recognised characters placed back on the page and split
// into words, spaces put in at word gaps read run together, and the reading order of lines laid out by hand (an article with a heading,
// two columns and a footer; a table; a form; lines side by side), given in shuffled order; and
// lines cut out of a page along their outlines.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "infer/page.h"

using namespace ocrt;
using namespace ocrt::infer;

namespace {

LineResult line_result(const std::string& text, const std::vector<double>& xs, double confidence = 0.9) {
  LineResult r;
  r.name = "line";
  r.text = text;
  r.confidence = confidence;
  REQUIRE(text.size() == xs.size());
  for (size_t i = 0; i < xs.size(); ++i) r.chars.push_back({std::string(1, text[i]), (int64_t)i, xs[i], 0.5 + 0.05 * (double)i});
  return r;
}

PageLine line_at(const std::string& text, double x0, double y0, double x1, double y1) {
  PageLine l;
  l.text = text;
  l.outline = Quad::from_rect({x0, y0, x1, y1});
  l.box = l.outline.box();
  return l;
}

// The texts of the blocks, in order, one string per block ("a|b" for lines a and b).
std::vector<std::string> block_texts(const std::vector<PageBlock>& blocks) {
  std::vector<std::string> out;
  for (const PageBlock& b : blocks) {
    std::string s;
    for (const PageLine& l : b.lines) s += (s.empty() ? "" : "|") + l.text;
    out.push_back(s);
  }
  return out;
}

std::vector<PageLine> shuffled(std::vector<PageLine> lines, unsigned seed) {
  std::mt19937 rng(seed);
  std::shuffle(lines.begin(), lines.end(), rng);
  return lines;
}

}  // namespace

TEST_CASE("place_words: characters back on the page, words at spaces", "[page]") {
  // A 60-pixel line image cut from the page box [100, 200) x [50, 70): 100/60 page pixels each.
  const LineResult r = line_result("ab cd", {10, 20, 30, 40, 50});
  const PageLine l = place_words(r, Quad::from_rect({100, 50, 200, 70}), 60);
  CHECK(l.text == "ab cd");
  REQUIRE(l.words.size() == 2);
  CHECK(l.words[0].text == "ab");
  CHECK(l.words[1].text == "cd");
  // Pitch 10: 'a' spans [5, 15), 'b' [15, 25), 'c' [35, 45), 'd' [45, 55) of the line image.
  const double s = 100.0 / 60.0;
  CHECK(l.words[0].box.x0 == Approx(100 + 5 * s));
  CHECK(l.words[0].box.x1 == Approx(100 + 25 * s));
  CHECK(l.words[1].box.x0 == Approx(100 + 35 * s));
  CHECK(l.words[1].box.x1 == Approx(100 + 55 * s));
  CHECK(l.words[0].box.y0 == Approx(50));
  CHECK(l.words[0].box.y1 == Approx(70));
  REQUIRE(l.words[1].chars.size() == 2);
  CHECK(l.words[1].chars[0].box.x1 == Approx(100 + 45 * s));
  CHECK(l.words[1].chars[1].confidence == Approx(0.7));
  CHECK(l.words[0].confidence == Approx((0.5 + 0.55) / 2));
  CHECK(l.words[1].confidence == Approx((0.65 + 0.7) / 2));
}

TEST_CASE("place_words: ends clamped, a rotated line, failed and empty lines", "[page]") {
  SECTION("the first and last characters stay inside the line") {
    const PageLine l = place_words(line_result("xy", {1, 58}), Quad::from_rect({0, 0, 60, 20}), 60);
    REQUIRE(l.words.size() == 1);
    CHECK(l.words[0].box.x0 >= 0);
    CHECK(l.words[0].box.x1 <= 60);
  }
  SECTION("a line turned by 90 degrees: the text runs down the page") {
    // Top edge from (50, 0) to (50, 100): the line reads downwards; its height runs to -x.
    Quad q;
    q.corners = {Point{50, 0}, Point{50, 100}, Point{30, 100}, Point{30, 0}};
    const PageLine l = place_words(line_result("ab", {25, 75}), q, 100);
    REQUIRE(l.words.size() == 1);
    REQUIRE(l.words[0].chars.size() == 2);
    const Rect a = l.words[0].chars[0].box, b = l.words[0].chars[1].box;
    CHECK(a.x0 == Approx(30));
    CHECK(a.x1 == Approx(50));
    CHECK(a.y1 == Approx(50));  // 'a' in the top half, 'b' in the bottom half
    CHECK(b.y0 == Approx(50));
  }
  SECTION("a failed line keeps its error and has no words") {
    LineResult r;
    r.error = "cannot decode";
    const PageLine l = place_words(r, Quad::from_rect({0, 0, 10, 10}), 10);
    CHECK(l.error == "cannot decode");
    CHECK(l.words.empty());
  }
  SECTION("a blank line, and spaces only") {
    CHECK(place_words(LineResult{}, Quad::from_rect({0, 0, 10, 10}), 10).words.empty());
    CHECK(place_words(line_result("  ", {2, 6}), Quad::from_rect({0, 0, 10, 10}), 10).words.empty());
  }
}

TEST_CASE("reading_order: heading, two columns with paragraphs, footer", "[page]") {
  std::vector<PageLine> lines = {line_at("H", 100, 50, 900, 80)};
  // Left column: a paragraph of three lines, a gap of 30 (1.5 line heights), two more.
  for (int k = 0; k < 3; ++k) lines.push_back(line_at("L" + std::to_string(k), 100, 120 + 30 * k, 480, 140 + 30 * k));
  for (int k = 3; k < 5; ++k) lines.push_back(line_at("L" + std::to_string(k), 100, 140 + 30 * k, 470, 160 + 30 * k));
  // Right column, 40 pixels to the right, its lines on the same rows as the left ones.
  for (int k = 0; k < 6; ++k) lines.push_back(line_at("R" + std::to_string(k), 520, 120 + 30 * k, 900, 140 + 30 * k));
  lines.push_back(line_at("F", 100, 400, 900, 420));
  for (unsigned seed : {1u, 2u, 3u}) {
    const std::vector<PageBlock> blocks = reading_order(shuffled(lines, seed));
    CHECK(block_texts(blocks) == std::vector<std::string>{"H", "L0|L1|L2", "L3|L4", "R0|R1|R2|R3|R4|R5", "F"});
    REQUIRE(blocks.size() == 5);
    CHECK(blocks[1].box.x0 == 100);
    CHECK(blocks[1].box.x1 == 480);
    CHECK(blocks[1].box.y1 == 200);
  }
}

TEST_CASE("reading_order: line numbers beside text are no table", "[page]") {
  // A condensed transcript: two pages side by side, each line of each numbered in a margin of its
  // own (1, 2, 3, ...; one number missed, as a recogniser misses a lone "1"), the lines of
  // both pages on one grid. The numbers share rows with the text, but the text is no table: each
  // column is read down, not row by row across the sheet.
  std::vector<PageLine> lines;
  std::string left_numbers, left_text, right_numbers, right_text;
  for (int k = 0; k < 12; ++k) {
    const double y0 = 100 + 24 * k, y1 = y0 + 26;  // rows that touch, as a transcript's outlines do
    const std::string n = std::to_string(k + 1), l = "L" + std::to_string(k), r = "R" + std::to_string(k);
    if (k != 0) {
      lines.push_back(line_at(n, 100, y0, 118, y1));
      left_numbers += (left_numbers.empty() ? "" : "|") + n;
    }
    lines.push_back(line_at(n, 600, y0, 618, y1));
    right_numbers += (right_numbers.empty() ? "" : "|") + n;
    lines.push_back(line_at(l, 150, y0, 540 - 10 * (k % 3), y1));
    lines.push_back(line_at(r, 650, y0, 1040 - 10 * (k % 4), y1));
    left_text += (left_text.empty() ? "" : "|") + l;
    right_text += (right_text.empty() ? "" : "|") + r;
  }
  for (unsigned seed : {1u, 2u, 3u})
    CHECK(block_texts(reading_order(shuffled(lines, seed))) ==
          std::vector<std::string>{left_numbers, left_text, right_numbers, right_text});
  // A table whose first column counts its rows is still a table, read row by row.
  std::vector<PageLine> table;
  std::vector<std::string> rows;
  for (int k = 0; k < 10; ++k) {
    const double y0 = 100 + 30 * k, y1 = y0 + 20;
    const std::string n = std::to_string(k + 1), a = "a" + std::to_string(k), b = "b" + std::to_string(k);
    table.push_back(line_at(n, 100, y0, 118, y1));
    table.push_back(line_at(a, 200, y0, 260, y1));
    table.push_back(line_at(b, 400, y0, 450, y1));
    rows.push_back(n + "|" + a + "|" + b);
  }
  CHECK(block_texts(reading_order(shuffled(table, 5))) == rows);
}

TEST_CASE("reading_order: a table and a form are read row by row", "[page]") {
  SECTION("a table of three columns of short cells") {
    std::vector<PageLine> lines;
    const double xs[3][2] = {{100, 200}, {300, 380}, {500, 560}};
    for (int row = 0; row < 4; ++row)
      for (int col = 0; col < 3; ++col)
        lines.push_back(line_at("r" + std::to_string(row) + "c" + std::to_string(col), xs[col][0], 100 + 30 * row,
                                xs[col][1], 120 + 30 * row));
    CHECK(block_texts(reading_order(shuffled(lines, 7))) ==
          std::vector<std::string>{"r0c0|r0c1|r0c2", "r1c0|r1c1|r1c2", "r2c0|r2c1|r2c2", "r3c0|r3c1|r3c2"});
  }
  SECTION("a form: short labels beside long values") {
    std::vector<PageLine> lines;
    for (int row = 0; row < 3; ++row) {
      lines.push_back(line_at("label" + std::to_string(row), 100, 100 + 40 * row, 200, 120 + 40 * row));
      lines.push_back(line_at("value" + std::to_string(row), 260, 101 + 40 * row, 900, 121 + 40 * row));
    }
    CHECK(block_texts(reading_order(shuffled(lines, 3))) ==
          std::vector<std::string>{"label0|value0", "label1|value1", "label2|value2"});
  }
}

TEST_CASE("reading_order: lines side by side, one line, none", "[page]") {
  // Close pieces of one row (a gap narrower than a line height): left to right, one block.
  const std::vector<PageLine> row = {line_at("c", 300, 12, 400, 31), line_at("a", 0, 10, 140, 30),
                                     line_at("b", 150, 11, 290, 30)};
  CHECK(block_texts(reading_order(row)) == std::vector<std::string>{"a|b|c"});
  CHECK(block_texts(reading_order({line_at("only", 5, 5, 50, 20)})) == std::vector<std::string>{"only"});
  CHECK(reading_order({}).empty());
}

TEST_CASE("page_text: lines in order, a blank line between blocks", "[page]") {
  Page page;
  page.blocks.resize(2);
  page.blocks[0].lines = {line_at("one", 0, 0, 1, 1), line_at("two", 0, 0, 1, 1)};
  page.blocks[1].lines = {line_at("three", 0, 0, 1, 1)};
  CHECK(page_text(page) == "one\ntwo\n\nthree\n");
  CHECK(page_text(Page{}) == "");
}

TEST_CASE("crop_line: random outlines over a random page read as bilinear sampling, at the edges too", "[page]") {
  // The reference: each pixel's bilinear value in double, outside the page the paper given,
  // rounded as to_pixel does. crop_line's vector path (AVX2 CPUs) takes runs of 4 columns well
  // inside the page and the scalar loop the rest; the two may round a sum differently in its
  // last bit, which can move a value that lies within 1e-9 of a half by one level: allowed, but
  // only for a few pixels in a million.
  std::mt19937 rng(77);
  int64_t pixels = 0, off_by_one = 0;
  for (int trial = 0; trial < 60; ++trial) {
    GrayImage page;
    page.width = trial % 10 == 0 ? 4 + trial % 3 : 40 + (int64_t)(rng() % 300);
    page.height = trial % 7 == 0 ? 2 : 10 + (int64_t)(rng() % 120);
    for (int64_t i = 0; i < page.width * page.height; ++i) page.pixels.push_back((uint8_t)(rng() % 256));
    std::uniform_real_distribution<double> pos(-15, (double)std::max(page.width, page.height) + 15);
    std::uniform_real_distribution<double> ang(-0.3, 0.3), len(2, 400), hgt(1.5, 60);
    const double a = ang(rng), l = len(rng), h = hgt(rng);
    const Point o{pos(rng), pos(rng)};
    const Point u{std::cos(a), std::sin(a)}, v{-std::sin(a), std::cos(a)};
    Quad q;
    q.corners = {o, Point{o.x + l * u.x, o.y + l * u.y}, Point{o.x + l * u.x + h * v.x, o.y + l * u.y + h * v.y},
                 Point{o.x + h * v.x, o.y + h * v.y}};
    const int64_t rows = trial % 3 == 0 ? 0 : 8 + (int64_t)(rng() % 40);
    const uint8_t paper = (uint8_t)(rng() % 256);
    const GrayImage crop = crop_line(page, q, rows, paper);
    INFO("trial " << trial << ": page " << page.width << "x" << page.height << ", crop " << crop.width << "x"
                  << crop.height);
    const auto& c = q.corners;
    for (int64_t y = 0; y < crop.height; ++y) {
      const double fv = ((double)y + 0.5) / (double)crop.height;
      const Point left{c[0].x + (c[3].x - c[0].x) * fv, c[0].y + (c[3].y - c[0].y) * fv};
      const Point right{c[1].x + (c[2].x - c[1].x) * fv, c[1].y + (c[2].y - c[1].y) * fv};
      for (int64_t x = 0; x < crop.width; ++x) {
        const double fu = ((double)x + 0.5) / (double)crop.width;
        const double sx = left.x + (right.x - left.x) * fu - 0.5, sy = left.y + (right.y - left.y) * fu - 0.5;
        const double fx0 = std::floor(sx), fy0 = std::floor(sy);
        const int64_t x0 = (int64_t)fx0, y0 = (int64_t)fy0;
        auto at = [&](int64_t px, int64_t py) -> double {
          return px < 0 || py < 0 || px >= page.width || py >= page.height ? (double)paper : (double)page.at(px, py);
        };
        const double fx = sx - fx0, fy = sy - fy0;
        const double value = (1 - fy) * ((1 - fx) * at(x0, y0) + fx * at(x0 + 1, y0)) +
                             fy * ((1 - fx) * at(x0, y0 + 1) + fx * at(x0 + 1, y0 + 1));
        const int want = to_pixel(value), got = crop.at(x, y);
        ++pixels;
        if (got != want) {
          REQUIRE(std::abs(got - want) == 1);
          REQUIRE(std::abs(std::clamp(value, 0.0, 255.0) + 0.5 - std::round(std::clamp(value, 0.0, 255.0) + 0.5)) < 1e-9);
          ++off_by_one;
        }
      }
    }
  }
  CHECK(pixels > 100000);
  CHECK(off_by_one * 100000 <= pixels);
}

TEST_CASE("crop_line: an upright box is copied, a turned one sampled where it lies", "[page]") {
  // A page whose gray is a linear function of the position: bilinear sampling reproduces it
  // exactly, so every crop pixel must equal the function at its centre's place.
  GrayImage page;
  page.width = 120, page.height = 80;
  auto f = [](double x, double y) { return 20 + 1.0 * x + 1.5 * y; };  // at pixel centres x + 0.5, y + 0.5
  for (int64_t y = 0; y < page.height; ++y)
    for (int64_t x = 0; x < page.width; ++x) page.pixels.push_back((uint8_t)std::lround(f((double)x + 0.5, (double)y + 0.5)));

  SECTION("an axis-aligned box at its own size is the sub-image") {
    const GrayImage crop = crop_line(page, Quad::from_rect({10, 20, 50, 30}));
    REQUIRE(crop.width == 40);
    REQUIRE(crop.height == 10);
    for (int64_t y = 0; y < 10; ++y)
      for (int64_t x = 0; x < 40; ++x) REQUIRE(crop.at(x, y) == page.at(10 + x, 20 + y));
  }
  SECTION("a box turned by 20 degrees, resized to 16 rows") {
    const double a = 20 * M_PI / 180, len = 60, h = 12;
    const Point o{30, 15};
    const Point u{std::cos(a), std::sin(a)}, v{-std::sin(a), std::cos(a)};
    Quad q;
    q.corners = {o, Point{o.x + len * u.x, o.y + len * u.y}, Point{o.x + len * u.x + h * v.x, o.y + len * u.y + h * v.y},
                 Point{o.x + h * v.x, o.y + h * v.y}};
    const GrayImage crop = crop_line(page, q, 16);
    REQUIRE(crop.height == 16);
    CHECK(crop.width == 80);  // 60 x 12 scaled to 16 rows
    for (int64_t y = 0; y < crop.height; ++y)
      for (int64_t x = 0; x < crop.width; ++x) {
        const double s = ((double)x + 0.5) / (double)crop.width * len, t = ((double)y + 0.5) / (double)crop.height * h;
        const double px = o.x + s * u.x + t * v.x, py = o.y + s * u.y + t * v.y;
        REQUIRE(std::abs((double)crop.at(x, y) - f(px, py)) <= 1.0);  // the page's own rounding, then the crop's
      }
  }
  SECTION("outside the page is the paper given; degenerate outlines are refused") {
    const GrayImage crop = crop_line(page, Quad::from_rect({-20, -10, -5, -2}), 0, 7);
    for (uint8_t p : crop.pixels) CHECK((int)p == 7);
    CHECK_THROWS_WITH(crop_line(page, Quad::from_rect({5, 5, 5.5, 20})), Catch::Contains("smaller than a pixel"));
    Quad bad = Quad::from_rect({0, 0, 10, 10});
    bad.corners[2].x = NAN;
    CHECK_THROWS_WITH(crop_line(page, bad), Catch::Contains("not finite"));
    CHECK(crop_line(page, Quad::from_rect({0, 0, 100000, 10}), 10, 255, 500).width == 500);
  }
}

TEST_CASE("reading_order: a heading whose outline reaches the columns, and narrow article columns", "[page]") {
  // Three columns of running text, each 270 wide with lines 30 high (9 line heights: a
  // three-column article at 150 dpi), on one baseline grid; a heading over all three whose
  // box reaches 5 pixels into the columns' first row, as a detector's outline of large type
  // does. The heading comes first, then each column whole, not the rows across the columns.
  std::vector<PageLine> lines;
  lines.push_back(line_at("H", 100, 40, 1000, 105));
  const double xs[3] = {100, 420, 740};
  for (int col = 0; col < 3; ++col)
    for (int row = 0; row < 5; ++row)
      lines.push_back(line_at(std::string(1, (char)('A' + col)) + std::to_string(row), xs[col], 100 + 32 * row,
                              xs[col] + 270 - (row == 4 ? 120 : 0), 130 + 32 * row));
  for (unsigned seed : {1u, 2u}) {
    INFO("seed " << seed);
    CHECK(block_texts(reading_order(shuffled(lines, seed))) ==
          std::vector<std::string>{"H", "A0|A1|A2|A3|A4", "B0|B1|B2|B3|B4", "C0|C1|C2|C3|C4"});
  }
}

TEST_CASE("reading_order: a gap across both columns (a paragraph break beside a figure) does not cut the columns",
          "[page]") {
  // A heading over two columns. The left column has a paragraph break at y 400-440; the right
  // column ends at y 330 and has a figure below it (no lines), so a horizontal gap runs across
  // the whole page there. The left column must still be read whole before the right one.
  std::vector<PageLine> lines;
  lines.push_back(line_at("H", 100, 40, 1000, 90));
  for (int row = 0; row < 10; ++row) {
    const double y = 110 + 32 * row + (row >= 9 ? 40 : 0);  // L9 after the break
    lines.push_back(line_at("L" + std::to_string(row), 100, y, 520, y + 28));
  }
  for (int row = 0; row < 7; ++row)
    lines.push_back(line_at("R" + std::to_string(row), 580, 110 + 32 * row, 1000, 138 + 32 * row));
  for (unsigned seed : {1u, 2u, 3u}) {
    INFO("seed " << seed);
    const auto blocks = block_texts(reading_order(shuffled(lines, seed)));
    std::string all;
    for (const auto& b : blocks) all += (all.empty() ? "" : "/") + b;
    CHECK(all == "H/L0|L1|L2|L3|L4|L5|L6|L7|L8/L9/R0|R1|R2|R3|R4|R5|R6");
  }
}

TEST_CASE("place_words: where the text lies along the outline", "[page]") {
  // Pitch 10 on a 100-pixel line image: the first character begins at 15, the last ends at 65.
  const PageLine l = place_words(line_result(" ab cd ", {10, 20, 30, 40, 50, 60, 70}), Quad::from_rect({0, 0, 200, 20}),
                                 100);
  CHECK(l.text_begin == Approx(0.15));
  CHECK(l.text_end == Approx(0.65));
  // A failed or empty line keeps the whole outline.
  LineResult failed;
  failed.error = "no";
  const PageLine f = place_words(failed, Quad::from_rect({0, 0, 200, 20}), 100);
  CHECK(f.text_begin == 0);
  CHECK(f.text_end == 1);
}

namespace {

// A line of the page box [x0, x1) x [y, y + 20) whose characters sit at the page x of `xs`,
// placed as the page reader places a recognised line (the line image is the box at scale 1).
PageLine placed(const std::string& text, const std::vector<double>& xs, double x0, double x1, double y) {
  std::vector<double> in_line;
  for (double x : xs) in_line.push_back(x - x0);
  return place_words(line_result(text, in_line), Quad::from_rect({x0, y, x1, y + 20}), x1 - x0);
}

// `n` characters of `text` (repeated) every 10 pixels from x.
std::pair<std::string, std::vector<double>> run_of(const std::string& text, size_t n, double x) {
  std::string s;
  std::vector<double> xs;
  for (size_t i = 0; i < n; ++i) s += text[i % text.size()], xs.push_back(x + 10 * (double)i);
  return {s, xs};
}

std::vector<std::string> texts(const std::vector<PageLine>& lines) {
  std::vector<std::string> out;
  for (const PageLine& l : lines) out.push_back(l.text);
  return out;
}

const auto same_place = [](const Point& p) { return p; };

}  // namespace

TEST_CASE("split_at_gutters: lines joined across a gutter are split there, and read column by column", "[page]") {
  // Two columns, [100, 480) and [510, 890), characters every 10 pixels, rows 24 apart, each
  // row's text another part of the sentence (so that the spaces do not line up). The detector
  // joined rows 0 to 2 across the 30-pixel gutter (as wide as a space and a half); rows 3 to 5
  // came apart.
  const std::string sentence = "the quick brown fox jumps over a lazy dog and runs far ";
  auto row_text = [&](int row, size_t from) { return sentence.substr(from + 5 * (size_t)row) + sentence; };
  std::vector<PageLine> lines;
  for (int row = 0; row < 6; ++row) {
    const double y = 100 + 24 * row;
    const auto [left, lx] = run_of(row_text(row, 0), 38, 105);
    const auto [right, rx] = run_of(row_text(row, 2), 38, 515);
    if (row < 3) {
      std::vector<double> xs = lx;
      xs.insert(xs.end(), rx.begin(), rx.end());
      lines.push_back(placed(left + right, xs, 100, 890, y));
    } else {
      lines.push_back(placed(left, lx, 100, 480, y));
      lines.push_back(placed(right, rx, 510, 890, y));
    }
  }
  // Each character's page x (the outlines are upright boxes) and the characters, spaces aside.
  auto xs_of = [](const PageLine& l) {
    std::vector<double> xs;
    const auto& c = l.outline.corners;
    for (const PageWord& w : l.words)
      for (const PageChar& ch : w.chars) xs.push_back(c[0].x + ch.centre * (c[1].x - c[0].x));
    return xs;
  };
  auto chars_of = [](const PageLine& l) {
    std::string s;
    for (const PageWord& w : l.words) s += w.text;
    return s;
  };
  const std::vector<PageLine> split = split_at_gutters(lines, same_place);
  REQUIRE(split.size() == 12);
  for (size_t i = 0; i < 3; ++i) {  // rows 0-2 are split in place: left piece, then right
    const PageLine& l = split[2 * i];
    const PageLine& r = split[2 * i + 1];
    INFO("row " << i);
    CHECK(chars_of(l) + chars_of(r) == chars_of(lines[i]));
    const std::vector<double> lx = xs_of(l), rx = xs_of(r);
    const std::string left_text = row_text((int)i, 0).substr(0, 38);
    REQUIRE(lx.size() == 38 - (size_t)std::count(left_text.begin(), left_text.end(), ' '));
    // The last character of the left column and the first of the right one (spaces aside).
    const std::string right_text = row_text((int)i, 2).substr(0, 38);
    const double left_end = 105 + 10 * (double)left_text.find_last_not_of(' ');
    const double right_start = 515 + 10 * (double)right_text.find_first_not_of(' ');
    CHECK(lx.back() == Approx(left_end).margin(1e-6));
    CHECK(rx.front() == Approx(right_start).margin(1e-6));
    CHECK(l.box.x1 == Approx(left_end + 5).margin(1e-6));  // half a pitch past the text
    CHECK(r.box.x0 == Approx(right_start - 5).margin(1e-6));
    CHECK(l.box.x0 == 100);
    CHECK(r.box.x1 == 890);
  }
  for (size_t i = 6; i < 12; ++i) CHECK(chars_of(split[i]) == chars_of(lines[i - 3]));  // rows 3-5 stay
  // Read column by column: every left piece or line before every right one.
  const std::vector<PageBlock> blocks = reading_order(split_at_gutters(shuffled(lines, 7), same_place));
  std::vector<double> x0s;
  for (const PageBlock& b : blocks)
    for (const PageLine& l : b.lines) x0s.push_back(l.box.x0);
  REQUIRE(x0s.size() == 12);
  for (size_t i = 0; i < 12; ++i) CHECK((i < 6 ? x0s[i] < 300 : x0s[i] > 480));

  // With blank_run, the band must be blank on the page too: where the page shows a blank run of
  // 4 pixels only (under min_gutter's half pitch, 5) the lines stay whole; where it shows 30, they
  // split as before. The callback is asked about the span between the two characters around
  // the band, by their fractions along the outline.
  GutterOptions inked;
  std::vector<std::pair<double, double>> asked;
  inked.blank_run = [&](const PageLine& l, double f0, double f1) {
    const auto& c = l.outline.corners;
    asked.push_back({c[0].x + f0 * (c[1].x - c[0].x), c[0].x + f1 * (c[1].x - c[0].x)});
    return 4.0;
  };
  CHECK(texts(split_at_gutters(lines, same_place, inked)) == texts(lines));
  REQUIRE(asked.size() == 3);  // once for each joined row
  for (size_t i = 0; i < 3; ++i) {
    const std::string left_text = row_text((int)i, 0).substr(0, 38);
    const std::string right_text = row_text((int)i, 2).substr(0, 38);
    CHECK(asked[i].first == Approx(105 + 10 * (double)left_text.find_last_not_of(' ')).margin(1e-6));
    CHECK(asked[i].second == Approx(515 + 10 * (double)right_text.find_first_not_of(' ')).margin(1e-6));
  }
  GutterOptions blank;
  blank.blank_run = [](const PageLine&, double, double) { return 30.0; };
  CHECK(texts(split_at_gutters(lines, same_place, blank)) == texts(split));
}

TEST_CASE("widest_blank: the widest run of inkless columns between two fractions of a line, in page pixels",
          "[page]") {
  // A page of paper (230) with ink (20) in columns 40-59 and 100-109 of rows 10-29, and a
  // speck in column 80, row 11 (in the top 10% of the cut: ignored).
  GrayImage page;
  page.width = 200, page.height = 40;
  page.pixels.assign(200 * 40, 230);
  for (int64_t y = 10; y < 30; ++y)
    for (int64_t x = 0; x < 200; ++x)
      if ((x >= 40 && x < 60) || (x >= 100 && x < 110)) page.pixels[(size_t)(y * 200 + x)] = 20;
  page.pixels[(size_t)(11 * 200 + 80)] = 20;
  const Quad line = Quad::from_rect({20, 10, 180, 30});  // 160 x 20: columns 0-159 are page x 20-179
  CHECK(widest_blank(page, line, 0, 1) == Approx(70));                    // page x 110-179
  CHECK(widest_blank(page, line, 0.25, 0.5) == Approx(40));               // page x 60-99 inside [60, 100)
  CHECK(widest_blank(page, line, 0.1, 0.3) == Approx(8));                 // page x 60-67 of [36, 68)
  CHECK(widest_blank(page, line, 0.2, 0.2) == 0);
  // The speck in the middle rows (row 20) is ink: it splits page x 60-99.
  GrayImage speck = page;
  speck.pixels[(size_t)(20 * 200 + 80)] = 20;
  CHECK(widest_blank(speck, line, 0.25, 0.5) == Approx(20));
  // A blank cut (no contrast) is blank all along.
  GrayImage paper = page;
  std::fill(paper.pixels.begin(), paper.pixels.end(), 230);
  CHECK(widest_blank(paper, line, 0.25, 0.75) == Approx(80));
  CHECK_THROWS_WITH(widest_blank(page, line, 0.6, 0.5), Catch::Contains("0 <= f0 <= f1 <= 1"));
  CHECK_THROWS_WITH(widest_blank(page, line, -0.1, 0.5), Catch::Contains("0 <= f0 <= f1 <= 1"));
  CHECK(widest_blank(page, Quad::from_rect({20, 10, 20.5, 30}), 0, 1) == 0);  // under a pixel long
}

TEST_CASE("split_at_gutters: two lines a row apart joined across the gutter are split, a tall heading stays", "[page]") {
  // The columns of the test above, every row its own line in each column, but the detector
  // joined row 2 of the left column with row 3 of the right one (a skewed page puts them side by
  // side): one outline two rows tall (44 pixels against 20), its characters at the usual pitch.
  const std::string sentence = "the quick brown fox jumps over a lazy dog and runs far ";
  auto row_text = [&](int row, size_t from) { return sentence.substr(from + 5 * (size_t)row) + sentence; };
  auto tall = [](const std::string& text, const std::vector<double>& xs, double x0, double x1, double y, double h) {
    std::vector<double> in_line;
    for (double x : xs) in_line.push_back(x - x0);
    return place_words(line_result(text, in_line), Quad::from_rect({x0, y, x1, y + h}), x1 - x0);
  };
  std::vector<PageLine> lines;
  for (int row = 0; row < 7; ++row) {
    const double y = 100 + 24 * row;
    const auto [left, lx] = run_of(row_text(row, 0), 38, 105);
    const auto [right, rx] = run_of(row_text(row, 2), 38, 515);
    if (row != 2) lines.push_back(placed(left, lx, 100, 480, y));
    if (row == 2) {
      const auto [below, bx] = run_of(row_text(3, 2), 38, 515);
      std::vector<double> xs = lx;
      xs.insert(xs.end(), bx.begin(), bx.end());
      lines.push_back(tall(left + below, xs, 100, 890, y, 44));
    } else if (row != 3) {
      lines.push_back(placed(right, rx, 510, 890, y));
    }
  }
  const std::vector<PageLine> split = split_at_gutters(lines, same_place);
  REQUIRE(split.size() == lines.size() + 1);
  // Without the joined-line rule its neighbours (under 1/1.6 of its height) were not counted.
  GutterOptions strict;
  strict.joined_height = 1e9;
  CHECK(split_at_gutters(lines, same_place, strict).size() == lines.size());

  // A heading across both columns in type twice as large (height 44, pitch 20) with a space
  // over the gutter, three rows above it and three below, is one line: it is a heading, not
  // two lines run together.
  std::vector<PageLine> with_heading;
  for (int row = 0; row < 6; ++row) {
    const double y = row < 3 ? 100 + 24 * row : 222 + 24 * (row - 3);
    const auto [left, lx] = run_of(row_text(row, 0), 38, 105);
    const auto [right, rx] = run_of(row_text(row, 2), 38, 515);
    with_heading.push_back(placed(left, lx, 100, 480, y));
    with_heading.push_back(placed(right, rx, 510, 890, y));
  }
  std::string heading;
  std::vector<double> hx;
  for (size_t k = 0; k < 40; ++k) heading += k == 18 || k == 19 ? ' ' : "Headings"[k % 8], hx.push_back(105 + 20 * (double)k);
  with_heading.push_back(tall(heading, hx, 100, 890, 172, 44));  // its space: 455-495, over the gutter
  CHECK(texts(split_at_gutters(with_heading, same_place)) == texts(with_heading));
  // Taken for two lines run together (any pitch allowed), it would be split at the gutter.
  GutterOptions any_pitch;
  any_pitch.joined_pitch = 1e9;
  CHECK(split_at_gutters(with_heading, same_place, any_pitch).size() == with_heading.size() + 1);
}

TEST_CASE("split_at_gutters: a line's first character placed apart by CTC is not cut off as a column", "[page]") {
  // Two columns as above, apart, the right one's text from x = 540; in one of its lines CTC
  // placed the first character 25 pixels early (at 515, the next at 550), a gap of 2.5 pitches
  // between the left column's edge and the right column's starts, free in every line around.
  // One character is no column: the line stays whole.
  const std::string sentence = "the quick brown fox jumps over a lazy dog and runs far ";
  std::vector<PageLine> lines;
  for (int row = 0; row < 6; ++row) {
    const double y = 100 + 24 * row;
    const auto [left, lx] = run_of(sentence.substr(5 * (size_t)row) + sentence, 38, 105);
    lines.push_back(placed(left, lx, 100, 480, y));
    auto [right, rx] = run_of(row == 2 ? "paper " + sentence : sentence.substr(5 * (size_t)row + 2) + sentence, 35, 540);
    if (row == 2) rx[0] -= 25;  // 'p' alone at 515, "aper..." from 550
    lines.push_back(placed(right, rx, 510, 890, y));
  }
  const std::vector<PageLine> split = split_at_gutters(lines, same_place);
  CHECK(texts(split) == texts(lines));
}

TEST_CASE("split_at_gutters: spaces that do not line up, or line up in two lines only, stay", "[page]") {
  // One column of six justified lines, each with a wide space (3 character places) somewhere
  // else: the lines above and below have characters there.
  std::vector<PageLine> lines;
  for (int row = 0; row < 6; ++row) {
    auto [text, xs] = run_of("abcdefg", 78, 105);
    for (size_t k = 10 + 9 * (size_t)row; k < 13 + 9 * (size_t)row; ++k) text[k] = ' ';
    lines.push_back(placed(text, xs, 100, 890, 100 + 30 * row));
  }
  CHECK(texts(split_at_gutters(lines, same_place)) == texts(lines));
  // Two lines whose wide spaces line up, and nothing else around: no column's edges.
  std::vector<PageLine> two;
  for (int row = 0; row < 2; ++row) {
    auto [text, xs] = run_of("abcdefg", 78, 105);
    for (size_t k = 30; k < 33; ++k) text[k] = ' ';
    two.push_back(placed(text, xs, 100, 890, 100 + 30 * row));
  }
  CHECK(texts(split_at_gutters(two, same_place)) == texts(two));
  // The first characters of a paragraph's lines set apart from the rest (as CTC can place
  // them): a band beside one character of each line is no gutter.
  std::vector<PageLine> first;
  for (int row = 0; row < 6; ++row) {
    auto [text, xs] = run_of("abcdefg", 40, 105);
    for (size_t k = 1; k < xs.size(); ++k) xs[k] += 25;
    first.push_back(placed(text, xs, 100, 890, 100 + 30 * row));
  }
  CHECK(texts(split_at_gutters(first, same_place)) == texts(first));
}

TEST_CASE("reading_order: a narrow gutter splits columns when five lines line up on each side", "[page]") {
  // Columns 6 pixels apart (0.3 line heights, under column_gap's 0.5).
  auto columns = [](int rows) {
    std::vector<PageLine> lines;
    for (int k = 0; k < rows; ++k) {
      lines.push_back(line_at("L" + std::to_string(k), 100, 100 + 25 * k, 400, 120 + 25 * k));
      lines.push_back(line_at("R" + std::to_string(k), 406, 100 + 25 * k, 700, 120 + 25 * k));
    }
    return lines;
  };
  CHECK(block_texts(reading_order(shuffled(columns(6), 3))) ==
        std::vector<std::string>{"L0|L1|L2|L3|L4|L5", "R0|R1|R2|R3|R4|R5"});
  // Three lines a side are too few to tell a gutter from spaces that happen to line up: read
  // row by row.
  CHECK(block_texts(reading_order(shuffled(columns(3), 3))) == std::vector<std::string>{"L0|R0", "L1|R1", "L2|R2"});
}

TEST_CASE("reading_order: narrow lines over a gutter (a centred title, a page number, a joined line) cut it", "[page]") {
  // Two columns of eight lines, 20 pixels apart, under a centred title and over a centred page
  // number, both narrower than half the page and both over the gutter.
  auto page = [](bool joined) {
    std::vector<PageLine> lines;
    lines.push_back(line_at("title", 300, 40, 500, 70));
    for (int k = 0; k < 8; ++k) {
      const double y = 100 + 25 * k;
      if (joined && k == 4) {  // the detector ran row 4 of both columns into one line
        lines.push_back(line_at("L4R4", 100, y, 700, y + 20));
        continue;
      }
      lines.push_back(line_at("L" + std::to_string(k), 100, y, 390, y + 20));
      lines.push_back(line_at("R" + std::to_string(k), 410, y, 700, y + 20));
    }
    lines.push_back(line_at("7", 390, 340, 410, 360));
    return lines;
  };
  CHECK(block_texts(reading_order(shuffled(page(false), 5))) ==
        std::vector<std::string>{"title", "L0|L1|L2|L3|L4|L5|L6|L7", "R0|R1|R2|R3|R4|R5|R6|R7", "7"});
  // A line across the gutter in the middle: the columns above it, it, the columns below.
  CHECK(block_texts(reading_order(shuffled(page(true), 5))) ==
        std::vector<std::string>{"title", "L0|L1|L2|L3", "R0|R1|R2|R3", "L4R4", "L5|L6|L7", "R5|R6|R7", "7"});
  // A table whose cells one line runs across stays a table, read row by row.
  std::vector<PageLine> table;
  for (int k = 0; k < 6; ++k) {
    const double y = 100 + 25 * k;
    table.push_back(line_at("a" + std::to_string(k), 100, y, 160, y + 20));
    if (k == 2) {
      table.push_back(line_at("bc2", 200, y, 420, y + 20));
      continue;
    }
    table.push_back(line_at("b" + std::to_string(k), 200, y, 260, y + 20));
    table.push_back(line_at("c" + std::to_string(k), 360, y, 420, y + 20));
  }
  const std::vector<std::string> rows = block_texts(reading_order(shuffled(table, 9)));
  REQUIRE(rows.size() == 6);
  CHECK(rows[2] == "a2|bc2");
  CHECK(rows[5] == "a5|b5|c5");
}

TEST_CASE("lengthen: an outline grows at both ends along its text, by a share of its height", "[page]") {
  // Upright: 200 x 20 from (100, 50); pad 0.25 adds 5 pixels at each end.
  const Quad q = lengthen(Quad::from_rect({100, 50, 300, 70}), 0.25);
  CHECK(q.corners[0].x == Approx(95));
  CHECK(q.corners[1].x == Approx(305));
  CHECK(q.corners[2].x == Approx(305));
  CHECK(q.corners[3].x == Approx(95));
  for (const Point& p : q.corners) CHECK((p.y == Approx(50) || p.y == Approx(70)));
  // Turned 90 degrees (text running down): it grows along y, not x.
  Quad down;
  down.corners = {Point{200, 100}, Point{200, 300}, Point{180, 300}, Point{180, 100}};
  const Quad d = lengthen(down, 0.5);
  CHECK(d.corners[0].y == Approx(90));
  CHECK(d.corners[1].y == Approx(310));
  CHECK(d.corners[2].y == Approx(310));
  CHECK(d.corners[3].y == Approx(90));
  CHECK(d.corners[0].x == Approx(200));
  CHECK(d.corners[2].x == Approx(180));
  // No pad, or a degenerate outline: unchanged.
  const Quad same = lengthen(down, 0);
  for (size_t k = 0; k < 4; ++k) CHECK((same.corners[k].x == down.corners[k].x && same.corners[k].y == down.corners[k].y));
}

TEST_CASE("reading_order: running text beside a column that holds a table is read column by column", "[page]") {
  // Left: 12 lines of running text (600 pixels, 30 line heights), 30 apart. Right: a line of
  // text, then a table of 10 rows of two cells at its own pitch of 24, then another line.
  std::vector<PageLine> lines;
  for (int k = 0; k < 12; ++k) lines.push_back(line_at("L" + std::to_string(k), 100, 100 + 30 * k, 700, 120 + 30 * k));
  lines.push_back(line_at("Rtop", 760, 100, 1360, 120));
  for (int k = 0; k < 10; ++k) {
    const double y = 135 + 24 * k;
    lines.push_back(line_at("name" + std::to_string(k), 760, y, 900, y + 20));
    lines.push_back(line_at("value" + std::to_string(k), 1280, y, 1360, y + 20));
  }
  lines.push_back(line_at("Rend", 760, 400, 1360, 420));
  std::vector<std::string> order;
  for (const PageBlock& b : reading_order(shuffled(lines, 11)))
    for (const PageLine& l : b.lines) order.push_back(l.text);
  REQUIRE(order.size() == lines.size());
  for (size_t i = 0; i < 12; ++i) CHECK(order[i] == "L" + std::to_string(i));
  CHECK(order[12] == "Rtop");
  CHECK(order.back() == "Rend");
}

TEST_CASE("reading_order: a dense table whose rows touch is read row by row", "[page]") {
  // Three columns of cells, 8 rows 20 apart whose outlines are 24 high: no gap runs across
  // the table between its rows, so it is one band; read line by line across, not by columns.
  std::vector<PageLine> lines;
  const double xs[3][2] = {{100, 260}, {400, 470}, {600, 670}};
  std::vector<std::string> rows;
  for (int row = 0; row < 8; ++row) {
    std::string r;
    for (int col = 0; col < 3; ++col) {
      const std::string text = "r" + std::to_string(row) + "c" + std::to_string(col);
      lines.push_back(line_at(text, xs[col][0], 100 + 20 * row, xs[col][1], 124 + 20 * row));
      r += (r.empty() ? "" : "|") + text;
    }
    rows.push_back(r);
  }
  std::string all;
  for (const std::string& r : rows) all += (all.empty() ? "" : "|") + r;
  CHECK(block_texts(reading_order(shuffled(lines, 5))) == std::vector<std::string>{all});
}

TEST_CASE("reading_order: a wide column holding a table and paragraphs, beside a column of text", "[page]") {
  // A report page (multicol_04 of bench/results/pages.md): left, a table of 8 rows of three
  // cells 40 apart, then 6 lines of a paragraph across the column; right, a column of lines
  // 7 line heights wide at its own pitch of 44, with a paragraph break where the left one has
  // its break, so that a gap runs across the page there. The outlines are as tall as the
  // pitch, as a detector's margins make them (no gap between rows). The right column's lines
  // share rows with the table's, but sit on the left's baselines only by chance: read the
  // left column (the table row by row), then the right one.
  std::vector<PageLine> lines;
  std::vector<std::string> expected;
  const double cells[3][2] = {{100, 300}, {420, 510}, {600, 680}};
  for (int row = 0; row < 8; ++row)
    for (int col = 0; col < 3; ++col) {
      const std::string text = "t" + std::to_string(row) + std::to_string(col);
      lines.push_back(line_at(text, cells[col][0], 100 + 40 * row, cells[col][1], 142 + 40 * row));
      expected.push_back(text);
    }
  for (int k = 0; k < 6; ++k) {
    lines.push_back(line_at("P" + std::to_string(k), 90, 460 + 40 * k, 700, 502 + 40 * k));
    expected.push_back("P" + std::to_string(k));
  }
  for (int k = 0; k < 14; ++k) {
    const double y = k < 8 ? 100 + 44 * k : 460 + 44 * (k - 8);
    lines.push_back(line_at("R" + std::to_string(k), 760, y, 1060, y + 46));
    expected.push_back("R" + std::to_string(k));
  }
  std::vector<std::string> order;
  for (const PageBlock& b : reading_order(shuffled(lines, 13)))
    for (const PageLine& l : b.lines) order.push_back(l.text);
  CHECK(order == expected);
}

namespace {

// A white 400 x 120 page with dark boxes (x0, x1) on rows 40-63: glyphs of a line whose
// detector outline would be rows 36-68 (32 high).
GrayImage glyph_page(const std::vector<std::pair<int, int>>& glyphs) {
  GrayImage page;
  page.width = 400, page.height = 120;
  page.pixels.assign(400 * 120, 255);
  for (const auto& [x0, x1] : glyphs)
    for (int y = 40; y < 64; ++y)
      for (int x = x0; x < x1; ++x) page.pixels[(size_t)(y * 400 + x)] = 0;
  return page;
}

// The page turned so that its rows become columns (text then runs down the page).
GrayImage transposed(const GrayImage& page) {
  GrayImage t;
  t.width = page.height, t.height = page.width;
  t.pixels.resize(page.pixels.size());
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < t.width; ++x) t.pixels[(size_t)(y * t.width + x)] = page.at(y, x);
  return t;
}

}  // namespace

TEST_CASE("fit_ends_to_ink: an end that cuts a glyph moves out past it, other ends keep the plain pad", "[page]") {
  // Three glyphs 2 pixels apart (100-110, 112-122, 124-134) and a neighbour word 16 pixels on
  // (150-160). The outline 104-128 cuts the first and the last glyph; with pad 0.15 (4.8
  // pixels at height 32) its ends go 4.8 pixels past x = 100 and x = 134, not to the neighbour.
  const GrayImage page = glyph_page({{100, 110}, {112, 122}, {124, 134}, {150, 160}});
  const Quad cut = Quad::from_rect({104, 36, 128, 68});
  const Quad fit = fit_ends_to_ink(page, cut, 0.15);
  CHECK(fit.corners[0].x == Approx(100 - 4.8).margin(1));
  CHECK(fit.corners[3].x == Approx(100 - 4.8).margin(1));
  CHECK(fit.corners[1].x == Approx(134 + 4.8).margin(1));
  CHECK(fit.corners[2].x == Approx(134 + 4.8).margin(1));
  for (const Point& p : fit.corners) CHECK((p.y == Approx(36) || p.y == Approx(68)));
  // An outline whose ends lie in blank space already: the plain pad (lengthen), exactly.
  const Quad whole = Quad::from_rect({96, 36, 139, 68});
  const Quad kept = fit_ends_to_ink(page, whole, 0.15), plain = lengthen(whole, 0.15);
  for (size_t k = 0; k < 4; ++k) CHECK((kept.corners[k].x == plain.corners[k].x && kept.corners[k].y == plain.corners[k].y));
  // Light text on a dark ground: the same ends.
  GrayImage inverted = page;
  for (uint8_t& v : inverted.pixels) v = (uint8_t)(255 - v);
  const Quad fit_inverted = fit_ends_to_ink(inverted, cut, 0.15);
  for (size_t k = 0; k < 4; ++k) CHECK(fit_inverted.corners[k].x == Approx(fit.corners[k].x).margin(0.01));
  // Text running down the page (the page transposed, the outline with it): the same, along y.
  const GrayImage down = transposed(page);
  Quad cut_down;
  cut_down.corners = {Point{36, 104}, Point{36, 128}, Point{68, 128}, Point{68, 104}};
  const Quad fit_down = fit_ends_to_ink(down, cut_down, 0.15);
  CHECK(fit_down.corners[0].y == Approx(100 - 4.8).margin(1));
  CHECK(fit_down.corners[1].y == Approx(134 + 4.8).margin(1));
  CHECK(fit_down.corners[0].x == Approx(36));
}

TEST_CASE("fit_ends_to_ink: a rule, ink beyond the reach, a blank or flat line and a tiny outline keep the plain pad",
          "[page]") {
  const Quad cut = Quad::from_rect({104, 36, 128, 68});
  const Quad plain = lengthen(cut, 0.15);
  auto same = [&](const Quad& q) {
    for (size_t k = 0; k < 4; ++k)
      if (!(q.corners[k].x == plain.corners[k].x && q.corners[k].y == plain.corners[k].y)) return false;
    return true;
  };
  // A rule through the line's middle band, across the page: ink runs on to the reach.
  GrayImage ruled = glyph_page({{100, 110}, {112, 122}, {124, 134}});
  for (int x = 0; x < 400; ++x) ruled.pixels[(size_t)(50 * 400 + x)] = 0;
  CHECK(same(fit_ends_to_ink(ruled, cut, 0.15)));
  // Glyphs set closer than the gap (pad x height) for longer than the reach (0.6 x 32 pixels).
  std::vector<std::pair<int, int>> dense;
  for (int x = 20; x < 380; x += 8) dense.push_back({x, x + 6});
  CHECK(same(fit_ends_to_ink(glyph_page(dense), cut, 0.15)));
  // No reach: the plain pad.
  CHECK(same(fit_ends_to_ink(glyph_page({{100, 110}, {124, 134}}), cut, 0.15, 0)));
  // A blank page, and a line of faint marks (less than 48 grey levels of contrast).
  CHECK(same(fit_ends_to_ink(glyph_page({}), cut, 0.15)));
  GrayImage faint = glyph_page({{100, 110}, {124, 134}});
  for (uint8_t& v : faint.pixels) v = v == 0 ? 220 : 255;
  CHECK(same(fit_ends_to_ink(faint, cut, 0.15)));
  // An outline under a pixel high, and one beyond the page's edge: no crash, the plain pad.
  const Quad thin = Quad::from_rect({104, 50, 128, 50.5});
  const Quad thin_fit = fit_ends_to_ink(glyph_page({{100, 110}}), thin, 0.15), thin_plain = lengthen(thin, 0.15);
  CHECK(thin_fit.corners[1].x == thin_plain.corners[1].x);
  const Quad off = Quad::from_rect({380, 36, 420, 68});
  const Quad off_fit = fit_ends_to_ink(glyph_page({{390, 400}}), off, 0.15);
  CHECK(std::isfinite(off_fit.corners[1].x));
}

TEST_CASE("grow_into_blank: an outline grows by half the blank rows beside it, up to its reach", "[page]") {
  // Glyphs on rows 40-63 (glyph_page); the outline is exactly them, 24 high: with reach 0.5
  // (12 rows) and nothing above or below, it grows by 6 rows each side.
  const GrayImage page = glyph_page({{100, 110}, {112, 122}, {124, 134}});
  const Quad tight = Quad::from_rect({98, 40, 136, 64});
  const Quad grown = grow_into_blank(page, tight, 0.5);
  CHECK(grown.corners[0].y == Approx(34).margin(0.6));
  CHECK(grown.corners[1].y == Approx(34).margin(0.6));
  CHECK(grown.corners[2].y == Approx(70).margin(0.6));
  CHECK(grown.corners[3].y == Approx(70).margin(0.6));
  CHECK(grown.corners[0].x == Approx(98));
  CHECK(grown.corners[1].x == Approx(136));
  // A neighbouring line 4 rows above (rows 30-35 inked across): the outline grows by half of
  // the 4 blank rows there, and by the full half-reach below.
  GrayImage near = page;
  for (int y = 30; y < 36; ++y)
    for (int x = 90; x < 150; ++x) near.pixels[(size_t)(y * 400 + x)] = 0;
  const Quad beside = grow_into_blank(near, tight, 0.5);
  CHECK(beside.corners[0].y == Approx(38).margin(0.6));
  CHECK(beside.corners[3].y == Approx(70).margin(0.6));
  // Text running down the page (transposed): the same, along x.
  const GrayImage down = transposed(page);
  Quad tight_down;
  tight_down.corners = {Point{64, 98}, Point{64, 136}, Point{40, 136}, Point{40, 98}};
  const Quad grown_down = grow_into_blank(down, tight_down, 0.5);
  CHECK(grown_down.corners[0].x == Approx(70).margin(0.6));
  CHECK(grown_down.corners[3].x == Approx(34).margin(0.6));
  // No reach, a blank page, a tiny outline: unchanged.
  auto same = [](const Quad& a, const Quad& b) {
    for (size_t k = 0; k < 4; ++k)
      if (!(a.corners[k].x == b.corners[k].x && a.corners[k].y == b.corners[k].y)) return false;
    return true;
  };
  CHECK(same(grow_into_blank(page, tight, 0), tight));
  CHECK(same(grow_into_blank(glyph_page({}), tight, 0.5), tight));
  const Quad thin = Quad::from_rect({100, 50, 130, 50.5});
  CHECK(same(grow_into_blank(page, thin, 0.5), thin));
}

namespace {

// A line image 40 rows high on paper 230: glyph-like blocks of ink (20) 24 rows high and 12 to
// 36 columns wide with gaps between them, from row 8 to 31, as a word line would have.
GrayImage glyph_line(int64_t width) {
  GrayImage g;
  g.width = width, g.height = 40;
  g.pixels.assign((size_t)(width * 40), 230);
  for (int64_t x0 = 4, k = 0; x0 + 36 < width; x0 += 44, ++k) {
    const int64_t w = 12 + (k % 3) * 12;
    for (int64_t y = 8; y < 32; ++y)
      for (int64_t x = x0; x < x0 + w; ++x) g.pixels[(size_t)(y * width + x)] = 20;
  }
  return g;
}

}  // namespace

TEST_CASE("erase_rules: an underline and its fringe become paper, glyphs stay, light print on dark too", "[page]") {
  const GrayImage glyphs = glyph_line(400);
  GrayImage line = glyphs;
  // An underline 2 rows thick under the glyphs (rows 33-34) with a grey fringe (row 35), and a
  // rule through the glyphs' bottom row (row 31, ink there already) from x 0 to 399.
  for (int64_t x = 0; x < 400; ++x) {
    line.pixels[(size_t)(33 * 400 + x)] = line.pixels[(size_t)(34 * 400 + x)] = 10;
    line.pixels[(size_t)(35 * 400 + x)] = 160;
  }
  GrayImage erased = line;
  CHECK(erase_rules(erased) == 2);
  for (int64_t x = 0; x < 400; ++x) {
    CHECK(erased.pixels[(size_t)(33 * 400 + x)] == 230);
    CHECK(erased.pixels[(size_t)(34 * 400 + x)] == 230);
    CHECK(erased.pixels[(size_t)(35 * 400 + x)] == 230);
  }
  for (int64_t y = 0; y < 33; ++y)
    for (int64_t x = 0; x < 400; ++x) REQUIRE(erased.pixels[(size_t)(y * 400 + x)] == glyphs.pixels[(size_t)(y * 400 + x)]);

  // Light print on a dark slide: the same picture inverted, erased to the dark paper.
  GrayImage light = line;
  for (uint8_t& p : light.pixels) p = (uint8_t)(255 - p);
  CHECK(erase_rules(light) == 2);
  for (int64_t x = 0; x < 400; ++x) CHECK(light.pixels[(size_t)(34 * 400 + x)] == 25);
  for (int64_t y = 8; y < 32; ++y) CHECK(light.pixels[(size_t)(y * 400 + 4)] == 235);  // a glyph's ink stays
}

TEST_CASE("erase_rules: glyphs, short strokes, faint or tiny images are left alone, bad arguments throw", "[page]") {
  // The widest run of ink a glyph line has is its widest block (36 columns, under a height).
  GrayImage glyphs = glyph_line(400);
  const GrayImage before = glyphs;
  CHECK(erase_rules(glyphs) == 0);
  CHECK(glyphs.pixels == before.pixels);
  // A stroke 99 columns long (under 2.5 heights of 40 rows): kept; 100 long: erased.
  GrayImage stroke = before;
  for (int64_t x = 100; x < 199; ++x) stroke.pixels[(size_t)(36 * 400 + x)] = 20;
  CHECK(erase_rules(stroke) == 0);
  stroke.pixels[(size_t)(36 * 400 + 199)] = 20;
  CHECK(erase_rules(stroke) == 1);
  CHECK(stroke.pixels[(size_t)(36 * 400 + 150)] == 230);
  // A longer min_run keeps it.
  GrayImage kept = before;
  for (int64_t x = 0; x < 400; ++x) kept.pixels[(size_t)(36 * 400 + x)] = 20;
  CHECK(erase_rules(kept, 12) == 0);
  // Low contrast (a faint rule on faint glyphs, 40 levels apart): left as it is.
  GrayImage faint = kept;
  for (uint8_t& p : faint.pixels) p = p == 20 ? 190 : p;
  const GrayImage faint_before = faint;
  CHECK(erase_rules(faint) == 0);
  CHECK(faint.pixels == faint_before.pixels);
  // Tiny and empty images; an inconsistent image and a bad min_run throw.
  GrayImage one;
  one.width = one.height = 1;
  one.pixels = {0};
  CHECK(erase_rules(one) == 0);
  GrayImage none;
  CHECK(erase_rules(none) == 0);
  GrayImage broken = before;
  broken.pixels.pop_back();
  CHECK_THROWS_WITH(erase_rules(broken), Catch::Contains("inconsistent"));
  CHECK_THROWS_WITH(erase_rules(glyphs, 0), Catch::Contains("min_run"));
  CHECK_THROWS_WITH(erase_rules(glyphs, std::nan("")), Catch::Contains("min_run"));
}

namespace {

// A line image 40 pixels high, white, with each glyph a dark block of its width over rows 8 to
// 31 after a left margin, and a gap after it; the reading puts each character at its block's
// centre, or where `at` says (an x of its own).
struct InkLine {
  GrayImage image;
  LineResult reading;
};

InkLine ink_line(const std::string& text, const std::vector<int>& widths, const std::vector<int>& gaps, int margin = 10,
                 uint8_t ink = 0, const std::vector<double>& at = {}) {
  REQUIRE(text.size() == widths.size());
  REQUIRE(text.size() == gaps.size());
  InkLine l;
  int64_t W = margin;
  for (size_t i = 0; i < text.size(); ++i) W += widths[i] + gaps[i];
  l.image.width = W + margin, l.image.height = 40;
  l.image.pixels.assign((size_t)(l.image.width * 40), 255);
  l.reading.name = "line";
  l.reading.text = text;
  l.reading.confidence = 0.9;
  int64_t x = margin;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ' ')
      for (int64_t y = 8; y < 32; ++y)
        for (int64_t c = x; c < x + widths[i]; ++c) l.image.pixels[(size_t)(y * l.image.width + c)] = ink;
    const double centre = at.empty() || at[i] < 0 ? (double)x + 0.5 * widths[i] : at[i];
    l.reading.chars.push_back({std::string(1, text[i]), (int64_t)(2 * i), centre, 0.6 + 0.01 * (double)i});
    x += widths[i] + gaps[i];
  }
  return l;
}

}  // namespace

TEST_CASE("join_address_spaces: a space read after a full stop in an e-mail address goes where the ink has no gap",
          "[page]") {
  auto join = [](const std::string& text, const std::vector<int>& widths, const std::vector<int>& gaps,
                 int64_t expected) {
    InkLine l = ink_line(text, widths, gaps);
    CHECK(join_address_spaces(l.reading, l.image, 0.15) == expected);
    CHECK(l.reading.chars.size() == l.reading.text.size());
    return l.reading.text;
  };
  // "ab. Cd@ef": 2 blank columns between "." and "C", under 0.15 of 40 (6).
  const std::vector<int> widths{6, 6, 2, 0, 6, 6, 6, 6, 6};
  CHECK(join("ab. Cd@ef", widths, {2, 2, 1, 1, 2, 2, 2, 2, 0}, 1) == "ab.Cd@ef");
  CHECK(join("ab_ Cd@ef", widths, {2, 2, 1, 1, 2, 2, 2, 2, 0}, 1) == "ab_Cd@ef");
  // A word gap in the ink (10 columns) stays: a sentence ending before an address.
  CHECK(join("ab. Cd@ef", widths, {2, 2, 5, 5, 2, 2, 2, 2, 0}, 0) == "ab. Cd@ef");
  // No '@' in the next word, a comma before the space, or the '@' a word further on: kept.
  CHECK(join("ab. Cdxef", widths, {2, 2, 1, 1, 2, 2, 2, 2, 0}, 0) == "ab. Cdxef");
  CHECK(join("ab, Cd@ef", widths, {2, 2, 1, 1, 2, 2, 2, 2, 0}, 0) == "ab, Cd@ef");
  CHECK(join("a. b c@de", {6, 2, 0, 6, 0, 6, 6, 6, 6}, {2, 1, 1, 2, 2, 2, 2, 2, 0}, 0) == "a. b c@de");
  // Failed lines, faint images and min_gap 0 are left alone.
  InkLine failed = ink_line("ab. Cd@ef", widths, {2, 2, 1, 1, 2, 2, 2, 2, 0});
  failed.reading.error = "failed";
  CHECK(join_address_spaces(failed.reading, failed.image, 0.15) == 0);
  InkLine faint = ink_line("ab. Cd@ef", widths, {2, 2, 1, 1, 2, 2, 2, 2, 0}, 10, 220);
  CHECK(join_address_spaces(faint.reading, faint.image, 0.15) == 0);
  InkLine off = ink_line("ab. Cd@ef", widths, {2, 2, 1, 1, 2, 2, 2, 2, 0});
  CHECK(join_address_spaces(off.reading, off.image, 0) == 0);
  CHECK(off.reading.text == "ab. Cd@ef");
}

namespace {

// A line image 40 pixels high, white, each glyph a dark block 6 wide and 2 apart from its tops[i]
// down to row 31, words 14 apart; the reading puts each character at its block's centre and
// each space in the middle of its gap.
InkLine cap_line(const std::string& text, const std::vector<int>& tops) {
  REQUIRE(text.size() == tops.size());
  InkLine l;
  int64_t W = 10;
  for (char c : text) W += c == ' ' ? 14 : 8;
  l.image.width = W + 10, l.image.height = 40;
  l.image.pixels.assign((size_t)(l.image.width * 40), 255);
  l.reading.name = "line";
  l.reading.text = text;
  l.reading.confidence = 0.9;
  int64_t x = 10;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ' ') {
      l.reading.chars.push_back({" ", (int64_t)(2 * i), (double)x + 6, 0.9});
      x += 14;
      continue;
    }
    for (int64_t y = tops[i]; y < 32; ++y)
      for (int64_t c = x; c < x + 6; ++c) l.image.pixels[(size_t)(y * l.image.width + c)] = 0;
    l.reading.chars.push_back({std::string(1, text[i]), (int64_t)(2 * i), (double)x + 3, 0.9});
    x += 8;
  }
  return l;
}

}  // namespace

TEST_CASE("lower_small_caps: a capital and small capitals read as capitals are put back in lower case", "[page]") {
  auto lower = [](const std::string& text, const std::vector<int>& tops, int64_t expected) {
    InkLine l = cap_line(text, tops);
    CHECK(lower_small_caps(l.reading, l.image) == expected);
    CHECK(l.reading.chars.size() == l.reading.text.size());
    return l.reading.text;
  };
  // Capitals 24 high (rows 8-31), small capitals 17 (rows 15-31): 7 rows lower, 0.29 of 24.
  CHECK(lower("DAVENPORT", {8, 15, 15, 15, 15, 15, 15, 15, 15}, 1) == "Davenport");
  CHECK(lower("THE DAVENPORT CO", {8, 8, 8, -1, 8, 15, 15, 15, 15, 15, 15, 15, 15, -1, 8, 15}, 1) ==
        "THE Davenport CO");  // capitals stay; two letters are too few
  CHECK(lower("SAMPLE:", {8, 15, 15, 15, 15, 15, 20}, 1) == "Sample:");
  CHECK(lower("YANK's", {8, 15, 15, 15, 8, 20}, 1) == "Yank's");  // a possessive after the letters
  CHECK(lower("YANK'S", {8, 15, 15, 15, 8, 15}, 0) == "YANK'S");  // no capital after the apostrophe
  // Capitals alike, small capitals alone, tops that disagree, or a drop too small or too large:
  // as read.
  CHECK(lower("COMPANY", {8, 8, 8, 8, 8, 8, 8}, 0) == "COMPANY");
  CHECK(lower("COMPANY", {15, 15, 15, 15, 15, 15, 15}, 0) == "COMPANY");
  CHECK(lower("COMPANY", {8, 15, 8, 15, 15, 15, 15}, 0) == "COMPANY");
  CHECK(lower("COMPANY", {8, 10, 10, 10, 10, 10, 10}, 0) == "COMPANY");
  CHECK(lower("COMPANY", {8, 22, 22, 22, 22, 22, 22}, 0) == "COMPANY");
  // Small capitals read partly as lower case already: the capitals among them are lowered; a
  // capital as tall as the first inside a word ("McDonald") keeps the word as read.
  CHECK(lower("MasKING", {8, 15, 15, 15, 15, 15, 15}, 1) == "Masking");
  CHECK(lower("McDONALD", {8, 15, 8, 15, 15, 15, 15, 15}, 0) == "McDONALD");
  CHECK(lower("McDonald", {8, 15, 8, 15, 15, 15, 15, 15}, 0) == "McDonald");
  // The least drop is the caller's: 0.35 of the first glyph's 23 rows is more than these 7; 0
  // lowers nothing.
  InkLine strict = cap_line("DAVENPORT", {8, 15, 15, 15, 15, 15, 15, 15, 15});
  CHECK(lower_small_caps(strict.reading, strict.image, 0.35) == 0);
  CHECK(lower_small_caps(strict.reading, strict.image, 0) == 0);
  CHECK(lower_small_caps(strict.reading, strict.image, 0.1) == 1);
  // Lower case, digits and marks inside the word are not small capitals' business.
  CHECK(lower("Company", {8, 15, 15, 15, 15, 15, 15}, 0) == "Company");
  CHECK(lower("A1B2C3D", {8, 15, 15, 15, 15, 15, 15}, 0) == "A1B2C3D");
  CHECK(lower("CO-OPS", {8, 15, 24, 15, 15, 15}, 0) == "CO-OPS");
  // Two small capitals touching (one run for two letters) still count; the first letter touching
  // the second does not stand on its own: the word stays.
  InkLine touching = cap_line("DAVENPORT", {8, 15, 15, 15, 15, 15, 15, 15, 15});
  for (int64_t y = 15; y < 32; ++y)
    for (int64_t c = 32; c < 34; ++c) touching.image.pixels[(size_t)(y * touching.image.width + c)] = 0;
  CHECK(lower_small_caps(touching.reading, touching.image) == 1);
  CHECK(touching.reading.text == "Davenport");
  InkLine first = cap_line("DAVENPORT", {8, 15, 15, 15, 15, 15, 15, 15, 15});
  for (int64_t y = 15; y < 32; ++y)
    for (int64_t c = 16; c < 18; ++c) first.image.pixels[(size_t)(y * first.image.width + c)] = 0;
  CHECK(lower_small_caps(first.reading, first.image) == 0);
  // Ink above a blank row over the first glyph (a descender of the line above) is not its top;
  // ink that runs off the top of the cut makes the word stay.
  InkLine above = cap_line("DAVENPORT", {15, 15, 15, 15, 15, 15, 15, 15, 15});
  for (int64_t y = 4; y < 7; ++y)  // above the middle band (rows 8-31), rows 7-14 blank
    for (int64_t c = 10; c < 16; ++c) above.image.pixels[(size_t)(y * above.image.width + c)] = 0;
  CHECK(lower_small_caps(above.reading, above.image) == 0);
  InkLine off_top = cap_line("DAVENPORT", {0, 15, 15, 15, 15, 15, 15, 15, 15});
  CHECK(lower_small_caps(off_top.reading, off_top.image) == 0);
  // A failed line is left alone.
  InkLine failed = cap_line("DAVENPORT", {8, 15, 15, 15, 15, 15, 15, 15, 15});
  failed.reading.error = "failed";
  CHECK(lower_small_caps(failed.reading, failed.image) == 0);
}

TEST_CASE("split_at_ink_gaps: a word gap read run together gets its space", "[page]") {
  // "abcdefgh": gaps of 2 pixels, and one of 10 (a quarter of the height) after "d".
  InkLine l = ink_line("abcdefgh", {6, 6, 6, 6, 6, 6, 6, 6}, {2, 2, 2, 10, 2, 2, 2, 0});
  CHECK(split_at_ink_gaps(l.reading, l.image, 0.15, 2.5) == 1);
  CHECK(l.reading.text == "abcd efgh");
  REQUIRE(l.reading.chars.size() == 9);
  const CharPosition& space = l.reading.chars[4];
  CHECK(space.ch == " ");
  CHECK(space.x == Approx(10 + 4 * 6 + 3 * 2 + 4.5));  // the middle of the 10 blank columns
  CHECK(space.frame == (6 + 8) / 2);
  CHECK(space.confidence == Approx(0.63));  // the lower of "d" (0.63) and "e" (0.64)
  CHECK(l.reading.chars[5].ch == "e");
  CHECK(l.reading.confidence == 0.9);  // the line's own confidence stays
  // Once in, nothing more: the gaps beside the space are not measured again.
  CHECK(split_at_ink_gaps(l.reading, l.image, 0.15, 2.5) == 0);
  CHECK(l.reading.text == "abcd efgh");

  // Two word gaps, one already read as a space.
  InkLine two = ink_line("ab cdefg", {6, 6, 6, 6, 6, 6, 6, 6}, {2, 0, 12, 2, 2, 12, 2, 0});
  CHECK(split_at_ink_gaps(two.reading, two.image, 0.15, 2.5) == 1);
  CHECK(two.reading.text == "ab cde fg");
}

TEST_CASE("split_at_ink_gaps: narrow gaps, wide letter-spacing and the marks that hold on stay as read", "[page]") {
  const std::vector<int> six(8, 6);
  auto split = [&](const std::string& text, const std::vector<int>& widths, const std::vector<int>& gaps) {
    InkLine l = ink_line(text, widths, gaps);
    const int64_t added = split_at_ink_gaps(l.reading, l.image, 0.15, 2.5);
    CHECK(l.reading.text.size() == text.size() + (size_t)added);
    return l.reading.text;
  };
  // 5 columns are under 0.15 of 40 (6).
  CHECK(split("abcdefgh", six, {2, 2, 2, 5, 2, 2, 2, 0}) == "abcdefgh");
  // Letters spaced 5 apart: a gap of 10 is under 2.5 times their median.
  CHECK(split("abcdefgh", six, {5, 5, 5, 10, 5, 5, 5, 0}) == "abcdefgh");
  CHECK(split("abcdefgh", six, {5, 5, 5, 13, 5, 5, 5, 0}) == "abcd efgh");
  // Digits and the marks of numbers never part; a comma holds on to the word before it, a
  // bracket to the word after it; quotes and hyphens to both.
  CHECK(split("20151999", six, {2, 2, 2, 10, 2, 2, 2, 0}) == "20151999");
  CHECK(split("2015/999", six, {2, 2, 2, 10, 2, 2, 2, 0}) == "2015/999");
  CHECK(split("abcd,efg", six, {2, 2, 2, 10, 2, 2, 2, 0}) == "abcd,efg");
  CHECK(split("abcd,efg", six, {2, 2, 2, 2, 10, 2, 2, 0}) == "abcd, efg");
  CHECK(split("Inc(PFEN", six, {2, 2, 10, 2, 2, 2, 2, 0}) == "Inc (PFEN");
  CHECK(split("Inc(PFEN", six, {2, 2, 2, 10, 2, 2, 2, 0}) == "Inc(PFEN");
  CHECK(split("proc-ess", six, {2, 2, 2, 10, 2, 2, 2, 0}) == "proc-ess");
  CHECK(split("say'that", six, {2, 2, 10, 2, 2, 2, 2, 0}) == "say'that");
  // Beside a glyph a stem wide the gap must be half as wide again: 9 columns and more.
  const std::vector<int> stem{6, 6, 6, 2, 6, 6, 6, 6};
  CHECK(split("abcilmno", stem, {2, 2, 2, 8, 2, 2, 2, 0}) == "abcilmno");
  CHECK(split("abcilmno", stem, {2, 2, 2, 9, 2, 2, 2, 0}) == "abci lmno");
}

TEST_CASE("split_at_ink_gaps: a position in the blank before its glyph, and lines it leaves alone", "[page]") {
  // The first character's position lies in the margin, 8 columns before its glyph (CTC often
  // emits a line's first character early): the margin is no gap between characters.
  InkLine early = ink_line("Stock is", {6, 6, 6, 6, 6, 0, 6, 6}, {2, 2, 2, 2, 2, 10, 2, 0}, 20, 0, {12, -1, -1, -1, -1, -1, -1, -1});
  CHECK(split_at_ink_gaps(early.reading, early.image, 0.15, 2.5) == 0);
  CHECK(early.reading.text == "Stock is");
  // The same with a gap inside the first word: the margin does not hide it.
  InkLine inside = ink_line("Stock is", {6, 6, 6, 6, 6, 0, 6, 6}, {10, 2, 2, 2, 2, 10, 2, 0}, 20, 0, {12, -1, -1, -1, -1, -1, -1, -1});
  CHECK(split_at_ink_gaps(inside.reading, inside.image, 0.15, 2.5) == 1);
  CHECK(inside.reading.text == "S tock is");

  // Faint print (under 48 grey levels from the paper), a failed line, fewer than 4 characters,
  // no threshold: nothing is touched.
  InkLine faint = ink_line("abcdefgh", {6, 6, 6, 6, 6, 6, 6, 6}, {2, 2, 2, 10, 2, 2, 2, 0}, 10, 220);
  CHECK(split_at_ink_gaps(faint.reading, faint.image, 0.15, 2.5) == 0);
  InkLine failed = ink_line("abcdefgh", {6, 6, 6, 6, 6, 6, 6, 6}, {2, 2, 2, 10, 2, 2, 2, 0});
  failed.reading.error = "line: recognition failed";
  CHECK(split_at_ink_gaps(failed.reading, failed.image, 0.15, 2.5) == 0);
  InkLine short_line = ink_line("abc", {6, 6, 6}, {10, 10, 0});
  CHECK(split_at_ink_gaps(short_line.reading, short_line.image, 0.15, 2.5) == 0);
  InkLine off = ink_line("abcdefgh", {6, 6, 6, 6, 6, 6, 6, 6}, {2, 2, 2, 10, 2, 2, 2, 0});
  CHECK(split_at_ink_gaps(off.reading, off.image, 0, 2.5) == 0);
  CHECK(off.reading.text == "abcdefgh");
}

namespace {

// A 600 x 300 page of paper 230 with a line of glyph blocks (ink 20) in rows 108-131 of the
// strip y 100-140, x 20-420, that the outline below cuts out.
GrayImage ruled_page() {
  GrayImage page;
  page.width = 600, page.height = 300;
  page.pixels.assign((size_t)(600 * 300), 230);
  const auto fill = [&](int64_t x0, int64_t x1, int64_t y0, int64_t y1, uint8_t v) {
    for (int64_t y = y0; y < y1; ++y)
      for (int64_t x = x0; x < x1; ++x) page.pixels[(size_t)(y * 600 + x)] = v;
  };
  for (int64_t x0 : {30, 90, 150, 240, 340}) fill(x0, x0 + 24, 108, 132, 20);
  fill(320, 323, 20, 280, 20);  // a table's rule: 3 columns from row 20 to 279, across the line
  fill(200, 203, 100, 140, 20);  // a stroke that fills the cut's height but stops at its edges
  fill(324, 334, 108, 132, 20);  // a glyph set tight against the rule (one column of paper between)
  return page;
}

const Quad kRuledOutline = Quad::from_rect({20, 100, 420, 140});

}  // namespace

TEST_CASE("erase_column_rules: a rule that goes on past the cut is erased, strokes and glyphs beside it stay",
          "[page]") {
  const GrayImage page = ruled_page();
  const GrayImage cut = crop_line(page, kRuledOutline, 40);
  REQUIRE(cut.width == 400);
  REQUIRE(cut.height == 40);
  GrayImage line = cut;
  CHECK(erase_column_rules(page, kRuledOutline, line) == 1);
  for (int64_t y = 0; y < 40; ++y)
    for (int64_t x = 0; x < 400; ++x) {
      const uint8_t was = cut.pixels[(size_t)(y * 400 + x)], now = line.pixels[(size_t)(y * 400 + x)];
      if (x >= 300 && x < 303) REQUIRE(now == 230);  // the rule (page x 320-322) is paper now
      else REQUIRE(now == was);                       // the rest as cut, the tight glyph included
    }
  // Light print on a dark slide: the same picture inverted, the rule erased to the dark ground.
  GrayImage dark_page = page;
  for (uint8_t& p : dark_page.pixels) p = (uint8_t)(255 - p);
  GrayImage dark = crop_line(dark_page, kRuledOutline, 40);
  CHECK(erase_column_rules(dark_page, kRuledOutline, dark) == 1);
  for (int64_t y = 0; y < 40; ++y) CHECK(dark.pixels[(size_t)(y * 400 + 301)] == 25);
  CHECK(dark.pixels[(size_t)(120 - 100) * 400 + 181] == 235);  // the stroke at page x 200 stays

  // The rule stops at the cut's bottom edge: it still goes on above (a table's header row).
  GrayImage half_page = page;
  for (int64_t y = 140; y < 280; ++y)
    for (int64_t x = 320; x < 323; ++x) half_page.pixels[(size_t)(y * 600 + x)] = 230;
  GrayImage half = crop_line(half_page, kRuledOutline, 40);
  CHECK(erase_column_rules(half_page, kRuledOutline, half) == 1);
  // It goes on for 0.4 heights only (16 rows above the cut): not far enough for reach 0.5, and
  // far enough for 0.3.
  GrayImage short_page = half_page;
  for (int64_t y = 20; y < 84; ++y)
    for (int64_t x = 320; x < 323; ++x) short_page.pixels[(size_t)(y * 600 + x)] = 230;
  GrayImage kept = crop_line(short_page, kRuledOutline, 40);
  const GrayImage short_cut = kept;
  CHECK(erase_column_rules(short_page, kRuledOutline, kept) == 0);
  CHECK(kept.pixels == short_cut.pixels);
  CHECK(erase_column_rules(short_page, kRuledOutline, kept, 0.3) == 1);
}

TEST_CASE("erase_column_rules: shaded grounds and screens are left alone, bad arguments throw", "[page]") {
  // The page's rule runs through a screen of one-pixel dots (a checkerboard of ink and paper)
  // over x 250-399, on the page above and below the line too: beside it, on either side, the
  // page is ink on half of the rows, so it stands alone on neither.
  GrayImage dotted = ruled_page();
  for (int64_t y = 0; y < 300; ++y)
    for (int64_t x = 250; x < 400; ++x)
      if ((x + y) % 2 == 0) dotted.pixels[(size_t)(y * 600 + x)] = 20;
  GrayImage line = crop_line(dotted, kRuledOutline, 40);
  const GrayImage cut = line;
  CHECK(erase_column_rules(dotted, kRuledOutline, line) == 0);
  CHECK(line.pixels == cut.pixels);

  // A shade whose grey levels spread from 140 to 229 (as a scanned screen's do) under the whole
  // line and page: under 40% of the cut's pixels near its paper level, so the cut is left as it
  // is, rule and all.
  GrayImage shaded = ruled_page();
  for (int64_t y = 0; y < 300; ++y)
    for (int64_t x = 0; x < 600; ++x) {
      uint8_t& p = shaded.pixels[(size_t)(y * 600 + x)];
      if (p == 230) p = (uint8_t)(140 + (x * 7 + y * 13) % 90);
    }
  line = crop_line(shaded, kRuledOutline, 40);
  const GrayImage shaded_cut = line;
  CHECK(erase_column_rules(shaded, kRuledOutline, line) == 0);
  CHECK(line.pixels == shaded_cut.pixels);

  const GrayImage page = ruled_page();
  line = crop_line(page, kRuledOutline, 40);
  CHECK_THROWS_WITH(erase_column_rules(page, kRuledOutline, line, 0), Catch::Contains("reach must be positive"));
  CHECK_THROWS_WITH(erase_column_rules(page, kRuledOutline, line, std::nan("")),
                    Catch::Contains("reach must be positive"));
  GrayImage broken = line;
  broken.pixels.pop_back();
  CHECK_THROWS_WITH(erase_column_rules(page, kRuledOutline, broken), Catch::Contains("inconsistent image"));
  Quad bad = kRuledOutline;
  bad.corners[2].x = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(erase_column_rules(page, bad, line), Catch::Contains("not finite"));
  // An empty line image: nothing to do.
  GrayImage empty;
  CHECK(erase_column_rules(page, kRuledOutline, empty) == 0);
}

TEST_CASE("descreen_line: a line on a halftone screen is blurred, lines on paper or a flat ground are not", "[page]") {
  // Strokes of ink (20), 4 columns wide and 20 apart over rows 8-31 (a fifth of the pixels, as
  // in a line of text), on a screen whose 2 x 2 cells hold four levels from 110 to 230 (a
  // table's shaded cell as scanned: its levels spread, and few pixels sit at the paper's).
  GrayImage screened;
  screened.width = 400, screened.height = 40;
  const uint8_t screen[4] = {110, 150, 190, 230};
  for (int64_t y = 0; y < 40; ++y)
    for (int64_t x = 0; x < 400; ++x)
      screened.pixels.push_back(y >= 8 && y < 32 && x % 20 < 4 ? 20 : screen[x % 2 + 2 * (y % 2)]);
  GrayImage line = screened;
  CHECK(descreen_line(line));
  CHECK(line.pixels == gaussian_blur(screened, 1.0).pixels);
  line = screened;
  CHECK(descreen_line(line, 2.0));
  CHECK(line.pixels == gaussian_blur(screened, 2.0).pixels);

  // Glyphs on paper: left as they are (most pixels at the paper's level).
  GrayImage plain = glyph_line(400);
  const GrayImage plain_before = plain;
  CHECK_FALSE(descreen_line(plain));
  CHECK(plain.pixels == plain_before.pixels);
  // Glyphs on a flat grey ground (150, a tint printed solid): no dots, nothing to blur away.
  GrayImage tinted = glyph_line(400);
  for (uint8_t& p : tinted.pixels)
    if (p != 20) p = 150;
  const GrayImage tinted_before = tinted;
  CHECK_FALSE(descreen_line(tinted));
  CHECK(tinted.pixels == tinted_before.pixels);

  CHECK_THROWS_WITH(descreen_line(line, 0), Catch::Contains("sigma must be positive"));
  CHECK_THROWS_WITH(descreen_line(line, std::nan("")), Catch::Contains("sigma must be positive"));
  GrayImage broken = screened;
  broken.pixels.pop_back();
  CHECK_THROWS_WITH(descreen_line(broken), Catch::Contains("inconsistent image"));
  GrayImage empty;
  CHECK_FALSE(descreen_line(empty));
}

TEST_CASE("dotted_ink: glyphs printed in dots (a fax of grey type) are dotted, solid strokes and noise are not",
          "[page]") {
  // Strokes 4 columns wide, 20 apart, rows 8-31, ink (20) on paper (230). Dithered, as a fax
  // prints grey type: a pinhole of paper in every 4th row (column 1 or 2 of the stroke, in turn)
  // and a speck of ink beside the stroke (column 6) every `speck_every` rows: 7.3% of the ink
  // pixels specks and 6.2% as many pinholes with a speck every 4 rows. Scattered noise: a speck
  // every 2nd row, 12.7% specks.
  const auto strokes = [](int64_t width, bool dithered, int64_t speck_every) {
    GrayImage g;
    g.width = 400, g.height = 40;
    g.pixels.assign(400 * 40, 230);
    for (int64_t y = 8; y < 32; ++y)
      for (int64_t x = 0; x < 400; ++x) {
        const int64_t c = x % 20;
        uint8_t& p = g.pixels[(size_t)(y * 400 + x)];
        if (c < width) p = 20;
        if (!dithered) continue;
        if ((c == 1 || c == 2) && y % 4 == 0 && (c == 1) == ((y / 4) % 2 == 0)) p = 230;
        if (c == 6 && y % speck_every == 0) p = 20;
      }
    return g;
  };
  CHECK_FALSE(dotted_ink(strokes(4, false, 4)));
  CHECK_FALSE(dotted_ink(strokes(1, false, 4)));  // hairlines: each pixel has ink above and below
  CHECK(dotted_ink(strokes(4, true, 4)));
  CHECK_FALSE(dotted_ink(strokes(4, true, 2)));  // too many specks: noise, not a dither
  GrayImage line = strokes(4, true, 4);
  const GrayImage dots = line;
  CHECK(descreen_line(line));  // blurred as a screened ground is
  CHECK(line.pixels == gaussian_blur(dots, 1.0).pixels);
  GrayImage solid = strokes(4, false, 4);
  const GrayImage solid_before = solid;
  CHECK_FALSE(descreen_line(solid));
  CHECK(solid.pixels == solid_before.pixels);
  // Faint (under 48 levels of contrast), blank and empty images are not dotted; a broken one throws.
  GrayImage faint = dots;
  for (uint8_t& p : faint.pixels) p = p == 20 ? 200 : 230;
  CHECK_FALSE(dotted_ink(faint));
  CHECK_FALSE(dotted_ink(GrayImage{}));
  GrayImage broken = dots;
  broken.pixels.pop_back();
  CHECK_THROWS_WITH(dotted_ink(broken), Catch::Contains("inconsistent image"));
}

TEST_CASE("align_short_outlines: a glyph's outline fitted askew takes the page's direction", "[page]") {
  // A quad around centre (cx, cy), `w` long and `h` high, its text direction at `deg` degrees.
  const auto quad = [](double cx, double cy, double w, double h, double deg) {
    const double a = deg * M_PI / 180;
    const Point u{std::cos(a), std::sin(a)}, v{-std::sin(a), std::cos(a)};
    const auto at = [&](double s, double t) { return Point{cx + s * u.x + t * v.x, cy + s * u.y + t * v.y}; };
    return Quad{{at(-w / 2, -h / 2), at(w / 2, -h / 2), at(w / 2, h / 2), at(-w / 2, h / 2)}};
  };
  const auto angle_of = [](const Quad& q) {
    const auto& c = q.corners;
    return std::atan2(c[1].y - c[0].y, c[1].x - c[0].x) * 180 / M_PI;
  };
  // Three lines of text at 1 degree, then a lone "1" fitted at -26.5 degrees (as the detector
  // fitted one in a table), a short word at 3 degrees (within 5 of the page's: kept), a glyph
  // fitted at 150 degrees (nearer the page's direction turned round: it keeps its way round, at
  // 181), and a word 2.5 times as long as high at 20 degrees (neither short nor long: kept, and
  // no part of the page's direction).
  std::vector<Quad> outlines = {quad(500, 100, 600, 30, 1), quad(500, 140, 600, 30, 1), quad(500, 180, 500, 30, 1),
                                quad(100, 300, 28, 30, -26.5), quad(200, 300, 50, 30, 3), quad(300, 300, 30, 30, 150),
                                quad(500, 400, 75, 30, 20)};
  const std::vector<Quad> before = outlines;
  CHECK(align_short_outlines(outlines) == 2);
  for (size_t i : {0, 1, 2, 4, 6}) {
    INFO("outline " << i);
    for (size_t k = 0; k < 4; ++k) {
      CHECK(outlines[i].corners[k].x == before[i].corners[k].x);
      CHECK(outlines[i].corners[k].y == before[i].corners[k].y);
    }
  }
  CHECK(angle_of(outlines[3]) == Approx(1).margin(1e-9));
  CHECK(std::abs(angle_of(outlines[5])) == Approx(179).margin(1e-9));  // still read right to left
  // The new outline is the smallest rectangle at 1 degree around the old corners: each old
  // corner inside it (or on its edge), and it touches them on all four sides.
  for (size_t i : {3, 5}) {
    const auto& c = outlines[i].corners;
    const double a = std::atan2(c[1].y - c[0].y, c[1].x - c[0].x);
    const Point u{std::cos(a), std::sin(a)}, v{-std::sin(a), std::cos(a)};
    const auto s_of = [&](const Point& p) { return (p.x - c[0].x) * u.x + (p.y - c[0].y) * u.y; };
    const auto t_of = [&](const Point& p) { return (p.x - c[0].x) * v.x + (p.y - c[0].y) * v.y; };
    const double len = distance(c[0], c[1]), high = distance(c[0], c[3]);
    double s0 = INFINITY, s1 = -INFINITY, t0 = INFINITY, t1 = -INFINITY;
    for (const Point& p : before[i].corners)
      s0 = std::min(s0, s_of(p)), s1 = std::max(s1, s_of(p)), t0 = std::min(t0, t_of(p)), t1 = std::max(t1, t_of(p));
    CHECK(s0 == Approx(0).margin(1e-9));
    CHECK(s1 == Approx(len).margin(1e-9));
    CHECK(t0 == Approx(0).margin(1e-9));
    CHECK(t1 == Approx(high).margin(1e-9));
    CHECK(t_of(c[3]) == Approx(high).margin(1e-9));  // corners in outline order: c[3] below c[0]
  }

  // A page lying sideways: the lines run down it at 90 degrees, a glyph at 60 turns to 90.
  std::vector<Quad> sideways = {quad(100, 500, 600, 30, 90), quad(140, 500, 600, 30, 90),
                                quad(180, 500, 600, 30, -90), quad(300, 100, 28, 30, 60)};
  CHECK(align_short_outlines(sideways) == 1);
  CHECK(angle_of(sideways[3]) == Approx(90).margin(1e-9));
  // Fewer than three long lines, or long lines that disagree: nothing is turned.
  std::vector<Quad> two = {quad(500, 100, 600, 30, 1), quad(500, 140, 600, 30, 1), quad(100, 300, 28, 30, -26.5)};
  CHECK(align_short_outlines(two) == 0);
  std::vector<Quad> mixed = {quad(500, 100, 600, 30, 0), quad(500, 140, 600, 30, 45), quad(500, 180, 600, 30, 90),
                             quad(100, 300, 28, 30, -26.5)};
  CHECK(align_short_outlines(mixed) == 0);
  std::vector<Quad> bad = outlines;
  bad[3].corners[1].x = std::nan("");
  CHECK_THROWS_WITH(align_short_outlines(bad), Catch::Contains("not finite"));
}

namespace {

// A white page with dark rectangles (x0, y0, x1, y1), end exclusive.
GrayImage page_with(int64_t W, int64_t H, const std::vector<Rect>& ink, uint8_t level = 20) {
  GrayImage page;
  page.width = W, page.height = H;
  page.pixels.assign((size_t)(W * H), 245);
  for (const Rect& r : ink)
    for (int64_t y = (int64_t)r.y0; y < (int64_t)r.y1; ++y)
      for (int64_t x = (int64_t)r.x0; x < (int64_t)r.x1; ++x) page.pixels[(size_t)(y * W + x)] = level;
  return page;
}

}  // namespace

TEST_CASE("missed_ink: a lone glyph, a dash and a pair of glyphs outside the lines found are outlined", "[page]") {
  // Three lines of "text" (blocks of ink 16 high) under outlines 20 high; type height 20.
  std::vector<Rect> ink = {{100, 102, 500, 118}, {100, 142, 480, 158}, {100, 182, 450, 198}};
  const std::vector<Quad> lines = {Quad::from_rect({96, 100, 504, 120}), Quad::from_rect({96, 140, 484, 160}),
                                   Quad::from_rect({96, 180, 454, 200})};
  ink.push_back({40, 144, 43, 158});   // a line number "1" in the margin: 3 x 14
  ink.push_back({40, 260, 50, 263});   // a table's lone dash: 10 x 3
  ink.push_back({300, 260, 308, 274}); // "17": two glyphs 5 pixels apart, one line
  ink.push_back({313, 260, 321, 274});
  ink.push_back({20, 320, 560, 322});  // a rule: too long
  ink.push_back({200, 300, 202, 302}); // a speck: too small
  ink.push_back({506, 104, 510, 116}); // a glyph 2 pixels past a line's outline: the line's own
  ink.push_back({400, 330, 470, 400}); // a block of a figure: too high
  const GrayImage page = page_with(600, 420, ink);
  std::vector<Quad> found = missed_ink(page, lines);
  REQUIRE(found.size() == 3);
  std::sort(found.begin(), found.end(), [](const Quad& a, const Quad& b) {
    return std::make_pair(a.box().y0, a.box().x0) < std::make_pair(b.box().y0, b.box().x0);
  });
  // Each outline: its ink, 0.15 heights (3 pixels) more at each end, 0.15 heights above and
  // below (0.8 heights high at least), corners in outline order.
  const Rect one = found[0].box(), dash = found[1].box(), pair = found[2].box();
  CHECK(one.x0 == Approx(37));
  CHECK(one.x1 == Approx(46));
  CHECK(one.y0 == Approx(141));
  CHECK(one.y1 == Approx(161));
  CHECK(dash.x0 == Approx(37));
  CHECK(dash.x1 == Approx(53));
  CHECK(dash.height() == Approx(16));
  CHECK((dash.y0 + dash.y1) / 2 == Approx(261.5));
  CHECK(pair.x0 == Approx(297));
  CHECK(pair.x1 == Approx(324));
  CHECK(pair.y0 == Approx(257));
  CHECK(pair.y1 == Approx(277));
  for (const Quad& q : found) {
    CHECK(q.corners[0].x < q.corners[1].x);
    CHECK(q.corners[0].y < q.corners[3].y);
  }
  // The margin decides what a line's own: with none, the glyph beside the first line is a line
  // of its own too.
  MissedInkOptions tight;
  tight.margin = 0;
  CHECK(missed_ink(page, lines, tight).size() == 4);
}

TEST_CASE("missed_ink: pages it leaves alone, and bad arguments", "[page]") {
  const std::vector<Rect> ink = {{100, 102, 500, 118}, {100, 142, 480, 158}, {100, 182, 450, 198}, {40, 144, 43, 158}};
  const std::vector<Quad> lines = {Quad::from_rect({96, 100, 504, 120}), Quad::from_rect({96, 140, 484, 160}),
                                   Quad::from_rect({96, 180, 454, 200})};
  const GrayImage page = page_with(600, 420, ink);
  REQUIRE(missed_ink(page, lines).size() == 1);
  // Fewer than three outlines: the type's size is not known.
  CHECK(missed_ink(page, {lines[0], lines[1]}).empty());
  // Light ink on a dark page, and a page of no contrast.
  GrayImage inverted = page;
  for (uint8_t& p : inverted.pixels) p = (uint8_t)(255 - p);
  CHECK(missed_ink(inverted, lines).empty());
  CHECK(missed_ink(page_with(600, 420, ink, 230), lines).empty());
  // A page of glyph-sized pieces everywhere (a figure's texture): more lines than max_lines.
  std::vector<Rect> texture = ink;
  for (int64_t y = 240; y < 400; y += 24)
    for (int64_t x = 20; x < 580; x += 40) texture.push_back({(double)x, (double)y, (double)x + 4, (double)y + 12});
  CHECK(missed_ink(page_with(600, 420, texture), lines).empty());
  MissedInkOptions many;
  many.max_lines = 1000;
  CHECK(missed_ink(page_with(600, 420, texture), lines, many).size() > 64);
  // Outlines far off the page cover at most its corner cells; outlines of absurd size (their
  // median height beyond the page) say no type size: nothing is looked for, nothing undefined.
  std::vector<Quad> far = lines;
  far.push_back(Quad::from_rect({-1e12, -1e12, -1e12 + 400, -1e12 + 20}));
  far.push_back(Quad::from_rect({1e12, 1e12, 1e12 + 400, 1e12 + 20}));
  CHECK(missed_ink(page, far).size() == 1);
  std::vector<Quad> huge = lines;
  for (int i = 0; i < 4; ++i) huge.push_back(Quad::from_rect({0, 0, 1e300, 1e300}));
  CHECK(missed_ink(page, huge).empty());
  // Bad arguments.
  std::vector<Quad> bad = lines;
  bad[1].corners[2].y = std::nan("");
  CHECK_THROWS_WITH(missed_ink(page, bad), Catch::Contains("not finite"));
  MissedInkOptions negative;
  negative.margin = -1;
  CHECK_THROWS_WITH(missed_ink(page, lines, negative), Catch::Contains("margin"));
  GrayImage broken = page;
  broken.pixels.pop_back();
  CHECK_THROWS_WITH(missed_ink(broken, lines), Catch::Contains("inconsistent"));
}
