// Where inference time goes, layer by layer, on the CPU: a recogniser (crnn, crnn-s) on a batch of
// lines, or the page detector (dbnet) on a page-sized input, each layer timed on its own (eval
// mode, no gradients), with its output shape and its share of the whole forward pass.
//
//   build/bench_layers --model weights/crnn-en.safetensors [--batch 32] [--width 400]
//   build/bench_layers --model weights/det-en.safetensors [--height 1280] [--width 992]
//   build/bench_layers --model weights/det-en.safetensors --page PAGE.png   (also a real page, as ocrt-infer reads it)
//   (both: [--reps 5] [--threads N])
//
// Each layer's time is the median of --reps runs of that layer alone on the previous layer's
// output. The inputs are random: the cost of these layers does not depend on the pixels.
#include <algorithm>
#include <cstdlib>
#include <cxxabi.h>
#include <typeinfo>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "models/crnn.h"
#include "models/dbnet.h"
#include "models/model_check.h"
#include "models/model_file.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "ops/random.h"
#include "runtime/autograd.h"
#include "runtime/cli.h"
#include "runtime/cpu_allocator.h"
#include "runtime/image.h"
#include "runtime/precision.h"
#include "runtime/threading.h"
#include "timing.h"

using namespace ocrt;
using namespace ocrt::nn;

