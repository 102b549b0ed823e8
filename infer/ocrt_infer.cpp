// ocrt-infer: recognises text-line images and reads whole pages with model files, in batches,
// on one or several devices, and prints text, TSV or JSON lines, or writes hOCR, ALTO or PAGE
// XML, in input order (docs/cli.md has the reference, docs/pages.md the page pipeline).
// The work is done by infer/predictor.h (lines) and infer/page_reader.h (pages); this file
// parses flags, finds the shipped models, reads the inputs and tells lines from pages
// (infer/inputs.h), and writes the results (infer/report.h, infer/page_format.h).
//
// Lines stream through the predictor in runs; a page ends the run of lines before it, is read on
// its own (detect, then all its lines in one predictor run), and the next lines start a new
// run, so outputs stay in input order.
//
// Exit status: 0 every line and page was read; 1 some failed (each has its own error);
// 2 nothing could run (a bad flag, model file or device, an unreadable input source).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <functional>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "infer/detector.h"
#include "infer/page_lanes.h"
#include "infer/inputs.h"
#include "infer/page_eval.h"
#include "infer/page_format.h"
#include "infer/page_reader.h"
#include "infer/predictor.h"
#include "infer/report.h"
#include "models/model_file.h"
#include "ops/conv.h"
#include "runtime/cpu/int8_gemm.h"
#include "runtime/cpu/int8_winograd.h"
#include "runtime/cpu_allocator.h"
#include "runtime/cli.h"
#include "runtime/error.h"
#include "runtime/threading.h"

using namespace ocrt;
using namespace ocrt::infer;
namespace fs = std::filesystem;

namespace {

// The largest --max-image-pixels: 2^32 pixels, 4 GB of gray at one byte a pixel.
constexpr int64_t kMaxImagePixelsFlag = int64_t(1) << 32;

// --format: a line format (text, tsv, jsonl) and a page format (text, hocr, alto, page, jsonl).
// tsv is for lines only; hocr, alto and page write a line as a page of one line.
struct OutputFormat {
  std::string name = "text";
  Format line = Format::text;
  std::optional<PageFormat> page = PageFormat::text;  // none for tsv
  bool page_document() const { return name == "hocr" || name == "alto" || name == "page"; }
};

OutputFormat parse_output_format(const std::string& v) {
  OutputFormat f;
  f.name = v;
  if (v == "text" || v == "tsv" || v == "jsonl") f.line = parse_format(v);
  if (v == "tsv") f.page.reset();
  else if (v == "text" || v == "jsonl" || v == "hocr" || v == "alto" || v == "page") f.page = parse_page_format(v);
  else fail("unknown output format '", v, "' (expected text, tsv, jsonl, hocr, alto or page)");
  return f;
}

int parse_rotation(const std::string& v) {
  if (v == "auto") return -1;
  if (v == "0" || v == "90" || v == "180" || v == "270") return std::stoi(v);
  fail("expected auto, 0, 90, 180 or 270, got '", v, "'");
}

struct Args {
  std::string weights, det_weights;
  PredictorOptions options;
  std::vector<Device> device, devices;  // --device (one) and --devices
  bool cpu_workers_given = false;        // --cpu-workers (else: auto on the CPU alone)
  ConvMode conv = ConvMode::fast;
  OutputFormat output;
  FormatOptions format;
  bool eval = false;
  int64_t worst = 10;
  std::string logits_out, output_dir;
  bool force_line = false, force_page = false;
  InputKind kind = InputKind::automatic;
  int64_t max_side = 1280;
  double det_threshold = -1, box_threshold = -1;  // negative: the detector file's own
  double small_lines = DetectorOptions().small_lines;
  double descreen = DetectorOptions().descreen;
  double end_reach = PageReaderOptions().end_reach, side_reach = PageReaderOptions().side_reach;
  double erase_column_rules = PageReaderOptions().erase_column_rules;
  double descreen_lines = PageReaderOptions().descreen_lines;
  double erase_rules = PageReaderOptions().erase_rules, sideways_check = PageReaderOptions().sideways_check;
  double min_confidence = PageReaderOptions().min_confidence;
  double missed_ink = PageReaderOptions().missed_ink;
  double small_caps_drop = PageReaderOptions().small_caps_drop;
  double space_gap = PageReaderOptions().space_gap;
  int rotation = -1;
  int page_jobs = 0;  // 0: page_lanes_for's default
  // --decoder auto (the default): resolve_decoder() picks it; beam_doubt_given: --beam-doubt was.
  bool decoder_auto = true, beam_doubt_given = false;
  bool precision_given = false;  // --precision was (then the shipped recogniser is the float32 file)
  std::vector<std::pair<bool, std::string>> inputs;  // (is a --list file, path), in order
};

// --devices: like runtime's parse_device_list, except that cpu may repeat (several CPU workers
// share the CPU threads); a GPU listed twice is refused by the Predictor (one thread per GPU).
std::vector<Device> parse_workers(const std::string& text) {
  std::vector<Device> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    Device d = Device::parse(item);
    validate(d);  // names the devices that exist when this one does not
    out.push_back(d);
  }
  OCRT_CHECK(!out.empty(), "empty device list, expected e.g. cpu or cuda:0,cuda:1");
  return out;
}

std::string parse_precision(const std::string& v) {
  OCRT_CHECK(is_predictor_precision(v), "expected ", kPredictorPrecisions, ", got '", v, "'");
  return v;
}

// `flag` that also sets `given` when the command line names it (a default that depends on
// whether the user chose: --precision, --beam-doubt).
cli::Flag noting(cli::Flag flag, bool& given) {
  flag.set = [&given, set = std::move(flag.set)](const std::string& v) {
    set(v);
    given = true;
  };
  return flag;
}

