// The int8 matrix product behind int8 inference (models/int8.h, docs/int8.md): 7-bit unsigned
// activation codes times signed 8-bit weights, summed exactly in int32, then scaled back to
// float32 per output column.
//
//   y[i * y_row + j * y_col] = (sum_k A[i][k] * B[k][j] - offset[j]) * scale[j] + bias[j]
//
// A (M x K) holds activation codes in [0, 127]; B (K x N) weight codes in [-127, 127], packed
// once (Int8PackedWeights). Why 7 bits for the activations: the AVX2 kernel multiplies with
// vpmaddubsw, which adds two products of an unsigned and a signed byte into a saturating int16.
// With codes up to 127 the pair sum is at most 2 x 127 x 127 = 32258 < 32767, so it never
// saturates and every sum is exact: the kernel's integer result equals the plain loop's bit for
// bit (tests/runtime/test_int8_gemm.cpp). The int32 sums stay exact up to K = 2^31 / 16129 =
// 133,000 (the constructor checks K).
//
// Paths (runtime/cpu_isa.h): avx2 and up run the vpmaddubsw kernel (a 6 x 16 tile, two products
// per byte pair, the int16 pairs widened by vpmaddwd: on Zen 3 twice float32's FMA rate); CPUs
// with AVX512_VNNI on the avx512 path or above run the vpdpbusd kernels (four products and their
// sum per instruction, one zmm of 16 columns; two panels side by side where B has them, so that
// each broadcast row feeds two instructions: 1.0-1.1 -> 1.45-1.63 TOP/s on 2 Zen 5 cores;
// runtime/cpu_isa.h's cpu_has_avx512_vnni); generic runs the plain loops. Every kernel gives the
// same int32 sums.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

namespace ocrt::cpu {

constexpr int kInt8CodeMax = 127;  // activation codes are 0..127, weight codes -127..127

// The kernel's tile: MR rows of A by NR columns of B, K in steps of 4.
constexpr int64_t kInt8MR = 6, kInt8NR = 16;

// B (K x N) packed into NR-column panels: for each step q of 4 values of k, the 4 codes
// B[4q..4q+3][j] of column j for j = 0..7 of the panel, then j = 8..15 (64 bytes a step). K is
// padded to a multiple of 4 and N to one of NR with zero codes. Also keeps each column's sum of
// codes, which a caller whose activation codes carry an offset subtracts (offset x sum).
class Int8PackedWeights {
 public:
  // B[k][j] = w[j * w_col + k * w_k]: a Linear's weight (N x K, row-major) is w_col = K, w_k = 1.
  Int8PackedWeights(int64_t K, int64_t N, const int8_t* w, int64_t w_col, int64_t w_k);
  int64_t rows() const { return K_; }
  int64_t cols() const { return N_; }
  int64_t padded_rows() const { return Kp_; }
  const std::vector<int32_t>& column_sums() const { return sums_; }
  // NR-column panel p (columns p*NR ..), Kp/4 steps of 64 bytes.
  const int8_t* panel(int64_t p) const { return data_.get() + p * Kp_ * kInt8NR; }
  size_t bytes() const { return (size_t)(Kp_ * Np_); }

