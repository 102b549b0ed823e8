// Normalisation layers' functional forms, as torch.nn.functional.batch_norm / layer_norm.
#pragma once
#include "runtime/tensor.h"

namespace ocrt {

class Communicator;

// x (N,C,*) normalised per channel. training: batch statistics are used, and running_mean /
// running_var (C), when defined, are updated in place exactly as PyTorch does:
//   running = (1 - momentum) * running + momentum * batch_stat,
// with the UNBIASED batch variance for running_var (the normalisation itself uses the biased
// one). Eval: the running statistics are used (they must be defined). weight and bias (C)
// are optional. A training batch with one value per channel is an error, as in PyTorch.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);

// Synchronised BatchNorm for data-parallel training (always training mode): normalises with the
// mean and variance of the whole global batch, every replica's lines together, and updates the
// running statistics with them (so every replica keeps the same ones); its backward pass sums the
// per-channel gradient terms over the replicas the same way. Two small all-reduces forward and
// one backward per layer, in the same order on every replica. With one rank, as batch_norm.
// Replicas that each normalise alone (batch_norm) see noisier statistics with small shards and
// follow a different trajectory from one replica with the whole batch; this one does not.
Tensor sync_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, Communicator& comm, double momentum = 0.1, double eps = 1e-5);

// Normalises over the last normalized_shape.size() dims (which must equal normalized_shape);
// weight and bias have normalized_shape, or are undefined.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace ocrt
