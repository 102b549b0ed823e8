// conv2d on CUDA: im2col + cuBLAS GEMM, forward and backward. The GPU twin of ops/cpu/conv.cpp
// (same names, same chunk layout, no cuDNN), checked against it by tests/cuda/test_conv_pool.cpp.
//
// Samples are processed in chunks of S laid side by side. A chunk is unfolded into one column
// matrix for all groups at once:
//   col (C*kh*kw, L = S*Ho*Wo): row (cin, i, j), column q = (s, oh, ow),
//   col[(cin*kh + i)*kw + j][q] = x[n0 + s, cin, oh*sh - ph + i*dh, ow*sw - pw + j*dw]  (0 in the padding)
// Group g owns the rows [g*CK, (g+1)*CK) (CK = Cg*kh*kw) because cin = g*Cg + c, so one
// strided-batched GEMM with batch = groups does every group:
//   out_g (Coutg, L) = W_g (Coutg, CK) @ col_g (CK, L)
// and a permute kernel moves out (Cout, L) into the chunk's NCHW planes, adding the bias.
// The backward, per chunk, with dy of the chunk gathered into dy' (Cout, L):
//   dW_g  = dy'_g @ col_g^T      accumulated over chunks (GEMM beta = 1 after the first)
//   dcol_g = W_g^T @ dy'_g       then col2im into dx: each input pixel gathers the entries it
//                                was copied to, in a fixed order (deterministic, no atomics)
//   db    by one block per output channel, summed in double.
// Chunks keep col and out together under kChunkBytes, so a CRNN batch is usually one chunk (one
// long GEMM) while a large batch of large images does not ask for gigabytes of scratch.
//
// cuBLAS is column-major: a row-major (M,N) matrix is a column-major (N,M) one with the same
// leading dimension, so gemm() below issues each row-major product C = A @ B as C^T = B^T A^T.
// TF32 stays off: the handle (runtime/cuda/cuda_glue.cu) is created with the default math mode.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "ops/backend.h"
#include "ops/conv_shape.h"
#include "runtime/cuda/common.cuh"

namespace ocrt {

namespace {

using cuda::DeviceScope;
using cuda::grid_for;
using cuda::kThreads;

// Scratch budget of one chunk (col + out). tests/cuda/test_conv_pool.cpp sizes its "more than
// one chunk" case from this value.
constexpr int64_t kChunkBytes = int64_t(256) << 20;

using Geometry = ConvShape;  // ops/conv_shape.h; kernels take it by value

// Samples per chunk: as many as fit col (C*kh*kw, S*HoWo) and out (Cout, S*HoWo) in kChunkBytes.
int64_t chunk_samples(const Geometry& g, size_t elem_size) {
  const int64_t per_sample = (g.C * g.kh * g.kw + g.Cout) * g.HoWo * (int64_t)elem_size;
  return std::clamp<int64_t>(per_sample > 0 ? kChunkBytes / per_sample : g.N, 1, std::max<int64_t>(g.N, 1));
}

// ---------------------------------------------------------------- GEMM

cublasStatus_t gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                    const float* alpha, const float* A, int lda, long long sa, const float* B, int ldb,
                                    long long sb, const float* beta, float* C, int ldc, long long sc, int batch) {
  return cuda::sgemm_strided_batched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}
cublasStatus_t gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                    const double* alpha, const double* A, int lda, long long sa, const double* B,
                                    int ldb, long long sb, const double* beta, double* C, int ldc, long long sc,
                                    int batch) {
  return cuda::cublas_api().dgemm_strided_batched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}

int as_int(int64_t v, const char* what) {
  OCRT_CHECK(v >= 0 && v <= INT_MAX, "conv2d: ", what, " (", v, ") is too large for a cuBLAS GEMM");
  return (int)v;
}

