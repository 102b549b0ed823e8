// ocrt-infer: recognises text-line images with a model file, in batches, on one or several
// devices, and prints text, TSV or JSON lines in input order (docs/cli.md has the reference).
// The work is done by infer/predictor.h; this file parses flags, finds the shipped model, reads
// the inputs (infer/inputs.h) and writes the results (infer/report.h).
//
// Exit status: 0 every line was recognised; 1 some lines failed (each has its own error);
// 2 nothing could run (a bad flag, model file or device, an unreadable input source).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "infer/inputs.h"
#include "infer/predictor.h"
#include "infer/report.h"
#include "ops/conv.h"
#include "runtime/cpu_allocator.h"
#include "runtime/cli.h"
#include "runtime/error.h"

using namespace ocrt;
using namespace ocrt::infer;
namespace fs = std::filesystem;

namespace {

// The largest --max-image-pixels: 2^32 pixels, 4 GB of gray at one byte a pixel.
constexpr int64_t kMaxImagePixelsFlag = int64_t(1) << 32;

struct Args {
  std::string weights;
  PredictorOptions options;
  std::vector<Device> device, devices;  // --device (one) and --devices
  ConvMode conv = ConvMode::fast;
  FormatOptions format;
  bool eval = false;
  int64_t worst = 10;
  std::string logits_out;
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
  OCRT_CHECK(v == "fp32" || v == "bf16" || v == "auto", "expected fp32, bf16 or auto, got '", v, "'");
  return v;
}

cli::Parser infer_flags(Args& a) {
  using cli::Range;
  constexpr double kInf = HUGE_VAL;
  PredictorOptions& o = a.options;
  cli::Parser p("ocrt-infer", R"(usage: ocrt-infer [options] INPUT...

Recognises text-line images and prints what they say, one output line per input line, in
input order.

Inputs (any mix, read in order)
  IMAGE                  an image file (PNG, JPEG, BMP, TGA, GIF, PGM/PPM)
  LABELS.txt|.tsv        a label file: path<TAB>text per line, paths relative to its folder
  FOLDER                 every image in it (sorted), with name.gt.txt as its text when present
  -                      image paths from stdin, one per line)");
  p.arguments([&a](const std::string& path) { a.inputs.emplace_back(false, path); });
  p.add({"--list", "FILE", "image paths from FILE, one per line (relative to the working directory)",
         [&a](const std::string& path) { a.inputs.emplace_back(true, path); }});

  p.note("\nModel");
  p.add(cli::text("--weights", "FILE", a.weights,
                  "model file (default: weights/crnn-en.safetensors, the shipped model)"));
  p.add(cli::text("--arch", "A", o.arch,
                  "crnn, crnn-s or svtr-lite: architecture of a weights-only file\n"
                  "(checked against a model file's own)"));
  p.add(cli::text("--charset", "FILE", o.charset_path, "charset of a weights-only file (one character per line)"));

  p.note("\nDevices and batching");
  p.add({"--device", "cpu|cuda:N", "run on one device (default: cpu)", [&a](const std::string& v) {
           a.device = {Device::parse(v)};
           validate(a.device[0]);  // names the devices that exist when this one does not
         }});
  p.add({"--devices", "LIST", "one worker per device, e.g. cuda:0,cuda:1 or cuda:0,cpu or cpu,cpu",
         [&a](const std::string& v) { a.devices = parse_workers(v); }});
  p.add(cli::integer("--threads", "N", o.threads, 1, 4096,
                     "CPU threads for decoding images and for CPU workers (default: all)"));
  p.add(cli::integer("--batch", "N", o.batch, 1, 65536, "lines per batch, grouped by width (32)"));
  p.add(cli::choice("--precision", "fp32|bf16|auto", o.precision, parse_precision,
                    "CPU matrix products and convolutions in float32 (the default) or\n"
                    "bf16 (operands rounded to bf16, sums in float32: products about twice\n"
                    "as fast on CPUs with AVX512_BF16, whole lines about 1.3x; the same speed\n"
                    "as fp32 elsewhere); auto: bf16 where the CPU has bf16 instructions,\n"
                    "else fp32. The summary says which\n"
                    "path and precision ran. OCRT_CPU_ISA=avx2|avx512|avx512bf16|amx forces\n"
                    "an instruction-set path (docs/ops/gemm.md)"));
  p.add(cli::choice("--conv", "fast|exact", a.conv, parse_conv_mode,
                    "CPU 3x3 convolutions through Winograd (fast, the default: about 1e-5\n"
                    "relative rounding) or im2col (exact: about 1e-7); docs/ops/conv.md"));
  p.add(cli::integer("--max-image-pixels", "N", o.max_image_pixels, 1, kMaxImagePixelsFlag,
                     "read an image only when its header says it has at most N pixels\n"
                     "(16777216, e.g. 16384 x 1024; a text line is far smaller); larger\n"
                     "ones get an error of their own before anything is allocated"));
  p.add(cli::toggle("--plain-preprocess", o.normalize.enabled, false,
                    "resize and pad only, as training does: no blank-line check, no\n"
                    "inversion of light-on-dark lines, no contrast stretch of faint ones"));

  p.note("\nDecoding and output");
  p.add(cli::choice("--decoder", "greedy|beam", o.decoder, parse_decoder, "CTC decoding (greedy)"));
  p.add(cli::integer("--beam-width", "N", o.beam_width, 1, 10000, "prefix beam width (10)"));
  p.add(cli::text("--lm", "FILE", o.lm_path,
                  "character language model for --decoder beam (built by ocrt-lm,\n"
                  "e.g. weights/lm-en.clm)"));
  p.add(cli::real("--lm-weight", "A", o.lm_weight, Range{0, kInf, false, true},
                  "weight of the LM's log-probability per character (0.3)"));
  p.add(cli::real("--lm-bonus", "B", o.lm_bonus, Range{-kInf, kInf, true, true}, "score added per character with --lm (1)"));
  p.add(cli::choice("--format", "text|tsv|jsonl", a.format.format, parse_format,
                    "text: the text; tsv: path, text, confidence, error;\n"
                    "jsonl: one JSON object per line (default: text)"));
  p.add(cli::toggle("--positions", a.format.positions, true,
                    "tsv/jsonl: each character's x position (and CTC frame in jsonl)"));
  p.add(cli::toggle("--eval", a.eval, true,
                    "compare with the true text (label files and .gt.txt folders): prints\n"
                    "CER, line accuracy and the worst lines; with --format jsonl, per-line\n"
                    "results and a last {\"summary\": ...} line"));
  p.add(cli::integer("--worst", "N", a.worst, 0, 1000000, "lines listed by --eval (10)"));
  p.add(cli::text("--logits-out", "FILE", a.logits_out,
                  "write each line's T x C logits to FILE (safetensors), under its path"));
  p.note("  --help                 this text\n\n"
         "Exit status: 0 all lines read; 1 some lines failed (errors per line); 2 nothing could run.\n"
         "A summary (lines, lines/s, each device's share) goes to stderr.");
  return p;
}

Args parse_args(int argc, char** argv) {
  Args a;
  infer_flags(a).parse(argc, argv);
  set_conv_mode(a.conv);
  OCRT_CHECK(a.device.empty() || a.devices.empty(), "give --device or --devices, not both");
  if (!a.device.empty()) a.options.devices = a.device;
  if (!a.devices.empty()) a.options.devices = a.devices;
  a.options.keep_logits = !a.logits_out.empty();
  OCRT_CHECK(!a.inputs.empty(),
             "no input lines: give image paths, a label file, a folder, --list FILE or '-' for stdin (see --help)");
  return a;
}

// The shipped model: weights/crnn-en.safetensors next to the binary or up to three folders
// above it (a build folder inside the source tree), in an install prefix's share/ocrt, or in
// the source tree this binary was built from.
std::string default_weights() {
  const fs::path rel = fs::path("weights") / "crnn-en.safetensors";
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
  fail("no --weights given and the shipped model ", rel.string(), " was not found; looked in:", list,
       "\npass --weights FILE");
}

}  // namespace

