// The recogniser on lines cut from pages: what page reading will get once a detector finds the
// lines exactly. Reads a folder written by `ocrt-synth --pages` (NNNNNN.png + NNNNNN.json),
// cuts every line out along its true outline (infer/page.h crop_line, the same cut the page
// pipeline makes), recognises the crops with a model in width-sorted batches, and prints CER
// and line accuracy per layout and in total, with lines/s of recognition.
//
//   bench_page_lines DIR [--model FILE] [--threads N] [--batch N]
//
// Lines whose truth has characters outside the model's charset are counted as they are (the
// model cannot read them). bench/results/pages.md records runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "infer/page.h"
#include "infer/predictor.h"
#include "infer/report.h"
#include "runtime/cli.h"
#include "runtime/error.h"
#include "runtime/image.h"
#include "runtime/json.h"

using namespace ocrt;
using namespace ocrt::infer;
namespace fs = std::filesystem;

namespace {

struct Cut {
  std::string layout, truth;
  LineInput input;
};

Quad quad_of(const Json& points) {
  Quad q;
  for (size_t i = 0; i < 4; ++i) q.corners[i] = {points[i][0].as_number(), points[i][1].as_number()};
  return q;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string dir, model = "weights/crnn-en.safetensors";
    int64_t threads = 0, batch = 32;
    cli::Parser p("bench_page_lines", "usage: bench_page_lines DIR [options]\n");
    p.add(cli::text("--model", "FILE", model, "the recogniser (weights/crnn-en.safetensors)"));
    p.add(cli::integer("--threads", "N", threads, 0, 4096, "CPU threads (0: all)"));
    p.add(cli::integer("--batch", "N", batch, 1, 65536, "lines a batch (32)"));
    const std::vector<std::string> rest = p.parse(argc, argv);
    OCRT_CHECK(rest.size() == 1, "give one folder written by ocrt-synth --pages");
    dir = rest[0];

    std::vector<Cut> cuts;
    std::vector<fs::path> truths;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") truths.push_back(e.path());
    std::sort(truths.begin(), truths.end());
    OCRT_CHECK(!truths.empty(), dir, ": no NNNNNN.json page truth files");
    for (const fs::path& t : truths) {
      std::ifstream in(t);
      const Json j = parse_json(std::string(std::istreambuf_iterator<char>(in), {}));
      const GrayImage page = load_gray_image(fs::path(t).replace_extension(".png").string());
      const Json& lines = j.at("lines");
      for (size_t i = 0; i < lines.size(); ++i) {
        Cut c;
        c.layout = j.at("layout").as_string();
        c.truth = lines[i].at("text").as_string();
        c.input.name = t.stem().string() + "#" + std::to_string(i);
        c.input.image = crop_line(page, quad_of(lines[i].at("points")), 0, 255);
        cuts.push_back(std::move(c));
      }
    }

    PredictorOptions o;
    o.batch = batch;
    if (threads > 0) o.threads = (int)threads;
    Predictor predictor(model, o);
    std::vector<LineInput> inputs;
    for (const Cut& c : cuts) inputs.push_back(c.input);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<LineResult> results = predictor.recognize(inputs);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    std::map<std::string, Evaluation> by_layout;
    Evaluation all;
    for (size_t i = 0; i < cuts.size(); ++i) {
      by_layout[cuts[i].layout].add(results[i], cuts[i].truth);
      all.add(results[i], cuts[i].truth);
    }
    std::printf("%zu pages, %zu lines cut along their true outlines; model %s\n", truths.size(), cuts.size(),
                model.c_str());
    std::printf("%-10s %7s %8s %10s\n", "layout", "lines", "CER", "line acc.");
    for (const auto& [layout, e] : by_layout)
      std::printf("%-10s %7lld %7.2f%% %9.1f%%\n", layout.c_str(), (long long)e.lines(), 100 * e.cer(),
                  100 * e.line_accuracy());
    std::printf("%-10s %7lld %7.2f%% %9.1f%%\n", "all", (long long)all.lines(), 100 * all.cer(), 100 * all.line_accuracy());
    std::printf("recognition: %.1f lines/s (%.2f s)\n", (double)cuts.size() / seconds, seconds);
    std::printf("\n%s", all.report(10).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_page_lines: %s\n", e.what());
    return 1;
  }
}
