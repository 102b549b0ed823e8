// ocrt's GEMM on every instruction-set path this CPU runs (runtime/cpu_isa.h), in float32 and
// bf16 (runtime/cpu/gemm.h), and the int8 product of int8 inference (runtime/cpu/int8_gemm.h, the
// kernel of the path the process runs: OCRT_CPU_ISA=avx2 for the vpmaddubsw one), on the shapes
// CRNN's inference gives it: GFLOP/s (GOP/s for int8), and the fraction of the path's peak.
//
//   bench_gemm [--threads N] [--reps R] [--ghz F] [--json FILE] [--conv-only] [--probe S]
//
// --probe S (the amx path): for S seconds, sample after sample (a million tile steps each), the
// int8 tiles' rate on operands in tile registers and on operands loaded from the L1, one line
// each, then the share of fast samples (loading at 60% of the registers' rate or more): whether
// the machine is in a state where a kernel's figures mean what they say (the 2-vCPU Xeon of
// bench/results/cpu-bf16.md loads tiles 4x slower for seconds to minutes at a time;
// bench/amx_state.sh reads the share for the scripts).
//
// Shapes (batch 32, a 32 x 400 line, ops/cpu/conv.cpp's chunking of samples into >= 2048 GEMM
// columns): the convolutions as W (Cout, C k k) @ col (C k k, columns), the LSTM's input
// projection x (T N, 512) @ W^T (512, 4 H 2) with W stored (4 H 2, 512) as linear() reads it, its
// recurrent product h (N, 256) @ W_hh^T (256, 1024), and the classifier.
//
// Peak per core: 2 FMA pipes x lanes x 2 FLOP per cycle for float32 (AVX2: 32 FLOP/cycle,
// AVX-512: 64); bf16 with vdpbf16ps: two products per lane per instruction, 128 FLOP/cycle, if
// the core issues two a cycle (Zen 5 does; Zen 4 and Intel cores without AMX issue fewer, so
// the fraction there understates). int8: vpdpbusd makes 64 products and their sums per zmm
// instruction, 256 OP/cycle at two a cycle; the AVX2 kernel needs vpmaddubsw + vpmaddwd + vpaddd
// for 32 products, so 2 x 32 x 2 = 128 OP/cycle is its bound with two multiply pipes. The int8
// AMX (Sapphire Rapids): a tdpbf16ps is 16 x 16 x 32 multiply-adds, a tdpbusd 16 x 16 x 64, each
// issued every 16 cycles at best: 1024 FLOP/cycle in bf16 and 2048 OP/cycle in int8; the amx rows
// are measured against the tiles' own rate on the machine instead (amx_tile_rate). The int8
// rows time the product alone from packed weights and codes, with the epilogue into float32 (as
// inference runs it: A's packing is the caller's, here from rows of codes). The clock is --ghz,
// or measured (measured_ghz below).
// Each figure: 2 warm-up calls, then R timed repetitions of about 0.1 s; the median.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "ops/cpu/conv_amx.h"
#include "ops/cpu/winograd.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/int8_gemm.h"
#include "runtime/cpu_isa.h"
#include "runtime/json.h"
#include "runtime/threading.h"
#include "timing.h"

using namespace ocrt;

#if defined(OCRT_CPU_SGEMM)
namespace {

double median_rate(double flop, int reps, const std::function<void()>& f) {
  const double warm = bench::seconds_of(f, 2) / 2;
  const int inner = std::max(1, (int)(0.1 / std::max(warm, 1e-9)));
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) rates.push_back(flop * inner / bench::seconds_of(f, inner) / 1e9);
  return bench::median(rates);
}

// The core clock while it works, measured: a chain of dependent integer additions retires one
// per cycle, so 8 per iteration over 5e7 iterations take 4e8 cycles (the loop's own counter is
// a separate chain that runs alongside). /proc/cpuinfo's "cpu MHz" in a VM is the nominal
// clock, well under what a busy core runs at. The best of 3 runs.
double measured_ghz() {
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    uint64_t x = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < 50000000; ++i)
      __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                       "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                       : "+r"(x));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 4e8 / s / 1e9);
  }
  return best;
}

