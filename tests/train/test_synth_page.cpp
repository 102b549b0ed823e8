// Synthetic pages (train/synth_page.h): every layout draws lines whose outlines hold their
// words and whose words hold ink, inside the page, upright or turned; a page is a function of
// its seed; the options are checked; the truth JSON carries every line.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "runtime/json.h"
#include "runtime/page_truth.h"
#include "train/synth_page.h"

using namespace ocrt;
using namespace ocrt::train;

namespace {

std::vector<std::shared_ptr<Font>> test_fonts() {
  const auto dirs = default_font_dirs();
  if (dirs.empty()) return {};
  std::vector<std::shared_ptr<Font>> fonts;
  for (auto& f : load_fonts(dirs))
    if (f->covers("Hag 7.:-") && fonts.size() < 3) fonts.push_back(f);
  return fonts;
}

const TextSource& test_text() {
  static const TextSource source({"alpha", "beta", "gamma", "delta", "Epsilon", "zeta", "eta", "theta", "42", "iota"},
                                 nn::Charset::ascii(),
                                 {"The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog,", "and", "then",
                                  "it", "sleeps", "in", "the", "warm", "sun", "for", "an", "hour."});
  return source;
}

PageSynthOptions quick(int layout) {
  PageSynthOptions o;
  o.min_dpi = o.max_dpi = 90;  // small pages: fast
  o.min_pt = 9, o.max_pt = 12;
  o.max_skew_deg = 0;
  o.p_scan = 0;
  o.p_bleed = o.p_light = 0;
  o.layout_weights = {0, 0, 0, 0, 0, 0};
  o.layout_weights[(size_t)layout] = 1;
  return o;
}

bool inside(const Rect& inner, const Rect& outer, double slack) {
  return inner.x0 >= outer.x0 - slack && inner.y0 >= outer.y0 - slack && inner.x1 <= outer.x1 + slack &&
         inner.y1 <= outer.y1 + slack;
}

// How far the pixel under a box that differs most from the paper is from it.
int contrast(const GrayImage& img, const Rect& r, int paper) {
  int most = 0;
  for (int64_t y = std::max<int64_t>(0, (int64_t)r.y0); y < std::min<int64_t>(img.height, (int64_t)std::ceil(r.y1)); ++y)
    for (int64_t x = std::max<int64_t>(0, (int64_t)r.x0); x < std::min<int64_t>(img.width, (int64_t)std::ceil(r.x1)); ++x)
      most = std::max(most, paper < 128 ? img.at(x, y) - paper : paper - img.at(x, y));
  return most;
}

// The paper: the most common gray level.
int paper_of(const GrayImage& img) {
  std::vector<int64_t> count(256, 0);
  for (uint8_t p : img.pixels) ++count[p];
  return (int)(std::max_element(count.begin(), count.end()) - count.begin());
}

// Every line on the page, its words inside it and its text their words; ink under every word:
// paper of 215-255 and ink of 0-60 differ by at least 155 levels, and a stroke one pixel thin
// keeps at least half of that through the bilinear turn, so some pixel under each word is at
// least 50 levels darker than the paper (lighter, on a dark slide).
void check_page(const SynthPage& page, size_t min_lines) {
  const Rect all{0, 0, (double)page.image.width, (double)page.image.height};
  const int paper = paper_of(page.image);
  CHECK(page.lines.size() >= min_lines);
  for (const SynthLine& l : page.lines) {
    INFO(l.text);
    CHECK(inside(l.outline.box(), all, 0));
    REQUIRE(!l.words.empty());
    std::string joined;
    for (const SynthWord& w : l.words) {
      joined += (joined.empty() ? "" : " ") + w.text;
      CHECK(inside(w.outline.box(), l.outline.box(), 1e-6));
      CHECK(contrast(page.image, w.outline.box(), paper) > 50);  // ink under every word
    }
    CHECK(joined == l.text);
  }
}

}  // namespace

