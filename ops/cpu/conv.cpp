// conv2d on the CPU: im2col + GEMM, forward and backward.
//
// For one sample n and one group g, unfold the input into a matrix `col` whose row
// r = (c, i, j) (input channel, kernel row, kernel column) and column q = (oh, ow) hold
//   col[r][q] = x[n, g*Cg + c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]   (0 in the padding).
// Then the convolution is one matrix product, with the weight read as a (Coutg, Cg*kh*kw) matrix:
//   y[n, group g] (Coutg, Ho*Wo) = W_g (Coutg, CK) @ col (CK, Ho*Wo)
// and the backward is two more:
//   dW_g += dy[n, g] (Coutg, HoWo) @ col^T (HoWo, CK)        summed over samples
//   dcol  = W_g^T (CK, Coutg) @ dy[n, g] (Coutg, HoWo)       then folded back (col2im) into dx
// A 1x1 convolution with stride 1 and no padding needs no unfolding: col is the input itself.
//
// Threads: with at least as many samples as threads, each thread takes whole samples (its
// own col buffer, single-threaded GEMMs, its own dW partial sum, added up in thread order at
// the end), so nothing is shared; with fewer samples, samples run one after the other and the
// GEMMs share the threads. Either way a fixed thread count gives bit-identical results.
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "ops/backend.h"
#include "ops/cpu/gemm.h"

