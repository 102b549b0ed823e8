// Between runtime/cpu/gemm.cpp (which picks a kernel) and runtime/cpu/gemm_<isa>.cpp (which hold them):
// the arguments of one product and the entry points of each compiled kernel. Besides them only
// the loops that drive the AMX kernels read it: the int8 product (runtime/cpu/int8_gemm.cpp) and
// the bf16 convolutions on tiles (ops/cpu/conv_amx.cpp).
#pragma once

#include <omp.h>

#include <cstdint>
#include <vector>

#include "runtime/cpu/gemm.h"
#include "runtime/cpu/int8_gemm.h"

namespace ocrt::cpu::detail {

// A stride-1 convolution whose product runs over its padded image's whole rows (pitch pixels a
// row; int8_gemm.h's Int8Image, ops/cpu/conv_amx.h): where each pixel's row of sums goes, for
// the blocks of 32 pixels that cover rows_out output rows of `width` pixels: output index
// oh * width + ow, or -1 for a pixel past its row's width or past the last output row.
inline std::vector<int64_t> pitched_destinations(int64_t rows_out, int64_t width, int64_t pitch) {
  const int64_t V = (rows_out - 1) * pitch + width, blocks = (V + 31) / 32;
  std::vector<int64_t> dest((size_t)(blocks * 32));
  for (int64_t v = 0; v < blocks * 32; ++v) {
    const int64_t oh = v / pitch, ow = v - oh * pitch;
    dest[(size_t)v] = v < V && ow < width ? oh * width + ow : -1;
  }
  return dest;
}

// work(q0, q1, b0, b1) over `pairs` pairs of weight panels and `blocks` blocks of 32 pixels, on
// `threads` threads: each thread a share of the pairs, or of the blocks where there are fewer
// pairs than threads (one image's product on the AMX tiles; every sum is made alike whatever the
// split).
template <class Work>
void share_pairs_or_blocks(int threads, int64_t pairs, int64_t blocks, const Work& work) {
  if (threads <= 1 || (pairs < 2 && blocks < 2)) return work(0, pairs, 0, blocks);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (pairs >= nt)
      work(t * pairs / nt, (t + 1) * pairs / nt, 0, blocks);
    else
      work(0, pairs, t * blocks / nt, (t + 1) * blocks / nt);
  }
}

// One product C (M,N) = (accumulate ? C : 0) + A (M,K) @ B (K,N); strides as in sgemm().
struct GemmArgs {
  int64_t M, N, K;
  const float* A;
  int64_t a_row, a_col;
  const float* B;
  int64_t b_row, b_col;
  float* C;
  int64_t ldc;
  bool accumulate;
  // B already packed by the kernel's pack_b (every block, in the order the loops visit them), or
  // null: pack it here (SgemmReusedB in gemm.h).
  const void* packed_b = nullptr;
  // A already packed by the kernel's pack_a_all (every KC block of all of A's MR-row panels), or
  // null: pack it here, block by block (SgemmPackedA in gemm.h). A itself is then not read.
  const void* packed_a = nullptr;
};

// A compiled kernel: its entry point and blocking.
struct GemmKernel {
  void (*run)(const GemmArgs&);
  SgemmBlocking blocking;
  // B (K x N of args, whose other fields are not read) packed whole: bytes needed, and the packing.
  int64_t (*packed_b_bytes)(int64_t K, int64_t N);
  void (*pack_b)(const GemmArgs&, void* out);
  // A (M x K of args, whose other fields are not read) packed whole, likewise.
  int64_t (*packed_a_bytes)(int64_t M, int64_t K);
  void (*pack_a_all)(const GemmArgs&, void* out);
};

// Each is defined in runtime/cpu/gemm_<isa>.cpp, compiled for that instruction set only inside its
// functions (#pragma GCC target), so the file builds for any x86-64 target; calling one on a CPU
// without the instruction set dies of an illegal instruction, so only gemm.cpp calls them.
GemmKernel avx2_f32();
GemmKernel avx2_bf16_rounded();  // operands rounded to bf16 while packing, float32 kernel
GemmKernel avx512_f32();
GemmKernel avx512_bf16_rounded();
GemmKernel avx512bf16_bf16();  // vdpbf16ps on bf16 pairs
GemmKernel amx_bf16();         // AMX tdpbf16ps on 16 x 16 tiles

// Loads the tile configuration every AMX kernel uses (eight tiles of 16 rows x 64 bytes) on the
// calling thread, once; the amx path only (runtime/cpu/gemm_amx.cpp).
void amx_configure_tiles();

// The AMX int8 tiles (runtime/cpu/int8_gemm.cpp): 32 rows of A (unsigned codes, row r at
// a + r * lda, kq codes each, kq a multiple of 64) times two 16-column panels of packed weights
// (b0, b1; b1 null: b0 alone), each read for kq / 4 rows of 64 bytes. The int32 sums go to c as
// four 16 x 16 tiles, row-major: rows 0-15 x b0, rows 0-15 x b1, rows 16-31 x b0, rows 16-31 x b1.
void amx_int8_tiles(const uint8_t* a, int64_t lda, const int8_t* b0, const int8_t* b1, int64_t kq, int32_t* c);

