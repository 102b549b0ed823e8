// Synthetic pages: whole pages rendered with the fonts and text of the synthetic lines
// (train/synth.h), with the outline of every text line and word, for training and testing a
// text detector and the page pipeline (docs/pages.md).
//
// A page is drawn in one of several layouts, each the kind of page users scan:
//   article  1 to 3 columns of paragraphs (indented or spaced), a heading, sometimes a list, a
//            running head, a page number, rules and figures (pictures that are not text); with
//            p_numbered, sometimes a transcript or pleading (every line numbered in the margin)
//   table    a title over a grid of short cells (words, numbers, prices), with or without rules
//   form     labels beside values written in boxes or on underlines, and check boxes
//   receipt  a narrow slip: a centred header, items with right-aligned prices, a total
//   slide    a wide page with large type, a title and bullet points, light on dark or dark on
//            light
//   chart    a report page of bar and line charts (tick labels, categories, axis titles,
//            legends among axes, bars and grid lines), with captions and a paragraph
// Type size (in points) and resolution (dpi) are drawn from the options, the page may be turned
// by a small angle (outlines turn with it), the other side's print may show through and the
// light may be uneven (a photographed page), and the scan simulation of train/scan.h (without
// its geometric steps, which would move the text away from its outlines) is applied to the page.
//
// Everything is drawn from SampleRng(seed): a page is a pure function of (text source, fonts,
// seed, options).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/geometry.h"
#include "runtime/image.h"
#include "train/scan.h"
#include "train/synth.h"

namespace ocrt::train {

enum class PageLayout { article, table, form, receipt, slide, chart };
constexpr int kPageLayouts = 6;
const char* page_layout_name(PageLayout layout);
PageLayout parse_page_layout(const std::string& name);  // throws listing the names

struct PageSynthOptions {
  double min_dpi = 150, max_dpi = 300;  // scan resolution, in [50, 600]
  double min_pt = 8, max_pt = 14;       // body text size in points, in [4, 72]; headings and slides larger
  double max_skew_deg = 3;              // the page turned by up to this, in [0, 10]
  // The space between words in ems, drawn per page from [min, max] (no draw when they are equal,
  // so that a seed gives the pages it gave before); in [0, 2]. PDFs set tight text at 0.15-0.2.
  double min_word_space = 0.28, max_word_space = 0.28;
  double p_scan = 0.7;                  // the scan simulation applied (probability)
  double p_light = 0.25;                // uneven light (a photo's vignette and a gradient across the sheet)
  double max_light = 0.35;              //   darkening by up to this share of a pixel's value, in [0, 0.8]
  // An article page drawn as a transcript or pleading instead, every line numbered in the left
  // margin (probability; 0, the default, draws nothing, so that a seed gives the pages it gave
  // before).
  double p_numbered = 0;
  // A word that starts with a capital and goes on in lower case (a name, a label) is set in small
  // capitals with this probability (TypeSetting::small_caps, at 0.66-0.8 of the capitals' size
  // drawn per page; its text keeps the lower case); chosen by the word and the page, so that a
  // word measured and then drawn is set the same. 0 draws nothing more from the page's stream.
  double p_small_caps = 0;
  double p_bleed = 0.15;                // bleed-through: the other side's print, mirrored and blurred,
  double max_bleed = 40;                //   up to this many gray levels darker, in [0, 128]
  ScanOptions scan = page_scan_options();
  // How often each layout is drawn (weights, not all zero): article, table, form, receipt,
  // slide, chart.
  std::vector<double> layout_weights = {0.45, 0.15, 0.15, 0.1, 0.07, 0.08};
  int64_t max_pixels = int64_t(1) << 24;  // a page larger than this at its dpi is drawn at a lower dpi
  // Throws naming the field for a value outside its range.
  void validate() const;
  // The scan simulation for pages: the line defaults without the steps that move or resize
  // the text (crop, margins, skew, curve, lower resolution).
  static ScanOptions page_scan_options();
};

struct SynthWord {
  std::string text;
  Quad outline;
};

struct SynthLine {
  std::string text;       // the words joined by single spaces
  Quad outline;           // from the top of the font's ascent to the bottom of its descent
  std::vector<SynthWord> words;
  bool heading = false;   // title, heading or slide title
};

struct SynthPage {
  GrayImage image;
  std::vector<SynthLine> lines;  // in the order they were drawn (not reading order)
  PageLayout layout = PageLayout::article;
  double dpi = 0;
  double skew_deg = 0;  // the page's turn, clockwise positive
};

SynthPage render_page(const TextSource& text, const std::vector<std::shared_ptr<Font>>& fonts, uint64_t seed,
                      const PageSynthOptions& options = {});

// The page's lines and words as one JSON text (what ocrt-synth --pages writes beside each image):
// {"width", "height", "dpi", "layout", "skew", "lines": [{"text", "points": [[x, y] x 4],
// "heading", "words": [{"text", "points"}]}]}. Points are rounded to 0.1 pixel.
std::string page_truth_json(const SynthPage& page);

}  // namespace ocrt::train
