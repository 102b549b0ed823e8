// int8 3x3 convolutions through F(2x2, 3x3) in exact integers (see int8_winograd.h).
//
// The transforms, for a 4x4 tile d of codes and a 3x3 filter g (Lavin and Gray's F(2, 3) in each
// direction, the filter's side scaled by 2 so that it stays in integers):
//   B^T = [ 1  0 -1  0 ]     2G = [ 2  0  0 ]     A^T = [ 1  1  1  0 ]
//         [ 0  1  1  0 ]          [ 1  1  1 ]           [ 0  1 -1 -1 ]
//         [ 0 -1  1  0 ]          [ 1 -1  1 ]
//         [ 0  1  0 -1 ]          [ 0  0  2 ]
//   V = B^T d B (16 values),  U = (2G) g (2G)^T (16 values),  Y = A^T (sum_c U * V) A = 4 x the sums.
//
// Layout. Tiles are numbered row of tiles by row of tiles (tile row ty makes output rows 2 ty
// and 2 ty + 1); work goes in chunks of at most kChunkTiles consecutive tiles:
//   V[xi][t][pair]: tile t's transformed codes, channel pairs as int32 (two int16), which are
//                   the rows of A of the products;
//   M[xi][t][16]:   the 16 products' sums for one panel of 16 output channels;
//   then A^T M A for the chunk's tiles into two rows of pixels x 16 channels of int32 (each
//   tile's top and bottom pair of pixels), and the int8 product's own epilogue
//   (int8_store_tile) from there into y, a row of tiles' run at a time.
// For each panel of output channels the chunk's V is read again (from the L2: 24 tiles of 512
// channels are 400 KiB); the panel of U (16 x C pairs, 16 KiB at 512 channels) stays in the L1.
// (Chunks of 12, 24 and 48 tiles read crnn's layers equally fast within the noise of a shared
// Zen 3, bench_int8_winograd; 24 keeps V within the L2 at 512 channels.)
#include "runtime/cpu/int8_winograd.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
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
constexpr int64_t kChunkTiles = 4 * MR;

// -1: as the machine and OCRT_INT8_WINOGRAD say; 0 or 1: set_int8_winograd's choice.
std::atomic<int> g_forced{-1};
std::atomic<int64_t> g_min_channels{kInt8WinogradMinChannels};

bool machine_default() {
#if defined(OCRT_INT8_WINOGRAD_AVX2)
  const char* env = std::getenv("OCRT_INT8_WINOGRAD");
  if (env && std::string(env) == "0") return false;
  return int8_gemm_avx2_kernel();
#else
  return false;
#endif
}

// int16 a tile of V: its pixel's channels and 16 more, so that the six tiles a product step
// reads are not a power of two apart (at 512 channels, 1 KiB apart, the six broadcast loads a
// step fell on the same L1 banks: the kernel ran at two thirds of its rate on one Zen 3 core).
int64_t tile_stride(int64_t pixel) { return pixel + 16; }

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

// V of nt tiles from tile p0 on (tiles numbered row by row, tw a row): the 16 pixels of each
// tile (padded-image coordinates rows 2 ty .., columns 2 tx ..; past the image, the pad pixel),
// 16 channels at a time as int16, through B^T . B; V[(xi * nt + t) * ts + c] as int16,
// ts = tile_stride(pixel).
OCRT_TARGET_AVX2 void input_tiles(const uint8_t* image, int64_t Hp, int64_t Wp, int64_t pixel, const uint8_t* pad,
                                  int64_t tw, int64_t p0, int64_t nt, int16_t* V) {
  const int64_t ts = tile_stride(pixel);
  const int64_t vec_end = pixel / 16 * 16;
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t ty = (p0 + t) / tw, tx = (p0 + t) % tw;
    const uint8_t* px[4][4];
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        const int64_t r = 2 * ty + i, s = 2 * tx + j;
        px[i][j] = r < Hp && s < Wp ? image + (r * Wp + s) * pixel : pad;
      }
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
OCRT_TARGET_AVX2 void output_tiles(const int32_t* M, int64_t ntp, int64_t nt, int32_t* out0, int32_t* out1) {
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

// A thread's buffers, grown as needed and kept between calls (a few MB at most).
struct Scratch {
  std::vector<int16_t> v;  // V: 16 x kChunkTiles x tile_stride(pixel) int16, 32-byte aligned
  std::vector<int32_t> m;  // M: 16 x tiles (rounded up to MR) x 16
  std::vector<int32_t> rows;  // two rows of 2 kChunkTiles (+ MR) pixels x 16
  std::vector<uint8_t> pad;
};

#endif

}  // namespace

