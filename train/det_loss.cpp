#include "train/det_loss.h"

#include <algorithm>
#include <cmath>

#include "ops/elementwise.h"
#include "ops/loss.h"
#include "ops/reduce.h"
#include "runtime/error.h"

namespace ocrt::train {

namespace {

void check_like(const char* name, const Tensor& t, const Tensor& like) {
  OCRT_CHECK(t.defined(), "det_loss: ", name, " is undefined");
  OCRT_CHECK(t.shape() == like.shape(), "det_loss: ", name, " is ", shape_str(t.shape()), ", the probability logits ",
             shape_str(like.shape()));
  OCRT_CHECK(t.dtype() == like.dtype(), "det_loss: ", name, " must have the probability logits' dtype");
  OCRT_CHECK(t.device() == like.device(), "det_loss: ", name, " is on ", t.device().str(),
             ", the probability logits on ", like.device().str());
}

// The 0/1 weight of L_prob for each pixel: every positive, and the k negatives of largest loss
// (ties go to the earlier pixel, so the choice is exact and repeatable). loss, shrink, mask:
// the per-pixel values on the host.
template <class T>
std::vector<float> mine(const std::vector<T>& loss, const std::vector<float>& shrink, const std::vector<float>& mask,
                        const DetLossOptions& o, int64_t* positives, int64_t* negatives) {
  std::vector<float> weight(loss.size(), 0.0f);
  std::vector<int64_t> neg;
  int64_t pos = 0;
  for (size_t i = 0; i < loss.size(); ++i) {
    if (!(mask[i] > 0.5f)) continue;
    if (shrink[i] > 0.5f) {
      weight[i] = 1, ++pos;
    } else {
      neg.push_back((int64_t)i);
    }
  }
  const int64_t k = std::min<int64_t>((int64_t)neg.size(),
                                      std::max<int64_t>((int64_t)(o.negative_ratio * (double)pos), o.min_negatives));
  auto harder = [&](int64_t a, int64_t b) { return loss[(size_t)a] > loss[(size_t)b] || (loss[(size_t)a] == loss[(size_t)b] && a < b); };
  if (k < (int64_t)neg.size()) std::nth_element(neg.begin(), neg.begin() + k, neg.end(), harder);
  for (int64_t j = 0; j < k; ++j) weight[(size_t)neg[(size_t)j]] = 1;
  *positives = pos, *negatives = k;
  return weight;
}

}  // namespace

void DetLossOptions::validate() const {
  auto nonneg = [](double v, const char* name) {
    OCRT_CHECK(std::isfinite(v) && v >= 0, "detector loss: ", name, " must be >= 0, got ", v);
  };
  nonneg(alpha, "alpha");
  nonneg(beta, "beta");
  nonneg(negative_ratio, "negative_ratio");
  OCRT_CHECK(std::isfinite(k) && k > 0, "detector loss: k must be > 0, got ", k);
  OCRT_CHECK(min_negatives >= 0, "detector loss: min_negatives must be >= 0, got ", min_negatives);
  OCRT_CHECK(std::isfinite(eps) && eps > 0, "detector loss: eps must be > 0, got ", eps);
}

DetLossTargets det_loss_targets(const std::vector<const DetTargets*>& batch, Device device, DType dtype) {
  OCRT_CHECK(!batch.empty(), "det_loss_targets: an empty batch");
  const int64_t N = (int64_t)batch.size(), H = batch[0]->height, W = batch[0]->width;
  const size_t plane = (size_t)(H * W);
  std::vector<float> shrink, shrink_mask, thresh, thresh_mask;
  for (size_t i = 0; i < batch.size(); ++i) {
    const DetTargets& t = *batch[i];
    OCRT_CHECK(t.height == H && t.width == W, "det_loss_targets: item ", i, " is ", t.height, "x", t.width,
               ", item 0 ", H, "x", W);
    OCRT_CHECK(t.shrink.size() == plane && t.shrink_mask.size() == plane && t.thresh.size() == plane &&
                   t.thresh_mask.size() == plane,
               "det_loss_targets: item ", i, " has maps of the wrong size");
    shrink.insert(shrink.end(), t.shrink.begin(), t.shrink.end());
    shrink_mask.insert(shrink_mask.end(), t.shrink_mask.begin(), t.shrink_mask.end());
    thresh.insert(thresh.end(), t.thresh.begin(), t.thresh.end());
    thresh_mask.insert(thresh_mask.end(), t.thresh_mask.begin(), t.thresh_mask.end());
  }
  auto tensor = [&](const std::vector<float>& v) { return Tensor::from_vector(v, {N, 1, H, W}).to(dtype).to(device); };
  return {tensor(shrink), tensor(shrink_mask), tensor(thresh), tensor(thresh_mask)};
}

DetLoss det_loss(const Tensor& prob_logits, const Tensor& thresh_logits, const DetLossTargets& targets,
                 const DetLossOptions& o) {
  o.validate();
  OCRT_CHECK(prob_logits.defined() && prob_logits.dim() == 4 && prob_logits.size(1) == 1,
             "det_loss: the probability logits must be (N, 1, H, W), got ",
             prob_logits.defined() ? shape_str(prob_logits.shape()) : std::string("undefined"));
  OCRT_CHECK(is_floating(prob_logits.dtype()), "det_loss: the logits must be floating point");
  check_like("thresh_logits", thresh_logits, prob_logits);
  check_like("shrink", targets.shrink, prob_logits);
  check_like("shrink_mask", targets.shrink_mask, prob_logits);
  check_like("thresh", targets.thresh, prob_logits);
  check_like("thresh_mask", targets.thresh_mask, prob_logits);
  const Tensor& gt = targets.shrink;
  const Tensor& gt_mask = targets.shrink_mask;

  // L_prob: the per-pixel loss, the mining on a detached host copy, then the chosen pixels.
  DetLoss out;
  const Tensor pixel_loss = binary_cross_entropy_with_logits(prob_logits, gt, Tensor(), Reduction::none);
  const std::vector<float> shrink = gt.to_vector<float>(), mask = gt_mask.to_vector<float>();
  const std::vector<float> weight =
      prob_logits.dtype() == DType::f64
          ? mine(pixel_loss.detach().to_vector<double>(), shrink, mask, o, &out.positives, &out.negatives)
          : mine(pixel_loss.detach().to_vector<float>(), shrink, mask, o, &out.positives, &out.negatives);
  const Tensor w = Tensor::from_vector(weight, prob_logits.shape()).to(prob_logits.dtype()).to(prob_logits.device());
  const Tensor l_prob = div(sum(mul(pixel_loss, w)), (double)(out.positives + out.negatives) + o.eps);

  // L_thresh: masked L1.
  const Tensor t = sigmoid(thresh_logits);
  const Tensor l_thresh = div(sum(mul(abs(sub(t, targets.thresh)), targets.thresh_mask)),
                              add(sum(targets.thresh_mask), o.eps));

  // L_binary: dice of the approximate binary map.
  const Tensor binary = sigmoid(mul(sub(sigmoid(prob_logits), t), o.k));
  const Tensor l_binary = dice_loss(binary, gt, gt_mask, o.eps);

  out.total = add(add(mul(l_prob, o.alpha), mul(l_thresh, o.beta)), l_binary);
  out.prob = l_prob.item(), out.thresh = l_thresh.item(), out.binary = l_binary.item();
  return out;
}

}  // namespace ocrt::train
