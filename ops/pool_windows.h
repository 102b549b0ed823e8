// The windows of pooling, shared by the CPU and CUDA kernels (ops/cpu/pool.cpp,
// ops/cuda/pool.cu) so that both pool over the same input elements and divide by the same
// count. Plain C++ that nvcc also compiles for the device (runtime/host_device.h).
#pragma once
#include <cstdint>

#include "ops/backend.h"
#include "runtime/host_device.h"

namespace ocrt {

// Adaptive pooling: output o of `out` covers [floor(o * in / out), ceil((o + 1) * in / out)).
OCRT_HOST_DEVICE inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
OCRT_HOST_DEVICE inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

// Average pooling: the window of output (oh, ow) clipped to the H x W input, and the divisor
// PyTorch uses for it (the window's size counting the padding, but not past it, with
// count_include_pad; else the input elements it covers).
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  double divisor;
};
OCRT_HOST_DEVICE inline AvgWindow avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, const Pool2dParams& p) {
  int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
  int64_t h1 = h0 + p.kernel_h < H + p.pad_h ? h0 + p.kernel_h : H + p.pad_h;
  int64_t w1 = w0 + p.kernel_w < W + p.pad_w ? w0 + p.kernel_w : W + p.pad_w;
  const int64_t padded_size = (h1 - h0) * (w1 - w0);
  h0 = h0 > 0 ? h0 : 0, w0 = w0 > 0 ? w0 : 0;
  h1 = h1 < H ? h1 : H, w1 = w1 < W ? w1 : W;
  const int64_t inside = (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, (double)(p.count_include_pad ? padded_size : inside)};
}

}  // namespace ocrt