cli::Parser infer_flags(Args& a) {
  using cli::Range;
  constexpr double kInf = HUGE_VAL;
  PredictorOptions& o = a.options;
  cli::Parser p("ocrt-infer", R"(usage: ocrt-infer [options] INPUT...

Recognises text-line images and reads whole pages, and prints what they say, in input order:
one output line per text line, a page's text in reading order (or hOCR, ALTO, PAGE XML).

Inputs (any mix, read in order)
  IMAGE                  an image file (PNG, JPEG, BMP, TGA, GIF, PGM/PPM, TIFF: every page)
  LABELS.txt|.tsv        a label file: path<TAB>text per line, paths relative to its folder
  FOLDER                 every image in it (sorted), with name.gt.txt as its text when present
  -                      image paths from stdin, one per line
An image more than 100 pixels high and less than 6 times as wide as high is read as a page
(a multi-page TIFF too); other images are text lines. --line and --page decide instead;
with --format tsv (a table of lines) every image is a line.)");
  p.arguments([&a](const std::string& path) { a.inputs.emplace_back(false, path); });
  p.add({"--list", "FILE", "image paths from FILE, one per line (relative to the working directory)",
         [&a](const std::string& path) { a.inputs.emplace_back(true, path); }});
  p.add(cli::toggle("--line", a.force_line, true, "read every image as one text line"));
  p.add(cli::toggle("--page", a.force_page, true, "read every image as a page (detect its lines first)"));

  p.note("\nModels");
  p.add(cli::text("--weights", "FILE", a.weights,
                  "recogniser model file (default: the shipped model, in int8 where every\n"
                  "device is a CPU with an int8 kernel and no --precision, or auto, is given,\n"
                  "weights/crnn-en-int8.safetensors, else weights/crnn-en.safetensors)"));
  p.add(cli::text("--arch", "A", o.arch,
                  "crnn, crnn-s or svtr-lite: architecture of a weights-only file\n"
                  "(checked against a model file's own)"));
  p.add(cli::text("--charset", "FILE", o.charset_path, "charset of a weights-only file (one character per line)"));
  p.add(cli::text("--det-weights", "FILE", a.det_weights,
                  "text detector model file for pages (default: the shipped one, in int8 on a\n"
                  "CPU with an int8 kernel, weights/det-en-int8.safetensors, else\n"
                  "weights/det-en.safetensors; without one, each page gets an error)"));
  p.add(cli::integer("--max-side", "N", a.max_side, 32, 65536,
                     "pages are scaled down so that their longer side is at most N pixels\n"
                     "before the detector (1280)"));
  p.add(cli::real("--small-lines", "PX", a.small_lines, Range{0, 1000},
                  "a page whose lines are on the whole thinner than PX pixels at --max-side\n"
                  "is detected again, scaled so that they would be 20 (up to its own size,\n"
                  "at most 1.6 x --max-side); 0: never (default 15)"));
  p.add(cli::real("--descreen", "PX", a.descreen, Range{0, 8},
                  "pages are detected once more blurred by PX pixels (at --max-side), and\n"
                  "the lines found only then are added: print on a halftone screen; 0: no\n"
                  "such pass (default 0.75)"));
  p.add(cli::real("--det-threshold", "P", a.det_threshold, Range{0, 1},
                  "a pixel of the detector's map is text when its probability is above P\n"
                  "(default: the detector file's, 0.3 for the shipped one)"));
  p.add(cli::real("--box-threshold", "P", a.box_threshold, Range{0, 1},
                  "a detected region is kept as a line when its mean probability is at least P\n"
                  "(default: the detector file's, 0.4 for the shipped one; lower finds\n"
                  "fainter and smaller lines, and more that are not text)"));
  p.add(cli::real("--end-reach", "H", a.end_reach, Range{0, 4},
                  "each line's ends follow its glyphs' ink up to H line heights past the\n"
                  "detector's outline, so that a first or last glyph the outline cut is read\n"
                  "whole (default 0.6; 0: only the fixed margin of 0.15 heights)"));
  p.add(cli::real("--side-reach", "H", a.side_reach, Range{0, 2},
                  "each line grows above and below into the blank rows beside it, by half of\n"
                  "those within H line heights (default 0.2; 0: not at all)"));
  p.add(cli::real("--descreen-lines", "S", a.descreen_lines, Range{0, 8},
                  "a cut-out line printed on a halftone screen (shaded cells, grey or dark\n"
                  "screens), or whose glyphs are printed in dots (a fax of grey type), is\n"
                  "blurred by S of its pixels before it is read (default 1; 0: never)"));
  p.add(cli::real("--erase-rules", "L", a.erase_rules, Range{0, 1000},
                  "underlines and rules are erased from each cut-out line: runs of ink along a\n"
                  "row at least L times the cut's height long (default 2.5; 0: kept)"));
  p.add(cli::real("--erase-column-rules", "H", a.erase_column_rules, Range{0, 100},
                  "a table's column rules are erased from each cut-out line: columns of ink\n"
                  "across the cut that go on past it on the page for H line heights (default\n"
                  "0.5; 0: kept)"));
  p.add(cli::real("--space-gap", "G", a.space_gap, Range{0, 4},
                  "a space is put in where a page's line was read run together over a blank\n"
                  "gap in its ink at least G line heights wide and 2.5 times its median gap\n"
                  "between characters (tightly set tables and columns), and one read into an\n"
                  "e-mail address after a full stop is taken out where the gap is narrower\n"
                  "(default 0.15; 0: never)"));
  p.add(cli::real("--min-confidence", "C", a.min_confidence, Range{0, 1},
                  "a page's line read with a mean confidence per character below C is left out\n"
                  "(junk read from charts, photos, rows of dots; default 0.5; 0: every line)"));
  p.add(cli::real("--small-caps-drop", "D", a.small_caps_drop, Range{0, 0.99},
                  "a page's word read as capitals whose first glyph stands at least D of its\n"
                  "height above the others (small capitals) is put in lower case after it\n"
                  "(default 0.1; 0: never)"));
  p.add(cli::real("--missed-ink", "C", a.missed_ink, Range{0, 1},
                  "a page's ink the size of a glyph or a dash that no detected line covers (lone\n"
                  "line numbers, a table's dashes) is read too, and kept when read with at least\n"
                  "C per character (default 0.8; 0: not looked for)"));
  p.add(cli::real("--sideways-check", "C", a.sideways_check, Range{0, 1.01},
                  "a page whose orientation probe reads below C per character both ways, without\n"
                  "a decisive vote, is detected again turned by a quarter turn in case it lies\n"
                  "sideways (default 0.9; 0: never)"));
  p.add(cli::choice("--rotation", "auto|0|90|180|270", a.rotation, parse_rotation,
                    "how pages are turned, clockwise; auto (the default) decides per page"));

  p.note("\nDevices and batching");
  p.add({"--device", "cpu|cuda:N", "run on one device (default: cpu)", [&a](const std::string& v) {
           a.device = {Device::parse(v)};
           validate(a.device[0]);  // names the devices that exist when this one does not
         }});
  p.add({"--devices", "LIST", "one worker per device, e.g. cuda:0,cuda:1 or cuda:0,cpu or cpu,cpu\n"
                              "(the detector runs on the first)",
         [&a](const std::string& v) { a.devices = parse_workers(v); }});
  p.add(cli::integer("--threads", "N", o.threads, 1, 4096,
                     "CPU threads for decoding images and for CPU workers (default: all)"));
  p.add({"--cpu-workers", "N|auto",
         "on the CPU alone (no --device or --devices): N workers, each reading its own\n"
         "batches on threads / N of the threads (one model shared; a batch with none beside it\n"
         "or waiting gets every thread). auto (the default): one a thread, at most 4",
         [&a](const std::string& v) {
           if (v == "auto") {
             a.options.cpu_workers = 0;
           } else {
             a.options.cpu_workers = (int)cli::parse_int("--cpu-workers", v, 1, 4096);
           }
           a.cpu_workers_given = true;
         }});
  p.add(cli::integer("--page-jobs", "N", a.page_jobs, 1, 256,
                     "pages read at once, each with its own detector and recogniser\n"
                     "and threads / N of the threads, on the CPU or taking turns on the\n"
                     "GPUs of --devices (lane i on the i-th, round robin; not on a list\n"
                     "mixing cpu and GPUs). Default: 8 a GPU (at most threads / 2);\n"
                     "on the CPU 2 where there are 2 threads or more and the recogniser\n"
                     "has at most 4M values, as crnn-s; else 1"));
  p.add(cli::integer("--batch", "N", o.batch, 1, 65536, "lines per batch, grouped by width (32)"));
  p.add(cli::integer("--batch-columns", "N", o.max_batch_columns, 64, int64_t(1) << 30,
                     "at most N columns in a batch (its lines x their padded width), which bounds its\n"
                     "memory; a batch of wide lines holds fewer lines (default when every device\n"
                     "is a CPU: 262144 / the model's first-layer channels, within 2048..12288:\n"
                     "4096 for crnn, 8192 for crnn-s; else --batch x 2048)"));
  p.add(noting(cli::choice("--precision", "fp32|tf32|bf16|int8|auto", o.precision, parse_precision,
                           "matrix products and convolutions in float32 (the default) or bf16\n"
                           "(operands rounded to bf16, sums in float32; on CPUs products about twice\n"
                           "as fast with AVX512_BF16, 3-8x on AMX, the same speed as fp32\n"
                           "elsewhere; on GPUs tensor cores); tf32: GPU tensor cores with TF32\n"
                           "operands (CPU workers stay fp32); int8: an int8 model file (the shipped\n"
                           "one without --weights; a float --weights file is refused: ocrt-quantize\n"
                           "makes one), CPUs only; auto: the fastest precision whose\n"
                           "CER on the model's validation lines, as its file records them, is\n"
                           "within 0.05 points of fp32's: int8 (the shipped int8 file) on CPUs\n"
                           "with an int8 kernel, else bf16 on CPUs with bf16 instructions, else\n"
                           "fp32 (GPU workers fp32). The summary says which path and precision\n"
                           "ran, and why for auto. OCRT_CPU_ISA=avx2|avx512|avx512bf16|amx forces\n"
                           "an instruction-set path (docs/ops/gemm.md). fp32, tf32 or bf16 given\n"
                           "also makes the shipped recogniser the float32 file (see --weights)"),
               a.precision_given));
  p.add(cli::choice("--conv", "fast|exact", a.conv, parse_conv_mode,
                    "CPU 3x3 convolutions through Winograd (fast, the default: about 1e-5\n"
                    "relative rounding) or im2col (exact: about 1e-7); docs/ops/conv.md"));
  p.add(cli::integer("--max-image-pixels", "N", o.max_image_pixels, 1, kMaxImagePixelsFlag,
                     "read an image only when its header says it has at most N pixels\n"
                     "(16777216, e.g. 16384 x 1024, or a page of 4096 x 4096); larger\n"
                     "ones get an error of their own before anything is allocated"));
  p.add(cli::toggle("--plain-preprocess", o.normalize.enabled, false,
                    "resize and pad only, as training does: no blank-line check, no\n"
                    "inversion of light-on-dark lines, no contrast stretch of faint ones"));

  p.note("\nDecoding and output");
  p.add({"--decoder", "auto|greedy|beam",
         "CTC decoding. auto (the default): the prefix beam with a language model (--lm,\n"
         "else the shipped weights/lm-en.clm where it knows every character of the\n"
         "model) on the lines in doubt (--beam-doubt 0.2), greedy on the others; greedy\n"
         "where there is no such LM. greedy: the most likely class of each frame (the\n"
         "fastest). beam: the prefix beam on every line (with --lm when given)",
         [&a](const std::string& v) {
           OCRT_CHECK(v == "auto" || v == "greedy" || v == "beam", "expected auto, greedy or beam, got '", v, "'");
           a.decoder_auto = v == "auto";
           if (!a.decoder_auto) a.options.decoder = parse_decoder(v);
         }});
  p.add(cli::integer("--beam-width", "N", o.beam_width, 1, 10000, "prefix beam width (10)"));
  p.add(cli::text("--lm", "FILE", o.lm_path,
                  "character language model for the beam (built by ocrt-lm, e.g.\n"
                  "weights/lm-en.clm)"));
  p.add(cli::real("--lm-weight", "A", o.lm_weight, Range{0, kInf, false, true},
                  "weight of the LM's log-probability per character (0.3)"));
  p.add(cli::real("--lm-uniform", "U", o.lm_uniform, Range{0, 1, false, true},
                  "share of a uniform distribution mixed into the LM's: bounds how unlikely it\n"
                  "can call a character, and so how far it overrules the model (0.01)"));
  p.add(cli::real("--lm-bonus", "B", o.lm_bonus, Range{-kInf, kInf, true, true}, "score added per character with --lm (1)"));
  p.add(noting(cli::real("--beam-doubt", "P", o.beam_doubt, Range{0, 1},
                         "the beam reads only the lines with a frame where the runner-up class\n"
                         "has probability P or more; the others keep their greedy reading\n"
                         "(0: every line; default 0.2 with --decoder auto, 0 with beam)"),
               a.beam_doubt_given));
  p.add(cli::choice("--format", "text|tsv|jsonl|hocr|alto|page", a.output, parse_output_format,
                    "text: the text (a page's in reading order); tsv: path, text,\n"
                    "confidence, error (lines only); jsonl: one JSON object per line or\n"
                    "page; hocr, alto, page: hOCR, ALTO or PAGE XML documents (a line is\n"
                    "a page of one line). Default: text"));
  p.add(cli::text("--output-dir", "DIR", a.output_dir,
                  "write one file per input into DIR (NAME.txt, .json, .hocr or .xml:\n"
                  "NAME is the input's file name without its extension) instead of stdout"));
  p.add(cli::toggle("--positions", a.format.positions, true,
                    "tsv/jsonl: each character's x position (and CTC frame in jsonl);\n"
                    "pages: each character's box"));
  p.add(cli::toggle("--eval", a.eval, true,
                    "compare with the true text (label files and .gt.txt folders; a page's\n"
                    "truth is NAME.json, NAME.hocr or NAME.xml beside it): prints CER, line\n"
                    "accuracy and the worst lines, and for pages word accuracy, missed and\n"
                    "extra words and CER; with --format jsonl, per-line and per-page results\n"
                    "and last {\"summary\": ...} / {\"page_summary\": ...} lines"));
  p.add(cli::integer("--worst", "N", a.worst, 0, 1000000, "lines listed by --eval, and words of each page not read right (10)"));
  p.add(cli::text("--logits-out", "FILE", a.logits_out,
                  "write each line's T x C logits to FILE (safetensors), under its path\n"
                  "(line inputs only)"));
  p.note("  --help                 this text\n\n"
         "Exit status: 0 all lines and pages read; 1 some failed (errors on stderr); 2 nothing could run.\n"
         "A summary (lines, lines/s, each device's share; pages) goes to stderr.");
  return p;
}

