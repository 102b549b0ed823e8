// Front-end of the CTC loss: argument checks, target flattening, reductions and autograd.
// Kernels: ops/cpu/ctc.cpp, ops/cuda/ctc.cu. Targets may live on any device: they are read
// on the host (to_vector copies) for the checks and offsets, and the flattened copy the
// kernels read is put on the scores' device.
#include "ops/ctc.h"

#include <algorithm>
#include <cmath>

#include "ops/backend.h"
#include "ops/reduce.h"
#include "runtime/autograd.h"

namespace ocrt {

namespace {

struct Prepared {
  Tensor targets;                      // i64, concatenated, contiguous, on the device
  std::vector<int64_t> offsets;        // where each sample's labels start
  int64_t max_target = 0;
};

Prepared prepare(const char* op, const Tensor& lp, const Tensor& targets, const std::vector<int64_t>& input_lengths,
                 const std::vector<int64_t>& target_lengths, const CTCLossOptions& opt) {
  OCRT_CHECK(lp.defined() && lp.dim() == 3, op, ": expected (T, N, C) scores, got ",
             lp.defined() ? shape_str(lp.shape()) : std::string("undefined"));
  OCRT_CHECK(is_floating(lp.dtype()), op, ": expected float scores, got ", dtype_name(lp.dtype()));
  const int64_t T = lp.size(0), N = lp.size(1), C = lp.size(2);
  OCRT_CHECK(C >= 1, op, ": no classes in scores ", shape_str(lp.shape()));
  OCRT_CHECK(opt.blank >= 0 && opt.blank < C, op, ": blank ", opt.blank, " is not a class of [0, ", C, ")");
  OCRT_CHECK((int64_t)input_lengths.size() == N && (int64_t)target_lengths.size() == N, op, ": expected ", N,
             " input lengths and target lengths, got ", input_lengths.size(), " and ", target_lengths.size());
  OCRT_CHECK(targets.defined() && (targets.dtype() == DType::i64 || targets.dtype() == DType::i32), op,
             ": targets must be an int64 or int32 tensor");
  OCRT_CHECK(targets.dim() == 1 || targets.dim() == 2, op, ": targets must be (N, S) or 1-D, got ",
             shape_str(targets.shape()));
  for (int64_t n = 0; n < N; ++n) {
    OCRT_CHECK(input_lengths[(size_t)n] >= 0 && input_lengths[(size_t)n] <= T, op, ": input length ",
               input_lengths[(size_t)n], " of sample ", n, " is outside [0, T = ", T, "]");
    OCRT_CHECK(target_lengths[(size_t)n] >= 0, op, ": target length of sample ", n, " is negative");
  }
  const std::vector<int64_t> all = targets.to(DType::i64).to_vector<int64_t>();
  Prepared p;
  std::vector<int64_t> flat;
  int64_t pos = 0;
  if (targets.dim() == 2) {
    OCRT_CHECK(targets.size(0) == N, op, ": padded targets have ", targets.size(0), " rows for ", N, " samples");
    const int64_t S = targets.size(1);
    for (int64_t n = 0; n < N; ++n) {
      OCRT_CHECK(target_lengths[(size_t)n] <= S, op, ": target length ", target_lengths[(size_t)n], " of sample ", n,
                 " exceeds the padded target width ", S);
      p.offsets.push_back(pos);
      for (int64_t k = 0; k < target_lengths[(size_t)n]; ++k) flat.push_back(all[(size_t)(n * S + k)]);
      pos += target_lengths[(size_t)n];
    }
  } else {
    int64_t total = 0;
    for (int64_t len : target_lengths) total += len;
    OCRT_CHECK(total == targets.numel(), op, ": 1-D targets hold ", targets.numel(),
               " labels but the target lengths add up to ", total);
    flat = all;
    for (int64_t n = 0; n < N; ++n) {
      p.offsets.push_back(pos);
      pos += target_lengths[(size_t)n];
    }
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < target_lengths[(size_t)n]; ++k) {
      const int64_t label = flat[(size_t)(p.offsets[(size_t)n] + k)];
      OCRT_CHECK(label >= 0 && label < C && label != opt.blank, op, ": target ", k, " of sample ", n, " is ", label,
                 ", expected a class in [0, ", C, ") other than the blank (", opt.blank, ")");
    }
  for (int64_t len : target_lengths) p.max_target = std::max(p.max_target, len);
  p.targets = Tensor::from_vector(flat.empty() ? std::vector<int64_t>{0} : flat).to(lp.device());
  return p;
}

// Forward + autograd for both entry points. from_logits: `scores` are logits and the node's
// gradient goes to them directly.
Tensor ctc_common(const char* op, const Tensor& scores, bool from_logits, const Tensor& targets,
                  const std::vector<int64_t>& input_lengths, const std::vector<int64_t>& target_lengths,
                  const CTCLossOptions& opt) {
  Prepared p = prepare(op, scores, targets, input_lengths, target_lengths, opt);
  const int64_t T = scores.size(0), N = scores.size(1);
  const Device dev = scores.device();
  Tensor lp;
  if (from_logits) {
    NoGradGuard no_grad;
    lp = log_softmax(scores.detach(), 2).contiguous();
  } else {
    lp = scores.detach().contiguous();
  }
  Tensor losses = Tensor::empty({N}, scores.dtype(), dev);
  Tensor alpha = Tensor::empty({N, T, 2 * p.max_target + 1}, DType::f64, dev);
  if (N > 0)
    kernel(dev, &LayerBackend::ctc_loss, op)(lp, p.targets, p.offsets, input_lengths, target_lengths, opt.blank, losses, alpha);

  // Per-sample losses after zero_infinity, and the weight of each in the reduction.
  std::vector<double> per = losses.to_vector<double>(), weight((size_t)N, 1.0);
  for (int64_t n = 0; n < N; ++n) {
    if (opt.zero_infinity && std::isinf(per[(size_t)n])) per[(size_t)n] = 0;
    if (opt.reduction == Reduction::mean)
      weight[(size_t)n] = 1.0 / ((double)std::max<int64_t>(target_lengths[(size_t)n], 1) * (double)N);
  }
  Tensor result;
  if (opt.reduction == Reduction::none) {
    result = Tensor::from_vector(per).to(scores.dtype()).to(dev);
  } else {
    double total = 0;
    for (int64_t n = 0; n < N; ++n) total += per[(size_t)n] * weight[(size_t)n];
    result = Tensor::scalar(N > 0 ? total : (opt.reduction == Reduction::mean ? NAN : 0.0), scores.dtype(), dev);
  }

  if (any_requires_grad({scores})) {
    const Reduction reduction = opt.reduction;
    const int64_t blank = opt.blank;
    const Shape shape = scores.shape();
    record(op, {scores}, {result}, [=](const TensorList& grads) {
      // scale[n] = dL/dloss_n; infinite losses get no gradient (see the header).
      const std::vector<double> g = grads[0].to_vector<double>();
      std::vector<double> scale((size_t)N);
      for (int64_t n = 0; n < N; ++n) scale[(size_t)n] = (reduction == Reduction::none ? g[(size_t)n] : g[0]) * weight[(size_t)n];
      Tensor grad = Tensor::empty(shape, lp.dtype(), lp.device());
      kernel(lp.device(), &LayerBackend::ctc_loss_backward, "ctc_loss backward")(
          lp, p.targets, p.offsets, input_lengths, target_lengths, blank, losses, alpha, scale, grad);
      return TensorList{grad};
    });
  }
  return result;
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& input_lengths,
                const std::vector<int64_t>& target_lengths, const CTCLossOptions& opt) {
  return ctc_common("ctc_loss", log_probs, false, targets, input_lengths, target_lengths, opt);
}

Tensor ctc_loss_from_logits(const Tensor& logits, const Tensor& targets, const std::vector<int64_t>& input_lengths,
                            const std::vector<int64_t>& target_lengths, const CTCLossOptions& opt) {
  return ctc_common("ctc_loss_from_logits", logits, true, targets, input_lengths, target_lengths, opt);
}

}  // namespace ocrt
