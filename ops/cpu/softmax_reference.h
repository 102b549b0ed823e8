// Plain-loop references for softmax and log-softmax along one dim, and their backward, in
// float64. The CPU and CUDA kernels are tested against these (tests/ops/test_reduce.cpp,
// tests/cuda/test_parity_core.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ocrt::reference {

// x viewed as (outer, n, inner), softmax over the middle dim: for each (o, i),
//   y[o, k, i] = exp(x[o, k, i] - m) / sum over k' of exp(x[o, k', i] - m),  m = max over k
// (subtracting the maximum changes nothing mathematically and keeps exp() finite);
// log_softmax: y = x - m - log(sum of exp(x - m)).
template <class T>
void softmax(bool log, const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * n + k) * inner + i; };
      double m = -INFINITY, sum = 0;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, (double)x[at(k)]);
      for (int64_t k = 0; k < n; ++k) sum += std::exp((double)x[at(k)] - m);
      for (int64_t k = 0; k < n; ++k)
        y[at(k)] = (T)(log ? (double)x[at(k)] - m - std::log(sum) : std::exp((double)x[at(k)] - m) / sum);
    }
}

// The backward from the saved output y:
//   softmax:     dx = y * (dy - sum over k of dy * y)
//   log_softmax: dx = dy - exp(y) * sum over k of dy
template <class T>
void softmax_backward(bool log, const T* y, const T* dy, T* dx, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * n + k) * inner + i; };
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += log ? (double)dy[at(k)] : (double)dy[at(k)] * (double)y[at(k)];
      for (int64_t k = 0; k < n; ++k)
        dx[at(k)] = (T)(log ? (double)dy[at(k)] - std::exp((double)y[at(k)]) * s
                            : (double)y[at(k)] * ((double)dy[at(k)] - s));
    }
}

}  // namespace ocrt::reference