#if defined(OCRT_TARGET_ATTRS)
// The AMX tiles' own rate on this machine, every thread at once: four tile products on operands
// already in tile registers, over and over (no memory, no packing). The amx rows' "of peak" is
// against this: a VM's clock is not known, and the tile unit may run at its own.
// from_l1: each step also loads its four operand tiles from one 4 KB buffer, which stays in the
// L1: the rate a kernel whose operands never miss the L1 could reach (on the 2-vCPU Xeon of
// bench/results/cpu-bf16.md it alone switched by 3.4x between two states of the host).
__attribute__((target("amx-tile,amx-bf16,amx-int8"))) double amx_tile_rate(bool int8, int threads,
                                                                           bool from_l1 = false, int64_t n = 2000000) {
  double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    struct alignas(64) {
      uint8_t palette = 1, start_row = 0, reserved[14] = {};
      uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
      uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
    } config;
    __asm__ volatile("ldtilecfg %0" : : "m"(config));  // not _tile_loadconfig: runtime/cpu/gemm_amx.cpp says why
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    alignas(64) static thread_local uint8_t operands[4096];
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; ++i) {
      if (from_l1) {
        _tile_loadd(4, operands, 64);
        _tile_loadd(5, operands + 1024, 64);
        _tile_loadd(6, operands + 2048, 64);
        _tile_loadd(7, operands + 3072, 64);
      }
      if (int8) {
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
      } else {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total += 4.0 * n * 16 * 16 * (int8 ? 64 : 32) * 2 / s / 1e9;
  }
  return total;
}
#endif

struct GemmShape {
  const char* name;
  int64_t M, N, K;
  bool b_transposed;  // B read as the transpose of a row-major (N, K) weight
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 5;
  bool conv_only = false;  // only the AMX convolutions' rows
  double probe_seconds = 0;
  double ghz = 0;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_gemm: %s expects a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") threads = std::stoi(next());
    else if (a == "--reps") reps = std::max(1, std::stoi(next()));
    else if (a == "--ghz") ghz = std::stod(next());
    else if (a == "--json") json_path = next();
    else if (a == "--conv-only") conv_only = true;
    else if (a == "--probe") probe_seconds = std::stod(next());
    else {
      std::fprintf(stderr, "usage: bench_gemm [--threads N] [--reps R] [--ghz F] [--json FILE] [--conv-only] [--probe S]\n");
      return 2;
    }
  }
  set_num_threads(threads);
#if defined(OCRT_TARGET_ATTRS)
  if (probe_seconds > 0) {
    if (cpu_isa() != CpuIsa::amx || !cpu_has_amx_int8()) {
      std::fprintf(stderr, "bench_gemm: --probe needs the amx path with AMX-INT8\n");
      return 2;
    }
    // A sample is fast when loading from the L1 keeps at least 60% of the rate on registers.
    const auto start = std::chrono::steady_clock::now();
    int samples = 0, fast = 0;
    for (double t = 0; t < probe_seconds;
         t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()) {
      const double registers = amx_tile_rate(true, threads, false, 1000000);
      const double l1 = amx_tile_rate(true, threads, true, 1000000);
      ++samples, fast += l1 >= 0.6 * registers;
      std::printf("%6.2f s  int8 tiles: %6.0f GOP/s on registers, %6.0f GOP/s loading from the L1\n", t, registers, l1);
      std::fflush(stdout);
    }
    std::printf("fast %.0f%% of %d samples (loading from the L1 at >= 60%% of the rate on registers)\n",
                samples ? 100.0 * fast / samples : 0.0, samples);
    return 0;
  }
#endif
  if (ghz <= 0) ghz = measured_ghz();
  const std::vector<GemmShape> shapes = {
      {"conv0 1->64 k3", 64, 12800, 9, false},       {"conv1 64->128 k3", 128, 3200, 576, false},
      {"conv2 128->256 k3", 256, 2048, 1152, false}, {"conv3 256->256 k3", 256, 2048, 2304, false},
      {"conv4 256->512 k3", 512, 2080, 2304, false}, {"conv5 512->512 k3", 512, 2080, 4608, false},
      {"lstm input 512->2x1024", 3232, 2048, 512, true}, {"lstm recurrent 256->1024", 32, 1024, 256, true},
      {"classifier 512->97", 3232, 97, 512, true},
  };
  std::printf("# %s; %d threads, %.2f GHz\n", cpu_description().c_str(), threads, ghz);
  double amx_bf16_peak = 0, amx_int8_peak = 0;  // measured; the amx rows' "of peak" is against these
