// Plain-loop references for the reductions of runtime/cpu/reduce.cpp: every element of x is
// visited once, in row-major order, and folded into the output its kept coordinates name, in
// float64. The CPU and CUDA kernels are tested against these (tests/ops/test_reduce.cpp,
// tests/cuda/test_parity_core.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/backend.h"

namespace ocrt::reference {

// x (a row-major array of `shape`) reduced over the dims with reduced[d] set: the result has
// x's rank with size 1 in the reduced dims (keepdim layout). sum and mean add; max and min keep
// the extreme value, and a NaN anywhere in an output's inputs makes that output NaN (PyTorch).
// An empty reduction gives 0.
inline std::vector<double> reduce(ReduceKind kind, const std::vector<double>& x, const std::vector<int64_t>& shape,
                                  const std::vector<bool>& reduced) {
  const size_t nd = shape.size();
  std::vector<int64_t> out_shape(shape);
  int64_t num_out = 1, per_out = 1;
  for (size_t d = 0; d < nd; ++d) {
    if (reduced[d]) out_shape[d] = 1, per_out *= shape[d];
    num_out *= out_shape[d];
  }
  const bool sums = kind == ReduceKind::sum || kind == ReduceKind::mean;
  std::vector<double> out((size_t)num_out, sums ? 0.0 : std::numeric_limits<double>::quiet_NaN());
  std::vector<bool> seen((size_t)num_out, false);
  std::vector<int64_t> at(nd, 0);  // x's coordinates, row-major
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < nd; ++d) o = o * out_shape[d] + (reduced[d] ? 0 : at[d]);
    double& r = out[(size_t)o];
    const double v = x[i];
    if (sums) r += v;
    else if (!seen[(size_t)o] || std::isnan(v)) r = v;
    else if (!std::isnan(r) && (kind == ReduceKind::max ? v > r : v < r)) r = v;
    seen[(size_t)o] = true;
    for (size_t d = nd; d-- > 0;) {  // the next coordinates
      if (++at[d] < shape[d]) break;
      at[d] = 0;
    }
  }
  if (kind == ReduceKind::mean && per_out > 0)
    for (double& r : out) r /= (double)per_out;
  if (per_out == 0) std::fill(out.begin(), out.end(), 0.0);
  return out;
}

// The max (or min) of x along dim and its index, keepdim layout: the first index wins a tie and
// the first NaN wins over everything.
inline void arg_reduce(bool is_max, const std::vector<double>& x, const std::vector<int64_t>& shape, size_t dim,
                       std::vector<double>& values, std::vector<int64_t>& indices) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[dim];
  values.assign((size_t)(outer * inner), 0.0);
  indices.assign((size_t)(outer * inner), 0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double best = x[(size_t)(o * n * inner + i)];
      int64_t best_k = 0;
      for (int64_t k = 1; k < n && !std::isnan(best); ++k) {
        const double v = x[(size_t)((o * n + k) * inner + i)];
        if (std::isnan(v) || (is_max ? v > best : v < best)) best = v, best_k = k;
      }
      values[(size_t)(o * inner + i)] = best;
      indices[(size_t)(o * inner + i)] = best_k;
    }
}

}  // namespace ocrt::reference
