// Synthetic lines: fonts load (and bad files fail with a message, not a crash), render dark ink
// on light paper at the asked size, coverage is honest (symbol fonts rejected, CJK not
// covered), random text respects the charset and its length bounds, and SampleRng is a pure
// function of its seed. Tests that need Debian's fonts (scripts/install-deps.sh) warn and
// return when none is installed.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cctype>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "train/augment.h"
#include "train/synth.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::train;
namespace fs = std::filesystem;

namespace {

// A common Latin sans font, or "" when none is installed.
std::string find_font() {
  for (const char* p : {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
                        "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
                        "/usr/share/fonts/opentype/urw-base35/NimbusSans-Regular.otf"})
    if (fs::exists(p)) return p;
  return "";
}

// The font of find_font(), loaded, or null (with a warning that the test is skipped) when none is
// installed.
std::shared_ptr<Font> test_font() {
  const std::string path = find_font();
  if (path.empty()) {
    WARN("no Debian font installed (scripts/install-deps.sh); skipping");
    return nullptr;
  }
  return Font::load(path);
}

// The rows that hold ink (below 128) in columns [x0, x1) of an image.
std::pair<int64_t, int64_t> ink_rows(const GrayImage& img, int64_t x0, int64_t x1) {
  int64_t top = img.height, bottom = -1;
  for (int64_t y = 0; y < img.height; ++y)
    for (int64_t x = x0; x < x1; ++x)
      if (img.at(x, y) < 128) top = std::min(top, y), bottom = std::max(bottom, y);
  return {top, bottom};
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = ocrt::testing::process_temp_dir("synth-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

int64_t count_dark(const GrayImage& img, uint8_t below = 100) {
  return std::count_if(img.pixels.begin(), img.pixels.end(), [&](uint8_t p) { return p < below; });
}

// True when every pixel within `margin` of the edge equals `value`.
bool border_is(const GrayImage& img, int64_t margin, uint8_t value) {
  for (int64_t y = 0; y < img.height; ++y)
    for (int64_t x = 0; x < img.width; ++x) {
      const bool edge = x < margin || y < margin || x >= img.width - margin || y >= img.height - margin;
      if (edge && img.at(x, y) != value) return false;
    }
  return true;
}

int64_t length(const std::string& text) { return (int64_t)nn::utf8_chars(text).size(); }

}  // namespace

TEST_CASE("a font renders 'Hello 123' as dark ink on light paper", "[synth]") {
  const auto font = test_font();
  if (!font) return;
  CHECK(font->path() == find_font());
  CHECK(font->covers("Hello 123"));
  const GrayImage img = font->render("Hello 123", 32, 2);
  REQUIRE((int64_t)img.pixels.size() == img.width * img.height);
  CHECK(img.width > 3 * img.height);  // nine characters on one line
  CHECK(img.height >= 32);
  CHECK(img.height <= 32 + 4 + 2);
  CHECK(count_dark(img) > 100);                  // real strokes
  CHECK(*std::min_element(img.pixels.begin(), img.pixels.end()) < 30);
  CHECK(border_is(img, 2, 255));                 // the margin is pure paper
  CHECK(paper_value(img) == 255);
  // Ink and paper tones are followed; light on dark works too.
  const GrayImage inverted = font->render("Hello 123", 32, 3, 255, 0);
  CHECK(border_is(inverted, 3, 0));
  CHECK(*std::max_element(inverted.pixels.begin(), inverted.pixels.end()) > 225);
  const GrayImage grey = font->render("Hello", 24, 1, 60, 200);
  for (uint8_t p : grey.pixels) {
    CHECK(p >= 60);
    CHECK(p <= 200);
  }
  // A line of spaces is blank paper, not an error.
  const GrayImage blank = font->render("   ", 20, 2);
  CHECK(count_dark(blank, 255) == 0);
}

TEST_CASE("rendered size scales with the pixel height", "[synth]") {
  const auto font = test_font();
  if (!font) return;
  const GrayImage small = font->render("Scaling text 42", 20, 0), large = font->render("Scaling text 42", 40, 0);
  CHECK(std::abs((double)large.height - 2.0 * (double)small.height) <= 3);
  CHECK(std::abs((double)large.width / (double)small.width - 2.0) < 0.1);
  CHECK(font->render("x", 20, 5).height == font->render("x", 20, 0).height + 10);
  CHECK(count_dark(large) > 3 * count_dark(small));
  // A glyph reaching above the font's ascent (a stacked accent) makes the canvas taller
  // instead of being cut off at the top; the margin stays paper.
  const std::string tall = "\xc7\x9b";  // Ǜ: U with diaeresis and grave, above DejaVu's ascent
  if (font->covers(tall)) {
    CHECK(font->render(tall + "gU", 30, 1).height > font->render("UgU", 30, 1).height);
    CHECK(border_is(font->render(tall + "gU", 30, 1), 1, 255));
  }
}

TEST_CASE("render's spacing: word spaces scaled, letters tracked, the default the font's own", "[synth]") {
  const auto font = test_font();
  if (!font) return;
  // The default and an explicit {1, 0} are the same pixels.
  const GrayImage plain = font->render("tight type", 40, 0);
  const GrayImage same = font->render("tight type", 40, 0, 0, 255, TypeSetting{1, 0});
  CHECK(same.width == plain.width);
  CHECK(same.pixels == plain.pixels);
  // The space's advance S: 0, 1 and 2 spaces' worth between the words (pen positions are
  // fractional, the canvas whole pixels: within a pixel).
  auto width = [&](double word, double tracking, const std::string& text) {
    return (double)font->render(text, 40, 0, 0, 255, TypeSetting{word, tracking}).width;
  };
  const double s1 = width(1, 0, "a b") - width(0, 0, "a b"), s2 = width(2, 0, "a b") - width(1, 0, "a b");
  CHECK(s1 > 0.15 * 40);
  CHECK(std::abs(s2 - s1) <= 1.5);
  CHECK(width(0.5, 0, "a b") < width(1, 0, "a b") - 0.5 * s1 + 1.5);
  // Tracking 0.1 heights: 4 px between each of the three pairs of "abcd"; negative closes them.
  CHECK(std::abs(width(1, 0.1, "abcd") - width(1, 0, "abcd") - 12) <= 1.5);
  CHECK(std::abs(width(1, -0.05, "abcd") - width(1, 0, "abcd") + 6) <= 1.5);
  // Nonsense is refused.
  CHECK_THROWS_WITH(font->render("a b", 40, 0, 0, 255, TypeSetting{-1, 0}), Catch::Contains("spacing"));
  CHECK_THROWS_WITH(font->render("a b", 40, 0, 0, 255, TypeSetting{1, 2}), Catch::Contains("spacing"));
  CHECK_THROWS_WITH(font->render("a b", 40, 0, 0, 255, TypeSetting{std::nan(""), 0}), Catch::Contains("spacing"));
}

TEST_CASE("render's small capitals: lower-case letters as smaller capitals on the baseline", "[synth]") {
  const auto font = test_font();
  if (!font) return;
  // small_caps 0 is the font's own letters, pixel for pixel.
  CHECK(font->render("Risk profile", 40, 0, 0, 255, TypeSetting{1, 0, 0}).pixels == font->render("Risk profile", 40, 0).pixels);
  // "xxx" in small capitals at 0.7 is "XXX" at 0.7 of the size: capitals' ink 0.7 as high (within
  // two pixels of rounding), standing on the same baseline (their ink ends on the same row).
  const GrayImage caps = font->render("XXX", 60, 0), small = font->render("xxx", 60, 0, 0, 255, TypeSetting{1, 0, 0.7});
  const GrayImage lower = font->render("xxx", 60, 0);
  REQUIRE(caps.height == small.height);
  const auto [caps_top, caps_bottom] = ink_rows(caps, 0, caps.width);
  const auto [small_top, small_bottom] = ink_rows(small, 0, small.width);
  const double caps_h = (double)(caps_bottom - caps_top + 1), small_h = (double)(small_bottom - small_top + 1);
  CHECK(std::abs(small_h - 0.7 * caps_h) <= 2);
  CHECK(std::abs(small_bottom - caps_bottom) <= 1);
  CHECK(std::abs(small.width - 0.7 * caps.width) <= 3);
  CHECK(small.pixels != font->render("xxx", 60, 0, 0, 255, TypeSetting{1, 0, 0.8}).pixels);
  CHECK(small.pixels != lower.pixels);
  // Capitals, digits and punctuation stay as they are: only a-z change.
  CHECK(font->render("AB 12.", 40, 0, 0, 255, TypeSetting{1, 0, 0.7}).pixels == font->render("AB 12.", 40, 0).pixels);
  // A mixed word: "Ab" is narrower than "AB" and its "b" shorter than its "A".
  const GrayImage ab = font->render("Ab", 60, 0, 0, 255, TypeSetting{1, 0, 0.7}), AB = font->render("AB", 60, 0);
  CHECK(ab.width < AB.width);
  CHECK(ink_rows(ab, ab.width * 3 / 4, ab.width).first > ink_rows(ab, 0, ab.width / 4).first + 8);
  // Sizes outside [0.3, 1] are refused.
  CHECK_THROWS_WITH(font->render("ab", 40, 0, 0, 255, TypeSetting{1, 0, 0.1}), Catch::Contains("small capitals"));
  CHECK_THROWS_WITH(font->render("ab", 40, 0, 0, 255, TypeSetting{1, 0, 1.5}), Catch::Contains("small capitals"));
  // draw_small_caps: a share of 0 draws nothing; 1 always a size in kSmallCapsSize's range for a
  // text with lower-case letters beside a capital or a digit, and nothing for one without either.
  SampleRng r0(5), r1(5);
  CHECK(draw_small_caps(r0, 0, "Risk profile") == 0);
  CHECK(draw_small_caps(r0, 1, "risk profile") == 0);  // nothing at full height beside them
  CHECK(draw_small_caps(r0, 1, "RISK 12") == 0);       // no lower-case letter to make small
  CHECK(r0.next() == r1.next());
  for (const char* text : {"Risk profile", "risk 2019"})
    for (int i = 0; i < 10; ++i) {
      const double size = draw_small_caps(r0, 1, text);
      CHECK(size >= kSmallCapsSize[0]);
      CHECK(size <= kSmallCapsSize[1]);
    }
}

TEST_CASE("render and covers: missing glyphs, bad sizes and bad text are errors", "[synth]") {
  const auto font = test_font();
  if (!font) return;
  const std::string cjk = "\xe4\xb8\xad";  // 中: no Latin font here has it
  CHECK_FALSE(font->covers(cjk));
  CHECK_FALSE(font->covers("ab" + cjk));
  CHECK(font->covers(" "));
  CHECK_THROWS_WITH(font->render("a" + cjk, 32), Catch::Contains("has no glyph for '" + cjk + "'"));
  CHECK_THROWS_WITH(font->render("abc", 3), Catch::Contains("pixel height must be in [4, 512]"));
  CHECK_THROWS_WITH(font->render("abc", 32, -1), Catch::Contains("margin must be"));
  CHECK_THROWS_WITH(font->render("", 32), Catch::Contains("empty text"));
  CHECK_THROWS(font->render("bad\xff", 32));
  CHECK_THROWS(font->covers("bad\xff"));
}

TEST_CASE("font loading: every default font renders, symbol fonts and broken files are rejected", "[synth]") {
  const auto dirs = default_font_dirs();
  if (dirs.empty()) {
    WARN("no Debian font folder installed (scripts/install-deps.sh); skipping");
    return;
  }
  std::vector<std::string> skipped;
  const auto fonts = load_fonts(dirs, &skipped);
  REQUIRE(!fonts.empty());
  CHECK(std::is_sorted(fonts.begin(), fonts.end(), [](const auto& a, const auto& b) { return a->path() < b->path(); }));
  const std::string cjk = "\xe4\xb8\xad";
  for (const auto& f : fonts) {
    INFO(f->path());
    CHECK_FALSE(f->covers(cjk));
    if (f->covers("Hag 7")) {
      const GrayImage img = f->render("Hag 7", 24, 2);
      CHECK(count_dark(img) > 20);
      CHECK(border_is(img, 2, 255));
    }
  }
  // URW's Dingbats and Standard Symbols map the letters to pictures: they must not load.
  for (const char* sym : {"/usr/share/fonts/opentype/urw-base35/D050000L.otf",
                          "/usr/share/fonts/opentype/urw-base35/StandardSymbolsPS.otf"}) {
    if (!fs::exists(sym)) continue;
    CHECK_THROWS_WITH(Font::load(sym), Catch::Contains("a symbol font"));
    CHECK(std::any_of(skipped.begin(), skipped.end(), [&](const std::string& s) { return s.find(sym) != std::string::npos; }));
    CHECK(std::none_of(fonts.begin(), fonts.end(), [&](const auto& f) { return f->path() == sym; }));
  }

  // Broken files: an error naming the file, never a crash.
  const fs::path d = fresh_dir("broken");
  write(d / "tiny.ttf", "abc");
  write(d / "text.ttf", "this is a text file, not a font at all");
  CHECK_THROWS_WITH(Font::load((d / "tiny.ttf").string()), Catch::Contains("tiny.ttf: too small to be a font"));
  CHECK_THROWS_WITH(Font::load((d / "text.ttf").string()), Catch::Contains("text.ttf: not a font"));
  CHECK_THROWS_WITH(Font::load((d / "missing.ttf").string()), Catch::Contains("missing.ttf: cannot open"));
  CHECK_THROWS_WITH(Font::load(d.string()), Catch::Contains("is a folder"));
  const std::string path = find_font();
  if (!path.empty()) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t keep : {16, 40, 200, 4000}) {
      write(d / "cut.ttf", bytes.substr(0, keep));
      CHECK_THROWS_WITH(Font::load((d / "cut.ttf").string()), Catch::Contains("truncated font"));
    }
  }
  // A folder with only broken fonts: the error says so, and why.
  CHECK_THROWS_WITH(load_fonts({d.string()}), Catch::Contains("no readable font among the"));
  CHECK_THROWS_WITH(load_fonts({(d / "nope").string()}), Catch::Contains("no such font file or folder"));
  CHECK_THROWS_WITH(load_fonts({}), Catch::Contains("no font file or folder given"));
  std::vector<std::string> why;
  CHECK_THROWS(load_fonts({d.string()}, &why));
  CHECK(why.size() == (path.empty() ? 2u : 3u));  // tiny, text (and cut)
}

