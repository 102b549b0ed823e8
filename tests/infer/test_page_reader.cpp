// The page pipeline (infer/page_reader.h, infer/detector.h) and ocrt-infer's pages.
//
// No trained detector exists to test with, so the detector here paints its probability map
// from a synthetic page's truth (train/synth_page.h): each truth line's outline shrunk to the
// middle 40% of its height is 1, the rest 0, as a trained DBNet's shrunk map would look (its
// ends shrunk by the same 0.3 h, as DB shrinks a polygon on every side); read back with unclip
// ratio 1.5 that is the whole line again (a long line's region grows by 1.5 A / L = 0.3 h).
// With it and the shipped recogniser (weights/crnn-en.safetensors), read_page must give the
// page's lines in reading order with most words right (scored with infer/page_eval.h), a blank
// page nothing, and a page turned by 90, 180 or 270 degrees (its image and its map turned) the
// same words, at their places in the turned image. A DBNet with random weights must run through
// TextDetector and read_page end to end within its limits, and ocrt-infer must tell pages from
// lines, read TIFF pages, write documents into --output-dir and say plainly when there is no
// detector. A page takes a few seconds on two threads.
#include <catch2/catch.hpp>
#include <tiffio.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "infer/detector.h"
#include "infer/inputs.h"
#include "infer/page_eval.h"
#include "infer/page_format.h"
#include "infer/page_reader.h"
#include "infer/predictor.h"
#include "models/dbnet.h"
#include "models/model_file.h"
#include "run_command.h"
#include "runtime/image.h"
#include "runtime/rng.h"
#include "temp_dir.h"
#include "train/synth_page.h"

using namespace ocrt;
using namespace ocrt::infer;
using ocrt::testing::program;
using ocrt::testing::run_command;
using ocrt::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kSource = OCRT_SOURCE_DIR;
const std::string kModel = kSource + "/weights/crnn-en.safetensors";
const std::string kSampleLine = kSource + "/samples/lines/000000.png";

// Fonts the shipped model reads well (DejaVu Sans, Liberation Serif and Sans), or whatever
// covers Latin when those are missing; none on a machine without fonts.
std::vector<std::shared_ptr<train::Font>> page_fonts() {
  const auto dirs = train::default_font_dirs();
  if (dirs.empty()) return {};
  std::vector<std::shared_ptr<train::Font>> all = train::load_fonts(dirs), chosen;
  for (const char* name : {"DejaVuSans.ttf", "LiberationSerif-Regular.ttf", "LiberationSans-Regular.ttf"})
    for (const auto& f : all)
      if (fs::path(f->path()).filename() == name) chosen.push_back(f);
  for (const auto& f : all)
    if (chosen.size() < 2 && f->covers("Hag 7.:-")) chosen.push_back(f);
  return chosen;
}

const train::TextSource& prose() {
  static const std::vector<std::string> words = {
      "The", "history", "of", "printing", "begins", "with", "woodblocks", "carved", "by", "hand", "and", "pressed",
      "onto", "paper.", "Later,", "movable", "type", "made", "books", "cheaper", "for", "every", "reader", "in",
      "town,", "and", "the", "number", "of", "schools", "grew", "each", "year.", "Some", "printers", "kept",
      "careful", "records", "of", "their", "work;", "others", "sold", "pamphlets", "at", "markets", "along",
      "the", "river.", "A", "single", "page", "could", "take", "hours", "to", "set,", "but", "once", "it", "was",
      "ready", "hundreds", "of", "copies", "followed", "before", "noon."};
  static const train::TextSource source(words, nn::Charset::ascii(), words, train::TextMix{1.0, 0.0});
  return source;
}

// A small upright article page: the top of a synthetic page, clean and unturned, at 120 dpi
// (body text about 20 pixels high), with the truth lines that lie wholly on it.
train::SynthPage small_page(const std::vector<std::shared_ptr<train::Font>>& fonts, uint64_t seed) {
  train::PageSynthOptions o;
  o.min_dpi = o.max_dpi = 120;
  o.min_pt = 12, o.max_pt = 13;
  o.max_skew_deg = 0;
  o.p_scan = 0;
  o.layout_weights = {1, 0, 0, 0, 0, 0};
  train::SynthPage full = train::render_page(prose(), fonts, seed, o);
  train::SynthPage page = full;
  const int64_t h = full.image.height * 2 / 5;
  page.image.height = h;
  page.image.pixels.resize((size_t)(full.image.width * h));
  page.lines.clear();
  double bottom = 0;
  for (const train::SynthLine& l : full.lines)
    if (l.outline.box().y1 <= (double)h) page.lines.push_back(l), bottom = std::max(bottom, l.outline.box().y1);
  // Below the last whole line, paper: no half line cut at the edge.
  for (int64_t y = (int64_t)std::ceil(bottom) + 1; y < h; ++y)
    std::fill_n(page.image.pixels.begin() + y * page.image.width, page.image.width, (uint8_t)255);
  return page;
}

// small_page(fonts, 7), made once; null (with a warning) on a machine without fonts.
const train::SynthPage* seventh_page() {
  static const std::optional<train::SynthPage> page = []() -> std::optional<train::SynthPage> {
    const auto fonts = page_fonts();
    if (fonts.empty()) return std::nullopt;
    return small_page(fonts, 7);
  }();
  if (!page) {
    WARN("no Debian fonts installed (scripts/install-deps.sh); skipping");
    return nullptr;
  }
  REQUIRE(page->lines.size() >= 6);
  return &*page;
}

// The page turned clockwise by `rotation` degrees, its outlines with it (corner order kept: the
// text still reads from corner 0 to corner 1).
train::SynthPage turned(const train::SynthPage& p, int rotation) {
  const int64_t W = p.image.width, H = p.image.height;
  train::SynthPage out = p;
  const bool swap = rotation == 90 || rotation == 270;
  out.image.width = swap ? H : W, out.image.height = swap ? W : H;
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      int64_t u = x, v = y;
      if (rotation == 90) u = H - 1 - y, v = x;
      if (rotation == 180) u = W - 1 - x, v = H - 1 - y;
      if (rotation == 270) u = y, v = W - 1 - x;
      out.image.pixels[(size_t)(v * out.image.width + u)] = p.image.at(x, y);
    }
  // A point of the upright page in the turned one: the inverse of to_upright.
  auto turn = [&](const Point& q) { return from_upright(q, rotation, out.image.width, out.image.height); };
  for (train::SynthLine& l : out.lines) {
    for (Point& c : l.outline.corners) c = turn(c);
    for (train::SynthWord& w : l.words)
      for (Point& c : w.outline.corners) c = turn(c);
  }
  return out;
}

// Is the point inside the convex quad (either winding)?
bool inside(const Quad& q, double x, double y) {
  int sign = 0;
  for (size_t i = 0; i < 4; ++i) {
    const Point& a = q.corners[i];
    const Point& b = q.corners[(i + 1) % 4];
    const double cross = (b.x - a.x) * (y - a.y) - (b.y - a.y) * (x - a.x);
    const int s = cross > 0 ? 1 : cross < 0 ? -1 : 0;
    if (s == 0) continue;
    if (sign == 0) sign = s;
    else if (s != sign) return false;
  }
  return true;
}

// The map a detector would give: each line's outline shrunk by 0.3 of its height on every side
// (the middle 40% of its height; its ends by as much, kept at least a pixel long).
ProbabilityMap painted_map(const std::vector<Quad>& lines, int64_t width, int64_t height) {
  ProbabilityMap m;
  m.width = width, m.height = height;
  m.values.assign((size_t)(width * height), 0.f);
  for (const Quad& l : lines) {
    const auto& c = l.corners;
    auto at = [](const Point& a, const Point& b, double f) { return Point{a.x + (b.x - a.x) * f, a.y + (b.y - a.y) * f}; };
    const double along = std::hypot(c[1].x - c[0].x, c[1].y - c[0].y);
    const double across = std::hypot(c[3].x - c[0].x, c[3].y - c[0].y);
    const double f = std::min(0.3 * across, 0.5 * (along - 1)) / along;  // of the length, at each end
    const Point tl = at(c[0], c[1], f), tr = at(c[0], c[1], 1 - f), br = at(c[3], c[2], 1 - f), bl = at(c[3], c[2], f);
    Quad core;
    core.corners = {at(tl, bl, 0.3), at(tr, br, 0.3), at(tr, br, 0.7), at(tl, bl, 0.7)};
    const Rect box = core.box();
    for (int64_t y = std::max<int64_t>(0, (int64_t)box.y0); y < std::min<int64_t>(height, (int64_t)std::ceil(box.y1)); ++y)
      for (int64_t x = std::max<int64_t>(0, (int64_t)box.x0); x < std::min<int64_t>(width, (int64_t)std::ceil(box.x1)); ++x)
        if (inside(core, (double)x + 0.5, (double)y + 0.5)) m.values[(size_t)(y * width + x)] = 1.f;
  }
  return m;
}

