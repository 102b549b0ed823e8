// ocrt-synth: writes synthetic text-line images rendered from fonts, as a folder of
// NNNNNN.png + NNNNNN.gt.txt pairs plus a labels.txt label file (train/data.h reads both), for
// looking at what synthetic training data looks like or training from a fixed set of it.
//
// Sample i depends only on (seed, i): its text, font, size, colours and augmentation all come
// from SampleRng(SampleRng::derive(seed, i)), so the output is the same for any thread count.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "models/charset.h"
#include "runtime/cli.h"
#include "runtime/error.h"
#include "runtime/image.h"
#include "train/augment.h"
#include "train/scan.h"
#include "train/synth.h"
#include "train/synth_page.h"

using namespace ocrt;
using namespace ocrt::train;
namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage = R"(usage: ocrt-synth --out DIR [options]

Renders synthetic text lines: DIR/NNNNNN.png + DIR/NNNNNN.gt.txt pairs, DIR/labels.txt
(NNNNNN.png<TAB>text per line) and DIR/manifest.tsv (NNNNNN.png<TAB>font file<TAB>glyph
height<TAB>scan preset<TAB>text kind per line, after a header line). With --pages, whole
pages instead: DIR/NNNNNN.png + DIR/NNNNNN.json (every line and word with its outline; see
docs/pages.md). The same seed gives the same files.
)";

struct SynthConfig {
  std::string out;
  int64_t count = 1000;
  std::vector<std::string> fonts;
  std::string words = "/usr/share/dict/words";
  std::string charset;
  uint64_t seed = 1;
  int64_t min_chars = 3, max_chars = 28;
  double min_height = 22, max_height = 40;
  // --spacing, --tracking: the type's spacing drawn per line (draw_spacing, train/synth.h).
  double min_spacing = 1, max_spacing = 1, min_tracking = 0, max_tracking = 0;
  double small_caps = 0;  // --small-caps: the share of lines set in small capitals (draw_small_caps)
  bool augment = false, list_fonts = false;
  std::string texts;  // --texts FILE: render these lines (one a line) instead of random text
  std::vector<std::string> prose;
  std::string degrade = "none";
  bool pages = false;             // --pages: whole pages (train/synth_page.h)
  double min_dpi = 150, max_dpi = 300;
  double numbered = 0;  // --numbered: the share of article pages drawn with numbered lines
  std::vector<std::string> layouts;  // --layouts: only these (default: the usual mix)
};

// "--height 22:40", or one number for a fixed height: each in [4, 512].
cli::Flag height_flag(SynthConfig& c) {
  return {"--height", "LO:HI",
          "glyph height in pixels (ascent to descent), drawn per line from\n"
          "[LO, HI]; a single number for a fixed height (22:40; 4 <= LO <= HI <= 512)",
          [&c](const std::string& v) {
            const size_t colon = v.find(':');
            c.min_height = cli::parse_double("--height", v.substr(0, colon), {4, 512});
            c.max_height = colon == std::string::npos ? c.min_height
                                                      : cli::parse_double("--height", v.substr(colon + 1), {4, 512});
          }};
}

// "--spacing 0.5:1.5" / "--tracking -0.02:0.05", or one number for a fixed value.
cli::Flag range_flag(const char* name, const char* help, double lo_limit, double hi_limit, double& lo, double& hi) {
  return {name, "LO:HI", help, [name, lo_limit, hi_limit, &lo, &hi](const std::string& v) {
            const size_t colon = v.find(':');
            lo = cli::parse_double(name, v.substr(0, colon), {lo_limit, hi_limit});
            hi = colon == std::string::npos ? lo : cli::parse_double(name, v.substr(colon + 1), {lo_limit, hi_limit});
            OCRT_CHECK(lo <= hi, name, ": LO must be <= HI, got ", v);
          }};
}