namespace {


// "Conv2d" for an ocrt::nn::Conv2d.
std::string type_of(const Module& m) {
  int status = 0;
  char* d = abi::__cxa_demangle(typeid(m).name(), nullptr, nullptr, &status);
  std::string s = status == 0 && d ? d : typeid(m).name();
  std::free(d);
  const size_t colon = s.rfind("::");
  return colon == std::string::npos ? s : s.substr(colon + 2);
}

struct Row {
  std::string name;
  std::string shape;
  double ms = 0;
};

// Runs f reps times, returns the median milliseconds and the last result.
Tensor timed(int64_t reps, const std::function<Tensor()>& f, double& ms) {
  std::vector<double> t;
  Tensor out;
  for (int64_t r = 0; r < reps; ++r) {
    const double t0 = bench::now_seconds();
    out = f();
    t.push_back(1e3 * (bench::now_seconds() - t0));
  }
  ms = bench::median(t);
  return out;
}

// Times each child of a Sequential on its own, in order; returns the last output.
Tensor walk(const std::string& prefix, Sequential& seq, Tensor x, int64_t reps, std::vector<Row>& rows) {
  for (int64_t i = 0; i < seq.size(); ++i) {
    Module& m = seq[i];
    Row row;
    row.name = prefix + "." + std::to_string(i) + " " + type_of(m);
    x = timed(reps, [&] { return m.forward(x); }, row.ms);
    row.shape = shape_str(x.shape());
    rows.push_back(row);
  }
  return x;
}

void print(const std::vector<Row>& rows) {
  double total = 0;
  for (const Row& r : rows) total += r.ms;
  std::printf("%-36s %-22s %10s %7s\n", "layer", "output", "ms", "share");
  for (const Row& r : rows)
    std::printf("%-36s %-22s %10.3f %6.1f%%\n", r.name.c_str(), r.shape.c_str(), r.ms, 100.0 * r.ms / total);
  std::printf("%-36s %-22s %10.3f\n", "sum of layers", "", total);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path = "weights/crnn-en.safetensors";
  int64_t batch = 32, width = 0, height = 1280, reps = 5, threads = 0, side = 1280;
  ConvMode conv = ConvMode::fast;
  std::string precision = "fp32", page_path;
  cli::Parser p("bench_layers", "usage: bench_layers [options]: times each layer of a model's forward pass on the CPU\n");
  p.add(cli::text("--model", "FILE", model_path, "a recogniser or detector model file (weights/crnn-en.safetensors)"));
  p.add(cli::integer("--batch", "N", batch, 1, 4096, "lines in the recogniser's batch (32)"));
  p.add(cli::integer("--width", "W", width, 4, 1 << 16, "line width (400), or the detector input's width (992)"));
  p.add(cli::integer("--height", "H", height, 32, 1 << 16, "the detector input's height (1280)"));
  p.add(cli::text("--page", "FILE", page_path,
                  "the detector: also read this page image as ocrt-infer --page does (scaled to\n"
                  "--side on its longer side), with the allocator's cache kept and emptied between runs,\n"
                  "and the most tensor memory one run held"));
  p.add(cli::integer("--side", "N", side, 32, 1 << 16, "--page: its longer side before the detector (1280)"));
  p.add(cli::integer("--reps", "N", reps, 1, 1000, "runs of each layer; the median is printed (5)"));
  p.add(cli::integer("--threads", "N", threads, 0, 4096, "CPU threads (0: all)"));
  p.add(cli::choice("--conv", "fast|exact", conv, parse_conv_mode,
                    "3x3 convolutions through Winograd (fast, the default) or im2col (exact)"));
  p.add(cli::text("--precision", "fp32|bf16", precision,
                  "the CPU's matrix products in float32 (the default) or bf16 (an int8 model file\n"
                  "runs its int8 layers either way)"));
  OCRT_CHECK(p.parse(argc, argv).empty(), "bench_layers takes no arguments besides its flags");
  set_conv_mode(conv);
  PrecisionScope precision_scope(parse_precision(precision));
  if (threads > 0) set_num_threads((int)threads);

  ModelFile file = load_model_file(model_path);
  OCRT_CHECK(file.info.has_value(), model_path, ": a model file with its metadata is needed");
  const ModelInfo& info = *file.info;
  NoGradGuard no_grad;
  Generator gen(1);
  std::vector<Row> rows;
  std::printf("model %s (%s), %d threads, %s products\n", model_path.c_str(), info.arch.c_str(), num_threads(),
              precision.c_str());
  if (info.arch == "dbnet") {
    if (width == 0) width = 992;
    OCRT_CHECK(height % DBNet::kSizeMultiple == 0 && width % DBNet::kSizeMultiple == 0,
               "--height and --width must be multiples of 32 for the detector");
    auto det = build_detector(info.arch, info.config, file.weights, model_path);
    det->eval();
    Tensor x = uniform({1, 1, height, width}, -1.0, 1.0, gen);
    std::printf("input 1 x 1 x %ld x %ld\n", (long)height, (long)width);
    double whole = 0;
    timed(reps, [&] { return det->forward(x); }, whole);
    Tensor y = walk("stem", *det->stem, x, reps, rows);
    std::array<Tensor, 4> C;
    for (int i = 0; i < 4; ++i)
      C[i] = y = walk("stage" + std::to_string(i), dynamic_cast<Sequential&>(*det->stages->children()[(size_t)i].second), y, reps, rows);
    std::array<Tensor, 4> P;
    auto conv_at = [&](ModuleList& list, int i) -> Module& { return *list.children()[(size_t)i].second; };
    for (int i = 3; i >= 0; --i) {
      Row row{"lateral." + std::to_string(i) + " (+ up2 add)", "", 0};
      P[i] = timed(reps, [&] {
        Tensor l = conv_at(*det->lateral, i).forward(C[i]);
        return i == 3 ? l : add(l, upsample_nearest2d(P[i + 1], {2, 2}));
      }, row.ms);
      row.shape = shape_str(P[i].shape());
      rows.push_back(row);
    }
    std::vector<Tensor> parts;
    for (int i = 3; i >= 0; --i) {
      Row row{"smooth." + std::to_string(i) + " (+ up)", "", 0};
      const int64_t up = int64_t(1) << i;
      parts.push_back(timed(reps, [&] {
        Tensor s = conv_at(*det->smooth, i).forward(P[i]);
        return up > 1 ? upsample_nearest2d(s, {up, up}) : s;
      }, row.ms));
      row.shape = shape_str(parts.back().shape());
      rows.push_back(row);
    }
    Row cat{"concat", "", 0};
    Tensor F = timed(reps, [&] { return concat(parts, 1); }, cat.ms);
    cat.shape = shape_str(F.shape());
    rows.push_back(cat);
    walk("prob_head", *det->prob_head, F, reps, rows);
    print(rows);
    std::printf("whole forward (banded head): %.3f ms\n", whole);
    if (!page_path.empty()) {
      // The same model on a real page, as the page reader runs it: does the page's content or
      // a cold allocator (ocrt-infer empties its cache after every page) change its time?
      const GrayImage page = load_gray_image(page_path);
      for (const bool cold : {false, true}) {
        std::vector<double> prepare, forward, boxes;
        size_t most = 0;
        for (int64_t r = 0; r < reps; ++r) {
          if (cold) cpu_empty_cache();
          cpu_reset_peak();
          const size_t before = cpu_memory_stats().allocated;
          const DetectedPage d = detect_text_lines(*det, page, side, false);
          most = std::max(most, cpu_memory_stats().peak - before);
          prepare.push_back(1e3 * d.prepare_s), forward.push_back(1e3 * d.forward_s), boxes.push_back(1e3 * d.boxes_s);
        }
        for (auto* v : {&prepare, &forward, &boxes}) std::sort(v->begin(), v->end());
        std::printf("page %s (%ldx%ld) at %ld, allocator cache %s: scaling %.3f ms, model %.3f ms, outlines %.3f ms "
                    "(medians); tensors %.1f MiB at most\n",
                    page_path.c_str(), (long)page.width, (long)page.height, (long)side,
                    cold ? "emptied before each run" : "kept", prepare[prepare.size() / 2], forward[forward.size() / 2],
                    boxes[boxes.size() / 2], (double)most / 1048576.0);
      }
    }
    return 0;
  }
  if (width == 0) width = 400;
  auto rec = build_recognizer(info.arch, info.config, file.weights, model_path);
  auto* crnn = dynamic_cast<CRNN*>(rec.get());
  OCRT_CHECK(crnn, "bench_layers times crnn and crnn-s recognisers (and the dbnet detector), got ", info.arch);
  crnn->eval();
  Tensor x = uniform({batch, 1, 32, width}, -1.0, 1.0, gen);
  std::vector<int64_t> widths((size_t)batch, width);
  std::printf("input %ld x 1 x 32 x %ld\n", (long)batch, (long)width);
  double whole = 0;
  timed(reps, [&] { return crnn->forward(x, widths); }, whole);
  Tensor y = walk("cnn", *crnn->cnn, x, reps, rows);
  // (N, C, 1, T) -> (T, N, C), as CRNN::forward does.
  Row seq{"to sequence", "", 0};
  Tensor s = timed(reps, [&] { return y.squeeze(2).permute({2, 0, 1}).contiguous(); }, seq.ms);
  seq.shape = shape_str(s.shape());
  rows.push_back(seq);
  Row rnn{"rnn (LSTM)", "", 0};
  Tensor r = timed(reps, [&] { return crnn->rnn->forward(s); }, rnn.ms);
  rnn.shape = shape_str(r.shape());
  rows.push_back(rnn);
  Row fc{"fc", "", 0};
  Tensor o = timed(reps, [&] { return crnn->fc->forward(r); }, fc.ms);
  fc.shape = shape_str(o.shape());
  rows.push_back(fc);
  print(rows);
  std::printf("whole forward: %.3f ms (%.1f lines/s)\n", whole, 1e3 * (double)batch / whole);
  return 0;
}
