// ocrt's bf16 GEMM kernel for the avx512bf16 path (and, until AMX tiles have a kernel of their
// own, the amx path): vdpbf16ps, which multiplies 16 pairs of bf16 values by 16 other pairs and
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

// 32 float32 values at `src` (contiguous) as 16 bf16 pairs in a zmm register.
inline __m512i pairs_of_32(const float* src) {
  return (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src));
}

// n <= 32 contiguous values (zeros after them) as bf16 pairs, stored at out[0 .. (n + 1) / 2).
inline void convert_pairs(const float* src, int64_t n, uint32_t* out) {
  if (n == 32) {
    _mm512_storeu_si512(out, pairs_of_32(src));
    return;
  }
  for (int64_t p = 0; p < (n + 1) / 2; ++p) out[p] = bf16_pair(src[2 * p], 2 * p + 1 < n ? src[2 * p + 1] : 0.f);
}

// Transposes 16 rows of 16 32-bit elements in registers: afterwards r[j] holds what was column j
// (r[j][i] = old r[i][j]). Four rounds: 32-bit and 64-bit interleaves inside each 128-bit lane
// leave u[4b + c], lane L = rows 4b..4b+3 of column 4L + c; two rounds of 128-bit lane shuffles
// then gather each column's four row groups into one register.
inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int a = 0; a < 8; ++a) {
    t[2 * a] = _mm512_unpacklo_epi32(r[2 * a], r[2 * a + 1]);
    t[2 * a + 1] = _mm512_unpackhi_epi32(r[2 * a], r[2 * a + 1]);
  }
  for (int b = 0; b < 4; ++b) {
    u[4 * b + 0] = _mm512_unpacklo_epi64(t[4 * b], t[4 * b + 2]);
    u[4 * b + 1] = _mm512_unpackhi_epi64(t[4 * b], t[4 * b + 2]);
    u[4 * b + 2] = _mm512_unpacklo_epi64(t[4 * b + 1], t[4 * b + 3]);
    u[4 * b + 3] = _mm512_unpackhi_epi64(t[4 * b + 1], t[4 * b + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    // Lanes 0, 1 of the row groups b = 0..3 (columns c and 4 + c), then lanes 2, 3 (8 + c, 12 + c).
    const __m512i v01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), w01 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i v23 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xee), w23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xee);
    r[c] = _mm512_shuffle_i32x4(v01, w01, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(v01, w01, 0xdd);
    r[8 + c] = _mm512_shuffle_i32x4(v23, w23, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(v23, w23, 0xdd);
  }
}

// 16 vectors along K (row i: 32 contiguous values at src + i * stride, as 16 pairs; rows at
// and past `rows` are zero), transposed: r[p] = pair p of each of the 16 vectors.
inline void load_pairs_transposed(const float* src, int64_t stride, int rows, __m512i r[16]) {
  for (int i = 0; i < 16; ++i) r[i] = i < rows ? pairs_of_32(src + i * stride) : _mm512_setzero_si512();
  transpose16(r);
}

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
  // leaves 8 or 2 of 14, and the full tile would cost 14) and masked columns. Each element sees
  // the same sequence of operations as in micro_kernel, so results do not depend on where tiles fall.
  template <int R>
  static void rows_kernel(int64_t d, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate,
                          int64_t nr) {
    __m512 acc[R][NV];
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
    for (int64_t p = 0; p < d; ++p, a += MR, b += NR) {
      __m512bh bv[NV];
      for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + v * 16);
      for (int i = 0; i < R; ++i) {
        const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
      }
    }
    __mmask16 mask[NV];
    for (int v = 0; v < NV; ++v) {
      const int64_t n = std::clamp<int64_t>(nr - v * 16, 0, 16);
      mask[v] = (__mmask16)((1u << n) - 1);
    }
    for (int i = 0; i < R; ++i) {
      float* row = c + i * ldc;
      for (int v = 0; v < NV; ++v) {
        if (accumulate) acc[i][v] = _mm512_add_ps(_mm512_maskz_loadu_ps(mask[v], row + v * 16), acc[i][v]);
        _mm512_mask_storeu_ps(row + v * 16, mask[v], acc[i][v]);
      }
    }
  }
  template <int... Rs>
  static void partial_tile(std::integer_sequence<int, Rs...>, int64_t d, const uint32_t* a, const uint32_t* b,
                           float* c, int64_t ldc, bool accumulate, int64_t mr, int64_t nr) {
    ((mr == Rs + 1 ? rows_kernel<Rs + 1>(d, a, b, c, ldc, accumulate, nr) : void()), ...);
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
    const int64_t j0 = p * NR, nr = std::min(NR, nc - j0), d = depth(kc);
    out += p * NR * d;
    b += j0 * cs;
    if (cs == 1 && nr == NR) {
      // Rows 2kp and 2kp+1, 16 columns at a time: convert both (vcvtne2ps2bf16 puts row 2kp's
      // 16 values in the low 16 words, row 2kp+1's in the high ones), then interleave the words.
      const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                                  22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
      for (int64_t kp = 0; kp < d; ++kp, out += NR) {
        const float* even = b + 2 * kp * rs;
        const bool has_odd = 2 * kp + 1 < kc;
        for (int v = 0; v < NV; ++v) {
          const __m512 lo = _mm512_loadu_ps(even + v * 16);
          const __m512 hi = has_odd ? _mm512_loadu_ps(even + rs + v * 16) : _mm512_setzero_ps();
          const __m512i words = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
          _mm512_store_si512(out + v * 16, _mm512_permutexvar_epi16(interleave, words));
        }
      }
      return;
    }
    if (rs == 1) {
      // B stored transposed (a weight W (N, K) read as W^T): each column is contiguous along K,
      // so its pairs come out of one conversion and are spread NR apart.
      // Whole blocks of 16 columns by 32 values of K: 16 columns' pairs transposed in registers,
      // so that each register is one row of the panel; the rest one column at a time.
      int64_t k_done = 0;
      if (nr == NR) {
        __m512i r[16];
        for (; k_done + 32 <= kc; k_done += 32)
          for (int64_t j16 = 0; j16 < NR; j16 += 16) {
            load_pairs_transposed(b + j16 * cs + k_done, cs, 16, r);
            for (int q = 0; q < 16; ++q) _mm512_store_si512(out + (k_done / 2 + q) * NR + j16, r[q]);
          }
      }
      alignas(64) uint32_t col_pairs[16];
      for (int64_t j = 0; j < nr && k_done < kc; ++j) {
        const float* src = b + j * cs;
        for (int64_t k0 = k_done; k0 < kc; k0 += 32) {
          const int64_t n = std::min<int64_t>(32, kc - k0);
          convert_pairs(src + k0, n, col_pairs);
          for (int64_t q = 0; q < (n + 1) / 2; ++q) out[(k0 / 2 + q) * NR + j] = col_pairs[q];
        }
      }
    } else {
      for (int64_t kp = 0; kp < d; ++kp)
        for (int64_t j = 0; j < nr; ++j)
          out[kp * NR + j] = bf16_pair(b[2 * kp * rs + j * cs], 2 * kp + 1 < kc ? b[(2 * kp + 1) * rs + j * cs] : 0.f);
    }
    for (int64_t kp = 0; kp < d; ++kp)
      for (int64_t j = nr; j < NR; ++j) out[kp * NR + j] = 0;
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