#if defined(OCRT_TARGET_ATTRS)
  if (cpu_isa() == CpuIsa::amx) {
    amx_bf16_peak = amx_tile_rate(false, threads);
    if (cpu_has_amx_int8()) amx_int8_peak = amx_tile_rate(true, threads);
    std::printf("# AMX tiles alone (operands in tile registers): %.0f GFLOP/s bf16, %.0f GOP/s int8\n", amx_bf16_peak,
                amx_int8_peak);
  }
#endif
  std::printf("%-26s %-10s %-5s %10s %8s\n", "shape (M x N x K)", "path", "prec", "GFLOP/s", "of peak");
  Json rows = Json::array();
  // One result: printed (path as the table names it), and kept for --json (path as recorded).
  auto record = [&](const GemmShape& s, const char* path, const char* json_path_name, const char* precision, double rate,
                    double peak) {
    char shape[64];
    std::snprintf(shape, sizeof shape, "%s (%lldx%lldx%lld)", s.name, (long long)s.M, (long long)s.N, (long long)s.K);
    std::printf("%-44s %-10s %-5s %10.1f %7.1f%%\n", shape, path, precision, rate, peak > 0 ? 100 * rate / peak : 0.0);
    Json r = Json::object();
    r.set("shape", std::string(s.name));
    r.set("M", (double)s.M), r.set("N", (double)s.N), r.set("K", (double)s.K);
    r.set("path", std::string(json_path_name));
    r.set("precision", std::string(precision));
    r.set("gflops", rate);
    r.set("fraction_of_peak", peak > 0 ? rate / peak : 0.0);
    rows.as_array().push_back(r);
  };
  for (const GemmShape& s : shapes) {
    if (conv_only) break;
    std::vector<float> a((size_t)(s.M * s.K)), b((size_t)(s.K * s.N)), c((size_t)(s.M * s.N));
    for (size_t i = 0; i < a.size(); ++i) a[i] = (float)((i * 37 % 101) - 50) / 50.f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = (float)((i * 53 % 103) - 51) / 51.f;
    const int64_t b_row = s.b_transposed ? 1 : s.N, b_col = s.b_transposed ? s.K : 1;
    for (CpuIsa isa : {CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512bf16, CpuIsa::amx}) {
      if (!cpu_isa_supported(isa)) continue;
      for (cpu::MatmulPrecision p : {cpu::MatmulPrecision::f32, cpu::MatmulPrecision::bf16}) {
        // Paths above avx512 share its float32 kernel; avx2/avx512's bf16 is the float32 kernel
        // on rounded operands: listed once each.
        if (p == cpu::MatmulPrecision::f32 && (int)isa > (int)CpuIsa::avx512) continue;
        if (isa == CpuIsa::amx && p == cpu::MatmulPrecision::f32) continue;  // avx512's float32 kernel
        const double flop = 2.0 * s.M * s.N * s.K;
        const double rate = median_rate(flop, reps, [&] {
          cpu::sgemm_on(isa, p, s.M, s.N, s.K, a.data(), s.K, 1, b.data(), b_row, b_col, c.data(), s.N);
        });
        const bool native_bf16 = p == cpu::MatmulPrecision::bf16 && (int)isa >= (int)CpuIsa::avx512bf16;
        const double per_cycle = isa == CpuIsa::avx2 ? 32 : native_bf16 ? 128 : 64;
        const double peak = isa == CpuIsa::amx ? amx_bf16_peak : per_cycle * ghz * threads;
        record(s, cpu_isa_name(isa), cpu_isa_name(isa), cpu::matmul_precision_name(p), rate, peak);
      }
    }
    if (cpu::int8_gemm_simd()) {
      // The same product in int8, as the int8 layers run it: A holds the activation codes (a
      // convolution's output pixels are its rows, so its M and N swap), B is packed from the
      // (N x K) weight codes.
      const int64_t M = s.b_transposed ? s.M : s.N, N = s.b_transposed ? s.N : s.M;
      const int64_t Kp = (s.K + 3) / 4 * 4;
      std::vector<uint8_t> qa((size_t)(M * Kp));
      std::vector<int8_t> qb((size_t)(N * s.K));
      for (size_t i = 0; i < qa.size(); ++i) qa[i] = (uint8_t)(i * 37 % 128);
      for (size_t i = 0; i < qb.size(); ++i) qb[i] = (int8_t)((int)(i * 53 % 255) - 127);
      const cpu::Int8PackedWeights packed(s.K, N, qb.data(), s.K, 1);
      std::vector<float> scale((size_t)N, 1e-3f);
      const cpu::Int8Epilogue e{scale.data(), nullptr, nullptr, false};
      const cpu::Int8A pack = cpu::int8_rows(qa.data(), Kp);
      const double ops = 2.0 * s.M * s.N * s.K;
      const double rate = median_rate(ops, reps, [&] { cpu::int8_gemm(M, pack, packed, e, c.data(), N, 1); });
      const bool amx = cpu_has_amx_int8(), vnni = cpu_has_avx512_vnni();
      const double peak = amx ? amx_int8_peak : (vnni ? 256 : 128) * ghz * threads;
      record(s, amx ? "amx" : vnni ? "vnni" : "avx2", cpu::int8_gemm_kernel_name(), "int8", rate, peak);
    }
  }
  // The bf16 convolutions on AMX tiles (ops/cpu/conv_amx.h), crnn's 3x3 layers as a batch of 32
  // lines of 32 x 400 gives them: the image read in place, the whole layer timed (the image made
  // channels last in bf16, the tiles, the store into NCHW float32).
  if (cpu_isa() == CpuIsa::amx) {
    struct ConvShape {
      const char* name;
      int64_t C, Cout, H, W;
    };
    const std::vector<ConvShape> convs = {{"conv1 64->128 k3", 64, 128, 16, 200},
                                          {"conv2 128->256 k3", 128, 256, 8, 100},
                                          {"conv3 256->256 k3", 256, 256, 8, 100},
                                          {"conv4 256->512 k3", 256, 512, 4, 101},
                                          {"conv5 512->512 k3", 512, 512, 4, 101}};
    cpu::MatmulPrecisionScope bf16_scope(cpu::MatmulPrecision::bf16);
    const int64_t N = 32;
    for (const ConvShape& cs : convs) {
      std::vector<float> x((size_t)(N * cs.C * cs.H * cs.W)), w((size_t)(cs.Cout * cs.C * 9)),
          y((size_t)(N * cs.Cout * cs.H * cs.W));
      for (size_t i = 0; i < x.size(); ++i) x[i] = (float)((i * 37 % 101) - 50) / 50.f;
      for (size_t i = 0; i < w.size(); ++i) w[i] = (float)((i * 53 % 103) - 51) / 51.f;
      Conv2dParams p;
      p.pad_h = p.pad_w = 1;
      const GemmShape s{cs.name, cs.Cout, N * cs.H * cs.W, cs.C * 9, false};
      const double rate = median_rate(2.0 * s.M * s.N * s.K, reps, [&] {
        cpu::amx_bf16_conv2d(x.data(), w.data(), nullptr, y.data(), N, cs.C, cs.H, cs.W, cs.Cout, 3, 3, p);
      });
      record(s, "amx conv", "amx_conv", "bf16", rate, amx_bf16_peak);
      // The weight gradient of the same layer (training's backward): on the tiles, and through
      // Winograd in bf16 (what bf16 training took before), timed in turns, best of each.
      std::vector<float> dw(w.size());
      const double flop = 2.0 * s.M * s.N * s.K;
      double amx_best = 0, winograd_best = 0;
      for (int r = 0; r < reps; ++r) {
        amx_best = std::max(amx_best, median_rate(flop, 1, [&] {
          cpu::amx_bf16_conv2d_weight_grad(x.data(), y.data(), dw.data(), N, cs.C, cs.H, cs.W, cs.Cout, 3, 3, p);
        }));
        winograd_best = std::max(winograd_best, median_rate(flop, 1, [&] {
          cpu::winograd_conv2d_weight_grad(x.data(), y.data(), dw.data(), N, cs.C, cs.H, cs.W, cs.Cout, 1, 1);
        }));
      }
      char name[64];
      std::snprintf(name, sizeof name, "dw %s", cs.name);
      const GemmShape d{name, cs.Cout, cs.C * 9, N * cs.H * cs.W, false};
      record(d, "amx dw", "amx_conv_weight_grad", "bf16", amx_best, amx_bf16_peak);
      record(d, "winograd", "winograd_weight_grad", "bf16", winograd_best, amx_bf16_peak);
    }
  }
  if (!json_path.empty()) {
    Json j = Json::object();
    j.set("cpu", cpu_description());
    j.set("threads", (double)threads), j.set("ghz", ghz);
    j.set("results", rows);
    std::ofstream(json_path) << j.dump() << "\n";
  }
  return 0;
}
#else
int main() {
  std::fprintf(stderr, "bench_gemm: ocrt's GEMM is built for x86-64 only\n");
  return 2;
}
#endif
