// Random numbers: Philox4x32-10 against the Random123 known-answer vectors, the counter
// convention of runtime/rng.h, reproducibility (seed, offset, thread count), statistics of
// uniforms and normals, and dropout.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>

#include "gradcheck.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "runtime/autograd.h"
#include "runtime/rng.h"

using namespace ocrt;

namespace {

// rng.h packs the 64-bit key as (k0 = low, k1 = high) and the counter as
// (c0, c1) = counter_lo low/high, (c2, c3) = counter_hi low/high.
Philox4x32 philox_words(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  uint64_t key = (uint64_t)k0 | ((uint64_t)k1 << 32);
  uint64_t lo = (uint64_t)c0 | ((uint64_t)c1 << 32), hi = (uint64_t)c2 | ((uint64_t)c3 << 32);
  return philox4x32_10(key, lo, hi);
}

void require_words(const Philox4x32& r, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  CHECK(r.v[0] == a);
  CHECK(r.v[1] == b);
  CHECK(r.v[2] == c);
  CHECK(r.v[3] == d);
}

template <class F>
auto with_threads(int n, F f) {
  int prev = omp_get_max_threads();
  omp_set_num_threads(n);
  auto r = f();
  omp_set_num_threads(prev);
  return r;
}

struct Moments {
  double mean = 0, var = 0, m4 = 0, lag1 = 0;  // lag1: correlation of neighbours
  double lo = INFINITY, hi = -INFINITY;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  const double n = (double)v.size();
  for (double x : v) {
    m.mean += x;
    m.lo = std::min(m.lo, x);
    m.hi = std::max(m.hi, x);
  }
  m.mean /= n;
  for (size_t i = 0; i < v.size(); ++i) {
    double d = v[i] - m.mean;
    m.var += d * d;
    m.m4 += d * d * d * d;
    if (i + 1 < v.size()) m.lag1 += d * (v[i + 1] - m.mean);
  }
  m.var /= n;
  m.m4 /= n;
  m.lag1 /= (n - 1) * m.var;
  return m;
}

}  // namespace

TEST_CASE("philox4x32_10 matches the Random123 known-answer vectors", "[random]") {
  require_words(philox_words(0, 0, 0, 0, 0, 0), 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u);
  require_words(philox_words(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu), 0x408f276du,
                0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu);
  require_words(philox_words(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u), 0xd16cfe09u,
                0x94fdccebu, 0x5001e420u, 0x24126ea1u);
}

TEST_CASE("rand follows the counter convention of rng.h", "[random]") {
  Generator gen(0x1234abcd5678ull);
  gen.set_state(0x1234abcd5678ull, 7);
  Tensor u = rand({3, 5}, gen);
  REQUIRE(gen.offset() == 8);  // one offset per tensor
  std::vector<float> v = u.to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i)
    CHECK(v[i] == uint_to_unit_float(philox4x32_10(0x1234abcd5678ull, i, 7).v[0]));
  Tensor d = rand({4}, gen, DType::f64);
  std::vector<double> dv = d.to_vector<double>();
  for (size_t i = 0; i < dv.size(); ++i) {
    Philox4x32 r = philox4x32_10(0x1234abcd5678ull, i, 8);
    CHECK(dv[i] == uints_to_unit_double_open0(r.v[0], r.v[1]) - 0x1p-53);
  }
}

TEST_CASE("same seed and offset give the same numbers, new draws and seeds differ", "[random]") {
  for (DType dt : {DType::f32, DType::f64}) {
    Generator a(42), b(42), c(43);
    Tensor a1 = rand({1000}, a, dt), a2 = rand({1000}, a, dt);
    Tensor b1 = rand({1000}, b, dt);
    Tensor c1 = rand({1000}, c, dt);
    REQUIRE(a1.to_vector<double>() == b1.to_vector<double>());
    REQUIRE(a1.to_vector<double>() != a2.to_vector<double>());
    REQUIRE(a1.to_vector<double>() != c1.to_vector<double>());
    // Restoring the state replays the second draw.
    Generator replay(42);
    replay.set_state(42, 1);
    REQUIRE(rand({1000}, replay, dt).to_vector<double>() == a2.to_vector<double>());
    // randn likewise.
    Generator n1(7), n2(7);
    REQUIRE(randn({257}, n1, dt).to_vector<double>() == randn({257}, n2, dt).to_vector<double>());
    REQUIRE(randn({257}, n1, dt).to_vector<double>() != randn({257}, n1, dt).to_vector<double>());
  }
  // Element i does not depend on the shape: a longer draw starts with the shorter one.
  Generator s1(5), s2(5);
  std::vector<float> small = randn({10}, s1).to_vector<float>();
  std::vector<float> large = randn({2, 50}, s2).to_vector<float>();
  REQUIRE(std::vector<float>(large.begin(), large.begin() + 10) == small);
}