TEST_CASE("synthetic pages: every layout, upright", "[synth_page]") {
  const auto fonts = test_fonts();
  if (fonts.empty()) {
    WARN("no Debian fonts installed (scripts/install-deps.sh); skipping");
    return;
  }
  const size_t min_lines[kPageLayouts] = {15, 10, 4, 5, 3, 8};
  for (int layout = 0; layout < kPageLayouts; ++layout) {
    for (uint64_t seed : {1u, 2u}) {
      INFO("layout " << page_layout_name((PageLayout)layout) << ", seed " << seed);
      const SynthPage page = render_page(test_text(), fonts, seed, quick(layout));
      CHECK(page.layout == (PageLayout)layout);
      CHECK(page.skew_deg == 0);
      check_page(page, min_lines[layout]);
    }
  }
}

TEST_CASE("synthetic pages: turned and scanned pages keep their outlines on the ink", "[synth_page]") {
  const auto fonts = test_fonts();
  if (fonts.empty()) return;
  PageSynthOptions o = quick(0);
  o.max_skew_deg = 3;
  for (uint64_t seed : {3u, 4u, 5u}) {
    const SynthPage page = render_page(test_text(), fonts, seed, o);
    INFO("seed " << seed << ", skew " << page.skew_deg);
    REQUIRE(page.skew_deg != 0);
    check_page(page, 10);
    const Quad& q = page.lines.front().outline;
    CHECK(q.corners[1].y - q.corners[0].y == Approx((q.corners[1].x - q.corners[0].x) * std::tan(page.skew_deg * M_PI / 180)));
  }
  o.p_scan = 1;
  const SynthPage scanned = render_page(test_text(), fonts, 6, o);
  CHECK(scanned.lines.size() >= 10);
}

TEST_CASE("synthetic pages: a page is a function of its seed", "[synth_page]") {
  const auto fonts = test_fonts();
  if (fonts.empty()) return;
  PageSynthOptions o = quick(0);
  o.layout_weights = {1, 1, 1, 1, 1, 1};
  o.p_scan = 0.5;
  o.max_skew_deg = 2;
  const SynthPage a = render_page(test_text(), fonts, 11, o), b = render_page(test_text(), fonts, 11, o);
  CHECK(a.image.pixels == b.image.pixels);
  CHECK(page_truth_json(a) == page_truth_json(b));
  const SynthPage c = render_page(test_text(), fonts, 12, o);
  CHECK(page_truth_json(a) != page_truth_json(c));
}

TEST_CASE("synthetic pages: the truth JSON", "[synth_page]") {
  const auto fonts = test_fonts();
  if (fonts.empty()) return;
  const SynthPage page = render_page(test_text(), fonts, 7, quick(1));
  const Json j = parse_json(page_truth_json(page));
  CHECK(j.at("width").as_int() == page.image.width);
  CHECK(j.at("layout").as_string() == "table");
  REQUIRE(j.at("lines").size() == page.lines.size());
  const Json& l = j.at("lines")[0];
  CHECK(l.at("text").as_string() == page.lines[0].text);
  CHECK(l.at("points").size() == 4);
  CHECK(l.at("words").size() == page.lines[0].words.size());
  // What the readers of the file get back (runtime/page_truth.h): every line and word, its
  // text, and its outline to the 0.1 pixel the file keeps.
  const PageTruthFile back = parse_page_truth(page_truth_json(page), "page.json", true);
  REQUIRE(back.lines.size() == page.lines.size());
  for (size_t i = 0; i < back.lines.size(); ++i) {
    CHECK(back.lines[i].text == page.lines[i].text);
    CHECK(back.lines[i].heading == page.lines[i].heading);
    REQUIRE(back.lines[i].words.size() == page.lines[i].words.size());
    for (size_t k = 0; k < 4; ++k) CHECK(back.lines[i].outline.corners[k].x == Approx(page.lines[i].outline.corners[k].x).margin(0.05));
    CHECK(back.lines[i].words.back().text == page.lines[i].words.back().text);
  }
}

TEST_CASE("synthetic pages: options are checked", "[synth_page]") {
  PageSynthOptions o;
  CHECK_NOTHROW(o.validate());
  o.min_dpi = 20;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("min_dpi"));
  o = {};
  o.max_pt = 2;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("max_pt"));
  o = {};
  o.layout_weights = {0, 0, 0, 0, 0, 0};
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("all zero"));
  o = {};
  o.layout_weights = {1, 1};
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("6 weights"));
  o = {};
  o.max_light = 0.9;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("max_light"));
  o = {};
  o.p_bleed = 2;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("p_bleed"));
  o = {};
  o.scan.p_skew = 0.5;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("cannot crop, pad, skew"));
  o = {};
  o.min_word_space = 0.3, o.max_word_space = 0.2;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("max_word_space"));
  o = {};
  o.max_word_space = 3;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("max_word_space"));
  CHECK_THROWS_WITH(parse_page_layout("poster"), Catch::Contains("article, table, form, receipt, slide or chart"));
  CHECK(parse_page_layout("chart") == PageLayout::chart);
  CHECK(parse_page_layout("receipt") == PageLayout::receipt);
  CHECK_THROWS_WITH(render_page(test_text(), {}, 1), Catch::Contains("no fonts"));
}