 private:
  int64_t K_, N_, Kp_, Np_;
  std::unique_ptr<int8_t, void (*)(void*)> data_{nullptr, std::free};
  std::vector<int32_t> sums_;
};

// Per output column: y = (sum - offset[j]) * scale[j] + bias[j], then max(y, 0) with relu. offset
// and bias may be null (0).
struct Int8Epilogue {
  const float* scale = nullptr;
  const int32_t* offset = nullptr;
  const float* bias = nullptr;
  bool relu = false;
};

// How the kernels read A: by pointers, never through a packed copy. K is split into `segments`
// runs of the same length (Kp / segments codes, a multiple of 4); rows(i0, rows, ptrs) sets
// ptrs[s * kInt8MR + r], for r = 0 .. kInt8MR - 1, to where row i0 + r's codes of segment s
// begin. Rows past `rows` (at the end of A) must point at valid codes too, in [0, 127] (the last
// row again will do): their sums are never stored. A matrix of rows has one segment; a
// convolution's segments are its kernel taps, so that each output pixel's row points into the
// image once per tap and no im2col matrix is ever made (models/int8.cpp).
//
// A stride-1 convolution may also describe its image (Int8Image), for kernels that load tiles of
// A straight from memory (AMX): row i = (oh, ow) of A, output pixel ow of output row oh, is pixel
// oh * pitch + ow of the padded image, each tap's codes a fixed distance on. Rows of A are then
// evenly spaced if the product runs over pitch pixels a row, the last pitch - width of each
// computed and never stored, and a tile of 16 rows loads with one stride. The rows callback
// stays the description every kernel can use.
struct Int8Image {
  const uint8_t* codes = nullptr;  // pixel p's codes at codes + p * pixel, at least
                                   // int8_image_codes(image, M) codes readable (values 0..127)
  int64_t pixel = 0;               // codes a pixel (the segment length)
  int64_t width = 0;               // output pixels a row
  int64_t pitch = 0;               // pixels a row of the padded image, >= width
  std::vector<int64_t> taps;       // where each segment starts, in codes from the row's pixel
};

struct Int8A {
  int64_t segments = 1;
  std::function<void(int64_t i0, int64_t rows, const uint8_t** ptrs)> rows;
  const Int8Image* image = nullptr;  // optional (above)
};

// How many codes of image.codes a product of M rows (M / width output rows) may read: the rows
// run on to a multiple of 32 pixels, and the last one's taps beyond that.
int64_t int8_image_codes(const Int8Image& image, int64_t M);

// A held as rows of codes: A[i][k] = a[i * lda + k] for k < Kp (the caller's rows hold Kp
// codes, those past K in 0..127).
Int8A int8_rows(const uint8_t* a, int64_t lda);

// The product above for M rows of A. Threads: outside an OpenMP parallel region, with parallel
// set, the row panels are shared by omp_get_max_threads() threads; the result is the same for
// any count. Inside a parallel region (or parallel false) it runs on the calling thread.
void int8_gemm(int64_t M, const Int8A& a, const Int8PackedWeights& B, const Int8Epilogue& e, float* y,
               int64_t y_row, int64_t y_col, bool parallel = true);

// The epilogue int8_gemm's kernels end a tile with, on its own: acc (kInt8MR x kInt8NR int32,
// row-major; all of it readable) holds the sums of rows i0 .. i0 + rows - 1 (rows <= kInt8MR) and
// columns j0 .. j0 + cols - 1 (cols <= kInt8NR), written to y as int8_gemm writes them. Products
// that sum otherwise (int8_winograd.h) end here, so that the same sums give the same floats.
void int8_store_tile(const int32_t* acc, int64_t i0, int64_t rows, int64_t j0, int64_t cols, const Int8Epilogue& e,
                     float* y, int64_t y_row, int64_t y_col);

// The same with the plain loops, whatever the CPU (tests compare the kernels with it).
void int8_gemm_reference(int64_t M, const Int8A& a, const Int8PackedWeights& B, const Int8Epilogue& e,
                         float* y, int64_t y_row, int64_t y_col);

// codes[i] = clamp(round(x[i] * inv_scale), lo, hi) + offset, rounding to nearest, ties to even;
// a NaN becomes lo + offset. Needs 0 <= lo + offset and hi + offset <= 255. AVX2 where int8_gemm's
// kernel is (16 lanes of AVX-512 on the avx512 path and above), the same codes as the plain loop
// (tests compare them on every path).
void int8_quantize(const float* x, int64_t n, float inv_scale, int lo, int hi, int offset, uint8_t* codes);
void int8_quantize_reference(const float* x, int64_t n, float inv_scale, int lo, int hi, int offset, uint8_t* codes);

// dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols: a block of codes
// transposed (an image's channel planes to channels-last pixels), 16 x 16 bytes at a time with
// SSE2 on x86-64 (the remainders, and other CPUs, byte by byte).
void transpose_bytes(const uint8_t* src, int64_t rows, int64_t cols, int64_t src_stride, uint8_t* dst,
                     int64_t dst_stride);

// Whether int8_gemm runs a SIMD kernel on this machine (the avx2 path or better), and its name.
bool int8_gemm_simd();
const char* int8_gemm_kernel_name();
// Whether that kernel is the AVX2 one (vpmaddubsw: no VNNI, no AMX), where 3x3 layers gain by
// Winograd in integers (int8_winograd.h).
bool int8_gemm_avx2_kernel();

}  // namespace ocrt::cpu
