// The precision setting of runtime/precision.h: names, the CPU's share of each choice, and a
// scope that sets both the CPU's and the GPUs' precision and restores them. (What the GPUs'
// products compute in each precision is checked against error bounds in tests/cuda/.)
#include <catch2/catch.hpp>

#include "runtime/cpu_isa.h"
#include "runtime/precision.h"

using namespace ocrt;

TEST_CASE("precision names parse back, and anything else is refused with the choices", "[precision]") {
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16}) CHECK(parse_precision(precision_name(p)) == p);
  CHECK_THROWS_WITH(parse_precision("fp16"), Catch::Contains("'fp16'") && Catch::Contains("fp32, tf32 or bf16"));
  CHECK_THROWS(parse_precision("BF16"));
  CHECK_THROWS(parse_precision(""));
  // CPUs have no TF32: its CPU share is float32.
  CHECK(cpu_precision_for(Precision::fp32) == cpu::MatmulPrecision::f32);
  CHECK(cpu_precision_for(Precision::tf32) == cpu::MatmulPrecision::f32);
  CHECK(cpu_precision_for(Precision::bf16) == cpu::MatmulPrecision::bf16);
}

TEST_CASE("PrecisionScope sets the CPU's and the GPUs' precision and restores both", "[precision]") {
  REQUIRE(gpu_precision() == Precision::fp32);  // the process-wide default
  REQUIRE(cpu::matmul_precision() == cpu::MatmulPrecision::f32);
  {
    const PrecisionScope tf32(Precision::tf32);
    CHECK(gpu_precision() == Precision::tf32);
    CHECK(cpu::matmul_precision() == cpu::MatmulPrecision::f32);
    if (cpu_isa() != CpuIsa::generic) {
      const PrecisionScope bf16(Precision::bf16);
      CHECK(gpu_precision() == Precision::bf16);
      CHECK(cpu::matmul_precision() == cpu::MatmulPrecision::bf16);
    } else {
      CHECK_THROWS_WITH(PrecisionScope(Precision::bf16), Catch::Contains("AVX2"));
    }
    CHECK(gpu_precision() == Precision::tf32);
    CHECK(cpu::matmul_precision() == cpu::MatmulPrecision::f32);
  }
  CHECK(gpu_precision() == Precision::fp32);
  CHECK(cpu::matmul_precision() == cpu::MatmulPrecision::f32);
}
