// The training report: one self-contained HTML page per run folder (RUN_DIR/report.html), with
// SVG charts of the training loss, validation CER, learning rate and lines per second against
// steps and against wall time, the worst validation lines as images beside their truth and
// reading, and the run's settings. ocrt-train writes it at every evaluation and checkpoint and
// at the end of the run; ocrt-report writes it for any run folder (docs/cli.md).
//
// The page is meant to be opened anywhere and kept: no JavaScript, nothing fetched (images are
// data: URIs), colours from CSS variables that follow the reader's light or dark scheme. Each
// chart is an inline <svg class="chart"> whose plot area is the <rect class="plot-area">
// inside it (tests/train/report_screenshot.py finds the charts by these classes).
//
// Run folders are read as hostile: a missing or unreadable file, lines of metrics.jsonl that
// are not JSON events (or hold NaN or Infinity, which Python's json module writes), values that
// are not finite, a single point, steps out of order or repeated by a resume, texts needing
// escaping or invalid UTF-8, image files that are corrupt or huge; each becomes a note on the
// page or a gap in a line, never a failure or a broken page. Non-finite values are not drawn:
// a line breaks where they are, and the chart says how many there were.
#pragma once
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/image.h"
#include "runtime/json.h"

namespace ocrt::train {

// ---- the worst validation lines of an evaluation (RUN_DIR/worst/, docs/formats.md)

// A validation line the model read wrong, as evaluate() keeps it.
struct WorstLine {
  std::string id;       // the image path, or "synth:<index>"
  std::string truth, reading;
  int64_t distance = 0;  // edits between truth and reading, in characters
  double cer = 0;        // distance / characters of the truth
  GrayImage image;       // what the model read: at the model's height, before normalisation
};

// Replaces what RUN_DIR/worst/ holds with these lines of the evaluation at `step`: the images
// (NNNNNNNN-KK.png: step and rank) are written first, then index.json atomically, then the
// images no longer named by it are removed, so a reader of index.json finds a complete set.
// `evaluated`: the validation lines they were chosen from.
void write_worst_lines(const std::string& run_dir, int64_t step, int64_t evaluated,
                       const std::vector<WorstLine>& lines);

// ---- reading a run folder

struct TrainPoint {
  int64_t step = 0;
  double time = NAN;  // wall seconds since the run began, resumes joined (NaN: not recorded)
  double loss = NAN, lr = NAN, samples_per_sec = NAN;
  int64_t skipped_steps = 0;
};

struct EvalPoint {
  int64_t step = 0;
  double time = NAN;
  double cer = NAN, line_accuracy = NAN;
  int64_t lines = 0;
};

// Where a run (or a resumed part of it) started: a "start" event.
struct RunStart {
  int64_t step = 0;
  double time = NAN;  // on the joined clock of TrainPoint::time
  std::string from;   // the checkpoint or --init file; empty: the seed
  Json event;         // the whole event (settings, model config, ...)
};

struct ReportLine {
  std::string image_name, id, truth, reading;
  int64_t distance = 0;
  double cer = NAN;
  std::string png;  // re-encoded from the file (so what is embedded is a sound PNG); empty: none
  int64_t width = 0, height = 0;  // the image's size in pixels
};

struct RunRecord {
  std::string dir, name;  // the folder as given, and its last component
  std::vector<TrainPoint> train;  // by step, one per step (a step logged twice keeps the last)
  std::vector<EvalPoint> evals;   // likewise
  std::vector<RunStart> starts;   // in file order
  std::vector<std::pair<int64_t, std::string>> checkpoints;  // (step, why)
  std::optional<Json> summary;    // the last "summary" event
  bool summary_is_last = false;   // no start came after it: the run ended
  bool has_time = false;          // some event recorded a wall time
  Json settings;                  // the latest start's settings, else a checkpoint's (null: none)
  std::string settings_from;      // where `settings` came from
  int64_t worst_step = -1, worst_evaluated = 0;
  std::vector<ReportLine> worst;
  std::vector<std::string> notes;  // what was missing or odd, for the reader
};

// Reads what the run folder holds. Throws only when `dir` is not a folder.
RunRecord read_run(const std::string& dir);

// The page for a run. `generated` is printed at its foot (a date and time, or empty).
std::string report_html(const RunRecord& run, const std::string& generated = "");

// Reads `run_dir`, writes the page to `out` atomically (a temporary file, then rename), and
// returns the record it was made from. Throws when the folder is missing or `out` cannot be
// written.
RunRecord write_report(const std::string& run_dir, const std::string& out);

// Text for HTML and XML: & < > " ' escaped, invalid UTF-8 and control characters other than
// tab and newline replaced by U+FFFD (XML 1.0 cannot hold them).
std::string html_escape(const std::string& text);

}  // namespace ocrt::train
