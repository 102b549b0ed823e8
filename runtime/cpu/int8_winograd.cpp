// int8 3x3 convolutions through Winograd's F(4x4, 3x3) or F(2x2, 3x3) in exact integers (see
// int8_winograd.h).
//
// F(2x2, 3x3): for a 4x4 tile d of codes and a 3x3 filter g (Lavin and Gray's F(2, 3) in each
// direction, the filter's side scaled by 2 so that it stays in integers):
//   B^T = [ 1  0 -1  0 ]     2G = [ 2  0  0 ]     A^T = [ 1  1  1  0 ]
//         [ 0  1  1  0 ]          [ 1  1  1 ]           [ 0  1 -1 -1 ]
//         [ 0 -1  1  0 ]          [ 1 -1  1 ]
//         [ 0  1  0 -1 ]          [ 0  0  2 ]
//   V = B^T d B (16 values),  U = (2G) g (2G)^T (16 values),  Y = A^T (sum_c U * V) A = 4 x the sums.
//
// F(4x4, 3x3): for a 6x6 tile (F(4, 3) at the points 0, 1, -1, 2, -2 and infinity), G's rows
// scaled by s = (4, 6, 6, 24, 24, 1) into integers (G'), which A^T's columns take back, times 24
// (A'^T = 24 A^T diag(1/s), columns scaled by 24 / s = (6, 4, 4, 1, 1, 24)):
//   B^T = [ 4  0 -5  0  1  0 ]    G' = [  1  0  0 ]    A'^T = [ 6  4  4  1  1  0 ]
//         [ 0 -4 -4  1  1  0 ]         [ -1 -1 -1 ]           [ 0  4 -4  2 -2  0 ]
//         [ 0  4 -4 -1  1  0 ]         [ -1  1 -1 ]           [ 0  4  4  4  4  0 ]
//         [ 0 -2 -1  2  1  0 ]         [  1  2  4 ]           [ 0  4 -4  8 -8 24 ]
//         [ 0  2 -1 -2  1  0 ]         [  1 -2  4 ]
//         [ 0  4  0 -5  0  1 ]         [  0  0  1 ]
//   V = B^T d B (36 values, |V| <= 100 x 127), U = G' g G'^T (|U| <= 49 x 127),
//   Y = A'^T (sum_c U * V) A' = 576 x the sums, modulo 2^32 (int32 additions wrap). 576 = 2^6 x 9:
//   the top 26 bits of Y are 9 x the sum modulo 2^26, and 9's inverse modulo 2^32 (954437177)
//   gives the sum modulo 2^26, the sum itself where it lies in -2^25 .. 2^25 - 1 (the weights'
//   bound, checked per output channel when they are transformed: int8_winograd.h).
//
// Layout. Tiles (T x T outputs, T = 2 or 4) are numbered row of tiles by row of tiles (tile row
// ty makes output rows T ty .. T ty + T - 1); work goes in chunks of consecutive tiles:
//   V[xi][t][pair]: tile t's transformed codes (xi: one of the (T+2)^2 points), channel pairs as
//                   int32 (two int16), which are the rows of A of the products;
//   M[xi][t][16]:   the products' sums for one panel of 16 output channels;
//   then A^T M A for the chunk's tiles into T rows of pixels x 16 channels of int32, and the int8
//   product's own epilogue (int8_store_tile) from there into y, a row of tiles' run at a time.
// For each panel of output channels the chunk's V is read again (F(2x2): 24 tiles of 512
// channels are 400 KiB, from the L2; F(4x4): up to 48 tiles within 2 MiB, chunk_tiles says why);
// the panel of U (16 x C pairs, 16 KiB at 512 channels) stays in the L1.
#include "runtime/cpu/int8_winograd.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cpu_isa.h"
#include "runtime/error.h"

#if defined(OCRT_TARGET_ATTRS)
#include <immintrin.h>
#define OCRT_INT8_WINOGRAD_AVX2 1
#endif

