// The int8 product of runtime/cpu/int8_gemm.h: packing B, the loops around the kernels, the
// AVX2 and VNNI kernels and the plain reference.
//
// Loops. The weights are packed once, whole (a layer's are at most a few MB). A is never
// copied: the kernels broadcast each row's codes straight from where Int8A's pointers say they
// are (a convolution's image, tap by tap). For each block of kBlockPanels row panels of A (24
// rows of activations), every NR-column panel of B is read once for all of them, so B streams
// from the L2 or L3 a quarter as often as it would panel by panel. The kernel sums the whole K
// into registers and the epilogue scales the 6 x 16 tile straight into y: no int32 matrix is
// ever stored.
#include "runtime/cpu/int8_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/gemm_kernels.h"
#include "runtime/cpu_isa.h"
#include "runtime/error.h"

#if defined(OCRT_TARGET_ATTRS)
#include <immintrin.h>
#define OCRT_INT8_AVX2 1
#endif

namespace ocrt::cpu {

namespace {

constexpr int64_t kBlockPanels = 4;
constexpr int64_t kMaxK = (int64_t(1) << 31) / (127 * 127) - 1;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// acc (MR x NR, row-major) of the tile at rows i0.., columns j0.. -> y, for rows x cols of it.
// Each value is fma(float(sum - offset), scale, bias): one rounding, so every path gives the same
// bits.
void store_tile_reference(const int32_t* acc, int64_t i0, int64_t rows, int64_t j0, int64_t cols, const Int8Epilogue& e,
                float* y, int64_t y_row, int64_t y_col) {
  for (int64_t r = 0; r < rows; ++r) {
    float* out = y + (i0 + r) * y_row + j0 * y_col;
    const int32_t* a = acc + r * kInt8NR;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t j = j0 + c;
      const int32_t s = a[c] - (e.offset ? e.offset[j] : 0);
      const float v = std::fma((float)s, e.scale[j], e.bias ? e.bias[j] : 0.0f);
      out[c * y_col] = e.relu ? (v > 0 ? v : 0.0f) : v;
    }
  }
}

// The kernels read A through pointers (Int8A): a[s * MR + r] is where row r's codes of segment
// s begin, `steps` steps of 4 codes each; B's panel runs on through the segments in order.
using Kernel = void (*)(const uint8_t* const* a, int64_t segments, int64_t steps, const int8_t* b, int32_t* acc);
// Two tiles at once, for B panels b0 and b1: acc[0 .. MR NR) and acc[MR NR .. 2 MR NR).
using PairKernel = void (*)(const uint8_t* const* a, int64_t segments, int64_t steps, const int8_t* b0,
                            const int8_t* b1, int32_t* acc);
// One row of A (its segments at a[s * MR]) times one NR-column panel of B: acc[0..NR). For
// products of fewer rows than MR (an LSTM step at batch 1), where the MR-row kernel would spend
// most of its work on padding rows.
using RowKernel = void (*)(const uint8_t* const* a, int64_t segments, int64_t steps, const int8_t* b, int32_t* acc);
using Store = void (*)(const int32_t* acc, int64_t i0, int64_t rows, int64_t j0, int64_t cols, const Int8Epilogue& e,
                       float* y, int64_t y_row, int64_t y_col);

// The plain loops: acc[r][c] = sum over k of A(r, k) B(k, c).
void kernel_reference(const uint8_t* const* a, int64_t segments, int64_t steps, const int8_t* b, int32_t* acc) {
  for (int64_t r = 0; r < kInt8MR; ++r)
    for (int64_t c = 0; c < kInt8NR; ++c) {
      int32_t sum = 0;
      for (int64_t s = 0; s < segments; ++s)
        for (int64_t q = 0; q < steps; ++q)
          for (int64_t u = 0; u < 4; ++u) {
            const int32_t av = a[s * kInt8MR + r][q * 4 + u];
            const int32_t bv = b[(s * steps + q) * 64 + (c / 8) * 32 + (c % 8) * 4 + u];
            sum += av * bv;
          }
      acc[r * kInt8NR + c] = sum;
    }
}

#if defined(OCRT_INT8_AVX2)
// Compiled for AVX2 inside these functions only (OCRT_TARGET_AVX2), so any x86-64 build has
// them; choose_kernels() takes them only where the path is avx2 or better.

// One row's step: the row's 4 codes broadcast, times both B vectors, added to its accumulators.
OCRT_TARGET_AVX2 inline void row_step(const uint8_t* a, __m256i b0, __m256i b1, __m256i ones, __m256i& lo, __m256i& hi) {
  int32_t v;
  std::memcpy(&v, a, 4);
  const __m256i av = _mm256_set1_epi32(v);
  lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_maddubs_epi16(av, b0), ones));
  hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_maddubs_epi16(av, b1), ones));
}

// Per step of 4 values of k: the two B vectors hold 8 columns x 4 codes each; each row's 4 codes
// are broadcast to all 8 lanes; vpmaddubsw makes 16 exact int16 pair sums (row codes unsigned,
// weight codes signed), vpmaddwd by ones adds the pairs into 8 int32, and those are accumulated.
// 12 accumulators + 2 B vectors + the broadcast + the ones: all 16 registers.
OCRT_TARGET_AVX2 void kernel_avx2(const uint8_t* const* a, int64_t segments, int64_t steps, const int8_t* b,
                                  int32_t* acc) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
          c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t s = 0; s < segments; ++s, a += kInt8MR) {
    const uint8_t *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    for (int64_t o = 0; o < 4 * steps; o += 4, b += 64) {
      const __m256i b0 = _mm256_load_si256((const __m256i*)b), b1 = _mm256_load_si256((const __m256i*)(b + 32));
      row_step(a0 + o, b0, b1, ones, c00, c01);
      row_step(a1 + o, b0, b1, ones, c10, c11);
      row_step(a2 + o, b0, b1, ones, c20, c21);
      row_step(a3 + o, b0, b1, ones, c30, c31);
      row_step(a4 + o, b0, b1, ones, c40, c41);
      row_step(a5 + o, b0, b1, ones, c50, c51);
    }
  }
  __m256i* out = (__m256i*)acc;
  _mm256_storeu_si256(out + 0, c00), _mm256_storeu_si256(out + 1, c01);
  _mm256_storeu_si256(out + 2, c10), _mm256_storeu_si256(out + 3, c11);
  _mm256_storeu_si256(out + 4, c20), _mm256_storeu_si256(out + 5, c21);
  _mm256_storeu_si256(out + 6, c30), _mm256_storeu_si256(out + 7, c31);
  _mm256_storeu_si256(out + 8, c40), _mm256_storeu_si256(out + 9, c41);
  _mm256_storeu_si256(out + 10, c50), _mm256_storeu_si256(out + 11, c51);
}

