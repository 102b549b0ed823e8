// SVTR-lite's attention in a training step, at each of its shapes (batch 32 of 32 x 128 lines):
// window_self_attention's kernel (ops/cpu/attention.cpp) against the same attention composed
// from matmul, mask and softmax (scaled_dot_product_attention with the window's mask, one band),
// forward and backward, ms (the fastest of --reps runs; each side alternately).
//
//   bench_window_attention [--threads 2] [--reps 6] [--batch 32]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "runtime/threading.h"
#include "timing.h"

using namespace ocrt;

int main(int argc, char** argv) {
  int threads = 2, reps = 6;
  int64_t N = 32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_window_attention: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") threads = std::atoi(next());
    else if (a == "--reps") reps = std::atoi(next());
    else if (a == "--batch") N = std::atoll(next());
    else {
      std::fprintf(stderr, "usage: bench_window_attention [--threads 2] [--reps 6] [--batch 32]\n");
      return 2;
    }
  }
  set_num_threads(threads);
  struct Shape4 {
    const char* name;
    int64_t H, W, E, heads, wh, ww;
  };
  const Shape4 shapes[] = {{"stage 0, local 7x11", 8, 32, 64, 2, 7, 11},
                           {"stage 1, local 7x11", 4, 32, 128, 4, 7, 11},
                           {"stage 1, global", 4, 32, 128, 4, 7, 63},
                           {"stage 2, global", 2, 32, 256, 8, 3, 63}};
  std::printf("# %d threads, batch %lld; ms, fastest of %d\n", threads, (long long)N, reps);
  std::printf("%-22s %12s %12s %12s %12s\n", "block", "kernel fwd", "kernel bwd", "composed fwd", "composed bwd");
  Generator gen(1);
  for (const Shape4& c : shapes) {
    const int64_t L = c.H * c.W, hd = c.E / c.heads;
    const Tensor q = uniform({L, N, c.E}, -1, 1, gen), k = uniform({L, N, c.E}, -1, 1, gen);
    const Tensor v = uniform({L, N, c.E}, -1, 1, gen), r = uniform({L, N, c.E}, -1, 1, gen);
    const Tensor mask = local_attention_mask(c.H, c.W, c.wh, c.ww).unsqueeze(0);
    double best[2][2] = {{1e9, 1e9}, {1e9, 1e9}};
    for (int rep = 0; rep <= reps; ++rep)
      for (int way = 0; way < 2; ++way) {
        Tensor qq = q.detach(), kk = k.detach(), vv = v.detach();
        for (Tensor* t : {&qq, &kk, &vv}) t->set_requires_grad();
        Tensor y;
        const double fwd = bench::seconds_of([&] {
          if (way == 0) {
            y = window_self_attention(qq, kk, vv, c.H, c.W, c.wh, c.ww, c.heads);
          } else {
            auto split = [&](const Tensor& x) { return x.reshape({L, N * c.heads, hd}).transpose(0, 1); };
            y = scaled_dot_product_attention(split(qq), split(kk), split(vv), mask)
                    .output.transpose(0, 1)
                    .reshape({L, N, c.E});
          }
        });
        const Tensor loss = sum(mul(y, r), {});
        const double bwd = bench::seconds_of([&] { loss.backward(); });
        if (rep == 0) continue;  // warm-up
        best[way][0] = std::min(best[way][0], 1e3 * fwd);
        best[way][1] = std::min(best[way][1], 1e3 * bwd);
      }
    std::printf("%-22s %12.2f %12.2f %12.2f %12.2f\n", c.name, best[0][0], best[0][1], best[1][0], best[1][1]);
  }
  return 0;
}
