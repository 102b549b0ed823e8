// conv2d on the CPU: im2col + GEMM, forward and backward (and, beside it, Winograd for 3x3
// layers and a direct sum for layers with few output channels: winograd.h, conv_direct.h).
//
// For one sample n and one group g, unfold the input into a matrix `col` whose row
// r = (c, i, j) (input channel, kernel row, kernel column) and column q = (oh, ow) hold
//   col[r][q] = x[n, g*Cg + c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]   (0 in the padding).
// Then the convolution is one matrix product, with the weight read as a (Coutg, Cg*kh*kw) matrix:
//   y[n, group g] (Coutg, Ho*Wo) = W_g (Coutg, CK) @ col (CK, Ho*Wo)
// and the backward is two more:
//   dW_g += dy[n, g] (Coutg, HoWo) @ col^T (HoWo, CK)        summed over samples
//   dcol  = W_g^T (CK, Coutg) @ dy[n, g] (Coutg, HoWo)       then folded back (col2im) into dx
//
// Batching: a layer deep in CRNN has only Ho*Wo = 132 output positions per sample, which makes
// per-sample GEMMs short and wasteful (and dW, summed over samples, would be read and written
// once per sample). So samples are processed in chunks of S laid side by side, S*Ho*Wo >= 2048
// columns: the unfolded chunk is (CK, S*HoWo), dy of the chunk is gathered into
// (Cout, S*HoWo), and each of the three products is one long GEMM that the threads share
// (runtime/cpu/gemm.h). Unfolding, folding and gathering are shared out by samples.
//
// Every sum has a fixed order, so results are bit-identical from run to run, and they do not
// depend on the thread count (the GEMM's do not).
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "ops/backend.h"
#include "ops/conv_shape.h"
#include "runtime/cpu/gemm.h"
#include "ops/cpu/conv_amx.h"
#include "ops/cpu/conv_direct.h"
#include "ops/cpu/winograd.h"
#include "ops/cpu/winograd_2x2.h"
#include "runtime/cpu/loops.h"

namespace ocrt {

namespace {

// C (M,N, row stride ldc) = (accumulate ? C : 0) + A @ B, with A's (i,k) at A[i*a_r + k*a_c]
// and B's (k,j) at B[k*b_r + j*b_c]. float32 goes to ocrt's packed GEMM (in the precision of
// cpu::matmul_precision()) where the CPU runs it; everything else to Eigen.
template <class T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_r, int64_t a_c, const T* B, int64_t b_r,
          int64_t b_c, T* C, int64_t ldc, bool accumulate) {
#if defined(OCRT_CPU_SGEMM)
  if constexpr (std::is_same_v<T, float>) {
    if (cpu::sgemm_available()) {
      cpu::sgemm(M, N, K, A, a_r, a_c, B, b_r, b_c, C, ldc, accumulate);
      return;
    }
  }
#endif
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Strides = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  Eigen::Map<const Matrix, Eigen::Unaligned, Strides> a(A, M, K, Strides(a_r, a_c));
  Eigen::Map<const Matrix, Eigen::Unaligned, Strides> b(B, K, N, Strides(b_r, b_c));
  Eigen::Map<Matrix, Eigen::Unaligned, Eigen::OuterStride<>> c(C, M, N, Eigen::OuterStride<>(ldc));
  if (accumulate) c.noalias() += a * b;
  else c.noalias() = a * b;
}

// Scratch memory from the CPU caching allocator (runtime/cpu_allocator.h): large buffers are
// reused from call to call instead of being faulted in page by page every time.
template <class T>
T* scratch(Tensor& holder, int64_t count) {
  holder = Tensor::empty({count}, dtype_of<T>::value);
  return holder.data<T>();
}

using Geometry = ConvShape;  // ops/conv_shape.h, in the names of the header comment

// Samples per chunk: enough for S * HoWo >= 2048 GEMM columns (see the top of the file).
int64_t chunk_samples(const Geometry& g) { return std::clamp<int64_t>((2048 + g.HoWo - 1) / g.HoWo, 1, g.N); }

// col (CK, HoWo, row stride ld) for the Cg channels of one group starting at x_g (Cg, H, W);
// with a row range, only output rows [oh0, oh1): col is then (CK, (oh1 - oh0) * Wo).
template <class T>
void im2col(const T* x_g, const Geometry& g, T* col, int64_t ld, int64_t oh0 = 0, int64_t oh1 = -1) {
  const Conv2dParams& p = g.p;
  if (oh1 < 0) oh1 = g.Ho;
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = col + ((c * g.kh + i) * g.kw + j) * ld;
        const T* plane = x_g + c * g.H * g.W;
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          T* out = row + (oh - oh0) * g.Wo;
          const int64_t ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
          if (ih < 0 || ih >= g.H) {
            std::fill(out, out + g.Wo, T(0));
            continue;
          }
          const T* in = plane + ih * g.W;
          // Output columns whose input column iw = ow*sw - pw + j*dw lies inside [0, W).
          const int64_t shift = j * p.dilation_w - p.pad_w;
          int64_t lo = shift >= 0 ? 0 : (-shift + p.stride_w - 1) / p.stride_w;
          int64_t hi = g.W - 1 - shift < 0 ? 0 : (g.W - 1 - shift) / p.stride_w + 1;
          lo = std::min(lo, g.Wo);
          hi = std::clamp(hi, lo, g.Wo);
          std::fill(out, out + lo, T(0));
          if (p.stride_w == 1) {
            std::memcpy(out + lo, in + lo + shift, (size_t)(hi - lo) * sizeof(T));
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow * p.stride_w + shift];
          }
          std::fill(out + hi, out + g.Wo, T(0));
        }
      }
}