// The same tiles with A read in place from a stride-1 convolution's image (Int8Image): row r at
// a + r * lda, its n_taps runs of seg codes (seg a multiple of 64) at taps[t] from there.
void amx_int8_tiles_taps(const uint8_t* a, int64_t lda, const int64_t* taps, int64_t n_taps, int64_t seg,
                         const int8_t* b0, const int8_t* b1, int32_t* c);

// One of those 16 x 16 tiles (64-byte aligned) through the int8 epilogue into y, rows x cols of it
// at (i0, j0), with AVX-512 (the amx path has it): the same bits as the other int8 stores.
void amx_int8_store(const int32_t* tile, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                    const Int8Epilogue& e, float* y, int64_t y_row, int64_t y_col);

// The same store for a tile whose row r goes to y's row dest[r] (none where dest[r] < 0).
void amx_int8_store_mapped(const int32_t* tile, const int64_t* dest, int64_t rows, int64_t j0, int64_t cols,
                           const Int8Epilogue& e, float* y, int64_t y_row, int64_t y_col);

// bf16 convolutions on AMX tiles (ops/cpu/conv_amx.h has the whole layer):
// One image of C planes (H x W float32, C a multiple of 32) into channels-last bf16 pairs of
// channels (runtime/bf16.h's pairs, rounded as the bf16 kernels round): pixel (h + ph, w + pw) of
// an image Wp pixels wide gets C / 2 pairs at dst + ((h + ph) * Wp + w + pw) * C / 2. The padding
// is left as it is (the caller zeroes it).
void amx_bf16_image(const float* x, int64_t C, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t Wp,
                    uint32_t* dst);
// Four 16 x 16 float32 tiles of sums, as amx_int8_tiles_taps's: 32 pixels' rows (row r at a + r *
// pixel pairs) times two 16-column panels of pair rows (b0, b1; null b1: b0 alone), n_taps taps of
// seg pairs each (a multiple of 16) at tap_bytes[t] bytes from a row's pixel; a panel holds
// n_taps * seg pair rows of 16 columns. c: rows 0-15 x b0, rows 0-15 x b1, rows 16-31 x b0, 16-31 x b1.
void amx_bf16_conv_tiles(const uint32_t* a, int64_t pixel, const int64_t* tap_bytes, int64_t n_taps, int64_t seg,
                         const uint32_t* b0, const uint32_t* b1, float* c);
// One of those tiles plus the bias of its columns into an NCHW output: tile row r (a pixel) to
// y[dest[r] + j * y_col] for its cols columns j0 + j, none where dest[r] < 0.
void amx_f32_store_mapped(const float* tile, const int64_t* dest, int64_t j0, int64_t cols, const float* bias,
                          float* y, int64_t y_col);

// bf16 weight gradients on AMX tiles (ops/cpu/conv_amx.h, amx_bf16_conv2d_weight_grad):
// C planes (H x W float32) as bf16 planes of `length` values each (plane c at dst + c * length),
// value (h, w) at (top + h) * pitch + left + w and zeros everywhere else; rounded as the bf16
// kernels round (vcvtneps2bf16).
void amx_bf16_pitched_planes(const float* x, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left,
                             int64_t pitch, int64_t length, uint16_t* dst);
// Pairs of neighbouring pixels, in slabs of 32 channels, channels last in each: the bf16 pair
// (planes[c][q], planes[c][q + 1]) at xi[(c / 32) * L * 32 + q * 32 + c % 32] for q < L (a
// multiple of 16), C a multiple of 32. Reads each plane up to value L + 16 (length > L + 16).
void amx_bf16_pixel_pairs(const uint16_t* planes, int64_t C, int64_t length, int64_t L, uint32_t* xi);
// Four 16 x 16 float32 tiles (c: rows 0-15 x columns 0-15, 0-15 x 16-31, 16-31 x 0-15, 16-31 x
// 16-31) of sum over i < count, pixel pairs of A's rows against B: A's 32 rows at a[i] (row r at
// a[i] + r * lda bf16 values, K along the row), B's K at b[i] as rows of pairs (pair row p of a
// step at b[i] + p * ldb, 32 columns of pairs); `steps` steps of 32 values of K each. accumulate:
// added to what c holds.
void amx_bf16_wgrad_tiles(const uint16_t* const* a, const uint32_t* const* b, int64_t count, int64_t steps,
                          int64_t lda, int64_t ldb, float* c, bool accumulate);

// out[i] = the bf16 bits of src[i] by the instruction the bf16 kernel packs with (vcvtne2ps2bf16),
// for n a multiple of 32; tests compare it with runtime/bf16.h on every exponent.
void avx512bf16_convert(const float* src, int64_t n, uint16_t* out);

}  // namespace ocrt::cpu::detail