Int8WinogradWeights::Int8WinogradWeights(int64_t Cout, int64_t C, const int8_t* w)
    : cout_(Cout), c_(C), pairs_((C + 1) / 2), panels_((Cout + NR - 1) / NR) {
  OCRT_CHECK(Cout >= 1 && C >= 1 && C <= kInt8WinogradMaxChannels, "Int8WinogradWeights: ", Cout, " x ", C,
             " channels (at most ", kInt8WinogradMaxChannels, " in)");
  const size_t n = (size_t)(16 * panels_ * pairs_ * 2 * NR), bytes = (n * sizeof(int16_t) + 63) / 64 * 64;
  data_.reset((int16_t*)std::aligned_alloc(64, bytes));
  OCRT_CHECK(data_ != nullptr, "Int8WinogradWeights: out of memory (", bytes, " bytes)");
  std::memset(data_.get(), 0, bytes);
  static const int G[4][3] = {{2, 0, 0}, {1, 1, 1}, {1, -1, 1}, {0, 0, 2}};
  for (int64_t k = 0; k < Cout; ++k)
    for (int64_t c = 0; c < C; ++c) {
      const int8_t* g = w + (k * C + c) * 9;
      int t[4][3];  // (2G) g
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 3; ++j) t[i][j] = G[i][0] * g[j] + G[i][1] * g[3 + j] + G[i][2] * g[6 + j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {  // then (2G)^T on the right
          const int u = G[j][0] * t[i][0] + G[j][1] * t[i][1] + G[j][2] * t[i][2];
          int16_t* step = data_.get() + ((i * 4 + j) * panels_ + k / NR) * pairs_ * 2 * NR + (c / 2) * 2 * NR;
          step[(k % NR) * 2 + c % 2] = (int16_t)u;
        }
    }
}

bool int8_winograd_enabled() {
  const int forced = g_forced.load();
  if (forced >= 0) return forced == 1;
  static const bool on = machine_default();
  return on;
}

int64_t int8_winograd_min_channels() { return g_min_channels.load(); }

void set_int8_winograd(bool on, int64_t min_channels) {
  OCRT_CHECK(min_channels >= 1, "set_int8_winograd: at least 1 channel, got ", min_channels);
#if defined(OCRT_INT8_WINOGRAD_AVX2)
  OCRT_CHECK(!on || cpu_isa_supported(CpuIsa::avx2), "int8 Winograd needs AVX2, which this CPU lacks");
#else
  OCRT_CHECK(!on, "int8 Winograd needs AVX2 (an x86-64 build)");
#endif
  g_forced = on ? 1 : 0;
  g_min_channels = min_channels;
}