Args parse_args(int argc, char** argv) {
  Args a;
  infer_flags(a).parse(argc, argv);
  set_conv_mode(a.conv);
  OCRT_CHECK(a.device.empty() || a.devices.empty(), "give --device or --devices, not both");
  OCRT_CHECK(!(a.force_line && a.force_page), "give --line or --page, not both");
  a.kind = a.force_line ? InputKind::line : a.force_page ? InputKind::page : InputKind::automatic;
  // tsv is a table of lines: it has no place for a page, so every image is read as a line.
  OCRT_CHECK(a.output.page || a.kind != InputKind::page, "--page: --format tsv writes text lines only; give "
             "--format text, jsonl, hocr, alto or page for pages");
  if (!a.output.page) a.kind = InputKind::line;
  if (!a.device.empty()) a.options.devices = a.device;
  if (!a.devices.empty()) a.options.devices = a.devices;
  OCRT_CHECK(!a.cpu_workers_given || (a.device.empty() && a.devices.empty()),
             "--cpu-workers splits the CPU when no --device or --devices is given (--devices cpu,cpu "
             "lists the workers itself)");
  if (!a.cpu_workers_given) a.options.cpu_workers = a.device.empty() && a.devices.empty() ? 0 : 1;
  a.options.keep_logits = !a.logits_out.empty();
  a.format.format = a.output.line;
  OCRT_CHECK(a.output_dir.empty() || a.output.page, "--output-dir writes one document per input: give --format "
             "text, jsonl, hocr, alto or page (tsv is one table of lines; leave --output-dir out)");
  OCRT_CHECK(!a.eval || a.output_dir.size() || !a.output.page_document(), "--eval prints its report on stdout: "
             "give --output-dir DIR for the ", a.output.name, " documents");
  OCRT_CHECK(!a.inputs.empty(),
             "no input lines: give image paths, a label file, a folder, --list FILE or '-' for stdin (see --help)");
  return a;
}

// A shipped model file (weights/NAME): next to the binary or up to three folders above it (a
// build folder inside the source tree), in an install prefix's share/ocrt, or in the source
// tree this binary was built from. Empty when none exists; `looked` then lists where.
std::string find_shipped(const fs::path& rel, std::string* looked = nullptr) {
  std::vector<fs::path> tried;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path dir = exe.parent_path();
    for (int up = 0; up <= 3 && !dir.empty(); ++up, dir = dir.parent_path()) tried.push_back(dir / rel);
    tried.push_back(exe.parent_path().parent_path() / "share" / "ocrt" / rel);
  }
#ifdef OCRT_SOURCE_DIR
  tried.push_back(fs::path(OCRT_SOURCE_DIR) / rel);
#endif
  std::string list;
  for (const auto& p : tried) {
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
    const std::string line = "\n  " + p.lexically_normal().string();
    if (list.find(line + "\n") == std::string::npos && !list.ends_with(line)) list += line;
  }
  if (looked) *looked = list;
  return "";
}

