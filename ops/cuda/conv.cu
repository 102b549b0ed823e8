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
//   db    each (sample, channel) plane summed by a warp, then each channel's planes in order of
//         sample, in double: the same result from run to run.
// Chunks keep col and out together under kChunkBytes, so a CRNN batch is usually one chunk (one
// long GEMM) while a large batch of large images does not ask for gigabytes of scratch.
//
// cuBLAS is column-major: a row-major (M,N) matrix is a column-major (N,M) one with the same
// leading dimension, so gemm() below issues each row-major product C = A @ B as C^T = B^T A^T.
// Float32 GEMMs run in the GPU precision of runtime/precision.h: fp32 and tf32 through
// cuda::sgemm_strided_batched (runtime/cuda/cublas_loader.h); under bf16 the columns, dy' and
// the weights are written in bf16 and gemm() multiplies them on the tensor cores with
// float32 accumulation and results (col2im, the bias and dW's accumulation stay float32).
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "ops/backend.h"
#include "ops/conv_shape.h"
#include "runtime/cuda/common.cuh"
#include "runtime/cuda/cublas_loader.h"
#include "runtime/precision.h"

namespace ocrt {

namespace {

using cuda::DeviceScope;
using cuda::grid_for;
using cuda::kThreads;

// Scratch budget of one chunk (col + out). tests/cuda/test_conv_pool.cpp sizes its "more than
// one chunk" case from this value.
constexpr int64_t kChunkBytes = int64_t(256) << 20;

using Geometry = ConvShape;  // ops/conv_shape.h; kernels take it by value
using bf16 = __nv_bfloat16;

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

// bf16 operands, float32 result and scalars: cublasGemmStridedBatchedEx computing in float32 on
// the tensor cores. This is what Precision::bf16 means for a convolution: its operands are
// rounded to bf16 where they are written (im2col, dy's rearrangement, the weights once per call),
// so the GEMM reads half the bytes. (Given float32 operands and CUBLAS_COMPUTE_32F_FAST_16BF
// instead, cuBLAS 13 on the H100 ran its TF32 kernels: Nsight Compute named them, 2026-11-27.)
cublasStatus_t gemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                    const float* alpha, const bf16* A, int lda, long long sa, const bf16* B, int ldb,
                                    long long sb, const float* beta, float* C, int ldc, long long sc, int batch) {
  return cuda::cublas_api().gemm_strided_batched_ex(h, ta, tb, m, n, k, alpha, A, CUDA_R_16BF, lda, sa, B, CUDA_R_16BF,
                                                    ldb, sb, beta, C, CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F,
                                                    CUBLAS_GEMM_DEFAULT);
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
// O is the operands' type, R the result's: both T, or bf16 operands and a float32 result.
template <class O, class R>
void gemm(int device, int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const O* A,
          int64_t stride_a, const O* B, int64_t stride_b, R beta, R* C, int64_t stride_c) {
  const R alpha = 1;
  const int lda = as_int(trans_a ? M : K, "a leading dimension"), ldb = as_int(trans_b ? K : N, "a leading dimension");
  cuda::check_cublas(gemm_strided_batched(cuda::cublas(device), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(N, "a GEMM size"),
                                          as_int(M, "a GEMM size"), as_int(K, "a GEMM size"), &alpha, B, ldb,
                                          stride_b, A, lda, stride_a, &beta, C, as_int(N, "a GEMM size"), stride_c,
                                          as_int(batch, "the group count")),
                     std::is_same_v<O, bf16> ? "cublasGemmStridedBatchedEx (conv2d, bf16)"
                                             : "cublasGemmStridedBatched (conv2d)",
                     device);
}

// A value as a GEMM column operand of type C: bf16 rounds to nearest even.
template <class C, class T>
__device__ __forceinline__ C to_column(T v) {
  if constexpr (std::is_same_v<C, bf16>) return __float2bfloat16_rn((float)v);
  else return (C)v;
}

__global__ void to_bf16_kernel(const float* __restrict__ src, int64_t n, bf16* __restrict__ dst) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

// ---------------------------------------------------------------- kernels
// Every kernel is a grid-stride loop; x, y, dy and dx pointers are already offset to sample n0.
// I is the index type: int32_t when every index of the call fits (narrow_indices() below), as
// it nearly always does, else int64_t. The kernels divide per element to find an element's
// coordinates, and a 64-bit division is a long software sequence on a GPU: in 64 bits col2im
// ran at a fifth of the memory's speed on the H100 (docs/gpu-status.md, 2026-11-27).

// The geometry in the index type, read once per thread.
template <class I>
struct Dims {
  I C, H, W, Cout, Ho, Wo, HoWo, kh, kw, sh, sw, ph, pw, dh, dw;
  __device__ explicit Dims(const Geometry& g)
      : C((I)g.C), H((I)g.H), W((I)g.W), Cout((I)g.Cout), Ho((I)g.Ho), Wo((I)g.Wo), HoWo((I)g.HoWo), kh((I)g.kh),
        kw((I)g.kw), sh((I)g.p.stride_h), sw((I)g.p.stride_w), ph((I)g.p.pad_h), pw((I)g.p.pad_w),
        dh((I)g.p.dilation_h), dw((I)g.p.dilation_w) {}
};

#define OCRT_GRID_LOOP_I(t, total) \
  for (I t = (I)(blockIdx.x * blockDim.x + threadIdx.x); t < (total); t += (I)(blockDim.x * gridDim.x))

// col (C*kh*kw, L) of a chunk of S = L / HoWo samples. One thread per (cin, q) walks the kh*kw
// window, so the index arithmetic is paid once per window rather than once per element. Writes
// are coalesced along q; reads along ow (for stride 1). C is the column type: T, or bf16 when
// the GEMM takes bf16 operands (the rounding happens here, on the way out).
template <class T, class C, class I>
__global__ void im2col_kernel(const T* __restrict__ x, Geometry geo, I L, C* __restrict__ col) {
  const Dims<I> g(geo);
  const I total = g.C * L;
  OCRT_GRID_LOOP_I(t, total) {
    const I cin = t / L, q = t - cin * L;
    const I s = q / g.HoWo, pos = q - s * g.HoWo;
    const I oh = pos / g.Wo, ow = pos - oh * g.Wo;
    const T* plane = x + (s * g.C + cin) * g.H * g.W;
    C* out = col + cin * g.kh * g.kw * L + q;
    for (I i = 0; i < g.kh; ++i) {
      const I ih = oh * g.sh - g.ph + i * g.dh;
      const bool row_inside = ih >= 0 && ih < g.H;
      for (I j = 0; j < g.kw; ++j) {
        const I iw = ow * g.sw - g.pw + j * g.dw;
        out[(i * g.kw + j) * L] = to_column<C>(row_inside && iw >= 0 && iw < g.W ? plane[ih * g.W + iw] : T(0));
      }
    }
  }
}

// The output o along one axis whose window's tap lands on an input pixel, given t = o * stride
// (the pixel's position plus padding minus the tap's offset), or -1 when none does: t must be a
// whole multiple of the stride and o inside [0, n). kUnit: stride 1, no division.
template <class I, bool kUnit>
__device__ __forceinline__ I tap_output(I t, I stride, I n) {
  if constexpr (kUnit) return t >= 0 && t < n ? t : I(-1);
  else return t >= 0 && t % stride == 0 && t / stride < n ? t / stride : I(-1);
}

// The adjoint of im2col, as a gather: dx of a chunk (S, C, H, W) from dcol (C*kh*kw, L). Input
// pixel (ih, iw) was copied to kernel tap (i, j) of output (oh, ow) when oh*sh = ih + ph - i*dh
// and ow*sw = iw + pw - j*dw; each tap has at most one such output. The sum runs over (i, j) in
// order, as the CPU's col2im adds them. dx is overwritten. kUnit: stride and dilation 1 (most
// convolutions), where a tap's output is found without dividing.
template <class T, class I, bool kUnit>
__global__ void col2im_kernel(const T* __restrict__ dcol, Geometry geo, I L, I S, T* __restrict__ dx) {
  const Dims<I> g(geo);
  const I total = S * g.C * g.H * g.W;
  OCRT_GRID_LOOP_I(t, total) {
    const I iw = t % g.W, rest = t / g.W;
    const I ih = rest % g.H, plane = rest / g.H;  // plane = s * C + cin
    const I cin = plane % g.C, s = plane / g.C;
    const T* rows = dcol + cin * g.kh * g.kw * L + s * g.HoWo;
    T acc = 0;
    for (I i = 0; i < g.kh; ++i) {
      const I oh = tap_output<I, kUnit>(ih + g.ph - i * g.dh, g.sh, g.Ho);
      if (oh < 0) continue;
      for (I j = 0; j < g.kw; ++j) {
        const I ow = tap_output<I, kUnit>(iw + g.pw - j * g.dw, g.sw, g.Wo);
        if (ow >= 0) acc += rows[(i * g.kw + j) * L + oh * g.Wo + ow];
      }
    }
    dx[t] = acc;
  }
}

// y planes of a chunk (S, Cout, HoWo) = out (Cout, L) rearranged, plus bias (may be null). For a
// one-sample chunk the GEMM wrote y itself (out == y) and this only adds the bias, in place.
template <class T, class I>
__global__ void chunk_to_nchw_kernel(const T* out, const T* __restrict__ bias, Geometry geo, I S, T* y) {
  const Dims<I> g(geo);
  const I L = S * g.HoWo, total = S * g.Cout * g.HoWo;
  OCRT_GRID_LOOP_I(t, total) {
    const I pos = t % g.HoWo, plane = t / g.HoWo;  // plane = s * Cout + co
    const I co = plane % g.Cout, s = plane / g.Cout;
    y[t] = out[co * L + s * g.HoWo + pos] + (bias ? bias[co] : T(0));
  }
}

// dy' (Cout, L) = dy planes of a chunk (S, Cout, HoWo) side by side: the inverse permutation,
// in the GEMM's operand type D (T, or bf16).
template <class T, class D, class I>
__global__ void nchw_to_chunk_kernel(const T* __restrict__ dy, Geometry geo, I S, D* __restrict__ dyc) {
  const Dims<I> g(geo);
  const I L = S * g.HoWo, total = g.Cout * L;
  OCRT_GRID_LOOP_I(t, total) {
    const I co = t / L, q = t - co * L, s = q / g.HoWo, pos = q - s * g.HoWo;
    dyc[t] = to_column<D>(dy[(s * g.Cout + co) * g.HoWo + pos]);
  }
}

// db[co] = sum over n and positions of dy[n, co], in two passes with a fixed order, so the
// result is the same from run to run: first each plane (n, co) is summed by one warp (lane l
// takes positions l, l + 32, ..., then the warp's shuffle tree) into part[n * Cout + co]; then
// one thread per channel adds its N plane sums in order of n. Sums in double for float. (One
// block per channel, as before, left most of the GPU idle: 64 channels over 256 x 3200 values
// each took 1.6 ms.)
template <class T>
__global__ void bias_plane_sums_kernel(const T* __restrict__ dy, int64_t planes, int64_t HoWo,
                                       typename cuda::AccOf<T>::type* __restrict__ part) {
  using Acc = typename cuda::AccOf<T>::type;
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t p = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); p < planes; p += warps) {
    const T* plane = dy + p * HoWo;
    Acc acc = 0;
    for (int64_t e = lane; e < HoWo; e += 32) acc += (Acc)plane[e];
    acc = cuda::warp_sum(acc);
    if (lane == 0) part[p] = acc;
  }
}

