// ocrt's bf16 GEMM kernel for the avx512bf16 path: vdpbf16ps, which multiplies 16 pairs of bf16 values by 16 other pairs and
// adds each pair's two products to a float32 lane, twice the multiply-adds of a float32 FMA per
// instruction. Compiled for AVX512_BF16 inside this file only (the pragma below), so any x86-64
// build has it; runtime/cpu/gemm.cpp calls it only on CPUs that have the instructions.
//
// The loops and the tile are the float32 avx512 kernel's (runtime/cpu/gemm_avx512.cpp, 14 x 32 in
// 28 zmm registers); what changes is what a packed element is. vdpbf16ps reads pairs along K,
// so the packed panels hold 32-bit pairs (element k even in the low half, k + 1 in the high
// half, runtime/bf16.h's bf16_pair):
//   A panel: for each pair row kp = k / 2, the MR pairs (A[i][2kp], A[i][2kp+1]) of its rows
//   B panel: for each pair row kp, the NR pairs (B[2kp][j], B[2kp+1][j]) of its columns
// and one step of the micro-kernel consumes two values of K: 2 loads of B pairs, 14 broadcasts
// of an A pair, 28 vdpbf16ps. An odd K is padded with a zero.
//
// Packing converts float32 to bf16 (round to nearest even) with vcvtne2ps2bf16, 32 values per
// instruction; the operands stay float32 tensors, so the same weights serve both precisions.
#include "runtime/cpu/gemm_kernels.h"

#if defined(OCRT_CPU_SGEMM)

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "runtime/bf16.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma")

namespace ocrt::cpu::detail {
namespace avx512bf16 {

#include "runtime/cpu/gemm_loops.inc"

#include "runtime/cpu/gemm_bf16_pairs.inc"

struct Bf16PairKernel {
  using Packed = uint32_t;
  static constexpr int64_t MR = 14, NR = 32;
  // Blocks in values of K (half as many packed pairs): the A block MC x KC bf16 = 252 KiB stays
  // in the L2 (1 MiB on Zen 5); KC x NC bf16 = 4 MiB of B in the L3.
  static constexpr int64_t KC = 1024, MC = 9 * MR, NC = 2048;
  static constexpr int64_t NV = NR / 16;

  static int64_t depth(int64_t kc) { return (kc + 1) / 2; }

