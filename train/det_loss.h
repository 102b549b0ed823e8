// The loss of a DBNet-style text detector (models/dbnet.h), on the runtime's differentiable
// ops, so that it trains on every device they run on (Liao et al. 2020, section 3.5; the
// weights and the hard negative mining of PaddleOCR's DBLoss):
//
//   L = alpha L_prob + beta L_thresh + L_binary,   alpha = 5, beta = 10
//
//   L_prob    binary cross-entropy of the probability logits against the shrink map over the
//             shrink mask, balanced by online hard negative mining: every positive pixel and
//             the k = min(negatives, max(3 positives, min_negatives)) negatives of largest
//             loss, L_prob = sum of their losses / (positives + k + eps). The floor
//             min_negatives is ours: with 3 x positives alone a crop without text would
//             teach nothing, and a page has margins, figures and rules to learn "no text" on.
//   L_thresh  L1 between sigmoid(threshold logits) and the threshold map over the threshold
//             mask: sum(|T - t| m) / (sum(m) + eps).
//   L_binary  dice loss of DB's approximate binary map sigmoid(k (P - T)), k = 50,
//             P = sigmoid(probability logits), against the shrink map over the shrink mask.
//
// The mining chooses pixels from a detached copy of the per-pixel loss on the CPU (copied
// there, nth_element); the choice is a 0/1 weight on the loss's device, so the gradient flows
// through the chosen pixels only, as in PyTorch's top-k.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"
#include "train/det_targets.h"

namespace ocrt::train {

struct DetLossOptions {
  double alpha = 5, beta = 10;    // weights of L_prob and L_thresh (L_binary weighs 1)
  double k = 50;                  // steepness of the approximate binarisation
  double negative_ratio = 3;      // hard negatives kept per positive pixel
  int64_t min_negatives = 4096;   // ... but at least this many (a 64 x 64 patch), as far as there are
  double eps = 1e-6;
  // Throws naming the field: alpha, beta >= 0, k > 0, negative_ratio >= 0, min_negatives >= 0,
  // eps > 0.
  void validate() const;
};

// The targets as tensors, each (N, 1, H, W), on the device and with the dtype of the logits.
struct DetLossTargets {
  Tensor shrink, shrink_mask, thresh, thresh_mask;
};

// Stacks the maps of a batch (all of one size) into tensors on `device`.
DetLossTargets det_loss_targets(const std::vector<const DetTargets*>& batch, Device device,
                                DType dtype = DType::f32);

struct DetLoss {
  Tensor total;                          // the scalar L, differentiable
  double prob = 0, thresh = 0, binary = 0;  // L_prob, L_thresh, L_binary (unweighted), for logging
  int64_t positives = 0, negatives = 0;  // the pixels of L_prob: positives and the mined negatives
};

// prob_logits and thresh_logits (N, 1, H, W) (DBNet::Maps); the targets of the same shape,
// device and dtype. Throws naming the argument that does not fit.
DetLoss det_loss(const Tensor& prob_logits, const Tensor& thresh_logits, const DetLossTargets& targets,
                 const DetLossOptions& o = {});

}  // namespace ocrt::train