namespace ocrt::cpu {

namespace {

constexpr int64_t MR = kInt8MR, NR = kInt8NR;
// int16 a tile of V: its pixel's channels and 16 more, so that the six tiles a product step
// reads are not a power of two apart (at 512 channels, 1 KiB apart, the six broadcast loads a
// step fell on the same L1 banks: the kernel ran at two thirds of its rate on one Zen 3 core).
int64_t tile_stride(int64_t pixel) { return pixel + 16; }

// Tiles a chunk holds at most (whole panels of MR). Each panel of U is read once a chunk and
// each chunk's V once a panel: F(4x4)'s U is 2.25 times F(2x2)'s (crnn's last layer: 19 MB, from
// the L3 at best), so its chunks are larger, up to the width of a text line's deep layers (26
// tiles, one chunk), within 2 MiB of V. (Zen 3, one core, bench_int8_winograd, crnn's five
// layers: F(4x4) in chunks of 12 tiles 510 ms, 24 478 ms, 36 444 ms, 48 447 ms; F(2x2) in
// chunks of 12, 24 and 48 equally fast within the noise.)
int64_t chunk_tiles(int64_t tile, int64_t pixel) {
  if (tile == 2) return 4 * MR;
  const int64_t fit = (int64_t(2) << 20) / (36 * 2 * tile_stride(pixel));
  return std::clamp(fit / MR * MR, MR, 8 * MR);
}

// -1: as the machine and OCRT_INT8_WINOGRAD say; 0 or 1: set_int8_winograd's choice.
std::atomic<int> g_forced{-1};
std::atomic<int64_t> g_min_channels{kInt8WinogradMinChannels};
// The largest tile a layer's weights may take (4 or 2): set_int8_winograd's, or -1 for
// OCRT_INT8_WINOGRAD's.
std::atomic<int> g_max_tile{-1};

bool machine_default() {
#if defined(OCRT_INT8_WINOGRAD_AVX2)
  const char* env = std::getenv("OCRT_INT8_WINOGRAD");
  if (env && std::string(env) == "0") return false;
  return int8_gemm_avx2_kernel();
#else
  return false;
#endif
}

int env_max_tile() {
  const char* env = std::getenv("OCRT_INT8_WINOGRAD");
  return env && std::string(env) == "2" ? 2 : 4;
}

#if defined(OCRT_INT8_WINOGRAD_AVX2)

// The sums of 6 rows of A (tiles: a[r] points at tile r's channel pairs) by one panel of U
// (steps pairs of 16 output channels) into c (6 x 16 int32, row stride 16).
OCRT_TARGET_AVX2 void kernel_avx2(const int32_t* const* a, int64_t steps, const int16_t* b, int32_t* c) {
  const int32_t *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
          c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t q = 0; q < steps; ++q, b += 2 * NR) {
    const __m256i b0 = _mm256_load_si256((const __m256i*)b), b1 = _mm256_load_si256((const __m256i*)(b + 16));
    __m256i av = _mm256_set1_epi32(a0[q]);
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(av, b0)), c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a1[q]);
    c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(av, b0)), c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a2[q]);
    c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(av, b0)), c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a3[q]);
    c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(av, b0)), c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a4[q]);
    c40 = _mm256_add_epi32(c40, _mm256_madd_epi16(av, b0)), c41 = _mm256_add_epi32(c41, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a5[q]);
    c50 = _mm256_add_epi32(c50, _mm256_madd_epi16(av, b0)), c51 = _mm256_add_epi32(c51, _mm256_madd_epi16(av, b1));
  }
  __m256i* out = (__m256i*)c;
  _mm256_storeu_si256(out + 0, c00), _mm256_storeu_si256(out + 1, c01);
  _mm256_storeu_si256(out + 2, c10), _mm256_storeu_si256(out + 3, c11);
  _mm256_storeu_si256(out + 4, c20), _mm256_storeu_si256(out + 5, c21);
  _mm256_storeu_si256(out + 6, c30), _mm256_storeu_si256(out + 7, c31);
  _mm256_storeu_si256(out + 8, c40), _mm256_storeu_si256(out + 9, c41);
  _mm256_storeu_si256(out + 10, c50), _mm256_storeu_si256(out + 11, c51);
}

