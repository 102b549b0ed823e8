// SVTR-lite's cost against line width, on the CPU: the whole model's forward pass (eval mode,
// no autograd, random weights: the time does not depend on them) in ms per line, and one local
// mixing block's attention at the first stage's shape (an 8 x W/4 grid of 64-channel tokens,
// 2 heads) three ways: the full (L, L) window mask of multi_head_attention, whose cost grows with
// the square of the width; local_multi_head_attention's bands of 16 columns (what other devices
// run), whose cost grows linearly; and its default on the CPU, the window_attention kernel
// (ops/attention.h), linear too. Medians over --reps runs after one warm-up.
//
//   bench_svtr_width [--widths 100,200,400,800,1600] [--batch 1] [--reps 5] [--threads 0]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "models/recognizer.h"
#include "ops/attention.h"
#include "ops/random.h"
#include "runtime/autograd.h"
#include "runtime/threading.h"
#include "timing.h"

using namespace ocrt;

namespace {

template <class F>
double median_ms(int reps, F&& f) {
  f();  // warm-up
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) ms.push_back(1e3 * bench::seconds_of(f));
  return bench::median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> widths{100, 200, 400, 800, 1600};
  int64_t batch = 1;
  int reps = 5, threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--help" || a == "-h") {
      std::printf("usage: bench_svtr_width [--widths 100,200,400,800,1600] [--batch 1] [--reps 5] [--threads 0]\n"
                  "SVTR-lite's forward pass and one local block's attention (full mask, bands, kernel)\n"
                  "against line width, on the CPU.\n");
      return 0;
    } else if (a == "--widths" && next) {
      widths.clear();
      std::stringstream ss(argv[++i]);
      for (std::string w; std::getline(ss, w, ',');) widths.push_back(std::atoll(w.c_str()));
    } else if (a == "--batch" && next) {
      batch = std::atoll(argv[++i]);
    } else if (a == "--reps" && next) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--threads" && next) {
      threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "bench_svtr_width: unknown or incomplete argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  for (int64_t w : widths)
    if (w < 4 || w % 4) {
      std::fprintf(stderr, "bench_svtr_width: widths must be positive multiples of 4, got %lld\n", (long long)w);
      return 2;
    }
  if (batch < 1 || reps < 1) {
    std::fprintf(stderr, "bench_svtr_width: need --batch >= 1 and --reps >= 1\n");
    return 2;
  }
  if (threads > 0) set_num_threads(threads);
  NoGradGuard no_grad;
  Generator gen(1);
  auto model = nn::make_recognizer("svtr-lite", 96, gen);
  model->eval();
  std::printf("svtr-lite on the CPU, %d threads, batch %lld, median of %d runs\n", num_threads(), (long long)batch, reps);
  std::printf("%6s %14s %12s %18s %18s %18s\n", "width", "model ms/line", "lines/s", "attn full mask ms", "attn bands ms",
              "attn kernel ms");
  const int64_t E = 64, heads = 2, H = 8;
  const Tensor in_w = uniform({3 * E, E}, -0.1, 0.1, gen), in_b = uniform({3 * E}, -0.1, 0.1, gen);
  const Tensor out_w = uniform({E, E}, -0.1, 0.1, gen), out_b = uniform({E}, -0.1, 0.1, gen);
  for (int64_t w : widths) {
    const Tensor x = uniform({batch, 1, 32, w}, -1, 1, gen);
    const double model_ms = median_ms(reps, [&] { model->forward(x); }) / (double)batch;
    const int64_t Wt = w / 4, L = H * Wt;
    const Tensor t = uniform({L, batch, E}, -1, 1, gen);
    const Tensor mask = local_attention_mask(H, Wt);
    MultiheadAttentionOptions o;
    o.num_heads = heads;
    o.average_weights = false;
    const double full_ms = median_ms(reps, [&] { multi_head_attention(t, t, t, in_w, in_b, out_w, out_b, o, mask); });
    const double band_ms =
        median_ms(reps, [&] { local_multi_head_attention(t, H, Wt, 7, 11, in_w, in_b, out_w, out_b, heads, Tensor(), 16); });
    const double kernel_ms =
        median_ms(reps, [&] { local_multi_head_attention(t, H, Wt, 7, 11, in_w, in_b, out_w, out_b, heads); });
    std::printf("%6lld %14.2f %12.1f %18.2f %18.2f %18.2f\n", (long long)w, model_ms, 1000.0 / model_ms, full_ms,
                band_ms, kernel_ms);
    std::fflush(stdout);
  }
  return 0;
}