// kernel_avx2's step for one row: 2 loads, 1 broadcast, 2 vpmaddubsw, 2 vpmaddwd, 2 vpaddd.
// Two steps at a time into separate sums, so that the adds of one chain overlap.
OCRT_TARGET_AVX2 void row_kernel_avx2(const uint8_t* const* a, int64_t segments, int64_t steps, const int8_t* b,
                                      int32_t* acc) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i lo0 = _mm256_setzero_si256(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
  for (int64_t s = 0; s < segments; ++s) {
    const uint8_t* r = a[s * kInt8MR];
    int64_t q = 0;
    for (; q + 2 <= steps; q += 2, r += 8, b += 128) {
      row_step(r, _mm256_load_si256((const __m256i*)b), _mm256_load_si256((const __m256i*)(b + 32)), ones, lo0, hi0);
      row_step(r + 4, _mm256_load_si256((const __m256i*)(b + 64)), _mm256_load_si256((const __m256i*)(b + 96)), ones,
               lo1, hi1);
    }
    if (q < steps) {
      row_step(r, _mm256_load_si256((const __m256i*)b), _mm256_load_si256((const __m256i*)(b + 32)), ones, lo0, hi0);
      b += 64;
    }
  }
  _mm256_storeu_si256((__m256i*)acc, _mm256_add_epi32(lo0, lo1));
  _mm256_storeu_si256((__m256i*)(acc + 8), _mm256_add_epi32(hi0, hi1));
}

// The epilogue of a tile, 8 columns at a time (fmadd rounds once, as std::fma).
OCRT_TARGET_AVX2 void store_tile_avx2(const int32_t* acc, int64_t i0, int64_t rows, int64_t j0, int64_t cols, const Int8Epilogue& e,
                     float* y, int64_t y_row, int64_t y_col) {
  // A narrower tile (the last panel of B, or a product of fewer than 16 columns: a convolution
  // into 4 or 8 channels) reads its columns' epilogue from a copy padded with zeros.
  const bool full = cols == kInt8NR;
  alignas(32) float pad_scale[kInt8NR] = {}, pad_bias[kInt8NR] = {};
  alignas(32) int32_t pad_offset[kInt8NR] = {};
  if (!full) {
    for (int64_t c = 0; c < cols; ++c) {
      pad_scale[c] = e.scale[j0 + c];
      pad_bias[c] = e.bias ? e.bias[j0 + c] : 0.0f;
      pad_offset[c] = e.offset ? e.offset[j0 + c] : 0;
    }
  }
  const float* scales = full ? e.scale + j0 : pad_scale;  // columns j0 .. j0 + 15
  const float* biases = full ? e.bias ? e.bias + j0 : nullptr : pad_bias;
  const int32_t* offsets = full ? e.offset ? e.offset + j0 : nullptr : pad_offset;
  const bool direct = y_col == 1 && full;
  alignas(32) float tile[8 * kInt8NR];  // rows kInt8MR .. 7: zeros for the transposed store below
  for (int h = 0; h < 2; ++h) {
    const int64_t j = j0 + 8 * h;
    const __m256 scale = _mm256_loadu_ps(scales + 8 * h);
    const __m256i off = offsets ? _mm256_loadu_si256((const __m256i*)(offsets + 8 * h)) : _mm256_setzero_si256();
    const __m256 bias = biases ? _mm256_loadu_ps(biases + 8 * h) : _mm256_setzero_ps();
    for (int64_t r = 0; r < rows; ++r) {
      const __m256i s = _mm256_sub_epi32(_mm256_loadu_si256((const __m256i*)(acc + r * kInt8NR + 8 * h)), off);
      __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scale, bias);
      if (e.relu) v = _mm256_max_ps(v, _mm256_setzero_ps());
      if (direct) _mm256_storeu_ps(y + (i0 + r) * y_row + j, v);
      else _mm256_store_ps(tile + r * kInt8NR + 8 * h, v);
    }
  }
  if (direct) return;
  if (y_col == 1) {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(y + (i0 + r) * y_row + j0, tile + r * kInt8NR, (size_t)cols * sizeof(float));
    return;
  }
  if (y_row == 1) {
    // A convolution's output (rows: pixels, columns: channels, a channel's pixels contiguous):
    // each half of the tile transposed 8 x 8 in registers, then every column's `rows` values
    // stored at once (masked), instead of one scalar store per value.
    static_assert(kInt8MR <= 8 && kInt8NR == 16, "the transposed store takes 8 x 8 blocks");
    for (int64_t r = rows; r < 8; ++r) _mm256_store_ps(tile + r * kInt8NR, _mm256_setzero_ps()), _mm256_store_ps(tile + r * kInt8NR + 8, _mm256_setzero_ps());
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rows), lane);
    for (int h = 0; h < 2 && 8 * h < cols; ++h) {
      const float* t = tile + 8 * h;
      const __m256 r0 = _mm256_load_ps(t), r1 = _mm256_load_ps(t + kInt8NR), r2 = _mm256_load_ps(t + 2 * kInt8NR),
                   r3 = _mm256_load_ps(t + 3 * kInt8NR), r4 = _mm256_load_ps(t + 4 * kInt8NR),
                   r5 = _mm256_load_ps(t + 5 * kInt8NR), r6 = _mm256_load_ps(t + 6 * kInt8NR),
                   r7 = _mm256_load_ps(t + 7 * kInt8NR);
      const __m256 a0 = _mm256_unpacklo_ps(r0, r1), a1 = _mm256_unpackhi_ps(r0, r1), a2 = _mm256_unpacklo_ps(r2, r3),
                   a3 = _mm256_unpackhi_ps(r2, r3), a4 = _mm256_unpacklo_ps(r4, r5), a5 = _mm256_unpackhi_ps(r4, r5),
                   a6 = _mm256_unpacklo_ps(r6, r7), a7 = _mm256_unpackhi_ps(r6, r7);
      const __m256 b0 = _mm256_shuffle_ps(a0, a2, _MM_SHUFFLE(1, 0, 1, 0)), b1 = _mm256_shuffle_ps(a0, a2, _MM_SHUFFLE(3, 2, 3, 2)),
                   b2 = _mm256_shuffle_ps(a1, a3, _MM_SHUFFLE(1, 0, 1, 0)), b3 = _mm256_shuffle_ps(a1, a3, _MM_SHUFFLE(3, 2, 3, 2)),
                   b4 = _mm256_shuffle_ps(a4, a6, _MM_SHUFFLE(1, 0, 1, 0)), b5 = _mm256_shuffle_ps(a4, a6, _MM_SHUFFLE(3, 2, 3, 2)),
                   b6 = _mm256_shuffle_ps(a5, a7, _MM_SHUFFLE(1, 0, 1, 0)), b7 = _mm256_shuffle_ps(a5, a7, _MM_SHUFFLE(3, 2, 3, 2));
      // column k of the half: rows 0-3 from the low lanes of b_k' and rows 4-7 from b_(k'+4)'s
      const __m256 col[8] = {_mm256_permute2f128_ps(b0, b4, 0x20), _mm256_permute2f128_ps(b1, b5, 0x20),
                             _mm256_permute2f128_ps(b2, b6, 0x20), _mm256_permute2f128_ps(b3, b7, 0x20),
                             _mm256_permute2f128_ps(b0, b4, 0x31), _mm256_permute2f128_ps(b1, b5, 0x31),
                             _mm256_permute2f128_ps(b2, b6, 0x31), _mm256_permute2f128_ps(b3, b7, 0x31)};
      const int64_t n = std::min<int64_t>(8, cols - 8 * h);
      for (int64_t c = 0; c < n; ++c) _mm256_maskstore_ps(y + i0 + (j0 + 8 * h + c) * y_col, mask, col[c]);
    }
    return;
  }
  for (int64_t c = 0; c < cols; ++c) {
    float* out = y + i0 * y_row + (j0 + c) * y_col;
    for (int64_t r = 0; r < rows; ++r) out[r * y_row] = tile[r * kInt8NR + c];
  }
}