TEST_CASE("TextSource keeps only words in the charset and respects the length bounds", "[synth]") {
  const std::vector<std::string> words = {"hello", "w\xc3\xb6rld", "abc", "", "two words", "bad\xff", "x"};
  const TextSource ascii(words, nn::Charset::ascii());
  CHECK(ascii.num_words() == 5);  // hello, abc, two, words, x

  const std::set<std::string> allowed = {"a", "b", "c", "h", "e", "l", "o", " "};
  const TextSource small(words, nn::Charset::from_chars({"a", "b", "c", "h", "e", "l", "o", " "}));
  CHECK(small.num_words() == 2);  // hello, abc
  for (auto [lo, hi] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 3}, {3, 28}, {10, 12}, {50, 60}}) {
    for (uint64_t seed = 0; seed < 200; ++seed) {
      for (const TextSource* src : {&ascii, &small}) {
        const std::string t = src->sample(seed, lo, hi);
        INFO("seed " << seed << " [" << lo << ", " << hi << "]: '" << t << "'");
        CHECK(length(t) >= lo);
        CHECK(length(t) <= hi);
        CHECK(t.front() != ' ');
        CHECK(t.back() != ' ');
        CHECK(t.find("  ") == std::string::npos);
        if (src == &small)
          for (const auto& ch : nn::utf8_chars(t)) CHECK(allowed.count(ch) == 1);
      }
    }
  }
  // A pure function of the seed; different seeds give different lines.
  CHECK(ascii.sample(7, 5, 30) == ascii.sample(7, 5, 30));
  std::set<std::string> distinct;
  for (uint64_t seed = 0; seed < 50; ++seed) distinct.insert(ascii.sample(seed, 5, 30));
  CHECK(distinct.size() >= 45);
  CHECK_THROWS_WITH(ascii.sample(1, 0, 5), Catch::Contains("need 1 <= min_chars <= max_chars"));
  CHECK_THROWS_WITH(ascii.sample(1, 6, 5), Catch::Contains("need 1 <= min_chars <= max_chars"));
}

