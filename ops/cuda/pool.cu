// Pooling on CUDA: max, average and adaptive average over NCHW planes, and nearest upsampling,
// forward and backward.
// The GPU twin of ops/cpu/pool.cpp, with the same window rules (padding never wins a max, NaN
// propagates, count_include_pad, PyTorch's adaptive windows), checked against it by
// tests/cuda/test_conv_pool.cpp.
//
// Forwards: one thread per output element walks its window, as the CPU loop does; sums are in
// double like the CPU's. Backwards: average pools gather (one thread per input pixel sums the
// shares of the windows that cover it, in the CPU's order), so they are deterministic and write
// every element of dx; max pool zeroes dx and scatters dy to the saved indices with atomicAdd,
// since overlapping windows may pick the same input (the order of those few additions is free).
#include <cmath>
#include <cstdint>

#include "ops/backend.h"
#include "ops/pool_windows.h"
#include "runtime/cuda/common.cuh"

namespace ocrt {

namespace {

using cuda::DeviceScope;
using cuda::grid_for;
using cuda::kThreads;


// The sizes every pooling kernel needs: planes = N*C, input (H, W), output (Ho, Wo).
struct Planes {
  int64_t planes, H, W, Ho, Wo;
};
Planes planes_of(const Tensor& in, const Tensor& out) {
  return {in.size(0) * in.size(1), in.size(2), in.size(3), out.size(2), out.size(3)};
}

#define OCRT_GRID_STRIDE(t, total) \
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < (total); t += (int64_t)blockDim.x * gridDim.x)

// ---------------------------------------------------------------- max pool

template <class T>
__global__ void max_pool_kernel(const T* __restrict__ x, Pool2dParams p, Planes s, T* __restrict__ y,
                                int64_t* __restrict__ indices) {
  OCRT_GRID_STRIDE(t, s.planes * s.Ho * s.Wo) {
    const int64_t ow = t % s.Wo, oh = (t / s.Wo) % s.Ho, pl = t / (s.Wo * s.Ho);
    const T* in = x + pl * s.H * s.W;
    T best = T(-INFINITY);
    int64_t best_i = -1;
    for (int64_t i = 0; i < p.kernel_h; ++i) {
      const int64_t ih = oh * p.stride_h - p.pad_h + i * p.dilation_h;
      if (ih < 0 || ih >= s.H) continue;
      for (int64_t j = 0; j < p.kernel_w; ++j) {
        const int64_t iw = ow * p.stride_w - p.pad_w + j * p.dilation_w;
        if (iw < 0 || iw >= s.W) continue;
        const T v = in[ih * s.W + iw];
        // The first maximum wins; a NaN wins over everything (it propagates, as in PyTorch).
        if (best_i < 0 || v > best || (v != v && best == best)) {
          best = v;
          best_i = ih * s.W + iw;
        }
      }
    }
    y[t] = best;
    if (indices) indices[t] = best_i;
  }
}

// dx (zeroed before) += dy at the saved index of each output, within its plane.
template <class T>
__global__ void max_pool_backward_kernel(const T* __restrict__ dy, const int64_t* __restrict__ indices, int64_t HW,
                                         int64_t out_per_plane, int64_t total, T* __restrict__ dx) {
  OCRT_GRID_STRIDE(t, total) {
    const int64_t i = indices[t];
    if (i >= 0) atomicAdd(dx + (t / out_per_plane) * HW + i, dy[t]);
  }
}

// ---------------------------------------------------------------- average pool

template <class T>
__global__ void avg_pool_kernel(const T* __restrict__ x, Pool2dParams p, Planes s, T* __restrict__ y) {
  OCRT_GRID_STRIDE(t, s.planes * s.Ho * s.Wo) {
    const int64_t ow = t % s.Wo, oh = (t / s.Wo) % s.Ho, pl = t / (s.Wo * s.Ho);
    const T* in = x + pl * s.H * s.W;
    const AvgWindow win = avg_window(oh, ow, s.H, s.W, p);
    double acc = 0;
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) acc += (double)in[ih * s.W + iw];
    y[t] = win.divisor > 0 ? (T)(acc / win.divisor) : T(0);
  }
}

// Outputs o (one dim) whose window [o*stride - pad, o*stride - pad + kernel) holds input i:
// o*stride <= i + pad < o*stride + kernel, i.e. ceil((i + pad - kernel + 1) / stride) <= o <=
// floor((i + pad) / stride), clipped to [0, out). Returns the first and one past the last.
__device__ __forceinline__ void covering(int64_t i, int64_t kernel, int64_t stride, int64_t pad, int64_t out,
                                         int64_t& lo, int64_t& hi) {
  const int64_t first = i + pad - kernel + 1;
  lo = first > 0 ? (first + stride - 1) / stride : 0;
  hi = min((i + pad) / stride + 1, out);
}