// A shipped model, weights/NAME.safetensors, or its int8 file weights/NAME-int8.safetensors
// where `int8` and that file is found. Empty when neither is; `looked` then lists where the
// float file was looked for.
std::string find_shipped_model(const std::string& name, bool int8, std::string* looked = nullptr) {
  if (int8)
    if (std::string f = find_shipped(fs::path("weights") / (name + "-int8.safetensors")); !f.empty()) return f;
  return find_shipped(fs::path("weights") / (name + ".safetensors"), looked);
}

// The shipped recogniser: in int8 where `int8` (every device a CPU with an int8 kernel and no
// --precision asked for): crnn-en's accuracy (CER 0.81% against 0.80% on the validation lines,
// the same words on the real pages) at about twice the lines/s in half the memory
// (weights/README.md); else, or where the int8 file is missing, the float32 file.
std::string default_weights(bool int8) {
  const fs::path rel = fs::path("weights") / "crnn-en.safetensors";
  std::string looked;
  std::string found = find_shipped_model("crnn-en", int8, &looked);
  if (found.empty())
    fail("no --weights given and the shipped model ", rel.string(), " was not found; looked in:", looked,
         "\npass --weights FILE");
  return found;
}

// Whether the shipped int8 file of NAME is there and its training record validates int8
// (precision_validated, infer/predictor.h): --precision auto's choice of it on int8 CPUs.
bool shipped_int8_validated(const std::string& name) {
  const std::string f = find_shipped(fs::path("weights") / (name + "-int8.safetensors"));
  if (f.empty()) return false;
  const nn::ModelFile m = nn::load_model_file(f, /*quiet=*/true);
  return m.info && precision_validated(m.info->training, "int8");
}

// --decoder auto (use_auto_decoding, infer/predictor.h): the prefix beam with a language model
// on the lines in doubt, the LM being --lm's or the shipped one; the shipped one only for
// models whose every character it knows (PredictorOptions::lm_if_known), and greedy decoding
// where it is not found.
void resolve_decoder(Args& a) {
  if (!a.decoder_auto) return;
  PredictorOptions& o = a.options;
  const double doubt = o.beam_doubt;
  if (!o.lm_path.empty()) use_auto_decoding(o, o.lm_path, false);
  else use_auto_decoding(o, find_shipped(fs::path("weights") / "lm-en.clm"), true);
  if (a.beam_doubt_given) o.beam_doubt = doubt;
}

// The text detector, loaded when the first page needs it (reading lines never does). An
// explicit --det-weights is loaded at start-up instead: a mistyped path stops the run at once.
class DetectorSlot {
 public:
  DetectorSlot(std::string explicit_path, DetectorOptions options)
      : path_(std::move(explicit_path)), options_(options) {
    if (!path_.empty()) detector_ = std::make_unique<TextDetector>(path_, options_);
  }
  // The file get() loaded (empty until it has).
  const std::string& path() const { return path_; }
  // "FILE (int8, K kernel[, 3x3 layers by ...])" (cpu::int8_path_description) or "FILE (float32)"
  // once loaded, else empty.
  std::string describe() const {
    if (!detector_) return "";
    return path_ + (detector_->int8() ? " (int8, " + cpu::int8_path_description() + ")" : std::string(" (float32)"));
  }
  // Throws a message that ends "... no text detector model ..." when there is none.
  TextDetector& get() {
    if (detector_) return *detector_;
    if (error_.empty()) {
      // The shipped detector: in int8 where it runs on a CPU with an int8 kernel (the same
      // words on every page set, in a third less time: docs/int8.md), else in float32.
      const fs::path rel = fs::path("weights") / "det-en.safetensors";
      std::string looked;
      const std::string found = find_shipped_model("det-en", options_.device.is_cpu() && cpu::int8_gemm_simd(), &looked);
      if (found.empty()) {
        // One line per page, however many pages: the places looked in, comma-separated.
        std::istringstream lines(looked);
        std::string place, places;
        while (std::getline(lines, place))
          if (const size_t at = place.find_first_not_of(' '); at != std::string::npos)
            places += (places.empty() ? "" : ", ") + place.substr(at);
        error_ = "there is no text detector model (no --det-weights, and " + rel.string() + " is in none of " +
                 places + "); give --det-weights FILE";
      } else {
        try {
          detector_ = std::make_unique<TextDetector>(found, options_);
          path_ = found;
          return *detector_;
        } catch (const std::exception& e) {
          error_ = std::string("the text detector model could not be loaded: ") + e.what();
        }
      }
    }
    fail(error_);
  }

 private:
  std::string path_;
  DetectorOptions options_;
  std::unique_ptr<TextDetector> detector_;
  std::string error_;
};

// Reads the pages of the input: the next page's image decoded on its own thread while one page
// is read (a 300 dpi PNG takes about 0.1 s, a quarter of a page's time on a GPU), and where the
// pages' time goes added up.
class PageReading {
 public:
  PageReading(DetectorSlot& detector, Predictor& predictor, PageReaderOptions options, int64_t max_image_pixels,
              bool pages_asked_for)
      : detector_(detector), predictor_(predictor), options_(options), max_pixels_(max_image_pixels),
        pages_asked_for_(pages_asked_for) {}

  // Starts decoding `item` if it is a page to decode.
  void decode_ahead(const InputItem& item) {
    if (!item.page || item.image || !item.error.empty()) return;
    next_name_ = item.name;
    next_ = std::async(std::launch::async, [path = item.path, max = max_pixels_] { return load_gray_image(path, max); });
  }

  // Reads a page item (throws what makes it fail); `decoded` runs once its image is in hand.
  Page read(InputItem& item, PageReadInfo& info, const std::function<void()>& decoded) {
    auto t = std::chrono::steady_clock::now();
    const auto lap = [&t](double& total) {
      const auto now = std::chrono::steady_clock::now();
      total += std::chrono::duration<double>(now - t).count();
      t = now;
    };
    GrayImage image = item.image                                      ? std::move(*item.image)
                      : next_.valid() && next_name_ == item.name ? next_.get()
                                                                      : load_gray_image(item.path, max_pixels_);
    lap(decode_s_);
    decoded();
    TextDetector* det = nullptr;
    try {
      det = &detector_.get();
    } catch (const std::exception& e) {
      fail(item.name, ": read as a page (", item.why, "), but ", e.what(),
           pages_asked_for_ ? "" : ", or --line to read it as one text line");
    }
    lap(detector_load_s_);
    Page page = read_page(image, item.name, *det, predictor_, options_, &info);
    add_times(info);
    return page;
  }

  // A page read elsewhere (a lane of --page-jobs): its steps' seconds, and its decoding's.
  void add_times(const PageReadInfo& info, double decode_s = 0) {
    decode_s_ += decode_s;
    times_.detect += info.detect, times_.cut_s += info.cut_s;
    times_.recognise_s += info.recognise_s, times_.layout_s += info.layout_s;
  }

  const PageReaderOptions& options() const { return options_; }

  // "decoding X s, ..., the rest Y s" for pages that took `total` seconds in all (with lanes,
  // the seconds of every lane added up).
  std::string times(double total) const {
    const PageReadInfo& t = times_;
    const double detect = t.detect.prepare + t.detect.forward + t.detect.boxes;
    const double rest = total - (decode_s_ + detector_load_s_ + detect + t.cut_s + t.recognise_s + t.layout_s);
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "decoding %.2f s, loading the detector %.2f s, detector %.2f s in %lld looks at a page (scaling "
                  "%.2f, model %.2f, outlines %.2f), cutting lines %.2f s, recogniser %.2f s, placing and ordering "
                  "%.2f s, the rest %.2f s",
                  decode_s_, detector_load_s_, detect, (long long)t.detect.looks, t.detect.prepare, t.detect.forward,
                  t.detect.boxes, t.cut_s, t.recognise_s, t.layout_s, std::max(0.0, rest));
    return buf;
  }

 private:
  DetectorSlot& detector_;
  Predictor& predictor_;
  PageReaderOptions options_;
  int64_t max_pixels_;
  bool pages_asked_for_;  // --page (no "or --line" in the detector's error)
  std::future<GrayImage> next_;
  std::string next_name_;
  // Seconds, all pages: decoding, loading the detector, read_page's steps; the rest of a page's
  // time is scoring, writing and the allocator.
  double decode_s_ = 0, detector_load_s_ = 0;
  PageReadInfo times_;
};

