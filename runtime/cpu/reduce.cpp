// CPU reductions (softmax, which reduces too, is a layer kernel: ops/cpu/softmax.cpp).
//
// reduce: x (any shape and strides) -> out (x's rank, size 1 in reduced dims, contiguous).
// Outputs are independent, so threads split the outputs; a reduction to very few outputs
// (sum of everything) instead splits each output's inputs across threads. Float sums
// accumulate in double: slower by nothing measurable here, and golden tests against PyTorch
// then agree to rounding.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/backend.h"
#include "runtime/cpu/loops.h"

namespace ocrt {

namespace {

using cpu::offset_of;

// The geometry of a reduction: outputs are indexed by kept dims, inputs of one output by the
// reduced dims; both as (sizes, strides into x).
struct ReduceGeometry {
  std::vector<int64_t> out_sizes, out_strides;  // kept dims (strides into x)
  std::vector<int64_t> red_sizes, red_strides;  // reduced dims (strides into x)
  int64_t num_out = 1, num_red = 1;
};

ReduceGeometry geometry(const Tensor& x, const Tensor& out) {
  ReduceGeometry g;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (out.shape()[d] == 1 && x.shape()[d] != 1) {
      g.red_sizes.push_back(x.shape()[d]);
      g.red_strides.push_back(x.strides()[d]);
      g.num_red *= x.shape()[d];
    } else {
      g.out_sizes.push_back(x.shape()[d]);
      g.out_strides.push_back(x.strides()[d]);
      g.num_out *= x.shape()[d];
    }
  }
  return g;
}

template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

// Folds x[base + offset_of(k)] for k in [k0, k1) into acc with `op`. The innermost reduced
// dim is walked with a plain stride so the common contiguous case is a simple loop.
template <class T, class Op>
void fold_range(const T* x, int64_t base, const ReduceGeometry& g, int64_t k0, int64_t k1, Op& op) {
  const int64_t inner = g.red_sizes.empty() ? 1 : g.red_sizes.back();
  const int64_t inner_stride = g.red_strides.empty() ? 0 : g.red_strides.back();
  int64_t k = k0;
  while (k < k1) {
    int64_t within = k % inner;
    int64_t run = std::min(inner - within, k1 - k);
    const T* p = x + base + offset_of(k, g.red_sizes, g.red_strides);
    if (inner_stride == 1)
      for (int64_t i = 0; i < run; ++i) op(p[i]);
    else
      for (int64_t i = 0; i < run; ++i) op(p[i * inner_stride]);
    k += run;
  }
}

// A sum over consecutive dims of a contiguous x with kept dims after them, x viewed as
// (outer, n, inner) -> (outer, inner): a linear layer's bias gradient ((rows, features) ->
// features) is one. Whole rows of `inner` values are added into double accumulators, which
// vectorises, where the general loop would walk each output's column with a stride of `inner`
// (it took 9% of svtr-lite's training step). Threads split (outer, column block) pairs, or,
// when there are too few of those, the n rows, each thread into its own accumulators, added
// in thread order at the end.
template <class T, class Out>
void sum_rows(const T* x, Out* out, int64_t outer, int64_t n, int64_t inner, bool mean) {
  constexpr int64_t kBlock = 1024;  // columns per task: 8 KiB of accumulators
  const int64_t blocks = (inner + kBlock - 1) / kBlock;
  const int threads = omp_get_max_threads();
  const bool parallel = outer * n * inner >= cpu::kParallelGrain && threads > 1 && !omp_in_parallel();
  auto add_rows = [&](double* acc, const T* first, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = first + r * inner;
      for (int64_t k = 0; k < cols; ++k) acc[k] += (double)row[k];
    }
  };
  if (!parallel || outer * blocks >= threads) {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t task = 0; task < outer * blocks; ++task) {
      const int64_t o = task / blocks, k0 = task % blocks * kBlock, cols = std::min(kBlock, inner - k0);
      double acc[kBlock] = {};
      add_rows(acc, x + o * n * inner + k0, n, cols);
      for (int64_t k = 0; k < cols; ++k) out[o * inner + k0 + k] = (Out)(mean ? acc[k] / (double)n : acc[k]);
    }
    return;
  }
  std::vector<double> partial((size_t)threads * outer * inner, 0.0);
  const int64_t chunk = (n + threads - 1) / threads;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    const int64_t r0 = std::min(n, t * chunk), r1 = std::min(n, r0 + chunk);
    for (int64_t o = 0; o < outer; ++o)
      add_rows(partial.data() + ((size_t)t * outer + o) * inner, x + (o * n + r0) * inner, r1 - r0, inner);
  }
  for (int64_t i = 0; i < outer * inner; ++i) {
    double acc = 0;
    for (int t = 0; t < threads; ++t) acc += partial[(size_t)t * outer * inner + i];
    out[i] = (Out)(mean ? acc / (double)n : acc);
  }
}

