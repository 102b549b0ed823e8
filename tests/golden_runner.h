// A small driver for golden fixtures written with tools/reference/golden.py's Fixture: for a
// case "name" it loads name.in0, name.in1, ..., runs the ocrt computation, compares name.out
// (or name.out0, name.out1, ...), backpropagates name.gout (or .gout0, ...) and compares
// name.grad<k> for every float input k. Tolerances depend on the dtype.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "gradcheck.h"
#include "runtime/autograd.h"
#include "runtime/safetensors.h"

namespace ocrt::testing {

// float64: both sides sum in double over the fixtures' small shapes (a few hundred terms of O(1)
// values), n 2^-53 sum|terms| < 1e-11 absolute. float32: PyTorch's and ocrt's results are both
// rounded, in different orders, through composite ops (attention, LSTM over time, CTC, norms) for
// which no per-element bound is computed here. 2e-4 relative + 1e-5 (about 3000 u) is not a
// worst-case bound: for the longest sums in the fixtures (conv_f32's weight gradient, 520
// products) the worst case 2 gamma_n sum|terms| exceeds it. It stands on the probabilistic
// bound, lambda sqrt(n) u sum|terms|, exceeded with probability below 2 exp(-lambda^2 / 2)
// (Higham and Mary, "A New Approach to Probabilistic Rounding Error Analysis", 2019). The
// worst cases of the kernels underneath are tested against plain-loop references with
// tests/tolerance.h (tests/runtime/test_gemm.cpp, test_linalg.cpp, test_conv.cpp).
struct GoldenTolerance {
  double rtol64 = 1e-9, atol64 = 1e-11, rtol32 = 2e-4, atol32 = 1e-5;
};

inline void run_golden_case(const SafetensorsFile& f, const std::string& name,
                            const std::function<TensorList(const TensorList&)>& fn, GoldenTolerance tol = {}) {
  INFO("golden case " << name << " (fixture " << f.name << ")");
  TensorList inputs;
  for (int k = 0; f.contains(name + ".in" + std::to_string(k)); ++k) {
    Tensor x = f.get(name + ".in" + std::to_string(k)).clone();
    if (is_floating(x.dtype())) x.set_requires_grad(true);
    inputs.push_back(x);
  }
  REQUIRE(!inputs.empty());
  const TensorList outs = fn(inputs);
  const bool single = f.contains(name + ".out");
  TensorList roots, gouts;
  for (size_t k = 0; k < outs.size(); ++k) {
    const std::string suffix = single ? "" : std::to_string(k);
    const Tensor& expected = f.get(name + ".out" + suffix);
    const bool f64 = expected.dtype() == DType::f64;
    require_close(outs[k], expected, f64 ? tol.rtol64 : tol.rtol32, f64 ? tol.atol64 : tol.atol32,
                  name + ": output " + std::to_string(k));
    if (f.contains(name + ".gout" + suffix) && outs[k].requires_grad()) {
      roots.push_back(outs[k]);
      gouts.push_back(f.get(name + ".gout" + suffix));
    }
    if (single) break;
  }
  if (roots.empty()) return;
  run_backward(roots, gouts, false);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string key = name + ".grad" + std::to_string(k);
    if (!f.contains(key)) continue;
    const Tensor& expected = f.get(key);
    const bool f64 = expected.dtype() == DType::f64;
    REQUIRE(inputs[k].grad().defined());
    require_close(inputs[k].grad(), expected, f64 ? tol.rtol64 : tol.rtol32, f64 ? tol.atol64 : tol.atol32,
                  name + ": gradient of input " + std::to_string(k));
  }
}

// The fixture's tensors whose names start with `prefix`, keyed by the rest of the name: with
// "init." a state_dict of a model's initial weights.
inline std::map<std::string, Tensor> tensors_with_prefix(const SafetensorsFile& f, const std::string& prefix) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : f.tensors)
    if (name.rfind(prefix, 0) == 0) out[name.substr(prefix.size())] = t;
  return out;
}

// max |got - want| / max(floor, max |want|): one relative error for a whole tensor, any dtype.
inline double max_rel_diff(const Tensor& got, const Tensor& want, double floor) {
  const auto x = got.to(DType::f64).to_vector<double>(), y = want.to(DType::f64).to_vector<double>();
  REQUIRE(x.size() == y.size());
  double scale = floor, diff = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    scale = std::max(scale, std::abs(y[i]));
    diff = std::max(diff, std::abs(x[i] - y[i]));
  }
  return diff / scale;
}

}  // namespace ocrt::testing