OCRT_TARGET_AVX2 void quantize_avx2(const float* x, int64_t n, float inv_scale, int lo, int hi, int offset, uint8_t* codes) {
  const __m256 inv = _mm256_set1_ps(inv_scale), vlo = _mm256_set1_ps((float)lo), vhi = _mm256_set1_ps((float)hi);
  const __m256i off = _mm256_set1_epi32(offset);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // max_ps returns its second operand when the first is a NaN: a NaN becomes lo.
    const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv), vlo), vhi);
    const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(v), off);  // nearest, ties to even
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64((__m128i*)(codes + i), _mm_packus_epi16(w, w));
  }
  int8_quantize_reference(x + i, n - i, inv_scale, lo, hi, offset, codes + i);
}

// The same with 16 lanes (the avx512 path and above): vpmovusdb narrows the 16 codes, already
// within 0..255, to bytes in one instruction. The same codes as the plain loop.
__attribute__((target("avx512f"))) void quantize_avx512(const float* x, int64_t n, float inv_scale, int lo, int hi,
                                                        int offset, uint8_t* codes) {
  const __m512 inv = _mm512_set1_ps(inv_scale), vlo = _mm512_set1_ps((float)lo), vhi = _mm512_set1_ps((float)hi);
  const __m512i off = _mm512_set1_epi32(offset);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // max_ps returns its second operand when the first is a NaN: a NaN becomes lo.
    const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), inv), vlo), vhi);
    const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), off);  // nearest, ties to even
    _mm_storeu_si128((__m128i*)(codes + i), _mm512_cvtusepi32_epi8(q));
  }
  int8_quantize_reference(x + i, n - i, inv_scale, lo, hi, offset, codes + i);
}

// ---- AVX512_VNNI: vpdpbusd adds the four products of 4 unsigned by 4 signed bytes into each
// int32 lane in one instruction (no int16 step, nothing to saturate). B's step of 64 bytes is
// exactly one zmm: the panel's 16 columns, 4 codes each, in column order.
// tests/runtime/test_int8_gemm.cpp checks these kernels against the plain loops, bit for bit,
// wherever the CPU has VNNI (first run on an AMD EPYC Zen 5, 2026-11-26).
#define OCRT_VNNI_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

OCRT_VNNI_FN inline __m512i broadcast4(const uint8_t* a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return _mm512_set1_epi32(v);
}

// The 6 x 16 tile: even and odd steps into two sets of 6 accumulators (12 chains cover
// vpdpbusd's latency), added at the end.
OCRT_VNNI_FN void kernel_vnni(const uint8_t* const* a, int64_t segments, int64_t steps, const int8_t* b, int32_t* acc) {
  __m512i e0 = _mm512_setzero_si512(), e1 = e0, e2 = e0, e3 = e0, e4 = e0, e5 = e0;
  __m512i o0 = e0, o1 = e0, o2 = e0, o3 = e0, o4 = e0, o5 = e0;
  for (int64_t s = 0; s < segments; ++s, a += kInt8MR) {
    const uint8_t *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    int64_t o = 0;
    for (; o + 8 <= 4 * steps; o += 8, b += 128) {
      const __m512i be = _mm512_load_si512((const void*)b), bo = _mm512_load_si512((const void*)(b + 64));
      e0 = _mm512_dpbusd_epi32(e0, broadcast4(a0 + o), be), o0 = _mm512_dpbusd_epi32(o0, broadcast4(a0 + o + 4), bo);
      e1 = _mm512_dpbusd_epi32(e1, broadcast4(a1 + o), be), o1 = _mm512_dpbusd_epi32(o1, broadcast4(a1 + o + 4), bo);
      e2 = _mm512_dpbusd_epi32(e2, broadcast4(a2 + o), be), o2 = _mm512_dpbusd_epi32(o2, broadcast4(a2 + o + 4), bo);
      e3 = _mm512_dpbusd_epi32(e3, broadcast4(a3 + o), be), o3 = _mm512_dpbusd_epi32(o3, broadcast4(a3 + o + 4), bo);
      e4 = _mm512_dpbusd_epi32(e4, broadcast4(a4 + o), be), o4 = _mm512_dpbusd_epi32(o4, broadcast4(a4 + o + 4), bo);
      e5 = _mm512_dpbusd_epi32(e5, broadcast4(a5 + o), be), o5 = _mm512_dpbusd_epi32(o5, broadcast4(a5 + o + 4), bo);
    }
    if (o < 4 * steps) {
      const __m512i be = _mm512_load_si512((const void*)b);
      b += 64;
      e0 = _mm512_dpbusd_epi32(e0, broadcast4(a0 + o), be);
      e1 = _mm512_dpbusd_epi32(e1, broadcast4(a1 + o), be);
      e2 = _mm512_dpbusd_epi32(e2, broadcast4(a2 + o), be);
      e3 = _mm512_dpbusd_epi32(e3, broadcast4(a3 + o), be);
      e4 = _mm512_dpbusd_epi32(e4, broadcast4(a4 + o), be);
      e5 = _mm512_dpbusd_epi32(e5, broadcast4(a5 + o), be);
    }
  }
  _mm512_storeu_si512((void*)(acc + 0 * kInt8NR), _mm512_add_epi32(e0, o0));
  _mm512_storeu_si512((void*)(acc + 1 * kInt8NR), _mm512_add_epi32(e1, o1));
  _mm512_storeu_si512((void*)(acc + 2 * kInt8NR), _mm512_add_epi32(e2, o2));
  _mm512_storeu_si512((void*)(acc + 3 * kInt8NR), _mm512_add_epi32(e3, o3));
  _mm512_storeu_si512((void*)(acc + 4 * kInt8NR), _mm512_add_epi32(e4, o4));
  _mm512_storeu_si512((void*)(acc + 5 * kInt8NR), _mm512_add_epi32(e5, o5));
}

