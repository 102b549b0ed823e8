// The nn building blocks, each the counterpart of the torch.nn module of the same name, with
// the same parameter names, shapes and default initialisation (so a PyTorch state_dict loads
// unchanged). The maths lives in ops/; a layer only owns its tensors and calls the op.
#pragma once
#include <memory>
#include <vector>

#include "models/module.h"
#include "ops/attention.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/lstm.h"
#include "runtime/comm.h"

namespace ocrt::nn {

class Int8Linear;  // models/int8.h
class Int8Conv2d;

// y = x @ weight^T + bias. weight (out_features, in_features), bias (out_features).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, Generator& gen);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;  // bias undefined when built without one
  const int64_t in_features, out_features;
  // Set by models/int8.h's attach_int8 (an int8 model file): CPU forward passes without
  // gradients then run in int8; anything else still uses weight.
  std::shared_ptr<const Int8Linear> int8;
  // Set by load_model_weights with inference_only (models/int8.h): weight is a placeholder
  // without values, and a forward pass that int8 cannot take fails.
  bool int8_only = false;

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
// Passes its input through: holds a place in a Sequential (e.g. CRNN without BatchNorm keeps
// the indices, and so the tensor names, of the layers after it).
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }

 protected:
  const char* type_name() const override { return "Identity"; }
};
class GELU : public Module {
 public:
  explicit GELU(GeluApprox approximate = GeluApprox::none) : approximate_(approximate) {}
  Tensor forward(const Tensor& x) override { return gelu(x, approximate_); }
  GeluApprox approximate() const { return approximate_; }

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

// torch.nn.Conv2d: weight (out, in/groups, kh, kw), bias (out).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Pair kernel, Generator& gen, Conv2dOptions opt = {},
         bool bias = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  const Conv2dOptions options;
  std::shared_ptr<const Int8Conv2d> int8;  // as Linear::int8
  bool int8_only = false;                   // as Linear::int8_only

 protected:
  const char* type_name() const override { return "Conv2d"; }
};

// torch.nn.BatchNorm2d (also fine for (N, C) and (N, C, L) inputs): weight, bias and the
// buffers running_mean, running_var and num_batches_tracked (int64, as PyTorch's state_dict;
// an optional buffer: a state_dict without it loads, and the count keeps its value).
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& x) override;
  // Eval mode only, no autograd: y normalised in place with the running statistics (what
  // forward returns, as y * scale + shift per channel). nn::Sequential uses it on its own
  // intermediates when grad is off.
  void normalize_in_place(const Tensor& y) const;
  // That map's scale and shift per channel, float32 on the CPU (eval mode).
  std::pair<Tensor, Tensor> eval_affine() const;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  const double eps, momentum;

 protected:
  const char* type_name() const override { return "BatchNorm2d"; }
};

// While a SyncBatchNormScope lives on this thread, every BatchNorm2d in training mode on this
// thread uses sync_batch_norm over comm (ops/norm.h): the statistics of the whole global batch
// instead of this replica's shard. The trainer opens one per replica under --sync-batch-norm.
class SyncBatchNormScope {
 public:
  explicit SyncBatchNormScope(Communicator& comm);
  ~SyncBatchNormScope();
  SyncBatchNormScope(const SyncBatchNormScope&) = delete;
  SyncBatchNormScope& operator=(const SyncBatchNormScope&) = delete;
  static Communicator* current();  // this thread's, or null

 private:
  Communicator* previous_;
};

// torch.nn.LayerNorm over the last dims.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  const Shape normalized_shape;
  const double eps;

 protected:
  const char* type_name() const override { return "LayerNorm"; }
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(MaxPool2dOptions opt) : options(opt) {}
  Tensor forward(const Tensor& x) override { return max_pool2d(x, options); }
  const MaxPool2dOptions options;

 protected:
  const char* type_name() const override { return "MaxPool2d"; }
};

// torch.nn.LSTM (batch_first = false): parameters weight_ih_l{k}[_reverse], weight_hh_l{k},
// bias_ih_l{k}, bias_hh_l{k}, initialised U(-1/sqrt(H), 1/sqrt(H)) as PyTorch.
class LSTM : public Module {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, Generator& gen, LSTMOptions opt = {});
  // x (T, N, input_size); lengths optional (see ops/lstm.h).
  LSTMOutput forward(const Tensor& x, const std::vector<int64_t>& lengths, const Tensor& h0 = Tensor(),
                     const Tensor& c0 = Tensor());
  Tensor forward(const Tensor& x) override { return forward(x, {}).output; }
  std::vector<Tensor> flat_weights() const;  // in torch.nn.LSTM's _flat_weights order
  const int64_t input_size, hidden_size;
  const LSTMOptions options;
  // The input projections and the recurrent products in int8, one per layer and direction
  // (layer * dirs + dir), or none: as Linear::int8.
  std::vector<std::shared_ptr<const Int8Linear>> int8_input, int8_recurrent;
  bool int8_only = false;  // as Linear::int8_only: weight_ih_* and weight_hh_* are placeholders
  // The registered slot of "weight_ih_l<k>[_reverse]" or "weight_hh_l<k>[_reverse]", or null
  // (models/int8.h's load_model_weights puts placeholders there).
  Tensor* weight_slot(const std::string& name);

 protected:
  const char* type_name() const override { return "LSTM"; }

 private:
  std::vector<Tensor> weights_;  // owned here; registered under PyTorch's names
};

// torch.nn.MultiheadAttention with one packed projection: in_proj_weight (3E, E),
// in_proj_bias (3E), out_proj.weight (E, E), out_proj.bias (E).
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, Generator& gen, double dropout = 0, bool bias = true,
                     bool batch_first = false, uint64_t dropout_seed = 0);
  AttentionResult forward(const Tensor& query, const Tensor& key, const Tensor& value,
                          const Tensor& attn_mask = Tensor(), const Tensor& key_padding_mask = Tensor());
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
  const int64_t embed_dim, num_heads;
  const double dropout;
  const bool batch_first;
  Generator& generator() { return gen_; }

 protected:
  const char* type_name() const override { return "MultiheadAttention"; }

 private:
  Generator gen_;
};

// A list of modules registered as "0", "1", ... (torch.nn.ModuleList); no forward of its own.
class ModuleList : public Module {
 public:
  template <class M>
  std::shared_ptr<M> add(std::shared_ptr<M> m) {
    register_module(std::to_string(size_++), m);
    return m;
  }
  int64_t size() const { return size_; }

 protected:
  const char* type_name() const override { return "ModuleList"; }

 private:
  int64_t size_ = 0;
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
