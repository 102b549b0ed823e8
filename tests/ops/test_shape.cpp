// concat, stack, split, chunk.
#include <catch2/catch.hpp>

#include "gradcheck.h"
#include "ops/shape.h"

using namespace ocrt;
using ocrt::testing::check_gradients;
using ocrt::testing::det_uniform;

TEST_CASE("concat and stack", "[shape]") {
  Tensor a = Tensor::arange(6, DType::f32).reshape({2, 3});
  Tensor b = Tensor::arange(6, 10, 1, DType::f32).reshape({2, 2});
  Tensor c = concat({a, b}, 1);
  REQUIRE(c.shape() == Shape{2, 5});
  REQUIRE(c.to_vector<float>() == std::vector<float>{0, 1, 2, 6, 7, 3, 4, 5, 8, 9});
  REQUIRE(concat({a, a.t().t()}, 0).shape() == Shape{4, 3});
  REQUIRE(concat({a}, -1).to_vector<float>() == a.to_vector<float>());
  Tensor s = stack({a, a, a}, 1);
  REQUIRE(s.shape() == Shape{2, 3, 3});
  REQUIRE(stack({a, a}, -1).shape() == Shape{2, 3, 2});
  REQUIRE_THROWS_WITH(concat({a, b}, 0), Catch::Contains("concat") && Catch::Contains("[2, 2]"));
  REQUIRE_THROWS_WITH(concat({a, a.to(DType::f64)}, 0), Catch::Contains("float64"));
  REQUIRE_THROWS_WITH(concat({}, 0), Catch::Contains("at least one"));
  REQUIRE_THROWS_WITH(stack({a, b}, 0), Catch::Contains("stack"));
}

TEST_CASE("split and chunk give views", "[shape]") {
  Tensor x = Tensor::arange(10, DType::f32);
  auto parts = split(x, 4, 0);
  REQUIRE(parts.size() == 3);
  REQUIRE(parts[2].to_vector<float>() == std::vector<float>{8, 9});
  REQUIRE(parts[1].storage() == x.storage());
  auto sized = split(x, std::vector<int64_t>{3, 7}, 0);
  REQUIRE(sized[1].numel() == 7);
  REQUIRE_THROWS_WITH(split(x, std::vector<int64_t>{3, 3}, 0), Catch::Contains("add up to 6"));
  REQUIRE_THROWS_WITH(split(x, 0, 0), Catch::Contains("split_size"));
  REQUIRE(chunk(x, 3, 0).size() == 3);
  REQUIRE(chunk(x, 3, 0)[0].numel() == 4);
}

TEST_CASE("concat/stack/split gradients", "[shape][gradcheck]") {
  Tensor a = det_uniform({2, 3}, 31), b = det_uniform({2, 1}, 32), c = det_uniform({2, 3}, 33);
  check_gradients("concat", [](auto& in) { return concat({in[0], in[1], in[2]}, 1); }, {a, b, c});
  check_gradients("stack", [](auto& in) { return stack({in[0], in[1]}, 0); }, {a, c});
  check_gradients("split", [](auto& in) {
    auto p = split(in[0], 2, 1);
    return concat({p[1], p[0]}, 1);
  }, {a});
  check_gradients("split unused piece", [](auto& in) { return split(in[0], 1, 0)[1]; }, {a});
}