cli::Parser synth_flags(SynthConfig& c) {
  cli::Parser p("ocrt-synth", kUsage);
  p.add(cli::text("--out", "DIR", c.out, "output folder (created when missing; required)"));
  p.add(cli::integer("--count", "N", c.count, 1, 100000000, "number of lines (1000; at most 100000000)"));
  p.add(cli::list("--fonts", "PATH[,PATH...]", c.fonts,
                  "font files or folders searched for *.ttf, *.otf, *.ttc\n"
                  "(default: the Debian font folders that exist here)"));
  p.add(cli::text("--words", "FILE", c.words,
                  "word list, one word a line (/usr/share/dict/words); 'none' for\n"
                  "digits, punctuation and random strings only"));
  p.add(cli::list("--prose", "FILES", c.prose,
                  "text files (commas between) whose consecutive words make most lines\n"
                  "(see ocrt-train --help); without it: words, numbers and symbols"));
  p.add(cli::text("--degrade", "PRESET", c.degrade,
                  "scan simulation at the rendered size: none (default), scan (the training\n"
                  "mix) or one effect at a fixed strength: binarized, lowres, blur-noise,\n"
                  "jpeg, speckle, warped, paper, ink, crop"));
  p.add(cli::text("--charset", "FILE", c.charset, "characters to use, one a line (default: the 95 printable ASCII)"));
  p.add(cli::u64("--seed", "S", c.seed, "random seed, 0..2^64-1 (1)"));
  p.add(cli::integer("--min-chars", "N", c.min_chars, 1, 1000, "shortest line in characters (3; 1..1000)"));
  p.add(cli::integer("--max-chars", "N", c.max_chars, 1, 1000, "longest line in characters (28; 1..1000)"));
  p.add(height_flag(c));
  p.add(range_flag("--spacing",
                   "lines: the word space's width as a factor of the font's, drawn per\nline (1: the font's own; 0 <= LO <= HI <= 4); --pages: as a factor\nof the pages' 0.28 em, drawn per page",
                   0, 4, c.min_spacing, c.max_spacing));
  p.add(range_flag("--tracking",
                   "lines: extra space between letters in glyph heights, drawn per line\n(0; -0.5 <= LO <= HI <= 0.5)",
                   -0.5, 0.5, c.min_tracking, c.max_tracking));
  p.add(cli::real("--small-caps", "P", c.small_caps, cli::Range{0, 1},
                  "lines: this share of the lines set in small capitals (lower-case\n"
                  "letters drawn as smaller capitals; the text keeps them lower case; 0);\n"
                  "--pages: this share of the words of a capital and lower case"));
  p.add(cli::toggle("--augment", c.augment, true,
                    "apply the training augmentations (blur, noise, contrast, rotation,\n"
                    "morphology, padding) with their default settings"));
  p.add(cli::text("--texts", "FILE", c.texts,
                  "render these texts (one line of FILE a sample, in order) instead of random\n"
                  "text; --count is then the number of lines, and --out must be empty"));
  p.add(cli::toggle("--pages", c.pages, true,
                    "render whole pages (NNNNNN.png + NNNNNN.json with every line's and word's\n"
                    "outline) instead of lines; --degrade scan adds the scan simulation"));
  p.add({"--dpi", "LO:HI", "--pages: resolution drawn per page from [LO, HI] (150:300; 50..600)",
         [&c](const std::string& v) {
           const size_t colon = v.find(':');
           c.min_dpi = cli::parse_double("--dpi", v.substr(0, colon), {50, 600});
           c.max_dpi = colon == std::string::npos ? c.min_dpi : cli::parse_double("--dpi", v.substr(colon + 1), {50, 600});
         }});
  p.add(cli::real("--numbered", "P", c.numbered, cli::Range{0, 1},
                  "--pages: this share of the article pages is drawn as a transcript or\n"
                  "pleading, every line numbered in the left margin (default 0)"));
  p.add(cli::list("--layouts", "NAMES", c.layouts,
                  "--pages: only these layouts, commas between: article, table, form,\n"
                  "receipt, slide, chart (default: all, articles 45% of the pages)"));
  p.add(cli::toggle("--list-fonts", c.list_fonts, true,
                    "print the fonts that load (and those skipped, with the reason), then exit"));
  p.note("  --help                 this text");
  return p;
}

