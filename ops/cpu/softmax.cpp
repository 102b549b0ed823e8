// CPU softmax and log-softmax along one dim, and their backward.
#include <cmath>
#include <limits>

#include "ops/backend.h"
#include "runtime/cpu/loops.h"
#include "runtime/strided.h"

namespace ocrt {

namespace {

// Softmax over `dim` of a contiguous tensor viewed as (outer, n, inner) (around_dim,
// runtime/strided.h). Subtracting the row
// max keeps exp() in range for any input.
template <class T>
void softmax_typed(bool log, const Tensor& x, int64_t dim, const Tensor& y) {
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  const AroundDim split = around_dim(x, dim);
  const int64_t outer = split.outer, n = split.n, inner = split.inner;
#pragma omp parallel for collapse(2) schedule(static) if (x.numel() >= cpu::kParallelGrain)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T* p = xd + o * n * inner + i;
      T* q = yd + o * n * inner + i;
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t k = 0; k < n; ++k) m = std::max(m, p[k * inner]);
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += std::exp((double)(p[k * inner] - m));
      if (log) {
        T lse = (T)std::log(s);
        for (int64_t k = 0; k < n; ++k) q[k * inner] = p[k * inner] - m - lse;
      } else {
        T inv = (T)(1.0 / s);
        for (int64_t k = 0; k < n; ++k) q[k * inner] = std::exp(p[k * inner] - m) * inv;
      }
    }
}

template <class T>
void softmax_backward_typed(bool log, const Tensor& y, const Tensor& dy, int64_t dim, const Tensor& dx) {
  const T* yd = y.data<T>();
  const T* gd = dy.data<T>();
  T* dd = dx.data<T>();
  const AroundDim split = around_dim(y, dim);
  const int64_t outer = split.outer, n = split.n, inner = split.inner;
#pragma omp parallel for collapse(2) schedule(static) if (y.numel() >= cpu::kParallelGrain)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      double s = 0;
      if (log) {
        for (int64_t k = 0; k < n; ++k) s += gd[base + k * inner];
        for (int64_t k = 0; k < n; ++k)
          dd[base + k * inner] = gd[base + k * inner] - std::exp(yd[base + k * inner]) * (T)s;
      } else {
        for (int64_t k = 0; k < n; ++k) s += (double)gd[base + k * inner] * yd[base + k * inner];
        for (int64_t k = 0; k < n; ++k)
          dd[base + k * inner] = yd[base + k * inner] * (gd[base + k * inner] - (T)s);
      }
    }
}

void cpu_softmax(bool log, const Tensor& x, int64_t dim, const Tensor& y) {
  dispatch_float(x.dtype(), "softmax", [&](auto zero) { softmax_typed<decltype(zero)>(log, x, dim, y); });
}

void cpu_softmax_backward(bool log, const Tensor& y, const Tensor& dy, int64_t dim, const Tensor& dx) {
  dispatch_float(y.dtype(), "softmax_backward",
      [&](auto zero) { softmax_backward_typed<decltype(zero)>(log, y, dy, dim, dx); });
}

}  // namespace

void register_cpu_softmax(LayerBackend& b) {
  b.softmax = cpu_softmax;
  b.softmax_backward = cpu_softmax_backward;
}

}  // namespace ocrt