template <class T>
__global__ void bias_channel_sums_kernel(const typename cuda::AccOf<T>::type* __restrict__ part, int64_t N,
                                         int64_t Cout, T* __restrict__ db) {
  using Acc = typename cuda::AccOf<T>::type;
  for (int64_t co = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; co < Cout; co += (int64_t)blockDim.x * gridDim.x) {
    Acc acc = 0;
    for (int64_t n = 0; n < N; ++n) acc += part[n * Cout + co];
    db[co] = (T)acc;
  }
}

// ---------------------------------------------------------------- host side

// Whether every index of a call fits the 32-bit kernels: the largest buffer index (the chunk's
// x, y and col) plus one grid-stride step (grid_for's 65536 blocks of kThreads).
bool narrow_indices(const Geometry& g, int64_t S) {
  const int64_t limit = INT32_MAX - int64_t(65536) * kThreads;
  return S * g.C * g.H * g.W <= limit && S * g.Cout * g.HoWo <= limit && g.C * g.kh * g.kw * S * g.HoWo <= limit;
}

// Calls f with the GEMMs' operand type and the index type of the call: the operands are bf16
// for float32 tensors under Precision::bf16, else T; the index int32_t where narrow_indices()
// says every index fits, else int64_t.
template <class T, class F>
void with_types(bool narrow, F&& f) {
  auto with_index = [&](auto operand) {
    if (narrow) f(operand, int32_t{});
    else f(operand, int64_t{});
  };
  if constexpr (std::is_same_v<T, float>)
    if (gpu_precision() == Precision::bf16) return with_index(bf16{});
  with_index(T{});
}

