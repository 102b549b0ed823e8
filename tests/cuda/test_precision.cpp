// The GPUs' precisions (runtime/precision.h) against error bounds derived from each format,
// not from what passed once. A float32 product in tf32 or bf16 rounds each operand to a 10- or
// 7-bit mantissa, which moves it by less than 2^-10 or 2^-7 of itself (to nearest or toward
// zero: cuBLAS does not say which, and the bound covers both), so one product a*b moves by at
// most (2e + e^2)|a||b|; the float32 sum of K products adds at most gamma_K = K u / (1 - K u)
// of the sum of their magnitudes (u = 2^-24, any order of summation). Every element therefore
// lies within (2e + e^2 + gamma_K) * sum|a||b| of the exact result, computed here in float64 on
// the CPU, with the magnitudes' sum from the same op on |a| and |b|. fp32 is the case e = 0.
// Each precision must also take effect: an operand of 1 + 2^-12 is exact in float32 and
// rounds to 1 in TF32 and in bf16, so a product of such rows tells the three apart exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/parity.h"
#include "ops/linalg.h"
#include "runtime/precision.h"

using namespace ocrt;
using namespace ocrt::parity;

namespace {

constexpr Precision kAll[] = {Precision::fp32, Precision::tf32, Precision::bf16};

double operand_error(Precision p) {
  return p == Precision::bf16 ? std::ldexp(1.0, -7) : p == Precision::tf32 ? std::ldexp(1.0, -10) : 0.0;
}

// Checks |got - exact| <= (2e + e^2 + gamma_K) * magnitude + 1e-30 elementwise; returns the
// largest ratio of error to bound (for the log).
double expect_within_bound(const Tensor& exact, const Tensor& magnitude, const Tensor& got, Precision p, int64_t K,
                           const std::string& what, uint64_t seed) {
  INFO(what << " in " << precision_name(p) << " (seed " << seed << ", K " << K << ")");
  REQUIRE(got.device() == kGpu);
  REQUIRE(got.shape() == exact.shape());
  const std::vector<double> r = exact.to_vector<double>(), m = magnitude.to_vector<double>();
  const std::vector<double> g = got.to(Device::cpu()).to(DType::f64).to_vector<double>();
  const double e = operand_error(p), u = std::ldexp(1.0, -24), gamma = (double)K * u / (1 - (double)K * u);
  const double factor = 2 * e + e * e + gamma;
  double worst = 0;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < r.size(); ++i) {
    const double err = std::abs(g[i] - r[i]), bound = factor * m[i] + 1e-30;
    if (!(err <= bound)) {
      if (first < 0) first = (int64_t)i;
      ++bad;
    }
    worst = std::max(worst, err / bound);
  }
  INFO(bad << " elements past the bound, the first at flat index " << first << "; worst error/bound " << worst);
  CHECK(bad == 0);
  return worst;
}

Tensor f64(const Tensor& t) { return t.detach().to(Device::cpu()).to(DType::f64); }

}  // namespace

TEST_CASE("cuda precision: each precision takes effect on matmul and conv2d", "[cuda][precision]") {
  ParityEnv env;
  // Rows of 1 + 2^-12 times ones: float32 keeps every term, TF32 and bf16 round each to 1.
  // Sizes where tensor cores pay (cuBLAS may take a float32 kernel for tiny products, which
  // the FAST compute types allow).
  const int64_t K = 256;
  const Tensor a = Tensor::full({256, K}, 1 + std::ldexp(1.0, -12)).to(kGpu), b = Tensor::ones({K, 256}).to(kGpu);
  const Tensor x = Tensor::full({2, K, 16, 16}, 1 + std::ldexp(1.0, -12)).to(kGpu);
  const Tensor w = Tensor::ones({64, K, 1, 1}).to(kGpu);
  for (Precision p : kAll) {
    INFO(precision_name(p));
    const PrecisionScope scope(p);
    const double want = p == Precision::fp32 ? K * (1 + std::ldexp(1.0, -12)) : (double)K;
    int64_t off = 0;
    for (double v : matmul(a, b).to(Device::cpu()).to_vector<double>()) off += v != want;
    CHECK(off == 0);
    off = 0;
    for (double v : conv2d(x, w).to(Device::cpu()).to_vector<double>()) off += v != want;
    CHECK(off == 0);
  }
  CHECK(gpu_precision() == Precision::fp32);
}

