// One Adam / AdamW step on the CPU, fused (ops/backend.h's adam_step): one pass over the
// parameter, its gradient and its two moments instead of a dozen elementwise passes; and the
// float64 sum of a gradient's squares for its norm (sum_squares).
//
// Every operation rounds to the parameter's dtype in the order train/optim.cpp's composite of
// elementwise ops used (and torch.optim uses), with the constants rounded to the dtype first:
// this file is compiled with -ffp-contract=off (CMakeLists.txt), so no product is fused into a
// following sum and the fused step takes the composite's steps bit for bit (tests/train/
// test_optim.cpp checks it). The CUDA kernel (ops/cuda/optim.cu) rounds the same way.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "ops/backend.h"
#include "runtime/cpu/loops.h"

namespace ocrt {

namespace {

// One run of n values (the loop driver's split of the parameter over threads).
template <class T>
void adam_run(const AdamStepParams& a, T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
              int64_t n) {
  const T decay = (T)a.decay, wd = (T)a.weight_decay, beta1 = (T)a.beta1, beta2 = (T)a.beta2;
  const T rest1 = (T)(1 - a.beta1), rest2 = (T)(1 - a.beta2), sqrt_bias2 = (T)a.sqrt_bias2, eps = (T)a.eps;
  const T neg_step = (T)(-a.step_size);
  const bool decoupled = a.decay != 1, coupled = a.weight_decay != 0;
  for (int64_t i = 0; i < n; ++i) {
    T pi = p[i];
    if (decoupled) pi = pi * decay;
    T gi = g[i];
    if (coupled) gi = gi + pi * wd;
    T mi = m[i] * beta1;
    mi = mi + gi * rest1;
    T vi = v[i] * beta2;
    vi = vi + (gi * gi) * rest2;
    const T denom = std::sqrt(vi) / sqrt_bias2 + eps;
    p[i] = pi + (mi / denom) * neg_step;
    m[i] = mi;
    v[i] = vi;
  }
}

// The four tensors are contiguous and of one shape (the entry's contract), so the loop driver
// sees one run of stride 1, which it splits over the threads when it is long enough.
void cpu_adam_step(const AdamStepParams& a, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v) {
  dispatch_float(p.dtype(), "adam_step", [&](auto zero) {
    using T = decltype(zero);
    cpu::for_each_run<4>({p, g, m, v}, [&](std::array<char*, 4> at, std::array<int64_t, 4>, int64_t n) {
      adam_run<T>(a, reinterpret_cast<T*>(at[0]), reinterpret_cast<const T*>(at[1]), reinterpret_cast<T*>(at[2]),
                  reinterpret_cast<T*>(at[3]), n);
    });
  });
}

// In chunks of a fixed size, whatever the thread count, their sums added in order: the same
// float64 result on 1 thread or 16.
double cpu_sum_squares(const Tensor& x) {
  OCRT_CHECK(x.is_contiguous() && x.device().is_cpu(), "sum_squares: expected a contiguous CPU tensor");
  constexpr int64_t kChunk = int64_t(1) << 15;
  const int64_t n = x.numel(), chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part((size_t)chunks);
  dispatch_float(x.dtype(), "sum_squares", [&](auto zero) {
    using T = decltype(zero);
    const T* data = x.data<T>();
#pragma omp parallel for schedule(static) if (chunks > 1 && !omp_in_parallel())
    for (int64_t c = 0; c < chunks; ++c)
      part[(size_t)c] = cpu::lane_sum(std::min(kChunk, n - c * kChunk), [x = data + c * kChunk](int64_t i) {
        const double v = (double)x[i];
        return v * v;
      });
  });
  double total = 0;
  for (const double p : part) total += p;
  return total;
}

}  // namespace

void register_cpu_optim(LayerBackend& b) {
  b.adam_step = cpu_adam_step;
  b.sum_squares = cpu_sum_squares;
}

}  // namespace ocrt