// Two 6 x 16 tiles side by side (B panels p and p + 1): each row's broadcast serves two
// vpdpbusd, so a step loads 2 B vectors and 6 broadcasts for 12 instructions (the single tile
// loads 7 for 6). 12 accumulators, one chain each, cover the instruction's latency.
OCRT_VNNI_FN void pair_kernel_vnni(const uint8_t* const* a, int64_t segments, int64_t steps, const int8_t* b0,
                                   const int8_t* b1, int32_t* acc) {
  __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m512i c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t s = 0; s < segments; ++s, a += kInt8MR) {
    const uint8_t *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    for (int64_t o = 0; o < 4 * steps; o += 4, b0 += 64, b1 += 64) {
      const __m512i x = _mm512_load_si512((const void*)b0), y = _mm512_load_si512((const void*)b1);
      __m512i av = broadcast4(a0 + o);
      c00 = _mm512_dpbusd_epi32(c00, av, x), c01 = _mm512_dpbusd_epi32(c01, av, y);
      av = broadcast4(a1 + o);
      c10 = _mm512_dpbusd_epi32(c10, av, x), c11 = _mm512_dpbusd_epi32(c11, av, y);
      av = broadcast4(a2 + o);
      c20 = _mm512_dpbusd_epi32(c20, av, x), c21 = _mm512_dpbusd_epi32(c21, av, y);
      av = broadcast4(a3 + o);
      c30 = _mm512_dpbusd_epi32(c30, av, x), c31 = _mm512_dpbusd_epi32(c31, av, y);
      av = broadcast4(a4 + o);
      c40 = _mm512_dpbusd_epi32(c40, av, x), c41 = _mm512_dpbusd_epi32(c41, av, y);
      av = broadcast4(a5 + o);
      c50 = _mm512_dpbusd_epi32(c50, av, x), c51 = _mm512_dpbusd_epi32(c51, av, y);
    }
  }
  int32_t* second = acc + kInt8MR * kInt8NR;
  _mm512_storeu_si512((void*)(acc + 0 * kInt8NR), c00), _mm512_storeu_si512((void*)(second + 0 * kInt8NR), c01);
  _mm512_storeu_si512((void*)(acc + 1 * kInt8NR), c10), _mm512_storeu_si512((void*)(second + 1 * kInt8NR), c11);
  _mm512_storeu_si512((void*)(acc + 2 * kInt8NR), c20), _mm512_storeu_si512((void*)(second + 2 * kInt8NR), c21);
  _mm512_storeu_si512((void*)(acc + 3 * kInt8NR), c30), _mm512_storeu_si512((void*)(second + 3 * kInt8NR), c31);
  _mm512_storeu_si512((void*)(acc + 4 * kInt8NR), c40), _mm512_storeu_si512((void*)(second + 4 * kInt8NR), c41);
  _mm512_storeu_si512((void*)(acc + 5 * kInt8NR), c50), _mm512_storeu_si512((void*)(second + 5 * kInt8NR), c51);
}

// One row: four steps at a time into four accumulators.
OCRT_VNNI_FN void row_kernel_vnni(const uint8_t* const* a, int64_t segments, int64_t steps, const int8_t* b,
                                  int32_t* acc) {
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0;
  for (int64_t s = 0; s < segments; ++s) {
    const uint8_t* r = a[s * kInt8MR];
    int64_t q = 0;
    for (; q + 4 <= steps; q += 4, r += 16, b += 256) {
      c0 = _mm512_dpbusd_epi32(c0, broadcast4(r), _mm512_load_si512((const void*)b));
      c1 = _mm512_dpbusd_epi32(c1, broadcast4(r + 4), _mm512_load_si512((const void*)(b + 64)));
      c2 = _mm512_dpbusd_epi32(c2, broadcast4(r + 8), _mm512_load_si512((const void*)(b + 128)));
      c3 = _mm512_dpbusd_epi32(c3, broadcast4(r + 12), _mm512_load_si512((const void*)(b + 192)));
    }
    for (; q < steps; ++q, r += 4, b += 64) c0 = _mm512_dpbusd_epi32(c0, broadcast4(r), _mm512_load_si512((const void*)b));
  }
  _mm512_storeu_si512((void*)acc, _mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)));
}
#endif

// The kernels this machine runs (chosen once, from the path and the CPU's features).
struct Kernels {
  Kernel tile = kernel_reference;
  PairKernel pair = nullptr;  // where the ISA gains by it (VNNI)
  RowKernel row = nullptr;
  Store store = store_tile_reference;
  bool quantize_avx2 = false;
  bool quantize_avx512 = false;
  bool amx = false;  // products of kInt8MR rows or more on AMX tiles (run_amx)
  const char* name = "plain loops";
};

Kernels choose_kernels() {
  Kernels k;
#if defined(OCRT_INT8_AVX2)
  if (cpu_isa() >= CpuIsa::avx2)
    k.tile = kernel_avx2, k.row = row_kernel_avx2, k.store = store_tile_avx2, k.quantize_avx2 = true,
    k.name = "avx2 vpmaddubsw";
  if (cpu_isa() >= CpuIsa::avx512) k.quantize_avx512 = true;
  if (cpu_has_avx512_vnni())
    k.tile = kernel_vnni, k.pair = pair_kernel_vnni, k.row = row_kernel_vnni, k.name = "avx512-vnni vpdpbusd";
#if defined(OCRT_CPU_SGEMM)
  if (cpu_has_amx_int8()) k.amx = true, k.name = "amx tdpbusd";
#endif
#endif
  return k;
}

