// Batch and layer normalisation on CUDA, mirroring ops/cpu/norm.cpp (the plain-loop reference,
// whose header comment derives the formulas used here). As on the CPU, every statistic and
// gradient sum accumulates in double and the variance is the biased one, computed in two
// passes (no cancellation when |mean| >> std); only the summation order differs (a tree
// within a block instead of a sequential loop).
//
// Work split, all deterministic (no atomics):
//   batch norm  x (N,C,S): one block per channel for the statistics and the backward (the
//               block walks the flat (n, s) index, so reads are coalesced along S); the apply
//               step is a flat elementwise loop.
//   layer norm  x (M,D):   one block per row for the forward and dx; dweight / dbias are column
//               sums over the M rows, done in two stages: blocks of 32 columns x 8 row lanes sum
//               a chunk of rows each into a double partial, then one thread per column adds the
//               chunks' partials in chunk order.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ops/backend.h"
#include "runtime/cuda/common.cuh"

namespace ocrt {

namespace {

using cuda::block_sum;

constexpr int kStatThreads = 256;  // threads of a per-channel / per-row block

// A block count for a kernel that loops over `rows` independent rows (channels) with blockIdx.
unsigned grid_rows(int64_t rows) { return (unsigned)std::clamp<int64_t>(rows, 1, 65535); }

// Threads for a per-row block over D values: a multiple of 32 (block_sum needs whole warps),
// no more than the row needs, at most kStatThreads.
int threads_for_row(int64_t D) { return (int)std::clamp<int64_t>((D + 31) / 32 * 32, 32, kStatThreads); }

template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// ---------------------------------------------------------------------------- batch norm

// mean[c], var[c] (biased) of channel c of x (N,C,S) over its N*S values, in one read of x.
// A channel is cut into `chunks` slices of samples, one block each (so a few wide channels
// still fill the GPU); each block sums d = x - shift and d^2 in double, shift being the
// channel's first value, which keeps E[d^2] - E[d]^2 free of cancellation for any mean. A
// second tiny kernel adds the slices: mean = shift + E[d], var = E[d^2] - E[d]^2.
template <class T>
__global__ void bn_stats_partial_kernel(const T* __restrict__ x, int64_t N, int64_t C, int64_t S, int chunks,
                                        double* __restrict__ part) {
  __shared__ double scratch[32];
  const int64_t c = blockIdx.x;
  const int j = blockIdx.y;
  const int64_t per = (N + chunks - 1) / chunks;
  const int64_t n0 = j * per, n1 = min(N, n0 + per);
  const double shift = (double)x[c * S];
  double s1 = 0, s2 = 0;
  const int64_t count = n1 > n0 ? (n1 - n0) * S : 0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const int64_t n = n0 + k / S, s = k % S;
    const double d = (double)x[(n * C + c) * S + s] - shift;
    s1 += d;
    s2 += d * d;
  }
  s1 = block_sum(s1, scratch);
  s2 = block_sum(s2, scratch);
  if (threadIdx.x == 0) {
    part[(c * chunks + j) * 2] = s1;
    part[(c * chunks + j) * 2 + 1] = s2;
  }
}

template <class T>
__global__ void bn_stats_final_kernel(const T* __restrict__ x, const double* __restrict__ part, int64_t C, int64_t S,
                                      int chunks, int64_t count, T* __restrict__ mean, T* __restrict__ var) {
  for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < C; c += (int64_t)gridDim.x * blockDim.x) {
    double s1 = 0, s2 = 0;
    for (int j = 0; j < chunks; ++j) {
      s1 += part[(c * chunks + j) * 2];
      s2 += part[(c * chunks + j) * 2 + 1];
    }
    const double md = s1 / (double)count;
    mean[c] = (T)((double)x[c * S] + md);
    var[c] = (T)fmax(s2 / (double)count - md * md, 0.0);
  }
}

// y = x * scale[c] + shift[c], element by element over x (N,C,S) contiguous. scale and shift
// are formed in T exactly as on the CPU; weight w and bias b may be null.
template <class T>
__global__ void bn_apply_kernel(const T* __restrict__ x, const T* __restrict__ mean, const T* __restrict__ invstd,
                                const T* __restrict__ w, const T* __restrict__ b, int64_t total, int64_t C, int64_t S,
                                T* __restrict__ y) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = (i / S) % C;
    const T scale = invstd[c] * (w ? w[c] : T(1));
    const T shift = (b ? b[c] : T(0)) - mean[c] * scale;
    y[i] = x[i] * scale + shift;
  }
}