TEST_CASE("TextSource: every charset character shows up, no space without one in the charset", "[synth]") {
  const nn::Charset charset = nn::Charset::ascii();
  const TextSource src({"alpha", "beta", "gamma"}, charset);
  std::set<std::string> seen;
  for (uint64_t seed = 0; seed < 3000; ++seed)
    for (const auto& ch : nn::utf8_chars(src.sample(seed, 10, 30))) seen.insert(ch);
  CHECK(seen.size() == (size_t)charset.size());

  const TextSource glued({"ab", "ba"}, nn::Charset::from_chars({"a", "b"}));
  for (uint64_t seed = 0; seed < 100; ++seed) CHECK(glued.sample(seed, 3, 20).find(' ') == std::string::npos);
  // No word list at all: digits, punctuation and random strings still make text.
  const TextSource none({}, charset);
  CHECK(none.num_words() == 0);
  CHECK(length(none.sample(3, 8, 8)) == 8);
  CHECK_THROWS_WITH(TextSource({"a"}, nn::Charset::from_chars({" "})), Catch::Contains("no printable character"));
}

TEST_CASE("TextSource::read_words reads one word a line, CRLF and empty lines included", "[synth]") {
  const fs::path d = fresh_dir("words");
  write(d / "words.txt", "apple\r\n\nbanana split\ncherry\n");
  const auto words = TextSource::read_words((d / "words.txt").string());
  CHECK(words == std::vector<std::string>{"apple", "banana split", "cherry"});
  CHECK(TextSource(words, nn::Charset::ascii()).num_words() == 4);
  CHECK_THROWS_WITH(TextSource::read_words((d / "nope.txt").string()), Catch::Contains("nope.txt: cannot open the word list"));
  CHECK_THROWS_WITH(TextSource::read_words(d.string()), Catch::Contains("is a folder"));
}

