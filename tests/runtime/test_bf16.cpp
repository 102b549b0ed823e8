// bf16 conversions (runtime/bf16.h): rounding to nearest with ties to even, signed zeros for
// denormals, NaN and infinity kept, overflow to infinity; and, where the CPU has AVX512_BF16, the
// same bits as the instruction the bf16 GEMM packs with, for every exponent and sign.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/cpu/gemm_kernels.h"
#include "runtime/bf16.h"
#include "runtime/cpu_isa.h"

namespace {

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

}  // namespace

TEST_CASE("bf16 rounds to nearest, ties to even", "[bf16]") {
  // 1 + 2^-8 lies halfway between bf16's 1 and 1 + 2^-7: the even one (1) wins; just above
  // halfway rounds up; 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  REQUIRE(ocrt::round_to_bf16(1.f + 0x1p-8f) == 1.f);
  REQUIRE(ocrt::round_to_bf16(1.f + 0x1p-8f + 0x1p-20f) == 1.f + 0x1p-7f);
  REQUIRE(ocrt::round_to_bf16(1.f + 3 * 0x1p-8f) == 1.f + 0x1p-6f);
  REQUIRE(ocrt::round_to_bf16(-(1.f + 3 * 0x1p-8f)) == -(1.f + 0x1p-6f));
  // Exactly representable values come back unchanged, and the error is at most half an ulp.
  for (float x : {0.f, 1.f, -2.5f, 0.15625f, 3.0e38f, 1.1754944e-38f}) {
    const float r = ocrt::round_to_bf16(x);
    REQUIRE(ocrt::round_to_bf16(r) == r);
    REQUIRE(std::abs(r - x) <= std::abs(x) * 0x1p-8f);
  }
}

TEST_CASE("bf16 keeps zeros, infinities and NaN, flushes denormals and overflows to infinity", "[bf16]") {
  const float inf = std::numeric_limits<float>::infinity();
  REQUIRE(ocrt::bf16_from_float(0.f) == 0x0000);
  REQUIRE(ocrt::bf16_from_float(-0.f) == 0x8000);
  REQUIRE(ocrt::bf16_from_float(inf) == 0x7f80);
  REQUIRE(ocrt::bf16_from_float(-inf) == 0xff80);
  REQUIRE(std::isnan(ocrt::round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  REQUIRE(std::isnan(ocrt::round_to_bf16(from_bits(0x7f800001u))));  // a NaN whose payload is all low bits
  REQUIRE(std::isnan(ocrt::round_to_bf16(from_bits(0xff80ffffu))));
  REQUIRE(ocrt::bf16_from_float(from_bits(0x00000001u)) == 0x0000);  // the smallest denormal
  REQUIRE(ocrt::bf16_from_float(from_bits(0x807fffffu)) == 0x8000);  // the largest, negative
  REQUIRE(ocrt::round_to_bf16(std::numeric_limits<float>::max()) == inf);
  REQUIRE(ocrt::round_to_bf16(from_bits(0x7f7f7fffu)) == from_bits(0x7f7f0000u));  // just below the tie: stays finite
}

TEST_CASE("bf16 pairs hold the even element in the low half", "[bf16]") {
  REQUIRE(ocrt::bf16_pair(1.f, -2.f) == (0x3f80u | (0xc000u << 16)));
}

#if defined(OCRT_CPU_SGEMM)
TEST_CASE("vcvtne2ps2bf16 gives the reference conversion's bits on every exponent", "[bf16]") {
  if (!ocrt::cpu_isa_supported(ocrt::CpuIsa::avx512bf16)) return;  // no such instruction here
  // Every sign, exponent and top 7 fraction bits (all 65536 bf16 patterns), each with low halves
  // that test the rounding: 0, just below, at and just above the tie, and all ones.
  const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1234, 0xc3a5};
  std::vector<float> src;
  for (uint32_t hi = 0; hi < 0x10000; ++hi)
    for (uint32_t lo : lows) src.push_back(from_bits((hi << 16) | lo));
  std::vector<uint16_t> hw(src.size());
  ocrt::cpu::detail::avx512bf16_convert(src.data(), (int64_t)src.size(), hw.data());
  int64_t bad = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    const uint16_t ref = ocrt::bf16_from_float(src[i]);
    const bool both_nan = std::isnan(ocrt::bf16_to_float(ref)) && std::isnan(ocrt::bf16_to_float(hw[i]));
    if (hw[i] != ref && !both_nan && bad++ < 5) {
      uint32_t u;
      std::memcpy(&u, &src[i], sizeof u);
      FAIL_CHECK("float bits " << std::hex << u << ": instruction " << hw[i] << ", reference " << ref);
    }
  }
  REQUIRE(bad == 0);
}
#endif
