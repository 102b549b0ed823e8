// Front-ends of batch_norm and layer_norm: checks, running-statistics bookkeeping, autograd.
// Kernels: ops/cpu/norm.cpp. docs/ops/norm.md derives the backward formulas.
#include "ops/norm.h"

#include <cmath>

#include "ops/backend.h"
#include "ops/elementwise.h"
#include "runtime/autograd.h"

namespace ocrt {

namespace {

void check_param(const Tensor& t, const char* what, int64_t C, const Tensor& x, const char* op) {
  if (!t.defined()) return;
  OCRT_CHECK(t.dim() == 1 && t.size(0) == C, op, ": ", what, " must have shape [", C, "] for input ",
             shape_str(x.shape()), ", got ", shape_str(t.shape()));
  OCRT_CHECK(t.device() == x.device() && t.dtype() == x.dtype(), op, ": ", what, " must be ", dtype_name(x.dtype()),
             " on ", x.device().str(), " like the input, got ", dtype_name(t.dtype()), " on ", t.device().str());
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  OCRT_CHECK(x.defined() && x.dim() >= 2, op, ": expected an input (N, C, ...), got ",
             x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  OCRT_CHECK(is_floating(x.dtype()), op, ": expected a float input, got ", dtype_name(x.dtype()));
  OCRT_CHECK(eps > 0 && std::isfinite(eps), op, ": eps must be > 0, got ", eps);
  OCRT_CHECK(momentum >= 0 && momentum <= 1, op, ": momentum must be in [0, 1], got ", momentum);
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / std::max<int64_t>(N * C, 1);
  for (auto [t, what] : {std::pair{running_mean, "running_mean"}, {running_var, "running_var"}, {weight, "weight"},
                         {bias, "bias"}})
    check_param(t, what, C, x, op);
  OCRT_CHECK(running_mean.defined() == running_var.defined(), op, ": give both running_mean and running_var, or neither");
  OCRT_CHECK(training || running_mean.defined(), op, ": eval mode needs running_mean and running_var");
  const int64_t count = N * S;  // values per channel
  OCRT_CHECK(!training || count > 1, op, ": expected more than 1 value per channel when training, got input ",
             shape_str(x.shape()));
  OCRT_CHECK(!running_mean.defined() || (!running_mean.requires_grad() && !running_var.requires_grad()), op,
             ": running statistics must not require grad");

  const Device dev = x.device();
  const Tensor x3 = x.detach().contiguous().view({N, C, S});
  Tensor mean, invstd;
  if (training) {
    mean = Tensor::empty({C}, x.dtype(), dev);
    Tensor var = Tensor::empty({C}, x.dtype(), dev);
    if (count > 0) kernel(dev, &Backend::batch_norm_stats, op)(x3, mean, var);
    invstd = div(Tensor::ones({C}, x.dtype(), dev), sqrt(add(var, eps)));
    if (running_mean.defined()) {
      NoGradGuard no_grad;
      mul_(running_mean, 1 - momentum);
      add_(running_mean, mean, momentum);
      mul_(running_var, 1 - momentum);
      add_(running_var, mul(var, (double)count / (double)(count - 1)), momentum);  // unbiased
    }
  } else {
    mean = running_mean.detach().clone();
    invstd = div(Tensor::ones({C}, x.dtype(), dev), sqrt(add(running_var.detach(), eps)));
  }
  const Tensor w = weight.defined() ? weight.detach().contiguous() : Tensor();
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), dev);
  if (y.numel() > 0) kernel(dev, &Backend::batch_norm_apply, op)(x3, mean, invstd, w, b, y.view({N, C, S}));

