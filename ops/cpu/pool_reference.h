// Plain-loop references for pooling: each output is its window's maximum or mean, computed
// straight from the definition, one output at a time. The planes-in-parallel kernels of
// ops/cpu/pool.cpp and the CUDA kernels are tested against these (tests/ops/test_pool.cpp,
// tests/cuda/test_conv_pool.cpp).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/backend.h"

namespace ocrt::reference {

// x (N,C,H,W) -> y (N,C,Ho,Wo) and at (N,C,Ho,Wo): the maximum of each window and its index
// h * W + w in its plane. Windows are scanned row by row; the first maximum wins and a NaN wins
// over everything (PyTorch's rule). -1 where a window lies entirely in the padding (y is then
// -inf). at may be null.
template <class T>
void max_pool2d(const T* x, T* y, int64_t* at, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                const Pool2dParams& p) {
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        T best = -INFINITY;
        int64_t best_i = -1;
        for (int64_t i = 0; i < p.kernel_h; ++i)
          for (int64_t j = 0; j < p.kernel_w; ++j) {
            const int64_t ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
            const int64_t iw = ow * p.stride_w - p.pad_w + j * p.dilation_w;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;  // padding never wins
            const T v = x[(nc * H + ih) * W + iw];
            if (best_i < 0 || v > best || (std::isnan(v) && !std::isnan(best))) best = v, best_i = ih * W + iw;
          }
        y[(nc * Ho + oh) * Wo + ow] = best;
        if (at) at[(nc * Ho + oh) * Wo + ow] = best_i;
      }
}

// dx (N,C,H,W) = each dy (N,C,Ho,Wo) added at its window's maximum (at from max_pool2d).
template <class T>
void max_pool2d_backward(const T* dy, const int64_t* at, T* dx, int64_t N, int64_t C, int64_t H, int64_t W,
                         int64_t Ho, int64_t Wo) {
  for (int64_t i = 0; i < N * C * H * W; ++i) dx[i] = 0;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t k = 0; k < Ho * Wo; ++k)
      if (at[nc * Ho * Wo + k] >= 0) dx[nc * H * W + at[nc * Ho * Wo + k]] += dy[nc * Ho * Wo + k];
}

// The divisor of output (oh, ow)'s window: its size counting the padding (count_include_pad)
// or only the input values it covers. The padded window is clipped at H + pad, as PyTorch.
inline int64_t avg_pool_divisor(int64_t oh, int64_t ow, int64_t H, int64_t W, const Pool2dParams& p) {
  const int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
  const int64_t h1 = std::min(h0 + p.kernel_h, H + p.pad_h), w1 = std::min(w0 + p.kernel_w, W + p.pad_w);
  if (p.count_include_pad) return (h1 - h0) * (w1 - w0);
  return (std::min(h1, H) - std::max<int64_t>(h0, 0)) * (std::min(w1, W) - std::max<int64_t>(w0, 0));
}

// x (N,C,H,W) -> y (N,C,Ho,Wo): the sum over each window's input values / avg_pool_divisor.
template <class T>
void avg_pool2d(const T* x, T* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                const Pool2dParams& p) {
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        double sum = 0;
        for (int64_t i = 0; i < p.kernel_h; ++i)
          for (int64_t j = 0; j < p.kernel_w; ++j) {
            const int64_t ih = oh * p.stride_h - p.pad_h + i, iw = ow * p.stride_w - p.pad_w + j;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) sum += (double)x[(nc * H + ih) * W + iw];
          }
        const int64_t d = avg_pool_divisor(oh, ow, H, W, p);
        y[(nc * Ho + oh) * Wo + ow] = d > 0 ? (T)(sum / (double)d) : T(0);
      }
}

// The adjoint: every input value of a window gets dy / divisor.
template <class T>
void avg_pool2d_backward(const T* dy, T* dx, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                         const Pool2dParams& p) {
  for (int64_t i = 0; i < N * C * H * W; ++i) dx[i] = 0;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t d = avg_pool_divisor(oh, ow, H, W, p);
        if (d <= 0) continue;
        const double g = (double)dy[(nc * Ho + oh) * Wo + ow] / (double)d;
        for (int64_t i = 0; i < p.kernel_h; ++i)
          for (int64_t j = 0; j < p.kernel_w; ++j) {
            const int64_t ih = oh * p.stride_h - p.pad_h + i, iw = ow * p.stride_w - p.pad_w + j;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) dx[(nc * H + ih) * W + iw] += (T)g;
          }
      }
}

// Adaptive average pooling x (N,C,H,W) -> y (N,C,Ho,Wo): output o of a dim covers inputs
// [floor(o*In/Out), ceil((o+1)*In/Out)).
template <class T>
void adaptive_avg_pool2d(const T* x, T* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t h0 = oh * H / Ho, h1 = ((oh + 1) * H + Ho - 1) / Ho;
        const int64_t w0 = ow * W / Wo, w1 = ((ow + 1) * W + Wo - 1) / Wo;
        double sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += (double)x[(nc * H + ih) * W + iw];
        y[(nc * Ho + oh) * Wo + ow] = (T)(sum / (double)((h1 - h0) * (w1 - w0)));
      }
}

template <class T>
void adaptive_avg_pool2d_backward(const T* dy, T* dx, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                                  int64_t Wo) {
  for (int64_t i = 0; i < N * C * H * W; ++i) dx[i] = 0;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t h0 = oh * H / Ho, h1 = ((oh + 1) * H + Ho - 1) / Ho;
        const int64_t w0 = ow * W / Wo, w1 = ((ow + 1) * W + Wo - 1) / Wo;
        const double g = (double)dy[(nc * Ho + oh) * Wo + ow] / (double)((h1 - h0) * (w1 - w0));
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) dx[(nc * H + ih) * W + iw] += (T)g;
      }
}

// Nearest upsampling by whole factors, straight from the definition: output (oh, ow) is input
// (oh / sh, ow / sw); the gradient scatters each output's dy back to its source pixel.
template <class T>
void upsample_nearest2d(const T* x, T* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t sh, int64_t sw) {
  const int64_t Ho = H * sh, Wo = W * sw;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) y[(nc * Ho + oh) * Wo + ow] = x[(nc * H + oh / sh) * W + ow / sw];
}

template <class T>
void upsample_nearest2d_backward(const T* dy, T* dx, int64_t N, int64_t C, int64_t H, int64_t W, int64_t sh,
                                 int64_t sw) {
  const int64_t Ho = H * sh, Wo = W * sw;
  for (int64_t i = 0; i < N * C * H * W; ++i) dx[i] = 0;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) dx[(nc * H + oh / sh) * W + ow / sw] += dy[(nc * Ho + oh) * Wo + ow];
}

}  // namespace ocrt::reference
