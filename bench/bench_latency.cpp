// Single-line latency: one line, batch 1, read again and again through the Predictor, as a
// service that answers one request at a time would. The image is decoded once before timing;
// each timed call goes from its 8-bit pixels in memory to the decoded text (the same work as
// bench/peer_infer.py --latency on the peers' side: normalise, pad, model, greedy decoding).
//
//   build/bench_latency IMAGE [--weights FILE] [--threads 2] [--reps 200] [--warmup 20]
//                       [--precision fp32|bf16|auto]
//
// Prints one JSON object: p50, p90, p99, mean and min in milliseconds, the text, the settings.
// bench/latency.sh runs it beside ONNX Runtime and records the figures.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "infer/predictor.h"
#include "runtime/cli.h"
#include "runtime/error.h"
#include "runtime/image.h"
#include "runtime/json.h"

using namespace ocrt;
using namespace ocrt::infer;

int main(int argc, char** argv) {
  try {
    std::string weights = "weights/crnn-en.safetensors";
    int64_t threads = 2, reps = 200, warmup = 20;
    std::string precision = "fp32";
    cli::Parser p("bench_latency", "usage: bench_latency IMAGE [options]\n");
    p.add(cli::text("--weights", "FILE", weights, "the recogniser (weights/crnn-en.safetensors)"));
    p.add(cli::integer("--threads", "N", threads, 1, 4096, "CPU threads (2)"));
    p.add(cli::integer("--reps", "N", reps, 1, 1000000, "timed calls (200)"));
    p.add(cli::integer("--warmup", "N", warmup, 0, 1000000, "calls before timing (20)"));
    p.add(cli::text("--precision", "fp32|bf16|auto", precision, "the Predictor's precision (fp32)"));
    const std::vector<std::string> rest = p.parse(argc, argv);
    OCRT_CHECK(rest.size() == 1, "give one line image");
    const GrayImage image = load_gray_image(rest[0]);

    PredictorOptions o;
    o.threads = (int)threads;
    o.batch = 1;
    o.precision = precision;
    Predictor predictor(weights, o);
    std::vector<double> ms;
    std::string text;
    for (int64_t i = 0; i < warmup + reps; ++i) {
      std::vector<LineInput> in(1);
      in[0].name = rest[0];
      in[0].image = image;  // a copy per call, outside the timed part
      const auto t0 = std::chrono::steady_clock::now();
      const std::vector<LineResult> r = predictor.recognize(in);
      const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      OCRT_CHECK(r.size() == 1 && r[0].ok(), rest[0], ": ", r.empty() ? std::string("no result") : r[0].error);
      text = r[0].text;
      if (i >= warmup) ms.push_back(t);
    }
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    // The nearest-rank percentile: the smallest value with at least q of the calls at or below it.
    auto pct = [&](double q) { return sorted[(size_t)std::max<int64_t>(0, (int64_t)std::ceil(q * (double)sorted.size()) - 1)]; };
    double mean = 0;
    for (double t : ms) mean += t / (double)ms.size();
    Json j = Json::object();
    j.set("engine", "ocrt");
    j.set("image", rest[0]);
    j.set("width", (double)image.width);
    j.set("height", (double)image.height);
    j.set("weights", weights);
    j.set("threads", (double)threads);
    j.set("reps", (double)reps);
    j.set("precision", predictor.precision());
    j.set("p50_ms", pct(0.50));
    j.set("p90_ms", pct(0.90));
    j.set("p99_ms", pct(0.99));
    j.set("mean_ms", mean);
    j.set("min_ms", sorted.front());
    j.set("text", text);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_latency: %s\n", e.what());
    return 1;
  }
}
