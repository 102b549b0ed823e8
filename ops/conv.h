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

#include "runtime/tensor.h"

namespace ocrt {

using Pair = std::array<int64_t, 2>;  // (h, w)

struct Conv2dOptions {
  Pair stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
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

}  // namespace ocrt
