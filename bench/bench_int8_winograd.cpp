// int8 3x3 convolutions on CPUs without VNNI: F(4x4, 3x3) and F(2x2, 3x3) in exact integers
// (runtime/cpu/int8_winograd.h, docs/int8.md) against the implicit-im2col int8 product
// (runtime/cpu/int8_gemm.h), all through nn::Int8Conv2d::forward on the same codes (quantize,
// lay out, the product, the float epilogue), on crnn-en's and crnn-s's five 3x3 layers at a batch
// of 32 lines of 32 x 400 (bench_winograd's shapes), crnn-en's last layer at a batch of 32 short
// lines (100 and 52 px: a page's words and table cells), and on four of the page detector's
// layers, the three alternating; milliseconds (the fastest of --reps calls each) and whether the
// outputs are the same bits. (ocrt-infer takes Winograd only from kInt8WinogradMinChannels
// input channels on; here both paths run whatever the count.)
//
//   bench_int8_winograd [--threads N] [--reps R]
//
// Meaningful where the int8 product is the AVX2 one (ocrt-infer's summary: "avx2 vpmaddubsw"); on
// a CPU with VNNI both sides run, but ocrt takes the int8 product there (int8_winograd.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "models/int8.h"
#include "runtime/cpu/int8_winograd.h"
#include "runtime/cli.h"
#include "runtime/cpu_isa.h"
#include "runtime/threading.h"

using namespace ocrt;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Layer {
  const char* name;
  int64_t C, Cout, H, W;
};

}  // namespace

int main(int argc, char** argv) {
  int64_t reps = 5, threads = 1;
  cli::Parser p("bench_int8_winograd", "usage: bench_int8_winograd [options]: int8 3x3 convolutions, Winograd against im2col\n");
  p.add(cli::integer("--threads", "N", threads, 1, 4096, "CPU threads (1)"));
  p.add(cli::integer("--reps", "N", reps, 1, 100, "timed calls of each; the fastest is printed (5)"));
  OCRT_CHECK(p.parse(argc, argv).empty(), "bench_int8_winograd takes no arguments besides its flags");
  OCRT_CHECK(cpu_isa_supported(CpuIsa::avx2), "bench_int8_winograd needs AVX2");
  set_num_threads((int)threads);
  NoGradGuard no_grad;
  const Layer layers[] = {{"crnn cnn.3", 64, 128, 16, 200},  {"crnn cnn.6", 128, 256, 8, 100},
                          {"crnn cnn.9", 256, 256, 8, 100},  {"crnn cnn.12", 256, 512, 4, 101},
                          {"crnn cnn.15", 512, 512, 4, 101}, {"narrow cnn.15", 512, 512, 4, 25},
                          {"narrower cnn.15", 512, 512, 4, 13}, {"crnn-s cnn.3", 32, 64, 16, 200},
                          {"crnn-s cnn.6", 64, 128, 8, 100}, {"crnn-s cnn.9", 128, 128, 8, 100},
                          {"crnn-s cnn.12", 128, 256, 4, 101}, {"crnn-s cnn.15", 256, 256, 4, 101},
                          // the page detector's stride-1 layers (one page of 1280 x 1664): few
                          // channels, where ocrt keeps im2col (kInt8WinogradMinChannels)
                          {"det 8->8 /2", 8, 8, 640, 832},    {"det 16->16 /4", 16, 16, 320, 416},
                          {"det 32->16 /4", 32, 16, 320, 416}, {"det 64->64 /16", 64, 64, 80, 104}};
  std::mt19937 rng(11);
  std::printf("# int8 product: %s; %lld threads, batch 32 (crnn) or 1 (det)\n", cpu::int8_gemm_kernel_name(),
              (long long)threads);
  std::printf("%-15s %10s %10s %10s %9s %13s  %s\n", "layer", "im2col ms", "F(2x2) ms", "F(4x4) ms", "speed-up",
              "F(4x4) GOP/s*", "same bits");
  double total[2][3] = {{0, 0, 0}, {0, 0, 0}};
  for (const Layer& l : layers) {
    const bool det = std::strncmp(l.name, "det", 3) == 0;
    const int64_t N = det ? 1 : 32;
    Tensor wc = Tensor::empty({l.Cout, l.C, 3, 3}, DType::i8), sc = Tensor::empty({l.Cout}), bias = Tensor::empty({l.Cout});
    for (int64_t i = 0; i < wc.numel(); ++i) wc.data<int8_t>()[i] = (int8_t)((int)(rng() % 255) - 127);
    for (int64_t i = 0; i < l.Cout; ++i) sc.data<float>()[i] = 1e-3f * (float)(1 + rng() % 100), bias.data<float>()[i] = 0.01f * (float)(rng() % 100);
    Conv2dOptions o;
    o.padding = {1, 1};
    nn::Int8Input in;
    in.scale = 1.0f / 127;
    // One layer per path: a layer keeps the Winograd weights it made first.
    const nn::Int8Conv2d conv[3] = {{wc, sc, bias, o, in}, {wc, sc, bias, o, in}, {wc, sc, bias, o, in}};
    Tensor x = Tensor::empty({N, l.C, l.H, l.W});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = (float)(rng() % 1000) / 1000.0f;
    double best[3] = {1e9, 1e9, 1e9};
    Tensor y[3];
    for (int64_t r = 0; r < reps + 1; ++r)  // the first round warms up (and makes Winograd's weights)
      for (int w = 0; w < 3; ++w) {
        cpu::set_int8_winograd(w > 0, 1, w == 1 ? 2 : 4);  // every layer, below kInt8WinogradMinChannels too
        const double t0 = now_s();
        y[w] = conv[w].forward(x);
        const double t = now_s() - t0;
        if (r > 0) best[w] = std::min(best[w], t);
      }
    bool same = true;
    for (int w = 1; w < 3; ++w)
      same = same && std::memcmp(y[0].data<float>(), y[w].data<float>(), (size_t)y[0].numel() * sizeof(float)) == 0;
    const double ops = 2.0 * N * l.Cout * l.C * 9 * l.H * l.W;
    std::printf("%-15s %10.2f %10.2f %10.2f %8.2fx %13.1f  %s\n", l.name, best[0] * 1e3, best[1] * 1e3, best[2] * 1e3,
                best[0] / best[2], ops / best[2] / 1e9, same ? "yes" : "NO");
    const int model = std::strncmp(l.name, "crnn-s", 6) == 0;
    if (!det && std::strncmp(l.name, "narrow", 6) != 0)
      for (int w = 0; w < 3; ++w) total[model][w] += best[w];
  }
  cpu::set_int8_winograd(cpu::int8_winograd_enabled());  // the threshold back
  for (int m = 0; m < 2; ++m)
    std::printf("%-15s %10.2f %10.2f %10.2f %8.2fx\n", m ? "crnn-s all" : "crnn all", total[m][0] * 1e3, total[m][1] * 1e3,
                total[m][2] * 1e3, total[m][0] / total[m][2]);
  std::printf("(speed-up: F(4x4) against im2col; * counted as the direct sum's 2 x 9 x C x Cout per output)\n");
  return 0;
}
