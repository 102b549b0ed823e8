// ocrt's bf16 GEMM kernel for the amx path, and the tiles of its int8 product (at the end):
// Intel's Advanced Matrix Extensions (Sapphire Rapids and later Xeons). Compiled for AMX inside this file only (the pragma below), so any x86-64
// build has it; runtime/cpu/gemm.cpp calls it only where cpu_isa() is `amx`, which the OS has
// granted the tile state for (runtime/cpu_isa.cpp).
//
// The machine: eight tile registers tmm0..tmm7 of up to 16 rows x 64 bytes, configured once per
// thread (ldtilecfg; here every tile is 16 x 64 bytes), and one instruction that matters:
//   tdpbf16ps tC, tA, tB    tC (16 x 16 float32) += tA (16 rows x 16 bf16 pairs) . tB (16 pair rows x 16 columns)
// where element (i, j) of tC gains sum over p of A[i][2p] B[2p][j] + A[i][2p+1] B[2p+1][j]: 8192
// multiply-adds, 16 times a vdpbf16ps's. tA's row i is 16 pairs of row i of A along K; tB's row p
// is the pairs (B[2p][j], B[2p+1][j]) of 16 columns, the same pair layout as the avx512bf16
// kernel's B panels (runtime/cpu/gemm_bf16_pairs.inc). Tiles load from memory with any row stride.
//
// The register tile of C is 32 x 32 in four tiles (tmm0..3); each step of 32 values of K loads
// two A tiles (rows 0-15 and 16-31, tmm4, tmm5) and two B tiles (columns 0-15 and 16-31, tmm6,
// tmm7) and issues four tdpbf16ps, each A tile used against both B tiles and each B tile against
// both A tiles. Packed panels (the loops are gemm_loops.inc's, as every path's):
//   A panel: MR = 32 rows of d pairs along K, step by step: for each 16 pairs of K, the 32 rows'
//            64 bytes one after another (a tile load reads 1 KB in one piece)
//   B panel: d rows of NR = 32 pairs (a tile load of 16 columns reads 64 bytes of each row,
//            128 bytes apart: 2 KB, of which the other half is the other tile's)
// with d, the packed depth, rounded up to a multiple of 16 pairs (zeros past K): a tile step
// consumes 16 pairs. Edges of M and N are zero rows and columns of the panels; the full tile is
// computed and its valid part copied out (gemm_loops.inc's edge_tile).
//
// Numbers: tdpbf16ps treats bf16 denormals as zero (so does the packing's rounding,
// runtime/bf16.h) and sums in float32 with round-to-nearest-even; each product of two bf16
// values is exact in float32. So the result obeys the bound every bf16 path is tested against
// (runtime/cpu/gemm.h), and a tile's elements are computed alike wherever the tile falls.
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
#include "runtime/cpu/int8_gemm.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,amx-tile,amx-bf16,amx-int8")
// GCC 12's AVX-512 headers build the unpack intrinsics on a deliberately undefined vector
// (`__Y = __Y`), which -Wuninitialized reports wherever transpose16 is inlined into a caller it
// likes (GCC bug 105593, fixed in GCC 13): not a fault of this file's code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace ocrt::cpu::detail {
namespace amx {

#include "runtime/cpu/gemm_loops.inc"
#include "runtime/cpu/gemm_bf16_pairs.inc"

// The tile configuration ldtilecfg reads: palette 1, and each tile's rows and bytes per row.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

}  // namespace amx

// Every tile 16 rows x 64 bytes, once per thread (the configuration is per thread, saved and
// restored by the OS with the tiles' contents).
//
// Not through GCC 12's _tile_loadconfig: that macro hands the asm only the first 8 bytes of the
// configuration as its memory operand, so the compiler may drop the stores of the rows and
// bytes per row as dead. It did, in this function's out-of-line copy: ldtilecfg loaded a
// configuration of empty tiles and the next tile instruction raised SIGILL (the inlined copies
// kept their stores by luck). Here the operand is the whole 64-byte configuration.
void amx_configure_tiles() {
  thread_local bool configured = false;
  if (configured) return;
  amx::TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  __asm__ volatile("ldtilecfg %0" : : "m"(config));
  configured = true;
}