// dx pixel (ih, iw) = the sum of dy / divisor over the windows covering it, in the order (oh, ow)
// the CPU adds them; every element is written.
template <class T>
__global__ void avg_pool_backward_kernel(const T* __restrict__ dy, Pool2dParams p, Planes s, T* __restrict__ dx) {
  OCRT_GRID_STRIDE(t, s.planes * s.H * s.W) {
    const int64_t iw = t % s.W, ih = (t / s.W) % s.H, pl = t / (s.W * s.H);
    const T* g = dy + pl * s.Ho * s.Wo;
    int64_t oh0, oh1, ow0, ow1;
    covering(ih, p.kernel_h, p.stride_h, p.pad_h, s.Ho, oh0, oh1);
    covering(iw, p.kernel_w, p.stride_w, p.pad_w, s.Wo, ow0, ow1);
    T acc = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const AvgWindow win = avg_window(oh, ow, s.H, s.W, p);
        if (win.divisor <= 0) continue;
        acc += (T)((double)g[oh * s.Wo + ow] / win.divisor);
      }
    dx[t] = acc;
  }
}

// ---------------------------------------------------------------- adaptive average pool

template <class T>
__global__ void adaptive_avg_kernel(const T* __restrict__ x, Planes s, T* __restrict__ y) {
  OCRT_GRID_STRIDE(t, s.planes * s.Ho * s.Wo) {
    const int64_t ow = t % s.Wo, oh = (t / s.Wo) % s.Ho, pl = t / (s.Wo * s.Ho);
    const T* in = x + pl * s.H * s.W;
    const int64_t h0 = adaptive_start(oh, s.H, s.Ho), h1 = adaptive_end(oh, s.H, s.Ho);
    const int64_t w0 = adaptive_start(ow, s.W, s.Wo), w1 = adaptive_end(ow, s.W, s.Wo);
    double acc = 0;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) acc += (double)in[ih * s.W + iw];
    y[t] = (T)(acc / (double)((h1 - h0) * (w1 - w0)));
  }
}

// Outputs o whose adaptive window holds input i: start(o) <= i < end(o) works out to
// floor(i*out/in) <= o <= ceil((i+1)*out/in) - 1. Windows may overlap (when in % out != 0),
// so each candidate is still checked against the window itself.
__device__ __forceinline__ void adaptive_covering(int64_t i, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  lo = (i * out) / in;
  hi = min(((i + 1) * out + in - 1) / in, out);
}

template <class T>
__global__ void adaptive_avg_backward_kernel(const T* __restrict__ dy, Planes s, T* __restrict__ dx) {
  OCRT_GRID_STRIDE(t, s.planes * s.H * s.W) {
    const int64_t iw = t % s.W, ih = (t / s.W) % s.H, pl = t / (s.W * s.H);
    const T* g = dy + pl * s.Ho * s.Wo;
    int64_t oh0, oh1, ow0, ow1;
    adaptive_covering(ih, s.H, s.Ho, oh0, oh1);
    adaptive_covering(iw, s.W, s.Wo, ow0, ow1);
    T acc = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t h0 = adaptive_start(oh, s.H, s.Ho), h1 = adaptive_end(oh, s.H, s.Ho);
      if (ih < h0 || ih >= h1) continue;
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t w0 = adaptive_start(ow, s.W, s.Wo), w1 = adaptive_end(ow, s.W, s.Wo);
        if (iw < w0 || iw >= w1) continue;
        acc += (T)((double)g[oh * s.Wo + ow] / (double)((h1 - h0) * (w1 - w0)));
      }
    }
    dx[t] = acc;
  }
}

// Nearest upsampling: one thread per output element reads its source pixel; the gradient, one
// thread per input pixel summing its sh x sw block in double, rows then columns (the CPU's order).
template <class T>
__global__ void upsample_nearest_kernel(const T* __restrict__ x, Planes s, int64_t sh, int64_t sw, T* __restrict__ y) {
  OCRT_GRID_STRIDE(t, s.planes * s.Ho * s.Wo) {
    const int64_t ow = t % s.Wo, oh = (t / s.Wo) % s.Ho, pl = t / (s.Wo * s.Ho);
    y[t] = x[(pl * s.H + oh / sh) * s.W + ow / sw];
  }
}

// Into y's planes at y's strides (yn, yc between images and channels; each plane contiguous),
// or added to them: y's value first, as the CPU's.
template <class T>
__global__ void upsample_nearest_into_kernel(const T* __restrict__ x, Planes s, int64_t C, int64_t yn, int64_t yc,
                                             int64_t sh, int64_t sw, bool accumulate, T* __restrict__ y) {
  OCRT_GRID_STRIDE(t, s.planes * s.Ho * s.Wo) {
    const int64_t ow = t % s.Wo, oh = (t / s.Wo) % s.Ho, pl = t / (s.Wo * s.Ho);
    const T v = x[(pl * s.H + oh / sh) * s.W + ow / sw];
    T* out = y + (pl / C) * yn + (pl % C) * yc + oh * s.Wo + ow;
    *out = accumulate ? *out + v : v;
  }
}