const Kernels& kernels() {
  static const Kernels k = choose_kernels();
  return k;
}

// What every product needs of its arguments, whichever loop runs it.
void check_product(const Int8A& a, const Int8PackedWeights& B, const Int8Epilogue& e) {
  OCRT_CHECK(e.scale != nullptr, "int8_gemm: the epilogue needs a scale per column");
  OCRT_CHECK(a.segments >= 1 && B.padded_rows() % (4 * a.segments) == 0, "int8_gemm: ", a.segments,
             " segments do not split ", B.padded_rows(), " codes into steps of 4");
}

void run(int64_t M, const Int8A& a, const Int8PackedWeights& B, const Int8Epilogue& e, float* y, int64_t y_row,
         int64_t y_col, bool parallel, Kernel kernel, PairKernel pair, RowKernel row_kernel, Store store) {
  check_product(a, B, e);
  if (M <= 0 || B.cols() == 0) return;
  const int64_t Kp = B.padded_rows(), N = B.cols(), S = a.segments;
  const int64_t steps = Kp / 4 / S;
  const size_t panel_ptrs = (size_t)(kInt8MR * S);
  if (row_kernel && M < kInt8MR) {
    // One panel of A, each of its M rows through the row kernel: the same sums, no padding rows.
    thread_local std::vector<const uint8_t*> ptrs;
    ptrs.resize(panel_ptrs);
    a.rows(0, M, ptrs.data());
    alignas(32) int32_t acc[kInt8MR * kInt8NR];
    for (int64_t pb = 0; pb < (N + kInt8NR - 1) / kInt8NR; ++pb) {
      for (int64_t r = 0; r < M; ++r) row_kernel(ptrs.data() + r, S, steps, B.panel(pb), acc + r * kInt8NR);
      const int64_t j0 = pb * kInt8NR;
      store(acc, 0, M, j0, std::min(kInt8NR, N - j0), e, y, y_row, y_col);
    }
    return;
  }
  const int64_t panels_a = (M + kInt8MR - 1) / kInt8MR, panels_b = (N + kInt8NR - 1) / kInt8NR;
  const int64_t blocks = (panels_a + kBlockPanels - 1) / kBlockPanels;
  // A block of kBlockPanels row panels takes every column panel of B in turn, so B streams from
  // the L2 or L3 once per block rather than once per panel.
  auto block = [&](int64_t blk, const uint8_t** ptrs) {
    const int64_t p0 = blk * kBlockPanels, p1 = std::min(panels_a, p0 + kBlockPanels);
    for (int64_t p = p0; p < p1; ++p) a.rows(p * kInt8MR, std::min(kInt8MR, M - p * kInt8MR), ptrs + (p - p0) * panel_ptrs);
    alignas(64) int32_t acc[2 * kInt8MR * kInt8NR];
    for (int64_t pb = 0; pb < panels_b;) {
      const int64_t j0 = pb * kInt8NR;
      if (pair && pb + 1 < panels_b) {  // two panels: 16 columns, then the second's (up to 16)
        const int64_t cols = std::min(kInt8NR, N - j0 - kInt8NR);
        for (int64_t p = p0; p < p1; ++p) {
          pair(ptrs + (p - p0) * panel_ptrs, S, steps, B.panel(pb), B.panel(pb + 1), acc);
          const int64_t i0 = p * kInt8MR, rows = std::min(kInt8MR, M - i0);
          store(acc, i0, rows, j0, kInt8NR, e, y, y_row, y_col);
          store(acc + kInt8MR * kInt8NR, i0, rows, j0 + kInt8NR, cols, e, y, y_row, y_col);
        }
        pb += 2;
        continue;
      }
      const int64_t cols = std::min(kInt8NR, N - j0);
      for (int64_t p = p0; p < p1; ++p) {
        kernel(ptrs + (p - p0) * panel_ptrs, S, steps, B.panel(pb), acc);
        const int64_t i0 = p * kInt8MR;
        store(acc, i0, std::min(kInt8MR, M - i0), j0, cols, e, y, y_row, y_col);
      }
      ++pb;
    }
  };
  const size_t buf_ptrs = (size_t)kBlockPanels * panel_ptrs;
  const bool threads = parallel && !omp_in_parallel() && omp_get_max_threads() > 1 && blocks > 1;
  if (!threads) {
    std::vector<const uint8_t*> ptrs(buf_ptrs);
    for (int64_t blk = 0; blk < blocks; ++blk) block(blk, ptrs.data());
    return;
  }
#pragma omp parallel
  {
    std::vector<const uint8_t*> ptrs(buf_ptrs);
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) block(blk, ptrs.data());
  }
}

#if defined(OCRT_CPU_SGEMM)
// The most gathered rows of A an AMX thread holds at once (a run of row blocks, run_amx).
constexpr int64_t kAmxRunBytes = int64_t(1) << 20;

// Row r's S segments of `seg` codes (ptrs[s * stride]: segment s's start) one after the other
// into dst; kSeg > 0: segments of that length, copied at a size the compiler knows.
template <int64_t kSeg>
void copy_segments(uint8_t* dst, const uint8_t* const* ptrs, int64_t S, int64_t seg, int64_t stride) {
  if constexpr (kSeg > 0) {
    for (int64_t s = 0; s < S; ++s) std::memcpy(dst + s * kSeg, ptrs[s * stride], (size_t)kSeg);
  } else {
    for (int64_t s = 0; s < S; ++s) std::memcpy(dst + s * seg, ptrs[s * stride], (size_t)seg);
  }
}

