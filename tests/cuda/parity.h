// CPU-vs-CUDA parity helpers. The CPU kernels are the oracle: a test builds random inputs on
// the CPU, runs the same op (forward and, through autograd, backward) on the CPU and on cuda:0,
// and compares with a relative error ||gpu - cpu|| / ||cpu|| (plus the largest absolute error
// for context).
//
// Inputs are fresh each run: the seed comes from std::random_device and is printed with every
// failure, so a failing case can be replayed with OCRT_PARITY_SEED=<seed>.
// Poisoning: ParityEnv turns on the allocator's poisoning, so every GPU buffer starts as NaN
// (0xFF bytes) and an output element a kernel never writes fails the comparison.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "runtime/autograd.h"
#include "runtime/cuda/cuda_glue.h"
#include "runtime/tensor.h"

namespace ocrt::parity {

inline const Device kGpu = Device::cuda(0);

// Tolerances (relative error): elementwise and reductions, and GEMM-based ops (TF32 is off).
constexpr double kTolElementwise = 2e-5;
constexpr double kTolGemm = 1e-4;

inline uint64_t fresh_seed() {
  if (const char* s = std::getenv("OCRT_PARITY_SEED")) return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  return ((uint64_t)rd() << 32) ^ rd();
}

// One per test case: a Generator with a fresh seed, and poisoning on for its duration.
struct ParityEnv {
  uint64_t seed;
  Generator gen;
  // The CPU side is the reference: im2col convolutions, not fast mode's Winograd (ops/conv.h).
  ConvModeScope exact_conv{ConvMode::exact};
  ParityEnv() : seed(fresh_seed()), gen(seed) { cuda_set_poison(true); }
  ~ParityEnv() { cuda_set_poison(false); }
  Tensor uniform(const Shape& shape, double lo = -1, double hi = 1, DType dtype = DType::f32) {
    return ocrt::uniform(shape, lo, hi, gen, dtype);
  }
  Tensor randn(const Shape& shape, DType dtype = DType::f32) { return ocrt::randn(shape, gen, dtype); }
};

struct Diff {
  double rel = 0, max_abs = 0;
  int64_t nan_mismatch = 0;  // elements finite on one side and not on the other
  int64_t first_bad = -1;
};

inline Diff diff(const Tensor& ref, const Tensor& got) {
  std::vector<double> a = ref.to(Device::cpu()).to_vector<double>();
  std::vector<double> b = got.to(Device::cpu()).to_vector<double>();
  Diff d;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool fa = std::isfinite(a[i]), fb = std::isfinite(b[i]);
    if (fa != fb || (!fa && !(a[i] == b[i]) && !(std::isnan(a[i]) && std::isnan(b[i])))) {
      if (d.first_bad < 0) d.first_bad = (int64_t)i;
      d.nan_mismatch++;
      continue;
    }
    if (!fa) continue;  // the same inf, or NaN on both sides
    const double e = std::abs(a[i] - b[i]);
    num += e * e;
    den += a[i] * a[i];
    d.max_abs = std::max(d.max_abs, e);
  }
  d.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

// Fails (with the seed, the name and the error) unless got matches ref within tol.
inline void expect_close(const Tensor& ref, const Tensor& got, double tol, const std::string& what,
                         uint64_t seed) {
  INFO(what << " (seed " << seed << ", shape " << shape_str(ref.shape()) << ")");
  REQUIRE(got.defined());
  REQUIRE(got.device() == kGpu);
  REQUIRE(ref.shape() == got.shape());
  REQUIRE(ref.dtype() == got.dtype());
  Diff d = diff(ref, got);
  INFO("relative error " << d.rel << ", max abs error " << d.max_abs << ", non-finite mismatches "
                         << d.nan_mismatch << " (first at flat index " << d.first_bad << ")");
  CHECK(d.nan_mismatch == 0);
  CHECK(d.rel <= tol);
}

// Runs f on CPU copies and on GPU copies of `inputs` (float inputs get requires_grad when
// `grad` is set), compares every output, then backpropagates the same random output gradients
// on both sides and compares every input's gradient.
inline void check_op(ParityEnv& env, const std::string& name, const std::vector<Tensor>& inputs,
                     const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& f, double tol,
                     bool grad = true, double grad_tol = -1) {
  if (grad_tol < 0) grad_tol = tol;
  std::vector<Tensor> cpu_in, gpu_in;
  for (const Tensor& t : inputs) {
    Tensor c = t.detach().clone();
    Tensor g = t.detach().to(kGpu);
    if (grad && is_floating(t.dtype())) {
      c.set_requires_grad();
      g.set_requires_grad();
    }
    cpu_in.push_back(c);
    gpu_in.push_back(g);
  }
  std::vector<Tensor> cpu_out = f(cpu_in);
  std::vector<Tensor> gpu_out = f(gpu_in);
  REQUIRE(cpu_out.size() == gpu_out.size());
  for (size_t i = 0; i < cpu_out.size(); ++i)
    expect_close(cpu_out[i], gpu_out[i], tol, name + ": output " + std::to_string(i), env.seed);
  if (!grad) return;

  // L = sum_i sum(out_i * r_i) with random r_i, the same on both sides.
  Tensor cpu_loss, gpu_loss;
  for (size_t i = 0; i < cpu_out.size(); ++i) {
    if (!cpu_out[i].requires_grad()) continue;
    Tensor r = env.uniform(cpu_out[i].shape(), -1, 1, cpu_out[i].dtype());
    Tensor lc = sum(mul(cpu_out[i], r), {});
    Tensor lg = sum(mul(gpu_out[i], r.to(kGpu)), {});
    cpu_loss = cpu_loss.defined() ? add(cpu_loss, lc) : lc;
    gpu_loss = gpu_loss.defined() ? add(gpu_loss, lg) : lg;
  }
  if (!cpu_loss.defined()) return;
  cpu_loss.backward();
  gpu_loss.backward();
  for (size_t i = 0; i < cpu_in.size(); ++i) {
    if (!cpu_in[i].requires_grad()) continue;
    const std::string what = name + ": gradient of input " + std::to_string(i);
    INFO(what);
    REQUIRE(cpu_in[i].grad().defined() == gpu_in[i].grad().defined());
    if (cpu_in[i].grad().defined()) expect_close(cpu_in[i].grad(), gpu_in[i].grad(), grad_tol, what, env.seed);
  }
}

}  // namespace ocrt::parity