std::vector<Quad> outlines(const train::SynthPage& p) {
  std::vector<Quad> out;
  for (const train::SynthLine& l : p.lines) out.push_back(l.outline);
  return out;
}

nn::TextBoxOptions painted_options() {
  nn::TextBoxOptions o;
  o.threshold = 0.3f, o.box_threshold = 0.5f, o.unclip_ratio = 1.5;
  return o;
}

Predictor& shipped_predictor() {
  static Predictor p(kModel, [] {
    PredictorOptions o;
    o.threads = 2;
    return o;
  }());
  return p;
}

// A command whose stderr is dropped (run_command adds 2>&1 after it).
std::string quiet(const std::string& command) { return "(" + command + " 2>/dev/null)"; }

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("page reader: the probe lines vote for the page's orientation, lines of junk do not", "[page_reader]") {
  int votes[2];
  // A table page standing upright: its longest "line" is a run of leader dots, junk either way,
  // which pulled the mean below the turned reading's; 7 lines of text are surer upright.
  const std::vector<double> table_up{0.113, 0.942, 0.946, 0.749, 0.999, 0.940, 0.973, 0.967};
  const std::vector<double> table_turned{0.300, 0.795, 0.641, 0.645, 0.760, 0.657, 0.790, 0.845};
  CHECK(orientation_vote(table_up, table_turned, 0.538, 0.629, votes) == 0);
  CHECK(votes[0] == 7);
  CHECK(votes[1] == 0);
  // A chart page turned by 180 degrees: 2 lines of text, 6 of graphics read as junk (under
  // kOrientationVoteFloor either way), which must not outvote them.
  const std::vector<double> chart_up{0.803, 0.694, 0.120, 0.116, 0.226, 0.122, 0.222, 0.177};
  const std::vector<double> chart_turned{0.990, 0.979, 0.104, 0.093, 0.142, 0.113, 0.129, 0.108};
  CHECK(orientation_vote(chart_up, chart_turned, 0.305, 0.328, votes) == 1);
  CHECK(votes[0] == 0);
  CHECK(votes[1] == 2);
  // No line reads as text, or the votes tie: the means decide, and equal means keep the first way.
  CHECK(orientation_vote({0.2, 0.3}, {0.1, 0.4}, 0.25, 0.26, votes) == 1);
  CHECK(votes[0] + votes[1] == 0);
  CHECK(orientation_vote({0.9, 0.6}, {0.8, 0.7}, 0.75, 0.74, votes) == 0);
  CHECK(orientation_vote({0.9, 0.6}, {0.8, 0.7}, 0.74, 0.75, votes) == 1);
  CHECK(orientation_vote({0.9}, {0.9}, 0.9, 0.9, votes) == 0);
  CHECK(orientation_vote({}, {}, 0, 0, votes) == 0);
  CHECK_THROWS_WITH(orientation_vote({0.9}, {}, 0.9, 0, votes), Catch::Contains("1 lines read upright, 0 turned"));
}

TEST_CASE("detector: a second look at pages of small print, at what size", "[page_reader]") {
  // n outlines of a given thickness (page pixels), 300 long, down a page.
  const auto lines = [](int n, double thick) {
    std::vector<nn::TextBox> b((size_t)n);
    for (int i = 0; i < n; ++i) b[(size_t)i].outline = Quad::from_rect({100, 50.0 * i, 400, 50.0 * i + thick});
    return b;
  };
  DetectorOptions o;  // max_side 1280, small_lines 15, line_target 20
  // 2000 x 2600: the map is 1280 / 2600 of the page. 25-pixel lines are 12.3 in the map: seen again
  // at 1280 x 20 / 12.3 = 2080, held to 1.6 x 1280 = 2048.
  CHECK(second_look_side(lines(10, 25), 2000, 2600, o) == 2048);
  // 28-pixel lines, 13.8 in the map: at 1280 x 20 / 13.78 = 1857.
  CHECK(second_look_side(lines(10, 28), 2000, 2600, o) == 1857);
  // The median decides: 6 thick lines among 11 are enough to say no.
  std::vector<nn::TextBox> mixed = lines(5, 25), thick = lines(6, 40);
  mixed.insert(mixed.end(), thick.begin(), thick.end());
  CHECK(second_look_side(mixed, 2000, 2600, o) == 0);
  CHECK(second_look_side(lines(10, 40), 2000, 2600, o) == 0);  // 19.7 in the map: print of a usual size
  CHECK(second_look_side(lines(7, 25), 2000, 2600, o) == 0);   // too few lines to tell
  CHECK(second_look_side(lines(10, 10), 1000, 1200, o) == 0);  // a page not scaled down: nothing to gain
  // Never past the page's own size, and not for less than a step of 32 pixels more.
  CHECK(second_look_side(lines(10, 12), 1000, 1400, o) == 1400);
  CHECK(second_look_side(lines(10, 12), 1000, 1300, o) == 0);
  DetectorOptions off = o;
  off.small_lines = 0;
  CHECK(second_look_side(lines(10, 25), 2000, 2600, off) == 0);
  DetectorOptions wider = o;
  wider.line_target = 16;  // 1280 x 16 / 12.3 = 1664
  CHECK(second_look_side(lines(10, 25), 2000, 2600, wider) == 1664);
}

TEST_CASE("page reader: a probe line votes only when it reads as text, not as a rule of dots", "[page_reader]") {
  const auto reading = [](const std::string& text, double confidence) {
    LineResult r;
    r.text = text;
    for (size_t i = 0; i < text.size(); ++i) r.chars.push_back({text.substr(i, 1), (int64_t)i, (double)i, confidence});
    return r;
  };
  CHECK(vote_confidence(reading("Generalist, Distressed", 0.9)) == Approx(0.9));
  CHECK(vote_confidence(reading("(203) 569-4345", 0.8)) == Approx(0.8));
  // Runs of dots and dashes (a ruled table's rules, leader dots), however sure: no vote.
  CHECK(vote_confidence(reading("..............................", 0.99)) == 0);
  CHECK(vote_confidence(reading("en..........................e", 0.57)) == 0);
  CHECK(vote_confidence(reading("--- -- --- ---", 0.9)) == 0);
  // Fewer than 3 letters or digits say nothing of which way is up.
  CHECK(vote_confidence(reading("a 7", 0.9)) == 0);
  CHECK(vote_confidence(reading("abc", 0.9)) == Approx(0.9));
  // Half letters or digits is enough; spaces do not count either way.
  CHECK(vote_confidence(reading("ab.c.d..", 0.7)) == Approx(0.7));
  CHECK(vote_confidence(reading("ab.c....", 0.7)) == 0);
  CHECK(vote_confidence(reading("", 0.9)) == 0);
  LineResult failed = reading("words", 0.9);
  failed.error = "could not read";
  CHECK(vote_confidence(failed) == 0);
}

TEST_CASE("page reader: a ruled table's rules, the longest outlines, do not decide its orientation",
          "[page_reader]") {
  const train::SynthPage* page7 = seventh_page();
  if (!page7) return;
  // The page with ten dotted rules below its text, each outlined longer than any text line: the
  // first probe lines are all rules, which read as dots either way and do not vote, so the probe
  // goes on to the next longest outlines, the text.
  train::SynthPage page = *page7;
  const int64_t W = page.image.width, rules = 10, pitch = 24, top = page.image.height + 8;
  page.image.height += rules * pitch + 16;
  page.image.pixels.resize((size_t)(W * page.image.height), 255);
  std::vector<Quad> rule_outlines;
  for (int64_t k = 0; k < rules; ++k) {
    const int64_t y = top + k * pitch + pitch / 2;
    for (int64_t x = 12; x < W - 12; x += 6)
      for (int64_t dy = 0; dy < 2; ++dy)
        for (int64_t dx = 0; dx < 2; ++dx) page.image.pixels[(size_t)((y + dy) * W + x + dx)] = 0;
    rule_outlines.push_back(Quad::from_rect({8, (double)(y - 8), (double)(W - 8), (double)(y + 10)}));
  }
  double longest_text = 0;
  for (const train::SynthLine& l : page.lines) longest_text = std::max(longest_text, l.outline.box().width());
  REQUIRE(longest_text < (double)(W - 16));
  for (int rotation : {0, 180}) {
    DYNAMIC_SECTION("turned by " << rotation << " degrees") {
      const train::SynthPage shown = turned(page, rotation);
      std::vector<Quad> shown_rules = rule_outlines;
      for (Quad& q : shown_rules)
        for (Point& c : q.corners) c = from_upright(c, rotation, shown.image.width, shown.image.height);
      TextDetector detector(
          [&](const GrayImage& image) {
            // Detected again upright after a turn: the upright page's outlines.
            const bool upright = image.pixels == page.image.pixels;
            std::vector<Quad> quads = outlines(upright ? page : shown);
            const std::vector<Quad>& r = upright ? rule_outlines : shown_rules;
            quads.insert(quads.end(), r.begin(), r.end());
            return painted_map(quads, image.width, image.height);
          },
          painted_options());
      PageReaderOptions o;
      o.orientation_sure = 1.01;  // always read both ways
      PageReadInfo info;
      const Page read_back = read_page(shown.image, "ruled.png", detector, shipped_predictor(), o, &info);
      INFO(page_text(read_back));
      INFO("probe " << info.probe_lines << " lines, votes " << info.probe_votes[0] << " / " << info.probe_votes[1]
                    << ", confidence " << info.probe_confidence[0] << " / " << info.probe_confidence[1]);
      CHECK(info.rotation == rotation);
      CHECK(info.probed_both);
      CHECK(info.probe_lines > o.orientation_lines);  // past the rules
      CHECK(info.probe_lines <= o.orientation_max_lines);
      const int right = rotation == 0 ? 0 : 1;
      CHECK(info.probe_votes[right] >= info.probe_votes[1 - right] + 2);
      const PageScore s = score_page(read_back, truth_from_synth_json(train::page_truth_json(shown), "ruled.json"));
      CHECK(s.right >= s.truth_words * 85 / 100);
    }
  }
}

