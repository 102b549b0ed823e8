// Finite-difference gradient checking in float64, and small helpers shared by the tests.
//
// check_gradients(f, inputs) compares autograd's gradients with central differences:
//   L(x) = sum(f(x) * r) for a fixed random r,  dL/dx_j ~ (L(x + eps e_j) - L(x - eps e_j)) / 2eps
// for every element j of every float input. A mismatch fails the test and prints the first
// few offending elements. Integer inputs (indices) are passed through and not perturbed.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "runtime/autograd.h"
#include "runtime/tensor.h"

namespace ocrt::testing {

// Deterministic float64 values in [lo, hi) for test inputs, without depending on ops/random.
inline Tensor det_uniform(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0,
                          DType dtype = DType::f64) {
  std::vector<double> v((size_t)numel_of(shape));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * (double)(s >> 11) * (1.0 / 9007199254740992.0);
  }
  return Tensor::from_vector(v, shape).to(dtype);
}

struct GradcheckOptions {
  double eps = 1e-6;
  double rtol = 1e-5;
  double atol = 1e-8;
};

using TestFn = std::function<Tensor(const std::vector<Tensor>&)>;

inline void check_gradients(const std::string& name, const TestFn& f, std::vector<Tensor> inputs,
                            GradcheckOptions opt = {}) {
  INFO("gradcheck: " << name);
  for (auto& x : inputs)
    if (x.defined() && is_floating(x.dtype())) {
      REQUIRE(x.dtype() == DType::f64);
      x = x.detach().clone();
      x.set_requires_grad(true);
    }
  Tensor y = f(inputs);
  Tensor r = det_uniform(y.shape(), 12345, 0.5, 1.5);  // keep r away from 0: every output counts
  y.backward(r);

  auto loss = [&]() {
    NoGradGuard no_grad;
    return sum(mul(f(inputs), r)).item();
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    // An input that does not reach the output (e.g. only through a comparison) gets no grad:
    // then every numeric derivative must be 0.
    std::vector<double> analytic =
        x.grad().defined() ? x.grad().to_vector<double>() : std::vector<double>((size_t)x.numel(), 0.0);
    double* data = x.data<double>();
    std::ostringstream bad;
    int nbad = 0;
    for (int64_t j = 0; j < x.numel(); ++j) {
      double keep = data[j];
      data[j] = keep + opt.eps;
      double up = loss();
      data[j] = keep - opt.eps;
      double down = loss();
      data[j] = keep;
      double numeric = (up - down) / (2 * opt.eps);
      double a = analytic[(size_t)j];
      if (!(std::abs(a - numeric) <= opt.atol + opt.rtol * std::abs(numeric))) {
        if (nbad < 5) bad << "  input " << k << " element " << j << ": autograd " << a << ", numeric " << numeric << "\n";
        ++nbad;
      }
    }
    INFO("mismatches (" << nbad << " of " << x.numel() << "):\n" << bad.str());
    CHECK(nbad == 0);
  }
}

// Element-wise closeness of two tensors of any dtype/device; prints the first mismatches.
inline void require_close(const Tensor& actual, const Tensor& expected, double rtol, double atol,
                          const std::string& what = "") {
  INFO(what);
  REQUIRE(actual.shape() == expected.shape());
  std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  std::ostringstream bad;
  int nbad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
    bool same_inf = std::isinf(a[i]) && a[i] == e[i];
    if (both_nan || same_inf) continue;
    if (!(std::abs(a[i] - e[i]) <= atol + rtol * std::abs(e[i]))) {
      if (nbad < 5) bad << "  element " << i << ": got " << a[i] << ", expected " << e[i] << "\n";
      ++nbad;
    }
  }
  INFO("mismatches (" << nbad << " of " << a.size() << "):\n" << bad.str());
  CHECK(nbad == 0);
}

}  // namespace ocrt::testing