TEST_CASE("SampleRng is a pure function of its seed", "[synth]") {
  SampleRng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next();
    CHECK(b.next() == x);
    differs = differs || c.next() != x;
  }
  CHECK(differs);
  SampleRng r(1);
  std::set<int64_t> hit;
  double sum = 0, sum2 = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double u = r.uniform();
    CHECK((u >= 0 && u < 1));
    const int64_t k = r.integer(0, 3);
    CHECK((k >= 0 && k <= 3));
    hit.insert(k);
    const double z = r.normal();
    sum += z, sum2 += z * z;
  }
  CHECK(hit.size() == 4);
  CHECK(std::abs(sum / n) < 0.05);
  CHECK(std::abs(sum2 / n - 1) < 0.05);
  CHECK(r.integer(5, 5) == 5);
  CHECK(r.integer(-3, -3) == -3);
  CHECK_NOTHROW(r.integer(INT64_MIN, INT64_MAX));
  CHECK_THROWS_WITH(r.integer(2, 1), Catch::Contains("empty range"));
  const double v = r.uniform(-2, 3);
  CHECK((v >= -2 && v < 3));
  // Derived seeds: the same (seed, index) gives the same seed, neighbours differ.
  std::set<uint64_t> derived;
  for (uint64_t i = 0; i < 1000; ++i) derived.insert(SampleRng::derive(7, i));
  CHECK(derived.size() == 1000);
  CHECK(SampleRng::derive(7, 3) == SampleRng::derive(7, 3));
  CHECK(SampleRng::derive(7, 3) != SampleRng::derive(8, 3));
}

