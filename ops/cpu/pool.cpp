// Pooling on the CPU: max, average and adaptive average over NCHW planes, and nearest upsampling. Each (n, c) plane is
// independent, so the planes are shared among OpenMP threads; inside a plane the loops are the
// definition itself (pooling is memory-bound, and these loops read every input once per window).
#include <omp.h>

#include <algorithm>
#include <limits>

#include "ops/backend.h"
#include "ops/pool_windows.h"
#include "runtime/cpu/loops.h"

namespace ocrt {

namespace {

// Pooling does little work per element read, so a plane is worth a thread at half the usual grain.
bool parallel_planes(int64_t planes, int64_t work) { return planes > 1 && work > cpu::kParallelGrain / 2; }

// Whether v takes the place of best in a window scanned in order: the first maximum wins, and a
// NaN wins over everything (it propagates, as in PyTorch).
template <class T>
inline bool beats(T v, T best) {
  return v > best || (v != v && best == best);
}

// best or v, whichever a window scanned in order keeps (beats), without a branch.
template <class T>
inline T first_max(T best, T v) {
  return beats(v, best) ? v : best;
}

// The maximum of output (oh, ow)'s window in one plane, and its index h * W + w (-1 if the window
// lies entirely in the padding): any kernel, stride, padding and dilation.
template <class T>
T window_max(const T* in, int64_t H, int64_t W, const Pool2dParams& p, int64_t oh, int64_t ow, int64_t& best_i) {
  T best = -std::numeric_limits<T>::infinity();
  best_i = -1;
  for (int64_t i = 0; i < p.kernel_h; ++i) {
    const int64_t ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
    if (ih < 0 || ih >= H) continue;
    for (int64_t j = 0; j < p.kernel_w; ++j) {
      const int64_t iw = ow * p.stride_w - p.pad_w + j * p.dilation_w;
      if (iw < 0 || iw >= W) continue;
      const T v = in[ih * W + iw];
      if (best_i < 0 || beats(v, best)) {
        best = v;
        best_i = ih * W + iw;
      }
    }
  }
  return best;
}

// Output columns [ow0, ow1) of one plane through the general window.
template <class T>
void max_pool_columns(const T* in, int64_t H, int64_t W, const Pool2dParams& p, int64_t Ho, int64_t Wo, int64_t ow0,
                      int64_t ow1, T* out, int64_t* idx) {
  for (int64_t oh = 0; oh < Ho; ++oh)
    for (int64_t ow = ow0; ow < ow1; ++ow) {
      int64_t best_i;
      out[oh * Wo + ow] = window_max(in, H, W, p, oh, ow, best_i);
      if (idx) idx[oh * Wo + ow] = best_i;
    }
}

// One plane through a 2x2 window without dilation or row padding, stride 2 down the rows: every
// pooling layer of CRNN. Output row oh reads input rows 2oh and 2oh+1 only, and inside the
// columns where both window columns exist the loop has no bounds checks; the edge columns (at
// most one on each side, from the column padding) go through the general window. Same order of
// comparisons as the general window, so the same maxima and indices. Without indices (inference)
// and with a column stride of 1 or 2 (all of CRNN's), the interior is a branch-free loop over
// the window's four values: 3.3% of an int8 crnn-en run went to the loop with indices.
template <class T>
void max_pool_plane_2x2(const T* in, int64_t H, int64_t W, const Pool2dParams& p, int64_t Ho, int64_t Wo, T* out,
                        int64_t* idx) {
  const int64_t sw = p.stride_w, pw = p.pad_w;
  // Interior columns: ow*sw - pw >= 0 and ow*sw - pw + 1 <= W - 1.
  const int64_t lo = std::min(Wo, (pw + sw - 1) / sw);
  const int64_t hi = std::max(lo, std::min(Wo, W - 2 + pw >= 0 ? (W - 2 + pw) / sw + 1 : 0));
  if (!idx && (sw == 1 || sw == 2)) {  // the maxima alone: branch-free loops the compiler vectorises
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const T* r0 = in + 2 * oh * W - pw;
      const T* r1 = r0 + W;
      T* o = out + oh * Wo;
      if (sw == 1)
        for (int64_t ow = lo; ow < hi; ++ow) o[ow] = first_max(first_max(first_max(r0[ow], r0[ow + 1]), r1[ow]), r1[ow + 1]);
      else
        for (int64_t ow = lo; ow < hi; ++ow)
          o[ow] = first_max(first_max(first_max(r0[2 * ow], r0[2 * ow + 1]), r1[2 * ow]), r1[2 * ow + 1]);
    }
  } else {
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const T* r0 = in + 2 * oh * W;
      const T* r1 = r0 + W;
      T* o = out + oh * Wo;
      for (int64_t ow = lo; ow < hi; ++ow) {
        const int64_t c = ow * sw - pw;
        T best = r0[c];
        int64_t at = 0;
        if (beats(r0[c + 1], best)) best = r0[c + 1], at = 1;
        if (beats(r1[c], best)) best = r1[c], at = 2;
        if (beats(r1[c + 1], best)) best = r1[c + 1], at = 3;
        o[ow] = best;
        if (idx) idx[oh * Wo + ow] = (2 * oh + (at >> 1)) * W + c + (at & 1);
      }
    }
  }
  max_pool_columns(in, H, W, p, Ho, Wo, 0, lo, out, idx);
  max_pool_columns(in, H, W, p, Ho, Wo, hi, Wo, out, idx);
}

