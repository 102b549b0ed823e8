// The geometry of windowed attention, shared by its CPU and CUDA kernels (ops/cpu/attention.cpp,
// ops/cuda/attention.cu) and its front-end (ops/attention.cpp).
//
// The tokens of an H x W grid, row-major (token t is row t / W, column t % W; L = H * W tokens).
// A query attends to the keys of the window_h x window_w tokens centred on it (odd sizes),
// clipped to the grid: rows r0..r1 and columns c0..c1, inclusive. A window of at least 2H - 1 x
// 2W - 1 covers the whole grid from every token: plain (global) self-attention.
//
// A query's keys are numbered in "slot" order: the window's rows top to bottom, each row's
// columns left to right, so key (row, col) is slot (row - r0) * (c1 - c0 + 1) + (col - c0). The
// weights the kernels keep for the backward pass (probs, ops/backend.h) are stored in that order,
// window_slots() per query (a clipped window uses the first of them).
#pragma once
#include <cstdint>

#include "runtime/host_device.h"

namespace ocrt {

struct TokenWindow {
  int64_t r0, r1, c0, c1;  // inclusive
  OCRT_HOST_DEVICE int64_t cols() const { return c1 - c0 + 1; }
  OCRT_HOST_DEVICE int64_t slots() const { return (r1 - r0 + 1) * (c1 - c0 + 1); }
};

OCRT_HOST_DEVICE inline TokenWindow token_window(int64_t t, int64_t H, int64_t W, int64_t window_h,
                                                 int64_t window_w) {
  const int64_t r = t / W, c = t - r * W, rh = window_h / 2, rw = window_w / 2;
  TokenWindow w;
  w.r0 = r - rh > 0 ? r - rh : 0;
  w.r1 = r + rh < H - 1 ? r + rh : H - 1;
  w.c0 = c - rw > 0 ? c - rw : 0;
  w.c1 = c + rw < W - 1 ? c + rw : W - 1;
  return w;
}

// Slots kept per query: the most keys any window holds.
OCRT_HOST_DEVICE inline int64_t window_slots(int64_t H, int64_t W, int64_t window_h, int64_t window_w) {
  return (window_h < H ? window_h : H) * (window_w < W ? window_w : W);
}

}  // namespace ocrt