// The product on AMX tiles (runtime/cpu/gemm_amx.cpp, amx_int8_tiles): 32 rows of A at a time,
// gathered once from Int8A's pointers into rows of kq codes (Kp rounded up to 64, the rest zero:
// a tile row is 64 codes), then every pair of B's 16-column panels in turn (taken by every block
// of a run of blocks, below), each 16 x 16 tile of
// int32 sums through the epilogue in AVX-512 (amx_int8_store: the other kernels' operations, a
// convolution's output transposed in registers). The tail
// of K reads up to 15 quads past a panel's end (the next panel, or the zeros Int8PackedWeights
// allocates after the last): A's zero codes there add nothing. Work is shared out by row blocks
// and, where there are fewer blocks than threads (an LSTM step, a small line batch), by groups of
// panel pairs as well; every sum is exact, so the result is the same for any split.
void run_amx(int64_t M, const Int8A& a, const Int8PackedWeights& B, const Int8Epilogue& e, float* y, int64_t y_row,
             int64_t y_col, bool parallel) {
  check_product(a, B, e);
  if (B.cols() == 0) return;
  constexpr int64_t kRows = 32;
  const int64_t Kp = B.padded_rows(), N = B.cols(), S = a.segments, seg = Kp / S;
  const int64_t kq = round_up(Kp, 64);
  const int64_t blocks = (M + kRows - 1) / kRows, panels_b = (N + kInt8NR - 1) / kInt8NR, pairs = (panels_b + 1) / 2;
  const int threads = parallel && !omp_in_parallel() ? omp_get_max_threads() : 1;
  const int64_t groups = blocks >= threads ? 1 : std::min<int64_t>(pairs, (threads + blocks - 1) / blocks);
  // Row blocks go in runs whose gathered rows stay in the L2 together (kAmxRunBytes): each panel
  // pair of B is read once per run, then held in the L2 for the run's blocks, instead of coming
  // from memory again for every block (a 512 x 4608 layer's B, 2.4 MB, is more than the L2). At
  // least four runs a thread, so that the threads' shares stay even.
  const int64_t run_blocks =
      groups > 1 ? 1 : std::clamp<int64_t>(std::min(kAmxRunBytes / (kRows * kq), blocks / (4 * threads)), 1, 8);
  const int64_t runs = (blocks + run_blocks - 1) / run_blocks, items = runs * groups;
  // Gathers the rows of block blk into buf (kRows rows of kq codes). A convolution's segments
  // are a pixel's codes, often only 8 to 32 of them (a detector's layers): copies of a size
  // known here, not a call to memcpy for each (which took more time than the tiles' products
  // on those layers).
  void (*copy_row)(uint8_t*, const uint8_t* const*, int64_t, int64_t, int64_t) = copy_segments<0>;
  switch (seg) {
    case 4: copy_row = copy_segments<4>; break;
    case 8: copy_row = copy_segments<8>; break;
    case 12: copy_row = copy_segments<12>; break;
    case 16: copy_row = copy_segments<16>; break;
    case 24: copy_row = copy_segments<24>; break;
    case 32: copy_row = copy_segments<32>; break;
    case 64: copy_row = copy_segments<64>; break;
    default: break;
  }
  auto gather = [&](int64_t blk, std::vector<const uint8_t*>& ptrs, uint8_t* buf) {
    const int64_t i0 = blk * kRows, rows = std::min(kRows, M - i0);
    if (const Int8Image* im = a.image; im && im->pixel == seg && (int64_t)im->taps.size() == S) {
      // A stride-1 convolution that describes its image: each row's taps are fixed distances
      // from its pixel, worked out here rather than through the rows callback.
      int64_t oh = i0 / im->width, ow = i0 - oh * im->width;
      for (int64_t r = 0; r < kRows; ++r) {
        uint8_t* dst = buf + r * kq;
        if (r >= rows) {  // rows past M: copies of the last, never stored
          std::memcpy(dst, buf + (rows - 1) * kq, (size_t)kq);
          continue;
        }
        const uint8_t* pixel = im->codes + (oh * im->pitch + ow) * im->pixel;
        for (int64_t sg = 0; sg < S; ++sg) ptrs[(size_t)sg] = pixel + im->taps[(size_t)sg];
        copy_row(dst, ptrs.data(), S, seg, 1);
        std::memset(dst + Kp, 0, (size_t)(kq - Kp));
        if (++ow == im->width) ow = 0, ++oh;
      }
      return;
    }
    for (int64_t r0 = 0; r0 < kRows; r0 += kInt8MR) {
      const int64_t have = std::min(kInt8MR, rows - r0);
      if (have <= 0) {  // rows past M: copies of the last, never stored
        for (int64_t r = r0; r < kRows; ++r) std::memcpy(buf + r * kq, buf + (rows - 1) * kq, (size_t)kq);
        break;
      }
      a.rows(i0 + r0, have, ptrs.data());
      for (int64_t r = 0; r < kInt8MR && r0 + r < kRows; ++r) {
        uint8_t* dst = buf + (r0 + r) * kq;
        copy_row(dst, ptrs.data() + r, S, seg, kInt8MR);
        std::memset(dst + Kp, 0, (size_t)(kq - Kp));
      }
    }
  };
  // Block blk's sums against panels pb and pb + 1 (second: whether there is one), the four
  // tiles in acc, through the epilogue into y.
  auto store = [&](const int32_t* acc, int64_t blk, int64_t pb, bool second) {
    const int64_t i0 = blk * kRows, rows = std::min(kRows, M - i0);
    for (int h = 0; h < (second ? 2 : 1); ++h) {
      const int64_t jh = (pb + h) * kInt8NR, cols = std::min(kInt8NR, N - jh);
      for (int half = 0; half < 2; ++half) {
        const int64_t r_lo = half * 16, r_hi = std::min<int64_t>(rows, r_lo + 16);
        if (r_hi > r_lo)
          detail::amx_int8_store(acc + (2 * half + h) * 256, i0 + r_lo, r_hi - r_lo, jh, cols, e, y, y_row, y_col);
      }
    }
  };
  // Item it: run it / groups (blocks b0 .. b1), panel pairs of group it % groups.
  auto item = [&](int64_t it, std::vector<const uint8_t*>& ptrs, uint8_t* rows_buf, int64_t& gathered) {
    const int64_t run = it / groups, g = it % groups;
    const int64_t b0 = run * run_blocks, b1 = std::min(blocks, b0 + run_blocks);
    if (gathered != run) {  // this thread's copy of the run's rows
      for (int64_t blk = b0; blk < b1; ++blk) gather(blk, ptrs, rows_buf + (blk - b0) * kRows * kq);
      gathered = run;
    }
    alignas(64) int32_t acc[4 * 256];
    const int64_t q0 = g * pairs / groups, q1 = (g + 1) * pairs / groups;
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t pb = 2 * q;
      const bool second = pb + 1 < panels_b;
      for (int64_t blk = b0; blk < b1; ++blk) {
        detail::amx_int8_tiles(rows_buf + (blk - b0) * kRows * kq, kq, B.panel(pb), second ? B.panel(pb + 1) : nullptr,
                               kq, acc);
        store(acc, blk, pb, second);
      }
    }
  };
  auto worker = [&](int64_t lo, int64_t hi) {
    thread_local std::vector<uint8_t> rows_buf;
    rows_buf.resize((size_t)(run_blocks * kRows * kq) + 64);
    uint8_t* rows_at = cache_line_start(rows_buf.data());  // a tile row of 64 codes one line
    std::vector<const uint8_t*> ptrs((size_t)(kInt8MR * S));
    int64_t gathered = -1;
    for (int64_t it = lo; it < hi; ++it) item(it, ptrs, rows_at, gathered);
  };
  if (threads <= 1 || items <= 1) {
    worker(0, items);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    worker(t * items / nt, (t + 1) * items / nt);
  }
}