// Scratch for n values of type V (bf16 has no DType of its own: bytes), and a typed view of
// any buffer (the columns' buffer holds T, or bf16 columns in its first half).
template <class V>
Tensor scratch_of(int64_t n, const Device& device) {
  return Tensor::empty({n * (int64_t)sizeof(V)}, DType::u8, device);
}
template <class V>
V* scratch_ptr(const Tensor& t) {
  return static_cast<V*>(t.raw_data());
}

// The weights as the GEMMs' A operand of type O: w itself, or rounded to bf16 once per call
// into `keep` (which must outlive the GEMMs).
template <class O, class T>
const O* weights_as(const Tensor& w, const DeviceScope& ds, Tensor& keep) {
  if constexpr (std::is_same_v<O, T>) {
    return w.data<T>();
  } else {
    keep = scratch_of<bf16>(w.numel(), w.device());
    to_bf16_kernel<<<grid_for(w.numel()), kThreads, 0, ds.stream>>>(w.data<float>(), w.numel(), scratch_ptr<bf16>(keep));
    OCRT_CUDA_LAUNCH_CHECK("conv2d (bf16 weights)", ds.device);
    return scratch_ptr<bf16>(keep);
  }
}

template <class T>
void conv2d_typed(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& params, const Tensor& y) {
  const Geometry g(x, w, y.shape(), params);
  const DeviceScope ds(x);
  const T* xp = x.data<T>();
  const T* bp = bias.defined() ? bias.data<T>() : nullptr;
  T* yp = y.data<T>();

  const int64_t S = chunk_samples(g, sizeof(T));
  // bf16 columns take the first half of the same buffer.
  Tensor col_mem = Tensor::empty({g.C * g.kh * g.kw * S * g.HoWo}, x.dtype(), x.device());
  Tensor out_mem = S > 1 ? Tensor::empty({g.Cout * S * g.HoWo}, x.dtype(), x.device()) : Tensor();
  with_types<T>(narrow_indices(g, S), [&](auto operand, auto index) {
    using O = decltype(operand);
    using I = decltype(index);
    Tensor wb;
    const O* wp = weights_as<O, T>(w, ds, wb);
    O* col = scratch_ptr<O>(col_mem);
    for (int64_t n0 = 0; n0 < g.N; n0 += S) {
      const int64_t s_count = std::min(S, g.N - n0), L = s_count * g.HoWo;
      T* y_chunk = yp + n0 * g.Cout * g.HoWo;
      im2col_kernel<T, O, I><<<grid_for(g.C * L), kThreads, 0, ds.stream>>>(xp + n0 * g.C * g.H * g.W, g, (I)L, col);
      OCRT_CUDA_LAUNCH_CHECK("conv2d", ds.device);
      // A one-sample chunk's (Cout, HoWo) is that sample's y planes: the GEMM writes y directly.
      T* out = s_count == 1 ? y_chunk : out_mem.data<T>();
      // out_g (Coutg, L) = W_g (Coutg, CK) @ col_g (CK, L), for every group g
      gemm(ds.device, g.p.groups, false, false, g.Coutg, L, g.CK, wp, g.Coutg * g.CK, col, g.CK * L, T(0), out,
           g.Coutg * L);
      if (s_count > 1 || bp) {
        const int64_t count = s_count * g.Cout * g.HoWo;
        chunk_to_nchw_kernel<T, I><<<grid_for(count), kThreads, 0, ds.stream>>>(out, bp, g, (I)s_count, y_chunk);
        OCRT_CUDA_LAUNCH_CHECK("conv2d", ds.device);
      }
    }
  });
}

