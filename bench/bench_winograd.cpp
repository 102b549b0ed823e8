// Winograd's 3x3 convolution (ops/cpu/winograd.h) alone, in inference (weights kept transformed),
// on crnn-en's five 3x3 layers at a batch of 32 lines of 32 x 400: milliseconds per call and the
// rate counted as the direct convolution's FLOPs, in float32 and bf16 products. Then crnn-en's
// 2x2 layer through F(3, 2) (ops/cpu/winograd_2x2.h) against im2col + GEMM (conv2d in exact
// mode), the two calls alternating so that a machine's drift hits both alike.
//
//   bench_winograd [--threads N] [--reps R]
#include <cstdio>
#include <random>
#include <vector>

#include "ops/conv.h"
#include "ops/random.h"
#include "ops/cpu/winograd.h"
#include "ops/cpu/winograd_2x2.h"
#include "runtime/cli.h"
#include "runtime/cpu/gemm.h"
#include "runtime/error.h"
#include "runtime/tensor.h"
#include "runtime/threading.h"
#include "timing.h"

using namespace ocrt;

int main(int argc, char** argv) {
  int64_t threads = 2, reps = 9;
  cli::Parser p("bench_winograd",
                "usage: bench_winograd [options]: Winograd's 3x3 convolutions alone, crnn-en's five layers\n");
  p.add(cli::integer("--threads", "N", threads, 1, 4096, "CPU threads (2)"));
  p.add(cli::integer("--reps", "N", reps, 1, 1000, "timed calls of each layer; the median is printed (9)"));
  OCRT_CHECK(p.parse(argc, argv).empty(), "bench_winograd takes no arguments besides its flags");
  set_num_threads((int)threads);
#if defined(OCRT_CPU_WINOGRAD)
  NoGradGuard no_grad;
  struct Layer {
    const char* name;
    int64_t C, Cout, H, W;
    int pool;  // 0 none, 1: (2, 2) stride (2, 2), 2: (2, 2) stride (2, 1) padding (0, 1)
  };
  const Layer layers[] = {{"cnn.3 64->128", 64, 128, 16, 200, 1},
                          {"cnn.6 128->256", 128, 256, 8, 100, 0},
                          {"cnn.9 256->256", 256, 256, 8, 100, 2},
                          {"cnn.12 256->512", 256, 512, 4, 101, 0},
                          {"cnn.15 512->512", 512, 512, 4, 101, 2}};
  const int64_t N = 32;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::printf("%-18s %-5s %10s %10s\n", "layer", "prec", "ms", "GFLOP/s");
  double total[2] = {0, 0};
  for (const Layer& l : layers) {
    std::vector<float> x((size_t)(N * l.C * l.H * l.W)), w((size_t)(l.Cout * l.C * 9)), b((size_t)l.Cout);
    for (float& v : x) v = u(rng);
    for (float& v : w) v = u(rng) - 0.5f;
    for (float& v : b) v = u(rng);
    cpu::WinogradReluPool pool{};
    const cpu::WinogradReluPool* pp = nullptr;
    int64_t out = N * l.Cout * l.H * l.W;
    if (l.pool == 1) pool = {2, 2, 0, l.H / 2, l.W / 2}, pp = &pool, out /= 4;
    if (l.pool == 2) pool = {2, 1, 1, l.H / 2, l.W + 1}, pp = &pool;
    std::vector<float> y((size_t)out);
    const double flop = 2.0 * N * l.H * l.W * l.Cout * l.C * 9;
    for (int pi = 0; pi < 2; ++pi) {
      cpu::MatmulPrecisionScope scope(pi ? cpu::MatmulPrecision::bf16 : cpu::MatmulPrecision::f32);
      auto call = [&] {
        cpu::winograd_conv2d(x.data(), w.data(), b.data(), y.data(), N, l.C, l.H, l.W, l.Cout, 1, 1, 0, pp);
      };
      call(), call(), call();
      std::vector<double> ms;
      for (int r = 0; r < reps; ++r) ms.push_back(1e3 * bench::seconds_of(call));
      const double m = bench::median(ms);
      total[pi] += m;
      std::printf("%-18s %-5s %10.2f %10.1f\n", l.name, pi ? "bf16" : "fp32", m, flop / m / 1e6);
    }
  }
  std::printf("%-18s %-5s %10.2f\n%-18s %-5s %10.2f\n", "all five", "fp32", total[0], "all five", "bf16", total[1]);
  {
    // cnn.18: (32, 512, 2, 102) -> (32, 512, 1, 101), no padding.
    const int64_t C = 512, Cout = 512, H = 2, W = 102;
    Generator gen(11);
    const Tensor x = uniform({N, C, H, W}, 0.0, 1.0, gen), w = uniform({Cout, C, 2, 2}, -0.05, 0.05, gen),
                 b = uniform({Cout}, 0.0, 1.0, gen);
    const double flop = 2.0 * N * (W - 1) * Cout * C * 4;
    std::vector<float> y((size_t)(N * Cout * (W - 1)));
    std::printf("%-18s %-5s %10s %10s   %s\n", "layer", "prec", "F(3,2) ms", "im2col ms", "(medians, alternating)");
    for (int pi = 0; pi < 2; ++pi) {
      cpu::MatmulPrecisionScope scope(pi ? cpu::MatmulPrecision::bf16 : cpu::MatmulPrecision::f32);
      auto fast = [&] {
        cpu::winograd_2x2_conv2d(x.data<float>(), w.data<float>(), b.data<float>(), y.data(), N, C, H, W, Cout, 0, 0);
      };
      auto exact = [&] {
        ConvModeScope mode(ConvMode::exact);
        conv2d(x, w, b, Conv2dOptions{});
      };
      fast(), exact(), fast(), exact();
      std::vector<double> ms[2];
      for (int r = 0; r < reps; ++r) {
        ms[0].push_back(1e3 * bench::seconds_of(fast));
        ms[1].push_back(1e3 * bench::seconds_of(exact));
      }
      std::printf("%-18s %-5s %10.2f %10.2f   (%.1f and %.1f GFLOP/s as the direct sum)\n", "cnn.18 512->512 2x2",
                  pi ? "bf16" : "fp32", bench::median(ms[0]), bench::median(ms[1]), flop / bench::median(ms[0]) / 1e6,
                  flop / bench::median(ms[1]) / 1e6);
    }
  }
#else
  std::printf("no Winograd path in this build\n");
#endif
  return 0;
}
