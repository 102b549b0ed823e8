// Module registry, state_dict and the walks over the module tree (see module.h).
#include "models/module.h"

#include <cmath>
#include <set>
#include <sstream>

#include "ops/random.h"

namespace ocrt::nn {

Tensor Module::forward(const Tensor&) {
  fail(type_name(), ": this module has no one-tensor forward(); call its own forward with the arguments it takes");
}

void Module::check_new_name(const std::string& name) const {
  OCRT_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name(),
             ": a parameter, buffer or child name must be non-empty and contain no '.', got '", name, "'");
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list)
      if (n == name) return true;
    return false;
  };
  OCRT_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), type_name(), ": the name '", name,
             "' is registered twice");
}

void Module::register_parameter(const std::string& name, Tensor* slot) {
  check_new_name(name);
  OCRT_CHECK(slot->defined(), type_name(), ": parameter '", name, "' is an undefined tensor");
  OCRT_CHECK(is_floating(slot->dtype()), type_name(), ": parameter '", name, "' must be float32 or float64, got ",
             dtype_name(slot->dtype()));
  *slot = slot->detach();
  slot->set_requires_grad(true);
  params_.emplace_back(name, slot);
}

void Module::register_buffer(const std::string& name, Tensor* slot, bool optional) {
  check_new_name(name);
  OCRT_CHECK(slot->defined(), type_name(), ": buffer '", name, "' is an undefined tensor");
  buffers_.emplace_back(name, slot);
  if (optional) optional_buffers_.insert(name);
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_new_name(name);
  OCRT_CHECK(child != nullptr, type_name(), ": child module '", name, "' is null");
  children_.emplace_back(name, std::move(child));
}

void Module::visit(const std::string& prefix,
                   const std::function<void(const std::string&, Tensor*, bool)>& f) const {
  for (const auto& [n, slot] : params_) f(prefix + n, slot, true);
  for (const auto& [n, slot] : buffers_) f(prefix + n, slot, false);
  for (const auto& [n, child] : children_) child->visit(prefix + n + ".", f);
}

void Module::collect_optional_buffers(const std::string& prefix, std::set<std::string>& out) const {
  for (const auto& n : optional_buffers_) out.insert(prefix + n);
  for (const auto& [n, child] : children_) child->collect_optional_buffers(prefix + n + ".", out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  visit("", [&](const std::string& n, Tensor* t, bool is_param) {
    if (is_param) out.emplace_back(n, *t);
  });
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  visit("", [&](const std::string& n, Tensor* t, bool is_param) {
    if (!is_param) out.emplace_back(n, *t);
  });
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t total = 0;
  for (const Tensor& t : parameters()) total += t.numel();
  return total;
}

StateDict Module::state_dict() const {
  StateDict out;
  visit("", [&](const std::string& n, Tensor* t, bool) { out[n] = t->detach(); });
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  // Check everything first, so that a bad file changes nothing.
  std::vector<std::string> missing, mis_shaped;
  std::set<std::string> known, optional;
  collect_optional_buffers("", optional);
  visit("", [&](const std::string& n, Tensor* t, bool) {
    known.insert(n);
    auto it = state.find(n);
    if (it == state.end()) {
      if (!optional.count(n)) missing.push_back(n);  // an optional buffer left out keeps its value
    } else if (!it->second.defined() || it->second.shape() != t->shape()) {
      mis_shaped.push_back(n + " (expected " + shape_str(t->shape()) + ", got " +
                           (it->second.defined() ? shape_str(it->second.shape()) : std::string("undefined")) + ")");
    } else if (!is_floating(it->second.dtype()) && is_floating(t->dtype())) {
      mis_shaped.push_back(n + " (expected a float tensor, got " + dtype_name(it->second.dtype()) + ")");
    }
  });
  std::vector<std::string> unexpected;
  for (const auto& [n, _] : state)
    if (!known.count(n)) unexpected.push_back(n);

  auto list = [](const std::vector<std::string>& names) {
    std::ostringstream os;
    for (size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << names[i];
    return os.str();
  };
  std::ostringstream problems;
  if (!mis_shaped.empty()) problems << "\n  wrong shape: " << list(mis_shaped);
  if (strict && !missing.empty()) problems << "\n  missing: " << list(missing);
  if (strict && !unexpected.empty()) problems << "\n  unexpected: " << list(unexpected);
  if (!problems.str().empty()) fail("load_state_dict (", type_name(), "): the weights do not match the model:", problems.str());

  NoGradGuard no_grad;
  visit("", [&](const std::string& n, Tensor* t, bool) {
    auto it = state.find(n);
    // A tensor loaded into itself is left as it is (models/int8.h's placeholders, which hold
    // one value broadcast and cannot be written).
    if (it != state.end() && it->second.impl() != t->impl()) t->copy_(it->second.to(t->dtype()).to(t->device()));
  });
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, child] : children_) child->train(on);
}

void Module::to(Device device) {
  visit("", [&](const std::string&, Tensor* t, bool is_param) {
    if (t->device() == device) return;
    Tensor moved = t->detach().to(device);
    if (is_param) moved.set_requires_grad(true);
    *t = moved;
  });
}

void Module::to(DType dtype) {
  visit("", [&](const std::string&, Tensor* t, bool is_param) {
    // Buffers that count things (integers) keep their dtype, as in PyTorch.
    if (t->dtype() == dtype || !is_floating(t->dtype())) return;
    Tensor converted = t->detach().to(dtype);
    if (is_param) converted.set_requires_grad(true);
    *t = converted;
  });
}

Device Module::device() const {
  Device d = Device::cpu();
  bool found = false;
  visit("", [&](const std::string&, Tensor* t, bool) {
    if (!found) d = t->device(), found = true;
  });
  return d;
}

void Module::zero_grad() {
  visit("", [&](const std::string&, Tensor* t, bool is_param) {
    if (is_param) t->zero_grad();
  });
}

namespace {
thread_local bool t_skip_init = false;
}  // namespace

SkipInit::SkipInit() : outer_(t_skip_init) { t_skip_init = true; }
SkipInit::~SkipInit() { t_skip_init = outer_; }

Tensor init_uniform(const Shape& shape, double lo, double hi, Generator& gen) {
  return t_skip_init ? Tensor::empty(shape) : uniform(shape, lo, hi, gen);
}

Tensor init_uniform_fan_in(const Shape& shape, int64_t fan_in, Generator& gen) {
  OCRT_CHECK(fan_in > 0, "init_uniform_fan_in: fan_in must be >= 1, got ", fan_in);
  const double bound = 1.0 / std::sqrt((double)fan_in);
  return init_uniform(shape, -bound, bound, gen);
}

}  // namespace ocrt::nn