namespace amx {

// Four 16 x 16 tiles of sums (tmm0..3, stored row-major to c: rows 0-15 x b0, rows 0-15 x b1,
// rows 16-31 x b0, rows 16-31 x b1) over K read where A lies: row r of the 32 at a + r * lda,
// its K in n_taps runs of seg bytes (a multiple of 64) at taps[t] bytes from there; each panel
// of B (b0, b1; null b1: b0 alone, computed twice and stored once by the caller) runs through the
// taps in order, 16 rows of 64 bytes a step of 64 bytes of A. kBf16: bf16 pairs into float32
// sums (tdpbf16ps), else unsigned by signed codes into int32 sums (tdpbusd).
//
// No software prefetch of the next step's rows: in single-thread loops over crnn's shapes (min
// of 40 runs, interleaved) it cost 10-30% of the int8 rate (3x3 layers read in place 2.8-3.4
// TOP/s with it, 3.4-4.0 without; the LSTM's input product 2.48 against 3.38, its recurrent one
// 1.34 against 1.59).
template <bool kBf16>
void taps_tiles(const uint8_t* a, int64_t lda, const int64_t* taps, int64_t n_taps, int64_t seg, const uint8_t* b0,
                const uint8_t* b1, void* c) {
  amx_configure_tiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  constexpr int64_t kRow = 64;  // bytes of a tile row, of A's step and of a row of B's panel
  if (b1 == nullptr) b1 = b0;
  for (int64_t t = 0; t < n_taps; ++t) {
    const uint8_t* at = a + taps[t];
    const uint8_t *p0 = b0 + t * seg * 16, *p1 = b1 + t * seg * 16;
    for (int64_t k = 0; k < seg; k += kRow) {
      _tile_loadd(4, at + k, lda);
      _tile_loadd(5, at + 16 * lda + k, lda);
      _tile_loadd(6, p0 + k * 16, kRow);
      _tile_loadd(7, p1 + k * 16, kRow);
      if constexpr (kBf16) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      } else {
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
      }
    }
  }
  _tile_stored(0, c, kRow);
  _tile_stored(1, static_cast<uint8_t*>(c) + 1024, kRow);
  _tile_stored(2, static_cast<uint8_t*>(c) + 2048, kRow);
  _tile_stored(3, static_cast<uint8_t*>(c) + 3072, kRow);
}

// The 16 rows of a tile of int32 sums (row-major) through the int8 epilogue, columns j0 ..
// j0 + cols of it: r[i] = row i's fma(float(sum - offset), scale, bias), then the ReLU, the
// operations of every int8 path's store in the same order (so the same bits).
inline void int8_epilogue(const int32_t* tile, const Int8Epilogue& e, int64_t j0, int64_t cols, __m512i r[16]) {
  const __mmask16 col_mask = (__mmask16)((1u << cols) - 1);
  const __m512 scale = _mm512_maskz_loadu_ps(col_mask, e.scale + j0);
  const __m512 bias = e.bias ? _mm512_maskz_loadu_ps(col_mask, e.bias + j0) : _mm512_setzero_ps();
  const __m512i offset = e.offset ? _mm512_maskz_loadu_epi32(col_mask, e.offset + j0) : _mm512_setzero_si512();
  for (int i = 0; i < 16; ++i) {
    const __m512i sums = _mm512_sub_epi32(_mm512_load_si512(tile + i * 16), offset);
    __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), scale, bias);
    if (e.relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
    r[i] = _mm512_castps_si512(v);
  }
}

// A transposed tile (r[c]: column c's 16 rows) into a convolution's NCHW output: tile row i of
// column c to y[dest[i] + (j0 + c) * y_col], nowhere where dest[i] < 0 (a pixel past its output
// row's end). 16 rows of one output row go out in one store a column; otherwise each run of rows
// with consecutive destinations in one masked store, packed to the run's start by vpcompressd.
inline void store_columns_mapped(const __m512i r[16], const int64_t* dest, int64_t rows, int64_t j0, int64_t cols,
                                 float* y, int64_t y_col) {
  if (rows == 16 && dest[0] >= 0 && dest[15] == dest[0] + 15) {
    for (int64_t c = 0; c < cols; ++c) _mm512_storeu_si512(y + dest[0] + (j0 + c) * y_col, r[c]);
    return;
  }
  for (int64_t i = 0; i < rows;) {
    if (dest[i] < 0) {
      ++i;
      continue;
    }
    int64_t n = 1;
    while (i + n < rows && dest[i + n] == dest[i] + n) ++n;
    const __mmask16 run = (__mmask16)(((1u << n) - 1) << i), packed = (__mmask16)((1u << n) - 1);
    for (int64_t c = 0; c < cols; ++c)
      _mm512_mask_storeu_epi32(y + dest[i] + (j0 + c) * y_col, packed, _mm512_maskz_compress_epi32(run, r[c]));
    i += n;
  }
}

