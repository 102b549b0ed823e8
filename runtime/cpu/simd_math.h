// Activation functions on 8 float32 lanes (AVX2 + FMA), for kernels whose scalar std::exp and
// std::tanh would dominate (the LSTM cell: they were about 8% of CRNN inference). Included only
// by kernel files. Compiled for AVX2 and FMA inside these functions only (OCRT_TARGET_AVX2,
// runtime/cpu_isa.h), in any x86-64 build, so that a build for the baseline x86-64
// (OCRT_NATIVE=OFF) has them too: callers mark their own functions OCRT_TARGET_AVX2 and call them
// only where cpu_isa() is avx2 or better. OCRT_SIMD_MATH says they exist. The normal CDF (GELU)
// also has scalar float functions, in every build, which compute what its 8 lanes compute.
#pragma once

#include <cmath>

#include "runtime/cpu_isa.h"

namespace ocrt::simd {

// The standard normal distribution, for GELU (x Phi(x)) and its derivative (Phi(x) + x phi(x)).
// erfc(z) for z >= 0 by the Chebyshev fit of Numerical Recipes (erfcc: fractional error below
// 1.2e-7 for every z >= 0, so the tail of Phi keeps its relative accuracy, unlike 1 + erf(x)):
//   erfc(z) = t exp(-z^2 + c0 + t (c1 + t (c2 + ... + t c9))),  t = 1 / (1 + z/2).
// Then Phi(x) = erfc(|x|/sqrt2)/2 for x < 0 and 1 - erfc(|x|/sqrt2)/2 for x >= 0. The scalar
// functions compute the same in the same order (std::exp for exp8), for the tails of loops and
// for CPUs without AVX2; float32 only (float64 keeps std::erf: gradient checks).
struct NormalCdfCoefficients {
  static constexpr float c[10] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                                  0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
};
constexpr float kInvSqrt2f = 0.70710678118654752f;
constexpr float kInvSqrt2Pif = 0.39894228040143268f;

// phi_out (if not null) gets phi(x) = exp(-x^2/2) / sqrt(2 pi).
inline float normal_cdf(float x, float* phi_out = nullptr) {
  const float z = std::fabs(x) * kInvSqrt2f;
  const float t = 1.0f / (1.0f + 0.5f * z);
  const float* c = NormalCdfCoefficients::c;
  float p = c[9];
  for (int i = 8; i >= 1; --i) p = std::fma(p, t, c[i]);
  const float e = std::exp(-z * z);  // also phi's
  const float half_erfc = 0.5f * t * e * std::exp(std::fma(p, t, c[0]));
  if (phi_out) *phi_out = e * kInvSqrt2Pif;
  return x < 0 ? half_erfc : 1.0f - half_erfc;  // NaN: 1 - NaN
}

inline float gelu_erf(float x) { return x * normal_cdf(x); }
inline float gelu_erf_derivative(float x) {
  float phi;
  const float cdf = normal_cdf(x, &phi);
  return std::fma(x, phi, cdf);
}

}  // namespace ocrt::simd

#if defined(OCRT_TARGET_ATTRS)
#include <immintrin.h>
#define OCRT_SIMD_MATH 1

