// The CPU loop driver for elementwise work over strided tensors.
//
// for_each_run() visits N same-shaped tensors (any strides, including stride 0 for broadcast)
// as a set of 1-D runs: it merges dims that are laid out back to back, then calls
//     f(ptrs, strides, n)
// where ptrs[k] is tensor k's first element of the run (as char*), strides[k] its stride in
// elements along the run, and n the run length. The functor does the inner loop; when every
// stride is 1 (the common, contiguous case) it should take a plain loop that the compiler
// vectorises. Runs are spread over OpenMP threads when there is enough work.
#pragma once
#include <omp.h>

#include <array>
#include <cstdint>
#include <vector>

#include "runtime/strided.h"
#include "runtime/tensor.h"

namespace ocrt::cpu {

// Below this many elements a loop runs on one thread: waking threads costs more than it saves.
constexpr int64_t kParallelGrain = 32768;

template <size_t N, class F>
void for_each_run(const std::array<Tensor, N>& ts, F&& f) {
  const Shape& shape = ts[0].shape();
  const int64_t total = numel_of(shape);
  if (total == 0) return;

  // Merge dims laid out back to back (runtime/strided.h): a contiguous tensor is one run.
  const MergedDims<N> merged = merge_dims(ts);
  const std::vector<int64_t>& sizes = merged.sizes;
  const std::vector<std::array<int64_t, N>>& strides = merged.strides;

  std::array<char*, N> base;
  std::array<int64_t, N> itemsize;
  for (size_t k = 0; k < N; ++k) {
    base[k] = static_cast<char*>(ts[k].raw_data());
    itemsize[k] = (int64_t)ts[k].itemsize();
  }
  if (sizes.empty()) {  // a single element
    std::array<int64_t, N> ones;
    ones.fill(1);
    f(base, ones, int64_t(1));
    return;
  }

  const int64_t inner = sizes.back();
  const std::array<int64_t, N> inner_stride = strides.back();
  const int64_t rows = total / inner;
  const int outer_dims = (int)sizes.size() - 1;

  // One row: unravel its index over the outer dims to find each tensor's start.
  auto run_row = [&](int64_t row) {
    std::array<char*, N> p = base;
    int64_t r = row;
    for (int d = outer_dims - 1; d >= 0; --d) {
      int64_t i = r % sizes[d];
      r /= sizes[d];
      for (size_t k = 0; k < N; ++k) p[k] += i * strides[d][k] * itemsize[k];
    }
    f(p, inner_stride, inner);
  };

  if (total < kParallelGrain || omp_get_max_threads() == 1 || omp_in_parallel()) {
    for (int64_t row = 0; row < rows; ++row) run_row(row);
  } else if (rows == 1) {
    // One long run: split it into chunks, one per thread.
    const int64_t chunk = (inner + omp_get_max_threads() - 1) / omp_get_max_threads();
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < inner; c += chunk) {
      std::array<char*, N> p = base;
      for (size_t k = 0; k < N; ++k) p[k] += c * inner_stride[k] * itemsize[k];
      f(p, inner_stride, std::min(chunk, inner - c));
    }
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; ++row) run_row(row);
  }
}

// True when every stride is 1: the functor's contiguous fast path.
// The offset of flat (row-major) index i over `sizes`, walking `strides`: element i of a
// strided view (the reductions' and the gathers' general loops).
inline int64_t offset_of(int64_t i, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (int64_t d = (int64_t)sizes.size() - 1; d >= 0; --d) {
    off += (i % sizes[d]) * strides[d];
    i /= sizes[d];
  }
  return off;
}

template <size_t N>
inline bool all_unit(const std::array<int64_t, N>& s) {
  for (int64_t x : s)
    if (x != 1) return false;
  return true;
}

// The float64 sum of f(i) for i < n, in kSumLanes running sums added up at the end: the
// compiler makes the independent lanes vector instructions, where one running sum (each addition
// waiting for the one before) stays scalar. The order is fixed by n alone. For reductions that
// keep float64 sums (a gradient's squares, BatchNorm's statistics).
constexpr int kSumLanes = 8;
template <class F>
double lane_sum(int64_t n, F&& f) {
  double lane[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int j = 0; j < kSumLanes; ++j) lane[j] += f(i + j);
  double total = 0;
  for (; i < n; ++i) total += f(i);
  for (int j = 0; j < kSumLanes; ++j) total += lane[j];
  return total;
}

}  // namespace ocrt::cpu