struct AmxBf16Kernel {
  using Packed = uint32_t;
  static constexpr int64_t MR = 32, NR = 32;
  // Blocks in values of K: an A block (MC x KC bf16 = 512 KiB) stays in the L2 (2 MiB on
  // Sapphire Rapids), a B block (KC x NC = 4 MiB) in the L3.
  static constexpr int64_t KC = 1024, MC = 8 * MR, NC = 2048;
  static constexpr int64_t kStep = 16;  // pairs of K per tile step

  static int64_t depth(int64_t kc) { return ((kc + 1) / 2 + kStep - 1) / kStep * kStep; }

  // The four tiles of C (MR x NR) = a @ b over d pairs of K, left in tmm0..3.
  static void tile_product(int64_t d, const uint32_t* a, const uint32_t* b) {
    amx_configure_tiles();
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    const int64_t a_stride = kStep * (int64_t)sizeof(uint32_t), b_stride = NR * (int64_t)sizeof(uint32_t);
    for (int64_t p = 0; p < d; p += kStep) {
      _tile_loadd(4, a + p * MR, a_stride);
      _tile_loadd(5, a + p * MR + 16 * kStep, a_stride);
      _tile_loadd(6, b + p * NR, b_stride);
      _tile_loadd(7, b + p * NR + 16, b_stride);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }

  // The tiles into c (MR x NR, row stride ldc).
  static void store_tiles(float* c, int64_t ldc) {
    const int64_t stride = ldc * (int64_t)sizeof(float);
    _tile_stored(0, c, stride);
    _tile_stored(1, c + 16, stride);
    _tile_stored(2, c + 16 * ldc, stride);
    _tile_stored(3, c + 16 * ldc + 16, stride);
  }

  // C tile (MR x NR) = (accumulate ? C : 0) + a @ b over d pairs of K.
  static void micro_kernel(int64_t d, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate) {
    tile_product(d, a, b);
    if (accumulate)
      partial_tile_out(c, ldc, true, MR, NR);
    else
      store_tiles(c, ldc);
  }

  // A tile at C's bottom or right edge (mr <= MR rows, nr <= NR columns): the full product (the
  // panels' padding is zeros), then its valid part stored or added with masked vectors, the same
  // additions as micro_kernel's.
  static void partial_tile(int64_t d, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, bool accumulate,
                           int64_t mr, int64_t nr) {
    tile_product(d, a, b);
    partial_tile_out(c, ldc, accumulate, mr, nr);
  }
  static void partial_tile_out(float* c, int64_t ldc, bool accumulate, int64_t mr, int64_t nr) {
    alignas(64) float tile[MR * NR];
    store_tiles(tile, NR);
    const __mmask16 m0 = (__mmask16)((1u << std::min<int64_t>(nr, 16)) - 1);
    const __mmask16 m1 = (__mmask16)((1u << std::clamp<int64_t>(nr - 16, 0, 16)) - 1);
    for (int64_t i = 0; i < mr; ++i) {
      float* row = c + i * ldc;
      __m512 v0 = _mm512_load_ps(tile + i * NR), v1 = _mm512_load_ps(tile + i * NR + 16);
      if (accumulate) {
        v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, row), v0);
        v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, row + 16), v1);
      }
      _mm512_mask_storeu_ps(row, m0, v0);
      _mm512_mask_storeu_ps(row + 16, m1, v1);
    }
  }

  // Where pair p of row i goes in an A panel: step by step (16 pairs of K), each step's MR rows
  // of 64 bytes one after another, so that a tile load reads 1 KB in one piece (rows d * 4 bytes
  // apart ran at a third of the rate: strides of 1 or 2 KB put a tile's rows in a few L1 sets).
  static int64_t a_at(int64_t i, int64_t p) { return (p / kStep) * (MR * kStep) + i * kStep + p % kStep; }

  // The mc x kc block of A (element (i,k) at a[i * rs + k * cs]) into MR-row panels of d pairs
  // along K, laid out as a_at says; rows past mc and pairs past K are zero.
  static void pack_a(int64_t mc, int64_t kc, const float* a, int64_t rs, int64_t cs, uint32_t* out) {
    const int64_t d = depth(kc), pairs = (kc + 1) / 2;
    for (int64_t i0 = 0; i0 < mc; i0 += MR, out += MR * d) {
      const int64_t mr = std::min(MR, mc - i0);
      int64_t k_done = 0;
      if (rs == 1 && cs != 1) {
        // A's columns are contiguous (a transposed operand: dY^T of a weight gradient). 16 rows by
        // 32 values of K at a time: each pair of columns converted and interleaved into the pairs
        // of 16 rows, the 16 registers then transposed so that each holds one row's 16 pairs.
        for (; k_done + 32 <= kc; k_done += 32)
          for (int64_t r0 = 0; r0 < mr; r0 += 16) {
            const __mmask16 rows = (__mmask16)((1u << std::min<int64_t>(16, mr - r0)) - 1);
            __m512i r[16];
            for (int q = 0; q < 16; ++q) {
              const float* col = a + i0 + r0 + (k_done + 2 * q) * cs;
              r[q] = pairs_of_two(_mm512_maskz_loadu_ps(rows, col), _mm512_maskz_loadu_ps(rows, col + cs));
            }
            transpose16(r);
            for (int64_t i = 0; i < std::min<int64_t>(16, mr - r0); ++i)
              _mm512_store_si512(out + a_at(r0 + i, k_done / 2), r[i]);
          }
      }
      for (int64_t i = 0; i < mr; ++i) {
        const float* src = a + (i0 + i) * rs;
        if (cs == 1) {  // a contiguous row: 32 values (one step) per conversion
          for (int64_t k = k_done; k < kc; k += 32) {
            if (k + 32 <= kc)
              _mm512_store_si512(out + a_at(i, k / 2), pairs_of_32(src + k));
            else
              convert_pairs(src + k, kc - k, out + a_at(i, k / 2));
          }
        } else {
          for (int64_t p = k_done / 2; p < pairs; ++p)
            out[a_at(i, p)] = bf16_pair(src[2 * p * cs], 2 * p + 1 < kc ? src[(2 * p + 1) * cs] : 0.f);
        }
        for (int64_t p = pairs; p < d; ++p) out[a_at(i, p)] = 0;
      }
      for (int64_t i = mr; i < MR; ++i)
        for (int64_t p = 0; p < d; p += kStep) std::fill(out + a_at(i, p), out + a_at(i, p) + kStep, 0u);
    }
  }

  // NR-column panel `p` of the kc x nc block of B (element (k,j) at b[k * rs + j * cs]) as d
  // rows of NR pairs; columns past nc and pairs past K are zero.
  static void pack_b_panel(int64_t p, int64_t kc, int64_t nc, const float* b, int64_t rs, int64_t cs,
                           uint32_t* out) {
    const int64_t j0 = p * NR, d = depth(kc);
    pack_b_pairs<NR>(kc, d, std::min(NR, nc - j0), b + j0 * cs, rs, cs, out + p * NR * d);
  }
};

}  // namespace amx