int main(int argc, char** argv) {
  // Batches of lines of ever-other widths: keep RSS near the largest batch's working set
  // (runtime/cpu_allocator.h).
  cpu_set_cache_trim(true);
  Args args;
  std::unique_ptr<Predictor> predictor;
  std::unique_ptr<InputReader> reader;
  try {
    args = parse_args(argc, argv);
    // Every output path is checked before the first line is read, not after the whole run.
    if (!args.logits_out.empty()) check_output_path("--logits-out", args.logits_out);
    reader = std::make_unique<InputReader>(args.eval);
    for (const auto& [is_list, path] : args.inputs) {
      if (is_list) reader->add_list(path);
      else reader->add(path);
    }
    if (args.weights.empty()) args.weights = default_weights();
    predictor = std::make_unique<Predictor>(args.weights, args.options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt-infer: %s\n", e.what());
    return 2;
  }

  Evaluation evaluation;
  std::vector<std::optional<std::string>> truths;  // by line index, for --eval
  std::vector<std::pair<std::string, Tensor>> logits;
  const bool per_line_output = !args.eval || args.format.format == Format::jsonl;
  RunStats stats;
  try {
    stats = predictor->run(
        [&](LineInput& in) {
          InputLine line;
          if (!reader->next(line)) return false;
          in = {line.path, std::nullopt};
          truths.push_back(std::move(line.truth));
          return true;
        },
        [&](int64_t index, LineResult&& r) {
          std::optional<Scored> scored;
          if (args.eval) scored = evaluation.add(r, *truths[(size_t)index]);
          truths[(size_t)index].reset();
          if (!r.ok() && args.format.format == Format::text) std::fprintf(stderr, "ocrt-infer: %s\n", r.error.c_str());
          if (per_line_output) {
            const std::string out = format_line(r, args.format, scored ? &*scored : nullptr);
            std::fwrite(out.data(), 1, out.size(), stdout);
          }
          if (r.ok() && r.logits.defined()) logits.emplace_back(r.name, std::move(r.logits));
        });
    if (args.eval) {
      if (args.format.format == Format::jsonl) {
        Json j = Json::object();
        j.set("summary", evaluation.summary());
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::fputs(evaluation.report(args.worst).c_str(), stdout);
      }
      if (reader->skipped_without_truth())
        std::fprintf(stderr, "ocrt-infer: %lld images without a .gt.txt were left out of --eval\n",
                     (long long)reader->skipped_without_truth());
    }
    std::fflush(stdout);
    if (!args.logits_out.empty()) write_logits_file(args.logits_out, logits, predictor->charset());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ocrt-infer: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "ocrt-infer: %s\n", stats.summary().c_str());
  return stats.failed ? 1 : 0;
}