  // C tile (MR x NR) = (accumulate ? C : 0) + a @ b over d pair steps.
  static void micro_kernel(int64_t d, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate) {
    __m512 acc[MR][NV];
    for (int i = 0; i < MR; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i) {
      _mm_prefetch((const char*)(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch((const char*)(c + i * ldc + NR - 1), _MM_HINT_T0);
    }
    for (int64_t p = 0; p < d; ++p, a += MR, b += NR) {
      __m512bh bv[NV];
      for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + v * 16);
      for (int i = 0; i < MR; ++i) {
        const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
      }
    }
    for (int i = 0; i < MR; ++i) {
      float* row = c + i * ldc;
      for (int v = 0; v < NV; ++v) {
        if (accumulate) acc[i][v] = _mm512_add_ps(_mm512_loadu_ps(row + v * 16), acc[i][v]);
        _mm512_storeu_ps(row + v * 16, acc[i][v]);
      }
    }
  }

  // A partial tile at C's bottom or right edge, mr < MR or nr < NR, written straight into C: the
  // micro-kernel's loop on only the R = mr rows there are (a layer of 64 or 128 output channels
  // leaves 8 or 2 of 14, and the full tile would cost 14) and masked columns; with at most 16
  // columns (V = 1) only the first of the panel's two column vectors is read and multiplied,
  // at half the cost (a Winograd product's last panel: its columns are tiles, 175 or 300 of them
  // for crnn's layers, 15 or 12 past the last whole panel). Each element sees the same sequence
  // of operations as in micro_kernel, so results do not depend on where tiles fall.
  template <int R, int V>
  static void rows_kernel(int64_t d, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate,
                          int64_t nr) {
    static_assert(V >= 1 && V <= NV, "a partial tile reads 1 to NV column vectors");
    __m512 acc[R][V];
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
    for (int64_t p = 0; p < d; ++p, a += MR, b += NR) {
      __m512bh bv[V];
      for (int v = 0; v < V; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + v * 16);
      for (int i = 0; i < R; ++i) {
        const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
        for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
      }
    }
    __mmask16 mask[V];
    for (int v = 0; v < V; ++v) {
      const int64_t n = std::clamp<int64_t>(nr - v * 16, 0, 16);
      mask[v] = (__mmask16)((1u << n) - 1);
    }
    for (int i = 0; i < R; ++i) {
      float* row = c + i * ldc;
      for (int v = 0; v < V; ++v) {
        if (accumulate) acc[i][v] = _mm512_add_ps(_mm512_maskz_loadu_ps(mask[v], row + v * 16), acc[i][v]);
        _mm512_mask_storeu_ps(row + v * 16, mask[v], acc[i][v]);
      }
    }
  }
  template <int... Rs>
  static void partial_tile(std::integer_sequence<int, Rs...>, int64_t d, const uint32_t* a, const uint32_t* b,
                           float* c, int64_t ldc, bool accumulate, int64_t mr, int64_t nr) {
    if (nr <= 16)
      ((mr == Rs + 1 ? rows_kernel<Rs + 1, 1>(d, a, b, c, ldc, accumulate, nr) : void()), ...);
    else
      ((mr == Rs + 1 ? rows_kernel<Rs + 1, NV>(d, a, b, c, ldc, accumulate, nr) : void()), ...);
  }
  static void partial_tile(int64_t d, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate,
                           int64_t mr, int64_t nr) {
    partial_tile(std::make_integer_sequence<int, MR>(), d, a, b, c, ldc, accumulate, mr, nr);
  }

  // The mc x kc block of A (element (i,k) at a[i * rs + k * cs]) into MR-row panels of pairs.
  static void pack_a(int64_t mc, int64_t kc, const float* a, int64_t rs, int64_t cs, uint32_t* out) {
    const int64_t d = depth(kc);
    alignas(64) uint32_t row_pairs[16];
    for (int64_t i0 = 0; i0 < mc; i0 += MR, out += MR * d) {
      const int64_t mr = std::min(MR, mc - i0);
      int64_t k_done = 0;
      if (cs == 1) {
        // Contiguous rows, 32 values of K at a time: each row's 16 pairs in a register, transposed
        // so that a register holds one pair of every row, stored as a row of the panel.
        __m512i r[16];
        for (; k_done + 32 <= kc; k_done += 32) {
          load_pairs_transposed(a + i0 * rs + k_done, rs, (int)mr, r);
          for (int q = 0; q < 16; ++q) _mm512_mask_storeu_epi32(out + (k_done / 2 + q) * MR, (1 << MR) - 1, r[q]);
        }
      }
      for (int64_t i = 0; i < mr && k_done < kc; ++i) {
        const float* src = a + (i0 + i) * rs;
        if (cs == 1) {  // the rest of a contiguous row: converted, then spread MR apart
          for (int64_t k0 = k_done; k0 < kc; k0 += 32) {
            const int64_t n = std::min<int64_t>(32, kc - k0);
            convert_pairs(src + k0, n, row_pairs);
            for (int64_t p = 0; p < (n + 1) / 2; ++p) out[(k0 / 2 + p) * MR + i] = row_pairs[p];
          }
        } else {
          for (int64_t p = 0; p < d; ++p)
            out[p * MR + i] = bf16_pair(src[2 * p * cs], 2 * p + 1 < kc ? src[(2 * p + 1) * cs] : 0.f);
        }
      }
      for (int64_t i = mr; i < MR; ++i)
        for (int64_t p = k_done / 2; p < d; ++p) out[p * MR + i] = 0;  // the transposed part wrote zeros
    }
  }

  // NR-column panel `p` of the kc x nc block of B (element (k,j) at b[k * rs + j * cs]) as d
  // rows of NR pairs; columns past nc are zero.
  static void pack_b_panel(int64_t p, int64_t kc, int64_t nc, const float* b, int64_t rs, int64_t cs,
                           uint32_t* out) {
    const int64_t j0 = p * NR;
    pack_b_pairs<NR>(kc, depth(kc), std::min(NR, nc - j0), b + j0 * cs, rs, cs, out + p * NR * depth(kc));
  }
};

}  // namespace avx512bf16

GemmKernel avx512bf16_bf16() { return avx512bf16::entry<avx512bf16::Bf16PairKernel>(); }

void avx512bf16_convert(const float* src, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i + 32 <= n; i += 32) _mm512_storeu_si512(out + i, avx512bf16::pairs_of_32(src + i));
}

}  // namespace ocrt::cpu::detail

#pragma GCC pop_options

#endif  // OCRT_CPU_SGEMM