// The backward for channel c of dy (N,C,S), one block per channel: the two sums first (only if
// some output needs them), then dx in a second sweep. dx, dw, db may be null (not wanted).
template <class T>
__global__ void bn_backward_kernel(const T* __restrict__ x, const T* __restrict__ dy, const T* __restrict__ mean,
                                   const T* __restrict__ invstd, const T* __restrict__ w, bool training, int64_t N,
                                   int64_t C, int64_t S, T* __restrict__ dx, T* __restrict__ dw, T* __restrict__ db) {
  __shared__ double scratch[32];
  const int64_t count = N * S;
  // The same for the whole block, so every thread reaches block_sum or none does.
  const bool need_sums = dw || db || (dx && training);
  for (int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const double m = mean[c], inv = invstd[c];
    double sum_dy = 0, sum_dy_xhat = 0;
    if (need_sums) {
      for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
        const int64_t n = k / S, s = k - n * S, o = (n * C + c) * S + s;
        const double g = dy[o];
        sum_dy += g;
        sum_dy_xhat += g * (((double)x[o] - m) * inv);
      }
      sum_dy = block_sum(sum_dy, scratch);
      sum_dy_xhat = block_sum(sum_dy_xhat, scratch);
    }
    if (threadIdx.x == 0) {
      if (db) db[c] = (T)sum_dy;
      if (dw) dw[c] = (T)sum_dy_xhat;
    }
    if (!dx) continue;
    const double wc = w ? (double)w[c] : 1.0;
    // Eval: mean and invstd were constants, so only the direct term dy remains.
    const double mean_dy = training ? sum_dy / (double)count : 0;
    const double mean_dy_xhat = training ? sum_dy_xhat / (double)count : 0;
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      const int64_t n = k / S, s = k - n * S, o = (n * C + c) * S + s;
      const double xhat = ((double)x[o] - m) * inv;
      dx[o] = (T)(wc * inv * ((double)dy[o] - mean_dy - xhat * mean_dy_xhat));
    }
  }
}

template <class T>
void bn_stats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2);
  if (C == 0) return;
  cuda::DeviceScope scope(x);
  // About a thousand blocks in all, each with at least one sample.
  const int chunks = (int)std::clamp<int64_t>(1024 / C, 1, std::min<int64_t>(N, 65535));
  Tensor part = Tensor::empty({C * chunks * 2}, DType::f64, x.device());
  bn_stats_partial_kernel<T><<<dim3((unsigned)C, (unsigned)chunks), kStatThreads, 0, scope.stream>>>(
      x.data<T>(), N, C, S, chunks, part.data<double>());
  OCRT_CUDA_LAUNCH_CHECK("batch_norm", scope.device);
  bn_stats_final_kernel<T><<<cuda::grid_for(C), cuda::kThreads, 0, scope.stream>>>(
      x.data<T>(), part.data<double>(), C, S, chunks, N * S, mean.data<T>(), var.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("batch_norm", scope.device);
}

template <class T>
void bn_apply(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& bias,
              const Tensor& y) {
  const int64_t C = x.size(1), S = x.size(2), total = x.numel();
  if (total == 0) return;
  cuda::DeviceScope scope(x);
  bn_apply_kernel<T><<<cuda::grid_for(total), cuda::kThreads, 0, scope.stream>>>(
      x.data<T>(), mean.data<T>(), invstd.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias), total, C, S,
      y.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("batch_norm", scope.device);
}

template <class T>
void bn_backward(const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                 bool training, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t N = x.size(0), C = x.size(1), S = x.size(2);
  if (C == 0 || (!dx.defined() && !dweight.defined() && !dbias.defined())) return;
  cuda::DeviceScope scope(x);
  bn_backward_kernel<T><<<grid_rows(C), kStatThreads, 0, scope.stream>>>(
      x.data<T>(), dy.data<T>(), mean.data<T>(), invstd.data<T>(), data_or_null<T>(weight), training, N, C, S,
      data_or_null<T>(dx), data_or_null<T>(dweight), data_or_null<T>(dbias));
  OCRT_CUDA_LAUNCH_CHECK("batch_norm backward", scope.device);
}

// ---------------------------------------------------------------------------- layer norm