GemmKernel amx_bf16() { return amx::entry<amx::AmxBf16Kernel>(); }

// The int8 product's AMX kernel (runtime/cpu/int8_gemm.cpp runs the loops): tdpbusd multiplies
// 16 rows x 64 unsigned codes of A by 16 quads x 16 columns of signed codes of B (four codes of
// each column per 64-byte row: Int8PackedWeights' panel layout as it is) and adds each group of
// four products into an int32: exact, as every int8 path's sums are. The tile of C is 32 x 32
// (tmm0..3), the same shape as the bf16 kernel's.
//
// A is read where it lies: row r of the 32 at a + r * lda, its K in n_taps runs of seg codes (a
// multiple of 64) at taps[t] from there, and B's panels run through the taps in order, seg / 4
// quads each. A stride-1 convolution's image, channels last (runtime/cpu/int8_gemm.h's
// Int8Image), is such an A as it is: a row is an output pixel, a run a kernel tap's input pixel,
// so a tile load reads 16 pixels' next 64 channels straight from the image, which the L2 holds.
// A matrix of rows (gathered, amx_int8_tiles) is the case of one tap.
void amx_int8_tiles_taps(const uint8_t* a, int64_t lda, const int64_t* taps, int64_t n_taps, int64_t seg,
                         const int8_t* b0, const int8_t* b1, int32_t* c) {
  amx::taps_tiles<false>(a, lda, taps, n_taps, seg, reinterpret_cast<const uint8_t*>(b0),
                         reinterpret_cast<const uint8_t*>(b1), c);
}

