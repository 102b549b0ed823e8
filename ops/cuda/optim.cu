// One Adam / AdamW step on CUDA, fused (ops/backend.h's adam_step): one kernel per parameter
// instead of a dozen elementwise kernels and the one-value fills of their constants (on an
// H100, AdamW and zero_grad took 3.5 ms of a 24 ms crnn training step that way:
// bench/results/gpu-profile-h100.md). The twin of ops/cpu/optim.cpp, rounding as it does: every
// operation through the round-to-nearest intrinsics (__fmul_rn, __fadd_rn, __fdiv_rn,
// __fsqrt_rn and their double forms), which the compiler never fuses into an FMA, so the step
// equals the CPU's bit for bit (tests/cuda/test_optim.cpp). And a gradient's float64 sum of
// squares (sum_squares).
#include <algorithm>
#include <cstdint>

#include "ops/backend.h"
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/cuda_glue.h"

namespace ocrt {

namespace {

__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double div_rn(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ double sqrt_rn(double a) { return __dsqrt_rn(a); }

// The step's constants, rounded to T on the host as the CPU rounds them.
template <class T>
struct AdamConsts {
  T decay, wd, beta1, beta2, rest1, rest2, sqrt_bias2, eps, neg_step;
  bool decoupled, coupled;
};

template <class T>
__global__ void adam_step_kernel(AdamConsts<T> c, T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m,
                                 T* __restrict__ v, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
    T pi = p[i];
    if (c.decoupled) pi = mul_rn(pi, c.decay);
    T gi = g[i];
    if (c.coupled) gi = add_rn(gi, mul_rn(pi, c.wd));
    const T mi = add_rn(mul_rn(m[i], c.beta1), mul_rn(gi, c.rest1));
    const T vi = add_rn(mul_rn(v[i], c.beta2), mul_rn(mul_rn(gi, gi), c.rest2));
    const T denom = add_rn(div_rn(sqrt_rn(vi), c.sqrt_bias2), c.eps);
    p[i] = add_rn(pi, mul_rn(div_rn(mi, denom), c.neg_step));
    m[i] = mi;
    v[i] = vi;
  }
}

void cuda_adam_step(const AdamStepParams& a, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v) {
  const cuda::DeviceScope ds(p);
  const int64_t n = p.numel();
  if (n == 0) return;
  dispatch_float(p.dtype(), "adam_step", [&](auto zero) {
    using T = decltype(zero);
    const AdamConsts<T> c{(T)a.decay, (T)a.weight_decay, (T)a.beta1, (T)a.beta2, (T)(1 - a.beta1), (T)(1 - a.beta2),
                          (T)a.sqrt_bias2, (T)a.eps, (T)(-a.step_size), a.decay != 1, a.weight_decay != 0};
    adam_step_kernel<T><<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(c, p.data<T>(), g.data<T>(), m.data<T>(),
                                                                             v.data<T>(), n);
  });
  OCRT_CUDA_LAUNCH_CHECK("adam_step", ds.device);
}

// The sum of x's squares in float64 (ops/backend.h's sum_squares): each of a fixed number of
// blocks sums a grid-stride share in double and writes its partial sum; one block adds the
// partials (a fixed tree); the host reads the one value. The same grid for a given n, so the
// same sum every time (it differs from the CPU's only in the order of float64 additions).
constexpr int kSquareBlocks = 256;
using cuda::block_sum;

template <class T>
__global__ void squares_partial_kernel(const T* __restrict__ x, int64_t n, double* __restrict__ part) {
  __shared__ double scratch[32];
  double s = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
    const double v = (double)x[i];
    s += v * v;
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

__global__ void squares_final_kernel(const double* __restrict__ part, int blocks, double* __restrict__ out) {
  __shared__ double scratch[32];
  double s = 0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) s += part[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) *out = s;
}

double cuda_sum_squares(const Tensor& x) {
  OCRT_CHECK(x.is_contiguous(), "sum_squares: expected a contiguous tensor");
  const cuda::DeviceScope ds(x);
  const int64_t n = x.numel();
  if (n == 0) return 0;
  const Tensor part = Tensor::empty({kSquareBlocks + 1}, DType::f64, x.device());
  double* p = part.data<double>();
  const int blocks = (int)std::min<int64_t>(kSquareBlocks, (n + cuda::kThreads - 1) / cuda::kThreads);
  dispatch_float(x.dtype(), "sum_squares", [&](auto zero) {
    using T = decltype(zero);
    squares_partial_kernel<T><<<blocks, cuda::kThreads, 0, ds.stream>>>(x.data<T>(), n, p);
  });
  squares_final_kernel<<<1, cuda::kThreads, 0, ds.stream>>>(p, blocks, p + kSquareBlocks);
  OCRT_CUDA_LAUNCH_CHECK("sum_squares", ds.device);
  double total = 0;
  cuda_copy_to_host(ds.device, &total, p + kSquareBlocks, sizeof(double));
  return total;
}

}  // namespace

void register_cuda_optim(LayerBackend& b) {
  b.adam_step = cuda_adam_step;
  b.sum_squares = cuda_sum_squares;
}

}  // namespace ocrt