// The adjoint of im2col: dx_g (Cg, H, W) += col (CK, HoWo, row stride ld) folded back.
template <class T>
void col2im(const T* col, const Geometry& g, T* dx_g, int64_t ld) {
  const Conv2dParams& p = g.p;
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* row = col + ((c * g.kh + i) * g.kw + j) * ld;
        T* plane = dx_g + c * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const int64_t ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
          if (ih < 0 || ih >= g.H) continue;
          T* out = plane + ih * g.W;
          const T* in = row + oh * g.Wo;
          const int64_t shift = j * p.dilation_w - p.pad_w;
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const int64_t iw = ow * p.stride_w + shift;
            if (iw >= 0 && iw < g.W) out[iw] += in[ow];
          }
        }
      }
}

// (Cout, k) <-> samples: copies rows between a chunk matrix (row stride k, sample s at column
// s * HoWo) and the per-sample (Cout, HoWo) planes of an NCHW tensor starting at sample n0.
template <class T>
void gather_chunk(const T* planes, int64_t n0, int64_t s_count, const Geometry& g, T* chunk, int64_t k) {
#pragma omp parallel for schedule(static) if (s_count > 1)
  for (int64_t s = 0; s < s_count; ++s)
    for (int64_t co = 0; co < g.Cout; ++co)
      std::memcpy(chunk + co * k + s * g.HoWo, planes + ((n0 + s) * g.Cout + co) * g.HoWo, (size_t)g.HoWo * sizeof(T));
}

// The unfolded band of output rows that conv2d_forward uses for one large image holds at most
// this many bytes (wide enough, at thousands of columns, for the GEMM to run at full speed).
constexpr int64_t kMaxUnfoldBytes = int64_t(16) << 20;

// y (N, Cout, Ho, Wo) of a conv whose samples are each too large to unfold whole: for every
// sample and group, bands of output rows [oh0, oh1) are unfolded (CK, rows * Wo) and multiplied
// into the band's place in each output plane (row stride HoWo), then the bias is added.
template <class T>
void conv2d_forward_bands(const T* xp, const T* wp, const T* bp, const Geometry& g, T* yp) {
  const int64_t rows = std::max<int64_t>(1, kMaxUnfoldBytes / ((int64_t)sizeof(T) * g.CK * g.Wo));
  Tensor cols_mem;
  T* cols = scratch<T>(cols_mem, g.CK * std::min(rows, g.Ho) * g.Wo);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gi = 0; gi < g.p.groups; ++gi)
      for (int64_t oh0 = 0; oh0 < g.Ho; oh0 += rows) {
        const int64_t oh1 = std::min(g.Ho, oh0 + rows), k = (oh1 - oh0) * g.Wo;
        im2col(xp + (n * g.C + gi * g.Cg) * g.H * g.W, g, cols, k, oh0, oh1);
        // y rows of group gi, band [oh0, oh1): (Coutg, k) = W_g (Coutg, CK) @ cols (CK, k)
        T* out = yp + (n * g.Cout + gi * g.Coutg) * g.HoWo + oh0 * g.Wo;
        gemm<T>(g.Coutg, k, g.CK, wp + gi * g.Coutg * g.CK, g.CK, 1, cols, k, 1, out, g.HoWo, false);
      }
  if (!bp) return;
