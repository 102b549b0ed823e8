// Direct convolution for layers with few output channels, on the CPU (ops/cpu/conv_direct.cpp).
//
// im2col + GEMM unfolds the input into C*kh*kw rows before a matrix product of Cout rows. When
// Cout is small (a detector's last 3x3 layer maps 16 channels to 1 at the page's full
// resolution), the unfolded matrix is 9*C values for every output pixel and one or a few output
// values come out of each: the layer is as slow as writing and reading that matrix (200 ms for
// a 1280 x 992 map), and the GEMM's tiles are mostly empty. Summing straight from the input rows
// reads each input value kh*kw times from cache and writes nothing in between.
#pragma once

#include <cstdint>

#include "ops/backend.h"

namespace ocrt::cpu {

// The most output channels direct_conv2d takes in general, and the most input values (C kh kw)
// an output pixel may read for it to take any number of output channels: a first layer of one
// input channel (9 values for 3x3) unfolds into a matrix too short for the GEMM to pay (a
// CRNN's first layer, 1 -> 64 channels over whole lines, ran at 2 GFLOP/s through im2col).
constexpr int64_t kDirectConvMaxCout = 8, kDirectConvMaxTaps = 27;

// Whether direct_conv2d computes this float32 forward: stride 1, no dilation, one group, and at
// most kDirectConvMaxCout output channels or at most kDirectConvMaxTaps input values an output.
// Exact (no transform): each output is the plain sum over (c, i, j) in that order, plus the
// bias, in float32 — the same value as the reference loop up to float32 rounding of a sum of
// C*kh*kw products.
bool direct_conv_applies(int64_t C, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p);

// y (N, Cout, Ho, Wo) = conv2d(x (N, C, H, W), w (Cout, C, kh, kw)) + bias (Cout, or null), stride
// 1, padding (pad_h, pad_w): Ho = H + 2 pad_h - kh + 1, Wo = W + 2 pad_w - kw + 1. Contiguous
// NCHW. Output channels go in chunks of 8, shared out over output rows; the result does not
// depend on the thread count.
void direct_conv2d(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C, int64_t H,
                   int64_t W, int64_t Cout, int64_t kh, int64_t kw, int64_t pad_h, int64_t pad_w);

// y (N, Cout, Ho / 2, Wo / 2) = max_pool2d(relu(direct_conv2d(...)), 2 x 2, stride 2), the same
// values as the three in turn, in one pass: each pair of convolution rows goes through the ReLU
// and the pool while it is in cache, so the full-resolution activation (a CRNN's first layer:
// 64 channels at the line's whole size, 105 MB for 32 lines of 400 pixels) is never written.
// Inference only (no indices for a backward). Same conditions as direct_conv2d.
void direct_conv2d_relu_max_pool2(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C,
                                  int64_t H, int64_t W, int64_t Cout, int64_t kh, int64_t kw, int64_t pad_h,
                                  int64_t pad_w);

// A first layer of stride 2 on one input channel (the page detector's stem: gray pixels -> 8
// channels at half resolution): im2col + GEMM unfolds kh*kw values for every output pixel (11 MB
// for a 1280 x 992 page) to make a product of K = 9. Here each output row is summed from its
// input rows, with the GEMM's own arithmetic: every output a chain of fused multiply-adds from
// zero over the taps in (i, j) order, then the bias added. So the same bits as the GEMM path
// (taps in the zero padding are skipped: a fused multiply-add of 0 leaves a sum that is not
// -0 as it is, and the sum never is -0). float32 products only (the caller checks the
// precision), finite weights.
bool direct_stride2_applies(int64_t C, int64_t kh, int64_t kw, const Conv2dParams& p);
void direct_conv2d_stride2(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t H,
                           int64_t W, int64_t Cout, int64_t kh, int64_t kw, int64_t pad_h, int64_t pad_w);

}  // namespace ocrt::cpu