TEST_CASE("page reader: turn_clockwise turns an image as the tests' pages are turned, and back", "[page_reader]") {
  const train::SynthPage* page7 = seventh_page();
  if (!page7) return;
  for (int rotation : {0, 90, 180, 270}) {
    INFO("turned by " << rotation);
    const GrayImage turned_image = turn_clockwise(page7->image, rotation);
    const train::SynthPage reference = turned(*page7, rotation);  // this file's own pixel loop
    CHECK(turned_image.width == reference.image.width);
    CHECK(turned_image.height == reference.image.height);
    CHECK(turned_image.pixels == reference.image.pixels);
    CHECK(turn_clockwise(turned_image, (360 - rotation) % 360).pixels == page7->image.pixels);
  }
  CHECK_THROWS_WITH(turn_clockwise(page7->image, 45), Catch::Contains("0, 90, 180 or 270"));
}

TEST_CASE("page reader: a page's detection turned by a quarter turn is kept when it reads better or votes decisively",
          "[page_reader]") {
  PageReadInfo first, turned;
  first.rotation = 180, first.probed_both = true, first.probe_lines = 8;
  first.probe_confidence[0] = 0.324, first.probe_confidence[1] = 0.415;  // its winner: 0.415
  first.probe_votes[1] = 2;
  turned.rotation = 90, turned.probed_both = true, turned.probe_lines = 8;
  turned.probe_confidence[0] = 0.392, turned.probe_confidence[1] = 0.699;
  // table_10 turned by 90: 7 votes to none, 6 of them sure; the mean is lower than the first's.
  turned.probe_votes[0] = 7, turned.probe_sure_votes[0] = 6;
  CHECK(take_sideways(first, turned));
  // Fewer sure votes than three quarters of the probe lines: not decisive, and not better.
  turned.probe_sure_votes[0] = 5;
  CHECK_FALSE(take_sideways(first, turned));
  turned.probe_sure_votes[1] = 0, turned.probe_sure_votes[0] = 6;
  turned.probed_both = false;  // read one way only: no vote at all
  CHECK_FALSE(take_sideways(first, turned));
  // Reading better by kSidewaysMargin is enough without a vote; the winner is the way it took
  // (270: the second reading).
  turned.probe_sure_votes[0] = 0;
  turned.probe_confidence[0] = 0.2, turned.probe_confidence[1] = 0.415 + kSidewaysMargin + 0.01;
  turned.rotation = 270;
  CHECK(take_sideways(first, turned));
  turned.rotation = 90;
  CHECK_FALSE(take_sideways(first, turned));
}

TEST_CASE("page reader: outlines turned to a page's orientation, and points to the upright page and back",
          "[page_reader]") {
  const Quad q = Quad::from_rect({10, 20, 110, 40});  // a line reading right
  CHECK(orient_outline(q, 0).corners[0].x == 10);
  CHECK(orient_outline(q, 0).corners[0].y == 20);
  // Upside down: the text reads from the bottom right corner to the bottom left one.
  const Quad r180 = orient_outline(q, 180);
  CHECK(r180.corners[0].x == 110);
  CHECK(r180.corners[0].y == 40);
  CHECK(r180.corners[1].x == 10);
  // A box standing upright on a page turned by 90 degrees reads down; by 270, up.
  const Quad tall = Quad::from_rect({50, 10, 70, 210});
  const Quad r90 = orient_outline(tall, 90), r270 = orient_outline(tall, 270);
  CHECK(r90.corners[1].y - r90.corners[0].y == 200);
  CHECK(r270.corners[1].y - r270.corners[0].y == -200);
  // A short box on an upright page still reads across ("7", a page number).
  const Quad digit = orient_outline(Quad::from_rect({0, 0, 12, 30}), 0);
  CHECK(digit.corners[1].x - digit.corners[0].x == 12);
  for (int rotation : {0, 90, 180, 270}) {
    const Point p{123.5, 45.25};
    const Point u = to_upright(p, rotation, 400, 300);
    const Point b = from_upright(u, rotation, 400, 300);
    CHECK(b.x == p.x);
    CHECK(b.y == p.y);
  }
  CHECK(to_upright({0, 0}, 90, 400, 300).x == 0);   // the top-left of a page turned by 90 was its bottom-left
  CHECK(to_upright({0, 0}, 90, 400, 300).y == 400);
  CHECK_THROWS_WITH(orient_outline(q, 45), Catch::Contains("0, 90, 180 or 270"));
}

TEST_CASE("page reader: a synthetic page read in reading order, a blank page, and the same page turned",
          "[page_reader]") {
  const train::SynthPage* page7 = seventh_page();
  if (!page7) return;
  const train::SynthPage& upright = *page7;
  const train::SynthPage* current = nullptr;
  // An extra region over white paper (the page's margin): it reads as nothing, and nothing of
  // it may reach the page.
  std::vector<Quad> extra;
  TextDetector detector(
      [&](const GrayImage& image) {
        // A page found turned is detected again upright (PageReaderOptions::detect_upright).
        std::vector<Quad> quads = outlines(image.pixels == upright.image.pixels ? upright : *current);
        quads.insert(quads.end(), extra.begin(), extra.end());
        return painted_map(quads, image.width, image.height);
      },
      painted_options());
  Predictor& predictor = shipped_predictor();

  SECTION("upright: the lines in reading order, most words right, the blank region dropped") {
    current = &upright;
    const double middle = (double)upright.image.height / 2;
    extra = {Quad::from_rect({4, middle, 40, middle + 25})};  // in the left margin
    PageReadInfo info;
    const Page page = read_page(upright.image, "upright.png", detector, predictor, {}, &info);
    const PageTruth truth = truth_from_synth_json(train::page_truth_json(upright), "upright.json");
    const PageScore s = score_page(page, truth);
    INFO(page_text(page));
    INFO("truth:\n" << truth.text);
    INFO("words " << s.truth_words << " right " << s.right << " missed " << s.missed << " extra " << s.extra
                  << " cer " << s.cer());
    CHECK(page.error.empty());
    CHECK(page.width == upright.image.width);
    CHECK(info.rotation == 0);
    CHECK(info.rotation_decided);
    CHECK(info.boxes == (int64_t)upright.lines.size() + 1);
    CHECK(info.lines == (int64_t)upright.lines.size());  // the blank region left out
    CHECK(info.probe_confidence[0] > info.probe_confidence[1]);
    CHECK(info.probe_confidence[0] >= PageReaderOptions{}.orientation_sure);  // sure: not read turned
    CHECK_FALSE(info.probed_both);
    CHECK(info.probe_confidence[1] == 0);
    CHECK(s.word_accuracy() >= 0.85);
    CHECK(s.missed <= s.truth_words / 20);
    CHECK(s.extra <= s.truth_words / 20);
    CHECK(s.cer() <= 0.08);  // of the whole text in reading order: lines out of order would cost far more
    for (const PageBlock& b : page.blocks)
      for (const PageLine& l : b.lines) {
        CHECK(l.box.x0 >= 0);
        CHECK(l.box.y1 <= (double)page.height);
      }
    // Read both ways (never sure), the upright way wins and the page reads the same.
    PageReaderOptions both;
    both.orientation_sure = 1.01;
    PageReadInfo both_info;
    const Page both_ways = read_page(upright.image, "upright.png", detector, predictor, both, &both_info);
    CHECK(both_info.probed_both);
    CHECK(both_info.rotation == 0);
    CHECK(both_info.probe_confidence[0] > both_info.probe_confidence[1]);
    CHECK(page_text(both_ways) == page_text(page));
    // Given as upright, the page reads the same without the probe.
    PageReaderOptions given;
    given.rotation = 0;
    PageReadInfo given_info;
    const Page again = read_page(upright.image, "upright.png", detector, predictor, given, &given_info);
    CHECK(!given_info.rotation_decided);
    CHECK(page_text(again) == page_text(page));
  }

  SECTION("a blank page: no lines and no error") {
    train::SynthPage blank = upright;
    std::fill(blank.image.pixels.begin(), blank.image.pixels.end(), (uint8_t)255);
    blank.lines.clear();
    current = &blank;
    PageReadInfo info;
    const Page page = read_page(blank.image, "blank.png", detector, predictor, {}, &info);
    CHECK(page.error.empty());
    CHECK(page.blocks.empty());
    CHECK(info.boxes == 0);
    CHECK(page_text(page).empty());
  }

  for (int rotation : {90, 180, 270}) {
    DYNAMIC_SECTION("turned by " << rotation << " degrees: read upright, boxes in the turned image's pixels") {
      const train::SynthPage page_turned = turned(upright, rotation);
      current = &page_turned;
      PageReadInfo info;
      const Page page = read_page(page_turned.image, "turned.png", detector, predictor, {}, &info);
      const PageTruth truth = truth_from_synth_json(train::page_truth_json(page_turned), "turned.json");
      const PageScore s = score_page(page, truth);
      INFO(page_text(page));
      INFO("words " << s.truth_words << " right " << s.right << " missed " << s.missed << " extra " << s.extra
                    << " cer " << s.cer() << " probe " << info.probe_confidence[0] << " / "
                    << info.probe_confidence[1]);
      CHECK(info.rotation == rotation);
      CHECK(page.rotation == rotation);  // what --format jsonl writes
      CHECK(info.vertical == (rotation != 180));
      // Read as if upright (0 or 90), a page turned by 180 (or 270) is not sure; one turned by
      // 90 is read right the first way.
      CHECK(info.probed_both == (rotation != 90));
      CHECK(info.detected_upright);  // then detected again standing upright
      CHECK(page.width == page_turned.image.width);
      CHECK(page.height == page_turned.image.height);
      CHECK(s.word_accuracy() >= 0.85);
      CHECK(s.cer() <= 0.08);
      // The outlines found on the turned page read as well.
      PageReaderOptions as_found;
      as_found.detect_upright = false;
      PageReadInfo found_info;
      const Page found = read_page(page_turned.image, "turned.png", detector, predictor, as_found, &found_info);
      CHECK_FALSE(found_info.detected_upright);
      CHECK(found_info.rotation == rotation);
      CHECK(score_page(found, truth).word_accuracy() >= 0.85);
    }
  }
}