#pragma omp parallel for schedule(static) if (g.N * g.Cout * g.HoWo > cpu::kParallelGrain)
  for (int64_t nc = 0; nc < g.N * g.Cout; ++nc) {
    T* plane = yp + nc * g.HoWo;
    const T b = bp[nc % g.Cout];
    for (int64_t q = 0; q < g.HoWo; ++q) plane[q] += b;
  }
}

template <class T>
void conv2d_typed(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& params, const Tensor& y) {
  const Geometry g(x, w, y.shape(), params);
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* bp = bias.defined() ? bias.data<T>() : nullptr;
  T* yp = y.data<T>();
  // Few output channels (a detector's last layers), or few input values an output (a first
  // layer on gray pixels): summed straight from the input rows, in either mode, instead of
  // unfolding C kh kw values for every output pixel (conv_direct.h).
  if constexpr (std::is_same_v<T, float>) {
    if (cpu::direct_conv_applies(g.C, g.Cout, g.kh, g.kw, params)) {
      cpu::direct_conv2d(xp, wp, bp, yp, g.N, g.C, g.H, g.W, g.Cout, g.kh, g.kw, params.pad_h, params.pad_w);
      return;
    }
  }
  // A first layer of stride 2 on gray pixels (the detector's stem), in float32 products: summed
  // from the input rows with the GEMM's own arithmetic, the same bits without the unfolded
  // matrix (conv_direct.h).
  if constexpr (std::is_same_v<T, float>) {
    if (cpu::direct_stride2_applies(g.C, g.kh, g.kw, params) && cpu::matmul_precision() == cpu::MatmulPrecision::f32) {
      cpu::direct_conv2d_stride2(xp, wp, bp, yp, g.N, g.H, g.W, g.Cout, g.kh, g.kw, params.pad_h, params.pad_w);
      return;
    }
  }
  // bf16 products on AMX tiles: the taps read in place from a channels-last image (conv_amx.h),
  // in either mode (the same bound as every bf16 product).
  if constexpr (std::is_same_v<T, float>) {
    if (cpu::amx_conv_applies(g.C, g.Cout, g.kh, g.kw, params)) {
      cpu::amx_bf16_conv2d(xp, wp, bp, yp, g.N, g.C, g.H, g.W, g.Cout, g.kh, g.kw, params);
      return;
    }
  }
#if defined(OCRT_CPU_WINOGRAD)
  // 3x3 layers in fast mode: Winograd's F(4x4, 3x3), 4x fewer multiply-adds (winograd.h).
  if constexpr (std::is_same_v<T, float>) {
    if (params.fast && cpu::winograd_applies(g.C, g.Cout, g.kh, g.kw, params)) {
      cpu::winograd_conv2d(xp, wp, bp, yp, g.N, g.C, g.H, g.W, g.Cout, params.pad_h, params.pad_w);
      return;
    }
    // 2x2 layers (crnn's last) in fast mode: F(3, 2) along the rows, a third fewer (winograd_2x2.h).
    if (params.fast && cpu::winograd_2x2_applies(g.C, g.Cout, g.kh, g.kw, g.Wo, params)) {
      cpu::winograd_2x2_conv2d(xp, wp, bp, yp, g.N, g.C, g.H, g.W, g.Cout, params.pad_h, params.pad_w);
      return;
    }
  }
#endif
  const int64_t S = chunk_samples(g);
  // One large image (a page at full resolution) would unfold into CK x HoWo values, 700 MB for
  // a 3x3 layer of 16 channels on a 1280 x 960 page: such an image goes through in bands of
  // output rows, each unfolded on its own and multiplied straight into y's planes.
  if (S == 1 && g.CK * g.HoWo * (int64_t)sizeof(T) > kMaxUnfoldBytes) {
    conv2d_forward_bands(xp, wp, bp, g, yp);
    return;
  }
  Tensor cols_mem, yc_mem;
  T* cols = scratch<T>(cols_mem, g.CK * S * g.HoWo);
  T* yc = scratch<T>(yc_mem, g.Cout * S * g.HoWo);
  for (int64_t n0 = 0; n0 < g.N; n0 += S) {
    const int64_t s_count = std::min(S, g.N - n0), k = s_count * g.HoWo;
    // A chunk of one sample is that sample's own (Cout, HoWo) planes: the GEMM writes y directly.
    T* out = s_count == 1 ? yp + n0 * g.Cout * g.HoWo : yc;
    for (int64_t gi = 0; gi < g.p.groups; ++gi) {
#pragma omp parallel for schedule(static) if (s_count > 1)
      for (int64_t s = 0; s < s_count; ++s)
        im2col(xp + ((n0 + s) * g.C + gi * g.Cg) * g.H * g.W, g, cols + s * g.HoWo, k);
      // out rows of group gi (Coutg, k) = W_g (Coutg, CK) @ cols (CK, k)
      gemm<T>(g.Coutg, k, g.CK, wp + gi * g.Coutg * g.CK, g.CK, 1, cols, k, 1, out + gi * g.Coutg * k, k, false);
    }
    // Back to NCHW (unless written there already), adding the bias.
#pragma omp parallel for schedule(static) if (s_count > 1)
    for (int64_t s = 0; s < s_count; ++s)
      for (int64_t co = 0; co < g.Cout; ++co) {
        const T* src = out + co * k + s * g.HoWo;
        T* dst = yp + ((n0 + s) * g.Cout + co) * g.HoWo;
        const T b = bp ? bp[co] : T(0);
        for (int64_t q = 0; q < g.HoWo; ++q) dst[q] = src[q] + b;
      }
  }
}