template <class T>
void conv2d_backward_typed(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dParams& params,
                           const Tensor& dx, const Tensor& dw, const Tensor& db) {
  const Geometry g(x, w, dy.shape(), params);
  const DeviceScope ds(x);
  const T* xp = x.data<T>();
  const T* dyp = dy.data<T>();
  T* dxp = dx.defined() ? dx.data<T>() : nullptr;
  T* dwp = dw.defined() ? dw.data<T>() : nullptr;

  if (db.defined() && g.Cout > 0) {
    using Acc = typename cuda::AccOf<T>::type;
    const int64_t planes = g.N * g.Cout;
    if (planes == 0) {
      cuda::check(cudaMemsetAsync(db.data<T>(), 0, g.Cout * sizeof(T), ds.stream), "cudaMemsetAsync", ds.device);
    } else {
      Tensor part = scratch_of<Acc>(planes, x.device());
      bias_plane_sums_kernel<T><<<grid_for(planes * 32), kThreads, 0, ds.stream>>>(dyp, planes, g.HoWo,
                                                                                    scratch_ptr<Acc>(part));
      OCRT_CUDA_LAUNCH_CHECK("conv2d backward (bias)", ds.device);
      bias_channel_sums_kernel<T><<<grid_for(g.Cout), kThreads, 0, ds.stream>>>(scratch_ptr<Acc>(part), g.N, g.Cout,
                                                                                db.data<T>());
      OCRT_CUDA_LAUNCH_CHECK("conv2d backward (bias)", ds.device);
    }
  }
  if (!dxp && !dwp) return;
  if (g.N == 0) {  // no samples: dW is an empty sum (and dx has no elements)
    if (dwp) cuda::check(cudaMemsetAsync(dwp, 0, dw.numel() * sizeof(T), ds.stream), "cudaMemsetAsync", ds.device);
    return;
  }

  const int64_t S = chunk_samples(g, sizeof(T));
  // col holds the unfolded chunk for dW, then (stream order makes the reuse safe) dcol for dx;
  // bf16 columns take its first half, dcol is always T.
  Tensor col_mem = Tensor::empty({g.C * g.kh * g.kw * S * g.HoWo}, x.dtype(), x.device());
  T* dcol = col_mem.data<T>();
  const bool unit = g.p.stride_h == 1 && g.p.stride_w == 1 && g.p.dilation_h == 1 && g.p.dilation_w == 1;
  with_types<T>(narrow_indices(g, S), [&](auto operand, auto index) {
    using O = decltype(operand);
    using I = decltype(index);
    constexpr bool kSame = std::is_same_v<O, T>;
    Tensor wb;
    const O* wp = weights_as<O, T>(w, ds, wb);
    O* col = scratch_ptr<O>(col_mem);
    // dy of a chunk as (Cout, L), when it is not dy's own planes: several samples, or bf16.
    Tensor dyc_mem = S > 1 || !kSame ? Tensor::empty({g.Cout * S * g.HoWo}, x.dtype(), x.device()) : Tensor();
    for (int64_t n0 = 0; n0 < g.N; n0 += S) {
      const int64_t s_count = std::min(S, g.N - n0), L = s_count * g.HoWo;
      const T* dy_planes = dyp + n0 * g.Cout * g.HoWo;
      // dy of the chunk as (Cout, L) in the operand type; a one-sample chunk of T is dy's own planes.
      const O* dy_chunk;
      if (s_count > 1) {
        nchw_to_chunk_kernel<T, O, I><<<grid_for(g.Cout * L), kThreads, 0, ds.stream>>>(dy_planes, g, (I)s_count,
                                                                                        scratch_ptr<O>(dyc_mem));
        OCRT_CUDA_LAUNCH_CHECK("conv2d backward", ds.device);
        dy_chunk = scratch_ptr<O>(dyc_mem);
      } else if constexpr (kSame) {
        dy_chunk = dy_planes;
      } else {
        to_bf16_kernel<<<grid_for(g.Cout * L), kThreads, 0, ds.stream>>>(dy_planes, g.Cout * L, scratch_ptr<O>(dyc_mem));
        OCRT_CUDA_LAUNCH_CHECK("conv2d backward", ds.device);
        dy_chunk = scratch_ptr<O>(dyc_mem);
      }
      if (dwp) {
        im2col_kernel<T, O, I><<<grid_for(g.C * L), kThreads, 0, ds.stream>>>(xp + n0 * g.C * g.H * g.W, g, (I)L, col);
        OCRT_CUDA_LAUNCH_CHECK("conv2d backward", ds.device);
        // dW_g (Coutg, CK) (+)= dy'_g (Coutg, L) @ col_g^T, col_g stored (CK, L). beta = 0 on the
        // first chunk: cuBLAS does not read C then, so dw's old contents do not matter.
        gemm(ds.device, g.p.groups, false, true, g.Coutg, g.CK, L, dy_chunk, g.Coutg * L, col, g.CK * L,
             T(n0 == 0 ? 0 : 1), dwp, g.Coutg * g.CK);
      }
      if (dxp) {
        // dcol_g (CK, L) = W_g^T (CK, Coutg) @ dy'_g (Coutg, L), W_g stored (Coutg, CK).
        gemm(ds.device, g.p.groups, true, false, g.CK, L, g.Coutg, wp, g.Coutg * g.CK, dy_chunk, g.Coutg * L, T(0),
             dcol, g.CK * L);
        const int64_t count = s_count * g.C * g.H * g.W;
        T* dx_chunk = dxp + n0 * g.C * g.H * g.W;
        if (unit)
          col2im_kernel<T, I, true><<<grid_for(count), kThreads, 0, ds.stream>>>(dcol, g, (I)L, (I)s_count, dx_chunk);
        else
          col2im_kernel<T, I, false><<<grid_for(count), kThreads, 0, ds.stream>>>(dcol, g, (I)L, (I)s_count, dx_chunk);
        OCRT_CUDA_LAUNCH_CHECK("conv2d backward", ds.device);
      }
    }
  });
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
