// Matrix products. matmul follows torch.matmul: 1-D operands are promoted to matrices and
// the added dim removed again, and leading (batch) dims broadcast. Transposed operands
// (e.g. x.matmul(w.t())) are read through their strides, not copied.
#pragma once
#include "runtime/tensor.h"

namespace ocrt {

Tensor matmul(const Tensor& a, const Tensor& b);
// y = x @ weight^T + bias, weight (out_features, in_features), bias (out_features) or undefined;
// x (..., in_features) -> (..., out_features). Same as torch.nn.functional.linear.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace ocrt
