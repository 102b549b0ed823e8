// Front-ends of batch_norm and layer_norm: checks, running-statistics bookkeeping, autograd.
// Kernels: ops/cpu/norm.cpp. docs/ops/norm.md derives the backward formulas.
#include "ops/norm.h"

#include <cmath>

#include "ops/backend.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "runtime/autograd.h"
#include "runtime/comm.h"

namespace ocrt {

namespace {

void check_param(const Tensor& t, const char* what, int64_t C, const Tensor& x, const char* op) {
  if (!t.defined()) return;
  OCRT_CHECK(t.dim() == 1 && t.size(0) == C, op, ": ", what, " must have shape [", C, "] for input ",
             shape_str(x.shape()), ", got ", shape_str(t.shape()));
  OCRT_CHECK(t.device() == x.device() && t.dtype() == x.dtype(), op, ": ", what, " must be ", dtype_name(x.dtype()),
             " on ", x.device().str(), " like the input, got ", dtype_name(t.dtype()), " on ", t.device().str());
}

void check_batch_norm_args(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                           const Tensor& weight, const Tensor& bias, bool training, double momentum, double eps,
                           const char* op) {
  OCRT_CHECK(x.defined() && x.dim() >= 2, op, ": expected an input (N, C, ...), got ",
             x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  OCRT_CHECK(is_floating(x.dtype()), op, ": expected a float input, got ", dtype_name(x.dtype()));
  OCRT_CHECK(eps > 0 && std::isfinite(eps), op, ": eps must be > 0, got ", eps);
  OCRT_CHECK(momentum >= 0 && momentum <= 1, op, ": momentum must be in [0, 1], got ", momentum);
  const int64_t C = x.size(1);
  for (auto [t, what] : {std::pair{running_mean, "running_mean"}, {running_var, "running_var"}, {weight, "weight"},
                         {bias, "bias"}})
    check_param(t, what, C, x, op);
  OCRT_CHECK(running_mean.defined() == running_var.defined(), op, ": give both running_mean and running_var, or neither");
  OCRT_CHECK(training || running_mean.defined(), op, ": eval mode needs running_mean and running_var");
}

// The batch's per-channel mean and biased variance (C), and how many values each channel had.
struct BatchStats {
  Tensor mean, var;
  int64_t count = 0;
};

// Statistics of this replica's x3 (N, C, S).
BatchStats local_stats(const Tensor& x3, const char* op) {
  const int64_t N = x3.size(0), C = x3.size(1), S = x3.size(2);
  BatchStats st{Tensor::empty({C}, x3.dtype(), x3.device()), Tensor::empty({C}, x3.dtype(), x3.device()), N * S};
  if (st.count > 0) {
    kernel(x3.device(), &LayerBackend::batch_norm_stats, op)(x3, st.mean, st.var);
  } else {
    st.mean.zero_();
    st.var.zero_();
  }
  return st;
}

// Synchronised: this replica's mean and variance are combined with the others' exactly, in two
// sums (Chan et al.'s pairwise formula): first sum(n_r * mean_r) and sum(n_r) give the global
// mean, then sum(n_r * (var_r + (mean_r - mean)^2)) the global (biased) variance.
BatchStats global_stats(const BatchStats& local, Communicator& comm, const char* op) {
  const int64_t C = local.mean.size(0);
  const DType dt = local.mean.dtype();
  Tensor first = Tensor::empty({C + 1}, dt, local.mean.device());
  first.narrow(0, 0, C).copy_(mul(local.mean, (double)local.count));
  first.narrow(0, C, 1).fill_((double)local.count);
  comm.all_reduce({first}, ReduceOp::sum);
  const int64_t count = (int64_t)std::llround(first.narrow(0, C, 1).item());
  OCRT_CHECK(count > 1, op, ": expected more than 1 value per channel in the global batch, got ", count);
  const Tensor global_mean = div(first.narrow(0, 0, C), (double)count);
  Tensor second = mul(add(local.var, pow(sub(local.mean, global_mean), 2.0)), (double)local.count).contiguous();
  comm.all_reduce({second}, ReduceOp::sum);
  return {global_mean.contiguous(), div(second, (double)count), count};
}

// running = (1 - momentum) running + momentum batch, with the unbiased variance (PyTorch).
void update_running_stats(const Tensor& running_mean, const Tensor& running_var, const BatchStats& st,
                          double momentum) {
  NoGradGuard no_grad;
  mul_(running_mean, 1 - momentum);
  add_(running_mean, st.mean, momentum);
  mul_(running_var, 1 - momentum);
  add_(running_var, mul(st.var, (double)st.count / (double)(st.count - 1)), momentum);  // unbiased
}

// Both forms; comm (more than one rank) makes the statistics those of the whole global batch.
Tensor batch_norm_impl(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, bool training, double momentum, double eps, Communicator* comm) {
  const char* op = comm ? "sync_batch_norm" : "batch_norm";
  check_batch_norm_args(x, running_mean, running_var, weight, bias, training, momentum, eps, op);
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / std::max<int64_t>(N * C, 1);
  const Device dev = x.device();
  const Tensor x3 = x.detach().contiguous().view({N, C, S});
  BatchStats st{Tensor(), Tensor(), N * S};
  if (training) st = local_stats(x3, op);
  if (training && comm) st = global_stats(st, *comm, op);
  OCRT_CHECK(!training || st.count > 1, op, ": expected more than 1 value per channel when training, got input ",
             shape_str(x.shape()));
  OCRT_CHECK(!running_mean.defined() || (!running_mean.requires_grad() && !running_var.requires_grad()), op,
             ": running statistics must not require grad");

  // Normalise with the batch's statistics when training, the running ones otherwise.
  Tensor mean, invstd;
  if (training) {
    mean = st.mean;
    invstd = div(Tensor::ones({C}, x.dtype(), dev), sqrt(add(st.var, eps)));
    if (running_mean.defined()) update_running_stats(running_mean, running_var, st, momentum);
  } else {
    mean = running_mean.detach().clone();
    invstd = div(Tensor::ones({C}, x.dtype(), dev), sqrt(add(running_var.detach(), eps)));
  }
  const Tensor w = weight.defined() ? weight.detach().contiguous() : Tensor();
  const Tensor b = bias.defined() ? bias.detach().contiguous() : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), dev);
  if (y.numel() > 0) kernel(dev, &LayerBackend::batch_norm_apply, op)(x3, mean, invstd, w, b, y.view({N, C, S}));
  if (!any_requires_grad({x, weight, bias})) return y;

