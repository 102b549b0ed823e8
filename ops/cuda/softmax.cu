// CUDA softmax and log-softmax along one dim, and their backward; the counterpart of
// ops/cpu/softmax.cpp.
#include <cmath>
#include <cstdint>

#include "ops/backend.h"
#include "runtime/cuda/common.cuh"
#include "runtime/strided.h"

namespace ocrt {

namespace {

// ---- softmax over `dim` of a contiguous tensor viewed as (outer, n, inner).

// inner == 1 (softmax over the last dim, the common case): one warp per row.
template <class T>
__global__ void softmax_rows_kernel(bool log_out, const T* x, T* y, int64_t rows, int64_t n) {
  const int lane = threadIdx.x & 31;
  const int64_t warps_per_block = blockDim.x >> 5;
  for (int64_t r = blockIdx.x * warps_per_block + (threadIdx.x >> 5); r < rows; r += (int64_t)gridDim.x * warps_per_block) {
    const T* p = x + r * n;
    T* q = y + r * n;
    T m = -INFINITY;
    for (int64_t k = lane; k < n; k += 32) m = p[k] > m ? p[k] : m;
    m = cuda::warp_max(m);
    double s = 0;
    for (int64_t k = lane; k < n; k += 32) s += exp((double)(p[k] - m));
    s = cuda::warp_sum(s);
    if (log_out) {
      const T lse = (T)::log(s);
      for (int64_t k = lane; k < n; k += 32) q[k] = p[k] - m - lse;
    } else {
      const T inv = (T)(1.0 / s);
      for (int64_t k = lane; k < n; k += 32) q[k] = exp(p[k] - m) * inv;
    }
  }
}

// inner > 1: one thread per (outer, inner) column; neighbouring threads read neighbouring
// addresses.
template <class T>
__global__ void softmax_cols_kernel(bool log_out, const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < outer * inner; c += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = c / inner, i = c - o * inner;
    const T* p = x + o * n * inner + i;
    T* q = y + o * n * inner + i;
    T m = -INFINITY;
    for (int64_t k = 0; k < n; ++k) m = p[k * inner] > m ? p[k * inner] : m;
    double s = 0;
    for (int64_t k = 0; k < n; ++k) s += exp((double)(p[k * inner] - m));
    if (log_out) {
      const T lse = (T)::log(s);
      for (int64_t k = 0; k < n; ++k) q[k * inner] = p[k * inner] - m - lse;
    } else {
      const T inv = (T)(1.0 / s);
      for (int64_t k = 0; k < n; ++k) q[k * inner] = exp(p[k * inner] - m) * inv;
    }
  }
}

template <class T>
__global__ void softmax_backward_rows_kernel(bool log_out, const T* y, const T* dy, T* dx, int64_t rows, int64_t n) {
  const int lane = threadIdx.x & 31;
  const int64_t warps_per_block = blockDim.x >> 5;
  for (int64_t r = blockIdx.x * warps_per_block + (threadIdx.x >> 5); r < rows; r += (int64_t)gridDim.x * warps_per_block) {
    const T* yp = y + r * n;
    const T* gp = dy + r * n;
    T* dp = dx + r * n;
    double s = 0;
    if (log_out) {
      for (int64_t k = lane; k < n; k += 32) s += gp[k];
      s = cuda::warp_sum(s);
      for (int64_t k = lane; k < n; k += 32) dp[k] = gp[k] - exp(yp[k]) * (T)s;
    } else {
      for (int64_t k = lane; k < n; k += 32) s += (double)gp[k] * yp[k];
      s = cuda::warp_sum(s);
      for (int64_t k = lane; k < n; k += 32) dp[k] = yp[k] * (gp[k] - (T)s);
    }
  }
}

template <class T>
__global__ void softmax_backward_cols_kernel(bool log_out, const T* y, const T* dy, T* dx, int64_t outer, int64_t n,
                                             int64_t inner) {
  for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < outer * inner; c += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = c / inner, i = c - o * inner;
    const int64_t base = o * n * inner + i;
    double s = 0;
    if (log_out) {
      for (int64_t k = 0; k < n; ++k) s += dy[base + k * inner];
      for (int64_t k = 0; k < n; ++k) dx[base + k * inner] = dy[base + k * inner] - exp(y[base + k * inner]) * (T)s;
    } else {
      for (int64_t k = 0; k < n; ++k) s += (double)dy[base + k * inner] * y[base + k * inner];
      for (int64_t k = 0; k < n; ++k) dx[base + k * inner] = y[base + k * inner] * (dy[base + k * inner] - (T)s);
    }
  }
}

void cuda_softmax(bool log_out, const Tensor& x, int64_t dim, const Tensor& y) {
  cuda::DeviceScope ds(y);
  const AroundDim s = around_dim(x, dim);  // runtime/strided.h
  if (s.outer * s.inner == 0) return;
  dispatch_float(x.dtype(), "softmax", [&](auto zero) {
    using T = decltype(zero);
    if (s.inner == 1)
      softmax_rows_kernel<T><<<cuda::grid_for(s.outer * 32), cuda::kThreads, 0, ds.stream>>>(
          log_out, x.data<T>(), y.data<T>(), s.outer, s.n);
    else
      softmax_cols_kernel<T><<<cuda::grid_for(s.outer * s.inner), cuda::kThreads, 0, ds.stream>>>(
          log_out, x.data<T>(), y.data<T>(), s.outer, s.n, s.inner);
  });
  OCRT_CUDA_LAUNCH_CHECK("softmax", ds.device);
}

void cuda_softmax_backward(bool log_out, const Tensor& y, const Tensor& dy, int64_t dim, const Tensor& dx) {
  cuda::DeviceScope ds(dx);
  const AroundDim s = around_dim(y, dim);  // runtime/strided.h
  if (s.outer * s.inner == 0) return;
  dispatch_float(y.dtype(), "softmax_backward", [&](auto zero) {
    using T = decltype(zero);
    if (s.inner == 1)
      softmax_backward_rows_kernel<T><<<cuda::grid_for(s.outer * 32), cuda::kThreads, 0, ds.stream>>>(
          log_out, y.data<T>(), dy.data<T>(), dx.data<T>(), s.outer, s.n);
    else
      softmax_backward_cols_kernel<T><<<cuda::grid_for(s.outer * s.inner), cuda::kThreads, 0, ds.stream>>>(
          log_out, y.data<T>(), dy.data<T>(), dx.data<T>(), s.outer, s.n, s.inner);
  });
  OCRT_CUDA_LAUNCH_CHECK("softmax_backward", ds.device);
}

}  // namespace

void register_cuda_softmax(LayerBackend& b) {
  b.softmax = cuda_softmax;
  b.softmax_backward = cuda_softmax_backward;
}

}  // namespace ocrt