// Whether a product's A can go to run_amx_image: an image whose pixels are whole tile rows (64
// codes at a time) and whose segments are its taps.
bool image_on_tiles(int64_t M, const Int8A& a, const Int8PackedWeights& B) {
  const Int8Image* im = a.image;
  return im && im->codes && im->pixel > 0 && im->pixel % 64 == 0 && (int64_t)im->taps.size() == a.segments &&
         im->pixel * a.segments == B.padded_rows() && im->width >= 1 && im->pitch >= im->width &&
         M % im->width == 0 && M > 0 && B.cols() > 0;
}

// The product on AMX tiles with A read in place (Int8Image: a stride-1 convolution whose pixels
// hold a multiple of 64 codes). Rows of A are pixels of the padded image, pitch a row: a tile
// load reads 16 of them at one stride, so nothing is gathered, and each row's last pitch - width
// pixels are computed and dropped (2 of 102 for a 3x3 layer of a 400-pixel line). Each pair of
// B's panels is taken by every row block in turn: a 512 x 4608 layer's pair (147 KB) stays in
// the L2 beside the image while all its rows go by, so B comes from memory once a product.
// Threads take pairs of panels, or row blocks where there are fewer pairs than threads.
void run_amx_image(int64_t M, const Int8A& a, const Int8PackedWeights& B, const Int8Epilogue& e, float* y,
                   int64_t y_row, int64_t y_col, bool parallel) {
  const Int8Image& im = *a.image;
  const int64_t N = B.cols(), S = a.segments;
  // Where each pixel's row of sums goes in y (-1: past its row's width, or past the end), for
  // the blocks of 32 pixels the product runs over.
  const std::vector<int64_t> dest = detail::pitched_destinations(M / im.width, im.width, im.pitch);
  const int64_t blocks = (int64_t)dest.size() / 32, panels_b = (N + kInt8NR - 1) / kInt8NR, pairs = (panels_b + 1) / 2;
  auto work = [&](int64_t q0, int64_t q1, int64_t b0, int64_t b1) {
    alignas(64) int32_t acc[4 * 256];
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t pb = 2 * q;
      const bool second = pb + 1 < panels_b;
      for (int64_t blk = b0; blk < b1; ++blk) {
        detail::amx_int8_tiles_taps(im.codes + blk * 32 * im.pixel, im.pixel, im.taps.data(), S, im.pixel,
                                    B.panel(pb), second ? B.panel(pb + 1) : nullptr, acc);
        for (int h = 0; h < (second ? 2 : 1); ++h) {
          const int64_t jh = (pb + h) * kInt8NR, cols = std::min(kInt8NR, N - jh);
          for (int half = 0; half < 2; ++half)
            detail::amx_int8_store_mapped(acc + (2 * half + h) * 256, dest.data() + blk * 32 + half * 16, 16, jh,
                                          cols, e, y, y_row, y_col);
        }
      }
    }
  };
  detail::share_pairs_or_blocks(parallel && !omp_in_parallel() ? omp_get_max_threads() : 1, pairs, blocks, work);
}
#endif

}  // namespace

Int8PackedWeights::Int8PackedWeights(int64_t K, int64_t N, const int8_t* w, int64_t w_col, int64_t w_k)
    : K_(K), N_(N), Kp_(round_up(std::max<int64_t>(K, 1), 4)), Np_(round_up(std::max<int64_t>(N, 1), kInt8NR)) {
  OCRT_CHECK(K >= 0 && N >= 0, "int8 weights: negative size ", K, " x ", N);
  OCRT_CHECK(K <= kMaxK, "int8 weights: K = ", K, " exceeds ", kMaxK, ", where int32 sums could overflow");
  // A multiple of 64, and 1 KB of zeros after the last panel: the AMX kernel reads K in steps of
  // 64 codes, up to 15 quads past a panel's end (run_amx).
  const size_t bytes = (size_t)(Kp_ * Np_) + 1024;
  data_.reset((int8_t*)std::aligned_alloc(64, bytes));
  OCRT_CHECK(data_ != nullptr, "int8 weights: out of memory for ", bytes, " bytes");
  std::memset(data_.get(), 0, bytes);
  sums_.assign((size_t)N, 0);
  for (int64_t j = 0; j < N; ++j) {
    int8_t* panel = data_.get() + (j / kInt8NR) * Kp_ * kInt8NR;
    const int64_t c = j % kInt8NR;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int8_t v = w[j * w_col + k * w_k];
      OCRT_CHECK(v >= -kInt8CodeMax, "int8 weights: code ", (int)v, " at (", k, ", ", j, ") is below -127");
      panel[(k / 4) * 64 + (c / 8) * 32 + (c % 8) * 4 + k % 4] = v;
      sum += v;
    }
    sums_[(size_t)j] = sum;
  }
}

int64_t int8_image_codes(const Int8Image& image, int64_t M) {
  OCRT_CHECK(image.width >= 1 && image.pitch >= image.width && M % image.width == 0 && !image.taps.empty(),
             "int8 image: ", M, " rows are not whole rows of ", image.width, " pixels");
  const int64_t V = (M / image.width - 1) * image.pitch + image.width;
  return round_up(V, 32) * image.pixel + *std::max_element(image.taps.begin(), image.taps.end());
}

Int8A int8_rows(const uint8_t* a, int64_t lda) {
  return {1, [=](int64_t i0, int64_t rows, const uint8_t** ptrs) {
            // Rows past the end repeat the last one: valid codes, never stored.
            for (int64_t r = 0; r < kInt8MR; ++r) ptrs[r] = a + (i0 + std::min(r, rows - 1)) * lda;
          }};
}