// indices may be undefined (nothing will be differentiated): then only the maxima are written.
template <class T>
void max_pool_typed(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices) {
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), Ho = y.size(2), Wo = y.size(3);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  int64_t* ip = indices.defined() ? indices.data<int64_t>() : nullptr;
  const bool two_by_two = p.kernel_h == 2 && p.kernel_w == 2 && p.dilation_h == 1 && p.dilation_w == 1 &&
                          p.pad_h == 0 && p.stride_h == 2 && 2 * Ho <= H;
#pragma omp parallel for schedule(static) if (parallel_planes(planes, planes * Ho * Wo * p.kernel_h * p.kernel_w))
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* in = xp + pl * H * W;
    T* out = yp + pl * Ho * Wo;
    int64_t* idx = ip ? ip + pl * Ho * Wo : nullptr;
    if (two_by_two) max_pool_plane_2x2(in, H, W, p, Ho, Wo, out, idx);
    else max_pool_columns(in, H, W, p, Ho, Wo, 0, Wo, out, idx);
  }
}

template <class T>
void max_pool_backward_typed(const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  const int64_t planes = dx.size(0) * dx.size(1), HW = dx.size(2) * dx.size(3), out = dy.size(2) * dy.size(3);
  const T* g = dy.data<T>();
  const int64_t* ip = indices.data<int64_t>();
  T* d = dx.data<T>();
#pragma omp parallel for schedule(static) if (parallel_planes(planes, planes * (HW + out)))
  for (int64_t pl = 0; pl < planes; ++pl) {
    T* plane = d + pl * HW;
    std::fill(plane, plane + HW, T(0));
    for (int64_t o = 0; o < out; ++o) {
      const int64_t i = ip[pl * out + o];
      if (i >= 0) plane[i] += g[pl * out + o];  // overlapping windows may pick the same input
    }
  }
}

template <class T>
void avg_pool_typed(const Tensor& x, const Pool2dParams& p, const Tensor& y) {
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), Ho = y.size(2), Wo = y.size(3);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
#pragma omp parallel for schedule(static) if (parallel_planes(planes, planes * Ho * Wo * p.kernel_h * p.kernel_w))
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* in = xp + pl * H * W;
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const AvgWindow win = avg_window(oh, ow, H, W, p);
        double acc = 0;
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) acc += in[ih * W + iw];
        yp[(pl * Ho + oh) * Wo + ow] = win.divisor > 0 ? (T)(acc / win.divisor) : T(0);
      }
  }
}