size_t name_digits(int64_t count) { return std::max<size_t>(6, std::to_string(count - 1).size()); }

// A folder of pairs is read whole (train/data.h), so --out may only hold files this run
// overwrites: re-running into the same folder is fine, but leftovers of a larger or different
// run would silently join the data set.
void check_no_stale_files(const SynthConfig& c) {
  std::error_code ec;
  if (!fs::is_directory(c.out, ec)) return;
  if (!c.texts.empty()) {
    OCRT_CHECK(fs::is_empty(c.out, ec), "--out: ", c.out, " is not empty; with --texts give an empty (or new) folder");
    return;
  }
  const size_t digits = name_digits(c.count);
  for (const auto& e : fs::directory_iterator(c.out, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "labels.txt" || name == "manifest.tsv") continue;
    const size_t dot = name.find('.');
    const std::string stem = name.substr(0, dot), ext = dot == std::string::npos ? "" : name.substr(dot);
    const bool ours = stem.size() == digits && std::all_of(stem.begin(), stem.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; }) &&
                      (ext == ".png" || ext == (c.pages ? ".json" : ".gt.txt")) && std::stoll(stem) < c.count;
    OCRT_CHECK(ours, "--out: ", c.out, " already holds ", name,
               ", which this run would not overwrite; use an empty (or new) folder");
  }
  OCRT_CHECK(!ec, "--out: cannot list ", c.out, ": ", ec.message());
}

// --pages: the page options of the flags (throws naming --layouts for an unknown layout).
PageSynthOptions page_options(const SynthConfig& c) {
  PageSynthOptions o;
  o.min_dpi = c.min_dpi, o.max_dpi = c.max_dpi;
  const double em = o.min_word_space;  // the pages' own word space, which --spacing scales
  o.min_word_space = em * c.min_spacing, o.max_word_space = em * c.max_spacing;
  o.p_scan = c.degrade == "scan" ? 1 : 0;
  o.p_numbered = c.numbered;
  o.p_small_caps = c.small_caps;
  if (c.degrade == "none") o.p_bleed = o.p_light = 0;  // a clean page is clean
  if (!c.layouts.empty()) {
    std::vector<double> weights(kPageLayouts, 0.0);
    for (const auto& name : c.layouts) {
      try {
        weights[(size_t)parse_page_layout(name)] = o.layout_weights[(size_t)parse_page_layout(name)];
      } catch (const Error& e) {
        fail("--layouts: ", e.what());
      }
    }
    o.layout_weights = weights;
  }
  o.validate();
  return o;
}