// The (T + 2) x (T + 2) input pixels of tile g (tiles numbered image by image, P an image, and in
// an image row by row, tw a row): padded-image rows T ty .., columns T tx ..; past the image,
// the pad pixel.
template <int64_t T>
void tile_pixels(const uint8_t* const* images, int64_t P, int64_t tw, int64_t g, int64_t Hp, int64_t Wp,
                 int64_t pixel, const uint8_t* pad, const uint8_t* (&px)[T + 2][T + 2]) {
  const int64_t ty = g % P / tw, tx = g % P % tw;
  const uint8_t* image = images[g / P];
  for (int64_t i = 0; i < T + 2; ++i)
    for (int64_t j = 0; j < T + 2; ++j) {
      const int64_t r = T * ty + i, s = T * tx + j;
      px[i][j] = r < Hp && s < Wp ? image + (r * Wp + s) * pixel : pad;
    }
}

// V of nt tiles from tile p0 on (numbered as tile_pixels numbers them): the 16 pixels of each
// tile, 16 channels at a time as int16, through B^T . B; V[(xi * nt + t) * ts + c] as int16,
// ts = tile_stride(pixel).
OCRT_TARGET_AVX2 void input_tiles2(const uint8_t* const* images, int64_t P, int64_t Hp, int64_t Wp, int64_t pixel,
                                   const uint8_t* pad, int64_t tw, int64_t p0, int64_t nt, int16_t* V) {
  const int64_t ts = tile_stride(pixel);
  const int64_t vec_end = pixel / 16 * 16;
  for (int64_t t = 0; t < nt; ++t) {
    const uint8_t* px[4][4];
    tile_pixels<2>(images, P, tw, p0 + t, Hp, Wp, pixel, pad, px);
    int16_t* v0 = V + t * ts;
    const int64_t xi_stride = nt * ts;
    for (int64_t c = 0; c < vec_end; c += 16) {
      __m256i d[4][4];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) d[i][j] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(px[i][j] + c)));
      for (int j = 0; j < 4; ++j) {  // B^T down the columns
        const __m256i r0 = _mm256_sub_epi16(d[0][j], d[2][j]), r1 = _mm256_add_epi16(d[1][j], d[2][j]);
        const __m256i r2 = _mm256_sub_epi16(d[2][j], d[1][j]), r3 = _mm256_sub_epi16(d[1][j], d[3][j]);
        d[0][j] = r0, d[1][j] = r1, d[2][j] = r2, d[3][j] = r3;
      }
      for (int i = 0; i < 4; ++i) {  // then B along the rows
        int16_t* v = v0 + (i * 4) * xi_stride + c;
        _mm256_storeu_si256((__m256i*)v, _mm256_sub_epi16(d[i][0], d[i][2]));
        _mm256_storeu_si256((__m256i*)(v + xi_stride), _mm256_add_epi16(d[i][1], d[i][2]));
        _mm256_storeu_si256((__m256i*)(v + 2 * xi_stride), _mm256_sub_epi16(d[i][2], d[i][1]));
        _mm256_storeu_si256((__m256i*)(v + 3 * xi_stride), _mm256_sub_epi16(d[i][1], d[i][3]));
      }
    }
    for (int64_t c = vec_end; c < pixel; ++c) {  // channels past the last 16 (pixel a multiple of 4)
      int d[4][4];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) d[i][j] = px[i][j][c];
      for (int j = 0; j < 4; ++j) {
        const int r0 = d[0][j] - d[2][j], r1 = d[1][j] + d[2][j], r2 = d[2][j] - d[1][j], r3 = d[1][j] - d[3][j];
        d[0][j] = r0, d[1][j] = r1, d[2][j] = r2, d[3][j] = r3;
      }
      for (int i = 0; i < 4; ++i) {
        int16_t* v = v0 + (i * 4) * xi_stride + c;
        v[0] = (int16_t)(d[i][0] - d[i][2]);
        v[xi_stride] = (int16_t)(d[i][1] + d[i][2]);
        v[2 * xi_stride] = (int16_t)(d[i][2] - d[i][1]);
        v[3 * xi_stride] = (int16_t)(d[i][1] - d[i][3]);
      }
    }
  }
}