namespace ocrt::simd {

// Accuracy, checked by tests/ops/test_lstm.cpp against float64: sigmoid within 2e-7 absolute,
// tanh within 2e-7 relative. NaN propagates: every clamp takes the constant as its first operand,
// and _mm256_min_ps/_mm256_max_ps return the second one when either is NaN.

// exp(x): x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact n ln2), exp(r) by a
// degree-6 polynomial (the classic Cephes expf coefficients), 2^n built in the exponent bits.
// x is clamped to [-87.3, 88.3], where 2^n stays a normal float. The constants, shared by the
// 8- and 16-lane functions:
struct ExpConstants {
  static constexpr float lo = -87.3f, hi = 88.3f, log2e = 1.44269504088896341f;
  static constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  static constexpr float p[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
};
// tanh: for |x| < small_limit, x + x^3 P(x^2) (a degree-4 P fitted here for relative error, 8e-8
// on that interval); beyond, 1 - 2 / (exp(2|x|) + 1) with x's sign, where no cancellation hurts.
struct TanhConstants {
  static constexpr float small_limit = 0.625f;
  static constexpr float p[5] = {-0.00569194f, 0.02062625f, -0.0537353f, 0.1333138f, -0.3333328f};
};

OCRT_TARGET_AVX2 inline __m256 exp8(__m256 x) {
  using E = ExpConstants;
  x = _mm256_max_ps(_mm256_set1_ps(E::lo), _mm256_min_ps(_mm256_set1_ps(E::hi), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(E::log2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(E::ln2_hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(E::ln2_lo), r);
  __m256 p = _mm256_set1_ps(E::p[0]);
  for (int k = 1; k < 6; ++k) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(E::p[k]));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

OCRT_TARGET_AVX2 inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

OCRT_TARGET_AVX2 inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
  const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(TanhConstants::p[0]);
  for (int k = 1; k < 5; ++k) p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(TanhConstants::p[k]));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(x, z), p, x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp8(_mm256_add_ps(ax, ax));
  const __m256 big = _mm256_or_ps(sign, _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one))));
  // ax < 0.625 is false for NaN, which then takes `big`: NaN as well.
  return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(TanhConstants::small_limit), _CMP_LT_OQ));
}

OCRT_TARGET_AVX2 inline __m256 normal_cdf8(__m256 x, __m256* phi_out = nullptr) {
  const __m256 z = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(kInvSqrt2f));
  const __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.5f), z, _mm256_set1_ps(1.0f)));
  const float* c = NormalCdfCoefficients::c;
  __m256 p = _mm256_set1_ps(c[9]);
  for (int i = 8; i >= 1; --i) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(c[i]));
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(z, z)));
  const __m256 half_erfc = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), t), e),
                                         exp8(_mm256_fmadd_ps(p, t, _mm256_set1_ps(c[0]))));
  if (phi_out) *phi_out = _mm256_mul_ps(e, _mm256_set1_ps(kInvSqrt2Pif));
  const __m256 upper = _mm256_sub_ps(_mm256_set1_ps(1.0f), half_erfc);
  return _mm256_blendv_ps(upper, half_erfc, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}

OCRT_TARGET_AVX2 inline __m256 gelu_erf8(__m256 x) { return _mm256_mul_ps(x, normal_cdf8(x)); }
OCRT_TARGET_AVX2 inline __m256 gelu_erf_derivative8(__m256 x) {
  __m256 phi;
  const __m256 cdf = normal_cdf8(x, &phi);
  return _mm256_fmadd_ps(x, phi, cdf);
}

// The same three on 16 lanes (AVX-512), for the avx512 paths and above: every lane goes through
// the operations of exp8, sigmoid8 and tanh8 in the same order (the same constants above, the same
// rounding to the nearest integer, the same clamps with the constant first, so NaN propagates
// alike), so a lane's result is the 8-lane function's, bit for bit (tests/ops/test_lstm.cpp).
OCRT_TARGET_AVX512 inline __m512 exp16(__m512 x) {
  using E = ExpConstants;
  x = _mm512_max_ps(_mm512_set1_ps(E::lo), _mm512_min_ps(_mm512_set1_ps(E::hi), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(E::log2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(E::ln2_hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(E::ln2_lo), r);
  __m512 p = _mm512_set1_ps(E::p[0]);
  for (int k = 1; k < 6; ++k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(E::p[k]));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

OCRT_TARGET_AVX512 inline __m512 sigmoid16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

OCRT_TARGET_AVX512 inline __m512 tanh16(__m512 x) {
  const __m512 sign = _mm512_and_ps(x, _mm512_set1_ps(-0.0f));
  const __m512 ax = _mm512_andnot_ps(_mm512_set1_ps(-0.0f), x);
  const __m512 z = _mm512_mul_ps(x, x);
  __m512 p = _mm512_set1_ps(TanhConstants::p[0]);
  for (int k = 1; k < 5; ++k) p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(TanhConstants::p[k]));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(x, z), p, x);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp16(_mm512_add_ps(ax, ax));
  const __m512 big = _mm512_or_ps(sign, _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one))));
  // ax < 0.625 is false for NaN, which then keeps `big`: NaN as well.
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(TanhConstants::small_limit), _CMP_LT_OQ), big,
                              small);
}

}  // namespace ocrt::simd

#endif