// Everything that can be checked without touching a font, so that a typo fails at once.
void validate(const SynthConfig& c) {
  if (c.list_fonts) return;
  OCRT_CHECK(!c.out.empty(), "--out: required (the folder to write the lines to)");
  std::error_code ec;
  OCRT_CHECK(!fs::exists(c.out, ec) || fs::is_directory(c.out, ec), "--out: ", c.out, " exists and is not a folder");
  OCRT_CHECK(c.count >= 1 && c.count <= 100000000, "--count: must be in [1, 100000000], got ", c.count);
  OCRT_CHECK(c.min_chars >= 1 && c.min_chars <= 1000, "--min-chars: must be in [1, 1000], got ", c.min_chars);
  OCRT_CHECK(c.max_chars >= 1 && c.max_chars <= 1000, "--max-chars: must be in [1, 1000], got ", c.max_chars);
  OCRT_CHECK(c.min_chars <= c.max_chars, "--min-chars (", c.min_chars, ") must not exceed --max-chars (", c.max_chars,
             ")");
  OCRT_CHECK(c.min_height >= 4 && c.max_height <= 512 && c.min_height <= c.max_height,
             "--height: expected LO:HI with 4 <= LO <= HI <= 512, got ", c.min_height, ":", c.max_height);
  if (c.words != "none") {
    OCRT_CHECK(fs::is_regular_file(c.words, ec), "--words: ", c.words,
               " is not a file (Debian's wamerican package installs /usr/share/dict/words; "
               "'--words none' uses no word list)");
  }
  if (!c.charset.empty()) OCRT_CHECK(fs::is_regular_file(c.charset, ec), "--charset: ", c.charset, " is not a file");
  for (const auto& p : c.prose) OCRT_CHECK(fs::is_regular_file(p, ec), "--prose: ", p, " is not a file");
  try {
    ScanOptions::preset(c.degrade);
  } catch (const Error& e) {
    fail("--degrade: ", e.what());
  }
  if (c.pages) {
    OCRT_CHECK(c.min_dpi <= c.max_dpi, "--dpi: LO (", c.min_dpi, ") must not exceed HI (", c.max_dpi, ")");
    OCRT_CHECK(c.degrade == "none" || c.degrade == "scan", "--degrade: pages take none or scan, got ", c.degrade);
    OCRT_CHECK(c.texts.empty() && !c.augment, "--pages: --texts and --augment are for lines");
    OCRT_CHECK(c.min_tracking == 0 && c.max_tracking == 0, "--pages: --tracking is for lines");
    const double most = 2 / PageSynthOptions().max_word_space;  // 2 ems, PageSynthOptions::validate's bound
    OCRT_CHECK(c.max_spacing <= most, "--pages: --spacing at most ", most, " (2 ems), got ", c.max_spacing);
    page_options(c);  // the layout names
  } else {
    OCRT_CHECK(c.layouts.empty() && c.min_dpi == 150 && c.max_dpi == 300 && c.numbered == 0,
               "--dpi, --layouts and --numbered: only with --pages");
  }
  check_no_stale_files(c);
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  OCRT_CHECK(out.good(), path.string(), ": cannot write");
}

// The charset reduced to the characters at least one font can draw; the rest are reported.
nn::Charset drawable(const nn::Charset& charset, const std::vector<std::shared_ptr<Font>>& fonts) {
  std::vector<std::string> keep, dropped;
  for (const auto& ch : charset.chars()) {
    bool any = false;
    for (const auto& f : fonts) any = any || f->covers(ch);
    (any ? keep : dropped).push_back(ch);
  }
  OCRT_CHECK(!keep.empty(), "--charset: no font has any of its characters");
  if (!dropped.empty()) {
    std::string list;
    for (size_t i = 0; i < dropped.size() && i < 20; ++i) list += (i ? " " : "") + dropped[i];
    std::fprintf(stderr, "ocrt-synth: warning: no font has %zu charset character(s), left out of the text: %s%s\n",
                 dropped.size(), list.c_str(), dropped.size() > 20 ? " ..." : "");
  }
  return nn::Charset::from_chars(keep);
}

struct Sample {
  GrayImage image;
  std::string text, font, kind;
  double height = 0;
};

// Paper rows above and below, as evenly as they go, up to `height` rows: tiny glyphs (--height
// 4 draws 7-pixel lines) still make a line ocrt-infer reads (runtime/image.h, kMinLineHeight).
GrayImage pad_to_height(const GrayImage& image, int64_t height, uint8_t paper) {
  GrayImage out;
  out.width = image.width;
  out.height = height;
  out.pixels.assign((size_t)(out.width * height), paper);
  const int64_t top = (height - image.height) / 2;
  std::copy(image.pixels.begin(), image.pixels.end(), out.pixels.begin() + top * out.width);
  return out;
}

