// Training data: where samples come from (label files and folders of image + .gt.txt pairs),
// and the check of every sample before training starts.
//
// Formats (docs/data.md):
//  - label file: one sample a line, `relative/path.png<TAB>text`, paths relative to the label
//    file's folder (the PaddleOCR recognition format); empty lines are skipped;
//  - folder of pairs: `name.png` (or .jpg, .jpeg, .bmp) next to `name.gt.txt` holding the text
//    (one trailing newline stripped), the ocropus / calamari / tesstrain convention.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/charset.h"

namespace ocrt::train {

struct Sample {
  std::string path;  // the image, as a path usable from the working directory
  std::string text;  // the label, UTF-8
};

// Reads one source: a label file, or a folder of pairs. Throws naming the file and line for a
// malformed label file (a line without a tab), or a source that does not exist.
std::vector<Sample> read_source(const std::string& source);
// Several sources, concatenated in order.
std::vector<Sample> read_sources(const std::vector<std::string>& sources);

// Why a sample cannot be trained on.
enum class Problem { missing_image, bad_image, empty_label, invalid_utf8, unknown_characters, too_long_for_image };
const char* problem_name(Problem p);

struct CheckedSample {
  Sample sample;
  std::vector<int64_t> classes;  // the label as CTC classes (1-based)
  int64_t width = 0;             // image width after resizing to the model height, padded to 4
};

struct ValidationReport {
  std::vector<CheckedSample> good;
  std::map<Problem, int64_t> counts;
  std::map<Problem, std::vector<std::string>> examples;  // the first few "path: detail" each
  int64_t total = 0;
  int64_t bad() const;
  std::string summary() const;  // one line per kind of problem, with examples
};

// The frames a model emits for a line of a given padded width: the trainer passes its
// architecture's rule, nn::frames_for_width(arch, width) (models/recognizer.h). An empty rule
// means CRNN's, frames_for_width() below.
using FrameRule = std::function<int64_t(int64_t padded_width)>;

// Frames CRNN emits for a padded width (W / 4 + 1); the rule used where none is given.
inline int64_t frames_for_width(int64_t padded_width) { return padded_width / 4 + 1; }
// Frames `rule` gives (CRNN's when it is empty).
inline int64_t frames_for_width(const FrameRule& rule, int64_t padded_width) {
  return rule ? rule(padded_width) : frames_for_width(padded_width);
}
// Frames CTC needs for a label: its length plus one per pair of equal neighbours.
int64_t frames_needed(const std::vector<int64_t>& classes);

// Checks every sample once: the image exists and decodes, the label is non-empty valid UTF-8,
// every character is in the charset (unknown ones are reported, never dropped), and the label
// fits the image for CTC: the model's frames for the padded width (`frames`; CRNN's W / 4 + 1
// when empty) must be at least frames_needed(label). Runs on the OpenMP threads; the order of
// `good` follows the input.
ValidationReport validate_samples(const std::vector<Sample>& samples, const nn::Charset& charset, int64_t height = 32,
                                  const FrameRule& frames = {});

}  // namespace ocrt::train