template <class T>
__global__ void upsample_nearest_backward_kernel(const T* __restrict__ dy, Planes s, int64_t sh, int64_t sw,
                                                 T* __restrict__ dx) {
  OCRT_GRID_STRIDE(t, s.planes * s.H * s.W) {
    const int64_t iw = t % s.W, ih = (t / s.W) % s.H, pl = t / (s.W * s.H);
    double sum = 0;
    for (int64_t i = 0; i < sh; ++i) {
      const T* row = dy + (pl * s.Ho + ih * sh + i) * s.Wo + iw * sw;
      for (int64_t j = 0; j < sw; ++j) sum += (double)row[j];
    }
    dx[t] = (T)sum;
  }
}

#undef OCRT_GRID_STRIDE

// ---------------------------------------------------------------- host side

template <class T>
void max_pool_typed(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices) {
  const DeviceScope ds(x);
  const Planes s = planes_of(x, y);
  max_pool_kernel<T><<<grid_for(y.numel()), kThreads, 0, ds.stream>>>(
      x.data<T>(), p, s, y.data<T>(), indices.defined() ? indices.data<int64_t>() : nullptr);
  OCRT_CUDA_LAUNCH_CHECK("max_pool2d", ds.device);
}

template <class T>
void max_pool_backward_typed(const Tensor& dy, const Tensor& indices, const Tensor& dx) {
  const DeviceScope ds(dx);
  if (dx.numel() == 0) return;
  cuda::check(cudaMemsetAsync(dx.data<T>(), 0, dx.numel() * sizeof(T), ds.stream), "cudaMemsetAsync", ds.device);
  const int64_t total = dy.numel();
  if (total == 0) return;
  max_pool_backward_kernel<T><<<grid_for(total), kThreads, 0, ds.stream>>>(
      dy.data<T>(), indices.data<int64_t>(), dx.size(2) * dx.size(3), dy.size(2) * dy.size(3), total, dx.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("max_pool2d backward", ds.device);
}

template <class T>
void avg_pool_typed(const Tensor& x, const Pool2dParams& p, const Tensor& y) {
  const DeviceScope ds(x);
  avg_pool_kernel<T><<<grid_for(y.numel()), kThreads, 0, ds.stream>>>(x.data<T>(), p, planes_of(x, y), y.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("avg_pool2d", ds.device);
}

template <class T>
void avg_pool_backward_typed(const Tensor& dy, const Pool2dParams& p, const Tensor& dx) {
  const DeviceScope ds(dx);
  avg_pool_backward_kernel<T><<<grid_for(dx.numel()), kThreads, 0, ds.stream>>>(dy.data<T>(), p, planes_of(dx, dy),
                                                                                 dx.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("avg_pool2d backward", ds.device);
}

template <class T>
void adaptive_avg_typed(const Tensor& x, const Tensor& y) {
  const DeviceScope ds(x);
  adaptive_avg_kernel<T><<<grid_for(y.numel()), kThreads, 0, ds.stream>>>(x.data<T>(), planes_of(x, y), y.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("adaptive_avg_pool2d", ds.device);
}

template <class T>
void adaptive_avg_backward_typed(const Tensor& dy, const Tensor& dx) {
  const DeviceScope ds(dx);
  adaptive_avg_backward_kernel<T><<<grid_for(dx.numel()), kThreads, 0, ds.stream>>>(dy.data<T>(), planes_of(dx, dy),
                                                                                     dx.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("adaptive_avg_pool2d backward", ds.device);
}


template <class T>
void upsample_nearest_typed(const Tensor& x, int64_t sh, int64_t sw, const Tensor& y) {
  const DeviceScope ds(x);
  upsample_nearest_kernel<T><<<grid_for(y.numel()), kThreads, 0, ds.stream>>>(x.data<T>(), planes_of(x, y), sh, sw,
                                                                              y.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("upsample_nearest2d", ds.device);
}

template <class T>
void upsample_nearest_into_typed(const Tensor& x, int64_t sh, int64_t sw, const Tensor& y, bool accumulate) {
  const DeviceScope ds(x);
  upsample_nearest_into_kernel<T><<<grid_for(y.numel()), kThreads, 0, ds.stream>>>(
      x.data<T>(), planes_of(x, y), x.size(1), y.stride(0), y.stride(1), sh, sw, accumulate, y.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("upsample_nearest2d_into", ds.device);
}

template <class T>
void upsample_nearest_backward_typed(const Tensor& dy, int64_t sh, int64_t sw, const Tensor& dx) {
  const DeviceScope ds(dx);
  upsample_nearest_backward_kernel<T><<<grid_for(dx.numel()), kThreads, 0, ds.stream>>>(
      dy.data<T>(), planes_of(dx, dy), sh, sw, dx.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("upsample_nearest2d backward", ds.device);
}

}  // namespace

void register_cuda_pool(LayerBackend& b) {
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