TEST_CASE("synthetic pages: a chart page has its labels as lines among axes and bars", "[synth_page]") {
  const auto fonts = test_fonts();
  if (fonts.empty()) return;
  PageSynthOptions o = quick((int)PageLayout::chart);
  o.min_dpi = o.max_dpi = 120;
  size_t numbers = 0, lines = 0;
  for (uint64_t seed : {21u, 22u, 23u}) {
    INFO("seed " << seed);
    const SynthPage page = render_page(test_text(), fonts, seed, o);
    CHECK(page.layout == PageLayout::chart);
    check_page(page, 8);
    for (const SynthLine& l : page.lines) {
      ++lines;
      numbers += !l.text.empty() && std::all_of(l.text.begin(), l.text.end(), [](char ch) {
        return std::isdigit((unsigned char)ch) || ch == '.' || ch == '%';
      });
    }
  }
  CHECK(numbers >= 9);  // tick labels: at least 3 a chart
  CHECK(lines > numbers);
}

TEST_CASE("synthetic pages: bleed-through and uneven light darken the page, not its truth", "[synth_page]") {
  const auto fonts = test_fonts();
  if (fonts.empty()) return;
  PageSynthOptions o = quick(0);
  const SynthPage plain = render_page(test_text(), fonts, 31, o);
  for (int effect = 0; effect < 2; ++effect) {
    INFO((effect == 0 ? "bleed-through" : "uneven light"));
    PageSynthOptions e = o;
    (effect == 0 ? e.p_bleed : e.p_light) = 1;
    const SynthPage page = render_page(test_text(), fonts, 31, e);
    CHECK(page_truth_json(page) == page_truth_json(plain));  // the same text in the same places
    REQUIRE(page.image.pixels.size() == plain.image.pixels.size());
    int64_t darker = 0, lighter = 0;
    for (size_t i = 0; i < page.image.pixels.size(); ++i) {
      darker += page.image.pixels[i] < plain.image.pixels[i];
      lighter += page.image.pixels[i] > plain.image.pixels[i];
    }
    CHECK(lighter == 0);
    CHECK(darker > (int64_t)page.image.pixels.size() / 100);
    check_page(page, 15);
  }
}

TEST_CASE("synthetic pages: the space between words is the options' share of an em", "[synth_page]") {
  const auto fonts = test_fonts();
  if (fonts.empty()) return;
  // An article's running text: the gaps between a line's words, over the body size in pixels,
  // against the default 0.28 em and a tight 0.14 (justified lines widen theirs: the narrowest
  // gap of each page is compared). The same seed draws the same words and lines.
  auto narrowest_gap = [&](double em) {
    PageSynthOptions o = quick(0);
    o.min_word_space = o.max_word_space = em;
    const SynthPage page = render_page(test_text(), fonts, 5, o);
    double least = 1e9;
    for (const SynthLine& l : page.lines)
      for (size_t i = 1; i < l.words.size(); ++i)
        least = std::min(least, l.words[i].outline.box().x0 - l.words[i - 1].outline.box().x1);
    return least;
  };
  const double wide = narrowest_gap(0.28), tight = narrowest_gap(0.14);
  CHECK(tight > 0);
  CHECK(tight == Approx(wide / 2).margin(1.0));  // outlines are whole words; rounding to pixels
  // The default draws nothing for the word space: pages of a seed are the same as before the
  // option (a range draws one number per page, after the body size).
  PageSynthOptions d = quick(0), same = quick(0);
  same.min_word_space = same.max_word_space = 0.28;
  CHECK(render_page(test_text(), fonts, 9, d).image.pixels == render_page(test_text(), fonts, 9, same).image.pixels);
}