TEST_CASE("random tensors do not depend on the thread count", "[random]") {
  const Shape shape = {300, 1001};  // well above the parallel threshold
  auto draw = [&](int threads) {
    return with_threads(threads, [&] {
      Generator gen(2024);
      std::vector<double> all = rand(shape, gen).to_vector<double>();
      for (DType dt : {DType::f32, DType::f64}) {
        for (double v : randn(shape, gen, dt).to_vector<double>()) all.push_back(v);
        for (double v : uniform(shape, -3, 5, gen, dt).to_vector<double>()) all.push_back(v);
      }
      for (double v : dropout(Tensor::ones(shape), 0.25, true, gen).to_vector<double>()) all.push_back(v);
      return all;
    });
  };
  std::vector<double> one = draw(1), two = draw(2);
  REQUIRE(one.size() == two.size());
  REQUIRE(one == two);
}

TEST_CASE("uniforms and normals have the right statistics", "[random]") {
  const int64_t n = 1000000;
  // Bounds are 5 standard errors of each statistic (a true generator fails ~1 in 10^6 runs;
  // with fixed seeds the outcome is fixed anyway).
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    Generator gen(99);
    Moments u = moments(rand({n}, gen, dt).to_vector<double>());
    CHECK(u.lo >= 0.0);
    CHECK(u.hi < 1.0);
    CHECK(std::abs(u.mean - 0.5) < 5 * std::sqrt(1.0 / 12 / n));
    CHECK(std::abs(u.var - 1.0 / 12) < 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
    CHECK(std::abs(u.lag1) < 5 / std::sqrt((double)n));
    // Ten equal bins: each count within 5 sigma of n/10.
    std::vector<double> v = rand({n}, gen, dt).to_vector<double>();
    std::vector<int64_t> bins(10, 0);
    for (double x : v) ++bins[(size_t)(x * 10)];
    for (int64_t b : bins) CHECK(std::abs((double)b - n / 10.0) < 5 * std::sqrt(n * 0.1 * 0.9));

    Moments z = moments(randn({n}, gen, dt).to_vector<double>());
    CHECK(std::isfinite(z.lo));
    CHECK(std::isfinite(z.hi));
    CHECK(std::abs(z.mean) < 5 / std::sqrt((double)n));
    CHECK(std::abs(z.var - 1.0) < 5 * std::sqrt(2.0 / n));
    CHECK(std::abs(z.m4 - 3.0) < 5 * std::sqrt(96.0 / n));  // Gaussian kurtosis
    CHECK(std::abs(z.lag1) < 5 / std::sqrt((double)n));
    CHECK(z.lo < -4.0);  // the tails are there
    CHECK(z.hi > 4.0);

    Moments w = moments(uniform({n}, -2.0, 6.0, gen, dt).to_vector<double>());
    CHECK(w.lo >= -2.0);
    CHECK(w.hi < 6.0);
    CHECK(std::abs(w.mean - 2.0) < 5 * 8 * std::sqrt(1.0 / 12 / n));
    CHECK(std::abs(w.var - 64.0 / 12) < 5 * 64 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
  }
}

TEST_CASE("random factories check their arguments", "[random]") {
  Generator gen(1);
  REQUIRE_THROWS_WITH(rand({2}, gen, DType::i32), Catch::Contains("expected float32 or float64, got int32"));
  REQUIRE_THROWS_WITH(randn({2}, gen, DType::u8), Catch::Contains("randn: expected float32 or float64"));
  REQUIRE_THROWS_WITH(uniform({2}, 1.0, 0.0, gen), Catch::Contains("uniform: expected finite lo <= hi"));
  REQUIRE_THROWS_WITH(uniform({2}, 0.0, INFINITY, gen), Catch::Contains("finite"));
  REQUIRE(gen.offset() == 0);  // failed calls draw nothing
  Tensor empty = rand({0, 3}, gen);
  REQUIRE(empty.shape() == Shape{0, 3});
  REQUIRE(rand({}, gen).numel() == 1);
}

// ---------------------------------------------------------------- dropout

TEST_CASE("dropout keeps about 1-p of the elements and scales them by 1/(1-p)", "[random]") {
  const int64_t n = 200000;
  for (double p : {0.1, 0.5, 0.9}) {
    INFO("p = " << p);
    Generator gen(11);
    Tensor y = dropout(Tensor::ones({n}), p, true, gen);
    REQUIRE(gen.offset() == 1);
    std::vector<float> v = y.to_vector<float>();
    const float scaled = (float)(1.0 / (1.0 - p));
    int64_t kept = 0;
    for (float x : v) {
      REQUIRE((x == 0.f || x == scaled));
      kept += x != 0.f;
    }
    CHECK(std::abs((double)kept / n - (1 - p)) < 5 * std::sqrt(p * (1 - p) / n));
    // The mask is (u >= p) of a float32 uniform draw with the same offset.
    Generator replay(11);
    std::vector<float> u = rand({n}, replay).to_vector<float>();
    for (int64_t i = 0; i < n; ++i) REQUIRE((v[(size_t)i] != 0.f) == (u[(size_t)i] >= (float)p));
  }
  // float64 input: the same elements dropped as float32.
  Generator g32(12), g64(12);
  std::vector<float> m32 = dropout(Tensor::ones({1000}), 0.3, true, g32).to_vector<float>();
  std::vector<double> m64 = dropout(Tensor::ones({1000}, DType::f64), 0.3, true, g64).to_vector<double>();
  for (size_t i = 0; i < m32.size(); ++i) REQUIRE((m32[i] != 0.f) == (m64[i] != 0.0));
}

TEST_CASE("dropout: eval mode, p = 0 and p = 1", "[random]") {
  Generator gen(3);
  Tensor x = ocrt::testing::det_uniform({4, 5}, 1).set_requires_grad();
  REQUIRE(dropout(x, 0.5, false, gen).same(x));
  REQUIRE(dropout(x, 0.0, true, gen).same(x));
  REQUIRE(gen.offset() == 0);

  Tensor y = dropout(x, 1.0, true, gen);
  REQUIRE(y.shape() == x.shape());
  REQUIRE(y.to_vector<double>() == std::vector<double>(20, 0.0));
  y.backward(Tensor::ones({4, 5}, DType::f64));
  REQUIRE(x.grad().defined());
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>(20, 0.0));
}

