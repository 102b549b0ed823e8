// Optimizers and gradient clipping (see optim.h for the update rules).
#include "train/optim.h"

#include <cmath>

#include "ops/backend.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace ocrt::train {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  OCRT_CHECK(!params_.empty(), "optimizer: no parameters to optimize");
  for (size_t i = 0; i < params_.size(); ++i) {
    OCRT_CHECK(params_[i].defined() && is_floating(params_[i].dtype()), "optimizer: parameter ", i,
               " is not a float tensor");
    OCRT_CHECK(params_[i].is_leaf(), "optimizer: parameter ", i, " (shape ", shape_str(params_[i].shape()),
               ") is not a leaf tensor");
  }
  set_lr(lr);
  buffers_.resize(params_.size());
}

void Optimizer::set_lr(double lr) {
  OCRT_CHECK(std::isfinite(lr) && lr >= 0, "optimizer: learning rate must be finite and >= 0, got ", lr);
  lr_ = lr;
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

bool Optimizer::has_buffer(size_t i, const std::string& key) const { return buffers_[i].count(key) > 0; }

Tensor& Optimizer::buffer(size_t i, const std::string& key) {
  auto it = buffers_[i].find(key);
  if (it == buffers_[i].end())
    it = buffers_[i].emplace(key, Tensor::zeros(params_[i].shape(), params_[i].dtype(), params_[i].device())).first;
  return it->second;
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  out["step"] = Tensor::full({1}, (double)steps_, DType::i64);
  for (size_t i = 0; i < buffers_.size(); ++i)
    for (const auto& [k, t] : buffers_[i]) out[std::to_string(i) + "." + k] = t.detach().clone();  // a snapshot
  return out;
}

void Optimizer::load_state_dict(const StateDict& state) {
  auto step = state.find("step");
  OCRT_CHECK(step != state.end() && step->second.numel() == 1, name(), ": optimizer state has no 'step' entry");
  std::vector<std::map<std::string, Tensor>> loaded(params_.size());
  for (const auto& [key, t] : state) {
    if (key == "step") continue;
    const size_t dot = key.find('.');
    OCRT_CHECK(dot != std::string::npos && dot > 0, name(), ": unexpected optimizer state entry '", key, "'");
    size_t i = 0;
    try {
      i = std::stoul(key.substr(0, dot));
    } catch (const std::exception&) {
      fail(name(), ": unexpected optimizer state entry '", key, "'");
    }
    OCRT_CHECK(i < params_.size(), name(), ": optimizer state entry '", key, "' is for parameter ", i, " but there are only ",
               params_.size(), " parameters (was it saved for another model?)");
    OCRT_CHECK(t.shape() == params_[i].shape(), name(), ": optimizer state entry '", key, "' has shape ",
               shape_str(t.shape()), " but parameter ", i, " has shape ", shape_str(params_[i].shape()));
    loaded[i].emplace(key.substr(dot + 1), t.to(params_[i].dtype()).to(params_[i].device()).clone());
  }
  buffers_ = std::move(loaded);
  steps_ = (int64_t)step->second.item();
}

SGD::SGD(std::vector<Tensor> params, SGDOptions opt) : Optimizer(std::move(params), opt.lr), opt_(opt) {
  OCRT_CHECK(opt.momentum >= 0 && opt.weight_decay >= 0 && opt.dampening >= 0, "sgd: momentum (", opt.momentum,
             "), dampening (", opt.dampening, ") and weight_decay (", opt.weight_decay, ") must be >= 0");
  OCRT_CHECK(!opt.nesterov || (opt.momentum > 0 && opt.dampening == 0),
             "sgd: Nesterov momentum needs momentum > 0 and dampening 0");
}

void SGD::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    Tensor g = p.grad();
    if (opt_.weight_decay != 0) g = add(g, mul(p, opt_.weight_decay));
    if (opt_.momentum != 0) {
      const bool first = !has_buffer(i, "momentum_buffer");
      Tensor& buf = buffer(i, "momentum_buffer");
      if (first) {
        buf.copy_(g);
      } else {
        mul_(buf, opt_.momentum);
        add_(buf, g, 1 - opt_.dampening);
      }
      g = opt_.nesterov ? add(g, mul(buf, opt_.momentum)) : buf;
    }
    add_(p, g, -lr_);
  }
  ++steps_;
}

