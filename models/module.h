// Module: the base of every layer and model, after torch.nn.Module.
//
// A module owns named parameters (tensors trained by the optimizer), named buffers (state that
// is saved but not trained, such as BatchNorm's running statistics) and named child modules.
// Names compose with dots exactly as PyTorch's state_dict does ("cnn.0.weight",
// "rnn.weight_ih_l0"), which is what makes weights move between PyTorch and ocrt unchanged.
//
// A layer keeps its tensors as plain members (`Tensor weight;`) and registers their addresses
// in its constructor. The registry holds pointers to those members, so a module is neither
// copyable nor movable (make_shared it); moving it to another device (to()) or loading a
// state_dict replaces the member tensors in place, and the layer's forward sees the new ones.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/rng.h"
#include "runtime/tensor.h"

namespace ocrt::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
// A state_dict: name -> tensor, ordered by name (a map keeps files and listings stable).
using StateDict = std::map<std::string, Tensor>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The one-tensor forward that Sequential chains. Modules with other signatures (LSTM,
  // attention) define their own and keep this one's default, which throws.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  // Every parameter / buffer of this module and its children, depth first in registration
  // order, with dotted names.
  NamedTensors named_parameters() const;
  NamedTensors named_buffers() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;  // total number of trainable values

  // Parameters and buffers by name (detached references to the same storage).
  StateDict state_dict() const;
  // Copies every tensor of `state` into the matching parameter or buffer (converting dtype,
  // moving to this module's device). Checks everything before changing anything: tensors
  // that are missing, unexpected, or of the wrong shape are all listed in one error. With
  // strict = false, missing and unexpected names are allowed (shapes are still checked).
  // An optional buffer (register_buffer's `optional`, e.g. BatchNorm's num_batches_tracked)
  // may be absent even when strict, as PyTorch allows: it then keeps the value it has.
  void load_state_dict(const StateDict& state, bool strict = true);

  // Training mode (dropout active, BatchNorm uses and updates batch statistics) or
  // evaluation mode; applies to every child.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves (or converts) every parameter and buffer; parameters stay leaves that require grad.
  void to(Device device);
  void to(DType dtype);
  Device device() const;  // of the first parameter or buffer (cpu when there is none)

  void zero_grad();  // drops every parameter's .grad

  // Children, in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

 protected:
  // Registers a member tensor as a parameter (sets requires_grad) or buffer, or a child.
  // `name` must not contain dots and must be unique within this module. An optional buffer
  // is saved like any other but may be missing from a state_dict that is loaded (a counter
  // that exporters often drop, such as BatchNorm's num_batches_tracked).
  void register_parameter(const std::string& name, Tensor* slot);
  void register_buffer(const std::string& name, Tensor* slot, bool optional = false);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    add_child(name, child);
    return child;
  }

  // The type name used in error messages ("Linear", "Conv2d").
  virtual const char* type_name() const { return "Module"; }

 private:
  void check_new_name(const std::string& name) const;
  void add_child(const std::string& name, std::shared_ptr<Module> child);
  // Visits (dotted name, slot, is_parameter) for every tensor, depth first.
  void visit(const std::string& prefix, const std::function<void(const std::string&, Tensor*, bool)>& f) const;
  // Adds the dotted names of every optional buffer of this module and its children to out.
  void collect_optional_buffers(const std::string& prefix, std::set<std::string>& out) const;

  std::vector<std::pair<std::string, Tensor*>> params_, buffers_;
  std::set<std::string> optional_buffers_;  // names (within this module) of optional buffers
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// PyTorch's default initialisation of Linear and Conv weights and biases:
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform with a = sqrt(5) comes to this bound).
Tensor init_uniform_fan_in(const Shape& shape, int64_t fan_in, Generator& gen);

// The random initial value of a parameter of `shape` in [lo, hi) (the layers' initialisers all
// come here), or, while a SkipInit lives on this thread, an uninitialised tensor.
Tensor init_uniform(const Shape& shape, double lo, double hi, Generator& gen);

// While one lives on this thread, new parameters are left uninitialised: no random numbers
// drawn, no page of them touched before the weights are copied in. For a model whose every
// parameter is loaded from a file at once (build_recognizer, build_detector: a strict
// load_state_dict refuses a file that lacks one). Reading a file's model this way skips
// drawing crnn's 8.7M initial values (20-60 ms at start-up).
class SkipInit {
 public:
  SkipInit();
  ~SkipInit();
  SkipInit(const SkipInit&) = delete;
  SkipInit& operator=(const SkipInit&) = delete;

 private:
  bool outer_;
};

}  // namespace ocrt::nn