// A matrix's rows (a + r * lda, kq codes each) are an image of one tap.
void amx_int8_tiles(const uint8_t* a, int64_t lda, const int8_t* b0, const int8_t* b1, int64_t kq, int32_t* c) {
  const int64_t at_row = 0;
  amx_int8_tiles_taps(a, lda, &at_row, 1, kq, b0, b1, c);
}

// One 16 x 16 tile of int32 sums (row-major, rows i0.., columns j0..) through the int8 epilogue
// into y, `rows` x `cols` of it: fma(float(sum - offset), scale, bias), then ReLU, the same
// operations in the same order as every int8 path's store (so the same bits). A convolution's
// output (y_row == 1: a channel's pixels contiguous) is transposed in registers first, so that
// each channel's pixels go out in one masked store.
void amx_int8_store(const int32_t* tile, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                    const Int8Epilogue& e, float* y, int64_t y_row, int64_t y_col) {
  const __mmask16 col_mask = (__mmask16)((1u << cols) - 1), row_mask = (__mmask16)((1u << rows) - 1);
  __m512i r[16];
  amx::int8_epilogue(tile, e, j0, cols, r);
  if (y_col == 1) {
    for (int64_t i = 0; i < rows; ++i) _mm512_mask_storeu_epi32(y + (i0 + i) * y_row + j0, col_mask, r[i]);
    return;
  }
  if (y_row == 1) {
    amx::transpose16(r);  // r[c] = column c: its 16 rows
    for (int64_t c = 0; c < cols; ++c) _mm512_mask_storeu_epi32(y + i0 + (j0 + c) * y_col, row_mask, r[c]);
    return;
  }
  alignas(64) float out[256];
  for (int i = 0; i < 16; ++i) _mm512_store_si512(out + i * 16, r[i]);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) y[(i0 + i) * y_row + (j0 + c) * y_col] = out[i * 16 + c];
}

// A tile whose rows are not one run of y's rows: tile row r goes to y's row dest[r], or nowhere
// where dest[r] < 0 (a stride-1 convolution's rows past an image row's end, Int8Image). For a
// convolution's output (y_row == 1) each run of rows with consecutive destinations goes out in
// one masked store a channel, packed to the run's start by vpcompressd; other layouts row by row.
void amx_int8_store_mapped(const int32_t* tile, const int64_t* dest, int64_t rows, int64_t j0, int64_t cols,
                           const Int8Epilogue& e, float* y, int64_t y_row, int64_t y_col) {
  __m512i r[16];
  amx::int8_epilogue(tile, e, j0, cols, r);
  if (y_row != 1) {
    const __mmask16 col_mask = (__mmask16)((1u << cols) - 1);
    for (int64_t i = 0; i < rows; ++i) {
      if (dest[i] < 0) continue;
      float* out = y + dest[i] * y_row + j0 * y_col;
      if (y_col == 1) {
        _mm512_mask_storeu_epi32(out, col_mask, r[i]);
      } else {
        alignas(64) float v[16];
        _mm512_store_si512(v, r[i]);
        for (int64_t c = 0; c < cols; ++c) out[c * y_col] = v[c];
      }
    }
    return;
  }
  amx::transpose16(r);  // r[c] = column c: its 16 rows
  amx::store_columns_mapped(r, dest, rows, j0, cols, y, y_col);
}

// ---- bf16 convolutions on tiles (ops/cpu/conv_amx.h) ----

void amx_bf16_image(const float* x, int64_t C, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t Wp,
                    uint32_t* dst) {
  const int64_t P = C / 2, plane = H * W;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t w0 = 0; w0 < W; w0 += 16) {
      const int64_t n = std::min<int64_t>(16, W - w0);
      const __mmask16 mask = (__mmask16)((1u << n) - 1);
      uint32_t* out = dst + ((h + ph) * Wp + w0 + pw) * P;
      for (int64_t c0 = 0; c0 < C; c0 += 32) {
        __m512i r[16];
        for (int q = 0; q < 16; ++q) {
          const float* even = x + (c0 + 2 * q) * plane + h * W + w0;
          r[q] = amx::pairs_of_two(_mm512_maskz_loadu_ps(mask, even), _mm512_maskz_loadu_ps(mask, even + plane));
        }
        amx::transpose16(r);  // r[i] = pixel i's 16 pairs of channels
        for (int64_t i = 0; i < n; ++i) _mm512_storeu_si512(out + i * P + c0 / 2, r[i]);
      }
    }
}

