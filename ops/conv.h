// Convolution and pooling over NCHW images, with PyTorch's arguments and semantics
// (torch.nn.functional.conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d).
//
// Sizes: for an input of H rows, kernel k, stride s, padding p and dilation d, the output has
//   Ho = floor((H + 2p - d(k-1) - 1) / s) + 1
// rows (ceil instead of floor with ceil_mode, as PyTorch, never starting a window in the
// right padding); the same for W. docs/ops/conv.md explains the im2col fast path and the
// backward.
#pragma once
#include <array>
#include <string>

#include "runtime/tensor.h"

namespace ocrt {

using Pair = std::array<int64_t, 2>;  // (h, w)

struct Conv2dOptions {
  Pair stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
};

// How conv2d may compute, for the whole process (every thread):
//   fast  (the default) lets a backend trade rounding for speed: on the CPU, float32 3x3 layers
//         with stride 1 run through Winograd's F(4x4, 3x3) in the forward pass and for both
//         gradients, within about 1e-5 relative of the direct sum (docs/ops/conv.md);
//   exact keeps im2col + GEMM, whose sums are ordered as in the direct loop (about 1e-7).
// Results are deterministic either way. PyTorch makes the same trade on GPUs by default (TF32
// convolutions); `ocrt-train --conv exact` and `ocrt-infer --conv exact` choose the other.
enum class ConvMode { fast, exact };
void set_conv_mode(ConvMode mode);
ConvMode conv_mode();
ConvMode parse_conv_mode(const std::string& name);  // "fast" or "exact"; anything else throws
const char* conv_mode_name(ConvMode mode);

// Sets the mode for a scope and restores the previous one at its end.
class ConvModeScope {
 public:
  explicit ConvModeScope(ConvMode mode) : previous_(conv_mode()) { set_conv_mode(mode); }
  ~ConvModeScope() { set_conv_mode(previous_); }
  ConvModeScope(const ConvModeScope&) = delete;
  ConvModeScope& operator=(const ConvModeScope&) = delete;

 private:
  ConvMode previous_;
};

// x (N,Cin,H,W), weight (Cout, Cin/groups, kh, kw), bias (Cout) or undefined -> (N,Cout,Ho,Wo).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), const Conv2dOptions& opt = {});

struct MaxPool2dOptions {
  Pair kernel{2, 2};
  Pair stride{0, 0};  // 0: the kernel size (PyTorch's default)
  Pair padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
};
// Window maxima; padding counts as -inf. The gradient goes to the (first) maximum.
Tensor max_pool2d(const Tensor& x, const MaxPool2dOptions& opt);
// max_pool2d(relu(conv2d(x, weight, bias, opt)), pool) (a CRNN block), the same values. Where
// nothing needs a gradient and the CPU has a path for it, in one pass that never writes the
// convolution's full-size output: the direct convolution for a 2x2 pool (a first layer on gray
// lines, ops/cpu/conv_direct.h), Winograd's F(4x4, 3x3) in fast mode for a pool over pairs of
// rows, kernel (2, kw) at a stride of (2, sw) (ops/cpu/winograd.h). Elsewhere the three ops.
Tensor conv2d_relu_max_pool2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                              const Conv2dOptions& opt = {}, const MaxPool2dOptions& pool = {});
// The shape max_pool2d gives an input of shape x (checked as max_pool2d checks it).
Shape max_pool2d_shape(const Shape& x, const MaxPool2dOptions& opt);
// max_pool2d(x, opt) written into y, a contiguous tensor of that shape on x's device, with no
// autograd: for inference paths that pool what they have just made while it is still in cache
// (an int8 convolution pools each image it makes, models/int8.cpp).
void max_pool2d_into(const Tensor& x, const MaxPool2dOptions& opt, const Tensor& y);

struct AvgPool2dOptions {
  Pair kernel{2, 2};
  Pair stride{0, 0};  // 0: the kernel size
  Pair padding{0, 0};
  bool ceil_mode = false;
  bool count_include_pad = true;
};
Tensor avg_pool2d(const Tensor& x, const AvgPool2dOptions& opt);

// x (N,C,H,W) -> (N,C,out_h,out_w).
Tensor adaptive_avg_pool2d(const Tensor& x, Pair output_size);

// Nearest-neighbour upsampling by whole factors: x (N,C,H,W) -> (N,C,H*scale_h,W*scale_w), each
// pixel an scale_h x scale_w block (torch.nn.functional.interpolate(x, scale_factor=s,
// mode="nearest") for whole s). Its gradient sums each block.
Tensor upsample_nearest2d(const Tensor& x, Pair scale);

// The same, outside autograd, into a tensor that exists: out = upsample_nearest2d(x, scale), or
// out += it with `accumulate`, where out (N, C, H*scale_h, W*scale_w) may be a slice of a larger
// tensor's first two dims (each of its planes contiguous: Tensor::narrow(1, ...) of a contiguous
// tensor). A feature pyramid's top-down sum (P_i = L_i + up2(P_i+1)) and the concatenation of
// its upsampled levels, without the upsampled temporaries (models/dbnet.cpp). The values are
// upsample_nearest2d's, and add(out, upsample_nearest2d(x, scale))'s with accumulate, exactly.
// Refused where grad mode is on and x or out requires grad.
void upsample_nearest2d_into(const Tensor& x, Pair scale, const Tensor& out, bool accumulate);

}  // namespace ocrt