  const bool need_x = x.requires_grad(), need_w = weight.defined() && weight.requires_grad();
  const bool need_b = bias.defined() && bias.requires_grad();
  const Shape shape_x = x.shape();
  const int64_t count = st.count;
  if (comm && training) {
    // dx = w * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), the means over the whole
    // global batch: this replica's sums, summed over the replicas. The gradients of weight and
    // bias stay this replica's own sums (the gradient sync adds them up with the others).
    record(op, {x, weight, bias}, {y}, [=](const TensorList& grads) {
      const Tensor dy = grads[0].contiguous().view({N, C, S});
      const Tensor xhat = mul(sub(x3, mean.view({1, C, 1})), invstd.view({1, C, 1}));
      Tensor sums = Tensor::empty({2 * C}, x3.dtype(), x3.device());
      sums.narrow(0, 0, C).copy_(sum(dy, {0, 2}));
      sums.narrow(0, C, C).copy_(sum(mul(dy, xhat), {0, 2}));
      const Tensor db = need_b ? sums.narrow(0, 0, C).clone() : Tensor();
      const Tensor dw = need_w ? sums.narrow(0, C, C).clone() : Tensor();
      comm->all_reduce({sums}, ReduceOp::sum);
      Tensor dx;
      if (need_x) {
        const Tensor mean_dy = div(sums.narrow(0, 0, C), (double)count).view({1, C, 1});
        const Tensor mean_dyx = div(sums.narrow(0, C, C), (double)count).view({1, C, 1});
        Tensor scale = invstd;
        if (w.defined()) scale = mul(scale, w);
        dx = mul(sub(sub(dy, mean_dy), mul(xhat, mean_dyx)), scale.view({1, C, 1})).view(shape_x);
      }
      return TensorList{dx, dw, db};
    });
    return y;
  }
  record(op, {x, weight, bias}, {y}, [=](const TensorList& grads) {
    const Tensor dy = grads[0].contiguous().view({N, C, S});
    Tensor dx = need_x ? Tensor::empty(shape_x, x3.dtype(), x3.device()) : Tensor();
    Tensor dw = need_w ? Tensor::empty({C}, x3.dtype(), x3.device()) : Tensor();
    Tensor db = need_b ? Tensor::empty({C}, x3.dtype(), x3.device()) : Tensor();
    kernel(x3.device(), &LayerBackend::batch_norm_backward, "batch_norm backward")(
        x3, dy, mean, invstd, w, training, need_x ? dx.view({N, C, S}) : Tensor(), dw, db);
    return TensorList{dx, dw, db};
  });
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  return batch_norm_impl(x, running_mean, running_var, weight, bias, training, momentum, eps, nullptr);
}

Tensor sync_batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                       const Tensor& bias, Communicator& comm, double momentum, double eps) {
  return batch_norm_impl(x, running_mean, running_var, weight, bias, true, momentum, eps,
                         comm.size() > 1 ? &comm : nullptr);
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
  if (M > 0) kernel(dev, &LayerBackend::layer_norm, op)(x2, w, b, eps, y.view({M, D}), mean, rstd);

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
        kernel(x2.device(), &LayerBackend::layer_norm_backward, "layer_norm backward")(
            x2, dy, mean, rstd, w, need_x ? dx.view({M, D}) : Tensor(), need_w ? dw.view({D}) : Tensor(),
            need_b ? db.view({D}) : Tensor());
      return TensorList{dx, dw, db};
    });
  }
  return y;
}

}  // namespace ocrt
