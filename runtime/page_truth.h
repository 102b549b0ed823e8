// The page truth file that ocrt-synth --pages writes beside each page (NAME.json), read once
// for the two that use it: the detector's training (the lines' outlines) and --eval on pages
// (the words and the text). Its writer is train/synth_page.h's page_truth_json:
//
//   {"width": W, "height": H, "dpi": D, "layout": "article", "skew": S,
//    "lines": [{"text": "...", "points": [[x, y] x 4], "heading": false,
//               "words": [{"text": "...", "points": [[x, y] x 4]}, ...]}, ...]}
//
// Lines in the order they were drawn (the reading order of the layouts ocrt-synth draws);
// points clockwise from the top left of the upright text, in the page's pixels. The file is a
// user's file like any other: every field is checked, and an error names the file, the line
// and the word. Only "lines", and each line's "points" (or, for a line without them, its
// words') are required; "text" and "words" where a reader needs them (see below).
#pragma once
#include <string>
#include <vector>

#include "runtime/geometry.h"

namespace ocrt {

struct PageTruthWord {
  std::string text;
  Quad outline;
};

struct PageTruthLine {
  std::string text;
  Quad outline;
  bool heading = false;
  std::vector<PageTruthWord> words;
};

struct PageTruthFile {
  std::vector<PageTruthLine> lines;
};

// Parses the text of a truth file; `name` (its path) starts every error. With `need_words`,
// every line must have "text" and "words" (each with "text" and "points"), as --eval needs;
// without, a line needs only its "points".
PageTruthFile parse_page_truth(const std::string& json_text, const std::string& name, bool need_words);

// The same from a file (read whole).
PageTruthFile read_page_truth(const std::string& path, bool need_words);

}  // namespace ocrt
