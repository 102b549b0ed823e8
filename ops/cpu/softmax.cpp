// CPU softmax and log-softmax along one dim, and their backward.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/backend.h"
#include "runtime/cpu/loops.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/cpu_isa.h"
#include "runtime/strided.h"

namespace ocrt {

namespace {

#if defined(OCRT_SIMD_MATH)
// One float32 row of n contiguous values (softmax over the last dim: attention's scores) on
// 8 lanes: exp once per value (the general loop below takes it twice, once in double), the sum
// in float32 lanes (relative error at most about n/8 u beyond exp8's), then one scale. exp8
// clamps its argument at -87.3, so values that far below the row's max give 0 here, as
// std::exp's underflow would (a masked score, -inf, gives exactly 0).
OCRT_TARGET_AVX2 void softmax_row_lanes(bool log, const float* p, float* q, int64_t n) {
  const float inf = std::numeric_limits<float>::infinity();
  __m256 m8 = _mm256_set1_ps(-inf);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(p + k));  // a NaN stays
  float lanes[8];
  _mm256_storeu_ps(lanes, m8);
  float m = -inf;
  for (float v : lanes) m = v != v ? v : std::max(m, v);
  for (; k < n; ++k) m = p[k] != p[k] ? p[k] : std::max(m, p[k]);
  const __m256 mv = _mm256_set1_ps(m), floor = _mm256_set1_ps(-87.3f);
  __m256 s8 = _mm256_setzero_ps();
  for (k = 0; k + 8 <= n; k += 8) {
    // exp(d) for d <= 0, exactly 0 below -87.3 (not a lambda: it would not be compiled for AVX2)
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(p + k), mv);
    const __m256 e = _mm256_and_ps(simd::exp8(d), _mm256_cmp_ps(d, floor, _CMP_GE_OQ));
    s8 = _mm256_add_ps(s8, e);
    if (!log) _mm256_storeu_ps(q + k, e);
  }
  _mm256_storeu_ps(lanes, s8);
  double s = 0;
  for (float v : lanes) s += v;
  for (; k < n; ++k) {
    const float e = std::exp(p[k] - m);
    s += e;
    if (!log) q[k] = e;
  }
  if (log) {
    const float lse = (float)std::log(s);
    const __m256 shift = _mm256_set1_ps(m + lse);
    for (k = 0; k + 8 <= n; k += 8) _mm256_storeu_ps(q + k, _mm256_sub_ps(_mm256_loadu_ps(p + k), shift));
    for (; k < n; ++k) q[k] = p[k] - (m + lse);
  } else {
    const float inv = (float)(1.0 / s);
    const __m256 iv = _mm256_set1_ps(inv);
    for (k = 0; k + 8 <= n; k += 8) _mm256_storeu_ps(q + k, _mm256_mul_ps(_mm256_loadu_ps(q + k), iv));
    for (; k < n; ++k) q[k] *= inv;
  }
}
#endif

// Softmax over `dim` of a contiguous tensor viewed as (outer, n, inner) (around_dim,
// runtime/strided.h). Subtracting the row
// max keeps exp() in range for any input.
template <class T>
void softmax_typed(bool log, const Tensor& x, int64_t dim, const Tensor& y) {
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  const AroundDim split = around_dim(x, dim);
  const int64_t outer = split.outer, n = split.n, inner = split.inner;
#if defined(OCRT_SIMD_MATH)
  if constexpr (std::is_same_v<T, float>) {
    if (inner == 1 && n >= 8 && cpu_isa() >= CpuIsa::avx2) {
#pragma omp parallel for schedule(static) if (x.numel() >= cpu::kParallelGrain)
      for (int64_t o = 0; o < outer; ++o) softmax_row_lanes(log, xd + o * n, yd + o * n, n);
      return;
    }
  }
#endif
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
