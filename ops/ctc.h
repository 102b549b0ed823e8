// Connectionist Temporal Classification loss (Graves et al., 2006) with the semantics of
// torch.nn.functional.ctc_loss. docs/ops/ctc.md explains the recursions.
#pragma once
#include <vector>

#include "ops/reduction.h"
#include "runtime/tensor.h"

namespace ocrt {

struct CTCLossOptions {
  int64_t blank = 0;
  // none: per-sample losses (N); sum: their sum; mean: each divided by its target length
  // (at least 1), then averaged over the batch, as PyTorch.
  Reduction reduction = Reduction::mean;
  // Infinite losses (targets that cannot be aligned within the input length) and their
  // gradients become 0.
  bool zero_infinity = false;
};

// log_probs (T, N, C) (log_softmax output). targets: (N, S) padded, or 1-D with all samples'
// labels concatenated (int64 or int32), labels in [0, C) and never the blank. input_lengths
// (N values in [0, T]) and target_lengths (N values >= 0; <= S for padded targets).
// A target that needs more frames than the input has (its length plus one per pair of equal
// neighbours) gives +inf, never NaN; its gradient is 0 (PyTorch gives NaN there).
// The gradient is PyTorch's: exp(log_probs) - posterior, which is exact for the logits when
// log_probs = log_softmax(logits) (it sums to zero over the classes at every frame).
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& input_lengths,
                const std::vector<int64_t>& target_lengths, const CTCLossOptions& opt = {});

// The same loss from unnormalised logits (T, N, C): log_softmax is applied inside and the
// backward goes straight to the logits (softmax - posterior) without a log_softmax node. Its
// gradient equals that of ctc_loss(log_softmax(logits, 2), ...). This is what training uses.
Tensor ctc_loss_from_logits(const Tensor& logits, const Tensor& targets, const std::vector<int64_t>& input_lengths,
                            const std::vector<int64_t>& target_lengths, const CTCLossOptions& opt = {});

}  // namespace ocrt