// Writes `text` to `path` through a temporary file renamed over it (no half-written document
// is ever seen under the name). Throws naming the path.
void write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(text.data(), (std::streamsize)text.size());
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      fail(path, ": cannot write it (", std::strerror(errno), ")");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail(path, ": cannot rename the temporary file (", ec.message(), ")");
  }
}

// Where pages go (and lines, when they are written as pages of one line): stdout as they come
// (text, jsonl, one PAGE document), stdout as one document at the end (hOCR, ALTO hold every
// page), or one file per input in --output-dir.
class PageWriter {
 public:
  PageWriter(PageFormat format, std::string dir, PageFormatOptions options, bool* stdout_used)
      : format_(format), dir_(std::move(dir)), options_(std::move(options)), stdout_used_(stdout_used) {}

  // A page of an input file (page_number from 1 of pages_in_file; 0 for a file of one page).
  // `extra` is added to a jsonl page's object (--eval's scores). Returns an error or "".
  std::string add(const Page& page, const std::string& path, int64_t page_number, int64_t pages_in_file,
                  const Json* extra = nullptr) {
    try {
      if (dir_.empty()) to_stdout(page, extra);
      else to_file(page, path, page_number, pages_in_file, extra);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }

  // hOCR and ALTO on stdout: the one document of every page.
  void finish() {
    if (dir_.empty() && (format_ == PageFormat::hocr || format_ == PageFormat::alto) && !held_.empty()) {
      const std::string doc = format_pages(held_, format_, options_);
      std::fwrite(doc.data(), 1, doc.size(), stdout);
      held_.clear();
    }
  }

 private:
  std::string document(const std::vector<Page>& pages, const Json* extra) const {
    if (format_ != PageFormat::jsonl || !extra) return format_pages(pages, format_, options_);
    std::string out;
    for (const Page& p : pages) {
      Json j = parse_json(format_pages({p}, format_, options_));
      for (const auto& [key, value] : extra->as_object()) j.set(key, value);
      out += j.dump() + "\n";
    }
    return out;
  }

  void to_stdout(const Page& page, const Json* extra) {
    switch (format_) {
      case PageFormat::hocr:
      case PageFormat::alto: held_.push_back(page); return;
      case PageFormat::page:
        OCRT_CHECK(!wrote_page_xml_, page.name, ": a PAGE XML document holds one page and one was written "
                   "already; give --output-dir DIR for one document per page");
        wrote_page_xml_ = true;
        break;
      case PageFormat::text:
        if (*stdout_used_) std::fputc('\f', stdout);  // pages apart, as format_pages writes them
        break;
      case PageFormat::jsonl: break;
    }
    const std::string doc = document({page}, extra);
    std::fwrite(doc.data(), 1, doc.size(), stdout);
    *stdout_used_ = true;
  }

  void to_file(const Page& page, const std::string& path, int64_t page_number, int64_t pages_in_file,
               const Json* extra) {
    const std::string stem = fs::path(path).stem().string();
    // PAGE XML holds one page: the pages of a multi-page file go to NAME-N.xml.
    if (format_ == PageFormat::page && page_number > 0) {
      write(stem + "-" + std::to_string(page_number), path, {page}, extra);
      return;
    }
    held_.push_back(page);
    if (page_number == 0 || page_number >= pages_in_file) {
      std::vector<Page> pages = std::move(held_);
      held_.clear();
      write(stem, path, pages, extra);
    }
  }

  void write(const std::string& stem, const std::string& input, const std::vector<Page>& pages, const Json* extra) {
    const std::string file = stem + page_format_extension(format_);
    const auto [it, fresh] = written_.emplace(file, input);
    OCRT_CHECK(fresh || it->second == input, input, ": its output ", (fs::path(dir_) / file).string(),
               " was written for ", it->second, " already (two inputs with the same file name); rename one");
    write_text_file((fs::path(dir_) / file).string(), document(pages, extra));
  }

  PageFormat format_;
  std::string dir_;
  PageFormatOptions options_;
  bool* stdout_used_;
  std::vector<Page> held_;
  bool wrote_page_xml_ = false;
  std::map<std::string, std::string> written_;  // file name -> the input it holds
};

// A recognised line as a page of one line, its outline the whole image.
Page line_as_page(const LineResult& r, int64_t width, int64_t height) {
  Page p;
  p.name = r.name;
  p.width = std::max<int64_t>(0, width), p.height = std::max<int64_t>(0, height);
  if (!r.ok()) {
    p.error = r.error;
    return p;
  }
  if (width <= 0 || height <= 0) {
    p.error = r.name + ": the image's size could not be read again to place its words";
    return p;
  }
  PageLine line = place_words(r, Quad::from_rect({0, 0, (double)width, (double)height}), (double)width);
  if (line.text.empty()) return p;
  PageBlock block;
  block.box = line.box;
  block.lines.push_back(std::move(line));
  p.blocks.push_back(std::move(block));
  return p;
}

// --eval on pages: each page's words against its truth file, and the totals.
class PageEvaluation {
 public:
  // `listed`: the first of the page's words not read right, as many as the report lists.
  void add(const std::string& name, const PageScore& s, const std::string& error, std::vector<WordMiss> listed) {
    rows_.push_back({name, s, error, std::move(listed)});
    total_ += s;
    failed_ += !error.empty();
  }
  void no_truth() { ++failed_, ++unscored_; }

  // The totals, each page's scores and the words of each page not read right that were listed
  // (at most `worst` a page).
  std::string report(int64_t worst) const {
    std::ostringstream os;
    char buf[512];
    os << "pages: " << rows_.size() + (size_t)unscored_ << " (" << failed_ << " failed";
    if (unscored_) os << ", " << unscored_ << " without truth, not scored";
    os << ")\n";
    std::snprintf(buf, sizeof buf,
                  "words: %lld, right %lld (%.2f%%), wrong %lld (joined %lld, case only %lld), missed %lld, extra %lld\n",
                  (long long)total_.truth_words, (long long)total_.right, 100 * total_.word_accuracy(),
                  (long long)total_.wrong, (long long)total_.joined, (long long)total_.case_only,
                  (long long)total_.missed, (long long)total_.extra);
    os << buf;
    std::snprintf(buf, sizeof buf, "CER: %.2f%% (distance %lld / %lld characters, reading order included)\n",
                  100 * total_.cer(), (long long)total_.distance, (long long)total_.truth_chars);
    os << buf;
    if (!rows_.empty()) os << "per page:\n";
    for (const Row& r : rows_) {
      std::snprintf(buf, sizeof buf, "words %lld, right %.2f%%, missed %lld, extra %lld, CER %.2f%%",
                    (long long)r.score.truth_words, 100 * r.score.word_accuracy(), (long long)r.score.missed,
                    (long long)r.score.extra, 100 * r.score.cer());
      os << "  " << r.name << ": " << buf;
      if (!r.error.empty()) os << " (failed; its error is on stderr)";
      os << "\n";
    }
    bool any = false;
    for (const Row& r : rows_) {
      if (r.listed.empty()) continue;
      if (!any) os << "words not read right (truth, then what was read there; at most " << worst << " a page):\n";
      any = true;
      os << "  " << r.name << ":\n";
      for (const WordMiss& m : r.listed) {
        os << "    " << word_miss_kind_name(m.kind) << ": \"" << m.truth << "\"";
        if (m.kind != WordMissKind::missed) os << " read as \"" << m.read << "\"";
        os << "\n";
      }
      // Every truth word not read right is wrong or missed.
      if (const int64_t more = r.score.wrong + r.score.missed - (int64_t)r.listed.size(); more > 0)
        os << "    (" << more << " more)\n";
    }
    return os.str();
  }