// Row i of x (M,D): mean, rstd = 1/sqrt(biased var + eps), y = xhat * w + b (in double, cast
// once, as on the CPU). One block per row; w and b may be null.
template <class T>
__global__ void ln_forward_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                                  double eps, int64_t M, int64_t D, T* __restrict__ y, T* __restrict__ mean,
                                  T* __restrict__ rstd) {
  __shared__ double scratch[32];
  for (int64_t i = blockIdx.x; i < M; i += gridDim.x) {
    const T* row = x + i * D;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) sum += (double)row[j];
    const double m = block_sum(sum, scratch) / (double)D;
    double sq = 0;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const double d = (double)row[j] - m;
      sq += d * d;
    }
    const double r = 1.0 / sqrt(block_sum(sq, scratch) / (double)D + eps);
    if (threadIdx.x == 0) {
      mean[i] = (T)m;
      rstd[i] = (T)r;
    }
    T* out = y + i * D;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const double v = ((double)row[j] - m) * r;
      out[j] = (T)(v * (w ? (double)w[j] : 1.0) + (b ? (double)b[j] : 0.0));
    }
  }
}

// dx for row i of dy (M,D), one block per row: the training formula with g = dy * weight inside
// the sums. mean and rstd are the saved (T-rounded) values, read as the CPU reads them.
template <class T>
__global__ void ln_backward_dx_kernel(const T* __restrict__ x, const T* __restrict__ dy, const T* __restrict__ mean,
                                      const T* __restrict__ rstd, const T* __restrict__ w, int64_t M, int64_t D,
                                      T* __restrict__ dx) {
  __shared__ double scratch[32];
  for (int64_t i = blockIdx.x; i < M; i += gridDim.x) {
    const T *row = x + i * D, *g = dy + i * D;
    const double m = mean[i], r = rstd[i];
    double sum_g = 0, sum_g_xhat = 0;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const double gj = (double)g[j] * (w ? (double)w[j] : 1.0);
      sum_g += gj;
      sum_g_xhat += gj * ((double)row[j] - m) * r;
    }
    const double mean_g = block_sum(sum_g, scratch) / (double)D;
    const double mean_g_xhat = block_sum(sum_g_xhat, scratch) / (double)D;
    T* out = dx + i * D;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const double gj = (double)g[j] * (w ? (double)w[j] : 1.0), xhat = ((double)row[j] - m) * r;
      out[j] = (T)(r * (gj - mean_g - xhat * mean_g_xhat));
    }
  }
}

// Column sums for dweight / dbias, stage 1. Block (kColTile, kRowLanes) covers columns
// [blockIdx.x * kColTile, +kColTile) of the rows in chunk blockIdx.y; lane threadIdx.y takes
// every kRowLanes-th row of the chunk, the lanes are then added in lane order. Writes
// part_w/part_b[chunk * D + j]: sum(dy * xhat) and sum(dy) over the chunk's rows.
constexpr int kColTile = 32, kRowLanes = 8;

template <class T>
__global__ void ln_param_partial_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                        const T* __restrict__ mean, const T* __restrict__ rstd, int64_t M, int64_t D,
                                        int64_t rows_per_chunk, double* __restrict__ part_w,
                                        double* __restrict__ part_b) {
  __shared__ double sw[kRowLanes][kColTile], sb[kRowLanes][kColTile];
  const int64_t j = (int64_t)blockIdx.x * kColTile + threadIdx.x, chunk = blockIdx.y;
  const int64_t begin = chunk * rows_per_chunk, end = min(M, begin + rows_per_chunk);
  double aw = 0, ab = 0;
  if (j < D) {
    for (int64_t i = begin + threadIdx.y; i < end; i += kRowLanes) {
      const double g = dy[i * D + j], m = mean[i], r = rstd[i];
      ab += g;
      aw += g * ((double)x[i * D + j] - m) * r;
    }
  }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && j < D) {
    double tw = 0, tb = 0;
    for (int k = 0; k < kRowLanes; ++k) {
      tw += sw[k][threadIdx.x];
      tb += sb[k][threadIdx.x];
    }
    part_w[chunk * D + j] = tw;
    part_b[chunk * D + j] = tb;
  }
}

// Stage 2: dweight[j], dbias[j] = the chunks' partials added in chunk order (either may be null).
template <class T>
__global__ void ln_param_final_kernel(const double* __restrict__ part_w, const double* __restrict__ part_b,
                                      int64_t chunks, int64_t D, T* __restrict__ dw, T* __restrict__ db) {
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < D; j += (int64_t)gridDim.x * blockDim.x) {
    double w = 0, b = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      w += part_w[k * D + j];
      b += part_b[k * D + j];
    }
    if (dw) dw[j] = (T)w;
    if (db) db[j] = (T)b;
  }
}