// Sample i: a text some font covers (re-drawn until one does), that font, a glyph height,
// a margin, ink and paper tones, the scan simulation (--degrade) and (with --augment) the
// augmentations. A non-empty `fixed` text (from --texts) is rendered as given.
Sample make_sample(const SynthConfig& c, const TextSource& text_source, const std::vector<std::shared_ptr<Font>>& fonts,
                   const ScanOptions& scan, int64_t i, const std::string& fixed) {
  constexpr int kAttempts = 100;
  SampleRng rng(SampleRng::derive(c.seed, (uint64_t)i));
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const uint64_t text_seed = rng.next();
    TextSource::Kind kind = TextSource::Kind::mixed;
    const std::string text = fixed.empty() ? text_source.sample(text_seed, c.min_chars, c.max_chars, &kind) : fixed;
    std::vector<const Font*> candidates;
    for (const auto& f : fonts)
      if (f->covers(text)) candidates.push_back(f.get());
    if (candidates.empty()) continue;
    const Font* font = candidates[(size_t)rng.integer(0, (int64_t)candidates.size() - 1)];
    const double height = rng.uniform(c.min_height, c.max_height);
    const int64_t margin = rng.integer(1, 6);
    const auto ink = (uint8_t)rng.integer(0, 70), paper = (uint8_t)rng.integer(180, 255);
    TypeSetting setting = draw_spacing(rng, c.min_spacing, c.max_spacing, c.min_tracking, c.max_tracking);
    setting.small_caps = draw_small_caps(rng, c.small_caps, text);
    GrayImage image = font->render(text, height, margin, ink, paper, setting);
    if (c.degrade != "none") image = degrade(image, scan, rng);
    if (c.augment) image = augment(image, AugmentOptions{}, rng);
    if (image.height < kMinLineHeight) image = pad_to_height(image, kMinLineHeight, paper);
    const char* kinds[] = {"prose", "structured", "mixed"};
    return {std::move(image), text, fs::path(font->path()).filename().string(),
            fixed.empty() ? kinds[(int)kind] : "given", height};
  }
  if (!fixed.empty()) fail("--texts: no font covers line ", i + 1, " ('", fixed, "')");
  fail("sample ", i, ": no font covers any of ", kAttempts,
       " drawn texts (the fonts cover different parts of the charset; give fonts that share more characters)");
}

// --pages: page i from SampleRng::derive(seed, i), its image and its truth.
int write_pages(const SynthConfig& c, const TextSource& text_source, const std::vector<std::shared_ptr<Font>>& fonts,
                size_t digits) {
  const PageSynthOptions options = page_options(c);
  std::string error;
  int64_t lines = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : lines)
  for (int64_t i = 0; i < c.count; ++i) {
    bool stop;
#pragma omp critical(ocrt_synth_error)
    stop = !error.empty();
    if (stop) continue;
    try {
      std::string name = std::to_string(i);
      name.insert(0, digits - name.size(), '0');
      const SynthPage page = render_page(text_source, fonts, SampleRng::derive(c.seed, (uint64_t)i), options);
      save_gray_png((fs::path(c.out) / (name + ".png")).string(), page.image);
      write_text(fs::path(c.out) / (name + ".json"), page_truth_json(page));
      lines += (int64_t)page.lines.size();
    } catch (const std::exception& e) {
#pragma omp critical(ocrt_synth_error)
      if (error.empty()) error = e.what();
    }
  }
  OCRT_CHECK(error.empty(), error);
  std::printf("ocrt-synth: wrote %lld pages with %lld lines to %s (%zu fonts)\n", (long long)c.count, (long long)lines,
              c.out.c_str(), fonts.size());
  return 0;
}