TEST_CASE("TextSource with prose: runs of corpus words, structured items, measured shares", "[synth]") {
  const auto dir = ocrt::testing::process_temp_dir("prose");
  {
    // A fortune file: '%' lines separate entries and never reach the text.
    std::ofstream(dir / "f") << "The quick brown fox jumps over the lazy dog.\n%\nA stitch in time\n"
                                "\tsaves nine, said Dr. Smith on 12 May 1999.\n%\n";
    std::ofstream(dir / "g") << "caf\xc3\xa9 au lait\r\n";
  }
  const auto prose = TextSource::read_prose({(dir / "f").string(), (dir / "g").string()});
  CHECK(prose.size() == 9 + 13 + 3);
  CHECK(std::find(prose.begin(), prose.end(), "%") == prose.end());
  CHECK(prose.back() == "lait");
  CHECK_THROWS_WITH(TextSource::read_prose({(dir / "missing").string()}), Catch::Contains("cannot open"));
  CHECK_THROWS_WITH(TextSource::read_prose({dir.string()}), Catch::Contains("is a folder"));

  const TextSource src({"alpha", "beta"}, nn::Charset::ascii(), prose);
  CHECK(src.num_prose_words() == 24);  // "café" is not ASCII: left out
  int counts[3] = {};
  const std::string corpus = "The quick brown fox jumps over the lazy dog. A stitch in time saves nine, said Dr. "
                             "Smith on 12 May 1999. au lait";
  const std::string twice = " " + corpus + " " + corpus + " ";
  std::string upper = twice;
  for (char& c : upper) c = (char)std::toupper((unsigned char)c);
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    TextSource::Kind kind;
    const std::string t = src.sample(seed, 8, 40, &kind);  // 8: every corpus word fits whole
    INFO("seed " << seed << ": '" << t << "'");
    ++counts[(int)kind];
    CHECK(length(t) >= 8);
    CHECK(length(t) <= 40);
    CHECK(t.front() != ' ');
    CHECK(t.back() != ' ');
    CHECK(t.find("  ") == std::string::npos);
    if (kind == TextSource::Kind::prose) {
      // Consecutive corpus words (the corpus wraps around), possibly upper-cased, possibly
      // ending in a hyphenated word part.
      std::string check = t;
      const bool hyphen = check.back() == '-';
      if (hyphen) check = check.substr(0, check.rfind(' ') == std::string::npos ? 0 : check.rfind(' '));
      if (!check.empty())
        CHECK((twice.find(" " + check + " ") != std::string::npos || upper.find(" " + check + " ") != std::string::npos));
    }
    CHECK(src.sample(seed, 8, 40) == t);
  }
  // The shares the mix asks for (60/20/20), within 4 standard deviations of 2000 draws; lines
  // that fell short of 8 characters became mixed, so mixed may be a little above its share.
  CHECK(std::abs(counts[0] / 2000.0 - 0.6) < 0.05);
  CHECK(std::abs(counts[1] / 2000.0 - 0.2) < 0.04);
  CHECK(counts[2] / 2000.0 > 0.16);

  TextMix bad;
  bad.prose = 0.9;
  CHECK_THROWS_WITH(TextSource({}, nn::Charset::ascii(), {}, bad), Catch::Contains("at most 1"));
  bad.prose = -1;
  CHECK_THROWS_WITH(TextSource({}, nn::Charset::ascii(), {}, bad), Catch::Contains("prose must be a share"));
  fs::remove_all(dir);
}