TEST_CASE("cuda precision: matmul within each format's error bound", "[cuda][precision]") {
  ParityEnv env;
  struct Case {
    Shape a, b;
    bool transpose_b;
  };
  // Plain, batched, a transposed operand (op T), a broadcast one, and a long sum.
  const std::vector<Case> cases = {{{37, 129}, {129, 65}, false},
                                   {{3, 37, 129}, {3, 129, 65}, false},
                                   {{64, 96}, {48, 96}, true},
                                   {{4, 16, 200}, {200, 33}, false},
                                   {{8, 4096}, {4096, 16}, false}};
  for (const Case& c : cases) {
    const Tensor a = env.uniform(c.a), b = env.uniform(c.b);
    const Tensor a64 = f64(a), b64 = f64(b);
    const Tensor bb = c.transpose_b ? b64.t() : b64;
    const Tensor exact = matmul(a64, bb), magnitude = matmul(abs(a64), abs(bb));
    const int64_t K = c.a.back();
    for (Precision p : kAll) {
      const PrecisionScope scope(p);
      const Tensor ga = a.to(kGpu), gb = b.to(kGpu);
      const Tensor got = matmul(ga, c.transpose_b ? gb.t() : gb);
      const double worst = expect_within_bound(exact, magnitude, got, p, K, "matmul " + shape_str(c.a), env.seed);
      WARN("matmul " << shape_str(c.a) << " x " << shape_str(c.b) << " in " << precision_name(p) << ": worst error "
                     << worst << " of the bound");
    }
  }
}

TEST_CASE("cuda precision: conv2d forward and both gradients within each format's error bound", "[cuda][precision]") {
  ParityEnv env;
  // Four samples (one chunk of several: dy is rearranged) and one (dy's own planes; under bf16
  // rounded by a kernel of its own), and a stride of 2 (col2im's general path).
  const int64_t n = GENERATE(4, 1);
  const int64_t stride = GENERATE(1, 2);
  INFO(n << " samples, stride " << stride);
  const Shape xs{n, 16, 12, 40}, ws{32, 16, 3, 3};
  Conv2dOptions o;
  o.padding = {1, 1};
  o.stride = {stride, stride};
  const int64_t ho = (12 + 2 - 3) / stride + 1, wo = (40 + 2 - 3) / stride + 1;
  const Tensor x = env.uniform(xs), w = env.uniform(ws), bias = env.uniform({32});
  const Tensor r = env.uniform({n, 32, ho, wo});  // the output's gradient
  // Exact results and magnitudes in float64 on the CPU: the forward on (x, w) and (|x|, |w|),
  // the gradients of sum(y * r) and of sum(y(|x|, |w|) * |r|).
  auto run = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi, const Tensor& ri) {
    Tensor xg = xi.detach().clone(), wg = wi.detach().clone();
    xg.set_requires_grad();
    wg.set_requires_grad();
    Tensor y = conv2d(xg, wg, bi, o);
    sum(mul(y, ri), {}).backward();
    return std::vector<Tensor>{y.detach(), xg.grad(), wg.grad()};
  };
  const auto exact = run(f64(x), f64(w), f64(bias), f64(r));
  const auto magnitude = run(abs(f64(x)), abs(f64(w)), Tensor::zeros({32}, DType::f64), abs(f64(r)));
  // Terms per sum: the forward C*kh*kw, the input gradient Cout*kh*kw, the weight gradient N*Ho*Wo
  // (the bias adds one more term).
  const int64_t terms[] = {16 * 9 + 1, 32 * 9, n * ho * wo};
  const char* names[] = {"output", "gradient of x", "gradient of w"};
  for (Precision p : kAll) {
    const PrecisionScope scope(p);
    const auto got = run(x.to(kGpu), w.to(kGpu), bias.to(kGpu), r.to(kGpu));
    for (int i = 0; i < 3; ++i) {
      // The bias adds its own magnitude to the output's bound.
      const Tensor m = i == 0 ? add(magnitude[0], abs(f64(bias)).reshape({1, 32, 1, 1})) : magnitude[(size_t)i];
      const double worst = expect_within_bound(exact[(size_t)i], m, got[(size_t)i], p, terms[i],
                                               std::string("conv2d ") + names[i], env.seed);
      WARN("conv2d " << names[i] << " in " << precision_name(p) << ": worst error " << worst << " of the bound");
    }
  }
}
