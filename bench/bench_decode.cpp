// CTC decoding alone: the lines' logits are computed once (the Predictor with keep_logits), then
// each line is decoded again and again on one thread, greedily and by the beam with the
// language model, as ocrt-infer's default decoder does (beam 10, the shipped LM, alpha 0.3,
// beta 1, uniform share 0.01). What a page's "lines in doubt" cost in the beam, without the
// model's time and the VM's noise around it.
//
//   build/bench_decode LINES... [--weights FILE] [--lm FILE] [--reps 5] [--threads 2]
//
// LINES: line images, or folders of them. Prints one JSON object: per line, microseconds of
// greedy decoding and of the beam (all lines, and the lines in doubt at 0.2 alone; each the
// fastest of the reps), the frames,
// and a checksum of the beam's labels (the same before and after a change that must not change
// what is read).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "timing.h"
#include "infer/predictor.h"
#include "models/char_lm.h"
#include "models/ctc_decode.h"
#include "ops/reduce.h"
#include "runtime/cli.h"
#include "runtime/error.h"
#include "runtime/json.h"

using namespace ocrt;
using namespace ocrt::infer;

namespace {

std::vector<std::string> image_paths(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    if (!std::filesystem::is_directory(a)) {
      out.push_back(a);
      continue;
    }
    std::vector<std::string> here;
    for (const auto& e : std::filesystem::directory_iterator(a)) {
      const std::string ext = e.path().extension().string();
      if (ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".pgm") here.push_back(e.path().string());
    }
    std::sort(here.begin(), here.end());
    out.insert(out.end(), here.begin(), here.end());
  }
  return out;
}

// Whether a line's (T, C) logits have a frame where the runner-up class reaches `doubt`
// (the Predictor's beam_doubt rule).
bool in_doubt(const Tensor& logits, double doubt) {
  const Tensor lp = log_softmax(logits, -1).contiguous();
  const int64_t T = lp.size(0), C = lp.size(1);
  const float* q = lp.data<float>();
  const float floor = (float)std::log(doubt);
  for (int64_t t = 0; t < T; ++t) {
    float first = -INFINITY, second = -INFINITY;
    for (int64_t c = 0; c < C; ++c)
      if (q[t * C + c] > first) second = first, first = q[t * C + c];
      else if (q[t * C + c] > second) second = q[t * C + c];
    if (second >= floor) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string weights = "weights/crnn-s-en-int8.safetensors", lm_path = "weights/lm-en.clm";
    int64_t reps = 5, threads = 2;
    cli::Parser p("bench_decode", "usage: bench_decode LINES... [options]\n");
    p.add(cli::text("--weights", "FILE", weights, "the recogniser (weights/crnn-s-en-int8.safetensors)"));
    p.add(cli::text("--lm", "FILE", lm_path, "the language model (weights/lm-en.clm)"));
    p.add(cli::integer("--reps", "N", reps, 1, 1000000, "times each line is decoded (5)"));
    p.add(cli::integer("--threads", "N", threads, 1, 4096, "threads for the model's pass (2); decoding runs on one"));
    const std::vector<std::string> paths = image_paths(p.parse(argc, argv));
    OCRT_CHECK(!paths.empty(), "give line images or folders of them");

    PredictorOptions o;
    o.threads = (int)threads;
    o.keep_logits = true;
    if (weights.find("int8") != std::string::npos) o.precision = "int8";
    Predictor predictor(weights, o);
    std::vector<LineInput> in(paths.size());
    for (size_t i = 0; i < paths.size(); ++i) in[i].name = paths[i];
    const std::vector<LineResult> results = predictor.recognize(in);
    std::vector<Tensor> logits;  // each (T, 1, C)
    std::vector<char> doubt;
    for (const LineResult& r : results) {
      if (!r.ok() || !r.logits.defined() || r.logits.size(0) == 0) continue;
      logits.push_back(r.logits.unsqueeze(1).contiguous());
      doubt.push_back(in_doubt(r.logits, 0.2));
    }
    OCRT_CHECK(!logits.empty(), "no line was read");

    const nn::CharLM lm = nn::CharLM::load(lm_path);
    nn::BeamOptions bo;
    bo.lm = &lm;
    bo.lm_ids = nn::lm_ids_for(lm, predictor.charset().chars());
    bo.lm_weight = 0.3, bo.lm_bonus = 1.0, bo.lm_uniform = 0.01;

    int64_t frames = 0, doubt_lines = 0;
    for (size_t i = 0; i < logits.size(); ++i) frames += logits[i].size(0), doubt_lines += doubt[i];
    // Each figure is the fastest of the reps (a pass over all lines), the one least disturbed
    // by whatever else the machine ran.
    double greedy_s = 1e300, beam_s = 1e300, beam_doubt_s = 1e300;
    uint64_t checksum = 1469598103934665603ull;  // FNV-1a over the beam's labels
    for (int64_t rep = 0; rep < reps; ++rep) {
      double greedy = 0, beam = 0, beam_doubt = 0;
      for (size_t i = 0; i < logits.size(); ++i) {
        greedy += bench::seconds_of([&] { (void)nn::ctc_greedy_decode(logits[i]); });
        std::vector<nn::Decoded> d;
        const double t = bench::seconds_of([&] { d = nn::ctc_beam_decode(logits[i], bo); });
        beam += t;
        if (doubt[i]) beam_doubt += t;
        if (rep == 0)
          for (int64_t l : d[0].labels) checksum = (checksum ^ (uint64_t)(l + 1)) * 1099511628211ull;
      }
      greedy_s = std::min(greedy_s, greedy), beam_s = std::min(beam_s, beam), beam_doubt_s = std::min(beam_doubt_s, beam_doubt);
    }
    const double per = 1e6;
    Json j = Json::object();
    j.set("lines", (int64_t)logits.size());
    j.set("lines_in_doubt", doubt_lines);
    j.set("frames", frames);
    j.set("greedy_us_per_line", greedy_s * per / (double)logits.size());
    j.set("beam_us_per_line", beam_s * per / (double)logits.size());
    j.set("beam_us_per_line_in_doubt", doubt_lines ? beam_doubt_s * per / (double)doubt_lines : 0.0);
    j.set("beam_us_per_frame", beam_s * per / (double)frames);
    j.set("beam_labels_checksum", std::to_string(checksum));
    j.set("reps", reps);
    j.set("weights", weights);
    j.set("lm", lm_path);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_decode: %s\n", e.what());
    return 1;
  }
}