template <class T>
void avg_pool_backward_typed(const Tensor& dy, const Pool2dParams& p, const Tensor& dx) {
  const int64_t planes = dx.size(0) * dx.size(1), H = dx.size(2), W = dx.size(3), Ho = dy.size(2), Wo = dy.size(3);
  const T* g = dy.data<T>();
  T* d = dx.data<T>();
#pragma omp parallel for schedule(static) if (parallel_planes(planes, planes * Ho * Wo * p.kernel_h * p.kernel_w))
  for (int64_t pl = 0; pl < planes; ++pl) {
    T* plane = d + pl * H * W;
    std::fill(plane, plane + H * W, T(0));
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const AvgWindow win = avg_window(oh, ow, H, W, p);
        if (win.divisor <= 0) continue;
        const T share = (T)(g[(pl * Ho + oh) * Wo + ow] / win.divisor);
        for (int64_t ih = win.h0; ih < win.h1; ++ih)
          for (int64_t iw = win.w0; iw < win.w1; ++iw) plane[ih * W + iw] += share;
      }
  }
}

template <class T>
void adaptive_avg_typed(const Tensor& x, const Tensor& y) {
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), Ho = y.size(2), Wo = y.size(3);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
#pragma omp parallel for schedule(static) if (parallel_planes(planes, planes * H * W))
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* in = xp + pl * H * W;
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const int64_t h0 = adaptive_start(oh, H, Ho), h1 = adaptive_end(oh, H, Ho);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t w0 = adaptive_start(ow, W, Wo), w1 = adaptive_end(ow, W, Wo);
        double acc = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) acc += in[ih * W + iw];
        yp[(pl * Ho + oh) * Wo + ow] = (T)(acc / (double)((h1 - h0) * (w1 - w0)));
      }
    }
  }
}

template <class T>
void adaptive_avg_backward_typed(const Tensor& dy, const Tensor& dx) {
  const int64_t planes = dx.size(0) * dx.size(1), H = dx.size(2), W = dx.size(3), Ho = dy.size(2), Wo = dy.size(3);
  const T* g = dy.data<T>();
  T* d = dx.data<T>();
#pragma omp parallel for schedule(static) if (parallel_planes(planes, planes * H * W))
  for (int64_t pl = 0; pl < planes; ++pl) {
    T* plane = d + pl * H * W;
    std::fill(plane, plane + H * W, T(0));
    for (int64_t oh = 0; oh < Ho; ++oh) {
      const int64_t h0 = adaptive_start(oh, H, Ho), h1 = adaptive_end(oh, H, Ho);
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const int64_t w0 = adaptive_start(ow, W, Wo), w1 = adaptive_end(ow, W, Wo);
        const T share = (T)(g[(pl * Ho + oh) * Wo + ow] / (double)((h1 - h0) * (w1 - w0)));
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) plane[ih * W + iw] += share;
      }
    }
  }
}

// Nearest upsampling: each input row is widened once (every pixel repeated sw times), then
// that output row is copied sh - 1 times.
template <class T>
void upsample_nearest_typed(const Tensor& x, int64_t sh, int64_t sw, const Tensor& y) {
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), Wo = W * sw;
  const T* in = x.data<T>();
  T* out = y.data<T>();
#pragma omp parallel for schedule(static) if (parallel_planes(planes, planes * H * W * sh * sw))
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t h = 0; h < H; ++h) {
      const T* row = in + (pl * H + h) * W;
      T* first = out + (pl * H + h) * sh * Wo;
      for (int64_t w = 0; w < W; ++w)
        for (int64_t j = 0; j < sw; ++j) first[w * sw + j] = row[w];
      for (int64_t i = 1; i < sh; ++i) std::copy(first, first + Wo, first + i * Wo);
    }
}

// Into y's planes (each contiguous, at y's strides), or added to them: the same values as
// upsample_nearest_typed, and as y + that with accumulate (the sum in the same order: y's value
// first, as cpu_binary's add of y and the upsampled tensor).
template <class T>
void upsample_nearest_into_typed(const Tensor& x, int64_t sh, int64_t sw, const Tensor& y, bool accumulate) {
  const int64_t N = x.size(0), C = x.size(1), planes = N * C, H = x.size(2), W = x.size(3), Wo = W * sw;
  const int64_t yn = y.stride(0), yc = y.stride(1);
  const T* in = x.data<T>();
  T* base = y.data<T>();
#pragma omp parallel for schedule(static) if (parallel_planes(planes, planes * H * W * sh * sw))
  for (int64_t pl = 0; pl < planes; ++pl) {
    T* out = base + (pl / C) * yn + (pl % C) * yc;
    for (int64_t h = 0; h < H; ++h) {
      const T* row = in + (pl * H + h) * W;
      for (int64_t i = 0; i < sh; ++i) {
        T* dst = out + (h * sh + i) * Wo;
        if (accumulate) {
          for (int64_t w = 0; w < W; ++w)
            for (int64_t j = 0; j < sw; ++j) dst[w * sw + j] = dst[w * sw + j] + row[w];
        } else {
          for (int64_t w = 0; w < W; ++w)
            for (int64_t j = 0; j < sw; ++j) dst[w * sw + j] = row[w];
        }
      }
    }
  }
}

