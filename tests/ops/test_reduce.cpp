// Reductions and softmax: the CPU kernels against the plain-loop references of
// runtime/cpu/reduce_reference.h, values, keepdim, gradients, numerical stability, errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "gradcheck.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "runtime/backend.h"
#include "runtime/cpu/reduce_reference.h"

using namespace ocrt;
using ocrt::testing::check_gradients;
using ocrt::testing::det_uniform;
using ocrt::testing::require_close;

TEST_CASE("sum and mean over dims, with and without keepdim", "[reduce]") {
  Tensor x = Tensor::arange(24, DType::f64).reshape({2, 3, 4});
  REQUIRE(sum(x).item() == 276);
  REQUIRE(mean(x).item() == 11.5);
  REQUIRE(sum(x, {1}).shape() == Shape{2, 4});
  REQUIRE(sum(x, {1}, true).shape() == Shape{2, 1, 4});
  REQUIRE(sum(x, {0, 2}).to_vector<double>() == std::vector<double>{60, 92, 124});
  REQUIRE(sum(x, {-1}).to_vector<double>() == std::vector<double>{6, 22, 38, 54, 70, 86});
  REQUIRE(mean(x, {0}).to_vector<double>()[0] == 6);
  // Non-contiguous input, reduced over the dim that is now innermost.
  REQUIRE(sum(x.transpose(0, 2), {2}).to_vector<double>() == sum(x, {0}).t().contiguous().to_vector<double>());
  REQUIRE(sum(Tensor::arange(5), {}).item() == 10);  // integers sum too
  REQUIRE(sum(Tensor::zeros({0, 3}), {0}).to_vector<float>() == std::vector<float>{0, 0, 0});
  REQUIRE_THROWS_WITH(sum(x, {1, 1}), Catch::Contains("twice"));
  REQUIRE_THROWS_WITH(sum(x, {3}), Catch::Contains("out of range"));
  REQUIRE_THROWS_WITH(mean(Tensor::arange(3), {}), Catch::Contains("float"));
}