void int8_gemm(int64_t M, const Int8A& a, const Int8PackedWeights& B, const Int8Epilogue& e, float* y,
               int64_t y_row, int64_t y_col, bool parallel) {
  const Kernels& k = kernels();
#if defined(OCRT_CPU_SGEMM)
  if (k.amx && M >= kInt8MR) {
    if (image_on_tiles(M, a, B)) return run_amx_image(M, a, B, e, y, y_row, y_col, parallel);
    return run_amx(M, a, B, e, y, y_row, y_col, parallel);
  }
#endif
  run(M, a, B, e, y, y_row, y_col, parallel, k.tile, k.pair, k.row, k.store);
}

void int8_store_tile(const int32_t* acc, int64_t i0, int64_t rows, int64_t j0, int64_t cols, const Int8Epilogue& e,
                     float* y, int64_t y_row, int64_t y_col) {
  kernels().store(acc, i0, rows, j0, cols, e, y, y_row, y_col);
}

void int8_gemm_reference(int64_t M, const Int8A& a, const Int8PackedWeights& B, const Int8Epilogue& e,
                         float* y, int64_t y_row, int64_t y_col) {
  run(M, a, B, e, y, y_row, y_col, false, kernel_reference, nullptr, nullptr, store_tile_reference);
}

void int8_quantize_reference(const float* x, int64_t n, float inv_scale, int lo, int hi, int offset, uint8_t* codes) {
  for (int64_t i = 0; i < n; ++i) {
    // fmax first: a NaN becomes lo instead of an undefined conversion.
    const float v = std::fmin(std::fmax(x[i] * inv_scale, (float)lo), (float)hi);
    codes[i] = (uint8_t)((int)std::nearbyint(v) + offset);
  }
}

void int8_quantize(const float* x, int64_t n, float inv_scale, int lo, int hi, int offset, uint8_t* codes) {
  OCRT_CHECK(lo <= hi && lo + offset >= 0 && hi + offset <= 255, "int8_quantize: codes ", lo, "..", hi, " + ", offset,
             " do not fit a byte");
#if defined(OCRT_INT8_AVX2)
  if (kernels().quantize_avx512) return quantize_avx512(x, n, inv_scale, lo, hi, offset, codes);
  if (kernels().quantize_avx2) return quantize_avx2(x, n, inv_scale, lo, hi, offset, codes);
#endif
  int8_quantize_reference(x, n, inv_scale, lo, hi, offset, codes);
}

namespace {

void transpose_bytes_plain(const uint8_t* src, int64_t rows, int64_t cols, int64_t src_stride, uint8_t* dst,
                           int64_t dst_stride) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) dst[c * dst_stride + r] = src[r * src_stride + c];
}

#if defined(OCRT_INT8_AVX2)
// 16 rows of 16 bytes -> 16 columns: four rounds of interleaves, each doubling the run of bytes
// that come from consecutive rows (1 -> 2 -> 4 -> 8 -> 16), SSE2 only.
void transpose_16x16(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride) {
  __m128i a[16], b[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm_loadu_si128((const __m128i*)(src + i * src_stride));
  // Round 1: rows 2k and 2k + 1, byte by byte: b[k] holds columns 0-7, b[k + 8] columns 8-15,
  // as pairs (row 2k, row 2k + 1).
  for (int k = 0; k < 8; ++k) b[k] = _mm_unpacklo_epi8(a[2 * k], a[2 * k + 1]), b[k + 8] = _mm_unpackhi_epi8(a[2 * k], a[2 * k + 1]);
  // Round 2: pairs of rows 4m..4m+1 and 4m+2..4m+3: a[h * 8 + 2m] columns 8h + 0-3, a[h * 8 + 2m + 1]
  // columns 8h + 4-7, each as a run of 4 rows.
  for (int h = 0; h < 2; ++h)
    for (int m = 0; m < 4; ++m) {
      const __m128i x = b[h * 8 + 2 * m], y = b[h * 8 + 2 * m + 1];
      a[h * 8 + 2 * m] = _mm_unpacklo_epi16(x, y), a[h * 8 + 2 * m + 1] = _mm_unpackhi_epi16(x, y);
    }
  // Round 3: runs of rows 0-3 with 4-7 and 8-11 with 12-15: b[(h * 4 + q) * 2 + g] holds columns
  // 8h + 2q and 8h + 2q + 1 as runs of 8 rows (rows 8g ..).
  for (int h = 0; h < 2; ++h)
    for (int g = 0; g < 2; ++g)
      for (int half = 0; half < 2; ++half) {
        const __m128i x = a[h * 8 + 4 * g + half], y = a[h * 8 + 4 * g + 2 + half];
        b[(h * 4 + 2 * half) * 2 + g] = _mm_unpacklo_epi32(x, y);
        b[(h * 4 + 2 * half + 1) * 2 + g] = _mm_unpackhi_epi32(x, y);
      }
  // Round 4: rows 0-7 with 8-15: one column each.
  for (int p = 0; p < 8; ++p) {
    const __m128i x = b[p * 2], y = b[p * 2 + 1];
    _mm_storeu_si128((__m128i*)(dst + (2 * p) * dst_stride), _mm_unpacklo_epi64(x, y));
    _mm_storeu_si128((__m128i*)(dst + (2 * p + 1) * dst_stride), _mm_unpackhi_epi64(x, y));
  }
}
#endif

}  // namespace

void transpose_bytes(const uint8_t* src, int64_t rows, int64_t cols, int64_t src_stride, uint8_t* dst,
                     int64_t dst_stride) {
  int64_t r0 = 0;
#if defined(OCRT_INT8_AVX2)
  const int64_t whole_cols = cols / 16 * 16;
  for (; r0 + 16 <= rows; r0 += 16) {
    for (int64_t c0 = 0; c0 < whole_cols; c0 += 16)
      transpose_16x16(src + r0 * src_stride + c0, src_stride, dst + c0 * dst_stride + r0, dst_stride);
    transpose_bytes_plain(src + r0 * src_stride + whole_cols, 16, cols - whole_cols, src_stride,
                          dst + whole_cols * dst_stride + r0, dst_stride);
  }
#endif
  transpose_bytes_plain(src + r0 * src_stride, rows - r0, cols, src_stride, dst + r0, dst_stride);
}

bool int8_gemm_simd() { return kernels().tile != kernel_reference; }

const char* int8_gemm_kernel_name() { return kernels().name; }

bool int8_gemm_avx2_kernel() {
#if defined(OCRT_INT8_AVX2)
  return kernels().tile == kernel_avx2 && !kernels().amx;
#else
  return false;
#endif
}

}  // namespace ocrt::cpu