// db[co] = sum over n, q of dy[n, co, q]: summed in double, in a fixed order: eight running
// sums (value q into sum q mod 8 of its plane, which the compiler makes one vector of doubles),
// added pairwise at the end, then the values past the last whole eight.
template <class T>
void bias_grad(const T* dyp, const Geometry& g, T* dbp) {
#pragma omp parallel for schedule(static) if (g.Cout * g.N * g.HoWo > cpu::kParallelGrain)
  for (int64_t co = 0; co < g.Cout; ++co) {
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0}, tail = 0;
    const int64_t whole = g.HoWo / 8 * 8;
    for (int64_t n = 0; n < g.N; ++n) {
      const T* row = dyp + (n * g.Cout + co) * g.HoWo;
      for (int64_t q = 0; q < whole; q += 8)
        for (int l = 0; l < 8; ++l) lane[l] += (double)row[q + l];
      for (int64_t q = whole; q < g.HoWo; ++q) tail += row[q];
    }
    dbp[co] = (T)((((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]))) + tail);
  }
}

#if defined(OCRT_CPU_WINOGRAD)
// Fast mode: both gradients of a 3x3 stride-1 float32 layer through Winograd (winograd.h). It
// computes what it can and sets that pointer to null; what is left goes through im2col.
// dx is itself a 3x3 stride-1 convolution: of dy, padded by 2 - pad, with every filter turned
// by 180 degrees and the channel roles swapped,
//   dx[n, c, h, w] = sum over k, i, j of dy[n, k, h + pad - i, w + pad - j] w[k, c, i, j]
//                  = conv2d(dy, w')[n, c, h, w]   with w'[c, k, i, j] = w[k, c, 2 - i, 2 - j]
// (which needs pad <= 2). dw sums products of dy with the forward's input tiles.
void winograd_backward(const float* xp, const float* wp, const float* dyp, const Geometry& g, float*& dxp,
                       float*& dwp) {
  const Conv2dParams& p = g.p;
  if (dwp) {
    cpu::winograd_conv2d_weight_grad(xp, dyp, dwp, g.N, g.C, g.H, g.W, g.Cout, p.pad_h, p.pad_w);
    dwp = nullptr;  // done
  }
  if (dxp && p.pad_h <= 2 && p.pad_w <= 2) {
    Tensor turned_mem;
    float* turned = scratch<float>(turned_mem, g.C * g.Cout * 9);
    for (int64_t k = 0; k < g.Cout; ++k)
      for (int64_t c = 0; c < g.C; ++c)
        for (int64_t i = 0; i < 9; ++i) turned[(c * g.Cout + k) * 9 + i] = wp[(k * g.C + c) * 9 + (8 - i)];
    cpu::winograd_conv2d(dyp, turned, nullptr, dxp, g.N, g.Cout, g.Ho, g.Wo, g.C, 2 - p.pad_h, 2 - p.pad_w, 0, nullptr,
                         /*weights_once=*/true);
    dxp = nullptr;  // done
  }
}
#endif

