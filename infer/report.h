// What ocrt-infer writes: one line of output per input line (text, TSV or JSON lines), the
// evaluation against ground truth (--eval: CER, line accuracy, the worst lines), and the
// per-line logits file (--logits-out). Kept apart from the binary so that tests can check the
// exact formats (docs/cli.md documents them).
#pragma once
#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "infer/predictor.h"
#include "runtime/json.h"

namespace ocrt::infer {

enum class Format { text, tsv, jsonl };
Format parse_format(const std::string& name);  // "text", "tsv" or "jsonl"; throws otherwise

// Truth and its comparison with the recognised text, for --eval.
struct Scored {
  std::string truth;
  int64_t distance = 0;      // edit distance in characters (code points)
  int64_t truth_chars = 0;   // characters of the truth
};

struct FormatOptions {
  Format format = Format::text;
  bool positions = false;  // jsonl: per-character frame and x; tsv: a fifth column of x positions
};

// One output line, '\n' included:
//   text   the recognised text (an empty line for a failed one; its error goes to stderr)
//   tsv    path<TAB>text<TAB>confidence<TAB>error   (confidence empty and error set on failure;
//          tabs, newlines and backslashes in fields are written as \t, \n and \\)
//   jsonl  {"path":..., "text":..., "confidence":..., ["chars":[{"c":..,"frame":..,"x":..}],]
//           ["truth":..., "distance":..., "cer":...,] ["error":...]}
std::string format_line(const LineResult& r, const FormatOptions& o, const Scored* scored = nullptr);

// Levenshtein distance between two texts, counted in Unicode code points (bytes when a text is
// not valid UTF-8).
int64_t char_edit_distance(const std::string& a, const std::string& b);
int64_t char_count(const std::string& text);

// --eval: collects every line's score and reports CER, line accuracy and the worst lines.
// A failed line counts as all of its truth lost (distance = its length).
class Evaluation {
 public:
  // With the model's charset, reference characters it does not hold (a model for ASCII can never
  // read 'é' or '€') are counted: each is an edit the model cannot avoid, and the report and the
  // summary name them.
  explicit Evaluation(const nn::Charset* charset = nullptr) : charset_(charset) {}
  Scored add(const LineResult& r, const std::string& truth);

  int64_t lines() const { return (int64_t)lines_.size(); }
  int64_t failed() const { return failed_; }
  // Total distance / total truth characters; 0 when there are no truth characters, where the
  // report says "undefined" and summary() gives null instead (a rate over nothing).
  double cer() const;
  double line_accuracy() const;  // lines read exactly right / lines
  // A readable report: the numbers, then the `worst` lines with the highest per-line CER.
  std::string report(int64_t worst = 10) const;
  // {"lines", "failed", "cer", "line_accuracy", "distance", "truth_chars"}, and with a charset
  // "outside_charset": {"chars": n, "lines": n, "which": {"é": n, ...}}.
  Json summary() const;
  // Reference characters outside the charset: how many, and in how many lines.
  int64_t outside_charset_chars() const;
  int64_t outside_charset_lines() const { return outside_lines_; }

 private:
  struct Line {
    std::string name, truth, text, error;
    int64_t distance, truth_chars;
  };
  const nn::Charset* charset_;
  std::vector<Line> lines_;
  int64_t failed_ = 0, distance_ = 0, truth_chars_ = 0, exact_ = 0;
  std::map<std::string, int64_t> outside_;  // character -> count
  int64_t outside_lines_ = 0;
};

// --logits-out: each recognised line's (T, C) logits under its input path (a path that comes
// again gets " #2", " #3", ...), with metadata {"format": "ocrt-logits-1", "charset": [...],
// "blank": "0"}. Written atomically.
void write_logits_file(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& logits,
                       const nn::Charset& charset);

// Checks, before any line is read, that an output file can be written where `flag` (e.g.
// "--logits-out") says: not empty, not a folder, its folder exists, and a file can be created
// in that folder (a temporary one, created and removed, as the atomic write will create). Throws
// naming the flag and the path.
void check_output_path(const std::string& flag, const std::string& path);

}  // namespace ocrt::infer