TEST_CASE("TextSource structured lines hold dates, prices, addresses and the like", "[synth]") {
  TextMix only;
  only.prose = 0, only.structured = 1;
  const TextSource src({"invoice", "total", "page"}, nn::Charset::ascii(), {}, only);
  int with_digit = 0, with_at = 0, with_dollar = 0, capitalised_mail = 0, periods = 0;
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    TextSource::Kind kind;
    const std::string t = src.sample(seed, 8, 48, &kind);
    INFO("'" << t << "'");
    CHECK(length(t) >= 8);
    CHECK(length(t) <= 48);
    with_digit += std::any_of(t.begin(), t.end(), [](char c) { return std::isdigit((unsigned char)c); });
    with_at += t.find('@') != std::string::npos;
    with_dollar += t.find('$') != std::string::npos;
    periods += t.find("FY") != std::string::npos || t.find("Q1") != std::string::npos;
    // "Invoice.Total@page.com": an address's name parts capitalised as a person's name is.
    for (size_t at = t.find('@'); at != std::string::npos && at > 0; at = std::string::npos) {
      size_t start = t.rfind(' ', at);
      start = start == std::string::npos ? 0 : start + 1;
      capitalised_mail += std::isupper((unsigned char)t[start]) != 0;
    }
  }
  CHECK(with_digit > 500);
  CHECK(with_at > 10);
  CHECK(capitalised_mail > 0);
  CHECK(periods > 10);
  CHECK(capitalised_mail < with_at);
  CHECK(with_dollar > 10);
  // A charset without digits still gets lines (items that do not fit it are skipped).
  const TextSource letters({"abc"}, nn::Charset::from_chars({"a", "b", "c", " ", "e", "x", "m", "p", "l"}), {}, only);
  for (uint64_t seed = 0; seed < 200; ++seed) CHECK(length(letters.sample(seed, 3, 20)) >= 3);
}