// dx of a stride-1, undilated layer in bf16 on AMX tiles (conv_amx.h), where they apply: the
// convolution of dy, padded by k - 1 - pad, with every filter turned by 180 degrees and the
// channel roles swapped,
//   dx[n, c, h, w] = sum over k, i, j of dy[n, k, h + pad - i, w + pad - j] w[k, c, i, j]
//                  = conv2d(dy, w')[n, c, h, w]   with w'[c, k, i, j] = w[k, c, kh-1-i, kw-1-j]
// (Winograd's backward below is the same identity for 3x3). Sets dxp to null when done.
void amx_backward_input(const float* wp, const float* dyp, const Geometry& g, float*& dxp) {
  const Conv2dParams& p = g.p;  // groups and stride: amx_conv_applies checks them on turned_p
  if (p.dilation_h != 1 || p.dilation_w != 1 || p.pad_h > g.kh - 1 || p.pad_w > g.kw - 1) return;
  Conv2dParams turned_p = p;
  turned_p.pad_h = g.kh - 1 - p.pad_h;
  turned_p.pad_w = g.kw - 1 - p.pad_w;
  if (!cpu::amx_conv_applies(g.Cout, g.C, g.kh, g.kw, turned_p)) return;
  cpu::amx_bf16_conv2d_turned(dyp, wp, dxp, g.N, g.Cout, g.Ho, g.Wo, g.C, g.kh, g.kw, turned_p);
  dxp = nullptr;  // done
}