// Row-major, for each of `batch` groups b: C_b (M,N) = A_b @ B_b + beta * C_b, all contiguous.
// A_b is (M,K), or stored as (K,M) when trans_a (then A_b is its transpose); B_b likewise (K,N)
// or stored (N,K) when trans_b. Batch b's matrices start stride_* elements after batch b-1's.
// cuBLAS computes the column-major C^T (N,M) = B^T A^T: a row-major (K,N) B is already the
// column-major B^T with ld N; a stored (N,K) B is the column-major B with ld K, so it is transposed.
template <class T>
void gemm(int device, int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A,
          int64_t stride_a, const T* B, int64_t stride_b, T beta, T* C, int64_t stride_c) {
  const T alpha = 1;
  const int lda = as_int(trans_a ? M : K, "a leading dimension"), ldb = as_int(trans_b ? K : N, "a leading dimension");
  cuda::check_cublas(gemm_strided_batched(cuda::cublas(device), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(N, "a GEMM size"),
                                          as_int(M, "a GEMM size"), as_int(K, "a GEMM size"), &alpha, B, ldb,
                                          stride_b, A, lda, stride_a, &beta, C, as_int(N, "a GEMM size"), stride_c,
                                          as_int(batch, "the group count")),
                     "cublasGemmStridedBatched (conv2d)", device);
}

// ---------------------------------------------------------------- kernels
// Every kernel is a grid-stride loop; x, y, dy and dx pointers are already offset to sample n0.

// col (C*kh*kw, L) of a chunk of S = L / HoWo samples. One thread per (cin, q) walks the kh*kw
// window, so the index arithmetic is paid once per window rather than once per element. Writes
// are coalesced along q; reads along ow (for stride 1).
template <class T>
__global__ void im2col_kernel(const T* __restrict__ x, Geometry g, int64_t L, T* __restrict__ col) {
  const int64_t total = g.C * L;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)blockDim.x * gridDim.x) {
    const int64_t cin = t / L, q = t - cin * L;
    const int64_t s = q / g.HoWo, pos = q - s * g.HoWo;
    const int64_t oh = pos / g.Wo, ow = pos - oh * g.Wo;
    const T* plane = x + (s * g.C + cin) * g.H * g.W;
    T* out = col + cin * g.kh * g.kw * L + q;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t ih = oh * g.p.stride_h - g.p.pad_h + i * g.p.dilation_h;
      const bool row_inside = ih >= 0 && ih < g.H;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t iw = ow * g.p.stride_w - g.p.pad_w + j * g.p.dilation_w;
        out[(i * g.kw + j) * L] = row_inside && iw >= 0 && iw < g.W ? plane[ih * g.W + iw] : T(0);
      }
    }
  }
}

// The adjoint of im2col, as a gather: dx of a chunk (S, C, H, W) from dcol (C*kh*kw, L). Input
// pixel (ih, iw) was copied to kernel tap (i, j) of output (oh, ow) when oh*sh = ih + ph - i*dh
// and ow*sw = iw + pw - j*dw; each tap has at most one such output. The sum runs over (i, j) in
// order, as the CPU's col2im adds them. dx is overwritten.
template <class T>
__global__ void col2im_kernel(const T* __restrict__ dcol, Geometry g, int64_t L, int64_t S, T* __restrict__ dx) {
  const int64_t total = S * g.C * g.H * g.W;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)blockDim.x * gridDim.x) {
    const int64_t iw = t % g.W, ih = (t / g.W) % g.H, cin = (t / (g.W * g.H)) % g.C, s = t / (g.W * g.H * g.C);
    const T* rows = dcol + cin * g.kh * g.kw * L + s * g.HoWo;
    T acc = 0;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t th = ih + g.p.pad_h - i * g.p.dilation_h;  // oh * sh
      if (th < 0 || th % g.p.stride_h != 0 || th / g.p.stride_h >= g.Ho) continue;
      const int64_t oh = th / g.p.stride_h;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t tw = iw + g.p.pad_w - j * g.p.dilation_w;  // ow * sw
        if (tw < 0 || tw % g.p.stride_w != 0 || tw / g.p.stride_w >= g.Wo) continue;
        acc += rows[(i * g.kw + j) * L + oh * g.Wo + tw / g.p.stride_w];
      }
    }
    dx[t] = acc;
  }
}

