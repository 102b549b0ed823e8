// CUDA random-number kernels: element i of `out` is computed from philox4x32_10(seed, i,
// offset) exactly as runtime/cpu/random.cpp describes (the same words, the same conversions, fma
// for the final scaling), so a seed gives the same tensor on the CPU and on any GPU. Box-Muller
// runs in double on both sides; CUDA's double log/sqrt/cos are accurate to an ulp or two of
// the CPU's, so after rounding to float32 the values agree (tests/cuda/test_parity_core.cpp).
#include "runtime/cuda/common.cuh"
#include "runtime/rng.h"

namespace ocrt {

namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;

__device__ __forceinline__ float uniform_value(const Philox4x32& r, float lo, float span) {
  return fmaf(span, uint_to_unit_float(r.v[0]), lo);
}
__device__ __forceinline__ double uniform_value(const Philox4x32& r, double lo, double span) {
  return fma(span, uints_to_unit_double_open0(r.v[0], r.v[1]) - kTwoToMinus53, lo);
}
__device__ __forceinline__ double standard_normal(const Philox4x32& r) {
  double u1 = uints_to_unit_double_open0(r.v[0], r.v[1]);
  double u2 = uints_to_unit_double_open0(r.v[2], r.v[3]) - kTwoToMinus53;
  return sqrt(-2.0 * log(u1)) * cos(kTwoPi * u2);
}

template <class T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, T lo, T span) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = uniform_value(philox4x32_10(seed, (uint64_t)i, offset), lo, span);
}

template <class T>
__global__ void normal_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, double mean, double stddev) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    out[i] = (T)fma(stddev, standard_normal(philox4x32_10(seed, (uint64_t)i, offset)), mean);
}

void cuda_uniform(const Tensor& out, uint64_t seed, uint64_t offset, double lo, double hi) {
  cuda::DeviceScope ds(out);
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_float(out.dtype(), "uniform", [&](auto zero) {
    using T = decltype(zero);
    uniform_kernel<T><<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(
        out.data<T>(), n, seed, offset, (T)lo, (T)(hi - lo));
  });
  OCRT_CUDA_LAUNCH_CHECK("uniform", ds.device);
}

void cuda_normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double stddev) {
  cuda::DeviceScope ds(out);
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_float(out.dtype(), "normal", [&](auto zero) {
    using T = decltype(zero);
    normal_kernel<T><<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(out.data<T>(), n, seed, offset, mean,
                                                                          stddev);
  });
  OCRT_CUDA_LAUNCH_CHECK("normal", ds.device);
}

}  // namespace

void register_cuda_random(TensorBackend& b) {
  b.uniform = cuda_uniform;
  b.normal = cuda_normal;
}

}  // namespace ocrt
