// Elementwise ops: values against the plain references of runtime/cpu/elementwise_reference.h
// (contiguous, transposed, sliced and broadcast operands, the OpenMP path), broadcasting by hand,
// gradients (float64 finite differences), and argument errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include "gradcheck.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "runtime/cpu/elementwise_reference.h"

using namespace ocrt;
using ocrt::testing::check_gradients;
using ocrt::testing::det_uniform;
using ocrt::testing::require_close;

namespace {
// Applies f to every element on the host: the plain reference.
template <class F>
Tensor map_ref(const Tensor& x, F f) {
  auto v = x.to_vector<double>();
  for (auto& e : v) e = f(e);
  return Tensor::from_vector(v, x.shape());
}
}  // namespace

TEST_CASE("unary ops match their formulas, f32 and f64, contiguous and strided", "[elementwise]") {
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> op;
    std::function<double(double)> ref;
    double lo, hi;
  };
  auto ref = [](UnaryOp op, double a = 0, double b = 0) {
    return [op, a, b](double v) { return reference::unary(op, UnaryParams{a, b}, v); };
  };
  std::vector<Case> cases = {
      {"neg", [](const Tensor& x) { return neg(x); }, ref(UnaryOp::neg), -2, 2},
      {"exp", [](const Tensor& x) { return exp(x); }, ref(UnaryOp::exp), -3, 3},
      {"log", [](const Tensor& x) { return log(x); }, ref(UnaryOp::log), 0.1, 5},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, ref(UnaryOp::sqrt), 0.1, 5},
      {"abs", [](const Tensor& x) { return abs(x); }, ref(UnaryOp::abs), -2, 2},
      {"sign", [](const Tensor& x) { return sign(x); }, ref(UnaryOp::sign), -2, 2},
      {"pow 2.5", [](const Tensor& x) { return pow(x, 2.5); }, ref(UnaryOp::pow_scalar, 2.5), 0.1, 3},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); }, ref(UnaryOp::clamp, -0.5, 0.7), -2, 2},
      {"relu", [](const Tensor& x) { return relu(x); }, ref(UnaryOp::relu), -2, 2},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, ref(UnaryOp::sigmoid), -8, 8},
      {"tanh", [](const Tensor& x) { return tanh(x); }, ref(UnaryOp::tanh), -3, 3},
      {"gelu", [](const Tensor& x) { return gelu(x); }, ref(UnaryOp::gelu_erf), -4, 4},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, GeluApprox::tanh); }, ref(UnaryOp::gelu_tanh), -4, 4},
      {"hardswish", [](const Tensor& x) { return hardswish(x); }, ref(UnaryOp::hardswish), -5, 5},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }, ref(UnaryOp::leaky_relu, 0.2), -2, 2},
  };
  for (auto& c : cases) {
    for (DType dt : {DType::f64, DType::f32}) {
      Tensor x = det_uniform({7, 9}, 3, c.lo, c.hi, dt);
      // Element-wise: one libm (or vectorised) call and a few roundings, a few u = 6e-8 each,
      // no reduction; 1e-5 relative + absolute leaves room for the gelu/erf approximations.
      double tol = dt == DType::f64 ? 1e-12 : 1e-5;
      require_close(c.op(x), map_ref(x, c.ref), tol, tol, std::string(c.name) + " contiguous");
      require_close(c.op(x.t()), map_ref(x.t().contiguous(), c.ref), tol, tol, std::string(c.name) + " transposed");
      // Large enough to take the OpenMP path.
      Tensor big = det_uniform({300, 257}, 4, c.lo, c.hi, dt);
      require_close(c.op(big), map_ref(big, c.ref), tol, tol, std::string(c.name) + " large");
    }
  }
}

TEST_CASE("sigmoid is stable for extreme inputs", "[elementwise]") {
  Tensor x = Tensor::from_vector(std::vector<float>{-1000, -100, 0, 100, 1000});
  auto y = sigmoid(x).to_vector<float>();
  REQUIRE(y[0] == 0);
  REQUIRE((y[1] >= 0 && y[1] < 1e-40));  // 3.7e-44 or flushed to 0 by a vectorised exp
  REQUIRE(y[2] == 0.5f);
  REQUIRE(y[3] == 1);
  REQUIRE(y[4] == 1);
}