  Json summary() const {
    Json j = total_.to_json();
    j.set("pages", (int64_t)rows_.size() + unscored_);
    j.set("failed", failed_);
    j.set("without_truth", unscored_);
    return j;
  }

  bool empty() const { return rows_.empty() && unscored_ == 0; }

 private:
  struct Row {
    std::string name;
    PageScore score;
    std::string error;
    std::vector<WordMiss> listed;
  };
  std::vector<Row> rows_;
  PageScore total_;
  int64_t failed_ = 0, unscored_ = 0;
};

void add_stats(RunStats& to, const RunStats& from) {
  to.lines += from.lines, to.failed += from.failed, to.seconds += from.seconds;
  to.cpu_path = from.cpu_path, to.precision = from.precision, to.decoding = from.decoding;
  if (to.workers.size() < from.workers.size()) to.workers.resize(from.workers.size());
  for (size_t i = 0; i < from.workers.size(); ++i) {
    to.workers[i].device = from.workers[i].device;
    to.workers[i].lines += from.workers[i].lines;
    to.workers[i].batches += from.workers[i].batches;
    to.workers[i].batches_on_all_threads += from.workers[i].batches_on_all_threads;
    to.workers[i].busy_seconds += from.workers[i].busy_seconds;
  }
}

// One run of ocrt-infer over its inputs: text lines batched through the predictor, pages
// through the page reader, each result written (and with --eval scored) as it comes.
class InferRun {
 public:
  // Checks the output paths and loads the models: a run that cannot start throws here.
  explicit InferRun(Args args);
  // Reads every input in order. Throws what stops the whole run (not what fails one input).
  void read_all();
  // --eval: the report (or jsonl summaries) on stdout; --logits-out.
  void finish_outputs();
  // The summaries on stderr; the exit status (1 when any line or page failed).
  int summarise();

 private:
  // A line's result, whichever way it came (the predictor, or an item that failed before it).
  struct LineMeta {
    std::optional<std::string> truth;
    std::string path;
    int64_t page_number = 0, pages_in_file = 1;
    int64_t width = -1, height = -1;  // known for images decoded here (TIFF pages)
  };

  // The next input item in pending_ (false at the end).
  bool pull();
  void write_line(LineResult&& r, LineMeta& m);
  // A run of lines through the predictor, up to the next page or failed item.
  void read_lines();
  // A line that failed before the predictor (a TIFF page that does not decode).
  void fail_line_early(InputItem&& line);
  // `decoded` runs once the page's image is in hand (it starts decoding the next page).
  void read_one_page(InputItem& item, const std::function<void()>& decoded);
  // --page-jobs above 1: the lanes (made at the first page, once the detector has loaded);
  // false when pages are read one at a time.
  bool use_lanes();
  // The pages from pending_ on, up to the next line, read side by side in the lanes and
  // finished in input order.
  void read_pages_in_lanes();
  // What every page ends with, however it was read: the counts, --eval's scores, the output.
  void finish_page(const InputItem& item, const Page& page, const PageReadInfo& info);
  // --eval: the page's scores against its truth file (nullopt when it has none: counted).
  std::optional<Json> score_read_page(const InputItem& item, const Page& page);
  void write_page(const InputItem& item, const Page& page, const std::optional<Json>& scores);

  Args args_;
  std::unique_ptr<InputReader> reader_;
  std::unique_ptr<Predictor> predictor_;
  std::unique_ptr<DetectorSlot> detector_;
  std::unique_ptr<PageReading> page_reading_;
  DetectorOptions detector_options_;
  int threads_ = 1, page_jobs_ = 1;
  bool lanes_tried_ = false;
  std::unique_ptr<PageLanes> lanes_;  // after predictor_: destroyed first (Eigen's thread counts)
  double lane_seconds_ = 0;           // the pages' seconds in the lanes, added up
  std::unique_ptr<ItemReader> items_;
  std::optional<InputItem> pending_;

  std::unique_ptr<Evaluation> evaluation_;
  PageEvaluation page_evaluation_;
  std::vector<std::pair<std::string, Tensor>> logits_;
  std::unique_ptr<PageWriter> writer_;
  bool jsonl_ = false;
  // Lines are written as pages of one line for the XML formats and into --output-dir.
  bool lines_as_pages_ = false;
  // With --eval, stdout holds the evaluation: per-line (and per-page) objects in jsonl, a
  // report otherwise; documents go to --output-dir only.
  bool write_documents_ = true;
  bool stdout_used_ = false;