TEST_CASE("page reader: lines read below min_confidence are left out, a band of speckle among them", "[page_reader]") {
  const train::SynthPage* page7 = seventh_page();
  if (!page7) return;
  // The page with a band of random speckle below its text (what a detector takes for text in a
  // photo or a chart), outlined like a line.
  train::SynthPage page = *page7;
  const int64_t W = page.image.width, band = 28, top = page.image.height + 12;
  page.image.height += 60;
  page.image.pixels.resize((size_t)(W * page.image.height), 255);
  Generator gen(3);
  for (int64_t y = top; y < top + band; ++y)
    for (int64_t x = 20; x < W - 20; ++x) page.image.pixels[(size_t)(y * W + x)] = gen.next_u64() % 10 < 3 ? 0 : 255;
  const Quad speckle = Quad::from_rect({20, (double)top, (double)(W - 20), (double)(top + band)});
  TextDetector detector(
      [&](const GrayImage& image) {
        std::vector<Quad> quads = outlines(page);
        quads.push_back(speckle);
        return painted_map(quads, image.width, image.height);
      },
      painted_options());
  Predictor& predictor = shipped_predictor();
  const auto read = [&](double min_confidence, PageReadInfo& info) {
    PageReaderOptions o;
    o.rotation = 0;
    o.min_confidence = min_confidence;
    const Page read_back = read_page(page.image, "speckle.png", detector, predictor, o, &info);
    std::vector<PageLine> out;
    for (const PageBlock& b : read_back.blocks)
      for (const PageLine& l : b.lines) out.push_back(l);
    return out;
  };
  PageReadInfo all_info, default_info, high_info;
  const std::vector<PageLine> all = read(0, all_info);
  const size_t text_lines = page.lines.size();
  REQUIRE(all.size() == text_lines + 1);  // every text line and the speckle
  CHECK(all_info.dropped_lines == 0);
  // The speckle reads as junk, sure of nothing; the text lines read surely.
  const auto lowest = std::min_element(all.begin(), all.end(), [](const PageLine& a, const PageLine& b) {
    return a.confidence < b.confidence;
  });
  INFO("the least sure line: '" << lowest->text << "' at " << lowest->confidence);
  CHECK(lowest->box.y0 >= (double)top - 4);
  CHECK(lowest->confidence < 0.5);
  // The default (0.5) leaves out the speckle and nothing else.
  const std::vector<PageLine> kept = read(PageReaderOptions{}.min_confidence, default_info);
  CHECK(kept.size() == text_lines);
  CHECK(default_info.dropped_lines == 1);
  CHECK(default_info.boxes == all_info.boxes);
  for (const PageLine& l : kept) CHECK(l.box.y1 < (double)top);
  // A threshold between the text lines' confidences keeps exactly those at or above it.
  std::vector<double> sure;
  for (const PageLine& l : all)
    if (l.confidence >= 0.5) sure.push_back(l.confidence);
  std::sort(sure.begin(), sure.end());
  REQUIRE(sure.size() >= 2);
  const double cut = sure[sure.size() / 2];
  const std::vector<PageLine> high = read(cut, high_info);
  CHECK(high.size() == sure.size() - sure.size() / 2);
  CHECK(high_info.dropped_lines == (int64_t)(all.size() - high.size()));
  for (const PageLine& l : high) CHECK(l.confidence >= cut);
  PageReadInfo unused;
  CHECK_THROWS_WITH(read(1.5, unused), Catch::Contains("min_confidence must be in [0, 1]"));
}

TEST_CASE("page reader: lone line numbers the detector does not find are read from the page's ink", "[page_reader]") {
  const train::SynthPage* page7 = seventh_page();
  if (!page7) return;
  const auto fonts = page_fonts();
  REQUIRE(!fonts.empty());
  // The page moved 60 pixels right, with the line numbers "17" and "3" in the new margin beside
  // its second and fourth lines, set in the lines' type; the detector outlines the page's lines
  // only (as the shipped one misses a deposition's line numbers).
  const int64_t shift = 60;
  train::SynthPage page = *page7;
  const int64_t W = page7->image.width + shift, H = page7->image.height;
  page.image.width = W;
  page.image.pixels.assign((size_t)(W * H), 255);
  for (int64_t y = 0; y < H; ++y)
    std::copy_n(page7->image.pixels.begin() + y * page7->image.width, page7->image.width,
                page.image.pixels.begin() + y * W + shift);
  for (train::SynthLine& l : page.lines)
    for (Point& c : l.outline.corners) c.x += (double)shift;
  const std::vector<std::pair<std::string, size_t>> numbers = {{"17", 1}, {"3", 3}};
  for (const auto& [text, line] : numbers) {
    const Rect box = page.lines[line].outline.box();
    const GrayImage glyphs = fonts[0]->render(text, 0.8 * box.height());
    const int64_t top = (int64_t)((box.y0 + box.y1) / 2) - glyphs.height / 2;
    for (int64_t y = 0; y < glyphs.height; ++y)
      for (int64_t x = 0; x < glyphs.width; ++x) {
        uint8_t& p = page.image.pixels[(size_t)((top + y) * W + 12 + x)];
        p = std::min(p, glyphs.at(x, y));
      }
  }
  const train::SynthPage* shown = &page;  // the page as read_page is given it (turned below)
  TextDetector detector(
      [&](const GrayImage& image) {
        // A page found turned is detected again upright (PageReaderOptions::detect_upright).
        return painted_map(outlines(image.pixels == page.image.pixels ? page : *shown), image.width, image.height);
      },
      painted_options());
  const auto margin_lines = [&](double missed_ink, PageReadInfo& info) {
    PageReaderOptions o;
    o.rotation = 0;
    o.missed_ink = missed_ink;
    const Page read = read_page(page.image, "numbered.png", detector, shipped_predictor(), o, &info);
    std::vector<std::string> texts;
    for (const PageBlock& b : read.blocks)
      for (const PageLine& l : b.lines)
        if (l.box.x1 <= (double)shift) texts.push_back(l.text);
    std::sort(texts.begin(), texts.end());
    return texts;
  };
  PageReadInfo found, off;
  CHECK(margin_lines(PageReaderOptions{}.missed_ink, found) == std::vector<std::string>{"17", "3"});
  CHECK(found.ink_lines >= 2);
  CHECK(found.ink_lines_kept == 2);
  CHECK(found.boxes == (int64_t)page.lines.size());  // the detector's count alone
  CHECK(margin_lines(0, off).empty());
  CHECK(off.ink_lines == 0);
  CHECK(off.lines == found.lines - 2);
  PageReadInfo unused;
  CHECK_THROWS_WITH(margin_lines(1.5, unused), Catch::Contains("missed_ink must be in [0, 1]"));
  // The same page turned: the numbers are found on it turned upright (90, 270) or as it is (180),
  // and read the same.
  for (int rotation : {90, 180, 270}) {
    const train::SynthPage turned_page = turned(page, rotation);
    shown = &turned_page;
    PageReaderOptions o;
    o.rotation = rotation;
    PageReadInfo info;
    const Page read = read_page(turned_page.image, "turned.png", detector, shipped_predictor(), o, &info);
    std::vector<std::string> texts;
    for (const PageBlock& b : read.blocks)
      for (const PageLine& l : b.lines)
        if (l.text == "17" || l.text == "3") texts.push_back(l.text);
    std::sort(texts.begin(), texts.end());
    INFO("turned by " << rotation);
    CHECK(texts == std::vector<std::string>{"17", "3"});
    CHECK(info.ink_lines_kept == 2);
  }
}

