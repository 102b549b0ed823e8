// Packed float32 GEMM with an AVX-512 or an AVX2 + FMA micro-kernel, in the style of BLIS (Van
// Zee & van de Geijn, "BLIS: A Framework for Rapidly Instantiating BLAS Functionality", 2015) and
// GotoBLAS (Goto & van de Geijn, "Anatomy of High-Performance Matrix Multiplication", 2008).
//
// Why ocrt has its own: Eigen 3.4's kernels keep too few of the vector registers as accumulators.
// Its AVX-512 kernel reaches about 70% of a hand-written one on the project's Zen 5 machines, its
// AVX2 kernel about 60% of OpenBLAS's on the Zen 3 ones (bench/results/core.md has the figures).
//
// C = A @ B is computed as a sum of small outer products. Five loops cut the work so that each
// operand is read from the cache level it fits in:
//
//   for jc over N in steps of NC            B block (KC x NC), shared by all threads: L3
//     for pc over K in steps of KC          pack B[pc:pc+KC, jc:jc+NC] into NR-column panels
//       for ic over this thread's rows, MC  pack A[ic:ic+MC, pc:pc+KC] into MR-row panels: L2
//         for jr over the block's NR panels B micro-panel (KC x NR): L2/L1, reused over ir
//           for ir over the block's MR panels
//             micro-kernel: C[MR x NR] += A panel (MR x KC) @ B panel (KC x NR)
//
// Packing copies a block into the exact order the micro-kernel reads it (A: MR values of one
// column after another; B: NR values of one row after another), so the kernel only ever streams
// through contiguous memory, whatever the strides of the operands; edges are padded with zeros.
//
// The micro-kernel keeps an MR x NR tile of C in vector registers. Per step of k it loads the
// NR values of B's row (NV vectors), broadcasts the MR values of A's column one at a time, and
// does MR x NV FMAs. The tile shape is the one thing that differs between the instruction sets
// (with the block sizes that follow from it); both are set in the block below, the rest of the
// file is shared.
//
// Threads split the rows of C (whole MR panels), and each packs its own A blocks; the packed B
// block is packed by all threads together and then read by all, so B is packed once per product,
// not once per thread. Two barriers per (jc, pc) block are the only synchronisation.
#include "ops/cpu/gemm.h"