TEST_CASE("dropout: the gradient is mask / (1 - p)", "[random]") {
  Generator gen(21);
  Tensor x = ocrt::testing::det_uniform({50, 40}, 2, 0.5, 1.5).set_requires_grad();
  const double p = 0.4;
  Tensor y = dropout(x, p, true, gen);
  Tensor g = ocrt::testing::det_uniform({50, 40}, 3);
  y.backward(g);
  std::vector<double> xv = x.detach().to_vector<double>(), yv = y.detach().to_vector<double>();
  std::vector<double> gv = g.to_vector<double>(), dx = x.grad().to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) {
    double mask = yv[i] != 0.0 ? 1.0 : 0.0;  // x is never 0, so y != 0 exactly where kept
    REQUIRE(dx[i] == gv[i] * (mask * (1.0 / (1.0 - p))));
    REQUIRE(yv[i] == xv[i] * (mask * (1.0 / (1.0 - p))));
  }
  // And through the numeric check, with the generator rewound for every evaluation.
  ocrt::testing::check_gradients(
      "dropout",
      [](const std::vector<Tensor>& in) {
        Generator fixed(5);
        return dropout(in[0], 0.3, true, fixed);
      },
      {ocrt::testing::det_uniform({6, 7}, 4)});
}

TEST_CASE("dropout rejects p outside [0, 1]", "[random]") {
  Generator gen(0);
  Tensor x = Tensor::ones({3});
  REQUIRE_THROWS_WITH(dropout(x, -0.1, true, gen), Catch::Contains("dropout: probability p must be in [0, 1], got -0.1"));
  REQUIRE_THROWS_WITH(dropout(x, 1.5, true, gen), Catch::Contains("must be in [0, 1]"));
  REQUIRE_THROWS_WITH(dropout(x, NAN, true, gen), Catch::Contains("must be in [0, 1]"));
  REQUIRE_THROWS_WITH(dropout(x, 1.5, false, gen), Catch::Contains("must be in [0, 1]"));  // checked in eval too
  REQUIRE_THROWS_WITH(dropout(Tensor::ones({3}, DType::i64), 0.5, true, gen), Catch::Contains("expected a float tensor"));
}
