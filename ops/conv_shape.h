// The shapes of one conv2d call, as the CPU and CUDA backends both read them (ops/cpu/conv.cpp,
// ops/cuda/conv.cu): the input x (N, C, H, W), the weight w (Cout, C / groups, kh, kw), the output
// (N, Cout, Ho, Wo) and the call's parameters, with the per-group sizes the im2col GEMMs use.
// Plain data (trivially copyable), so a CUDA kernel takes it by value.
#pragma once
#include <cstdint>

#include "ops/backend.h"

namespace ocrt {

struct ConvShape {
  int64_t N, C, H, W, Cout, kh, kw, Ho, Wo;
  int64_t Cg, Coutg;  // input and output channels of one group
  int64_t CK;         // Cg * kh * kw: the rows of an unfolded (im2col) sample, a weight row's length
  int64_t HoWo;       // output positions of one sample
  Conv2dParams p;

  ConvShape(const Tensor& x, const Tensor& w, const Shape& y_shape, const Conv2dParams& params)
      : N(x.size(0)), C(x.size(1)), H(x.size(2)), W(x.size(3)), Cout(w.size(0)), kh(w.size(2)), kw(w.size(3)),
        Ho(y_shape[2]), Wo(y_shape[3]), Cg(C / params.groups), Coutg(Cout / params.groups), CK(Cg * kh * kw),
        HoWo(Ho * Wo), p(params) {}
};

}  // namespace ocrt