TEST_CASE("synthetic pages: numbered transcripts number every line in the margin, and p_numbered 0 draws as before",
          "[synth_page]") {
  const auto fonts = test_fonts();
  if (fonts.empty()) {
    WARN("no Debian fonts installed (scripts/install-deps.sh); skipping");
    return;
  }
  PageSynthOptions o = quick((int)PageLayout::article);
  const SynthPage plain = render_page(test_text(), fonts, 31, o);
  o.p_numbered = 0;  // the default, said out loud: the same page, no draw for it
  const SynthPage same = render_page(test_text(), fonts, 31, o);
  CHECK(same.image.pixels == plain.image.pixels);
  REQUIRE(same.lines.size() == plain.lines.size());

  o.p_numbered = 1;
  for (uint64_t seed : {31, 32, 33}) {
    INFO("seed " << seed);
    const SynthPage page = render_page(test_text(), fonts, seed, o);
    CHECK(page.layout == PageLayout::article);
    // The numbers: lines of one or two digits, 1, 2, 3, ... down the page, their right edges
    // lined up left of the start of every line beside them (the running head above them and
    // the page number at the foot aside).
    std::vector<const SynthLine*> numbers;
    const auto is_number = [](const SynthLine& l) {
      return !l.text.empty() && l.text.size() <= 2 &&
             std::all_of(l.text.begin(), l.text.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; });
    };
    for (const SynthLine& l : page.lines)
      if (is_number(l) && l.outline.box().x0 < 0.3 * (double)page.image.width) numbers.push_back(&l);
    REQUIRE(numbers.size() >= 2);
    double text_left = 1e9;
    for (const SynthLine& l : page.lines) {
      const Rect b = l.outline.box();
      const double middle = (b.y0 + b.y1) / 2;
      if (!is_number(l) && middle > numbers.front()->outline.box().y0 && middle < numbers.back()->outline.box().y1)
        text_left = std::min(text_left, b.x0);
    }
    for (size_t i = 0; i < numbers.size(); ++i) {
      CHECK(numbers[i]->text == std::to_string(i + 1));
      CHECK(numbers[i]->outline.box().x1 < text_left);
      CHECK(numbers[i]->outline.box().x1 == Approx(numbers[0]->outline.box().x1).margin(1.0));
      if (i > 0) CHECK(numbers[i]->outline.box().y0 > numbers[i - 1]->outline.box().y0);
    }
    CHECK(numbers.size() <= 28);
  }
  o.p_numbered = 1.5;
  CHECK_THROWS_WITH(render_page(test_text(), fonts, 31, o), Catch::Contains("p_numbered"));
}

TEST_CASE("synthetic pages: small capitals keep the text's case, p_small_caps 0 draws as before", "[synth_page]") {
  const auto fonts = test_fonts();
  if (fonts.empty()) {
    WARN("no Debian fonts installed (scripts/install-deps.sh); skipping");
    return;
  }
  PageSynthOptions o = quick((int)PageLayout::article);
  const SynthPage plain = render_page(test_text(), fonts, 41, o);
  o.p_small_caps = 0;  // the default, said out loud: the same page, no draw for it
  const SynthPage same = render_page(test_text(), fonts, 41, o);
  CHECK(same.image.pixels == plain.image.pixels);

  o.p_small_caps = 1;
  const SynthPage caps = render_page(test_text(), fonts, 41, o);
  const SynthPage again = render_page(test_text(), fonts, 41, o);
  CHECK(again.image.pixels == caps.image.pixels);  // a function of its seed
  // The words of a capital and lower case are drawn in small capitals; their text keeps its case.
  int64_t mixed = 0;
  for (const SynthLine& l : caps.lines)
    for (const SynthWord& w : l.words)
      mixed += w.text.size() >= 2 && std::isupper((unsigned char)w.text[0]) &&
               std::any_of(w.text.begin() + 1, w.text.end(), [](unsigned char c) { return std::islower(c) != 0; });
  CHECK(mixed > 0);
  // Every word's outline still holds its ink (measured with the small capitals, drawn the same).
  for (const SynthLine& l : caps.lines)
    for (const SynthWord& w : l.words) CHECK(inside(w.outline.box(), l.outline.box(), 1.0));
  o.p_small_caps = 1.5;
  CHECK_THROWS_WITH(render_page(test_text(), fonts, 41, o), Catch::Contains("p_small_caps"));
}