// Its gradient: each input pixel sums its block of dy, in double, rows then columns.
template <class T>
void upsample_nearest_backward_typed(const Tensor& dy, int64_t sh, int64_t sw, const Tensor& dx) {
  const int64_t planes = dx.size(0) * dx.size(1), H = dx.size(2), W = dx.size(3), Wo = W * sw;
  const T* g = dy.data<T>();
  T* d = dx.data<T>();
#pragma omp parallel for schedule(static) if (parallel_planes(planes, planes * H * W * sh * sw))
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) {
        double sum = 0;
        for (int64_t i = 0; i < sh; ++i) {
          const T* block = g + ((pl * H + h) * sh + i) * Wo + w * sw;
          for (int64_t j = 0; j < sw; ++j) sum += (double)block[j];
        }
        d[(pl * H + h) * W + w] = (T)sum;
      }
}

}  // namespace

void register_cpu_pool(LayerBackend& b) {
  b.max_pool2d = [](const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& idx) {
    dispatch_float(x.dtype(), "max_pool2d", [&](auto zero) { max_pool_typed<decltype(zero)>(x, p, y, idx); });
  };
  b.max_pool2d_backward = [](const Tensor& dy, const Tensor& idx, const Tensor& dx) {
    dispatch_float(dx.dtype(), "max_pool2d backward",
        [&](auto zero) { max_pool_backward_typed<decltype(zero)>(dy, idx, dx); });
  };
  b.avg_pool2d = [](const Tensor& x, const Pool2dParams& p, const Tensor& y) {
    dispatch_float(x.dtype(), "avg_pool2d", [&](auto zero) { avg_pool_typed<decltype(zero)>(x, p, y); });
  };
  b.avg_pool2d_backward = [](const Tensor& dy, const Pool2dParams& p, const Tensor& dx) {
    dispatch_float(dx.dtype(), "avg_pool2d backward",
        [&](auto zero) { avg_pool_backward_typed<decltype(zero)>(dy, p, dx); });
  };
  b.adaptive_avg_pool2d = [](const Tensor& x, const Tensor& y) {
    dispatch_float(x.dtype(), "adaptive_avg_pool2d", [&](auto zero) { adaptive_avg_typed<decltype(zero)>(x, y); });
  };
  b.adaptive_avg_pool2d_backward = [](const Tensor& dy, const Tensor& dx) {
    dispatch_float(dx.dtype(), "adaptive_avg_pool2d backward",
        [&](auto zero) { adaptive_avg_backward_typed<decltype(zero)>(dy, dx); });
  };
  b.upsample_nearest2d = [](const Tensor& x, int64_t sh, int64_t sw, const Tensor& y) {
    dispatch_float(x.dtype(), "upsample_nearest2d", [&](auto zero) { upsample_nearest_typed<decltype(zero)>(x, sh, sw, y); });
  };
  b.upsample_nearest2d_backward = [](const Tensor& dy, int64_t sh, int64_t sw, const Tensor& dx) {
    dispatch_float(dx.dtype(), "upsample_nearest2d backward",
        [&](auto zero) { upsample_nearest_backward_typed<decltype(zero)>(dy, sh, sw, dx); });
  };
  b.upsample_nearest2d_into = [](const Tensor& x, int64_t sh, int64_t sw, const Tensor& y, bool accumulate) {
    dispatch_float(x.dtype(), "upsample_nearest2d_into",
        [&](auto zero) { upsample_nearest_into_typed<decltype(zero)>(x, sh, sw, y, accumulate); });
  };
}

}  // namespace ocrt