namespace {

// Whether a parameter's Adam step can run as one kernel: p, its gradient and its moments
// contiguous, of one shape, floating dtype and device (else the composite of elementwise ops,
// which takes any strides).
bool fusable(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v) {
  for (const Tensor* t : {&g, &m, &v})
    if (t->shape() != p.shape() || t->dtype() != p.dtype() || t->device() != p.device() || !t->is_contiguous())
      return false;
  return p.is_contiguous() && (p.dtype() == DType::f32 || p.dtype() == DType::f64);
}

}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions opt, bool decoupled)
    : Optimizer(std::move(params), opt.lr), opt_(opt), decoupled_(decoupled) {
  OCRT_CHECK(opt.beta1 >= 0 && opt.beta1 < 1 && opt.beta2 >= 0 && opt.beta2 < 1, name(),
             ": betas must be in [0, 1), got (", opt.beta1, ", ", opt.beta2, ")");
  OCRT_CHECK(opt.eps >= 0 && opt.weight_decay >= 0, name(), ": eps (", opt.eps, ") and weight_decay (",
             opt.weight_decay, ") must be >= 0");
}

void Adam::step() {
  NoGradGuard no_grad;
  const double t = (double)(steps_ + 1);
  const double bias1 = 1 - std::pow(opt_.beta1, t), bias2 = 1 - std::pow(opt_.beta2, t);
  const double step_size = lr_ / bias1, sqrt_bias2 = std::sqrt(bias2);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    Tensor g = p.grad();
    Tensor& m = buffer(i, "exp_avg");
    Tensor& v = buffer(i, "exp_avg_sq");
    if (fusable(p, g, m, v)) {
      // One kernel for the whole update (ops/backend.h's adam_step), the same roundings as below.
      AdamStepParams a;
      if (opt_.weight_decay != 0) {
        if (decoupled_) a.decay = 1 - lr_ * opt_.weight_decay;
        else a.weight_decay = opt_.weight_decay;
      }
      a.beta1 = opt_.beta1, a.beta2 = opt_.beta2, a.eps = opt_.eps;
      a.step_size = step_size, a.sqrt_bias2 = sqrt_bias2;
      kernel(p.device(), &LayerBackend::adam_step, "adam_step")(a, p, g, m, v);
      continue;
    }
    if (opt_.weight_decay != 0) {
      if (decoupled_) mul_(p, 1 - lr_ * opt_.weight_decay);
      else g = add(g, mul(p, opt_.weight_decay));
    }
    mul_(m, opt_.beta1);
    add_(m, g, 1 - opt_.beta1);
    mul_(v, opt_.beta2);
    add_(v, mul(g, g), 1 - opt_.beta2);
    const Tensor denom = add(div(sqrt(v), sqrt_bias2), opt_.eps);
    add_(p, div(m, denom), -step_size);
  }
  ++steps_;
}

double grad_norm(const std::vector<Tensor>& params) {
  NoGradGuard no_grad;
  // In float64. On the CPU each gradient's sum of squares is taken on its own and added up in
  // parameter order, by one kernel that reads the gradient once (LayerBackend::sum_squares;
  // a float64 copy, a product and a sum took crnn's clipping 12-22 ms a step on 2 AMX Xeon
  // cores). On a GPU every gradient there is
  // copied into one float64 vector (a conversion each, in parameter order), squared and summed
  // at once, and read back once: two launches and one host read for the sum, where a copy, a
  // product, a sum and an addition per parameter were four launches each. (On the CPU that
  // vector cost more than it saved: crnn's clipping took 11.3 ms instead of 4.2, in 100 MiB
  // more.) Gradients on several devices (a model split over them) add up on the host.
  std::vector<Tensor> left;
  for (const Tensor& p : params)
    if (p.grad().defined()) left.push_back(p.grad());
  double total = 0;
  while (!left.empty()) {
    const Device dev = left[0].device();
    std::vector<Tensor> here, elsewhere;
    for (const Tensor& g : left) (g.device() == dev ? here : elsewhere).push_back(g);
    if (dev.is_cpu()) {
      double sum_here = 0;
      const auto sum_squares = kernel(dev, &LayerBackend::sum_squares, "sum_squares");
      for (const Tensor& g : here)  // (a gradient that is not contiguous, or of another dtype, copied first)
        sum_here += sum_squares(g.dtype() == DType::f32 || g.dtype() == DType::f64 ? g.contiguous()
                                                                                   : g.to(DType::f64).contiguous());
      total += sum_here;
    } else {
      int64_t n = 0;
      for (const Tensor& g : here) n += g.numel();
      Tensor all = Tensor::empty({n}, DType::f64, dev);
      int64_t at = 0;
      for (const Tensor& g : here) {
        all.narrow(0, at, g.numel()).copy_(g.reshape({g.numel()}));
        at += g.numel();
      }
      total += sum(mul(all, all)).item();
    }
    left = std::move(elsewhere);
  }
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  OCRT_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be > 0, got ", max_norm);
  const double norm = grad_norm(params);
  if (!std::isfinite(norm)) return norm;
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1) {
    NoGradGuard no_grad;
    for (const Tensor& p : params)
      if (p.grad().defined()) mul_(p.grad(), scale);
  }
  return norm;
}

}  // namespace ocrt::train