// A^T M A for nt tiles (M[(xi * ntp + t) * 16 + channel]) divided by 4 (exact), into two rows of
// pixels: out[h][(2 t + w) * 16 + channel] for output row h and column w of tile t.
OCRT_TARGET_AVX2 void output_tiles2(const int32_t* M, int64_t ntp, int64_t nt, int32_t* const* out) {
  int32_t *out0 = out[0], *out1 = out[1];
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t h = 0; h < 2; ++h) {
      __m256i m[16];
      for (int xi = 0; xi < 16; ++xi) m[xi] = _mm256_loadu_si256((const __m256i*)(M + (xi * ntp + t) * NR + 8 * h));
      __m256i s0[4], s1[4];
      for (int j = 0; j < 4; ++j) {
        s0[j] = _mm256_add_epi32(_mm256_add_epi32(m[j], m[4 + j]), m[8 + j]);
        s1[j] = _mm256_sub_epi32(_mm256_sub_epi32(m[4 + j], m[8 + j]), m[12 + j]);
      }
      const __m256i y00 = _mm256_add_epi32(_mm256_add_epi32(s0[0], s0[1]), s0[2]);
      const __m256i y01 = _mm256_sub_epi32(_mm256_sub_epi32(s0[1], s0[2]), s0[3]);
      const __m256i y10 = _mm256_add_epi32(_mm256_add_epi32(s1[0], s1[1]), s1[2]);
      const __m256i y11 = _mm256_sub_epi32(_mm256_sub_epi32(s1[1], s1[2]), s1[3]);
      _mm256_storeu_si256((__m256i*)(out0 + (2 * t) * NR + 8 * h), _mm256_srai_epi32(y00, 2));
      _mm256_storeu_si256((__m256i*)(out0 + (2 * t + 1) * NR + 8 * h), _mm256_srai_epi32(y01, 2));
      _mm256_storeu_si256((__m256i*)(out1 + (2 * t) * NR + 8 * h), _mm256_srai_epi32(y10, 2));
      _mm256_storeu_si256((__m256i*)(out1 + (2 * t + 1) * NR + 8 * h), _mm256_srai_epi32(y11, 2));
    }
}

// F(4, 3)'s B^T on six values (codes, or the first pass's sums: both stay within int16). Compiled
// for AVX2 like its only caller, input_tiles4, so that Avx2Int16Ops' operations inline into it: in
// a build for the baseline x86-64 (OCRT_NATIVE=OFF) each was a call passing its vectors through
// memory, and the input transform took 3x its time.
template <class T, class Ops>
OCRT_TARGET_AVX2 inline void b_transform4(const T* d, T* r, Ops o) {
  const T a = o.sub(d[4], d[2]), b = o.sub(d[3], d[1]);
  r[0] = o.add(o.shl2(o.sub(d[0], d[2])), a);
  r[1] = o.sub(o.add(d[3], d[4]), o.shl2(o.add(d[1], d[2])));
  r[2] = o.add(o.sub(d[4], d[3]), o.shl2(o.sub(d[1], d[2])));
  r[3] = o.add(a, o.add(b, b));
  r[4] = o.sub(a, o.add(b, b));
  r[5] = o.add(o.shl2(o.sub(d[1], d[3])), o.sub(d[5], d[3]));
}

struct IntOps {
  static int add(int a, int b) { return a + b; }
  static int sub(int a, int b) { return a - b; }
  static int shl2(int a) { return 4 * a; }
};

struct Avx2Int16Ops {
  OCRT_TARGET_AVX2 static __m256i add(__m256i a, __m256i b) { return _mm256_add_epi16(a, b); }
  OCRT_TARGET_AVX2 static __m256i sub(__m256i a, __m256i b) { return _mm256_sub_epi16(a, b); }
  OCRT_TARGET_AVX2 static __m256i shl2(__m256i a) { return _mm256_slli_epi16(a, 2); }
};