void amx_bf16_conv_tiles(const uint32_t* a, int64_t pixel, const int64_t* tap_bytes, int64_t n_taps, int64_t seg,
                         const uint32_t* b0, const uint32_t* b1, float* c) {
  amx::taps_tiles<true>(reinterpret_cast<const uint8_t*>(a), pixel * 4, tap_bytes, n_taps, seg * 4,
                        reinterpret_cast<const uint8_t*>(b0), reinterpret_cast<const uint8_t*>(b1), c);
}

void amx_f32_store_mapped(const float* tile, const int64_t* dest, int64_t j0, int64_t cols, const float* bias,
                          float* y, int64_t y_col) {
  const __mmask16 col_mask = (__mmask16)((1u << cols) - 1);
  const __m512 b = bias ? _mm512_maskz_loadu_ps(col_mask, bias + j0) : _mm512_setzero_ps();
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_castps_si512(_mm512_add_ps(_mm512_load_ps(tile + i * 16), b));
  amx::transpose16(r);  // r[c] = column c: its 16 rows
  amx::store_columns_mapped(r, dest, 16, j0, cols, y, y_col);
}

// ---- bf16 weight gradients on tiles (ops/cpu/conv_amx.h) ----

void amx_bf16_pitched_planes(const float* x, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left,
                             int64_t pitch, int64_t length, uint16_t* dst) {
  for (int64_t c = 0; c < C; ++c) {
    uint16_t* plane = dst + c * length;
    std::fill(plane, plane + length, uint16_t(0));
    for (int64_t h = 0; h < H; ++h) {
      const float* src = x + (c * H + h) * W;
      uint16_t* out = plane + (top + h) * pitch + left;
      for (int64_t w0 = 0; w0 < W; w0 += 16) {
        const __mmask16 mask = (__mmask16)((1u << std::min<int64_t>(16, W - w0)) - 1);
        const __m256i v = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, src + w0));
        _mm256_mask_storeu_epi16(out + w0, mask, v);
      }
    }
  }
}

void amx_bf16_pixel_pairs(const uint16_t* planes, int64_t C, int64_t length, int64_t L, uint32_t* xi) {
  for (int64_t q0 = 0; q0 < L; q0 += 16)
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
      __m512i r[16];
      for (int i = 0; i < 16; ++i) {
        const uint16_t* at = planes + (c0 + i) * length + q0;
        const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
        const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 1)));
        r[i] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));  // channel c0 + i's pairs of pixels q0 ..
      }
      amx::transpose16(r);  // r[j] = pixel q0 + j's pairs of 16 channels
      uint32_t* slab = xi + (c0 / 32) * L * 32 + c0 % 32;
      for (int j = 0; j < 16; ++j) _mm512_store_si512(slab + (q0 + j) * 32, r[j]);
    }
}

void amx_bf16_wgrad_tiles(const uint16_t* const* a, const uint32_t* const* b, int64_t count, int64_t steps,
                          int64_t lda, int64_t ldb, float* c, bool accumulate) {
  amx_configure_tiles();
  constexpr int64_t kRow = 64;
  if (accumulate) {
    _tile_loadd(0, c, kRow);
    _tile_loadd(1, c + 256, kRow);
    _tile_loadd(2, c + 512, kRow);
    _tile_loadd(3, c + 768, kRow);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const int64_t a_stride = lda * (int64_t)sizeof(uint16_t), b_stride = ldb * (int64_t)sizeof(uint32_t);
  for (int64_t i = 0; i < count; ++i) {
    const uint16_t* ai = a[i];
    const uint32_t* bi = b[i];
    for (int64_t s = 0; s < steps; ++s) {
      const uint16_t* at = ai + s * 32;
      const uint32_t* bt = bi + s * 16 * ldb;
      _tile_loadd(4, at, a_stride);
      _tile_loadd(5, at + 16 * lda, a_stride);
      _tile_loadd(6, bt, b_stride);
      _tile_loadd(7, bt + 16, b_stride);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, kRow);
  _tile_stored(1, c + 256, kRow);
  _tile_stored(2, c + 512, kRow);
  _tile_stored(3, c + 768, kRow);
}

}  // namespace ocrt::cpu::detail

#pragma GCC diagnostic pop
#pragma GCC pop_options

#endif  // OCRT_CPU_SGEMM
