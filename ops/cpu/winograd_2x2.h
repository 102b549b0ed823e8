// 2x2 convolution by Winograd's minimal filtering along the rows, F(3, 2), on the CPU
// (ops/cpu/winograd_2x2.cpp explains the method). crnn's last convolution is such a layer (two
// rows of 512 channels to one row: a tenth of a crnn-en line's time through im2col). In fast
// mode (ops/conv.h, ConvMode) ops/cpu/conv.cpp calls it for float32 forward passes; gradients and
// exact mode keep im2col.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/backend.h"
#include "ops/cpu/winograd.h"

#if defined(OCRT_CPU_WINOGRAD)

namespace ocrt::cpu {

// Whether winograd_2x2_conv2d computes this convolution: a 2x2 kernel, stride 1, no dilation,
// one group, at least 16 channels on both sides and at least 6 output columns (narrower rows
// waste most of a 3-column tile), on a CPU that runs ocrt's GEMM.
bool winograd_2x2_applies(int64_t C, int64_t Cout, int64_t kh, int64_t kw, int64_t Wo, const Conv2dParams& p);

// y (N, Cout, Ho, Wo) = conv2d(x (N, C, H, W), w (Cout, C, 2, 2)) + bias (Cout, or null), with
// padding (pad_h, pad_w); Ho = H + 2 pad_h - 1, Wo = W + 2 pad_w - 1. Contiguous NCHW. Within
// float32 rounding of the direct sum (its transforms only add and halve; the bound is in
// tests/ops/test_conv.cpp), in bf16 products within bf16's; the result does not depend on the
// thread count, and an output pixel depends only on the four input columns under its tile of
// three (tiles start at output column 0 of every row). chunk_tiles > 0 caps the tiles per chunk
// (tests cross chunk boundaries with it); 0 picks the size from the channel counts. Outside
// autograd the transformed weights are kept packed between calls (matched by address, shape,
// precision and the bytes' fingerprint, so weights changed in place are read again).
void winograd_2x2_conv2d(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C, int64_t H,
                         int64_t W, int64_t Cout, int64_t pad_h, int64_t pad_w, int64_t chunk_tiles = 0);

// The bytes of the packed weights kept between calls now, all layers together (for tests).
size_t winograd_2x2_kept_bytes();

}  // namespace ocrt::cpu

#endif
