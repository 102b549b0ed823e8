// Activation functions on 8 float32 lanes (AVX2 + FMA), for kernels whose scalar std::exp and
// std::tanh would dominate (the LSTM cell: they were about 8% of CRNN inference). Included only
// by kernel files. Compiled for AVX2 and FMA inside these functions only (OCRT_TARGET_AVX2,
// runtime/cpu_isa.h), in any x86-64 build, so that a build for the baseline x86-64
// (OCRT_NATIVE=OFF) has them too: callers mark their own functions OCRT_TARGET_AVX2 and call them
// only where cpu_isa() is avx2 or better. OCRT_SIMD_MATH says they exist.
#pragma once

#include "runtime/cpu_isa.h"

#if defined(OCRT_TARGET_ATTRS)
#include <immintrin.h>
#define OCRT_SIMD_MATH 1

namespace ocrt::simd {

// Accuracy, checked by tests/ops/test_lstm.cpp against float64: sigmoid within 2e-7 absolute,
// tanh within 2e-7 relative. NaN propagates: every clamp takes the constant as its first operand,
// and _mm256_min_ps/_mm256_max_ps return the second one when either is NaN.

// exp(x): x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact n ln2), exp(r) by a
// degree-6 polynomial (the classic Cephes expf coefficients), 2^n built in the exponent bits.
// x is clamped to [-87.3, 88.3], where 2^n stays a normal float.
OCRT_TARGET_AVX2 inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-87.3f), _mm256_min_ps(_mm256_set1_ps(88.3f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

OCRT_TARGET_AVX2 inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// tanh: for |x| < 0.625, x + x^3 P(x^2) (a degree-4 P fitted here for relative error, 8e-8 on
// that interval); beyond, 1 - 2 / (exp(2|x|) + 1) with x's sign, where no cancellation hurts.
OCRT_TARGET_AVX2 inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
  const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-0.00569194f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(0.02062625f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-0.0537353f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(0.1333138f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-0.3333328f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(x, z), p, x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp8(_mm256_add_ps(ax, ax));
  const __m256 big = _mm256_or_ps(sign, _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one))));
  // ax < 0.625 is false for NaN, which then takes `big`: NaN as well.
  return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
}

}  // namespace ocrt::simd

#endif