namespace ocrt {

namespace {

// C (M,N, row stride ldc) = (accumulate ? C : 0) + A @ B, with A's (i,k) at A[i*a_r + k*a_c]
// and B's (k,j) at B[k*b_r + j*b_c]. float32 goes to ocrt's packed GEMM where the build has
// it; everything else to Eigen.
template <class T>
void gemm(int64_t M, int64_t N, int64_t K, const T* A, int64_t a_r, int64_t a_c, const T* B, int64_t b_r,
          int64_t b_c, T* C, int64_t ldc, bool accumulate) {
#if defined(OCRT_CPU_SGEMM)
  if constexpr (std::is_same_v<T, float>) {
    cpu::sgemm(M, N, K, A, a_r, a_c, B, b_r, b_c, C, ldc, accumulate);
    return;
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

// The shapes of one conv2d call, in the names of the header comment.
struct Geometry {
  int64_t N, C, H, W, Cout, kh, kw, Ho, Wo;
  int64_t Cg, Coutg, CK, HoWo;
  Conv2dParams p;
  bool direct;  // 1x1, stride 1, no padding: col is the input plane itself

  Geometry(const Tensor& x, const Tensor& w, const Shape& y_shape, const Conv2dParams& params)
      : N(x.size(0)), C(x.size(1)), H(x.size(2)), W(x.size(3)), Cout(w.size(0)), kh(w.size(2)), kw(w.size(3)),
        Ho(y_shape[2]), Wo(y_shape[3]), p(params) {
    Cg = C / p.groups;
    Coutg = Cout / p.groups;
    CK = Cg * kh * kw;
    HoWo = Ho * Wo;
    direct = kh == 1 && kw == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0;
  }
  // Samples are shared out among threads when there are enough of them.
  bool per_sample_threads() const { return omp_get_max_threads() > 1 && N >= omp_get_max_threads(); }
};

// col (CK, HoWo) for the Cg channels of one group starting at x_g (Cg, H, W).
template <class T>
void im2col(const T* x_g, const Geometry& g, T* col) {
  const Conv2dParams& p = g.p;
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        T* row = col + ((c * g.kh + i) * g.kw + j) * g.HoWo;
        const T* plane = x_g + c * g.H * g.W;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          T* out = row + oh * g.Wo;
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

// The adjoint of im2col: dx_g (Cg, H, W) += col folded back. dx_g must be zeroed first.
template <class T>
void col2im(const T* col, const Geometry& g, T* dx_g) {
  const Conv2dParams& p = g.p;
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const T* row = col + ((c * g.kh + i) * g.kw + j) * g.HoWo;
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

template <class T>
void conv2d_typed(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& params, const Tensor& y) {
  const Geometry g(x, w, y.shape(), params);
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* bp = bias.defined() ? bias.data<T>() : nullptr;
  T* yp = y.data<T>();

  // One sample: every group's GEMM, then the bias.
  auto sample = [&](int64_t n, T* col) {
    for (int64_t gi = 0; gi < g.p.groups; ++gi) {
      const T* x_g = xp + (n * g.C + gi * g.Cg) * g.H * g.W;
      const T* b_mat = x_g;
      if (!g.direct) {
        im2col(x_g, g, col);
        b_mat = col;
      }
      T* y_g = yp + (n * g.Cout + gi * g.Coutg) * g.HoWo;
      gemm<T>(g.Coutg, g.HoWo, g.CK, wp + gi * g.Coutg * g.CK, g.CK, 1, b_mat, g.HoWo, 1, y_g, g.HoWo, false);
    }
    if (bp)
      for (int64_t co = 0; co < g.Cout; ++co) {
        T* row = yp + (n * g.Cout + co) * g.HoWo;
        for (int64_t q = 0; q < g.HoWo; ++q) row[q] += bp[co];
      }
  };
  const size_t col_size = g.direct ? 0 : (size_t)(g.CK * g.HoWo);
  if (g.per_sample_threads()) {
#pragma omp parallel
    {
      std::unique_ptr<T[]> col(new T[col_size]);
#pragma omp for schedule(static)
      for (int64_t n = 0; n < g.N; ++n) sample(n, col.get());
    }
  } else {
    std::unique_ptr<T[]> col(new T[col_size]);
    for (int64_t n = 0; n < g.N; ++n) sample(n, col.get());
  }
}

template <class T>
void conv2d_backward_typed(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dParams& params,
                           const Tensor& dx, const Tensor& dw, const Tensor& db) {
  const Geometry g(x, w, dy.shape(), params);
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* dyp = dy.data<T>();
  T* dxp = dx.defined() ? dx.data<T>() : nullptr;
  T* dbp = db.defined() ? db.data<T>() : nullptr;
  const int64_t w_size = g.Cout * g.CK;

  if (dbp) {  // db[co] = sum over n, q of dy[n, co, q]: summed in double, in a fixed order
#pragma omp parallel for schedule(static) if (g.Cout * g.N * g.HoWo > 32768)
    for (int64_t co = 0; co < g.Cout; ++co) {
      double acc = 0;
      for (int64_t n = 0; n < g.N; ++n) {
        const T* row = dyp + (n * g.Cout + co) * g.HoWo;
        for (int64_t q = 0; q < g.HoWo; ++q) acc += row[q];
      }
      dbp[co] = (T)acc;
    }
  }
  if (!dxp && !dw.defined()) return;

  // One sample: dW partial += dy_g @ col^T, and dx[n] = col2im(W_g^T @ dy_g).
  auto sample = [&](int64_t n, T* col, T* dcol, T* dw_acc) {
    if (dxp) std::fill(dxp + n * g.C * g.H * g.W, dxp + (n + 1) * g.C * g.H * g.W, T(0));
    for (int64_t gi = 0; gi < g.p.groups; ++gi) {
      const T* x_g = xp + (n * g.C + gi * g.Cg) * g.H * g.W;
      const T* dy_g = dyp + (n * g.Cout + gi * g.Coutg) * g.HoWo;
      const T* w_g = wp + gi * g.Coutg * g.CK;
      if (dw_acc) {
        const T* c = x_g;
        if (!g.direct) {
          im2col(x_g, g, col);
          c = col;
        }
        // (Coutg, HoWo) @ (HoWo, CK): col read transposed through its strides.
        gemm<T>(g.Coutg, g.CK, g.HoWo, dy_g, g.HoWo, 1, c, 1, g.HoWo, dw_acc + gi * g.Coutg * g.CK, g.CK, true);
      }
      if (dxp) {
        T* dx_g = dxp + (n * g.C + gi * g.Cg) * g.H * g.W;
        if (g.direct) {  // dx_g (Cg, HW) is dcol itself
          gemm<T>(g.CK, g.HoWo, g.Coutg, w_g, 1, g.CK, dy_g, g.HoWo, 1, dx_g, g.HoWo, false);
        } else {
          gemm<T>(g.CK, g.HoWo, g.Coutg, w_g, 1, g.CK, dy_g, g.HoWo, 1, dcol, g.HoWo, false);
          col2im(dcol, g, dx_g);
        }
      }
    }
  };

  const size_t col_size = g.direct ? 0 : (size_t)(g.CK * g.HoWo);
  T* dwp = dw.defined() ? dw.data<T>() : nullptr;
  if (dwp) std::fill(dwp, dwp + w_size, T(0));
  if (g.per_sample_threads()) {
    const int threads = omp_get_max_threads();
    // Thread 0 accumulates straight into dw; the others into partials added in thread order.
    std::vector<std::unique_ptr<T[]>> partials(threads);
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      std::unique_ptr<T[]> col(new T[col_size]), dcol(new T[col_size]);
      T* acc = nullptr;
      if (dwp) {
        if (t == 0) {
          acc = dwp;
        } else {
          partials[t].reset(new T[w_size]());
          acc = partials[t].get();
        }
      }
#pragma omp for schedule(static)
      for (int64_t n = 0; n < g.N; ++n) sample(n, col.get(), dcol.get(), acc);
    }
    if (dwp)
      for (int t = 1; t < threads; ++t) {
        const T* part = partials[t].get();
        if (!part) continue;
#pragma omp parallel for schedule(static) if (w_size > 65536)
        for (int64_t i = 0; i < w_size; ++i) dwp[i] += part[i];
      }
  } else {
    std::unique_ptr<T[]> col(new T[col_size]), dcol(new T[col_size]);
    for (int64_t n = 0; n < g.N; ++n) sample(n, col.get(), dcol.get(), dwp);
  }
}

void cpu_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& y) {
  OCRT_DISPATCH_FLOAT(y.dtype(), "conv2d", [&] { conv2d_typed<scalar_t>(x, w, bias, p, y); });
}

void cpu_conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dParams& p, const Tensor& dx,
                         const Tensor& dw, const Tensor& db) {
  OCRT_DISPATCH_FLOAT(x.dtype(), "conv2d backward", [&] { conv2d_backward_typed<scalar_t>(x, w, dy, p, dx, dw, db); });
}

}  // namespace

void register_cpu_conv(Backend& b) {
  b.conv2d = cpu_conv2d;
  b.conv2d_backward = cpu_conv2d_backward;
}

}  // namespace ocrt