TEST_CASE("page reader: a page lying sideways, whose lines the detector does not find, is detected again turned",
          "[page_reader]") {
  const train::SynthPage* page7 = seventh_page();
  if (!page7) return;
  const train::SynthPage& upright = *page7;
  const train::SynthPage upside_down = turned(upright, 180);
  // Like the shipped detector, this one finds lines only where they run across the image it is
  // given: on a page lying sideways it finds strips across the lines, one every two line
  // heights (what a detector trained on upright text makes of columns of sideways glyphs:
  // "|g|g|8|$|"), which read as junk either way.
  int calls = 0;
  TextDetector detector(
      [&](const GrayImage& image) {
        ++calls;
        if (image.pixels == upright.image.pixels) return painted_map(outlines(upright), image.width, image.height);
        if (image.pixels == upside_down.image.pixels)
          return painted_map(outlines(upside_down), image.width, image.height);
        Rect text = turned(upright, 90).lines.front().outline.box();
        double t = text.width();
        for (const train::SynthLine& l : turned(upright, 90).lines) text = text.united(l.outline.box());
        std::vector<Quad> pieces;
        for (double y = text.y0; y + t <= text.y1; y += 2 * t)
          pieces.push_back(Quad::from_rect(Rect{text.x0, y, text.x1, y + t}));
        return painted_map(pieces, image.width, image.height);
      },
      painted_options());
  Predictor& predictor = shipped_predictor();
  const PageTruth upright_truth = truth_from_synth_json(train::page_truth_json(upright), "upright.json");

  for (int rotation : {90, 270}) {
    DYNAMIC_SECTION("turned by " << rotation << " degrees") {
      const train::SynthPage page_turned = turned(upright, rotation);
      const PageTruth truth = truth_from_synth_json(train::page_truth_json(page_turned), "turned.json");
      PageReadInfo info;
      calls = 0;
      const Page page = read_page(page_turned.image, "sideways.png", detector, predictor, {}, &info);
      const PageScore s = score_page(page, truth);
      INFO(page_text(page));
      INFO("words " << s.truth_words << " right " << s.right << " cer " << s.cer() << " probe "
                    << info.probe_confidence[0] << " / " << info.probe_confidence[1] << " sideways "
                    << info.sideways_confidence);
      // Found upside down when turned by a quarter turn (270), it is detected a third time upright.
      CHECK(calls == (rotation == 90 ? 2 : 3));
      CHECK(info.detected_upright == (rotation == 270));
      CHECK(info.sideways_tried);
      CHECK(info.rotation == rotation);
      CHECK(info.vertical);
      CHECK(info.sideways_confidence >= PageReaderOptions{}.sideways_check);
      CHECK(info.boxes == (int64_t)upright.lines.size());
      CHECK(page.width == page_turned.image.width);
      CHECK(s.word_accuracy() >= 0.85);
      CHECK(s.cer() <= 0.08);
      // Without the second detection, the page reads as junk.
      PageReaderOptions never;
      never.sideways_check = 0;
      PageReadInfo never_info;
      const Page junk = read_page(page_turned.image, "sideways.png", detector, predictor, never, &never_info);
      CHECK_FALSE(never_info.sideways_tried);
      CHECK(std::max(never_info.probe_confidence[0], never_info.probe_confidence[1]) < PageReaderOptions{}.sideways_check);
      CHECK(score_page(junk, truth).word_accuracy() < 0.2);
    }
  }
  SECTION("a page standing upright is not detected again") {
    PageReadInfo info;
    calls = 0;
    const Page page = read_page(upright.image, "upright.png", detector, predictor, {}, &info);
    CHECK(calls == 1);
    CHECK_FALSE(info.sideways_tried);
    CHECK(score_page(page, upright_truth).word_accuracy() >= 0.85);
  }
}

TEST_CASE("page reader: a DBNet with random weights runs end to end within its limits", "[page_reader]") {
  Generator gen(3);
  auto model = nn::make_detector("dbnet", gen);
  DetectorOptions o;
  o.max_side = 256;
  TextDetector detector(model, o);
  CHECK(detector.box_options().threshold == model->config.threshold);
  CHECK(detector.box_options().unclip_ratio == model->config.unclip_ratio);

  // A page of 700 x 300 with some dark bars (ink of a kind).
  GrayImage page;
  page.width = 700, page.height = 300;
  page.pixels.assign((size_t)(700 * 300), 235);
  for (int64_t y = 40; y < 60; ++y)
    for (int64_t x = 30; x < 600; x += 1) page.pixels[(size_t)(y * 700 + x)] = (x / 9) % 2 ? 20 : 235;

  const ProbabilityMap map = detector.probability_map(page);
  // The longer side scaled down to at most max_side (and not much less), the aspect ratio kept,
  // the padding to multiples of 32 not part of the map.
  CHECK(map.width <= 256);
  CHECK(map.width >= 254);
  CHECK(std::abs((double)map.height - (double)map.width * 300 / 700) <= 1);
  REQUIRE((int64_t)map.values.size() == map.width * map.height);
  CHECK(std::all_of(map.values.begin(), map.values.end(), [](float v) { return v >= 0 && v <= 1; }));
  for (const nn::TextBox& b : detector.detect(page))
    for (const Point& c : b.outline.corners) {
      CHECK(c.x >= 0);
      CHECK(c.x <= 700);
      CHECK(c.y >= 0);
      CHECK(c.y <= 300);
    }
  // A small page is never enlarged.
  GrayImage small = page;
  small.width = 100, small.height = 50;
  small.pixels.assign(100 * 50, 255);
  CHECK(detector.probability_map(small).width == 100);

  PageReadInfo info;
  const Page read = read_page(page, "random.png", detector, shipped_predictor(), {}, &info);
  CHECK(read.error.empty());
  CHECK(info.lines <= info.boxes);
  for (const PageBlock& b : read.blocks)
    for (const PageLine& l : b.lines) {
      CHECK(l.box.x0 >= 0);
      CHECK(l.box.x1 <= 700);
      CHECK(l.box.y1 <= 300);
    }

  // Its model file loads as a detector; a recogniser's file, a missing one, do not.
  TempDir dir("page-reader-model");
  const std::string path = (dir.path / "det.safetensors").string();
  nn::ModelInfo mi;
  mi.arch = "dbnet";
  mi.config = model->config_json();
  mi.input = nn::detector_input_spec();
  nn::save_model_file(path, *model, mi);
  TextDetector loaded(path, o);
  CHECK(loaded.probability_map(page).values == map.values);
  CHECK_THROWS_WITH(TextDetector(kModel), Catch::Contains("not a text detector"));
  CHECK_THROWS_WITH(TextDetector((dir.path / "none.safetensors").string()),
                    Catch::Contains("cannot load the text detector's model file"));
}

namespace {

// The shipped float detector's path, or "" with a warning that `untested` is not tested.
std::string shipped_float_detector(const std::string& untested) {
  const std::string det = kSource + "/weights/det-en.safetensors";
  if (fs::exists(det)) return det;
  WARN("weights/det-en.safetensors is missing: " << untested << " not tested");
  return "";
}

}  // namespace

TEST_CASE("the detector's thresholds: the model file's, or the caller's (--det-threshold, --box-threshold)", "[page_reader]") {
  const std::string det = shipped_float_detector("the threshold overrides are");
  if (det.empty()) return;
  const GrayImage page = load_gray_image(kSource + "/samples/pages/article.png");
  TextDetector shipped(det);
  const nn::TextBoxOptions own = shipped.box_options();
  const size_t found = shipped.detect(page).size();
  REQUIRE(found > 10);

  DetectorOptions lower;
  lower.box_threshold = 0.05;  // regions of any mean probability above the pixel threshold
  TextDetector loose(det, lower);
  CHECK(loose.box_options().box_threshold == 0.05f);
  CHECK(loose.box_options().threshold == own.threshold);  // the other one stays the file's
  CHECK(loose.detect(page).size() >= found);

  DetectorOptions none;
  none.threshold = 1.0;  // no probability is above 1: no pixel is text
  TextDetector blind(det, none);
  CHECK(blind.box_options().threshold == 1.0f);
  CHECK(blind.box_options().box_threshold == own.box_threshold);
  CHECK(blind.detect(page).empty());

  DetectorOptions bad;
  bad.box_threshold = 1.5;
  CHECK_THROWS_WITH(TextDetector(det, bad), Catch::Contains("a threshold must be in [0, 1], got 1.5"));
}

