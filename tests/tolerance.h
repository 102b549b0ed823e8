// Tolerances for float32 results from the standard forward-error bounds, not from luck.
//
// A float32 operation rounds its exact result to the nearest float: fl(a op b) = (a op b)(1 + d)
// with |d| <= u = 2^-24 (the unit roundoff). A sum of products computed by a chain of n such
// operations (a dot product of length n, plain or with FMAs, in any order and any blocking)
// then satisfies (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 3.5)
//
//   |fl(s) - s| <= gamma_n * sum |terms|,     gamma_n = n u / (1 - n u).
//
// The bound is reached, up to a small factor, when every term has the same sign and size: a
// broadcast (stride 0) operand makes all K products of a dot product equal, and K = 1025 such
// additions of 0.23 lose 1.3e-5 of the result (tests/runtime/test_gemm.cpp), beyond the 1e-5 that a
// fixed tolerance had allowed. A test that knows n and the sum of absolute terms for each result
// element (the reference run on |inputs|) gets a tolerance that holds on every CPU and kernel.
//
// The safety factor of 2 covers what the model above leaves out: the reference's own error (a
// float64 sum, n 2^-53 relative, then one rounding to float32 when it stores its result, u
// relative) and at most one float32 operation outside the chain (a bias added, a result added
// into an accumulator). For n >= 2 those add less than gamma_n to the bound.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace ocrt::testing {

constexpr double kUnitRoundoff32 = 0x1p-24;  // u of float32, round to nearest
constexpr double kBoundSafety = 2.0;         // see the top of this file

// gamma_n = n u / (1 - n u) for float32.
inline double gamma32(int64_t n) {
  const double nu = (double)n * kUnitRoundoff32;
  REQUIRE(nu < 0.5);  // the bound needs n u < 1; a test never gets near
  return nu / (1 - nu);
}

// The largest error allowed for a float32 result computed by a chain of n rounding operations
// (a reduction of length n) whose terms have absolute values summing to abs_sum.
inline double f32_reduction_tolerance(int64_t n, double abs_sum) { return kBoundSafety * gamma32(n) * abs_sum; }

// The largest error allowed for a bf16 matrix product (runtime/cpu/gemm.h) against the exact product
// of the float32 operands: a product of length n whose terms have absolute values summing to
// abs_sum. Rounding each operand to bf16 (unit roundoff u = 2^-8) changes a term a b by at most
// (2u + u^2) |a b|; the rounded products are exact in float32 and their float32 sum adds
// gamma_n (1 + u)^2 of the sum of their absolute values.
inline double bf16_product_tolerance(int64_t n, double abs_sum) {
  constexpr double u = 0x1p-8;
  return kBoundSafety * ((2 * u + u * u) + gamma32(n) * (1 + u) * (1 + u)) * abs_sum;
}

// Element-wise |got - want| <= tolerance(n, abs_sum) for tensors of one shape (any dtype:
// compared in double). `abs_sum` holds, per element, the sum of the absolute values of its terms:
// the same computation run on |inputs|. Prints the first mismatches.
template <class Tolerance>
void require_within(const Tensor& got, const Tensor& want, const Tensor& abs_sum, int64_t n, Tolerance tolerance,
                    const std::string& what) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(abs_sum.shape() == want.shape());
  const std::vector<double> a = got.to_vector<double>(), e = want.to_vector<double>(), s = abs_sum.to_vector<double>();
  std::ostringstream bad;
  int64_t nbad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = tolerance(n, s[i]);
    if (!(std::abs(a[i] - e[i]) <= tol)) {
      if (nbad < 5) bad << "  element " << i << ": got " << a[i] << ", expected " << e[i] << ", tolerance " << tol << "\n";
      ++nbad;
    }
  }
  INFO(what << ": mismatches (" << nbad << " of " << a.size() << "):\n" << bad.str());
  CHECK(nbad == 0);
}

// A float32 reduction of length n: tolerance 2 gamma_n sum|terms|.
inline void require_within_bound(const Tensor& got, const Tensor& want, const Tensor& abs_sum, int64_t n,
                                 const std::string& what = "") {
  INFO(what << " (float32 reduction of length " << n << ", tolerance 2 gamma_n sum|terms|, tests/tolerance.h)");
  require_within(got, want, abs_sum, n, f32_reduction_tolerance, what);
}

// A bf16 product of length n against the exact product of the float32 operands
// (bf16_product_tolerance).
inline void require_within_bf16_bound(const Tensor& got, const Tensor& want, const Tensor& abs_sum, int64_t n,
                                      const std::string& what = "") {
  INFO(what << " (bf16 product of length " << n << ", tolerance bf16_product_tolerance, tests/tolerance.h)");
  require_within(got, want, abs_sum, n, bf16_product_tolerance, what);
}

}  // namespace ocrt::testing
