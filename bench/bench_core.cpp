// Core-op throughput of ocrt on the CPU: square float32 GEMM (GFLOP/s) and elementwise ops
// (GB/s), on a fixed thread count. bench/torch_core.py measures the same things with PyTorch
// and prints the same table, so the two can be run side by side (see bench/README.md).
//
//   bench_core [--threads N] [--reps R] [--only matmul|elementwise] [--json FILE]
//
// Each measurement: 2 warm-up runs, then R (>= 5) timed repetitions; a repetition runs the op
// enough times back to back to last about 0.1 s, so that small sizes are not all timer noise.
// Reported: the median rate over the repetitions and the min-max spread.
//
// What is counted: a GEMM of n x n by n x n is 2 n^3 FLOP. An elementwise op over n floats
// moves (inputs + outputs) * 4 n bytes (add: 3 * 4 n, relu: 2 * 4 n); write-allocate traffic
// is not counted, as usual. Outputs are allocated by the op on every call, as in normal use;
// add_ (in place) shows the rate without that allocation, and copy_ into an existing tensor
// is the ceiling a streaming op can reach on this machine.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/random.h"
#include "runtime/threading.h"
#include "timing.h"

using namespace ocrt;

namespace {

struct Result {
  std::string name, size, unit;
  double median, min, max;
  int reps, inner;
};

// Runs f with warm-up and repetitions; `work` is the amount (FLOP or bytes) of one call,
// reported per second divided by `scale` (1e9: GFLOP/s or GB/s).
Result measure(const std::string& name, const std::string& size, const std::string& unit, double work,
               int reps, const std::function<void()>& f) {
  double warm = bench::seconds_of(f, 2) / 2;  // warm-up: first touch of memory, thread start, caches
  int inner = std::max(1, (int)(0.1 / std::max(warm, 1e-9)));
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) rates.push_back(work * inner / bench::seconds_of(f, inner) / 1e9);
  const auto [lo, hi] = std::minmax_element(rates.begin(), rates.end());
  return {name, size, unit, bench::median(rates), *lo, *hi, reps, inner};
}

void print_table(const char* impl, int threads, const std::vector<Result>& results) {
  std::printf("%s, %d thread%s\n", impl, threads, threads == 1 ? "" : "s");
  std::printf("%-16s %-6s %10s %21s  %s\n", "op", "size", "median", "min - max", "unit");
  for (const auto& r : results)
    std::printf("%-16s %-6s %10.1f %10.1f - %8.1f  %s\n", r.name.c_str(), r.size.c_str(), r.median, r.min, r.max,
                r.unit.c_str());
}

