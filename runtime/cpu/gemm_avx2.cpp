// ocrt's GEMM kernels for the avx2 path: AVX2 + FMA, 16 ymm registers of 8 floats, two FMA pipes
// with a 4-cycle latency (Zen 3). Compiled for AVX2 + FMA inside this file only (the pragma
// below), so any x86-64 build has them; runtime/cpu/gemm.cpp calls them only on CPUs that have both.
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
#pragma GCC target("avx2,fma")

namespace ocrt::cpu::detail {
namespace avx2 {

// Tile 6 x 16 in 12 of the 16 registers, the other 4 for the two B vectors and the broadcast
// A value. Per step of k: 2 loads of B and 6 broadcasts of A (all plain loads on Zen 3) for 12
// FMAs. 12 independent accumulators cover the 2 pipes x 4 cycles of FMA latency with room to
// spare, and the 8 loads per 6 cycles of FMAs stay under the 2 loads per cycle the core does.
// Other shapes that fit in 16 registers measured slower on one Zen 3 core (bench/results/core.md):
// 4 x 24 and 3 x 32 (12 FMAs on 3 B loads + 4 broadcasts, or 4 + 3, and a wider B panel whose
// right edge is more often partial) by 15-30%, 8 x 8 (8 accumulators) at a third. On 2 threads
// the whole GEMM runs at 130-160 GFLOP/s on CRNN's conv shapes, 1.2-1.9x Eigen's AVX2 kernel.
using Vec = __m256;
constexpr int64_t kLanes = 8;
inline Vec vzero() { return _mm256_setzero_ps(); }
inline Vec vload(const float* p) { return _mm256_load_ps(p); }  // packed panels: 32-byte aligned
inline Vec vloadu(const float* p) { return _mm256_loadu_ps(p); }
inline void vstoreu(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec vbroadcast(const float* p) { return _mm256_broadcast_ss(p); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Vec vadd(Vec a, Vec b) { return _mm256_add_ps(a, b); }

constexpr int64_t kMR = 6, kNR = 16;
// Block sizes for the 2-vCPU Zen 3 VM (L1d 32 KiB, L2 512 KiB per core, L3 32 MiB shared), by
// the reasoning of the avx512 kernel (runtime/cpu/gemm_avx512.cpp):
// KC: a long KC amortises the C tile's loads and stores. The B micro-panel (KC x NR, 32 KiB at
// 512) then no longer stays in L1 beside the A panels, but the L2 supplies its 64 bytes per k
// step (one step per 6 cycles) easily. KC 256-1024, MC 60-240 and NC 1024-4096 measured the same
// within the noise of a busy machine; these follow from the cache sizes.
constexpr int64_t kKC = 512;
// MC: MC x KC floats = 240 KiB, half of the L2.
constexpr int64_t kMC = 20 * kMR;
// NC: KC x NC floats = 4 MiB in the L3, shared by the threads.
constexpr int64_t kNC = 2048;

#include "runtime/cpu/transpose8.inc"

// mr <= MR (6) rows of A whose values are contiguous along k (row i at a + i * rs) into an
// MR-row panel, out[k * MR + i], rows mr .. MR zero: 8 values of each row at a time, transposed
// in registers. Column k of the panel is then 6 of a register's 8 lanes; the panel's 8 columns
// of a step are 48 consecutive floats, so each column is stored whole (8 lanes) and the next
// column's store overwrites the two extra lanes, and the last column's six are copied. Against
// one scalar store a value (the plain loop of gemm_loops.inc), alternating in one process on 2
// Zen 3 cores (best of 40): 8192 x 64 x 64 (svtr-lite's first stage) 120 -> 135 GFLOP/s,
// 4096 x 128 x 128 134 -> 144; products with K of 256 and more the same within the noise.
template <int64_t MR>
bool pack_a_rows(int64_t mr, int64_t kc, const float* a, int64_t rs, float* out) {
  static_assert(MR <= 8, "a panel column is one register");
  const int64_t k8 = kc / 8 * 8;
  for (int64_t k0 = 0; k0 < k8; k0 += 8) {
    __m256 r[8];
    for (int64_t i = 0; i < 8; ++i) r[i] = i < mr ? _mm256_loadu_ps(a + i * rs + k0) : _mm256_setzero_ps();
    transpose8(r);
    float* o = out + k0 * MR;
    for (int64_t j = 0; j < 7; ++j) _mm256_storeu_ps(o + j * MR, r[j]);
    float last[8];
    _mm256_storeu_ps(last, r[7]);
    for (int64_t i = 0; i < MR; ++i) o[7 * MR + i] = last[i];
  }
  for (int64_t k = k8; k < kc; ++k)
    for (int64_t i = 0; i < MR; ++i) out[k * MR + i] = i < mr ? a[i * rs + k] : 0.f;
  return true;
}

#define OCRT_GEMM_F32_KERNEL 1
#include "runtime/cpu/gemm_loops.inc"
#undef OCRT_GEMM_F32_KERNEL

}  // namespace avx2

GemmKernel avx2_f32() { return avx2::entry<avx2::F32Kernel<false>>(); }
GemmKernel avx2_bf16_rounded() { return avx2::entry<avx2::F32Kernel<true>>(); }

}  // namespace ocrt::cpu::detail

#pragma GCC pop_options

#endif  // OCRT_CPU_SGEMM