TEST_CASE("binary ops broadcast like PyTorch", "[elementwise]") {
  Tensor a = Tensor::arange(6, DType::f64).reshape({2, 3});
  Tensor col = Tensor::from_vector(std::vector<double>{10, 20}, {2, 1});
  Tensor row = Tensor::from_vector(std::vector<double>{1, 2, 3});
  REQUIRE(add(a, col).to_vector<double>() == std::vector<double>{10, 11, 12, 23, 24, 25});
  REQUIRE(mul(a, row).to_vector<double>() == std::vector<double>{0, 2, 6, 3, 8, 15});
  REQUIRE(sub(col, row).shape() == Shape{2, 3});
  REQUIRE(div(a, 2.0).to_vector<double>() == std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5});
  REQUIRE((10.0 - a).to_vector<double>() == std::vector<double>{10, 9, 8, 7, 6, 5});
  REQUIRE(maximum(a, row).to_vector<double>() == std::vector<double>{1, 2, 3, 3, 4, 5});
  REQUIRE(minimum(a, row).to_vector<double>() == std::vector<double>{0, 1, 2, 1, 2, 3});
  REQUIRE(add(Tensor::ones({4, 1, 3}), Tensor::ones({5, 1})).shape() == Shape{4, 5, 3});
  REQUIRE(add(Tensor::ones({0, 3}), Tensor::ones({3})).shape() == Shape{0, 3});
  // Integers add and compare; they do not divide.
  Tensor i = Tensor::arange(4);
  REQUIRE(add(i, i).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4, 6});
  REQUIRE_THROWS_WITH(div(i, i), Catch::Contains("div") && Catch::Contains("float"));
}