TEST_CASE("the reduction kernels equal the plain-loop reference: every kind, dims, strides, NaN and ties", "[reduce]") {
  const TensorBackend& cpu = tensor_backend(Device::cpu());
  const std::vector<int64_t> shape = {4, 5, 6};
  std::vector<double> v = det_uniform(shape, 31, -2, 2).to_vector<double>();
  for (size_t i = 0; i < v.size(); i += 7) v[i] = std::round(v[i]);  // ties for max and min
  for (bool with_nan : {false, true}) {
    if (with_nan) v[17] = NAN;
    const Tensor x = Tensor::from_vector(v, shape);
    for (bool transposed : {false, true}) {
      // The same values read through strides: xt (6,5,4) is x's transpose, compared with the
      // reference on its contiguous copy.
      const Tensor in = transposed ? x.permute({2, 1, 0}) : x;
      const std::vector<double> iv = in.contiguous().to_vector<double>();
      const std::vector<int64_t> ishape = in.shape();
      for (int mask = 0; mask < 8; ++mask)
        for (ReduceKind kind : {ReduceKind::sum, ReduceKind::mean, ReduceKind::max, ReduceKind::min}) {
          std::vector<bool> reduced = {(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
          Shape out_shape = ishape;
          for (size_t d = 0; d < 3; ++d)
            if (reduced[d]) out_shape[d] = 1;
          INFO("kind " << (int)kind << ", reduced dims mask " << mask << (transposed ? ", transposed" : "")
                       << (with_nan ? ", with a NaN" : ""));
          Tensor out = Tensor::empty(out_shape, DType::f64);
          cpu.reduce(kind, in, out);
          require_close(out, Tensor::from_vector(reference::reduce(kind, iv, ishape, reduced), out_shape), 1e-13,
                        1e-13, "reduce");
        }
      for (size_t dim = 0; dim < 3; ++dim)
        for (bool is_max : {true, false}) {
          INFO((is_max ? "max" : "min") << " along dim " << dim << (transposed ? ", transposed" : "")
                                        << (with_nan ? ", with a NaN" : ""));
          Shape out_shape = ishape;
          out_shape[dim] = 1;
          Tensor values = Tensor::empty(out_shape, DType::f64), indices = Tensor::empty(out_shape, DType::i64);
          cpu.arg_reduce(is_max, in, (int64_t)dim, values, indices);
          std::vector<double> want_v;
          std::vector<int64_t> want_i;
          reference::arg_reduce(is_max, iv, ishape, dim, want_v, want_i);
          require_close(values, Tensor::from_vector(want_v, out_shape), 0, 0, "values");
          REQUIRE(indices.to_vector<int64_t>() == want_i);
        }
    }
  }
}

TEST_CASE("large reductions agree with a double-precision loop", "[reduce]") {
  Tensor x = det_uniform({1 << 20}, 5, -1, 1, DType::f32);  // one output, parallel split
  auto v = x.to_vector<double>();
  double s = 0;
  for (double e : v) s += e;
  // The CPU sums float32 in a double accumulator (docs/architecture.md), so the bound is that of
  // a float64 sum, n 2^-53 sum|x| (3e-11 relative to sum|x| = 5e5 here: 6e-5 absolute), plus one
  // rounding to float32 of the result, u |s| with |s| about 600. Both together stay under 2e-7 |s|,
  // so 1e-6 relative holds with a factor of 5 to spare. A float32 accumulator would need
  // gamma_{2^20} = 0.06 relative to sum|x|: this test would catch one.
  REQUIRE(sum(x).item() == Approx(s).epsilon(1e-6));
  Tensor m = det_uniform({512, 700}, 6, -1, 1, DType::f32);
  auto mv = m.to_vector<double>();
  std::vector<double> rows(512, 0);
  for (int i = 0; i < 512; ++i)
    for (int j = 0; j < 700; ++j) rows[i] += mv[i * 700 + j];
  // Row sums of 700 values with a double accumulator: 700 2^-53 700 (5e-11) plus u |s|, far under
  // 1e-5 (1 + |s|).
  require_close(sum(m, {1}), Tensor::from_vector(rows), 1e-5, 1e-5, "row sums");
}

TEST_CASE("max, min, argmax, amax", "[reduce]") {
  Tensor x = Tensor::from_vector(std::vector<float>{3, 7, 7, 1, 9, 2}, {2, 3});
  auto [v, i] = max(x, 1);
  REQUIRE(v.to_vector<float>() == std::vector<float>{7, 9});
  REQUIRE(i.to_vector<int64_t>() == std::vector<int64_t>{1, 1});  // first of the tie
  auto [v0, i0] = min(x, 0, true);
  REQUIRE(v0.shape() == Shape{1, 3});
  REQUIRE(v0.to_vector<float>() == std::vector<float>{1, 7, 2});
  REQUIRE(i0.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  REQUIRE(argmax(x, -1).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  REQUIRE(argmin(x.t(), 0).to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  REQUIRE(amax(x, {}).item() == 9);
  REQUIRE(amin(x, {0}).to_vector<float>() == std::vector<float>{1, 7, 2});
  Tensor n = Tensor::from_vector(std::vector<float>{1, std::nanf(""), 3});
  REQUIRE(std::isnan(max(n, 0).first.item()));
  REQUIRE(max(n, 0).second.item() == 1);
  REQUIRE_THROWS_WITH(max(Tensor::zeros({0, 2}), 0), Catch::Contains("size 0"));
}

TEST_CASE("sums over leading, middle or all dims of large float32 tensors equal the reference, each thread split", "[reduce]") {
  // runtime/cpu/reduce.cpp's row sums: x as (outer, n, inner), whole rows added into double
  // accumulators, threads over (outer, column block) pairs or, with too few of those, over the
  // rows; a sum of everything as rows of 64 values into 64 double sums. Each output is a sum of
  // n float32 values in double (error about n 2^-53 of the absolute sum): 1e-12 relative to the
  // absolute sum bounds it.
  const TensorBackend& cpu = tensor_backend(Device::cpu());
  struct Case {
    Shape shape;
    std::vector<bool> reduced;
  };
  const std::vector<Case> cases = {
      {{6000, 20}, {true, false}},              // a bias gradient: few columns, rows split
      {{3, 100, 2500}, {false, true, false}},   // middle dim, 3 x 3 column blocks of 1024
      {{40, 30, 70}, {true, true, false}},      // two leading dims
      {{2, 7, 9, 300}, {false, true, true, false}},
      {{300, 71}, {true, true}},  // everything: 64 lane sums, then the 52 values left over
      {{100003}, {true}},
  };
  for (const Case& c : cases)
    for (ReduceKind kind : {ReduceKind::sum, ReduceKind::mean}) {
      const Tensor x = det_uniform(c.shape, 41, -2, 2, DType::f32);
      const std::vector<double> xv = x.to_vector<double>();
      Shape out_shape = c.shape;
      for (size_t d = 0; d < c.shape.size(); ++d)
        if (c.reduced[d]) out_shape[d] = 1;
      Tensor out = Tensor::empty(out_shape, DType::f32);
      cpu.reduce(kind, x, out);
      std::vector<double> abs_xv(xv.size());
      for (size_t i = 0; i < xv.size(); ++i) abs_xv[i] = std::fabs(xv[i]);
      const std::vector<double> want = reference::reduce(kind, xv, c.shape, c.reduced);
      const std::vector<double> scale = reference::reduce(kind, abs_xv, c.shape, c.reduced);
      const std::vector<float> got = out.to_vector<float>();
      INFO("shape " << shape_str(c.shape) << ", kind " << (int)kind);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i)  // float32 rounding of the result, then the sum's
        REQUIRE(std::fabs(got[i] - want[i]) <= std::ldexp(std::fabs(want[i]), -24) + 1e-12 * scale[i] + 1e-30);
    }
}

TEST_CASE("softmax and log_softmax are exact and stable", "[reduce][softmax]") {
  Tensor x = det_uniform({3, 5, 4}, 7, -3, 3);
  for (int64_t dim : {0, 1, 2, -1}) {
    Tensor y = softmax(x, dim);
    require_close(sum(y, {dim}), Tensor::ones(sum(y, {dim}).shape(), DType::f64), 1e-12, 1e-12, "sums to 1");
    require_close(log_softmax(x, dim), log(y), 1e-12, 1e-12, "log_softmax = log(softmax)");
    // the plain formula for moderate inputs
    require_close(y, div(exp(x), sum(exp(x), {dim}, true)), 1e-12, 1e-12, "formula");
  }
  Tensor big = Tensor::from_vector(std::vector<float>{1000, 0, -1000, 1e30f}, {1, 4});
  auto ls = log_softmax(big, 1).to_vector<float>();
  REQUIRE(ls[3] == 0);
  REQUIRE(std::isfinite(ls[0]));
  // A row of only -inf has no distribution: NaN, as in PyTorch.
  Tensor ninf = Tensor::full({2, 3}, -std::numeric_limits<float>::infinity());
  for (float v : softmax(ninf, 1).to_vector<float>()) REQUIRE(std::isnan(v));
  // A row with some -inf entries gives them probability 0.
  Tensor part = Tensor::from_vector(std::vector<float>{-INFINITY, 0, 0});
  REQUIRE(softmax(part, 0).to_vector<float>() == std::vector<float>{0, 0.5f, 0.5f});
}

TEST_CASE("reduction and softmax gradients", "[reduce][gradcheck]") {
  Tensor x = det_uniform({3, 4, 5}, 21);
  check_gradients("sum all", [](auto& in) { return sum(in[0]); }, {x});
  check_gradients("sum dims", [](auto& in) { return sum(in[0], {0, 2}); }, {x});
  check_gradients("sum keepdim", [](auto& in) { return sum(in[0], {1}, true); }, {x});
  check_gradients("mean", [](auto& in) { return mean(in[0], {-1}); }, {x});
  check_gradients("mean all", [](auto& in) { return mean(in[0]); }, {x});
  check_gradients("amax", [](auto& in) { return amax(in[0], {1}); }, {x});
  check_gradients("amin keepdim", [](auto& in) { return amin(in[0], {0, 2}, true); }, {x});
  check_gradients("max values", [](auto& in) { return max(in[0], 2).first; }, {x});
  check_gradients("min values keepdim", [](auto& in) { return min(in[0], 0, true).first; }, {x});
  for (int64_t dim : {0, 1, 2}) {
    check_gradients("softmax", [dim](auto& in) { return softmax(in[0], dim); }, {x});
    check_gradients("log_softmax", [dim](auto& in) { return log_softmax(in[0], dim); }, {x});
  }
  check_gradients("softmax of transposed", [](auto& in) { return softmax(in[0].transpose(0, 2), 1); }, {x});
  check_gradients("sum of broadcast", [](auto& in) { return sum(mul(in[0], in[1]), {0}); },
                  {det_uniform({1, 5}, 22), det_uniform({4, 1}, 23)});
}
