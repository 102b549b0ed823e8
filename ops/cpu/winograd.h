// 3x3 convolution by Winograd's minimal filtering, F(4x4, 3x3), on the CPU (ops/cpu/winograd.cpp
// explains the method). In fast mode (ops/conv.h, ConvMode) ops/cpu/conv.cpp calls it for
// float32 forward passes and for both gradients; exact mode keeps im2col + GEMM.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/backend.h"
#include "runtime/cpu/gemm.h"

#if defined(OCRT_CPU_SGEMM)
#define OCRT_CPU_WINOGRAD 1

namespace ocrt::cpu {

// Whether winograd_conv2d computes this convolution: a 3x3 kernel, stride 1, no dilation, one
// group, and enough channels on both sides for the transforms to pay for themselves, on a CPU
// that runs ocrt's GEMM. Its 36 products take cpu::matmul_precision(): in bf16 the transformed
// tiles are rounded to bf16, whose error the output transform carries like the float32 one
// (tests/ops/test_conv.cpp bounds both; the shipped model reads the same in both,
// bench/results/cpu-bf16.md).
bool winograd_applies(int64_t C, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p);

// y (N, Cout, Ho, Wo) = conv2d(x (N, C, H, W), w (Cout, C, 3, 3)) + bias (Cout, or null), with
// padding (pad_h, pad_w); Ho = H + 2 pad_h - 2, Wo = W + 2 pad_w - 2. Contiguous NCHW.
// The result equals the direct convolution up to float32 rounding (about 1e-5 relative), does
// not depend on the thread count, and an output pixel depends only on the 6x6 input tile that
// holds its 4x4 output tile (tiles start at output row 0, column 0 of every image).
// chunk_tiles > 0 caps the tiles per chunk (tests use it to cross chunk boundaries on small
// inputs); 0 picks the size from the channel counts.
// What conv2d_relu_max_pool2d (ops/conv.h) asks of the forward pass after the bias: ReLU, then a
// max-pool whose windows take two output rows at a stride of two (kernel (2, kw), stride (2,
// sw), padding (0, pw), no dilation: every pool of CRNN). A tile row's four output rows make two
// pooled rows as soon as they are computed, so the convolution's full-size output is never
// written; y is then the pooled (N, Cout, Hp, Wp), the same bits as relu then max_pool2d.
struct WinogradReluPool {
  int64_t kw, sw, pw;  // the window's columns: kw wide, stride sw, pw columns of padding each side
  int64_t Hp, Wp;      // the pooled size (max_pool2d's, ceil mode or not)
};
// Whether a pool (ops/backend.h's checked parameters) is of that kind.
bool winograd_pool_fits(const Pool2dParams& p);

// weights_once: w serves this call only (the backward's turned weights, made anew at every
// step): the transforms are neither kept between calls nor made a row at a time, which saves
// memory only for weights that are kept later (inference) and costs time.
void winograd_conv2d(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C, int64_t H,
                     int64_t W, int64_t Cout, int64_t pad_h, int64_t pad_w, int64_t chunk_tiles = 0,
                     const WinogradReluPool* pool = nullptr, bool weights_once = false);

// dw (Cout, C, 3, 3) = the weight gradient of that convolution for output gradient dy (N,
// Cout, Ho, Wo): dw[k, c, i, j] = sum over n, h, w of dy[n, k, h, w] x[n, c, h - pad_h + i,
// w - pad_w + j] (0 in the padding), overwritten. The same tiles, chunks and determinism as
// winograd_conv2d; within about 1e-5 relative of the direct sum.
void winograd_conv2d_weight_grad(const float* x, const float* dy, float* dw, int64_t N, int64_t C, int64_t H,
                                 int64_t W, int64_t Cout, int64_t pad_h, int64_t pad_w, int64_t chunk_tiles = 0);

// The bytes of the transformed weights kept between calls now, all layers together (tests and
// benchmarks read it: threads that run one model at once keep one copy of each layer's).
size_t winograd_kept_bytes();

// A buffer of at least `floats` floats for this thread's Winograd calls outside autograd (the
// chunks' transformed tiles and products), 64-byte aligned, kept and grown until the thread ends:
// shared by the 3x3 and the 2x2 convolutions (winograd_2x2.h), whose calls never overlap.
float* winograd_scratch(int64_t floats);

}  // namespace ocrt::cpu

#endif
