// ocrt-quantize: writes an int8 model file from a float one and a few hundred calibration lines,
// or a few dozen calibration pages for a text detector (models/int8.h has the scheme,
// docs/int8.md the figures). The calibration lines run through the float model exactly as
// ocrt-infer reads lines (the same predictor and preprocessing), the pages through the detector
// as ocrt-infer detects a page's lines (infer/detector.h); the input of every layer that int8
// computes is recorded, and its scale set from a percentile of what was seen.
//
// Exit status: 0 the file was written; 2 a bad flag, an unreadable model or no usable line.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "infer/detector.h"
#include "infer/inputs.h"
#include "infer/model_loader.h"
#include "infer/predictor.h"
#include "models/dbnet.h"
#include "models/int8.h"
#include "models/model_check.h"
#include "models/model_file.h"
#include "runtime/cli.h"
#include "runtime/cpu/int8_gemm.h"
#include "runtime/error.h"
#include "runtime/image.h"
#include "runtime/threading.h"

using namespace ocrt;

namespace {

struct Args {
  std::string weights, out;
  double percentile = 99.999;
  int threads = 0;
  int64_t batch = 32, max_lines = 0;
  std::vector<std::pair<bool, std::string>> inputs;  // (is a --list file, path)
};

cli::Parser flags(Args& a) {
  cli::Parser p("ocrt-quantize", R"(usage: ocrt-quantize --weights FLOAT_MODEL --out INT8_MODEL [options] LINES...
       ocrt-quantize --weights FLOAT_DETECTOR --out INT8_DETECTOR [options] PAGES...

Writes an int8 model file for CPU inference: per-output-channel int8 weights, and per-tensor input
scales measured on calibration inputs like those it will read: a few hundred text-line images for
a recogniser, a few dozen pages for a text detector. ocrt-infer --weights INT8_MODEL then reads
lines in int8 on the CPU, and ocrt-infer --det-weights INT8_DETECTOR finds a page's lines in int8.

Calibration lines: image files, label files (path<TAB>text), folders, --list FILE, as ocrt-infer.
Calibration pages: image files (a TIFF's first page), folders, --list FILE.)");
  p.arguments([&a](const std::string& path) { a.inputs.emplace_back(false, path); });
  p.add({"--list", "FILE", "image paths from FILE, one per line",
         [&a](const std::string& path) { a.inputs.emplace_back(true, path); }});
  p.add(cli::text("--weights", "FILE", a.weights, "the float model file to quantize (a recogniser or a text detector)"));
  p.add(cli::text("--out", "FILE", a.out, "where to write the int8 model file (written atomically)"));
  p.add(cli::real("--percentile", "P", a.percentile, cli::Range{50, 100},
                  "a layer's input range is this percentile of the |values| it saw (99.999);\n"
                  "100 takes the largest value"));
  p.add(cli::integer("--max-lines", "N", a.max_lines, 0, 1000000000,
                     "use at most N calibration lines or pages (0: all)"));
  p.add(cli::integer("--batch", "N", a.batch, 1, 4096, "lines per batch (32)"));
  p.add(cli::integer("--threads", "N", a.threads, 0, 4096, "CPU threads (0: all)"));
  p.note("  --help                 this text");
  return p;
}

// Writes the int8 file: the float file's metadata, its training record gaining "quantization"
// (how, from what, on how many calibration lines or pages); then prints the int8 weights'
// input scales and the file's size against the float one's.
void save_int8(const Args& a, const nn::StateDict& sd, nn::ModelInfo info, int64_t read, const std::string& what) {
  Json q = Json::object();
  q.set("scheme", "int8: per-output-channel weights, per-tensor inputs (models/int8.h)");
  q.set("from", std::filesystem::path(a.weights).filename().string());
  q.set("calibration_" + what, read);
  q.set("percentile", a.percentile);
  info.training.set("quantization", q);
  nn::save_model_file(a.out, sd, info);

  std::printf("%-32s %-10s %s\n", "int8 weight", "input", "input scale (range)");
  for (const auto& [name, t] : sd) {
    if (t.dtype() != DType::i8) continue;
    const std::vector<float> in = sd.at(name + ".int8_input").to_vector<float>();
    const bool is_signed = in[1] == 1;
    std::printf("%-32s %-10s %.6g (%.4g)\n", name.c_str(), is_signed ? "signed" : "unsigned", in[0],
                in[0] * (is_signed ? 63 : 127));
  }
  const auto before = std::filesystem::file_size(a.weights), after = std::filesystem::file_size(a.out);
  std::printf("%lld calibration %s; %s: %.2f MB (%s: %.2f MB, %.2fx smaller); int8 kernel: %s\n", (long long)read,
              what.c_str(), a.out.c_str(), (double)after / 1e6, a.weights.c_str(), (double)before / 1e6,
              (double)before / (double)after, cpu::int8_gemm_kernel_name());
}

// A text detector: the calibration pages are detected as ocrt-infer detects a page's lines
// (TextDetector::detect: the page scaled to 1280 pixels, and the second look at small print),
// with every convolution of both heads observed (models/dbnet.cpp runs them unbanded while
// calibrating). A page that cannot be read is skipped with a message, as a line is.
void quantize_detector(const Args& a, nn::ModelFile file) {
  OCRT_CHECK(!nn::is_int8_state_dict(file.weights), a.weights, " is already an int8 model file");
  const nn::ModelInfo info_in = *file.info;
  set_num_threads(a.threads > 0 ? a.threads : default_num_threads());
  infer::InputReader reader(/*need_truth=*/false, nullptr, /*pages=*/true);
  for (const auto& [is_list, path] : a.inputs) is_list ? reader.add_list(path) : reader.add(path);
  nn::Int8Calibration calibration(a.percentile);
  std::shared_ptr<nn::DBNet> model = nn::build_detector(info_in.arch, info_in.config, file.weights, a.weights);
  int64_t read = 0, seen = 0;
  {
    infer::TextDetector detector(model);
    infer::InputLine page;
    while ((a.max_lines == 0 || seen < a.max_lines) && reader.next(page)) {
      if (!page.error.empty()) continue;
      ++seen;
      try {
        const std::vector<nn::TextBox> lines = detector.detect(load_gray_image(page.path));
        ++read;
        std::fprintf(stderr, "ocrt-quantize: %s: %zu lines\n", page.path.c_str(), lines.size());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ocrt-quantize: skipped %s: %s\n", page.path.c_str(), e.what());
      }
    }
  }
  OCRT_CHECK(read > 0, seen ? "none of the calibration pages could be read" : "no calibration page was given");
  const nn::StateDict sd = nn::int8_state_dict(*model, calibration);
  save_int8(a, sd, info_in, read, "pages");
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    flags(a).parse(argc, argv);
    OCRT_CHECK(!a.weights.empty(), "--weights FILE is required");
    OCRT_CHECK(!a.out.empty(), "--out FILE is required");
    OCRT_CHECK(!a.inputs.empty(), "no calibration lines: give image files, a label file, a folder or --list FILE");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt-quantize: %s\n", e.what());
    return 2;
  }
  try {
    const std::filesystem::path dir = std::filesystem::path(a.out).parent_path();
    OCRT_CHECK(dir.empty() || std::filesystem::is_directory(dir), "--out ", a.out, ": the folder ", dir.string(),
               " does not exist");
    nn::ModelFile file = nn::load_model_file(a.weights);  // read once, checked as ocrt-infer does
    if (file.info && nn::is_detector_arch(file.info->arch)) {
      quantize_detector(a, std::move(file));
      return 0;
    }
    infer::LoadedModel loaded = infer::load_model(std::move(file));
    OCRT_CHECK(!nn::is_int8_state_dict(loaded.weights), a.weights, " is already an int8 model file");

    nn::Int8Calibration calibration(a.percentile);
    infer::InputReader reader;
    for (const auto& [is_list, path] : a.inputs) is_list ? reader.add_list(path) : reader.add(path);
    std::vector<std::string> paths;
    infer::InputLine line;
    while ((a.max_lines == 0 || (int64_t)paths.size() < a.max_lines) && reader.next(line))
      if (line.error.empty()) paths.push_back(line.path);
    OCRT_CHECK(!paths.empty(), "no calibration line could be read");

    infer::PredictorOptions o;
    o.threads = a.threads;
    o.batch = a.batch;
    int64_t read = 0;
    {
      infer::Predictor predictor(a.weights, o);  // its models register with the calibration
      for (const infer::LineResult& r : predictor.recognize(paths)) {
        if (r.ok()) ++read;
        else std::fprintf(stderr, "ocrt-quantize: skipped %s: %s\n", r.name.c_str(), r.error.c_str());
      }
    }
    OCRT_CHECK(read > 0, "none of the ", paths.size(), " calibration lines could be read");

    std::shared_ptr<nn::Recognizer> model = infer::build_model(loaded);
    const nn::StateDict sd = nn::int8_state_dict(*model, calibration);
    save_int8(a, sd, loaded.info(), read, "lines");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt-quantize: %s\n", e.what());
    return 2;
  }
  return 0;
}