// y planes of a chunk (S, Cout, HoWo) = out (Cout, L) rearranged, plus bias (may be null). For a
// one-sample chunk the GEMM wrote y itself (out == y) and this only adds the bias, in place.
template <class T>
__global__ void chunk_to_nchw_kernel(const T* out, const T* __restrict__ bias, Geometry g, int64_t S, T* y) {
  const int64_t L = S * g.HoWo, total = S * g.Cout * g.HoWo;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)blockDim.x * gridDim.x) {
    const int64_t pos = t % g.HoWo, co = (t / g.HoWo) % g.Cout, s = t / (g.HoWo * g.Cout);
    y[t] = out[co * L + s * g.HoWo + pos] + (bias ? bias[co] : T(0));
  }
}

// dy' (Cout, L) = dy planes of a chunk (S, Cout, HoWo) side by side: the inverse permutation.
template <class T>
__global__ void nchw_to_chunk_kernel(const T* __restrict__ dy, Geometry g, int64_t S, T* __restrict__ dyc) {
  const int64_t L = S * g.HoWo, total = g.Cout * L;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)blockDim.x * gridDim.x) {
    const int64_t co = t / L, q = t - co * L, s = q / g.HoWo, pos = q - s * g.HoWo;
    dyc[t] = dy[(s * g.Cout + co) * g.HoWo + pos];
  }
}

// db[co] = sum over n and positions of dy[n, co]: one block per channel, summed in double with
// a fixed thread assignment and reduction tree, so the result is the same from run to run.
template <class T>
__global__ void bias_grad_kernel(const T* __restrict__ dy, int64_t N, int64_t Cout, int64_t HoWo, T* __restrict__ db) {
  using Acc = typename cuda::AccOf<T>::type;
  __shared__ Acc scratch[32];
  const int64_t co = blockIdx.x;
  Acc acc = 0;
  for (int64_t e = threadIdx.x; e < N * HoWo; e += blockDim.x) {
    const int64_t n = e / HoWo, pos = e - n * HoWo;
    acc += (Acc)dy[(n * Cout + co) * HoWo + pos];
  }
  acc = cuda::block_sum(acc, scratch);
  if (threadIdx.x == 0) db[co] = (T)acc;
}

// ---------------------------------------------------------------- host side

template <class T>
void conv2d_typed(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& params, const Tensor& y) {
  const Geometry g(x, w, y.shape(), params);
  const DeviceScope ds(x);
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* bp = bias.defined() ? bias.data<T>() : nullptr;
  T* yp = y.data<T>();

  const int64_t S = chunk_samples(g, sizeof(T));
  Tensor col_mem = Tensor::empty({g.C * g.kh * g.kw * S * g.HoWo}, x.dtype(), x.device());
  Tensor out_mem = S > 1 ? Tensor::empty({g.Cout * S * g.HoWo}, x.dtype(), x.device()) : Tensor();
  T* col = col_mem.data<T>();
  for (int64_t n0 = 0; n0 < g.N; n0 += S) {
    const int64_t s_count = std::min(S, g.N - n0), L = s_count * g.HoWo;
    T* y_chunk = yp + n0 * g.Cout * g.HoWo;
    im2col_kernel<T><<<grid_for(g.C * L), kThreads, 0, ds.stream>>>(xp + n0 * g.C * g.H * g.W, g, L, col);
    OCRT_CUDA_LAUNCH_CHECK("conv2d", ds.device);
    // A one-sample chunk's (Cout, HoWo) is that sample's y planes: the GEMM writes y directly.
    T* out = s_count == 1 ? y_chunk : out_mem.data<T>();
    // out_g (Coutg, L) = W_g (Coutg, CK) @ col_g (CK, L), for every group g
    gemm<T>(ds.device, g.p.groups, false, false, g.Coutg, L, g.CK, wp, g.Coutg * g.CK, col, g.CK * L, T(0), out,
            g.Coutg * L);
    if (s_count > 1 || bp) {
      const int64_t count = s_count * g.Cout * g.HoWo;
      chunk_to_nchw_kernel<T><<<grid_for(count), kThreads, 0, ds.stream>>>(out, bp, g, s_count, y_chunk);
      OCRT_CUDA_LAUNCH_CHECK("conv2d", ds.device);
    }
  }
}