// V of nt tiles from tile p0 on for F(4x4, 3x3): the 36 pixels of each tile through B^T . B,
// laid out as input_tiles2 lays out its 16.
OCRT_TARGET_AVX2 void input_tiles4(const uint8_t* const* images, int64_t P, int64_t Hp, int64_t Wp, int64_t pixel,
                                   const uint8_t* pad, int64_t tw, int64_t p0, int64_t nt, int16_t* V) {
  const int64_t ts = tile_stride(pixel), vec_end = pixel / 16 * 16, xi_stride = nt * ts;
  for (int64_t t = 0; t < nt; ++t) {
    const uint8_t* px[6][6];
    tile_pixels<4>(images, P, tw, p0 + t, Hp, Wp, pixel, pad, px);
    int16_t* v0 = V + t * ts;
    for (int64_t c = 0; c < vec_end; c += 16) {
      __m256i e[6][6];  // B^T d: e[row][column]
      for (int j = 0; j < 6; ++j) {
        __m256i d[6], r[6];
        for (int i = 0; i < 6; ++i) d[i] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(px[i][j] + c)));
        b_transform4(d, r, Avx2Int16Ops{});
        for (int i = 0; i < 6; ++i) e[i][j] = r[i];
      }
      for (int i = 0; i < 6; ++i) {  // then B along the rows
        __m256i r[6];
        b_transform4(e[i], r, Avx2Int16Ops{});
        for (int k = 0; k < 6; ++k) _mm256_storeu_si256((__m256i*)(v0 + (i * 6 + k) * xi_stride + c), r[k]);
      }
    }
    for (int64_t c = vec_end; c < pixel; ++c) {  // channels past the last 16 (pixel a multiple of 4)
      int e[6][6];
      for (int j = 0; j < 6; ++j) {
        int d[6], r[6];
        for (int i = 0; i < 6; ++i) d[i] = px[i][j][c];
        b_transform4(d, r, IntOps{});
        for (int i = 0; i < 6; ++i) e[i][j] = r[i];
      }
      for (int i = 0; i < 6; ++i) {
        int r[6];
        b_transform4(e[i], r, IntOps{});
        for (int k = 0; k < 6; ++k) v0[(i * 6 + k) * xi_stride + c] = (int16_t)r[k];
      }
    }
  }
}

// A'^T on six int32 vectors (products' sums, or the first pass's), all modulo 2^32.
OCRT_TARGET_AVX2 inline void a_transform4(const __m256i* m, __m256i* t) {
  const __m256i p = _mm256_add_epi32(m[1], m[2]), q = _mm256_sub_epi32(m[1], m[2]);
  const __m256i r = _mm256_add_epi32(m[3], m[4]), s = _mm256_sub_epi32(m[3], m[4]);
  const __m256i q4 = _mm256_slli_epi32(q, 2);
  t[0] = _mm256_add_epi32(_mm256_add_epi32(_mm256_mullo_epi32(m[0], _mm256_set1_epi32(6)), _mm256_slli_epi32(p, 2)), r);
  t[1] = _mm256_add_epi32(q4, _mm256_slli_epi32(s, 1));
  t[2] = _mm256_slli_epi32(_mm256_add_epi32(p, r), 2);
  t[3] = _mm256_add_epi32(_mm256_add_epi32(q4, _mm256_slli_epi32(s, 3)), _mm256_mullo_epi32(m[5], _mm256_set1_epi32(24)));
}

// A'^T M A' for nt tiles (M[(xi * ntp + t) * 16 + channel]), 576 x the sums modulo 2^32, and the
// sums from it (the file's head), into four rows of pixels: out[h][(4 t + w) * 16 + channel].
OCRT_TARGET_AVX2 void output_tiles4(const int32_t* M, int64_t ntp, int64_t nt, int32_t* const* out) {
  const __m256i inverse9 = _mm256_set1_epi32((int32_t)954437177u);
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t h = 0; h < 2; ++h) {
      __m256i s[4][6];  // A'^T M: s[output row][column]
      for (int j = 0; j < 6; ++j) {
        __m256i m[6], r[4];
        for (int i = 0; i < 6; ++i) m[i] = _mm256_loadu_si256((const __m256i*)(M + ((i * 6 + j) * ntp + t) * NR + 8 * h));
        a_transform4(m, r);
        for (int k = 0; k < 4; ++k) s[k][j] = r[k];
      }
      for (int k = 0; k < 4; ++k) {
        __m256i y[4];
        a_transform4(s[k], y);
        for (int w = 0; w < 4; ++w) {
          const __m256i z = _mm256_mullo_epi32(_mm256_srli_epi32(y[w], 6), inverse9);  // the sum modulo 2^26
          _mm256_storeu_si256((__m256i*)(out[k] + (4 * t + w) * NR + 8 * h),
                              _mm256_srai_epi32(_mm256_slli_epi32(z, 6), 6));
        }
      }
    }
}

