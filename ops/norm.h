// Normalisation layers' functional forms, as torch.nn.functional.batch_norm / layer_norm.
#pragma once
#include "runtime/tensor.h"

namespace ocrt {

// x (N,C,*) normalised per channel. training: batch statistics are used, and running_mean /
// running_var (C), when defined, are updated in place exactly as PyTorch does:
//   running = (1 - momentum) * running + momentum * batch_stat,
// with the UNBIASED batch variance for running_var (the normalisation itself uses the biased
// one). Eval: the running statistics are used (they must be defined). weight and bias (C)
// are optional. A training batch with one value per channel is an error, as in PyTorch.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);

// Normalises over the last normalized_shape.size() dims (which must equal normalized_shape);
// weight and bias have normalized_shape, or are undefined.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace ocrt
