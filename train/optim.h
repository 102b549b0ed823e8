// Optimizers (SGD, Adam, AdamW) and gradient clipping, with PyTorch's exact update rules so
// that a training step can be checked against torch.optim (tests/train/test_optim.cpp).
//
// An optimizer holds handles to the parameter tensors it updates. Module::to(device) replaces
// a module's parameter tensors, so build the optimizer after moving the model.
//
// Updates are written with in-place tensor ops under no-grad, so they run on whatever device
// the parameters are on; their state (momentum buffers, Adam's moments, the step count) is a
// StateDict for checkpoints, which makes resume restore the optimizer, not just the weights.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "models/module.h"

namespace ocrt::train {

using nn::StateDict;

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  // Updates every parameter that has a gradient (parameters without one are skipped, as in
  // PyTorch), then counts the step.
  virtual void step() = 0;
  void zero_grad();  // drops every parameter's .grad

  double lr() const { return lr_; }
  void set_lr(double lr);  // what LR schedules call before each step
  int64_t steps() const { return steps_; }
  const std::vector<Tensor>& params() const { return params_; }

  // A snapshot (copies): "step" plus one entry per buffer ("<i>.<buffer>", i the parameter index). Buffers that
  // do not exist yet (no step taken) are absent.
  virtual StateDict state_dict() const;
  // Checks that every buffer matches its parameter's shape before changing anything.
  virtual void load_state_dict(const StateDict& state);
  virtual const char* name() const = 0;

 protected:
  // Buffer `key` of parameter i, created as zeros like the parameter on first use.
  Tensor& buffer(size_t i, const std::string& key);
  bool has_buffer(size_t i, const std::string& key) const;

  std::vector<Tensor> params_;
  double lr_;
  int64_t steps_ = 0;

 private:
  // Per parameter, buffer name -> tensor (a map: references stay valid as buffers are added).
  std::vector<std::map<std::string, Tensor>> buffers_;
};

struct SGDOptions {
  double lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};

// torch.optim.SGD: g = grad + wd p; with momentum, buf = g on the first step, then
// buf = momentum buf + (1 - dampening) g, and g = g + momentum buf (Nesterov) or buf; p -= lr g.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions opt);
  void step() override;
  const char* name() const override { return "sgd"; }

 private:
  SGDOptions opt_;
};

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
};

// torch.optim.Adam (weight decay added to the gradient) and, with decoupled = true,
// torch.optim.AdamW (p *= 1 - lr wd before the Adam update). With t the step count:
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions opt, bool decoupled_weight_decay = false);
  void step() override;
  const char* name() const override { return decoupled_ ? "adamw" : "adam"; }

 private:
  AdamOptions opt_;
  bool decoupled_;
};

// Scales all gradients together so that their global L2 norm is at most max_norm (as
// torch.nn.utils.clip_grad_norm_, with its 1e-6 in the denominator). Returns the norm before
// clipping, computed in double; a non-finite norm is returned without touching the gradients
// (the trainer then skips the step).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// The global L2 norm of the gradients (inf or nan when any gradient is not finite).
double grad_norm(const std::vector<Tensor>& params);

}  // namespace ocrt::train
