// ocrt's float32 GEMM kernel for the avx512 path (and the float32 products of the avx512bf16 and
// amx paths): 32 zmm registers of 16 floats, two FMA pipes (Zen 5). Compiled for AVX-512 inside
// this file only (the pragma below), so any x86-64 build has it; runtime/cpu/gemm.cpp calls it only
// on CPUs that have AVX-512.
#include "runtime/cpu/gemm_kernels.h"

#if defined(OCRT_CPU_SGEMM)

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "runtime/bf16.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")

namespace ocrt::cpu::detail {
namespace avx512 {

// Tile 14 x 32 in 28 of the 32 registers. Per step of k: two loads of B (32 floats) and 14
// broadcasts of A for 28 FMAs: the two FMA pipes stay busy while the loads (16 per 28 FMAs) fit
// in the load ports; taller tiles would run out of registers. Called in a loop on L1-resident
// panels it runs at 215-227 GFLOP/s on one Zen 5 core, close to the 2 x 16-wide FMA peak.
using Vec = __m512;
constexpr int64_t kLanes = 16;
inline Vec vzero() { return _mm512_setzero_ps(); }
inline Vec vload(const float* p) { return _mm512_load_ps(p); }  // packed panels: 64-byte aligned
inline Vec vloadu(const float* p) { return _mm512_loadu_ps(p); }
inline void vstoreu(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline Vec vbroadcast(const float* p) { return _mm512_set1_ps(*p); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Vec vadd(Vec a, Vec b) { return _mm512_add_ps(a, b); }

constexpr int64_t kMR = 14, kNR = 32;
// The three block sizes, tuned on the project's 2-vCPU Zen 5 machine (L1d 48 KiB, L2 1 MiB per
// core, L3 32 MiB shared; bench/results/core.md has the measurements):
// KC: the depth of one rank-KC update. C is read and written once per KC block, so a long KC
// amortises the C tile's loads and stores (and their cache misses: rows of C are far apart)
// over more FMAs. The textbook choice, a B micro-panel (KC x NR) small enough to stay in L1
// (KC ~ 256), measured 15-20% slower on 2 threads than KC = 1024: the L2 streams the B micro-panel
// (128 bytes per k step, one step per 14 cycles) with room to spare.
constexpr int64_t kKC = 1024;
// MC: rows of A packed at once (a multiple of MR). MC x KC floats = 504 KiB, half of the L2, so
// the block stays there while every B micro-panel of the NC block passes through.
constexpr int64_t kMC = 9 * kMR;
// NC: columns of B packed at once (a multiple of NR). KC x NC floats = 8 MiB lives in the L3 and
// is shared by the threads; 4096 measured no faster.
constexpr int64_t kNC = 2048;

#include "runtime/cpu/transpose16.inc"

// mr <= 16 rows of A whose values are contiguous along k (row i at a + i * rs) into an MR-row
// panel, out[k * MR + i], rows mr .. MR zero: 16 values of each row at a time, transposed in
// registers. One scalar store a value instead took a third of the GEMM's time in svtr-lite's
// training step on the Xeon with AMX (its products have many short rows of A).
template <int64_t MR>
bool pack_a_rows(int64_t mr, int64_t kc, const float* a, int64_t rs, float* out) {
  static_assert(MR <= 16, "a panel column is one register");
  const __mmask16 column = (__mmask16)((1u << MR) - 1);
  for (int64_t k0 = 0; k0 < kc; k0 += 16) {
    const int64_t n = std::min<int64_t>(16, kc - k0);
    const __mmask16 along = (__mmask16)((1u << n) - 1);
    __m512i r[16];
    for (int64_t i = 0; i < 16; ++i)
      r[i] = i < mr ? _mm512_castps_si512(_mm512_maskz_loadu_ps(along, a + i * rs + k0)) : _mm512_setzero_si512();
    transpose16(r);  // r[j] = value k0 + j of every row
    for (int64_t j = 0; j < n; ++j) _mm512_mask_storeu_ps(out + (k0 + j) * MR, column, _mm512_castsi512_ps(r[j]));
  }
  return true;
}

#define OCRT_GEMM_F32_KERNEL 1
#include "runtime/cpu/gemm_loops.inc"
#undef OCRT_GEMM_F32_KERNEL

}  // namespace avx512

GemmKernel avx512_f32() { return avx512::entry<avx512::F32Kernel<false>>(); }
GemmKernel avx512_bf16_rounded() { return avx512::entry<avx512::F32Kernel<true>>(); }

}  // namespace ocrt::cpu::detail

#pragma GCC pop_options

#endif  // OCRT_CPU_SGEMM