TEST_CASE("every binary op equals the broadcasting reference on sliced, transposed and expanded operands", "[elementwise]") {
  // float64, so each output is the same double operation as the reference's: equal exactly.
  // The operands take each of the loop driver's paths: contiguous, tensor op scalar, strided
  // (a transpose, a slice), broadcast dims of size 1 and stride 0, and a size large
  // enough for the OpenMP path.
  struct Pair {
    const char* what;
    Tensor a, b;
  };
  const Tensor base = det_uniform({6, 5, 4}, 21, -2, 2);
  const Tensor other = det_uniform({6, 5, 4}, 22, -2, 2);
  const std::vector<Pair> pairs = {
      {"contiguous", base, other},
      {"tensor op scalar", base, Tensor::from_vector(std::vector<double>{0.75})},
      {"transposed", base.permute({2, 0, 1}), other.permute({2, 0, 1})},
      {"sliced", base.narrow(1, 1, 3), other.narrow(1, 0, 3)},
      {"broadcast row and column", det_uniform({5, 1}, 23, -2, 2), det_uniform({1, 4}, 24, -2, 2)},
      {"expanded", base, det_uniform({5, 1}, 25, -2, 2).expand({6, 5, 4})},
      {"large", det_uniform({300, 257}, 26, -2, 2), det_uniform({257}, 27, -2, 2)},
  };
  const std::vector<std::pair<BinaryOp, std::function<Tensor(const Tensor&, const Tensor&)>>> ops = {
      {BinaryOp::add, [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {BinaryOp::sub, [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {BinaryOp::mul, [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {BinaryOp::div, [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {BinaryOp::pow, [](const Tensor& a, const Tensor& b) { return pow(abs(a), b); }},
      {BinaryOp::maximum, [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {BinaryOp::minimum, [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
      {BinaryOp::eq, [](const Tensor& a, const Tensor& b) { return eq(a, b); }},
      {BinaryOp::ne, [](const Tensor& a, const Tensor& b) { return ne(a, b); }},
      {BinaryOp::lt, [](const Tensor& a, const Tensor& b) { return lt(a, b); }},
      {BinaryOp::le, [](const Tensor& a, const Tensor& b) { return le(a, b); }},
      {BinaryOp::gt, [](const Tensor& a, const Tensor& b) { return gt(a, b); }},
      {BinaryOp::ge, [](const Tensor& a, const Tensor& b) { return ge(a, b); }},
  };
  for (const Pair& p : pairs)
    for (size_t k = 0; k < ops.size(); ++k) {
      INFO(p.what << ", op " << k);
      const auto& [op, f] = ops[k];
      // pow reads |a| (a negative base with a fractional exponent is NaN on both sides, which
      // == cannot compare); the reference gets the same |a|.
      const Tensor a = op == BinaryOp::pow ? abs(p.a) : p.a;
      const Tensor got = f(p.a, p.b);
      const auto want = reference::broadcast_binary(op, a.contiguous().to_vector<double>(), a.shape(),
                                                    p.b.contiguous().to_vector<double>(), p.b.shape());
      REQUIRE(got.shape() == reference::broadcast_shape(a.shape(), p.b.shape()));
      REQUIRE(got.to_vector<double>() == want);
    }
}

TEST_CASE("comparisons, where and masked_fill", "[elementwise]") {
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
  Tensor b = Tensor::from_vector(std::vector<float>{4, 2, 2, 4});
  REQUIRE(eq(a, b).dtype() == DType::u8);
  REQUIRE(eq(a, b).to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 0, 1});
  REQUIRE(ne(a, b).to_vector<uint8_t>() == std::vector<uint8_t>{1, 0, 1, 0});
  REQUIRE(lt(a, b).to_vector<uint8_t>() == std::vector<uint8_t>{1, 0, 0, 0});
  REQUIRE(le(a, b).to_vector<uint8_t>() == std::vector<uint8_t>{1, 1, 0, 1});
  REQUIRE(gt(a, 2.0).to_vector<uint8_t>() == std::vector<uint8_t>{0, 0, 1, 1});
  REQUIRE(ge(a, 2.0).to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 1, 1});
  REQUIRE(where(gt(a, 2.0), a, b).to_vector<float>() == std::vector<float>{4, 2, 3, 4});
  REQUIRE(masked_fill(a, lt(a, 3.0), -1).to_vector<float>() == std::vector<float>{-1, -1, 3, 4});
  Tensor m2 = Tensor::from_vector(std::vector<uint8_t>{1, 0}, {2, 1});
  REQUIRE(masked_fill(Tensor::zeros({2, 3}), m2, 5).to_vector<float>() == std::vector<float>{5, 5, 5, 0, 0, 0});
  REQUIRE_THROWS_WITH(where(a, a, b), Catch::Contains("uint8"));
  REQUIRE_THROWS_WITH(masked_fill(Tensor::zeros({3}), Tensor::ones({2, 3}, DType::u8), 1.0),
                      Catch::Contains("does not broadcast"));
}

TEST_CASE("NaN propagates through maximum, minimum and clamp", "[elementwise]") {
  float nan = std::nanf("");
  Tensor a = Tensor::from_vector(std::vector<float>{nan, 1});
  Tensor b = Tensor::from_vector(std::vector<float>{0, nan});
  auto mx = maximum(a, b).to_vector<float>();
  REQUIRE(std::isnan(mx[0]));
  REQUIRE(std::isnan(mx[1]));
  REQUIRE(std::isnan(clamp(a, 0, 1).to_vector<float>()[0]));
}

TEST_CASE("elementwise gradients match finite differences", "[elementwise][gradcheck]") {
  Tensor x = det_uniform({3, 4}, 11);
  Tensor pos = det_uniform({3, 4}, 12, 0.5, 2.0);
  Tensor row = det_uniform({4}, 13, 0.5, 2.0);
  Tensor col = det_uniform({3, 1}, 14);
  Tensor one = det_uniform({1}, 15, 0.5, 2.0);
  check_gradients("add broadcast", [](auto& in) { return add(in[0], in[1]); }, {x, row});
  check_gradients("sub broadcast both", [](auto& in) { return sub(in[0], in[1]); }, {col, row});
  check_gradients("mul broadcast", [](auto& in) { return mul(in[0], in[1]); }, {x, col});
  check_gradients("div", [](auto& in) { return div(in[0], in[1]); }, {x, row});
  check_gradients("div scalar-shaped", [](auto& in) { return div(in[0], in[1]); }, {x, one});
  check_gradients("pow tensor", [](auto& in) { return pow(in[0], in[1]); }, {pos, x});
  check_gradients("pow scalar", [](auto& in) { return pow(in[0], 3.0); }, {x});
  check_gradients("pow fractional", [](auto& in) { return pow(in[0], -1.5); }, {pos});
  check_gradients("scalar ops", [](auto& in) { return (2.0 - in[0] * 3.0 + 1.0) / 4.0; }, {x});
  // maximum/minimum away from ties
  check_gradients("maximum", [](auto& in) { return maximum(in[0], in[1]); }, {x, add(col, 0.013)});
  check_gradients("minimum", [](auto& in) { return minimum(in[0], in[1]); }, {x, add(row, -1.3)});
  check_gradients("neg", [](auto& in) { return neg(in[0]); }, {x});
  check_gradients("exp", [](auto& in) { return exp(in[0]); }, {x});
  check_gradients("log", [](auto& in) { return log(in[0]); }, {pos});
  check_gradients("sqrt", [](auto& in) { return sqrt(in[0]); }, {pos});
  check_gradients("abs", [](auto& in) { return abs(in[0]); }, {x});
  check_gradients("clamp", [](auto& in) { return clamp(in[0], -0.3, 0.4); }, {x});
  check_gradients("clamp_min", [](auto& in) { return clamp_min(in[0], 0.1); }, {x});
  check_gradients("where", [](auto& in) { return where(gt(in[2], 0.0), in[0], in[1]); },
                  {x, row, det_uniform({3, 4}, 16)});
  check_gradients("masked_fill", [](auto& in) { return masked_fill(in[0], lt(in[0], 0.0), 2.5); }, {x});
  check_gradients("relu", [](auto& in) { return relu(in[0]); }, {x});
  check_gradients("sigmoid", [](auto& in) { return sigmoid(in[0]); }, {mul(x, 5.0)});
  check_gradients("tanh", [](auto& in) { return tanh(in[0]); }, {mul(x, 2.0)});
  check_gradients("gelu erf", [](auto& in) { return gelu(in[0]); }, {mul(x, 3.0)});
  check_gradients("gelu tanh", [](auto& in) { return gelu(in[0], GeluApprox::tanh); }, {mul(x, 3.0)});
  check_gradients("hardswish", [](auto& in) { return hardswish(in[0]); }, {mul(x, 4.5)});
  check_gradients("leaky_relu", [](auto& in) { return leaky_relu(in[0], 0.1); }, {x});
  check_gradients("size-1 dims", [](auto& in) { return mul(in[0], in[1]); },
                  {det_uniform({1, 1, 3}, 17), det_uniform({2, 1, 1}, 18)});
  check_gradients("0-dim", [](auto& in) { return mul(in[0], in[1]); },
                  {det_uniform({}, 19), det_uniform({2, 3}, 20)});
}

TEST_CASE("elementwise errors name the op and the shapes", "[elementwise][errors]") {
  Tensor a = Tensor::ones({2, 3});
  REQUIRE_THROWS_WITH(add(a, Tensor::ones({4})), Catch::Contains("add") && Catch::Contains("[2, 3]") &&
                                                      Catch::Contains("[4]") && Catch::Contains("broadcast"));
  REQUIRE_THROWS_WITH(mul(a, Tensor::ones({2, 3}, DType::f64)), Catch::Contains("mul") && Catch::Contains("float64"));
  REQUIRE_THROWS_WITH(add(a, Tensor()), Catch::Contains("undefined"));
  REQUIRE_THROWS_WITH(exp(Tensor::ones({2}, DType::i64)), Catch::Contains("exp") && Catch::Contains("int64"));
  REQUIRE_THROWS_WITH(clamp(a, 1, 0), Catch::Contains("clamp"));
}

TEST_CASE("float32 gelu and its derivative stay within the erfc fit's bound, tails included", "[elementwise]") {
  // runtime/cpu/simd_math.h: Phi(x) from erfc(|x|/sqrt2) (Numerical Recipes' fit, fractional
  // error below 1.2e-7), on 8 lanes for contiguous runs and one value at a time otherwise. The
  // bound per value, with u = 2^-24: the fit's 1.2e-7 plus the roundings in its exponent on
  // erfc/2: z^2 = (x/sqrt2)^2 carries 5 u relative (the constant 1/sqrt2, the product, the
  // square), 5 z^2 u = 2.5 x^2 u absolute in the exponent, and about 16 u from the polynomial
  // and exp; then 2 u of Phi from the subtraction and the product by x. The derivative adds
  // x phi(x), whose exp(-z^2) carries the same 2.5 x^2 u and 4 u more.
  const double u = std::ldexp(1.0, -24);
  std::vector<float> values;
  for (int i = -24000; i <= 24000; ++i) values.push_back((float)(i * 5e-4));  // [-12, 12]
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 3e-8f, -3e-8f}) values.push_back(v);
  const int64_t n = (int64_t)values.size();
  for (bool strided : {false, true}) {
    // Strided: every value in the first column of an (n, 2) tensor: the one-value path.
    Tensor x = strided ? Tensor::from_vector(values, {n, 1}).expand({n, 2}).contiguous().slice(1, 0, 1)
                       : Tensor::from_vector(values);
    x = x.detach();
    x.set_requires_grad(true);
    Tensor y = gelu(x);
    sum(y).backward();
    const auto got = y.contiguous().to_vector<float>();
    const auto grad = x.grad().contiguous().to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      const double v = values[(size_t)i];
      const double half_erfc = 0.5 * std::erfc(std::fabs(v) / std::sqrt(2.0));
      const double cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
      const double phi = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
      const double rel = 1.2e-7 + (2.5 * v * v + 16) * u;
      const double cdf_err = half_erfc * rel + 2 * u * cdf;
      const double want = v * cdf;
      const double dwant = cdf + v * phi;
      INFO((strided ? "strided" : "contiguous") << " x = " << v);
      REQUIRE(std::fabs(got[(size_t)i] - want) <= std::fabs(v) * cdf_err + 1e-37);
      REQUIRE(std::fabs(grad[(size_t)i] - dwant) <=
              cdf_err + std::fabs(v * phi) * (2.5 * v * v + 4) * u + u * std::fabs(dwant) + 1e-37);
    }
  }
}