void write_json(const std::string& path, const char* impl, int threads, const std::vector<Result>& results) {
  std::ofstream out(path);
  if (!out) {
    std::fprintf(stderr, "bench_core: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  out << "{\"impl\": \"" << impl << "\", \"threads\": " << threads << ", \"results\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    out << "  {\"name\": \"" << r.name << "\", \"size\": \"" << r.size << "\", \"unit\": \"" << r.unit
        << "\", \"median\": " << r.median << ", \"min\": " << r.min << ", \"max\": " << r.max
        << ", \"reps\": " << r.reps << ", \"inner\": " << r.inner << "}" << (i + 1 < results.size() ? "," : "")
        << "\n";
  }
  out << "]}\n";
}

int parse_int(const char* flag, const char* value, int min) {
  char* end = nullptr;
  long v = value ? std::strtol(value, &end, 10) : 0;
  if (!value || *end != '\0' || v < min) {
    std::fprintf(stderr, "bench_core: %s needs an integer >= %d, got '%s'\n", flag, min, value ? value : "");
    std::exit(2);
  }
  return (int)v;
}

void bench_matmul(int reps, Generator& gen, std::vector<Result>& results) {
  for (int64_t n : {256, 512, 1024, 2048}) {
    Tensor a = uniform({n, n}, -1, 1, gen), b = uniform({n, n}, -1, 1, gen);
    results.push_back(measure("matmul_f32", std::to_string(n), "GFLOP/s", 2.0 * n * n * n, reps,
                              [&] { matmul(a, b); }));
  }
  // The three GEMMs of a CRNN 3x3 convolution at batch 32 (ops/cpu/conv.cpp), with the same
  // operand layouts: a chunk of k = S * Ho * Wo >= 2048 columns, CK = Cin * 9 rows, and
  //   fwd: y (Cout, k) = w (Cout, CK) @ col (CK, k)
  //   dw:  dw^T (CK, Cout) = col (CK, k) @ dy^T (k, Cout)     (dy^T read through its strides)
  //   dx:  dcol (CK, k) = w^T (CK, Cout) @ dy (Cout, k)       (w^T read through its strides)
  // These are the shapes that decide the speed of CRNN training on the CPU; square products
  // above them are the textbook figure.
  struct Conv {
    const char* name;
    int64_t cout, ck, k;
  };
  for (const Conv& c : {Conv{"conv3", 128, 64 * 9, 2 * 1024}, Conv{"conv9", 256, 256 * 9, 8 * 256},
                        Conv{"conv15", 512, 512 * 9, 16 * 132}}) {
    Tensor w = uniform({c.cout, c.ck}, -1, 1, gen), col = uniform({c.ck, c.k}, -1, 1, gen),
           dy = uniform({c.cout, c.k}, -1, 1, gen);
    const double flop = 2.0 * c.cout * c.ck * c.k;
    const std::string name = c.name;
    auto mnk = [](int64_t m, int64_t n, int64_t k) {  // the size column: the GEMM's M x N x K
      return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    };
    results.push_back(measure(name + ".fwd", mnk(c.cout, c.k, c.ck), "GFLOP/s", flop, reps, [&] { matmul(w, col); }));
    results.push_back(measure(name + ".dw", mnk(c.ck, c.cout, c.k), "GFLOP/s", flop, reps, [&] { matmul(col, dy.t()); }));
    results.push_back(measure(name + ".dx", mnk(c.ck, c.k, c.cout), "GFLOP/s", flop, reps, [&] { matmul(w.t(), dy); }));
  }
}

void bench_elementwise(int reps, Generator& gen, std::vector<Result>& results) {
  const int64_t n = 1 << 24;  // 16M floats, 64 MB per tensor: far beyond the caches
  const std::string size = "16M";
  Tensor x = uniform({n}, -1, 1, gen), y = uniform({n}, -1, 1, gen), z = Tensor::empty({n});
  results.push_back(measure("add_f32", size, "GB/s", 3.0 * 4 * n, reps, [&] { add(x, y); }));
  results.push_back(measure("add_inplace_f32", size, "GB/s", 3.0 * 4 * n, reps, [&] { add_(x, y); }));
  results.push_back(measure("relu_f32", size, "GB/s", 2.0 * 4 * n, reps, [&] { relu(x); }));
  // The machine's ceiling for streaming ops: a copy into an existing tensor.
  results.push_back(measure("copy_f32", size, "GB/s", 2.0 * 4 * n, reps, [&] { z.copy_(x); }));
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 7;
  std::string json, only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--threads") threads = parse_int("--threads", next, 1), ++i;
    else if (a == "--reps") reps = parse_int("--reps", next, 5), ++i;
    else if (a == "--json") {
      if (!next) {
        std::fprintf(stderr, "bench_core: --json needs a file name\n");
        return 2;
      }
      json = next, ++i;
    }
    else if (a == "--only") {
      only = next ? next : "";
      if (only != "matmul" && only != "elementwise") {
        std::fprintf(stderr, "bench_core: --only takes matmul or elementwise, got '%s'\n", only.c_str());
        return 2;
      }
      ++i;
    }
    else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: bench_core [--threads N (default 2)] [--reps R (>= 5, default 7)] [--only matmul|elementwise]\n"
          "                  [--json FILE]\n");
      return 0;
    } else {
      std::fprintf(stderr, "bench_core: unknown argument '%s' (try --help)\n", a.c_str());
      return 2;
    }
  }
  set_num_threads(threads);
  NoGradGuard no_grad;
  Generator gen(1234);
  std::vector<Result> results;
  if (only != "elementwise") bench_matmul(reps, gen, results);
  if (only != "matmul") bench_elementwise(reps, gen, results);
  print_table("ocrt", threads, results);
  if (!json.empty()) write_json(json, "ocrt", threads, results);
  return 0;
}
