// bfloat16: the upper half of a float32 (sign, the same 8-bit exponent, 7 fraction bits), so a
// bf16 holds the range of float32 with 8 significant bits (unit roundoff 2^-8). A float32 becomes
// a bf16 by rounding its lower 16 bits away; a bf16 becomes a float32 exactly, by appending 16
// zero bits. The product of two bf16 values has at most 16 significant bits and is therefore
// exact in float32, which is why bf16 matrix products accumulate in float32 (runtime/cpu/gemm.h).
//
// These are the reference conversions, written to give the same bits as the x86 instructions
// that the bf16 kernels use (vcvtneps2bf16, vcvtne2ps2bf16):
//   - round to nearest, ties to even;
//   - denormal inputs become a zero of the same sign (the instructions treat them as zero);
//   - a NaN stays a NaN (quiet, sign kept); infinities stay infinite; values that round past
//     the largest bf16 become infinite, as float32 rounding does.
// tests/runtime/test_bf16.cpp checks the hardware against these on every exponent where the CPU
// has the instructions.
#pragma once

#include <cstdint>
#include <cstring>

namespace ocrt {

// The bf16 bit pattern nearest to x (rules above).
inline uint16_t bf16_from_float(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);  // NaN: keep it, make it quiet
  if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);   // zero or denormal: signed zero
  u += 0x7fffu + ((u >> 16) & 1u);                                       // round half to even
  return (uint16_t)(u >> 16);
}

// The float32 value of a bf16 bit pattern (exact).
inline float bf16_to_float(uint16_t h) {
  const uint32_t u = (uint32_t)h << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// x rounded to the nearest bf16, as a float32.
inline float round_to_bf16(float x) { return bf16_to_float(bf16_from_float(x)); }

// Two bf16 values packed the way vdpbf16ps and AMX read a pair along the reduction dimension:
// the first (even k) in the low half, the second (odd k) in the high half.
inline uint32_t bf16_pair(float even, float odd) {
  return (uint32_t)bf16_from_float(even) | ((uint32_t)bf16_from_float(odd) << 16);
}

}  // namespace ocrt