int run(const SynthConfig& c) {
  std::vector<std::string> skipped, paths = c.fonts.empty() ? default_font_dirs() : c.fonts;
  OCRT_CHECK(!paths.empty(), "--fonts: not given, and none of Debian's font folders is installed here "
             "(fonts-dejavu-core, fonts-liberation, fonts-freefont-ttf, fonts-urw-base35)");
  std::vector<std::shared_ptr<Font>> fonts;
  try {
    fonts = load_fonts(paths, &skipped);
  } catch (const Error& e) {
    fail(c.fonts.empty() ? "default fonts: " : "--fonts: ", e.what());
  }
  if (c.list_fonts) {
    for (const auto& f : fonts) std::printf("%s\n", f->path().c_str());
    for (const auto& s : skipped) std::printf("skipped: %s\n", s.c_str());
    return 0;
  }
  const nn::Charset charset = drawable(c.charset.empty() ? nn::Charset::ascii() : nn::Charset::from_file(c.charset), fonts);
  const TextSource text_source(c.words == "none" ? std::vector<std::string>{} : TextSource::read_words(c.words), charset,
                               TextSource::read_prose(c.prose));
  const ScanOptions scan = ScanOptions::preset(c.degrade);

  std::error_code ec;
  fs::create_directories(c.out, ec);
  OCRT_CHECK(!ec, "--out: cannot create ", c.out, ": ", ec.message());
  std::vector<std::string> fixed;
  if (!c.texts.empty()) {
    std::ifstream in(c.texts);
    OCRT_CHECK(in.good(), "--texts: cannot read ", c.texts);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      std::vector<int64_t> classes;
      std::vector<std::string> unknown;
      OCRT_CHECK(charset.encode(line, classes, &unknown), "--texts: line '", line, "' has characters outside the charset");
      fixed.push_back(line);
    }
    OCRT_CHECK(!fixed.empty(), "--texts: ", c.texts, " holds no line");
  }
  const int64_t count = fixed.empty() ? c.count : (int64_t)fixed.size();
  const size_t digits = name_digits(count);
  if (c.pages) return write_pages(c, text_source, fonts, digits);
  std::vector<std::string> names((size_t)count), texts((size_t)count), manifest((size_t)count);
  std::string error;
  // Samples are independent, so they render on every core; the first error stops the rest.
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t i = 0; i < count; ++i) {
    bool stop;
#pragma omp critical(ocrt_synth_error)
    stop = !error.empty();
    if (stop) continue;
    try {
      std::string name = std::to_string(i);
      name.insert(0, digits - name.size(), '0');
      Sample sample = make_sample(c, text_source, fonts, scan, i, fixed.empty() ? std::string() : fixed[(size_t)i]);
      save_gray_png((fs::path(c.out) / (name + ".png")).string(), sample.image);
      write_text(fs::path(c.out) / (name + ".gt.txt"), sample.text + "\n");
      char height[32];
      std::snprintf(height, sizeof height, "%.1f", sample.height);
      manifest[(size_t)i] = name + ".png\t" + sample.font + "\t" + height + "\t" + c.degrade + "\t" + sample.kind + "\n";
      names[(size_t)i] = name;
      texts[(size_t)i] = std::move(sample.text);
    } catch (const std::exception& e) {
#pragma omp critical(ocrt_synth_error)
      if (error.empty()) error = e.what();
    }
  }
  OCRT_CHECK(error.empty(), error);

  // The label file last, through a temporary file: it never lists an image that is not there.
  std::string labels, lines = "image\tfont\theight\tscan\tkind\n";
  for (size_t i = 0; i < names.size(); ++i) labels += names[i] + ".png\t" + texts[i] + "\n";
  for (const auto& m : manifest) lines += m;
  write_text(fs::path(c.out) / "manifest.tsv", lines);
  const fs::path labels_path = fs::path(c.out) / "labels.txt", tmp = fs::path(c.out) / "labels.txt.tmp";
  write_text(tmp, labels);
  fs::rename(tmp, labels_path, ec);
  OCRT_CHECK(!ec, labels_path.string(), ": cannot write: ", ec.message());
  std::printf("ocrt-synth: wrote %lld lines to %s (%zu fonts, %lld charset characters, %zu words)\n",
              (long long)count, c.out.c_str(), fonts.size(), (long long)charset.size(), text_source.num_words());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    SynthConfig c;
    const std::vector<std::string> others = synth_flags(c).parse(argc, argv);
    OCRT_CHECK(others.empty(), "unexpected argument '", others.empty() ? "" : others[0],
               "': ocrt-synth takes only flags (see ocrt-synth --help)");
    validate(c);
    return run(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt-synth: %s\n", e.what());
    return 1;
  }
}
