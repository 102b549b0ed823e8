#include "ops/loss.h"

#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "runtime/autograd.h"
#include "runtime/error.h"

namespace ocrt {

namespace {

void check_same_shape(const char* op, const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  OCRT_CHECK(a.defined() && b.defined(), op, ": ", an, " and ", bn, " must be defined");
  OCRT_CHECK(a.shape() == b.shape(), op, ": ", an, " ", shape_str(a.shape()), " and ", bn, " ", shape_str(b.shape()),
             " must have the same shape");
  OCRT_CHECK(is_floating(a.dtype()) && a.dtype() == b.dtype(), op, ": ", an, " and ", bn,
             " must be floating point of one dtype");
  OCRT_CHECK(a.device() == b.device(), op, ": ", an, " and ", bn, " must be on one device");
}

}  // namespace

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                        Reduction reduction) {
  const char* op = "binary_cross_entropy_with_logits";
  check_same_shape(op, logits, "logits", target, "target");
  if (weight.defined()) {
    OCRT_CHECK(weight.dtype() == logits.dtype() && weight.device() == logits.device(), op,
               ": weight must have the logits' dtype and device");
    bool fits = weight.dim() <= logits.dim();
    for (int64_t k = 1; fits && k <= weight.dim(); ++k)
      fits = weight.size(-k) == 1 || weight.size(-k) == logits.size(-k);
    OCRT_CHECK(fits, op, ": weight ", shape_str(weight.shape()), " does not broadcast to the logits' shape ",
               shape_str(logits.shape()));
  }
  // The elementwise loss, computed without recording: max(x, 0) - x t + log(1 + exp(-|x|)),
  // where exp's argument is at most 0 and log's at least 1. Its gradient is recorded as one
  // node with the exact derivatives (the composition's would take relu's and abs's 0 at x = 0,
  // where the true derivative sigmoid(0) - t is not what they give).
  Tensor elementwise, loss;
  {
    NoGradGuard no_grad;
    elementwise = add(sub(relu(logits), mul(logits, target)), log(add(exp(neg(abs(logits))), 1.0)));
    loss = weight.defined() ? mul(elementwise, weight) : elementwise;
  }
  if (any_requires_grad({logits, target, weight})) {
    const Tensor x = logits.detach(), t = target.detach(), w = weight.defined() ? weight.detach() : Tensor();
    record(op, {logits, target, weight}, {loss}, [=](const TensorList& grads) {
      const Tensor g = w.defined() ? mul(grads[0], w) : grads[0];
      const Tensor dx = mul(g, sub(sigmoid(x), t));  // d/dx = sigmoid(x) - t
      const Tensor dt = mul(g, neg(x));               // d/dt = -x
      const Tensor dw = w.defined() ? sum_to(mul(grads[0], elementwise), w.shape()) : Tensor();
      return TensorList{dx, dt, dw};
    });
  }
  switch (reduction) {
    case Reduction::none: return loss;
    case Reduction::sum: return sum(loss);
    case Reduction::mean: return mean(loss);
  }
  return loss;
}

Tensor dice_loss(const Tensor& prob, const Tensor& target, const Tensor& mask, double eps) {
  const char* op = "dice_loss";
  check_same_shape(op, prob, "prob", target, "target");
  if (mask.defined()) check_same_shape(op, prob, "prob", mask, "mask");
  OCRT_CHECK(eps > 0, op, ": eps must be > 0, got ", eps);
  const Tensor p = mask.defined() ? mul(prob, mask) : prob;
  const Tensor t = mask.defined() ? mul(target, mask) : target;
  const Tensor intersection = sum(mul(p, target));
  const Tensor union_ = add(add(sum(p), sum(t)), eps);
  return rsub(1.0, div(mul(intersection, 2.0), union_));
}

}  // namespace ocrt
