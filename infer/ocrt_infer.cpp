// ocrt-infer: recognises text-line images with a model file, in batches, on one or several
// devices, and prints text, TSV or JSON lines in input order (docs/cli.md has the reference).
// The work is done by infer/predictor.h; this file parses flags, finds the shipped model, reads
// the inputs (infer/inputs.h) and writes the results (infer/report.h).
//
// Exit status: 0 every line was recognised; 1 some lines failed (each has its own error);
// 2 nothing could run (a bad flag, model file or device, an unreadable input source).
#include <cerrno>
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

const char* kUsage = R"(usage: ocrt-infer [options] INPUT...

Recognises text-line images and prints what they say, one output line per input line, in
input order.

Inputs (any mix, read in order)
  IMAGE                  an image file (PNG, JPEG, BMP, TGA, GIF, PGM/PPM)
  LABELS.txt|.tsv        a label file: path<TAB>text per line, paths relative to its folder
  FOLDER                 every image in it (sorted), with name.gt.txt as its text when present
  -                      image paths from stdin, one per line
  --list FILE            image paths from FILE, one per line (relative to the working directory)

Model
  --weights FILE         model file (default: weights/crnn-en.safetensors, the shipped model)
  --arch A               crnn, crnn-s or svtr-lite: architecture of a weights-only file
                         (checked against a model file's own)
  --charset FILE         charset of a weights-only file (one character per line)

Devices and batching
  --device cpu|cuda:N    run on one device (default: cpu)
  --devices LIST         one worker per device, e.g. cuda:0,cuda:1 or cuda:0,cpu or cpu,cpu
  --threads N            CPU threads for decoding images and for CPU workers (default: all)
  --batch N              lines per batch, grouped by width (32)
  --precision fp32|bf16|auto
                         CPU matrix products and convolutions in float32 (the default) or
                         bf16 (operands rounded to bf16, sums in float32: products about twice
                         as fast on CPUs with AVX512_BF16, whole lines about 1.3x; the same speed
                         as fp32 elsewhere); auto: bf16 where the CPU has bf16 instructions,
                         else fp32. The summary says which
                         path and precision ran. OCRT_CPU_ISA=avx2|avx512|avx512bf16|amx forces
                         an instruction-set path (docs/ops/gemm.md)
  --conv fast|exact      CPU 3x3 convolutions through Winograd (fast, the default: about 1e-5
                         relative rounding) or im2col (exact: about 1e-7); docs/ops/conv.md
  --max-image-pixels N   read an image only when its header says it has at most N pixels
                         (16777216, e.g. 16384 x 1024; a text line is far smaller); larger
                         ones get an error of their own before anything is allocated
  --plain-preprocess     resize and pad only, as training does: no blank-line check, no
                         inversion of light-on-dark lines, no contrast stretch of faint ones

Decoding and output
  --decoder greedy|beam  CTC decoding (greedy)
  --beam-width N         prefix beam width (10)
  --lm FILE              character language model for --decoder beam (built by ocrt-lm,
                         e.g. weights/lm-en.clm)
  --lm-weight A          weight of the LM's log-probability per character (0.3)
  --lm-bonus B           score added per character with --lm (1)
  --format text|tsv|jsonl  text: the text; tsv: path, text, confidence, error;
                         jsonl: one JSON object per line (default: text)
  --positions            tsv/jsonl: each character's x position (and CTC frame in jsonl)
  --eval                 compare with the true text (label files and .gt.txt folders): prints
                         CER, line accuracy and the worst lines; with --format jsonl, per-line
                         results and a last {"summary": ...} line
  --worst N              lines listed by --eval (10)
  --logits-out FILE      write each line's T x C logits to FILE (safetensors), under its path
  --help                 this text

Exit status: 0 all lines read; 1 some lines failed (errors per line); 2 nothing could run.
A summary (lines, lines/s, each device's share) goes to stderr.
)";

struct Args {
  std::string weights;
  PredictorOptions options;
  std::string device, devices;
  FormatOptions format;
  bool eval = false;
  int64_t worst = 10;
  std::string logits_out;
  std::vector<std::pair<bool, std::string>> inputs;  // (is a --list file, path), in order
};

int64_t parse_int(const std::string& flag, const std::string& v, int64_t min) {
  const int64_t x = cli::parse_int(flag, v);
  OCRT_CHECK(x >= min, flag, ": must be >= ", min, ", got ", x);
  return x;
}

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
  OCRT_CHECK(!out.empty(), "--devices: empty device list, expected e.g. cpu or cuda:0,cuda:1");
  return out;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      OCRT_CHECK(i + 1 < argc, arg, ": expects a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--weights") a.weights = value();
    else if (arg == "--arch") a.options.arch = value();
    else if (arg == "--charset") a.options.charset_path = value();
    else if (arg == "--device") a.device = value();
    else if (arg == "--devices") a.devices = value();
    else if (arg == "--threads") a.options.threads = (int)parse_int(arg, value(), 1);
    else if (arg == "--batch") a.options.batch = parse_int(arg, value(), 1);
    else if (arg == "--precision") {
      a.options.precision = value();
      OCRT_CHECK(a.options.precision == "fp32" || a.options.precision == "bf16" || a.options.precision == "auto",
                 "--precision: expected fp32, bf16 or auto, got '", a.options.precision, "'");
    }
    else if (arg == "--conv") {
      const std::string v = value();
      OCRT_CHECK(v == "fast" || v == "exact", "--conv: expected fast or exact, got '", v, "'");
      set_conv_mode(parse_conv_mode(v));
    }
    else if (arg == "--decoder") a.options.decoder = parse_decoder(value());
    else if (arg == "--beam-width") a.options.beam_width = parse_int(arg, value(), 1);
    else if (arg == "--lm") a.options.lm_path = value();
    else if (arg == "--lm-weight") a.options.lm_weight = cli::parse_double(arg, value());
    else if (arg == "--lm-bonus") a.options.lm_bonus = cli::parse_double(arg, value());
    else if (arg == "--format") a.format.format = parse_format(value());
    else if (arg == "--positions") a.format.positions = true;
    else if (arg == "--eval") a.eval = true;
    else if (arg == "--worst") a.worst = parse_int(arg, value(), 0);
    else if (arg == "--logits-out") a.logits_out = value();
    else if (arg == "--max-image-pixels") a.options.max_image_pixels = parse_int(arg, value(), 1);
    else if (arg == "--plain-preprocess") a.options.normalize.enabled = false;
    else if (arg == "--list") a.inputs.emplace_back(true, value());
    else if (arg.size() > 1 && arg[0] == '-' && arg != "-") fail("unknown option '", arg, "' (see ocrt-infer --help)");
    else a.inputs.emplace_back(false, arg);
  }
  OCRT_CHECK(a.device.empty() || a.devices.empty(), "give --device or --devices, not both");
  if (!a.device.empty()) {
    a.options.devices = {Device::parse(a.device)};
    validate(a.options.devices[0]);  // names the devices that exist when this one does not
  } else if (!a.devices.empty()) {
    a.options.devices = parse_workers(a.devices);
  }
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
