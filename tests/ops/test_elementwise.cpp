// Elementwise ops: values against plain formulas, broadcasting, gradients (float64 finite
// differences), and argument errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "gradcheck.h"
#include "ops/elementwise.h"

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
  const double pi = 3.14159265358979323846;
  std::vector<Case> cases = {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double v) { return -v; }, -2, 2},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double v) { return std::exp(v); }, -3, 3},
      {"log", [](const Tensor& x) { return log(x); }, [](double v) { return std::log(v); }, 0.1, 5},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); }, 0.1, 5},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double v) { return std::abs(v); }, -2, 2},
      {"pow 2.5", [](const Tensor& x) { return pow(x, 2.5); }, [](double v) { return std::pow(v, 2.5); }, 0.1, 3},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); }, [](double v) { return std::min(0.7, std::max(-0.5, v)); }, -2, 2},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double v) { return v > 0 ? v : 0; }, -2, 2},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double v) { return 1 / (1 + std::exp(-v)); }, -8, 8},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double v) { return std::tanh(v); }, -3, 3},
      {"gelu", [](const Tensor& x) { return gelu(x); }, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, -4, 4},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, GeluApprox::tanh); },
       [pi](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v))); }, -4, 4},
      {"hardswish", [](const Tensor& x) { return hardswish(x); },
       [](double v) { return v * std::min(6.0, std::max(0.0, v + 3)) / 6; }, -5, 5},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }, [](double v) { return v > 0 ? v : 0.2 * v; }, -2, 2},
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
