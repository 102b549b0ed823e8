// bf16 convolutions on AMX tiles, on the CPU (ops/cpu/conv_amx.cpp): the forward pass of a
// stride-1 layer of 32 or more input channels (a multiple of 32) when the CPU's path is `amx`
// and the products are bf16 (cpu::matmul_precision()).
//
// Neither of the float paths suits the tiles. im2col writes C kh kw values for every output
// pixel and packs them again into the GEMM's panels; Winograd's 36 products are of few rows
// each, and its transforms move the activations through memory twice: on AMX both left the
// tiles idle most of the time (bench/results/cpu-bf16.md: crnn's 64 -> 128 layer, 15 GFLOP at
// batch 32, took 50 ms in Winograd form). Here the image is made channels last in bf16 pairs once
// (cpu::detail::amx_bf16_image), and a tile of 16 output pixels times 32 input channels is
// loaded straight from it for each kernel tap, one stride apart, as the int8 path does
// (runtime/cpu/int8_gemm.h's Int8Image): rows of the output run over the padded image's whole
// width (pitch), and the few pixels past each row's end are computed and dropped.
//
// Numbers: the operands are rounded to bf16 as every bf16 product rounds them (runtime/bf16.h,
// denormals to zero), each product is exact in float32, and the sums are float32: the bound that
// every bf16 path is tested against (runtime/cpu/gemm.h) holds for any order of the sums. The
// weights are packed once and kept between calls (matched by where they lie, their shape and a
// fingerprint of their bytes, so weights changed in place are never read stale).
#pragma once

#include <cstdint>
#include <functional>

#include "ops/backend.h"
#include "runtime/tensor.h"

namespace ocrt::cpu {

// Whether amx_bf16_conv2d computes this forward on this machine: the `amx` path with bf16
// products, one group, stride 1, C a multiple of 32 and Cout >= 16.
bool amx_conv_applies(int64_t C, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p);

// y (N, Cout, Ho, Wo) = conv2d(x (N, C, H, W), w (Cout, C, kh, kw)) + bias (Cout, or null), with
// p's padding and dilation (stride 1). Contiguous NCHW float32. Images are shared out over
// threads (or, for one image, pairs of 16 output channels): the result does not depend on the
// thread count.
void amx_bf16_conv2d(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C, int64_t H,
                     int64_t W, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p);

// The same product with w (C, Cout, kh, kw) turned: output channel co takes input channel c at
// kernel position (i, j) from w[c, co, kh - 1 - i, kw - 1 - j], no bias. With w a forward layer's
// weights and x its dy, that is the layer's dx (ops/cpu/conv.cpp). The turned weights are packed
// for the call and not kept.
void amx_bf16_conv2d_turned(const float* x, const float* w, float* y, int64_t N, int64_t C, int64_t H, int64_t W,
                            int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p);

// The same product, each group of images made in a buffer of its thread's instead of y and then
// handed to `done` (images n0 .. n0 + count - 1, out: (count, Cout, Ho, Wo)) on that thread:
// conv2d_relu_max_pool2d rectifies each group there and pools it into its output, so the
// convolution's full-size output is never held (ops/conv.h).
using AmxConvDone = std::function<void(int64_t n0, int64_t count, const Tensor& out)>;
void amx_bf16_conv2d_each(const float* x, const float* w, const float* bias, int64_t N, int64_t C, int64_t H,
                          int64_t W, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p,
                          const AmxConvDone& done);

// Whether amx_bf16_conv2d_weight_grad computes this layer's dw here: amx_conv_applies and Cout a
// multiple of 32.
bool amx_weight_grad_applies(int64_t C, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p);

// dw (Cout, C, kh, kw) = the weight gradient of conv2d(x (N, C, H, W), w) given dy (N, Cout, Ho,
// Wo), with p's padding and dilation (stride 1): x and dy rounded to bf16, the sums in float32 on
// the tiles. Written, not added to. The same bits on any thread count.
void amx_bf16_conv2d_weight_grad(const float* x, const float* dy, float* dw, int64_t N, int64_t C, int64_t H,
                                 int64_t W, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p);

}  // namespace ocrt::cpu