// x as (outer, n, inner) when x is contiguous and its reduced dims are consecutive, followed by
// at least one kept dim larger than 1; false otherwise.
bool rows_then_columns(const Tensor& x, const Tensor& out, int64_t& outer, int64_t& n, int64_t& inner) {
  if (!x.is_contiguous()) return false;
  int first = -1, last = -1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (out.shape()[d] == 1 && x.shape()[d] != 1) {
      if (first < 0) first = (int)d;
      else if (last != d - 1) return false;  // a kept dim between reduced ones
      last = (int)d;
    }
  if (first < 0) return false;
  outer = n = inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) (d < first ? outer : d <= last ? n : inner) *= x.shape()[d];
  return inner > 1 && n > 0;
}

template <class T>
void reduce_typed(ReduceKind op, const Tensor& x, const Tensor& out) {
  const T* xd = x.data<T>();
  T* od = out.data<T>();
  const bool is_sum = op == ReduceKind::sum || op == ReduceKind::mean;
  if constexpr (std::is_floating_point_v<T>) {
    int64_t outer, n, inner;
    if (is_sum && rows_then_columns(x, out, outer, n, inner))
      return sum_rows(xd, od, outer, n, inner, op == ReduceKind::mean);
    // A sum of a whole large contiguous tensor (a gradient's norm): its rows of kLanes values go
    // through sum_rows into kLanes independent sums, which vectorise, where one running sum
    // waits for each addition before the next (4 cycles a value).
    constexpr int64_t kLanes = 64;
    const int64_t total = x.numel();
    if (is_sum && out.numel() == 1 && x.is_contiguous() && total >= 4 * kLanes) {
      const int64_t rows = total / kLanes;
      std::vector<double> lanes((size_t)kLanes);
      sum_rows(xd, lanes.data(), 1, rows, kLanes, false);
      double acc = 0;
      for (double v : lanes) acc += v;
      for (int64_t i = rows * kLanes; i < total; ++i) acc += (double)xd[i];
      od[0] = (T)(op == ReduceKind::mean ? acc / (double)total : acc);
      return;
    }
  }
  ReduceGeometry g = geometry(x, out);
  using A = Acc<T>;
  const bool is_max = op == ReduceKind::max;

  auto reduce_part = [&](int64_t base, int64_t k0, int64_t k1) -> A {
    if (is_sum) {
      A acc = 0;
      auto f = [&acc](T v) { acc += (A)v; };
      fold_range(xd, base, g, k0, k1, f);
      return acc;
    }
    A acc = (A)xd[base + offset_of(k0, g.red_sizes, g.red_strides)];
    bool nan = false;
    auto f = [&](T v) {
      if (v != v) nan = true;
      else if (is_max ? (A)v > acc : (A)v < acc) acc = (A)v;
    };
    fold_range(xd, base, g, k0, k1, f);
    return nan ? (A)std::numeric_limits<T>::quiet_NaN() : acc;  // NaN propagates, as in PyTorch
  };
  auto combine = [&](A a, A b) -> A {
    if (is_sum) return a + b;
    if (a != a || b != b) return a != a ? a : b;
    return is_max ? std::max(a, b) : std::min(a, b);
  };
  auto finish = [&](A acc) -> T {
    if (op == ReduceKind::mean) return (T)(acc / (A)g.num_red);
    return (T)acc;
  };

  const int threads = omp_get_max_threads();
  const int64_t work = g.num_out * g.num_red;
  if (g.num_out >= threads || work < cpu::kParallelGrain || g.num_red == 0) {
#pragma omp parallel for schedule(static) if (work >= cpu::kParallelGrain && !omp_in_parallel())
    for (int64_t o = 0; o < g.num_out; ++o) {
      int64_t base = offset_of(o, g.out_sizes, g.out_strides);
      od[o] = g.num_red == 0 ? (T)0 : finish(reduce_part(base, 0, g.num_red));
    }
    return;
  }
  // Few outputs, many inputs each: split every output's range over the threads.
  for (int64_t o = 0; o < g.num_out; ++o) {
    int64_t base = offset_of(o, g.out_sizes, g.out_strides);
    std::vector<A> partial((size_t)threads);
    // char, not bool: threads write their own flag at once, and std::vector<bool> packs the
    // flags into shared words (a data race that once dropped a thread's partial sum).
    std::vector<char> used((size_t)threads, 0);
    const int64_t chunk = (g.num_red + threads - 1) / threads;
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num();
      int64_t k0 = t * chunk, k1 = std::min(g.num_red, k0 + chunk);
      if (k0 < k1) {
        partial[(size_t)t] = reduce_part(base, k0, k1);
        used[(size_t)t] = 1;
      }
    }
    A acc = partial[0];
    for (int t = 1; t < threads; ++t)
      if (used[(size_t)t]) acc = combine(acc, partial[(size_t)t]);
    od[o] = finish(acc);
  }
}