// A thread's buffers, grown as needed and kept between calls (a few MB at most).
struct Scratch {
  std::vector<int16_t> v;  // V: points x chunk_tiles x tile_stride(pixel) int16, 32-byte aligned
  std::vector<int32_t> m;  // M: points x tiles (rounded up to MR) x 16
  std::vector<int32_t> rows;  // T rows of T chunk_tiles (+ MR) pixels x 16
  std::vector<uint8_t> pad;
};

#endif

}  // namespace

bool int8_winograd4_fits(int64_t Cout, int64_t C, const int8_t* w) {
  for (int64_t k = 0; k < Cout; ++k) {
    int64_t pos = 0, neg = 0;  // the sum's range: codes 0 .. 127 against the weights' signs
    for (int64_t i = 0; i < C * 9; ++i) (w[k * C * 9 + i] > 0 ? pos : neg) += 127 * std::abs((int)w[k * C * 9 + i]);
    if (pos > kInt8Winograd4Bound - 1 || neg > kInt8Winograd4Bound) return false;
  }
  return true;
}

Int8WinogradWeights::Int8WinogradWeights(int64_t Cout, int64_t C, const int8_t* w, int max_tile)
    : cout_(Cout), c_(C), pairs_((C + 1) / 2), panels_((Cout + NR - 1) / NR) {
  OCRT_CHECK(Cout >= 1 && C >= 1 && C <= kInt8WinogradMaxChannels, "Int8WinogradWeights: ", Cout, " x ", C,
             " channels (at most ", kInt8WinogradMaxChannels, " in)");
  OCRT_CHECK(max_tile == 2 || max_tile == 4, "Int8WinogradWeights: tiles of 2 or 4 outputs a side, not ", max_tile);
  tile_ = max_tile == 4 && int8_winograd4_fits(Cout, C, w) ? 4 : 2;
  const int n_side = (int)tile_ + 2;
  const size_t n = (size_t)(points() * panels_ * pairs_ * 2 * NR), bytes = (n * sizeof(int16_t) + 63) / 64 * 64;
  data_.reset((int16_t*)std::aligned_alloc(64, bytes));
  OCRT_CHECK(data_ != nullptr, "Int8WinogradWeights: out of memory (", bytes, " bytes)");
  std::memset(data_.get(), 0, bytes);
  static const int G2[4][3] = {{2, 0, 0}, {1, 1, 1}, {1, -1, 1}, {0, 0, 2}};
  static const int G4[6][3] = {{1, 0, 0}, {-1, -1, -1}, {-1, 1, -1}, {1, 2, 4}, {1, -2, 4}, {0, 0, 1}};
  const int(*G)[3] = tile_ == 4 ? G4 : G2;
  for (int64_t k = 0; k < Cout; ++k)
    for (int64_t c = 0; c < C; ++c) {
      const int8_t* g = w + (k * C + c) * 9;
      int t[6][3];  // G g
      for (int i = 0; i < n_side; ++i)
        for (int j = 0; j < 3; ++j) t[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
      for (int i = 0; i < n_side; ++i)
        for (int j = 0; j < n_side; ++j) {  // then G^T on the right
          const int u = G[j][0] * t[i][0] + G[j][1] * t[i][1] + G[j][2] * t[i][2];
          int16_t* step = data_.get() + ((i * n_side + j) * panels_ + k / NR) * pairs_ * 2 * NR + (c / 2) * 2 * NR;
          step[(k % NR) * 2 + c % 2] = (int16_t)u;
        }
    }
}

std::shared_ptr<const Int8WinogradWeights> shared_int8_winograd_weights(int64_t Cout, int64_t C, const int8_t* w,
                                                                        int max_tile) {
  struct Entry {
    int64_t cout, c;
    int max_tile;
    std::vector<int8_t> codes;  // a copy: the callers' own go with their models
    std::weak_ptr<const Int8WinogradWeights> made;
  };
  static std::mutex mu;
  static std::vector<Entry> entries;
  const size_t n = (size_t)(Cout * C * 9);
  std::lock_guard<std::mutex> lock(mu);
  entries.erase(std::remove_if(entries.begin(), entries.end(), [](const Entry& e) { return e.made.expired(); }),
                entries.end());
  for (const Entry& e : entries)
    if (e.cout == Cout && e.c == C && e.max_tile == max_tile && std::memcmp(e.codes.data(), w, n) == 0)
      if (auto held = e.made.lock()) return held;
  auto made = std::make_shared<const Int8WinogradWeights>(Cout, C, w, max_tile);
  entries.push_back({Cout, C, max_tile, std::vector<int8_t>(w, w + n), made});
  return made;
}

int64_t int8_winograd_images_per_call(const Int8WinogradWeights& U, int64_t pixel, int64_t H, int64_t W) {
  const int64_t T = U.tile(), tiles = ((H + T - 1) / T) * ((W + T - 1) / T);
  return std::max<int64_t>(1, (chunk_tiles(T, pixel) + tiles - 1) / tiles);
}

bool int8_winograd_enabled() {
  const int forced = g_forced.load();
  if (forced >= 0) return forced == 1;
  static const bool on = machine_default();
  return on;
}

int64_t int8_winograd_min_channels() { return g_min_channels.load(); }

std::string int8_path_description() {
  std::string d = std::string(int8_gemm_kernel_name()) + " kernel";
  if (int8_winograd_enabled())
    d += std::string(", 3x3 layers by integer Winograd F(") + (int8_winograd_max_tile() == 4 ? "4x4" : "2x2") + ")";
  return d;
}

int int8_winograd_max_tile() {
  const int forced = g_max_tile.load();
  if (forced > 0) return forced;
  static const int from_env = env_max_tile();
  return from_env;
}

void set_int8_winograd(bool on, int64_t min_channels, int max_tile) {
  OCRT_CHECK(min_channels >= 1, "set_int8_winograd: at least 1 channel, got ", min_channels);
  OCRT_CHECK(max_tile == 0 || max_tile == 2 || max_tile == 4, "set_int8_winograd: tiles of 2 or 4, or 0, not ", max_tile);
#if defined(OCRT_INT8_WINOGRAD_AVX2)
  OCRT_CHECK(!on || cpu_isa_supported(CpuIsa::avx2), "int8 Winograd needs AVX2, which this CPU lacks");
#else
  OCRT_CHECK(!on, "int8 Winograd needs AVX2 (an x86-64 build)");
#endif
  g_forced = on ? 1 : 0;
  g_min_channels = min_channels;
  g_max_tile = max_tile == 0 ? -1 : max_tile;
}

void int8_winograd_conv(const uint8_t* const* images, float* const* ys, int64_t count, int64_t H, int64_t W,
                        int64_t pixel, uint8_t pad_code, const Int8WinogradWeights& U, const Int8Epilogue& e,
                        int64_t y_row, int64_t y_col, bool parallel) {
#if defined(OCRT_INT8_WINOGRAD_AVX2)
  OCRT_CHECK(cpu_isa_supported(CpuIsa::avx2), "int8_winograd_conv needs AVX2");
  OCRT_CHECK(count >= 1 && H >= 1 && W >= 1 && pixel >= U.in_channels() && pixel % 4 == 0, "int8_winograd_conv: ",
             count, " images ", H, "x", W, " of ", pixel, " codes a pixel for ", U.in_channels(), " channels");
  OCRT_CHECK(e.scale != nullptr, "int8_winograd_conv: the epilogue needs a scale per channel");
  const int64_t T = U.tile(), points = U.points(), chunk = chunk_tiles(T, pixel);
  const int64_t Hp = H + 2, Wp = W + 2, th = (H + T - 1) / T, tw = (W + T - 1) / T;
  // Chunks of the images' tiles in row order, across rows of tiles and images: a narrow image
  // (a page's short lines: 25 tiles a row in crnn's deep layers) then wastes no part-filled
  // panel of 6 tiles at the end of each row, and a chunk of short lines' tiles reads U once for
  // them all. As few chunks as chunk_tiles allows, of whole panels, equal but for the last.
  const int64_t P = th * tw, items = (count * P + chunk - 1) / chunk;
  const int64_t per = ((count * P + items - 1) / items + MR - 1) / MR * MR;
  const int64_t Cout = U.out_channels(), panels = (Cout + NR - 1) / NR, steps = U.pairs();
  const int64_t row_len = (T * chunk + MR) * NR;  // a row of pixels' sums, and room for a last kernel tile
  auto item = [&](int64_t it, Scratch& s) {
    const int64_t p0 = it * per, nt = std::min(per, count * P - p0);  // (the last chunk may be empty)
    if (nt <= 0) return;
    const int64_t ntp = (nt + MR - 1) / MR * MR;
    s.v.resize((size_t)(points * chunk * tile_stride(pixel) + 16));
    int16_t* V = (int16_t*)(((uintptr_t)s.v.data() + 31) / 32 * 32);
    s.m.resize((size_t)(points * ((chunk + MR - 1) / MR * MR) * NR));
    s.rows.resize((size_t)(T * row_len));
    s.pad.assign((size_t)pixel, pad_code);
    if (T == 4)
      input_tiles4(images, P, Hp, Wp, pixel, s.pad.data(), tw, p0, nt, V);
    else
      input_tiles2(images, P, Hp, Wp, pixel, s.pad.data(), tw, p0, nt, V);
    int32_t* rows[4];
    for (int64_t h = 0; h < T; ++h) rows[h] = s.rows.data() + h * row_len;
    const int32_t* a[MR];
    for (int64_t p = 0; p < panels; ++p) {
      for (int64_t xi = 0; xi < points; ++xi) {
        const int32_t* vx = (const int32_t*)(V + xi * nt * tile_stride(pixel));
        for (int64_t t0 = 0; t0 < nt; t0 += MR) {
          for (int64_t r = 0; r < MR; ++r)  // past nt: the last tile again, never stored
            a[r] = vx + std::min(t0 + r, nt - 1) * (tile_stride(pixel) / 2);
          kernel_avx2(a, steps, U.panel(xi, p), s.m.data() + (xi * ntp + t0) * NR);
        }
      }
      if (T == 4)
        output_tiles4(s.m.data(), ntp, nt, rows);
      else
        output_tiles2(s.m.data(), ntp, nt, rows);
      // The chunk's tiles row of tiles by row of tiles: tiles t .. t_end of the chunk lie in tile
      // row ty of image n, their pixels consecutive in each of the T rows from pixel T t.
      const int64_t j0 = p * NR, cols = std::min(NR, Cout - j0);
      for (int64_t t = 0; t < nt;) {
        const int64_t n = (p0 + t) / P, ty = (p0 + t) % P / tw, tx = (p0 + t) % P % tw;
        const int64_t t_end = std::min(nt, t + tw - tx);
        float* y = ys[n];
        const int64_t w0 = T * tx, w1 = std::min(W, T * (tx + t_end - t));
        for (int64_t h = 0; h < T; ++h) {
          const int64_t oh = T * ty + h;
          if (oh >= H) break;
          const int32_t* row = rows[h] + T * t * NR;
          for (int64_t w = w0; w < w1; w += MR)
            int8_store_tile(row + (w - w0) * NR, oh * W + w, std::min(MR, w1 - w), j0, cols, e, y, y_row, y_col);
        }
        t = t_end;
      }
    }
  };
  const bool threads = parallel && !omp_in_parallel() && omp_get_max_threads() > 1 && items > 1;
  if (!threads) {
    thread_local Scratch s;
    for (int64_t it = 0; it < items; ++it) item(it, s);
    return;
  }
  std::exception_ptr failed;
#pragma omp parallel
  {
    thread_local Scratch s;
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; ++it) {
      try {
        item(it, s);
      } catch (...) {
#pragma omp critical(ocrt_int8_winograd)
        failed = std::current_exception();
      }
    }
  }
  if (failed) std::rethrow_exception(failed);
#else
  (void)images, (void)ys, (void)count, (void)H, (void)W, (void)pixel, (void)pad_code, (void)U, (void)e, (void)y_row,
      (void)y_col, (void)parallel;
  fail("int8_winograd_conv needs AVX2 (an x86-64 build)");
#endif
}

}  // namespace ocrt::cpu
