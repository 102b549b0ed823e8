// Plain-loop reference convolution: the definition, in seven nested loops, that the fast
// im2col + GEMM path of ops/cpu/conv.cpp is tested against (tests/ops/test_conv.cpp).
#pragma once
#include <cstdint>

#include "ops/backend.h"

namespace ocrt::reference {

// x (N,C,H,W), w (Cout,C/groups,kh,kw), b (Cout) or null -> y (N,Cout,Ho,Wo); all contiguous.
template <class T>
void conv2d(const T* x, const T* w, const T* b, T* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Cout,
            int64_t kh, int64_t kw, int64_t Ho, int64_t Wo, const Conv2dParams& p) {
  const int64_t Cg = C / p.groups, Coutg = Cout / p.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Cout; ++co) {
      const int64_t g = co / Coutg;
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double acc = b ? (double)b[co] : 0.0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
                const int64_t iw = ow * p.stride_w - p.pad_w + j * p.dilation_w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;  // zero padding
                acc += (double)x[((n * C + g * Cg + c) * H + ih) * W + iw] * (double)w[((co * Cg + c) * kh + i) * kw + j];
              }
          y[((n * Cout + co) * Ho + oh) * Wo + ow] = (T)acc;
        }
    }
}

// The adjoint of the loops above: every (x, w) product that contributed to y gets dy back.
template <class T>
void conv2d_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, int64_t N, int64_t C, int64_t H,
                     int64_t W, int64_t Cout, int64_t kh, int64_t kw, int64_t Ho, int64_t Wo, const Conv2dParams& p) {
  const int64_t Cg = C / p.groups, Coutg = Cout / p.groups;
  if (dx) for (int64_t i = 0; i < N * C * H * W; ++i) dx[i] = 0;
  if (dw) for (int64_t i = 0; i < Cout * Cg * kh * kw; ++i) dw[i] = 0;
  if (db) for (int64_t i = 0; i < Cout; ++i) db[i] = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Cout; ++co) {
      const int64_t g = co / Coutg;
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const T g_out = dy[((n * Cout + co) * Ho + oh) * Wo + ow];
          if (db) db[co] += g_out;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
                const int64_t iw = ow * p.stride_w - p.pad_w + j * p.dilation_w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t xi = ((n * C + g * Cg + c) * H + ih) * W + iw, wi = ((co * Cg + c) * kh + i) * kw + j;
                if (dx) dx[xi] += g_out * w[wi];
                if (dw) dw[wi] += g_out * x[xi];
              }
        }
    }
}

}  // namespace ocrt::reference