void cpu_reduce(ReduceKind op, const Tensor& x, const Tensor& out) {
  dispatch_all(x.dtype(), "reduce", [&](auto zero) { reduce_typed<decltype(zero)>(op, x, out); });
}

// values/indices (keepdim, contiguous) of the max or min along `dim`; first index wins ties;
// a NaN wins over everything (as PyTorch).
template <class T>
void arg_reduce_typed(bool is_max, const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices) {
  const T* xd = x.data<T>();
  T* vd = values.data<T>();
  int64_t* id = indices.data<int64_t>();
  const int64_t n = x.dim() == 0 ? 1 : x.shape()[dim];
  const int64_t step = x.dim() == 0 ? 0 : x.strides()[dim];
  std::vector<int64_t> sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) {
      sizes.push_back(x.shape()[d]);
      strides.push_back(x.strides()[d]);
    }
  const int64_t outs = values.numel();
#pragma omp parallel for schedule(static) if (outs * n >= cpu::kParallelGrain)
  for (int64_t o = 0; o < outs; ++o) {
    const T* p = xd + offset_of(o, sizes, strides);
    T best = p[0];
    int64_t best_i = 0;
    for (int64_t i = 1; i < n && best == best; ++i) {
      T v = p[i * step];
      if (v != v || (is_max ? v > best : v < best)) {
        best = v;
        best_i = i;
      }
    }
    vd[o] = best;
    id[o] = best_i;
  }
}

void cpu_arg_reduce(bool is_max, const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices) {
  dispatch_all(x.dtype(), "max/min",
      [&](auto zero) { arg_reduce_typed<decltype(zero)>(is_max, x, dim, values, indices); });
}

}  // namespace

void register_cpu_reduce(TensorBackend& b) {
  b.reduce = cpu_reduce;
  b.arg_reduce = cpu_arg_reduce;
}

}  // namespace ocrt
