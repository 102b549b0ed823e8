// The nn building blocks, each the counterpart of the torch.nn module of the same name, with
// the same parameter names, shapes and default initialisation (so a PyTorch state_dict loads
// unchanged). The maths lives in ops/; a layer only owns its tensors and calls the op.
#pragma once
#include <memory>
#include <vector>

#include "models/module.h"
#include "ops/elementwise.h"

namespace ocrt::nn {

// y = x @ weight^T + bias. weight (out_features, in_features), bias (out_features).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;  // bias undefined when built without one
  const int64_t in_features, out_features;

 protected:
  const char* type_name() const override { return "Linear"; }
};

// Zeroes elements with probability p in training mode and scales the rest by 1/(1-p); the
// identity in eval mode. It draws from its own Generator, whose state a checkpoint can save.
class Dropout : public Module {
 public:
  explicit Dropout(double p, uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;
  Generator& generator() { return gen_; }
  const double p;

 protected:
  const char* type_name() const override { return "Dropout"; }

 private:
  Generator gen_;
};

// Parameter-free activations, so that they can sit in a Sequential (their indices then count,
// as in PyTorch: "cnn.0" conv, "cnn.1" ReLU, "cnn.3" the next conv).
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return relu(x); }

 protected:
  const char* type_name() const override { return "ReLU"; }
};
class GELU : public Module {
 public:
  explicit GELU(GeluApprox approximate = GeluApprox::none) : approximate_(approximate) {}
  Tensor forward(const Tensor& x) override { return gelu(x, approximate_); }

 protected:
  const char* type_name() const override { return "GELU"; }

 private:
  GeluApprox approximate_;
};
class Hardswish : public Module {
 public:
  Tensor forward(const Tensor& x) override { return hardswish(x); }

 protected:
  const char* type_name() const override { return "Hardswish"; }
};

// Children named "0", "1", ... run one after the other.
class Sequential : public Module {
 public:
  Sequential() = default;
  // Appends a module under the next index and returns it.
  template <class M>
  std::shared_ptr<M> add(std::shared_ptr<M> m) {
    register_module(std::to_string(size_), m);
    ++size_;
    return m;
  }
  Tensor forward(const Tensor& x) override;
  int64_t size() const { return size_; }
  Module& operator[](int64_t i) const;

 protected:
  const char* type_name() const override { return "Sequential"; }

 private:
  int64_t size_ = 0;
};

}  // namespace ocrt::nn