  RunStats stats_;
  // Lines that failed before the predictor (counted as read and failed), and lines read whose
  // document could not be written (counted as failed).
  int64_t line_items_ = 0, lines_failed_early_ = 0, lines_unwritten_ = 0, skipped_without_truth_ = 0;
  int64_t pages_ = 0, pages_failed_ = 0, page_lines_ = 0, page_lines_failed_ = 0, page_lines_dropped_ = 0;
  int64_t page_ink_lines_ = 0, page_ink_lines_kept_ = 0;  // PageReadInfo::ink_lines, ink_lines_kept
  double page_seconds_ = 0;
};

InferRun::InferRun(Args args) : args_(std::move(args)) {
  // Every output path is checked before the first line is read, not after the whole run.
  if (!args_.logits_out.empty()) check_output_path("--logits-out", args_.logits_out);
  if (!args_.output_dir.empty()) {
    std::error_code ec;
    fs::create_directories(args_.output_dir, ec);
    OCRT_CHECK(fs::is_directory(args_.output_dir, ec), "--output-dir ", args_.output_dir, ": cannot make the folder",
               ec ? " (" + ec.message() + ")" : std::string());
    check_output_path("--output-dir", (fs::path(args_.output_dir) / "probe").string());
  }
  // The thread that reads pages runs the detector's CPU ops (the predictor's workers set
  // their own counts).
  if (args_.options.threads > 0) set_num_threads(args_.options.threads);
  reader_ = std::make_unique<InputReader>(args_.eval, nullptr, args_.kind != InputKind::line);
  for (const auto& [is_list, path] : args_.inputs) {
    if (is_list) reader_->add_list(path);
    else reader_->add(path);
  }
  if (args_.weights.empty()) {
    bool cpus = true;
    for (const Device& d : args_.options.devices) cpus = cpus && d.is_cpu();
    const bool int8_cpus = cpus && cpu::int8_gemm_simd();
    const std::string& asked = args_.options.precision;
    if (asked == "int8" && !int8_cpus)
      fail("--precision int8 runs on CPUs with an int8 kernel (AVX2 or better) only: ",
           cpus ? "this CPU has none" : "a GPU is among --devices");
    const bool auto_int8 = asked == "auto" && int8_cpus && shipped_int8_validated("crnn-en");
    args_.weights = default_weights(asked == "int8" || (int8_cpus && !args_.precision_given) || auto_int8);
  }
  resolve_decoder(args_);
  predictor_ = std::make_unique<Predictor>(args_.weights, args_.options);
  // Loading held the file's tensors beside the model's: that transient is no working set of the
  // reading, so the trimming cache's bound starts again from here (runtime/cpu_allocator.h).
  cpu_reset_peak();
  detector_options_ = {};
  detector_options_.device = args_.options.devices[0];
  detector_options_.max_side = args_.max_side;
  detector_options_.threshold = args_.det_threshold;
  detector_options_.box_threshold = args_.box_threshold;
  detector_options_.small_lines = args_.small_lines;
  detector_options_.descreen = args_.descreen;
  detector_ = std::make_unique<DetectorSlot>(args_.det_weights, detector_options_);
  threads_ = args_.options.threads > 0 ? args_.options.threads : default_num_threads();
  page_jobs_ = page_lanes_for(args_.page_jobs, args_.options.devices, threads_, predictor_->model_bytes());

  evaluation_ = std::make_unique<Evaluation>(&predictor_->charset());
  jsonl_ = args_.output.name == "jsonl";
  lines_as_pages_ = args_.output.page_document() || !args_.output_dir.empty();
  write_documents_ = !args_.eval || !args_.output_dir.empty();
  PageFormatOptions page_options;
  page_options.char_boxes = args_.format.positions;
  if (args_.output.page)
    writer_ = std::make_unique<PageWriter>(*args_.output.page, args_.output_dir, page_options, &stdout_used_);
  PageReaderOptions reader_options;
  reader_options.rotation = args_.rotation;
  reader_options.end_reach = args_.end_reach;
  reader_options.side_reach = args_.side_reach;
  reader_options.erase_rules = args_.erase_rules;
  reader_options.erase_column_rules = args_.erase_column_rules;
  reader_options.descreen_lines = args_.descreen_lines;
  reader_options.sideways_check = args_.sideways_check;
  reader_options.min_confidence = args_.min_confidence;
  reader_options.missed_ink = args_.missed_ink;
  reader_options.small_caps_drop = args_.small_caps_drop;
  reader_options.space_gap = args_.space_gap;
  page_reading_ = std::make_unique<PageReading>(*detector_, *predictor_, reader_options, args_.options.max_image_pixels,
                                                args_.kind == InputKind::page);
}

bool InferRun::pull() {
  if (pending_) return true;
  InputItem item;
  if (!items_->next(item)) return false;
  pending_ = std::move(item);
  return true;
}

void InferRun::read_all() {
  items_ = std::make_unique<ItemReader>(*reader_, args_.kind, args_.options.max_image_pixels);
  while (pull()) {
    InputItem& item = *pending_;
    if (item.page && use_lanes()) {
      read_pages_in_lanes();
    } else if (item.page) {
      InputItem page = std::move(item);
      pending_.reset();
      read_one_page(page, [&] {
        if (pull()) page_reading_->decode_ahead(*pending_);
      });
    } else if (!item.error.empty() || (args_.eval && !item.truth)) {
      // A line that failed before the predictor, or one without truth under --eval (left out,
      // as a folder's unlabelled images are).
      InputItem line = std::move(item);
      pending_.reset();
      if (line.error.empty()) ++skipped_without_truth_;
      else fail_line_early(std::move(line));
    } else {
      read_lines();
    }
  }
  if (writer_ && write_documents_) writer_->finish();
  for (const std::string& note : reader_->take_notes()) std::fprintf(stderr, "ocrt-infer: note: %s\n", note.c_str());
}

void InferRun::write_line(LineResult&& r, LineMeta& m) {
  std::optional<Scored> scored;
  if (args_.eval && m.truth) scored = evaluation_->add(r, *m.truth);  // a malformed label line has none
  // text and the XML documents have no place for a line's error; tsv and jsonl carry it.
  if (!r.ok() && (args_.output.name == "text" || args_.output.page_document()))
    std::fprintf(stderr, "ocrt-infer: %s\n", r.error.c_str());
  if (lines_as_pages_) {
    if (write_documents_) {
      if (m.width < 0 && r.ok()) image_file_size(m.path, m.width, m.height);
      const std::string error = writer_->add(line_as_page(r, m.width, m.height), m.path, m.page_number, m.pages_in_file);
      if (!error.empty()) std::fprintf(stderr, "ocrt-infer: %s\n", error.c_str()), ++lines_unwritten_;
    }
    if (args_.eval && jsonl_) {
      const std::string out = format_line(r, args_.format, &*scored);
      std::fwrite(out.data(), 1, out.size(), stdout);
    }
  } else if (!args_.eval || jsonl_) {
    const std::string out = format_line(r, args_.format, scored ? &*scored : nullptr);
    std::fwrite(out.data(), 1, out.size(), stdout);
    stdout_used_ = true;
  }
  if (r.ok() && r.logits.defined()) logits_.emplace_back(r.name, std::move(r.logits));
}

void InferRun::fail_line_early(InputItem&& line) {
  ++line_items_, ++lines_failed_early_;
  LineResult r;
  r.name = line.name;
  r.error = line.error;
  LineMeta m{line.truth, line.path, line.page_number, line.pages_in_file};
  write_line(std::move(r), m);
}

void InferRun::read_lines() {
  std::vector<LineMeta> meta;
  bool ended = false;
  const RunStats run = predictor_->run(
      [&](LineInput& in) {
        while (!ended) {
          if (!pull() || pending_->page || !pending_->error.empty()) {
            ended = true;
            break;
          }
          InputItem line = std::move(*pending_);
          pending_.reset();
          if (args_.eval && !line.truth) {
            ++skipped_without_truth_;
            continue;
          }
          LineMeta m{line.truth, line.path, line.page_number, line.pages_in_file};
          if (line.image) m.width = line.image->width, m.height = line.image->height;
          meta.push_back(std::move(m));
          in = {line.name, std::move(line.image)};
          return true;
        }
        return false;
      },
      [&](int64_t index, LineResult&& r) {
        LineMeta& m = meta[(size_t)index];
        write_line(std::move(r), m);
        m.truth.reset();
      });
  line_items_ += run.lines;
  add_stats(stats_, run);
}

void InferRun::read_one_page(InputItem& item, const std::function<void()>& decoded) {
  const auto t0 = std::chrono::steady_clock::now();
  ++pages_;
  Page page;
  page.name = item.name;
  PageReadInfo info;
  if (!item.error.empty()) {
    page.error = item.error;
  } else {
    try {
      page = page_reading_->read(item, info, decoded);
    } catch (const std::exception& e) {
      page.error = e.what();
    }
    // The next page's sizes are all new (its image, the detector's maps, its lines): blocks
    // kept for this page's sizes would only add to the next one's peak (a folder of four 300
    // dpi pages: 424 MiB peak RSS with them kept, against 376 for its largest page alone).
    cpu_empty_cache();
  }
  page_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  finish_page(item, page, info);
}

void InferRun::finish_page(const InputItem& item, const Page& page, const PageReadInfo& info) {
  page_lines_ += info.lines, page_lines_failed_ += info.failed_lines, page_lines_dropped_ += info.dropped_lines;
  page_ink_lines_ += info.ink_lines, page_ink_lines_kept_ += info.ink_lines_kept;
  if (!page.error.empty()) ++pages_failed_, std::fprintf(stderr, "ocrt-infer: %s\n", page.error.c_str());
  const std::optional<Json> scores = args_.eval ? score_read_page(item, page) : std::nullopt;
  write_page(item, page, scores);
}

bool InferRun::use_lanes() {
  if (page_jobs_ <= 1) return false;
  if (!lanes_tried_) {
    lanes_tried_ = true;
    try {
      detector_->get();
    } catch (const std::exception&) {
      return false;  // no detector: each page gets the error, one at a time
    }
    lanes_ = std::make_unique<PageLanes>(
        page_jobs_, threads_,
        PageLaneSetup{args_.weights, args_.options, detector_->path(), detector_options_, args_.options.devices});
  }
  return lanes_ != nullptr;
}

namespace {

// A page as a lane read it.
struct LaneRead {
  Page page;
  PageReadInfo info;
  double decode_s = 0, seconds = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void InferRun::read_pages_in_lanes() {
  struct Flight {
    InputItem item;
    std::future<LaneRead> read;
  };
  std::deque<Flight> flight;
  // A page waiting for each lane besides the one it reads, so that no lane idles while the
  // oldest page is scored and written.
  const size_t most = 2 * (size_t)lanes_->lanes();
  const auto t0 = std::chrono::steady_clock::now();
  const auto finish_oldest = [&] {
    Flight f = std::move(flight.front());
    flight.pop_front();
    LaneRead r = f.read.get();
    lane_seconds_ += r.seconds;
    page_reading_->add_times(r.info, r.decode_s);
    // Unlike one page at a time (read_one_page), the allocator's cache is not emptied here: the
    // other lanes are in the middle of their pages, and emptying it dropped their blocks too,
    // to be mapped and zeroed afresh (its bound and trimming keep it to the working set:
    // runtime/cpu_allocator.h). 12 real scans with crnn-s int8 on 2 Zen 3 cores: 1.1 GB of
    // blocks mapped or grown -> 0.5 GB, system time 1.7-2.3 -> 1.1-1.7 s, wall -6% (digital
    // pages -2.5%), peak RSS 279-301 -> 277-337 MiB (bench/results/pages.md, 2026-12-01).
    finish_page(f.item, r.page, r.info);
  };
  const auto ready = [](const Flight& f) {
    return f.read.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  };
  while (pull() && pending_->page) {
    Flight f{std::move(*pending_), {}};
    pending_.reset();
    ++pages_;
    if (!f.item.error.empty()) {
      std::promise<LaneRead> failed;
      LaneRead r;
      r.page.name = f.item.name;
      r.page.error = f.item.error;
      failed.set_value(std::move(r));
      f.read = failed.get_future();
    } else {
      auto task = std::make_shared<std::packaged_task<LaneRead(PageLanes::Lane&)>>(
          [name = f.item.name, path = f.item.path, image = std::move(f.item.image),
           max = args_.options.max_image_pixels, options = page_reading_->options()](PageLanes::Lane& lane) mutable {
            LaneRead r;
            r.page.name = name;
            const auto t = std::chrono::steady_clock::now();
            try {
              const GrayImage page = image ? std::move(*image) : load_gray_image(path, max);
              r.decode_s = seconds_since(t);
              r.page = read_page(page, name, lane.detector, lane.predictor, options, &r.info);
            } catch (const std::exception& e) {
              r.page.error = e.what();
            }
            r.seconds = seconds_since(t);
            return r;
          });
      f.read = task->get_future();
      lanes_->post([task](PageLanes::Lane& lane) { (*task)(lane); });
    }
    flight.push_back(std::move(f));
    while (!flight.empty() && (flight.size() >= most || ready(flight.front()))) finish_oldest();
  }
  while (!flight.empty()) finish_oldest();
  page_seconds_ += seconds_since(t0);
}

std::optional<Json> InferRun::score_read_page(const InputItem& item, const Page& page) {
  const std::string truth_file = page_truth_file(item.path, item.page_number);
  try {
    OCRT_CHECK(!truth_file.empty(), item.name, ": --eval: no truth file beside the page (",
               fs::path(item.path).replace_extension().string(),
               item.page_number > 0 ? "-" + std::to_string(item.page_number) : std::string(), ".json, .hocr or .xml)");
    std::vector<WordMiss> misses;
    const PageScore s = score_page(page, read_page_truth(truth_file), &misses);
    if ((int64_t)misses.size() > args_.worst) misses.resize((size_t)args_.worst);  // the first --worst are listed
    Json eval = s.to_json();
    Json listed = Json::array();
    for (const WordMiss& m : misses) listed.push_back(m.to_json());
    eval.set("misses", std::move(listed));
    page_evaluation_.add(item.name, s, page.error, std::move(misses));
    Json scores = Json::object();
    scores.set("truth", truth_file);
    scores.set("eval", std::move(eval));
    return scores;
  } catch (const std::exception& e) {
    page_evaluation_.no_truth();
    if (page.error.empty()) ++pages_failed_;
    std::fprintf(stderr, "ocrt-infer: %s\n", e.what());
    return std::nullopt;
  }
}

void InferRun::write_page(const InputItem& item, const Page& page, const std::optional<Json>& scores) {
  // Under --eval with jsonl and no --output-dir, stdout gets each page's object with its scores.
  const bool scored_object = args_.eval && jsonl_ && args_.output_dir.empty();
  if (write_documents_ || scored_object) {
    const std::string error = writer_->add(page, item.path, item.page_number, item.pages_in_file,
                                           scored_object && scores ? &*scores : nullptr);
    if (!error.empty()) {
      std::fprintf(stderr, "ocrt-infer: %s\n", error.c_str());
      if (page.error.empty()) ++pages_failed_;
    }
  }
  if (args_.eval && jsonl_ && !args_.output_dir.empty()) {
    // The documents went to files: stdout gets the page's scores.
    Json j = Json::object();
    j.set("path", item.name);
    if (scores)
      for (const auto& [key, value] : scores->as_object()) j.set(key, value);
    if (!page.error.empty()) j.set("error", page.error);
    std::printf("%s\n", j.dump().c_str());
  }
}

void InferRun::finish_outputs() {
  if (args_.eval) {
    const bool lines = evaluation_->lines() > 0 || page_evaluation_.empty();
    if (jsonl_) {
      if (lines) std::printf("%s\n", Json::object().set("summary", evaluation_->summary()).dump().c_str());
      if (!page_evaluation_.empty())
        std::printf("%s\n", Json::object().set("page_summary", page_evaluation_.summary()).dump().c_str());
    } else {
      if (lines) std::fputs(evaluation_->report(args_.worst).c_str(), stdout);
      if (!page_evaluation_.empty()) {
        if (evaluation_->lines() > 0) std::fputs("\n", stdout);
        std::fputs(page_evaluation_.report(args_.worst).c_str(), stdout);
      }
    }
    if (const int64_t skipped = reader_->skipped_without_truth() + skipped_without_truth_)
      std::fprintf(stderr, "ocrt-infer: %lld images without a .gt.txt (or a page truth file) were left out of --eval\n",
                   (long long)skipped);
  }
  std::fflush(stdout);
  if (!args_.logits_out.empty()) write_logits_file(args_.logits_out, logits_, predictor_->charset());
}

int InferRun::summarise() {
  stats_.lines += lines_failed_early_;
  stats_.failed += lines_failed_early_ + lines_unwritten_;
  if (line_items_ > 0 || pages_ == 0) std::fprintf(stderr, "ocrt-infer: %s\n", stats_.summary().c_str());
  if (pages_ > 0) {
    std::fprintf(stderr, "ocrt-infer: %lld pages (%lld failed), %lld text lines on them (%lld not read, %lld left out "
                 "below confidence %.2f; %lld of %lld read at ink no detected line covered), in %.2f s, %.2f s a page\n",
                 (long long)pages_, (long long)pages_failed_, (long long)page_lines_, (long long)page_lines_failed_,
                 (long long)page_lines_dropped_, args_.min_confidence, (long long)page_ink_lines_kept_,
                 (long long)page_ink_lines_, page_seconds_, page_seconds_ / (double)pages_);
    if (lanes_)
      std::fprintf(stderr, "ocrt-infer: pages' time in %d lanes of %d threads, added up: %s\n", lanes_->lanes(),
                   lanes_->threads_per_lane(), page_reading_->times(lane_seconds_).c_str());
    else
      std::fprintf(stderr, "ocrt-infer: pages' time: %s\n", page_reading_->times(page_seconds_).c_str());
    if (const std::string d = detector_->describe(); !d.empty()) std::fprintf(stderr, "ocrt-infer: detector %s\n", d.c_str());
    std::fprintf(stderr, "ocrt-infer: recogniser %s (%s), decoding %s\n", predictor_->model_path().c_str(),
                 predictor_->precision().c_str(), predictor_->decoding().c_str());
  }
  return stats_.failed || pages_failed_ ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Batches of lines of ever-other widths: keep RSS near the largest batch's working set
  // (runtime/cpu_allocator.h).
  cpu_set_cache_trim(true);
  // Decoded pages and their crops, of ever-other sizes, through malloc: keep glibc from holding
  // them in its heaps after free (runtime/cpu_allocator.h).
  cpu_fix_malloc_mmap_threshold();
  std::unique_ptr<InferRun> run;
  try {
    run = std::make_unique<InferRun>(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt-infer: %s\n", e.what());
    return 2;
  }
  try {
    run->read_all();
    run->finish_outputs();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ocrt-infer: %s\n", e.what());
    return 2;
  }
  return run->summarise();
}