TEST_CASE("the detector's two looks taken apart find detect()'s outlines, and the first alone says it is whole",
          "[page_reader]") {
  const std::string det = shipped_float_detector("the detector's looks taken apart are");
  if (det.empty()) return;
  const GrayImage page = load_gray_image(kSource + "/samples/pages/article.png");  // 1241 x 1754
  auto same = [](const std::vector<nn::TextBox>& a, const std::vector<nn::TextBox>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      for (size_t k = 0; k < 4; ++k)
        if (a[i].outline.corners[k].x != b[i].outline.corners[k].x ||
            a[i].outline.corners[k].y != b[i].outline.corners[k].y)
          return false;
    return true;
  };
  SECTION("a page whose print counts as small takes a second look") {
    DetectorOptions o;
    o.max_side = 640;      // the page scaled down to about a third of its pixels
    o.small_lines = 1000;  // any print counts as small: a second look, up to 1.6 x 640
    TextDetector detector(det, o);
    int64_t side = -1;
    const std::vector<nn::TextBox> first = detector.detect_first_look(page, nullptr, &side);
    REQUIRE(first.size() >= 8);
    CHECK(side == second_look_side(first, page.width, page.height, o));
    REQUIRE(side > o.max_side);
    CHECK(side <= 1024);
    const std::vector<nn::TextBox> whole = detector.detect(page), second = detector.detect_second_look(page, side);
    CHECK(same(second, whole));
    CHECK_FALSE(same(first, whole));  // the second look's outlines replace the first's
    CHECK_THROWS_WITH(detector.detect_second_look(page, 640), Catch::Contains("larger than max_side"));
  }
  SECTION("a page of print of a usual size takes one look, and the first is detect()'s") {
    TextDetector detector(det);  // max_side 1280: the page is scaled down, its lines are thick enough
    int64_t side = -1;
    const std::vector<nn::TextBox> first = detector.detect_first_look(page, nullptr, &side);
    REQUIRE(first.size() > 10);
    CHECK(side == 0);
    CHECK(same(first, detector.detect(page)));
  }
}

TEST_CASE("page reader: the sideways check takes the detector's first look, the second only for a page it turns",
          "[page_reader]") {
  const std::string det = shipped_float_detector("the sideways check's looks are");
  const train::SynthPage* page7 = seventh_page();
  if (det.empty() || !page7) return;
  DetectorOptions o;
  o.max_side = 640;      // the page (about 1020 x 530) scaled down
  o.small_lines = 1000;  // any print counts as small: every look at the whole page wants a second
  TextDetector detector(det, o);
  Predictor& predictor = shipped_predictor();
  const PageTruth upright_truth = truth_from_synth_json(train::page_truth_json(*page7), "upright.json");
  PageReadInfo upright_info;
  const Page upright = read_page(page7->image, "upright.png", detector, predictor, {}, &upright_info);
  INFO(page_text(upright));
  CHECK_FALSE(upright_info.sideways_tried);
  CHECK(upright_info.detect.looks == 2);  // detect(): the first look and the second
  REQUIRE(score_page(upright, upright_truth).word_accuracy() >= 0.85);
  for (int rotation : {90, 270}) {
    DYNAMIC_SECTION("turned by " << rotation << " degrees") {
      const train::SynthPage page_turned = turned(*page7, rotation);
      PageReadInfo info;
      const Page page = read_page(page_turned.image, "sideways.png", detector, predictor, {}, &info);
      INFO(page_text(page));
      REQUIRE(info.sideways_tried);
      CHECK(info.rotation == rotation);
      // Upright: both looks (junk: the page lies sideways); turned by 90: the first look, then,
      // the page kept turned, the second. At 270 the page is detected again upright, both looks.
      CHECK(info.detect.looks == (rotation == 90 ? 4 : 5));
      CHECK(info.detected_upright == (rotation == 270));
      // The outlines are those of detect() on the page standing upright, turned back.
      const GrayImage standing = turn_clockwise(page_turned.image, (360 - rotation) % 360);
      CHECK(info.boxes == (int64_t)detector.detect(standing).size());
      const PageTruth truth = truth_from_synth_json(train::page_truth_json(page_turned), "turned.json");
      CHECK(score_page(page, truth).word_accuracy() >= 0.85);
    }
  }
  SECTION("a page that reads poorly every way is not turned, and costs one look more") {
    // The page turned by 45 degrees about its centre (nearest pixel, white outside): lines
    // across it, which read as junk upright and turned.
    const GrayImage& src = page7->image;
    const int64_t side = (int64_t)std::ceil(std::hypot((double)src.width, (double)src.height));
    GrayImage slanted;
    slanted.width = slanted.height = side;
    slanted.pixels.assign((size_t)(side * side), 255);
    const double c = std::sqrt(0.5);
    for (int64_t y = 0; y < side; ++y)
      for (int64_t x = 0; x < side; ++x) {
        const double dx = x - side / 2.0, dy = y - side / 2.0;
        const int64_t u = (int64_t)std::lround(c * dx + c * dy + src.width / 2.0);
        const int64_t v = (int64_t)std::lround(-c * dx + c * dy + src.height / 2.0);
        if (u >= 0 && u < src.width && v >= 0 && v < src.height)
          slanted.pixels[(size_t)(y * side + x)] = src.pixels[(size_t)(v * src.width + u)];
      }
    PageReadInfo info;
    const Page page = read_page(slanted, "slanted.png", detector, predictor, {}, &info);
    INFO(page_text(page) << "probe " << info.probe_confidence[0] << " / " << info.probe_confidence[1]);
    REQUIRE(info.sideways_tried);
    CHECK(info.rotation != 90);
    CHECK(info.rotation != 270);
    CHECK(info.detect.looks == 3);  // both looks upright, the check's first look turned
  }
}

TEST_CASE("add_unseen_boxes: a box is added where it overlaps none of the first pass's by more than a fifth",
          "[page_reader]") {
  auto box = [](double x0, double y0, double x1, double y1) {
    nn::TextBox b;
    b.outline = Quad::from_rect({x0, y0, x1, y1});
    return b;
  };
  std::vector<nn::TextBox> boxes = {box(0, 0, 100, 20), box(0, 40, 100, 60)};
  const std::vector<nn::TextBox> more = {
      box(10, 2, 90, 18),     // inside the first: seen
      box(80, 40, 200, 60),   // 20 x 20 on the second: exactly a fifth of the smaller box (the
                              // second, 100 x 20), not more, so unseen
      box(50, 40, 160, 60),   // half of the second: seen
      box(0, 100, 100, 120),  // nowhere near: unseen
      box(100, 0, 150, 20),   // touching the first's edge only: unseen
  };
  CHECK(add_unseen_boxes(boxes, more) == 3);
  REQUIRE(boxes.size() == 5);
  CHECK(boxes[2].outline.box().x0 == 80);
  CHECK(boxes[3].outline.box().y0 == 100);
  CHECK(boxes[4].outline.box().x0 == 100);
  // Added boxes are not compared with each other: only with the first pass's.
  std::vector<nn::TextBox> none;
  CHECK(add_unseen_boxes(none, {box(0, 0, 10, 10), box(0, 0, 10, 10)}) == 2);
}

TEST_CASE("the detector's descreening pass keeps the first pass's lines and adds only unseen ones", "[page_reader]") {
  const std::string det = shipped_float_detector("the descreening pass is");
  if (det.empty()) return;
  const GrayImage page = load_gray_image(kSource + "/samples/pages/article.png");
  DetectorOptions plain_options;
  plain_options.descreen = 0;
  TextDetector plain(det, plain_options), descreening(det);  // the default: a pass at 0.75 pixels
  CHECK(descreening.options().descreen == 0.75);
  const std::vector<nn::TextBox> first = plain.detect(page), both = descreening.detect(page);
  REQUIRE(first.size() > 10);
  REQUIRE(both.size() >= first.size());
  // Every outline of the first pass is among them as it was; the others overlap none of those.
  auto same = [](const nn::TextBox& a, const nn::TextBox& b) {
    for (size_t k = 0; k < 4; ++k)
      if (a.outline.corners[k].x != b.outline.corners[k].x || a.outline.corners[k].y != b.outline.corners[k].y)
        return false;
    return true;
  };
  std::vector<nn::TextBox> added;
  for (const nn::TextBox& b : both)
    if (std::none_of(first.begin(), first.end(), [&](const nn::TextBox& a) { return same(a, b); })) added.push_back(b);
  CHECK(added.size() == both.size() - first.size());
  std::vector<nn::TextBox> check = first;
  CHECK(add_unseen_boxes(check, added) == (int64_t)added.size());
  // In text_boxes' order: top to bottom, then left to right.
  for (size_t i = 1; i < both.size(); ++i) {
    const Rect a = both[i - 1].outline.box(), b = both[i].outline.box();
    CHECK((a.y0 < b.y0 || (a.y0 == b.y0 && a.x0 <= b.x0)));
  }
  for (const double bad : {-1.0, 9.0, std::nan("")}) {
    DetectorOptions o;
    o.descreen = bad;
    CHECK_THROWS_WITH(TextDetector(det, o), Catch::Contains("descreen must be in [0, 8] pixels"));
  }
}

