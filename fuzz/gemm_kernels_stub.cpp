// Fuzz builds only (fuzz/CMakeLists.txt, -DOCRT_FUZZ=ON): stand-ins for the GEMM kernels of
// runtime/cpu/gemm_avx2.cpp, gemm_avx512.cpp, gemm_avx512bf16.cpp and gemm_amx.cpp (the AMX
// tiles of the int8 product and of the bf16 convolutions too: every function gemm_kernels.h
// declares for those files).
//
// Those files compile their kernels for an instruction set with `#pragma GCC target`, which
// clang does not honour, so clang cannot build them; compiling them with -mavx512f instead would
// let AVX-512 copies of shared inline functions into the program, which crash on CPUs without
// it. No parser calls a matrix product, so the fuzz build links these, which stop the program
// if one is ever called.
#include <cstdio>
#include <cstdlib>

#include "runtime/cpu/gemm_kernels.h"

namespace ocrt::cpu::detail {

namespace {
[[noreturn]] void not_in_fuzz_builds(const GemmArgs&) {
  std::fprintf(stderr, "ocrt fuzz build: the CPU GEMM kernels are not built (fuzz/gemm_kernels_stub.cpp)\n");
  std::abort();
}
GemmKernel stub() { return GemmKernel{&not_in_fuzz_builds, SgemmBlocking{}}; }
}  // namespace

GemmKernel avx2_f32() { return stub(); }
GemmKernel avx2_bf16_rounded() { return stub(); }
GemmKernel avx512_f32() { return stub(); }
GemmKernel avx512_bf16_rounded() { return stub(); }
GemmKernel avx512bf16_bf16() { return stub(); }
void avx512bf16_convert(const float*, int64_t, uint16_t*) { not_in_fuzz_builds(GemmArgs{}); }
GemmKernel amx_bf16() { return stub(); }
void amx_configure_tiles() { not_in_fuzz_builds(GemmArgs{}); }
void amx_int8_tiles(const uint8_t*, int64_t, const int8_t*, const int8_t*, int64_t, int32_t*) {
  not_in_fuzz_builds(GemmArgs{});
}
void amx_int8_store(const int32_t*, int64_t, int64_t, int64_t, int64_t, const Int8Epilogue&, float*, int64_t,
                    int64_t) {
  not_in_fuzz_builds(GemmArgs{});
}

void amx_int8_tiles_taps(const uint8_t*, int64_t, const int64_t*, int64_t, int64_t, const int8_t*, const int8_t*,
                         int32_t*) {
  not_in_fuzz_builds(GemmArgs{});
}
void amx_int8_store_mapped(const int32_t*, const int64_t*, int64_t, int64_t, int64_t, const Int8Epilogue&, float*,
                           int64_t, int64_t) {
  not_in_fuzz_builds(GemmArgs{});
}
// The AMX convolutions' tiles and operands (ops/cpu/conv_amx.cpp).
void amx_bf16_image(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t*) {
  not_in_fuzz_builds(GemmArgs{});
}
void amx_bf16_conv_tiles(const uint32_t*, int64_t, const int64_t*, int64_t, int64_t, const uint32_t*,
                         const uint32_t*, float*) {
  not_in_fuzz_builds(GemmArgs{});
}
void amx_f32_store_mapped(const float*, const int64_t*, int64_t, int64_t, const float*, float*, int64_t) {
  not_in_fuzz_builds(GemmArgs{});
}
void amx_bf16_pitched_planes(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                             uint16_t*) {
  not_in_fuzz_builds(GemmArgs{});
}
void amx_bf16_pixel_pairs(const uint16_t*, int64_t, int64_t, int64_t, uint32_t*) { not_in_fuzz_builds(GemmArgs{}); }
void amx_bf16_wgrad_tiles(const uint16_t* const*, const uint32_t* const*, int64_t, int64_t, int64_t, int64_t, float*,
                          bool) {
  not_in_fuzz_builds(GemmArgs{});
}

}  // namespace ocrt::cpu::detail