  if (any_requires_grad({x, weight, bias})) {
    const bool need_x = x.requires_grad(), need_w = weight.defined() && weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    const Shape shape_x = x.shape();
    record(op, {x, weight, bias}, {y}, [=](const TensorList& grads) {
      const Tensor dy = grads[0].contiguous().view({N, C, S});
      Tensor dx = need_x ? Tensor::empty(shape_x, x3.dtype(), x3.device()) : Tensor();
      Tensor dw = need_w ? Tensor::empty({C}, x3.dtype(), x3.device()) : Tensor();
      Tensor db = need_b ? Tensor::empty({C}, x3.dtype(), x3.device()) : Tensor();
      kernel(x3.device(), &Backend::batch_norm_backward, "batch_norm backward")(
          x3, dy, mean, invstd, w, training, need_x ? dx.view({N, C, S}) : Tensor(), dw, db);
      return TensorList{dx, dw, db};
    });
  }
  return y;
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "layer_norm";
  OCRT_CHECK(x.defined() && is_floating(x.dtype()), op, ": expected a float input");
  const int64_t nd = (int64_t)normalized_shape.size();
  OCRT_CHECK(nd >= 1 && nd <= x.dim(), op, ": normalized_shape ", shape_str(normalized_shape),
             " must name 1 to ", x.dim(), " trailing dims of the input ", shape_str(x.shape()));
  OCRT_CHECK(Shape(x.shape().end() - nd, x.shape().end()) == normalized_shape, op, ": input ", shape_str(x.shape()),
             " does not end in normalized_shape ", shape_str(normalized_shape));
  OCRT_CHECK(eps > 0, op, ": eps must be > 0, got ", eps);
  for (auto [t, what] : {std::pair{weight, "weight"}, {bias, "bias"}}) {
    if (!t.defined()) continue;
    OCRT_CHECK(t.shape() == normalized_shape, op, ": ", what, " must have shape ", shape_str(normalized_shape),
               ", got ", shape_str(t.shape()));
    OCRT_CHECK(t.device() == x.device() && t.dtype() == x.dtype(), op, ": ", what, " must be ", dtype_name(x.dtype()),
               " on ", x.device().str(), " like the input");
  }
  const int64_t D = numel_of(normalized_shape), M = D > 0 ? x.numel() / D : 0;
  OCRT_CHECK(D >= 1, op, ": normalized_shape ", shape_str(normalized_shape), " is empty");
  const Device dev = x.device();
  const Tensor x2 = x.detach().contiguous().view({M, D});
  const Tensor w = weight.defined() ? weight.detach().contiguous().view({D}) : Tensor();
  const Tensor b = bias.defined() ? bias.detach().contiguous().view({D}) : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), dev);
  Tensor mean = Tensor::empty({M}, x.dtype(), dev), rstd = Tensor::empty({M}, x.dtype(), dev);
  if (M > 0) kernel(dev, &Backend::layer_norm, op)(x2, w, b, eps, y.view({M, D}), mean, rstd);

  if (any_requires_grad({x, weight, bias})) {
    const bool need_x = x.requires_grad(), need_w = weight.defined() && weight.requires_grad();
    const bool need_b = bias.defined() && bias.requires_grad();
    const Shape shape_x = x.shape(), shape_n = normalized_shape;
    record(op, {x, weight, bias}, {y}, [=](const TensorList& grads) {
      const Tensor dy = grads[0].contiguous().view({M, D});
      Tensor dx = need_x ? Tensor::empty(shape_x, x2.dtype(), x2.device()) : Tensor();
      Tensor dw = need_w ? Tensor::zeros(shape_n, x2.dtype(), x2.device()) : Tensor();
      Tensor db = need_b ? Tensor::zeros(shape_n, x2.dtype(), x2.device()) : Tensor();
      if (M > 0)
        kernel(x2.device(), &Backend::layer_norm_backward, "layer_norm backward")(
            x2, dy, mean, rstd, w, need_x ? dx.view({M, D}) : Tensor(), need_w ? dw.view({D}) : Tensor(),
            need_b ? db.view({D}) : Tensor());
      return TensorList{dx, dw, db};
    });
  }
  return y;
}

}  // namespace ocrt