template <class T>
void ln_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                const Tensor& mean, const Tensor& rstd) {
  const int64_t M = x.size(0), D = x.size(1);
  if (M == 0) return;
  cuda::DeviceScope scope(x);
  ln_forward_kernel<T><<<grid_rows(M), threads_for_row(D), 0, scope.stream>>>(
      x.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias), eps, M, D, y.data<T>(), mean.data<T>(),
      rstd.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("layer_norm", scope.device);
}

template <class T>
void ln_backward(const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                 const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const int64_t M = x.size(0), D = x.size(1);
  if (D == 0) return;
  cuda::DeviceScope scope(x);
  if (dx.defined() && M > 0) {
    ln_backward_dx_kernel<T><<<grid_rows(M), threads_for_row(D), 0, scope.stream>>>(
        x.data<T>(), dy.data<T>(), mean.data<T>(), rstd.data<T>(), data_or_null<T>(weight), M, D, dx.data<T>());
    OCRT_CUDA_LAUNCH_CHECK("layer_norm backward", scope.device);
  }
  if (!dweight.defined() && !dbias.defined()) return;
  // Chunks of >= 64 rows (each row lane sums about 8 of them), at most 1024 chunks; the chunk
  // count depends only on M, so the result is the same on every run.
  int64_t chunks = std::clamp<int64_t>((M + 63) / 64, 1, 1024);
  const int64_t rows_per_chunk = std::max<int64_t>((M + chunks - 1) / chunks, 1);
  chunks = std::max<int64_t>((M + rows_per_chunk - 1) / rows_per_chunk, 1);
  // Scratch from the caching allocator: freed when this returns, and reused only by work queued
  // later on the same stream, so it outlives the two kernels below.
  const Tensor partial = Tensor::empty({2, chunks, D}, DType::f64, x.device());
  double* part_w = partial.data<double>();
  double* part_b = part_w + chunks * D;
  const dim3 grid((unsigned)((D + kColTile - 1) / kColTile), (unsigned)chunks), block(kColTile, kRowLanes);
  ln_param_partial_kernel<T><<<grid, block, 0, scope.stream>>>(x.data<T>(), dy.data<T>(), mean.data<T>(),
                                                               rstd.data<T>(), M, D, rows_per_chunk, part_w, part_b);
  OCRT_CUDA_LAUNCH_CHECK("layer_norm backward", scope.device);
  ln_param_final_kernel<T><<<cuda::grid_for(D), cuda::kThreads, 0, scope.stream>>>(
      part_w, part_b, chunks, D, data_or_null<T>(dweight), data_or_null<T>(dbias));
  OCRT_CUDA_LAUNCH_CHECK("layer_norm backward", scope.device);
}

}  // namespace

void register_cuda_norm(LayerBackend& b) {
  b.batch_norm_stats = [](const Tensor& x, const Tensor& mean, const Tensor& var) {
    dispatch_float(x.dtype(), "batch_norm", [&](auto zero) { bn_stats<decltype(zero)>(x, mean, var); });
  };
  b.batch_norm_apply = [](const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& w, const Tensor& bias,
                          const Tensor& y) {
    dispatch_float(x.dtype(), "batch_norm", [&](auto zero) { bn_apply<decltype(zero)>(x, mean, invstd, w, bias, y); });
  };
  b.batch_norm_backward = [](const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd,
                             const Tensor& w, bool training, const Tensor& dx, const Tensor& dw, const Tensor& db) {
    dispatch_float(x.dtype(), "batch_norm backward",
        [&](auto zero) { bn_backward<decltype(zero)>(x, dy, mean, invstd, w, training, dx, dw, db); });
  };
  b.layer_norm = [](const Tensor& x, const Tensor& w, const Tensor& bias, double eps, const Tensor& y,
                    const Tensor& mean, const Tensor& rstd) {
    dispatch_float(x.dtype(), "layer_norm",
        [&](auto zero) { ln_forward<decltype(zero)>(x, w, bias, eps, y, mean, rstd); });
  };
  b.layer_norm_backward = [](const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& rstd,
                             const Tensor& w, const Tensor& dx, const Tensor& dw, const Tensor& db) {
    dispatch_float(x.dtype(), "layer_norm backward",
        [&](auto zero) { ln_backward<decltype(zero)>(x, dy, mean, rstd, w, dx, dw, db); });
  };
}

}  // namespace ocrt