void int8_winograd_conv(const uint8_t* image, int64_t H, int64_t W, int64_t pixel, uint8_t pad_code,
                        const Int8WinogradWeights& U,
                        const Int8Epilogue& e, float* y, int64_t y_row, int64_t y_col, bool parallel) {
#if defined(OCRT_INT8_WINOGRAD_AVX2)
  OCRT_CHECK(cpu_isa_supported(CpuIsa::avx2), "int8_winograd_conv needs AVX2");
  OCRT_CHECK(H >= 1 && W >= 1 && pixel >= U.in_channels() && pixel % 4 == 0, "int8_winograd_conv: image ", H, "x",
             W, " of ", pixel, " codes a pixel for ", U.in_channels(), " channels");
  OCRT_CHECK(e.scale != nullptr, "int8_winograd_conv: the epilogue needs a scale per channel");
  const int64_t Hp = H + 2, Wp = W + 2, th = (H + 1) / 2, tw = (W + 1) / 2;
  // Chunks of the image's tiles in row order, across rows of tiles: a narrow image (a page's
  // short lines: 25 tiles a row in crnn's deep layers) then wastes no part-filled panel of 6
  // tiles at the end of each row. As few chunks as kChunkTiles allows, of whole panels, equal
  // but for the last.
  const int64_t P = th * tw, items = (P + kChunkTiles - 1) / kChunkTiles;
  const int64_t per = ((P + items - 1) / items + MR - 1) / MR * MR;
  const int64_t Cout = U.out_channels(), panels = (Cout + NR - 1) / NR, steps = U.pairs();
  auto item = [&](int64_t it, Scratch& s) {
    const int64_t p0 = it * per, nt = std::min(per, P - p0);  // (the last chunk may be empty)
    if (nt <= 0) return;
    const int64_t ntp = (nt + MR - 1) / MR * MR;
    s.v.resize((size_t)(16 * kChunkTiles * tile_stride(pixel) + 16));
    int16_t* V = (int16_t*)(((uintptr_t)s.v.data() + 31) / 32 * 32);
    s.m.resize((size_t)(16 * ((kChunkTiles + MR - 1) / MR * MR) * NR));
    s.rows.resize((size_t)(2 * (2 * kChunkTiles + MR) * NR));
    s.pad.assign((size_t)pixel, pad_code);
    input_tiles(image, Hp, Wp, pixel, s.pad.data(), tw, p0, nt, V);
    int32_t *row0 = s.rows.data(), *row1 = row0 + (2 * kChunkTiles + MR) * NR;
    const int32_t* a[MR];
    for (int64_t p = 0; p < panels; ++p) {
      for (int64_t xi = 0; xi < 16; ++xi) {
        const int32_t* vx = (const int32_t*)(V + xi * nt * tile_stride(pixel));
        for (int64_t t0 = 0; t0 < nt; t0 += MR) {
          for (int64_t r = 0; r < MR; ++r)  // past nt: the last tile again, never stored
            a[r] = vx + std::min(t0 + r, nt - 1) * (tile_stride(pixel) / 2);
          kernel_avx2(a, steps, U.panel(xi, p), s.m.data() + (xi * ntp + t0) * NR);
        }
      }
      output_tiles(s.m.data(), ntp, nt, row0, row1);
      // The chunk's tiles row of tiles by row of tiles: tiles t .. t_end of the chunk lie in tile
      // row ty, their pixels consecutive in row0 and row1 from pixel 2 t.
      const int64_t j0 = p * NR, cols = std::min(NR, Cout - j0);
      for (int64_t t = 0; t < nt;) {
        const int64_t ty = (p0 + t) / tw, tx = (p0 + t) % tw, t_end = std::min(nt, t + tw - tx);
        const int64_t w0 = 2 * tx, w1 = std::min(W, 2 * (tx + t_end - t));
        for (int64_t h = 0; h < 2; ++h) {
          const int64_t oh = 2 * ty + h;
          if (oh >= H) break;
          const int32_t* row = (h ? row1 : row0) + 2 * t * NR;
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
  (void)image, (void)H, (void)W, (void)pixel, (void)pad_code, (void)U, (void)e, (void)y, (void)y_row, (void)y_col, (void)parallel;
  fail("int8_winograd_conv needs AVX2 (an x86-64 build)");
#endif
}

}  // namespace ocrt::cpu