#if defined(OCRT_CPU_SGEMM)

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace ocrt::cpu {

namespace {

#if defined(__AVX512F__)

// AVX-512: 32 zmm registers of 16 floats, two FMA pipes (Zen 5).
//
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

constexpr int64_t MR = 14, NR = 32;
// The three block sizes, tuned on the project's 2-vCPU Zen 5 machine (L1d 48 KiB, L2 1 MiB per
// core, L3 32 MiB shared; bench/results/core.md has the measurements):
// KC: the depth of one rank-KC update. C is read and written once per KC block, so a long KC
// amortises the C tile's loads and stores (and their cache misses: rows of C are far apart)
// over more FMAs. The textbook choice, a B micro-panel (KC x NR) small enough to stay in L1
// (KC ~ 256), measured 15-20% slower on 2 threads than KC = 1024: the L2 streams the B micro-panel
// (128 bytes per k step, one step per 14 cycles) with room to spare.
constexpr int64_t KC = 1024;
// MC: rows of A packed at once (a multiple of MR). MC x KC floats = 504 KiB, half of the L2, so
// the block stays there while every B micro-panel of the NC block passes through.
constexpr int64_t MC = 9 * MR;
// NC: columns of B packed at once (a multiple of NR). KC x NC floats = 8 MiB lives in the L3 and
// is shared by the threads; 4096 measured no faster.
constexpr int64_t NC = 2048;

#else  // AVX2 + FMA

// AVX2 + FMA: 16 ymm registers of 8 floats, two FMA pipes with a 4-cycle latency (Zen 3).
//
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

constexpr int64_t MR = 6, NR = 16;
// Block sizes for the 2-vCPU Zen 3 VM (L1d 32 KiB, L2 512 KiB per core, L3 32 MiB shared), by
// the same reasoning as for AVX-512 above:
// KC: a long KC amortises the C tile's loads and stores. The B micro-panel (KC x NR, 32 KiB at
// 512) then no longer stays in L1 beside the A panels, but the L2 supplies its 64 bytes per k
// step (one step per 6 cycles) easily. KC 256-1024, MC 60-240 and NC 1024-4096 measured the same
// within the noise of a busy machine; these follow from the cache sizes.
constexpr int64_t KC = 512;
// MC: MC x KC floats = 240 KiB, half of the L2.
constexpr int64_t MC = 20 * MR;
// NC: KC x NC floats = 4 MiB in the L3, shared by the threads.
constexpr int64_t NC = 2048;

#endif

constexpr int64_t NV = NR / kLanes;  // vectors per row of the tile
static_assert(NR % kLanes == 0 && MC % MR == 0 && NC % NR == 0, "blocks must hold whole tiles");

// Below this many multiply-adds a product runs on one thread (starting threads would cost more).
constexpr double kParallelWork = 1 << 20;

// A grow-only, 64-byte aligned scratch buffer per thread and purpose: packing buffers are
// reused from call to call instead of faulting in fresh pages every time.
float* scratch(int slot, int64_t floats) {
  struct Buffer {
    std::unique_ptr<float, decltype(&std::free)> p{nullptr, &std::free};
    int64_t size = 0;
  };
  thread_local Buffer buffers[2];
  Buffer& b = buffers[slot];
  if (b.size < floats) {
    const int64_t bytes = (floats * (int64_t)sizeof(float) + 63) / 64 * 64;
    b.p.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    b.size = floats;
  }
  return b.p.get();
}

// C tile (MR x NR, row stride ldc) = (accumulate ? C : 0) + a @ b, where a is a packed A
// micro-panel (kc columns of MR values) and b a packed B micro-panel (kc rows of NR values).
void micro_kernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  Vec acc[MR][NV];  // the tile, row by row; fully unrolled loops keep it in registers
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = vzero();
  for (int i = 0; i < MR; ++i) {  // the C tile is needed only after the loop: fetch it meanwhile
    _mm_prefetch((const char*)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char*)(c + i * ldc + NR - 1), _MM_HINT_T0);
  }
  for (int64_t k = 0; k < kc; ++k, a += MR, b += NR) {
    Vec bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = vload(b + v * kLanes);
    for (int i = 0; i < MR; ++i) {
      const Vec ai = vbroadcast(a + i);
      for (int v = 0; v < NV; ++v) acc[i][v] = vfma(ai, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
    for (int v = 0; v < NV; ++v) {
      if (accumulate) acc[i][v] = vadd(vloadu(row + v * kLanes), acc[i][v]);
      vstoreu(row + v * kLanes, acc[i][v]);
    }
  }
}

// A partial tile (mr <= MR rows, nr <= NR columns) at the bottom or right edge of C: the kernel
// writes a full tile into a scratch tile, and the valid part is added to C with the same
// operation order as the kernel's own accumulate, so results do not depend on where tiles fall.
void edge_tile(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate, int64_t mr,
               int64_t nr) {
  alignas(64) float tile[MR * NR];
  micro_kernel(kc, a, b, tile, NR, false);
  for (int64_t i = 0; i < mr; ++i)
    for (int64_t j = 0; j < nr; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + tile[i * NR + j] : tile[i * NR + j];
}

// Packs the mc x kc block of A at `a` (element (i,k) at a[i * rs + k * cs]) into MR-row panels,
// each kc columns of MR values; rows past mc are zero.
void pack_a(int64_t mc, int64_t kc, const float* a, int64_t rs, int64_t cs, float* out) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR, out += MR * kc) {
    const int64_t mr = std::min(MR, mc - i0);
    for (int64_t i = 0; i < mr; ++i) {  // row by row: contiguous reads when A's rows are contiguous
      const float* src = a + (i0 + i) * rs;
      for (int64_t k = 0; k < kc; ++k) out[k * MR + i] = src[k * cs];
    }
    for (int64_t i = mr; i < MR; ++i)
      for (int64_t k = 0; k < kc; ++k) out[k * MR + i] = 0;
  }
}

// Packs NR-column panel `p` of the kc x nc block of B at `b` (element (k,j) at b[k * rs + j * cs])
// as kc rows of NR values; columns past nc are zero.
void pack_b_panel(int64_t p, int64_t kc, int64_t nc, const float* b, int64_t rs, int64_t cs, float* out) {
  const int64_t j0 = p * NR, nr = std::min(NR, nc - j0);
  out += p * NR * kc;
  b += j0 * cs;
  for (int64_t k = 0; k < kc; ++k, out += NR) {
    const float* src = b + k * rs;
    if (cs == 1 && nr == NR) {
      std::memcpy(out, src, NR * sizeof(float));
    } else {
      for (int64_t j = 0; j < nr; ++j) out[j] = src[j * cs];
      for (int64_t j = nr; j < NR; ++j) out[j] = 0;
    }
  }
}

}  // namespace