namespace {
// A halftone screen of a grey about 55% dark: in each 3 x 3 cell, the pixels of the first two
// rows and columns are ink (4 of 9), the others paper, as a printer's screen of dots makes a
// shaded table cell. Ink already on the page stays ink.
void screen_rect(GrayImage& page, int64_t x0, int64_t y0, int64_t x1, int64_t y1) {
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x) {
      uint8_t& p = page.pixels[(size_t)(y * page.width + x)];
      if (x % 3 != 2 && y % 3 != 2) p = std::min<uint8_t>(p, 40);
    }
}

bool inside(const Rect& r, const Rect& outer) {
  return r.x0 >= outer.x0 && r.y0 >= outer.y0 && r.x1 <= outer.x1 && r.y1 <= outer.y1;
}
}  // namespace

TEST_CASE("screened_regions: a field of halftone dots is found, and text, flat grey and solid ink are not",
          "[page_reader]") {
  GrayImage page;
  page.width = 640, page.height = 480;
  page.pixels.assign((size_t)(page.width * page.height), 255);
  auto fill = [&](int64_t x0, int64_t y0, int64_t x1, int64_t y1, uint8_t v) {
    for (int64_t y = y0; y < y1; ++y)
      for (int64_t x = x0; x < x1; ++x) page.pixels[(size_t)(y * page.width + x)] = v;
  };
  for (int64_t line = 0; line < 6; ++line)  // "text": strokes 2 px wide, 14 high, 5 apart
    for (int64_t x = 20; x < 250; x += 5) fill(x, 20 + line * 24, x + 2, 34 + line * 24, 0);
  fill(20, 200, 200, 300, 128);  // flat grey
  fill(20, 340, 200, 460, 0);    // solid ink
  {
    const GrayImage blurred = gaussian_blur(page, 0.75);
    CHECK(screened_regions(page, blurred).empty());
  }
  screen_rect(page, 400, 300, 600, 440);
  const GrayImage blurred = gaussian_blur(page, 0.75);
  const std::vector<Rect> regions = screened_regions(page, blurred);
  REQUIRE(regions.size() == 1);
  const Rect r = regions[0];
  CHECK(inside({400, 300, 600, 440}, r));  // the field, with the reach around it
  CHECK(inside(r, {0, 0, 640, 480}));
  CHECK(r.x0 >= 260);  // the text, the grey and the ink are outside
  CHECK(r.y0 > 150);
  // On the model's grid: 32-pixel steps from the page's corner (or the page's edge).
  CHECK(std::fmod(r.x0, 32) == 0);
  CHECK(std::fmod(r.y0, 32) == 0);
  CHECK((r.x1 == 640 || std::fmod(r.x1 - r.x0, 32) == 0));
  CHECK((r.y1 == 480 || std::fmod(r.y1 - r.y0, 32) == 0));
  // Regions never overlap: two fields within reach of each other become one.
  screen_rect(page, 400, 40, 600, 200);
  const std::vector<Rect> two = screened_regions(page, gaussian_blur(page, 0.75));
  REQUIRE(two.size() == 1);
  CHECK(inside({400, 40, 600, 440}, two[0]));
  GrayImage small = page;
  small.width = 10;
  CHECK_THROWS_WITH(screened_regions(small, blurred), Catch::Contains("differ in size"));
}

TEST_CASE("the descreening pass runs only where the page is screened, and adds lines only there", "[page_reader]") {
  const std::string det = shipped_float_detector("the descreening pass is");
  if (det.empty()) return;
  GrayImage page = load_gray_image(kSource + "/samples/pages/article.png");
  DetectorOptions plain_options;
  plain_options.descreen = 0;
  TextDetector plain(det, plain_options), descreening(det);
  // A page without a screen: the pass never runs, the outlines are the first pass's.
  {
    const GrayImage scaled = nn::scale_for_detection(page, plain.options().max_side);
    CHECK(screened_regions(scaled, gaussian_blur(scaled, 0.75)).empty());
    const std::vector<nn::TextBox> a = plain.detect(page), b = descreening.detect(page);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].outline.box().x0 == b[i].outline.box().x0);
  }
  // A third of the page under a screen: whatever the pass adds lies in the screened region.
  const int64_t x0 = page.width / 3, y0 = page.height / 3, x1 = 2 * page.width / 3, y1 = 2 * page.height / 3;
  screen_rect(page, x0, y0, x1, y1);
  const GrayImage scaled = nn::scale_for_detection(page, plain.options().max_side);
  const std::vector<Rect> regions = screened_regions(scaled, gaussian_blur(scaled, 0.75));
  REQUIRE(!regions.empty());
  const double sx = (double)page.width / (double)scaled.width, sy = (double)page.height / (double)scaled.height;
  const std::vector<nn::TextBox> first = plain.detect(page), both = descreening.detect(page);
  REQUIRE(both.size() >= first.size());
  std::vector<nn::TextBox> added;
  for (const nn::TextBox& b : both) {
    const bool kept = std::any_of(first.begin(), first.end(), [&](const nn::TextBox& a) {
      return a.outline.box().x0 == b.outline.box().x0 && a.outline.box().y0 == b.outline.box().y0 &&
             a.outline.box().x1 == b.outline.box().x1 && a.outline.box().y1 == b.outline.box().y1;
    });
    if (!kept) added.push_back(b);
  }
  CHECK(added.size() == both.size() - first.size());
  for (const nn::TextBox& b : added) {
    const Rect box = b.outline.box();
    const bool in_region = std::any_of(regions.begin(), regions.end(), [&](const Rect& r) {
      return inside(box, {r.x0 * sx - 1, r.y0 * sy - 1, r.x1 * sx + 1, r.y1 * sy + 1});
    });
    CHECK(in_region);
  }
  INFO("first pass " << first.size() << " outlines, the descreening pass added " << added.size());
  CHECK(!added.empty());  // the screened part's lines, which the sharp page shows as dots
}

TEST_CASE("inputs: lines told from pages by their shape", "[page_reader]") {
  CHECK(!page_shaped(897, 41));     // a sample line
  CHECK(!page_shaped(3000, 150));   // a line at 600 dpi
  CHECK(page_shaped(2480, 3508));   // A4 at 300 dpi
  CHECK(page_shaped(800, 150));     // two lines of a paragraph
  CHECK(page_shaped(342, 1200));    // a receipt
  CHECK(!page_shaped(500, 100));    // not more than 100 high
  int64_t w = 0, h = 0;
  REQUIRE(image_file_size(kSampleLine, w, h));
  CHECK(w == 897);
  CHECK(h == 41);
  CHECK(!image_file_size(kSource + "/README.md", w, h));
  CHECK(!image_file_size("/nonexistent.png", w, h));
}

namespace {

// A multi-page 8-bit gray TIFF of the given images.
void write_tiff(const fs::path& path, const std::vector<GrayImage>& pages) {
  TIFF* tif = TIFFOpen(path.c_str(), "w");
  REQUIRE(tif != nullptr);
  for (const GrayImage& p : pages) {
    TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, (uint32_t)p.width);
    TIFFSetField(tif, TIFFTAG_IMAGELENGTH, (uint32_t)p.height);
    TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8);
    TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
    TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(tif, TIFFTAG_COMPRESSION, COMPRESSION_NONE);
    TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, (uint32_t)p.height);
    TIFFSetField(tif, TIFFTAG_SUBFILETYPE, FILETYPE_PAGE);
    for (int64_t y = 0; y < p.height; ++y)
      REQUIRE(TIFFWriteScanline(tif, const_cast<uint8_t*>(p.pixels.data() + y * p.width), (uint32_t)y, 0) == 1);
    REQUIRE(TIFFWriteDirectory(tif) == 1);
  }
  TIFFClose(tif);
}

GrayImage white(int64_t w, int64_t h) {
  GrayImage g;
  g.width = w, g.height = h;
  g.pixels.assign((size_t)(w * h), 255);
  return g;
}

}  // namespace