// dx and dw (either may be null) through im2col and GEMM, a chunk of samples at a time (the
// file's opening comment).
template <class T>
void im2col_backward(const T* xp, const T* wp, const T* dyp, const Geometry& g, T* dxp, T* dwp) {
  const int64_t S = chunk_samples(g);
  Tensor dyc_mem, buf_mem;
  T* dyc = scratch<T>(dyc_mem, g.Cout * S * g.HoWo);
  T* buf = scratch<T>(buf_mem, g.CK * S * g.HoWo);
  Tensor dwt_mem;
  T* dwt = dwp ? scratch<T>(dwt_mem, g.Cout * g.CK) : nullptr;  // per group (CK, Coutg)
  if (dwp) std::fill(dwt, dwt + g.Cout * g.CK, T(0));

  for (int64_t n0 = 0; n0 < g.N; n0 += S) {
    const int64_t s_count = std::min(S, g.N - n0), k = s_count * g.HoWo;
    // dy of the chunk as (Cout, k); a one-sample chunk is dy's own planes.
    const T* dy_chunk = dyp + n0 * g.Cout * g.HoWo;
    if (s_count > 1) {
      gather_chunk(dyp, n0, s_count, g, dyc, k);
      dy_chunk = dyc;
    }
    for (int64_t gi = 0; gi < g.p.groups; ++gi) {
      const T* dy_g = dy_chunk + gi * g.Coutg * k;
      if (dwp) {
#pragma omp parallel for schedule(static) if (s_count > 1)
        for (int64_t s = 0; s < s_count; ++s)
          im2col(xp + ((n0 + s) * g.C + gi * g.Cg) * g.H * g.W, g, buf + s * g.HoWo, k);
        // dW_g^T (CK, Coutg) += cols (CK, k) @ dy_g^T (k, Coutg). This orientation (rather than
        // dW_g = dy_g @ cols^T) puts the larger of CK and Coutg on the GEMM's rows, which
        // amortises packing the strided operand over more multiply-adds.
        gemm<T>(g.CK, g.Coutg, k, buf, k, 1, dy_g, 1, k, dwt + gi * g.CK * g.Coutg, g.Coutg, true);
      }
      if (dxp) {
        // dcols (CK, k) = W_g^T (CK, Coutg) @ dy_g (Coutg, k), folded back into each sample. W_g^T
        // is read through its strides: the GEMM packs it once per block anyway.
        gemm<T>(g.CK, k, g.Coutg, wp + gi * g.Coutg * g.CK, 1, g.CK, dy_g, k, 1, buf, k, false);
#pragma omp parallel for schedule(static) if (s_count > 1)
        for (int64_t s = 0; s < s_count; ++s) {
          T* dx_g = dxp + ((n0 + s) * g.C + gi * g.Cg) * g.H * g.W;
          std::fill(dx_g, dx_g + g.Cg * g.H * g.W, T(0));
          col2im(buf + s * g.HoWo, g, dx_g, k);
        }
      }
    }
  }
  if (dwp)  // dW_g^T (CK, Coutg) back to w's layout (Cout, CK)
    for (int64_t gi = 0; gi < g.p.groups; ++gi)
      for (int64_t co = 0; co < g.Coutg; ++co)
        for (int64_t r = 0; r < g.CK; ++r)
          dwp[(gi * g.Coutg + co) * g.CK + r] = dwt[gi * g.CK * g.Coutg + r * g.Coutg + co];
}

// The gradients a caller asked for (dx, dw, db each may be undefined): db by a plain sum,
// then Winograd where fast mode allows it, then im2col for whatever is left.
template <class T>
void conv2d_backward_typed(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dParams& params,
                           const Tensor& dx, const Tensor& dw, const Tensor& db) {
  const Geometry g(x, w, dy.shape(), params);
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* dyp = dy.data<T>();
  T* dxp = dx.defined() ? dx.data<T>() : nullptr;
  T* dwp = dw.defined() ? dw.data<T>() : nullptr;
  if (db.defined()) bias_grad(dyp, g, db.data<T>());
  if constexpr (std::is_same_v<T, float>) {
    if (dxp) amx_backward_input(wp, dyp, g, dxp);
    if (dwp && cpu::amx_weight_grad_applies(g.C, g.Cout, g.kh, g.kw, params)) {
      cpu::amx_bf16_conv2d_weight_grad(xp, dyp, dwp, g.N, g.C, g.H, g.W, g.Cout, g.kh, g.kw, params);
      dwp = nullptr;  // done
    }
  }
#if defined(OCRT_CPU_WINOGRAD)
  if constexpr (std::is_same_v<T, float>) {
    if (params.fast && cpu::winograd_applies(g.C, g.Cout, g.kh, g.kw, params))
      winograd_backward(xp, wp, dyp, g, dxp, dwp);
  }
#endif
  if (dxp || dwp) im2col_backward(xp, wp, dyp, g, dxp, dwp);
}

void cpu_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& y) {
  dispatch_float(y.dtype(), "conv2d", [&](auto zero) { conv2d_typed<decltype(zero)>(x, w, bias, p, y); });
}

void cpu_conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dParams& p, const Tensor& dx,
                         const Tensor& dw, const Tensor& db) {
  dispatch_float(x.dtype(), "conv2d backward",
      [&](auto zero) { conv2d_backward_typed<decltype(zero)>(x, w, dy, p, dx, dw, db); });
}

}  // namespace

void register_cpu_conv(LayerBackend& b) {
  b.conv2d = cpu_conv2d;
  b.conv2d_backward = cpu_conv2d_backward;
}

}  // namespace ocrt