SgemmBlocking sgemm_blocking() { return {MR, NR, KC, MC, NC}; }

void sgemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda_row, int64_t lda_col, const float* B,
           int64_t ldb_row, int64_t ldb_col, float* C, int64_t ldc, bool accumulate_c) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (accumulate_c) return;
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.f);
    return;
  }
  const int64_t m_panels = (M + MR - 1) / MR;
  int threads = 1;
  if (!omp_in_parallel() && (double)M * N * K >= kParallelWork)
    threads = (int)std::min<int64_t>(omp_get_max_threads(), m_panels);

  // The packed B block, shared: allocated by the calling thread before the region starts.
  const int64_t nc_max = std::min(NC, (N + NR - 1) / NR * NR), kc_max = std::min(KC, K);
  float* b_packed = scratch(1, kc_max * nc_max);

#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    // This thread's rows: a contiguous run of whole MR panels.
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t m_lo = std::min(M, t * m_panels / nt * MR), m_hi = std::min(M, (t + 1) * m_panels / nt * MR);
    float* a_packed = scratch(0, MC * kc_max);

    for (int64_t jc = 0; jc < N; jc += NC) {
      const int64_t nc = std::min(NC, N - jc), n_panels = (nc + NR - 1) / NR;
      for (int64_t pc = 0; pc < K; pc += KC) {
        const int64_t kc = std::min(KC, K - pc);
        const bool accumulate = pc > 0 || accumulate_c;  // else the first rank-kc update overwrites C
        // All threads pack the B block together; the loop's implicit barrier publishes it.
#pragma omp for schedule(static)
        for (int64_t p = 0; p < n_panels; ++p)
          pack_b_panel(p, kc, nc, B + pc * ldb_row + jc * ldb_col, ldb_row, ldb_col, b_packed);

        for (int64_t ic = m_lo; ic < m_hi; ic += MC) {
          const int64_t mc = std::min(MC, m_hi - ic);
          pack_a(mc, kc, A + ic * lda_row + pc * lda_col, lda_row, lda_col, a_packed);
          for (int64_t jr = 0; jr < nc; jr += NR) {
            const int64_t nr = std::min(NR, nc - jr);
            const float* bp = b_packed + jr * kc;
            for (int64_t ir = 0; ir < mc; ir += MR) {
              const int64_t mr = std::min(MR, mc - ir);
              float* c = C + (ic + ir) * ldc + jc + jr;
              if (mr == MR && nr == NR)
                micro_kernel(kc, a_packed + ir * kc, bp, c, ldc, accumulate);
              else
                edge_tile(kc, a_packed + ir * kc, bp, c, ldc, accumulate, mr, nr);
            }
          }
        }
        // No thread may repack B while another still reads it.
#pragma omp barrier
      }
    }
  }
}

}  // namespace ocrt::cpu

#endif  // OCRT_CPU_SGEMM
