// Losses of dense prediction: a text detector's probability map against its target map
// (docs/pages.md; DBNet's losses). They are written with the differentiable elementwise ops and
// reductions, so their gradients come from autograd and they run on every backend those ops
// run on; each is checked against PyTorch (tools/reference/ops_loss.py) and by finite
// differences (tests/ops/test_loss.cpp).
#pragma once
#include "ops/reduction.h"
#include "runtime/tensor.h"

namespace ocrt {

// Binary cross-entropy of sigmoid(logits) against target (any shape, target in [0, 1]),
// element by element, as torch.nn.functional.binary_cross_entropy_with_logits:
//   l = max(x, 0) - x t + log(1 + exp(-|x|))
// which never takes the log of 0 or the exp of a large number. weight (optional) multiplies
// each element's loss and broadcasts to logits' shape. mean: over all elements; sum; none: the
// elementwise losses.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, const Tensor& weight = Tensor(),
                                        Reduction reduction = Reduction::mean);

// Dice loss over the whole batch, as DBNet uses it for its binary map:
//   1 - 2 sum(p t m) / (sum(p m) + sum(t m) + eps)
// p: predicted probabilities, t: the target (0 or 1), m: a mask (optional; 1 everywhere when
// undefined), all the same shape. A scalar; 0 when p equals t on the mask, and about 1 when
// they do not overlap.
Tensor dice_loss(const Tensor& prob, const Tensor& target, const Tensor& mask = Tensor(), double eps = 1e-6);

}  // namespace ocrt