TEST_CASE("ocrt-infer: pages and lines, --line and --page, TIFF pages, documents, no detector", "[page_reader][cli]") {
  TempDir dir("page-cli");
  const std::string bin = program("ocrt-infer") + " --threads 2 ";
  const std::string line = (dir.path / "line.png").string();
  fs::copy_file(kSampleLine, line);
  const std::string page = (dir.path / "page.png").string();
  save_gray_png(page, white(400, 500));
  const GrayImage sample = load_gray_image(kSampleLine);
  const std::string tif = (dir.path / "scan.tif").string();
  write_tiff(tif, {sample, sample});
  // A random-weight detector's model file: what it finds is noise, but every path runs.
  const std::string det = (dir.path / "det.safetensors").string();
  {
    Generator gen(5);
    auto model = nn::make_detector("dbnet", gen);
    nn::ModelInfo mi;
    mi.arch = "dbnet";
    mi.config = model->config_json();
    mi.input = nn::detector_input_spec();
    nn::save_model_file(det, *model, mi);
  }
  const bool shipped_detector = fs::exists(kSource + "/weights/det-en.safetensors");
  std::string out;

  // The line alone, as before.
  REQUIRE(run_command(quiet(bin + line), &out) == 0);
  const std::string line_text = out;
  CHECK(line_text.size() > 10);

  // No early return inside a section: Catch finds a test case's later sections only by running
  // past them, so a `return` here had left every section below unrun.
  SECTION("no detector: the page gets an error of its own, the line is read, exit status 1") {
    if (shipped_detector) {
      WARN("weights/det-en.safetensors exists: the missing-detector case is not tested");
    } else {
      CHECK(run_command(bin + line + " " + page, &out) == 1);
      CHECK_THAT(out, Catch::Contains(line_text));
      CHECK_THAT(out, Catch::Contains("page.png: read as a page (it is 400x500 pixels") &&
                          Catch::Contains("there is no text detector model") && Catch::Contains("--det-weights FILE") &&
                          Catch::Contains("--line"));
      CHECK_THAT(out, Catch::Contains("1 pages (1 failed)"));
      // --page makes even the line a page; --line reads the page as a (blank) line.
      CHECK(run_command(bin + "--page " + line, &out) == 1);
      CHECK_THAT(out, Catch::Contains("line.png: read as a page (--page)"));
      CHECK(run_command(quiet(bin + "--line " + page), &out) == 0);
      CHECK(out == "\n");
      // Every page of a multi-page TIFF, each named.
      CHECK(run_command(bin + tif, &out) == 1);
      CHECK_THAT(out, Catch::Contains("scan.tif#1: read as a page (a page of a multi-page TIFF)") &&
                          Catch::Contains("scan.tif#2:"));
    }
  }

  SECTION("--format tsv, a table of lines: every image is a line, and --page is refused") {
    REQUIRE(run_command(quiet(bin + "--det-weights " + det + " --format tsv " + page + " " + line), &out) == 0);
    CHECK_THAT(out, Catch::StartsWith(page + "\t") && Catch::Contains("\n" + line + "\t"));
    CHECK(run_command(bin + "--page --format tsv " + line, &out) == 2);
    CHECK_THAT(out, Catch::Contains("--page: --format tsv writes text lines only"));
  }

  SECTION("a multi-page TIFF: pages by default, lines with --line, named file#N") {
    REQUIRE(run_command(quiet(bin + "--line --format jsonl " + tif), &out) == 0);
    CHECK_THAT(out, Catch::Contains("\"path\":\"" + tif + "#1\"") && Catch::Contains("\"path\":\"" + tif + "#2\""));
    const std::string text = line_text.substr(0, line_text.size() - 1);
    CHECK_THAT(out, Catch::Contains("\"text\":\"" + text + "\""));
    REQUIRE(run_command(quiet(bin + "--det-weights " + det + " --format jsonl " + tif), &out) == 0);
    CHECK_THAT(out, Catch::Contains("\"path\":\"" + tif + "#1\"") && Catch::Contains("\"blocks\":"));
    // PAGE XML holds one page: --output-dir gives each page its document.
    const fs::path od = dir.path / "page-xml";
    REQUIRE(run_command(quiet(bin + "--det-weights " + det + " --format page --output-dir " + od.string() + " " + tif),
                        &out) == 0);
    CHECK(fs::exists(od / "scan-1.xml"));
    CHECK(fs::exists(od / "scan-2.xml"));
    // ... and on stdout the second page cannot be written.
    CHECK(run_command(bin + "--det-weights " + det + " --format page " + tif, &out) == 1);
    CHECK_THAT(out, Catch::Contains("a PAGE XML document holds one page"));
  }

  SECTION("documents: a page and a line (a page of one line) into --output-dir") {
    const fs::path od = dir.path / "hocr";
    REQUIRE(run_command(quiet(bin + "--det-weights " + det + " --format hocr --output-dir " + od.string() + " " + page +
                                  " " + line),
                            &out) == 0);
    CHECK(out.empty());
    const std::string page_doc = read_text(od / "page.hocr"), line_doc = read_text(od / "line.hocr");
    CHECK_THAT(page_doc, Catch::Contains("class=\"ocr_page\"") && Catch::Contains("bbox 0 0 400 500"));
    CHECK_THAT(line_doc, Catch::Contains("bbox 0 0 897 41") && Catch::Contains("ocrx_word"));
    // The line's text as a one-line page's text.
    REQUIRE(run_command(quiet(bin + "--format text --output-dir " + od.string() + " " + line), &out) == 0);
    CHECK(read_text(od / "line.txt") == line_text);
    // Two inputs of one name would write one file: the second is refused.
    fs::create_directories(dir.path / "again");
    fs::copy_file(line, dir.path / "again" / "line.png");
    CHECK(run_command(bin + "--format jsonl --output-dir " + od.string() + " " + line + " " +
                          (dir.path / "again" / "line.png").string(), &out) == 1);
    CHECK_THAT(out, Catch::Contains("two inputs with the same file name"));
    // hOCR on stdout: one document holding every page, lines included.
    REQUIRE(run_command(quiet(bin + "--det-weights " + det + " --format alto " + page + " " + line), &out) == 0);
    CHECK(std::count(out.begin(), out.end(), '\n') > 5);
    CHECK(out.find("<alto") != std::string::npos);
    CHECK(out.find("<alto", out.find("<alto") + 1) == std::string::npos);
  }

  SECTION("--eval on pages with their truth beside them; bad pages fail alone") {
    // A corrupt page: a PNG header that says 400 x 500, then nothing.
    const std::string broken = (dir.path / "broken.png").string();
    {
      const std::string bytes = read_text(page);
      std::ofstream(broken, std::ios::binary) << bytes.substr(0, 40);
    }
    CHECK(run_command(bin + "--det-weights " + det + " " + broken + " " + line, &out) == 1);
    CHECK_THAT(out, Catch::Contains("broken.png") && Catch::Contains(line_text));
    // Truth for the blank page: one word it cannot have read.
    std::ofstream(dir.path / "page.json")
        << R"({"width": 400, "height": 500, "lines": [{"text": "hello", "points": [[10,10],[90,10],[90,40],[10,40]],)"
        << R"( "words": [{"text": "hello", "points": [[10,10],[90,10],[90,40],[10,40]]}]}]})";
    CHECK(page_truth_file(page) == (dir.path / "page.json").string());
    REQUIRE(run_command(quiet(bin + "--det-weights " + det + " --eval " + page), &out) == 0);
    CHECK_THAT(out, Catch::Contains("pages: 1 (0 failed)") && Catch::Contains("words: 1, right 0") &&
                        Catch::Contains("page.png: words 1"));
    // The word it did not read, listed under the page (--worst 0: not listed).
    CHECK_THAT(out, Catch::Contains("words not read right") && Catch::Contains("missed: \"hello\""));
    REQUIRE(run_command(quiet(bin + "--det-weights " + det + " --eval --worst 0 " + page), &out) == 0);
    CHECK_THAT(out, !Catch::Contains("words not read right") && Catch::Contains("words: 1, right 0"));
    REQUIRE(run_command(quiet(bin + "--det-weights " + det + " --eval --format jsonl " + page), &out) == 0);
    CHECK_THAT(out, Catch::Contains("\"eval\":") && Catch::Contains("\"page_summary\":"));
    CHECK_THAT(out, Catch::Contains("\"misses\":") && Catch::Contains("\"kind\":\"missed\"") &&
                        Catch::Contains("\"truth\":\"hello\"") && Catch::Contains("\"joined\":0"));
  }

  SECTION("flags that do not go together, and bad values, stop the run with status 2") {
    ocrt::testing::check_refusals(
        "ocrt-infer", bin, 2,
        {{"--line --page " + line, "give --line or --page, not both"},
         {"--format tsv --output-dir " + (dir.path / "o").string() + " " + line, "--output-dir writes one document"},
         {"--eval --format hocr " + page, "--eval prints its report on stdout"},
         {"--max-side 10 " + page, "--max-side: must be in [32, 65536], got 10"},
         {"--rotation 45 " + page, "--rotation: expected auto, 0, 90, 180 or 270, got '45'"},
         {"--box-threshold 1.5 " + page, "--box-threshold: must be in [0, 1], got 1.5"},
         {"--det-threshold -0.1 " + page, "--det-threshold: must be in [0, 1], got -0.1"},
         {"--space-gap 5 " + page, "--space-gap: must be in [0, 4], got 5"},
         {"--det-weights " + (dir.path / "none.safetensors").string() + " " + page,
          "cannot load the text detector's model file"}});
  }
}