template <class T>
void conv2d_backward_typed(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dParams& params,
                           const Tensor& dx, const Tensor& dw, const Tensor& db) {
  const Geometry g(x, w, dy.shape(), params);
  const DeviceScope ds(x);
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* dyp = dy.data<T>();
  T* dxp = dx.defined() ? dx.data<T>() : nullptr;
  T* dwp = dw.defined() ? dw.data<T>() : nullptr;

  if (db.defined()) {
    bias_grad_kernel<T><<<(unsigned)g.Cout, kThreads, 0, ds.stream>>>(dyp, g.N, g.Cout, g.HoWo, db.data<T>());
    OCRT_CUDA_LAUNCH_CHECK("conv2d backward", ds.device);
  }
  if (!dxp && !dwp) return;
  if (g.N == 0) {  // no samples: dW is an empty sum (and dx has no elements)
    if (dwp) cuda::check(cudaMemsetAsync(dwp, 0, dw.numel() * sizeof(T), ds.stream), "cudaMemsetAsync", ds.device);
    return;
  }

  const int64_t S = chunk_samples(g, sizeof(T));
  // col holds the unfolded chunk for dW, then (stream order makes the reuse safe) dcol for dx.
  Tensor col_mem = Tensor::empty({g.C * g.kh * g.kw * S * g.HoWo}, x.dtype(), x.device());
  Tensor dyc_mem = S > 1 ? Tensor::empty({g.Cout * S * g.HoWo}, x.dtype(), x.device()) : Tensor();
  T* col = col_mem.data<T>();
  for (int64_t n0 = 0; n0 < g.N; n0 += S) {
    const int64_t s_count = std::min(S, g.N - n0), L = s_count * g.HoWo;
    // dy of the chunk as (Cout, L); a one-sample chunk is dy's own planes.
    const T* dy_chunk = dyp + n0 * g.Cout * g.HoWo;
    if (s_count > 1) {
      nchw_to_chunk_kernel<T><<<grid_for(g.Cout * L), kThreads, 0, ds.stream>>>(dy_chunk, g, s_count,
                                                                                dyc_mem.data<T>());
      OCRT_CUDA_LAUNCH_CHECK("conv2d backward", ds.device);
      dy_chunk = dyc_mem.data<T>();
    }
    if (dwp) {
      im2col_kernel<T><<<grid_for(g.C * L), kThreads, 0, ds.stream>>>(xp + n0 * g.C * g.H * g.W, g, L, col);
      OCRT_CUDA_LAUNCH_CHECK("conv2d backward", ds.device);
      // dW_g (Coutg, CK) (+)= dy'_g (Coutg, L) @ col_g^T, col_g stored (CK, L). beta = 0 on the
      // first chunk: cuBLAS does not read C then, so dw's old contents do not matter.
      gemm<T>(ds.device, g.p.groups, false, true, g.Coutg, g.CK, L, dy_chunk, g.Coutg * L, col, g.CK * L,
              T(n0 == 0 ? 0 : 1), dwp, g.Coutg * g.CK);
    }
    if (dxp) {
      // dcol_g (CK, L) = W_g^T (CK, Coutg) @ dy'_g (Coutg, L), W_g stored (Coutg, CK).
      gemm<T>(ds.device, g.p.groups, true, false, g.CK, L, g.Coutg, wp, g.Coutg * g.CK, dy_chunk, g.Coutg * L, T(0),
              col, g.CK * L);
      const int64_t count = s_count * g.C * g.H * g.W;
      col2im_kernel<T><<<grid_for(count), kThreads, 0, ds.stream>>>(col, g, L, s_count, dxp + n0 * g.C * g.H * g.W);
      OCRT_CUDA_LAUNCH_CHECK("conv2d backward", ds.device);
    }
  }
}

void cuda_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& y) {
  dispatch_float(y.dtype(), "conv2d", [&](auto zero) { conv2d_typed<decltype(zero)>(x, w, bias, p, y); });
}

void cuda_conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dParams& p, const Tensor& dx,
                          const Tensor& dw, const Tensor& db) {
  dispatch_float(x.dtype(), "conv2d backward",
      [&](auto zero) { conv2d_backward_typed<decltype(zero)>(x, w, dy, p, dx, dw, db); });
}

}  // namespace

void register_cuda_conv(LayerBackend& b) {
  b.conv2d = cuda_conv2d;
  b.conv2d_backward = cuda_conv2d_backward;
}

}  // namespace ocrt
