// 3x3 convolution by Winograd's minimal filtering algorithm F(4x4, 3x3) (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016), used by conv2d's fast mode on the CPU.
//
// The idea, in one dimension: four outputs of a 3-tap filter g over six inputs d,
//   y[a] = sum_k d[a + k] g[k],  a = 0..3,
// take 12 multiplications done directly. Evaluating the polynomials d(x) and g(x) at six points
// (0, 1, -1, 2, -2 and infinity), multiplying pointwise and interpolating back takes 6:
//   y = A^T [ (G g) * (B^T d) ]
// with the fixed matrices below. In two dimensions the same is done along rows and columns: a
// 6x6 input tile d and a 3x3 filter g give a 4x4 output tile
//   Y = A^T [ (G g G^T) * (B^T d B) ] A
// with 36 multiplications instead of 144. A convolution layer sums such products over the input
// channels c, and the sum can be moved inside the transforms:
//   M[xi](k, tile) = sum_c U[xi](k, c) V[xi](c, tile),   xi = 0..35
// with U[xi] = (G g_kc G^T)[xi] (the transformed weights) and V[xi] = (B^T d_c,tile B)[xi] (the
// transformed input tiles). That is 36 independent matrix products (runtime/cpu/gemm.h), each of
// (Cout x C) by (C x tiles); then every output tile is A^T M A. The products hold 4x fewer
// multiply-adds than im2col's single product ((4x4 outputs x 9 taps) / 36 per tile and channel
// pair), less what partial tiles at the edges waste. The transforms add work proportional to
// C + Cout rather than to C x Cout, so for a layer of CRNN (64 to 512 channels) the products
// still dominate.
//
// The price is rounding: the transforms add and subtract values of different sizes (up to 8x
// and 1/24), so results differ from the direct sum by about 1e-5 relative in float32
// (docs/ops/conv.md). Exact mode keeps im2col.
//
// Layout. Tiles are numbered image by image, row of tiles by row of tiles: tile p = (n * th +
// ty) * tw + tx for th x tw tiles per image. The work goes in chunks of whole rows of tiles (a
// few hundred tiles, a few tens of MB of V and M) so that memory does not grow with the batch:
//   V[xi] (C x P) and M[xi] (Cout x P), row stride P, for the chunk's P tiles.
// Threads share out channels (input transform), the 36 products (one thread each, so each
// product's sums have a fixed order) and output channels (output transform): the result does not
// depend on the thread count.
#include "ops/cpu/winograd.h"

#if defined(OCRT_CPU_WINOGRAD)

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#if defined(OCRT_TARGET_ATTRS)
#include <immintrin.h>
// input_row_pairs: AVX-512 with vcvtne2ps2bf16 (the avx512bf16 path).
#define OCRT_TARGET_AVX512BF16 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx512bf16,avx2,fma")))
#endif

#include "ops/cpu/fingerprint.h"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace ocrt::cpu {

namespace {

constexpr int64_t kOut = 4;      // output tile side (m)
constexpr int64_t kIn = 6;       // input tile side (m + 3 - 1)
constexpr int64_t kPoints = 36;  // kIn * kIn products per tile and channel pair

// Chunks hold at least this many tiles (the products' column count) and, beyond that, at most
// kChunkBytes of V and M together.
constexpr int64_t kMinChunkTiles = 256;
constexpr int64_t kChunkBytes = int64_t(32) << 20;
// Inference calls' chunks are smaller: their V and M stay in a buffer for the whole run
// (inference_scratch), so the chunk is memory held, and on 2 Zen 5 threads crnn-en read as fast
// with these (bench/peers_cpu.sh's 300 lines, 8 alternating runs: median 99.0 lines/s against
// 99.6 with the old 32 MB chunks in the allocator's cache; 103.1 with 32 MB in the buffer, at
// 201 MiB peak RSS against 192). 8 MB rather than 24 since the twenty-sixth session: on 2 Zen 4
// cores (L3 32 MB, shared) a chunk's V and M of 24 MB beside the layer's transformed weights and
// the rest no longer stayed in the L3, and the transforms waited on memory. crnn-s, bf16 and
// fp32, 300 peer lines, alternating: CPU time 5-15% lower in every pair (bf16 2.52-2.65 -> 2.09-
// 2.50 s, fp32 3.30-3.65 -> 3.09-3.32 s), peak RSS 11 MiB lower; 2 MB was slower than either.
// crnn-en's deep layers take the tile minimum either way (36 x 1024 channels x 4 bytes a tile):
// 84 tiles, 12 MB, since the thirty-third session, when ocrt-infer's CPU became two workers of
// one thread, each with its own buffer. On 2 Zen 4 cores, crnn-en fp32 on the 300 peer lines
// (bench/results/cpu-bf16.md): 192 tiles (28 MB) 1.5% faster than 96 (3% in bf16) at 225 MiB
// peak RSS against 197-199; 84 as fast as 96 in 4 MiB less (194-197 MiB with the LSTM's kept
// packing); 72 3% slower.
constexpr int64_t kInferenceMinChunkTiles = 84;
constexpr int64_t kInferenceChunkBytes = int64_t(8) << 20;

// Forward passes of at most this many tiles take the small-tile path (small_forward). Outside
// autograd every forward pass keeps its weights transformed and packed between calls, at most
// kKeptBytes of them in the process (crnn's five Winograd layers: 72 MB in float32, 36 in bf16,
// in each of the two forms). 16, not 128 as before the usual path kept its weights too: one
// 400-pixel line (26 to 50 tiles a layer) reads faster through the usual path (p50 on 2 Zen 5
// threads, bench_latency: fp32 17.3-18.5 ms against 17.9-18.9, bf16 10.9-11.0 against 13.7-15.1),
// a 120-pixel one (8 to 16 tiles) as fast through the small one as before (10.2-10.3 ms).
constexpr int64_t kSmallTiles = 16;
constexpr size_t kKeptBytes = size_t(256) << 20;

// U[xi] (Cout x C) = G g G^T for every filter g = w[k, c] (3x3).
//   G = [ 1/4     0     0  ]
//       [ -1/6  -1/6  -1/6 ]
//       [ -1/6   1/6  -1/6 ]
//       [ 1/24  1/12   1/6 ]
//       [ 1/24 -1/12   1/6 ]
//       [  0      0     1  ]
// One output channel k at a time: its C filters are transposed to nine rows of C taps, so that
// every step below is a loop over c that the compiler vectorizes, and each of U's 36 planes gets
// one contiguous row of C values. Only the planes of rows [i0, i1) of the 6 x 6 tile are made
// (plane i * 6 + j at U's plane (i - i0) * 6 + j): the kept forms are made a row at a time, so
// that the whole of U (37.7 MB for a 512 x 512 layer) is never held beside them.
void transform_weights(const float* w, int64_t Cout, int64_t C, float* U, int64_t i0 = 0, int64_t i1 = kIn) {
  // u[0..5] = G (g0, g1, g2)^T, for n values of each at once.
  // (The outputs as restrict locals: written through u[i], the compiler could not rule out that
  // they overlap g and left the loop scalar, 2.2% of a crnn training step.)
  auto filter_1d = [](int64_t n, const float* g0, const float* g1, const float* g2, float* const* u) {
    constexpr float sixth = 1.0f / 6, twelfth = 1.0f / 12, twenty_fourth = 1.0f / 24;
    float *__restrict u0 = u[0], *__restrict u1 = u[1], *__restrict u2 = u[2], *__restrict u3 = u[3],
          *__restrict u4 = u[4], *__restrict u5 = u[5];
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) {
      const float even = g0[c] + g2[c];
      u0[c] = 0.25f * g0[c];
      u1[c] = -sixth * (even + g1[c]);
      u2[c] = -sixth * (even - g1[c]);
      u3[c] = twenty_fourth * g0[c] + twelfth * g1[c] + sixth * g2[c];
      u4[c] = twenty_fourth * g0[c] - twelfth * g1[c] + sixth * g2[c];
      u5[c] = g2[c];
    }
  };
#pragma omp parallel
  {
    // taps: 9 rows of C (tap t of every filter); cols: 18 rows, G applied to each filter column.
    std::vector<float> taps((size_t)(9 * C)), cols((size_t)(3 * kIn * C));
#pragma omp for schedule(static)
    for (int64_t k = 0; k < Cout; ++k) {
      const float* wk = w + k * C * 9;
      for (int64_t c = 0; c < C; ++c)
        for (int t = 0; t < 9; ++t) taps[(size_t)(t * C + c)] = wk[c * 9 + t];
      for (int j = 0; j < 3; ++j) {  // column j of every g: taps j, 3 + j, 6 + j
        float* out[kIn];
        for (int i = 0; i < kIn; ++i) out[i] = cols.data() + (j * kIn + i) * C;
        filter_1d(C, taps.data() + j * C, taps.data() + (3 + j) * C, taps.data() + (6 + j) * C, out);
      }
      for (int64_t i = i0; i < i1; ++i) {  // row i of (G g), times G^T, into U[i*6 + j] row k
        float* out[kIn];
        for (int j = 0; j < kIn; ++j) out[j] = U + (((i - i0) * kIn + j) * Cout + k) * C;
        filter_1d(C, cols.data() + (0 * kIn + i) * C, cols.data() + (1 * kIn + i) * C, cols.data() + (2 * kIn + i) * C,
                  out);
      }
    }
  }
}

// The input transform B^T d B, along one axis: v = B^T d for six values d.
//   B^T = [ 4  0 -5  0  1  0 ]
//         [ 0 -4 -4  1  1  0 ]
//         [ 0  4 -4 -1  1  0 ]
//         [ 0 -2 -1  2  1  0 ]
//         [ 0  2 -1 -2  1  0 ]
//         [ 0  4  0 -5  0  1 ]
// Written for one element of six arrays at a time, so that loops over many tiles vectorize.
#define OCRT_WINOGRAD_INPUT_1D(d0, d1, d2, d3, d4, d5, v0, v1, v2, v3, v4, v5) \
  do {                                                                          \
    v0 = 4 * (d0) - 5 * (d2) + (d4);                                            \
    v1 = -4 * (d1) - 4 * (d2) + (d3) + (d4);                                    \
    v2 = 4 * (d1) - 4 * (d2) - (d3) + (d4);                                     \
    v3 = -2 * (d1) - (d2) + 2 * (d3) + (d4);                                    \
    v4 = 2 * (d1) - (d2) - 2 * (d3) + (d4);                                     \
    v5 = 4 * (d1) - 5 * (d3) + (d5);                                            \
  } while (0)

// The output transform A^T m A, along one axis: o = A^T m for six values m.
//   A^T = [ 1  1  1  1  1  0 ]
//         [ 0  1 -1  2 -2  0 ]
//         [ 0  1  1  4  4  0 ]
//         [ 0  1 -1  8 -8  1 ]
#define OCRT_WINOGRAD_OUTPUT_1D(m0, m1, m2, m3, m4, m5, o0, o1, o2, o3) \
  do {                                                                   \
    const auto s12 = (m1) + (m2), d12 = (m1) - (m2);                     \
    const auto s34 = (m3) + (m4), d34 = (m3) - (m4);                     \
    o0 = (m0) + s12 + s34;                                               \
    o1 = d12 + 2 * d34;                                                  \
    o2 = s12 + 4 * s34;                                                  \
    o3 = d12 + 8 * d34 + (m5);                                           \
  } while (0)

struct Geometry {
  int64_t N, C, H, W, Cout, ph, pw;
  int64_t Ho, Wo, th, tw, Wp;  // output size, tiles per image (th x tw), padded row length
};

// V for channel c and one row of tiles (image n, tile row ty): the six input rows under the
// tiles, zero-padded to Wp = 4 tw + 2 columns, go through B^T down the columns (whole rows at a
// time), then through B along each tile's six columns. rows and t are scratch of 6 * Wp floats.
// (Until the twenty-seventh session the six rows were first copied into padded scratch: 2-4% of
// a crnn-s run in memmove.)
// Compiled for each path (input_row_plain, _avx2, _avx512 below, chosen by input_row_for_path).
[[gnu::always_inline]] inline void input_row(const float* x, const Geometry& g, int64_t c, int64_t n, int64_t ty,
                                             float* V, int64_t P, int64_t p0, float* rows, float* t) {
  // The six input rows are read where they lie in x; rows above or below the image read as a
  // row of zeros (the start of `rows`, free until the pass along the rows below). Columns of the
  // padding read only zeros, and B^T of zeros is zero: they are set, not computed.
  const float* plane = x + (n * g.C + c) * g.H * g.W;
  const float* r[kIn];
  bool zeroed = false;
  for (int64_t i = 0; i < kIn; ++i) {
    const int64_t ih = kOut * ty - g.ph + i;
    if (ih >= 0 && ih < g.H) {
      r[i] = plane + ih * g.W;
      continue;
    }
    if (!zeroed) std::fill(rows, rows + g.W, 0.0f), zeroed = true;
    r[i] = rows;
  }
  {
    float* u[kIn];  // row i of t from its first column of the image (column pw)
    for (int64_t i = 0; i < kIn; ++i) {
      float* ti = t + i * g.Wp;
      std::fill(ti, ti + g.pw, 0.0f);
      std::fill(ti + g.pw + g.W, ti + g.Wp, 0.0f);
      u[i] = ti + g.pw;
    }
    const float *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3], *r4 = r[4], *r5 = r[5];
    float *u0 = u[0], *u1 = u[1], *u2 = u[2], *u3 = u[3], *u4 = u[4], *u5 = u[5];
    // t is separate scratch: no iteration reads what another writes.
#pragma omp simd
    for (int64_t q = 0; q < g.W; ++q)
      OCRT_WINOGRAD_INPUT_1D(r0[q], r1[q], r2[q], r3[q], r4[q], r5[q], u0[q], u1[q], u2[q], u3[q], u4[q], u5[q]);
  }
  // Along the rows, tile by tile: tile tx reads t[4 tx .. 4 tx + 5]. Reading those windows
  // directly (stride 4) keeps the compiler from vectorising, so each row is first dealt into its
  // four phases, D_k[tx] = t[4 tx + k] (the windows' 5th and 6th values are D_0 and D_1 one tile
  // on), and the transform then runs over contiguous arrays. rows is free again for them.
  float* D0 = rows;
  float* D1 = D0 + g.tw + 1;
  float* D2 = D1 + g.tw + 1;
  float* D3 = D2 + g.tw;
  for (int64_t i = 0; i < kIn; ++i) {
    const float* ti = t + i * g.Wp;
    for (int64_t tx = 0; tx < g.tw; ++tx) {
      D0[tx] = ti[kOut * tx];
      D1[tx] = ti[kOut * tx + 1];
      D2[tx] = ti[kOut * tx + 2];
      D3[tx] = ti[kOut * tx + 3];
    }
    D0[g.tw] = ti[kOut * g.tw];  // Wp = 4 tw + 2: the last tile's 5th and 6th values
    D1[g.tw] = ti[kOut * g.tw + 1];
    float* __restrict o0 = V + ((i * kIn + 0) * g.C + c) * P + p0;
    float* __restrict o1 = V + ((i * kIn + 1) * g.C + c) * P + p0;
    float* __restrict o2 = V + ((i * kIn + 2) * g.C + c) * P + p0;
    float* __restrict o3 = V + ((i * kIn + 3) * g.C + c) * P + p0;
    float* __restrict o4 = V + ((i * kIn + 4) * g.C + c) * P + p0;
    float* __restrict o5 = V + ((i * kIn + 5) * g.C + c) * P + p0;
#pragma omp simd
    for (int64_t tx = 0; tx < g.tw; ++tx)
      OCRT_WINOGRAD_INPUT_1D(D0[tx], D1[tx], D2[tx], D3[tx], D0[tx + 1], D1[tx + 1], o0[tx], o1[tx], o2[tx], o3[tx],
                             o4[tx], o5[tx]);
  }
}

// input_row for the baseline x86-64, for AVX2 + FMA and for AVX-512, so that a distribution
// build runs its loops as wide as the CPU allows (a native build's own input_row had run 16 wide
// where a distribution build's ran 4 wide on SSE2: 11% of a bf16 run against 9%).
using InputRow = void (*)(const float*, const Geometry&, int64_t, int64_t, int64_t, float*, int64_t, int64_t, float*,
                          float*);

void input_row_plain(const float* x, const Geometry& g, int64_t c, int64_t n, int64_t ty, float* V, int64_t P,
                     int64_t p0, float* rows, float* t) {
  input_row(x, g, c, n, ty, V, P, p0, rows, t);
}

#if defined(OCRT_TARGET_ATTRS)
OCRT_TARGET_AVX2 void input_row_avx2(const float* x, const Geometry& g, int64_t c, int64_t n, int64_t ty, float* V,
                                     int64_t P, int64_t p0, float* rows, float* t) {
  input_row(x, g, c, n, ty, V, P, p0, rows, t);
}

// The loads of 16 columns starting at image column `from` of a row W wide: a mask of the lanes
// that lie inside the row (the others read as zero: the padding).
OCRT_TARGET_AVX512 inline __mmask16 columns_inside(int64_t from, int64_t W) {
  const int64_t lo = std::clamp<int64_t>(-from, 0, 16), hi = std::clamp<int64_t>(W - from, 0, 16);
  return hi > lo ? (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u)) : (__mmask16)0;
}

// The permute indices that deal 64 consecutive columns a[0..3] (16 tiles of 4) into their four
// phases: lanes 0..7 of (a[0], a[1]) and 8..15 of (a[2], a[3]) at positions 4 t + m.
constexpr std::array<std::array<int32_t, 16>, 4> phase_index(bool high) {
  std::array<std::array<int32_t, 16>, 4> index{};
  for (int m = 0; m < 4; ++m)
    for (int t = 0; t < 16; ++t) index[(size_t)m][(size_t)t] = (4 * (high ? t - 8 : t) + m) & 31;
  return index;
}
alignas(64) constexpr std::array<std::array<int32_t, 16>, 4> kPhaseLo = phase_index(false), kPhaseHi = phase_index(true);

// ph[m] = column 4 t + m of each of the 16 tiles whose 64 columns are a[0..3], m = 0..3.
[[gnu::always_inline]] OCRT_TARGET_AVX512 inline void deal_phases(const __m512* a, __m512* ph) {
  for (size_t m = 0; m < 4; ++m)
    ph[m] = _mm512_mask_blend_ps((__mmask16)0xFF00,
                                 _mm512_permutex2var_ps(a[0], _mm512_load_si512(kPhaseLo[m].data()), a[1]),
                                 _mm512_permutex2var_ps(a[2], _mm512_load_si512(kPhaseHi[m].data()), a[3]));
}

// The rows under a tile row of one channel (null: outside the image, read as zeros).
struct InputRows {
  const float* r[kIn];
};

OCRT_TARGET_AVX512 inline void input_rows(const float* x, const Geometry& g, int64_t c, int64_t n, int64_t ty,
                                          InputRows& in) {
  const float* plane = x + (n * g.C + c) * g.H * g.W;
  for (int64_t i = 0; i < kIn; ++i) {
    const int64_t ih = kOut * ty - g.ph + i;
    in.r[i] = ih >= 0 && ih < g.H ? plane + ih * g.W : nullptr;
  }
}

// The 36 values of V (v[i * 6 + j]) of the 16 tiles from tile tx0 of a row (lanes past the row's
// last tile hold what its columns of zeros give).
[[gnu::always_inline]] OCRT_TARGET_AVX512 inline void input_block16(const InputRows& in, const Geometry& g,
                                                                    int64_t tx0, __m512* v) {
  const int64_t from = kOut * tx0 - g.pw;  // image column of the block's first padded column
  __m512 ph[kIn][kIn];                     // ph[row][phase]
  for (int64_t i = 0; i < kIn; ++i) {
    if (!in.r[i]) {
      for (int m = 0; m < kIn; ++m) ph[i][m] = _mm512_setzero_ps();
      continue;
    }
    __m512 a[5];
    for (int k = 0; k < 5; ++k)
      a[k] = _mm512_maskz_loadu_ps(columns_inside(from + 16 * k, g.W), in.r[i] + from + 16 * k);
    deal_phases(a, ph[i]);
    // Phases 4 and 5 are phases 0 and 1 one tile on: the 16th tile's from columns 64 and 65.
    ph[i][4] =
        _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(a[4]), _mm512_castps_si512(ph[i][0]), 1));
    const __m512 a4_next = _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(_mm512_setzero_ps()), _mm512_castps_si512(a[4]), 1));
    ph[i][5] =
        _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(a4_next), _mm512_castps_si512(ph[i][1]), 1));
  }
  for (int m = 0; m < kIn; ++m) {  // down the rows: u[i][m] = (B^T d)[i], column 4 tx + m
    __m512 u0, u1, u2, u3, u4, u5;
    OCRT_WINOGRAD_INPUT_1D(ph[0][m], ph[1][m], ph[2][m], ph[3][m], ph[4][m], ph[5][m], u0, u1, u2, u3, u4, u5);
    ph[0][m] = u0, ph[1][m] = u1, ph[2][m] = u2, ph[3][m] = u3, ph[4][m] = u4, ph[5][m] = u5;
  }
  for (int64_t i = 0; i < kIn; ++i)  // across the phases: V[i * 6 + j]
    OCRT_WINOGRAD_INPUT_1D(ph[i][0], ph[i][1], ph[i][2], ph[i][3], ph[i][4], ph[i][5], v[i * kIn + 0], v[i * kIn + 1],
                           v[i * kIn + 2], v[i * kIn + 3], v[i * kIn + 4], v[i * kIn + 5]);
}

// input_row on AVX-512, 16 tiles at a time, with no scalar loop: each of the six input rows
// under the tiles is loaded as 64 + 2 columns (masked: columns outside the image read as zero)
// and dealt by permutes into its six phases (phase m holds column 4 tx + m of each of the 16
// tiles), then the phases go through B^T down the rows and through B across the phases, with the
// portable code's formulas (OCRT_WINOGRAD_INPUT_1D, on vectors) in the same order: the same V.
// The portable code deals a row into phases with stride-4 loads that the compiler leaves
// scalar, and runs rows of 13 to 50 tiles mostly in a 16-lane loop's scalar remainder.
OCRT_TARGET_AVX512 void input_row_avx512(const float* x, const Geometry& g, int64_t c, int64_t n, int64_t ty,
                                         float* V, int64_t P, int64_t p0, float*, float*) {
  InputRows in;
  input_rows(x, g, c, n, ty, in);
  float* out[kPoints];
  for (int64_t xi = 0; xi < kPoints; ++xi) out[xi] = V + (xi * g.C + c) * P + p0;
  for (int64_t tx0 = 0; tx0 < g.tw; tx0 += 16) {
    const __mmask16 store_mask = (__mmask16)((1u << std::min<int64_t>(16, g.tw - tx0)) - 1u);
    __m512 v[kPoints];
    input_block16(in, g, tx0, v);
    for (int64_t xi = 0; xi < kPoints; ++xi) _mm512_mask_storeu_ps(out[xi] + tx0, store_mask, v[xi]);
  }
}

// input_row for channels c0 and c0 + 1 (c0 even), written as the bf16 pairs of the products'
// packed B (runtime/cpu/gemm.h, sgemm_bf16_pairs_layout: panels of nr tiles, C / 2 rows of nr
// pairs each, one such B per point xi, `plane` uint32 apart) instead of float32 V that the GEMM
// then packs: half the bytes written, none read back for packing. Each pair (channel c0 in the
// low half, c0 + 1 in the high one) rounded to nearest even as the GEMM's packing rounds, so
// the products see the same operands.
OCRT_TARGET_AVX512BF16 void input_row_pairs(const float* x, const Geometry& g, int64_t c0, int64_t n, int64_t ty,
                                            uint32_t* Vp, int64_t plane, int64_t nr, int64_t p0) {
  InputRows in0, in1;
  input_rows(x, g, c0, n, ty, in0);
  input_rows(x, g, c0 + 1, n, ty, in1);
  const int64_t d = g.C / 2, kp = c0 / 2;
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t tx0 = 0; tx0 < g.tw; tx0 += 16) {
    const int64_t tiles = std::min<int64_t>(16, g.tw - tx0);
    // Tiles p0 + tx0 .. + tiles - 1 lie in one panel or two: the first `head` in the panel of
    // the first (from column j0), the rest from column 0 of the next.
    const int64_t p = p0 + tx0, j0 = p % nr, head = std::min(tiles, nr - j0);
    const __mmask16 head_mask = (__mmask16)((1u << head) - 1u);
    const __mmask16 tail_mask = (__mmask16)(((1u << tiles) - 1u) & ~((1u << head) - 1u));
    uint32_t* at = Vp + (p / nr) * nr * d + kp * nr + j0;  // tile p's pair, point 0
    uint32_t* next = Vp + (p / nr + 1) * nr * d + kp * nr - head;  // lane `head` lands on column 0
    __m512 v0[kPoints], v1[kPoints];
    input_block16(in0, g, tx0, v0);
    input_block16(in1, g, tx0, v1);
    for (int64_t xi = 0; xi < kPoints; ++xi) {
      const __m512i pairs = _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(v1[xi], v0[xi]));
      _mm512_mask_storeu_epi32(at + xi * plane, head_mask, pairs);
      if (tail_mask) _mm512_mask_storeu_epi32(next + xi * plane, tail_mask, pairs);
    }
  }
}
#endif

InputRow input_row_for_path() {
#if defined(OCRT_TARGET_ATTRS)
  if (cpu_isa() >= CpuIsa::avx512) return input_row_avx512;
  if (cpu_isa() >= CpuIsa::avx2) return input_row_avx2;
#endif
  return input_row_plain;
}

// Pooled rows 2 ty and 2 ty + 1 (those below Hp) from the tile row's output rows 4 ty .. 4 ty + 3
// (those below Ho) in `rows`, past the ReLU: no value is NaN or -0 there, so the first maximum
// of a window that max_pool2d keeps is simply its maximum, and the order of the comparisons does
// not matter. Each pair of rows is reduced to one first (rows + 4 Wo is scratch for it), then
// each window along it; columns outside the output count as -inf (the padding).
[[gnu::always_inline]] inline void pooled_rows(float* rows, const Geometry& g, const WinogradReluPool& pool, int64_t k,
                                               int64_t n, int64_t ty, float* y) {
  float* plane = y + (n * g.Cout + k) * pool.Hp * pool.Wp;
  float* pair = rows + kOut * g.Wo;
  const int64_t kw = pool.kw, sw = pool.sw, pw = pool.pw, Wo = g.Wo;
  // Windows [lo, hi) lie wholly inside the output's columns.
  const int64_t lo = std::min(pool.Wp, (pw + sw - 1) / sw);
  const int64_t hi = std::max(lo, std::min(pool.Wp, Wo - kw + pw >= 0 ? (Wo - kw + pw) / sw + 1 : 0));
  for (int64_t pr = 2 * ty; pr < std::min(2 * ty + 2, pool.Hp); ++pr) {
    const float* a = rows + (2 * pr - kOut * ty) * Wo;
    const float* b = 2 * pr + 1 < g.Ho ? a + Wo : a;
    for (int64_t c = 0; c < Wo; ++c) pair[c] = std::max(a[c], b[c]);
    float* out = plane + pr * pool.Wp;
    auto window = [&](int64_t pc) {
      float best = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < kw; ++j) {
        const int64_t c = pc * sw - pw + j;
        if (c >= 0 && c < Wo) best = std::max(best, pair[c]);
      }
      return best;
    };
    for (int64_t pc = 0; pc < lo; ++pc) out[pc] = window(pc);
    if (kw == 2 && sw == 1) {
      const float* p = pair - pw;
      for (int64_t pc = lo; pc < hi; ++pc) out[pc] = std::max(p[pc], p[pc + 1]);
    } else if (kw == 2 && sw == 2) {
      const float* p = pair - pw;
      for (int64_t pc = lo; pc < hi; ++pc) out[pc] = std::max(p[2 * pc], p[2 * pc + 1]);
    } else {
      for (int64_t pc = lo; pc < hi; ++pc) {
        const float* p = pair + pc * sw - pw;
        float best = p[0];
        for (int64_t j = 1; j < kw; ++j) best = std::max(best, p[j]);
        out[pc] = best;
      }
    }
    for (int64_t pc = hi; pc < pool.Wp; ++pc) out[pc] = window(pc);
  }
}

// y for output channel k and one row of tiles: A^T M A for each tile, plus the bias, written
// where the 4x4 tile lies inside the output. q is scratch of 4 * 6 * tw floats.
// M's planes hold (Cout x P) products, or (P x Cout) ones when `transposed` (the small-tile path).
// With a pool, the four rows go (after ReLU) to `rows` (scratch of 5 * Wo floats) instead, and
// the tile row's two pooled rows to y (pooled_rows). Compiled once per path (output_row_plain,
// _avx2 and _avx512 below).
[[gnu::always_inline]] inline void output_row(const float* M, const Geometry& g, int64_t k, int64_t n, int64_t ty,
                                              int64_t P, int64_t p0, float bias, float* y, float* q, bool transposed,
                                              const WinogradReluPool* pool, float* rows) {
  const int64_t sk = transposed ? 1 : P, sp = transposed ? g.Cout : 1;  // strides of k and p in a plane
  // q[a][j][tx] = sum_i A^T[a][i] M[i*6+j], down the columns of each tile.
  for (int64_t j = 0; j < kIn; ++j) {
    const float* m[kIn];
    for (int64_t i = 0; i < kIn; ++i) m[i] = M + (i * kIn + j) * g.Cout * P + k * sk + p0 * sp;
    float* __restrict q0 = q + (0 * kIn + j) * g.tw;
    float* __restrict q1 = q + (1 * kIn + j) * g.tw;
    float* __restrict q2 = q + (2 * kIn + j) * g.tw;
    float* __restrict q3 = q + (3 * kIn + j) * g.tw;
    if (sp == 1) {  // the usual path: each plane's tiles side by side, a loop the compiler vectorises
      const float *m0 = m[0], *m1 = m[1], *m2 = m[2], *m3 = m[3], *m4 = m[4], *m5 = m[5];
#pragma omp simd
      for (int64_t tx = 0; tx < g.tw; ++tx)
        OCRT_WINOGRAD_OUTPUT_1D(m0[tx], m1[tx], m2[tx], m3[tx], m4[tx], m5[tx], q0[tx], q1[tx], q2[tx], q3[tx]);
      continue;
    }
    for (int64_t tx = 0; tx < g.tw; ++tx) {
      const int64_t at = tx * sp;
      OCRT_WINOGRAD_OUTPUT_1D(m[0][at], m[1][at], m[2][at], m[3][at], m[4][at], m[5][at], q0[tx], q1[tx], q2[tx],
                              q3[tx]);
    }
  }
  // Along the rows of each tile, then out.
  float* plane = y + (n * g.Cout + k) * g.Ho * g.Wo;
  const int64_t full = g.Wo / kOut;  // tiles whose four columns all lie inside the output
  for (int64_t a = 0; a < kOut; ++a) {
    const int64_t oh = kOut * ty + a;
    if (oh >= g.Ho) break;
    const float* qa = q + a * kIn * g.tw;
    float* row = pool ? rows + a * g.Wo : plane + oh * g.Wo;
    for (int64_t tx = 0; tx < g.tw; ++tx) {
      float o[kOut];
      OCRT_WINOGRAD_OUTPUT_1D(qa[tx], qa[g.tw + tx], qa[2 * g.tw + tx], qa[3 * g.tw + tx], qa[4 * g.tw + tx],
                              qa[5 * g.tw + tx], o[0], o[1], o[2], o[3]);
      float* dst = row + kOut * tx;
      for (float& v : o) {
        v += bias;
        if (pool) v = v > 0 ? v : 0.0f;  // ReLU as ops/elementwise's: a NaN and -0 become 0
      }
      if (tx < full) {
        dst[0] = o[0], dst[1] = o[1], dst[2] = o[2], dst[3] = o[3];
      } else {
        for (int64_t b = 0; b < g.Wo - kOut * tx; ++b) dst[b] = o[b];
      }
    }
  }
  if (pool) pooled_rows(rows, g, *pool, k, n, ty, y);
}

// The input tiles of tile rows [r0, r0 + rows) into V (36 planes of C x rows * tw), on every
// thread.
void input_tiles(const float* x, const Geometry& g, int64_t r0, int64_t rows, float* V) {
  const int64_t P = rows * g.tw;
  const InputRow input_row = input_row_for_path();
#pragma omp parallel
  {
    std::vector<float> scratch((size_t)(2 * kIn * g.Wp));
#pragma omp for schedule(static)
    for (int64_t cr = 0; cr < g.C * rows; ++cr) {
      const int64_t c = cr / rows, r = r0 + cr % rows;
      input_row(x, g, c, r / g.th, r % g.th, V, P, (r - r0) * g.tw, scratch.data(), scratch.data() + kIn * g.Wp);
    }
  }
}

// output_row for the baseline x86-64, for AVX2 + FMA and for AVX-512, so that a build for any
// x86-64 runs its loops 8 or 16 wide where the CPU has AVX2 or AVX-512 (chosen by the path, as
// the kernels outside the GEMM are: runtime/cpu_isa.h). A distribution build had run them on
// SSE2 alone: 19% of a bf16 run there against 8% in a -march=native build.
using OutputRow = void (*)(const float*, const Geometry&, int64_t, int64_t, int64_t, int64_t, int64_t, float, float*,
                           float*, bool, const WinogradReluPool*, float*);

void output_row_plain(const float* M, const Geometry& g, int64_t k, int64_t n, int64_t ty, int64_t P, int64_t p0,
                      float bias, float* y, float* q, bool transposed, const WinogradReluPool* pool, float* rows) {
  output_row(M, g, k, n, ty, P, p0, bias, y, q, transposed, pool, rows);
}

#if defined(OCRT_TARGET_ATTRS)
OCRT_TARGET_AVX2 void output_row_avx2(const float* M, const Geometry& g, int64_t k, int64_t n, int64_t ty, int64_t P,
                                      int64_t p0, float bias, float* y, float* q, bool transposed,
                                      const WinogradReluPool* pool, float* rows) {
  output_row(M, g, k, n, ty, P, p0, bias, y, q, transposed, pool, rows);
}
// The permute indices that interleave two vectors of 16 into pairs (a[t], b[t]): t = 0..7 (lo)
// and 8..15 (hi).
constexpr std::array<int32_t, 16> pair_index(bool high) {
  std::array<int32_t, 16> index{};
  for (int l = 0; l < 16; ++l) index[(size_t)l] = (l & 1) * 16 + (high ? 8 : 0) + l / 2;
  return index;
}
alignas(64) constexpr std::array<int32_t, 16> kPairLo = pair_index(false), kPairHi = pair_index(true);

// output_row on AVX-512 (the usual, untransposed M), 16 tiles at a time: A^T down the columns
// of each tile, then across, with the scalar path's formulas (OCRT_WINOGRAD_OUTPUT_1D on
// vectors) in the same order, and the four values of each tile's row dealt back into place by
// permutes (the scalar path stored them a tile at a time): the same bits.
OCRT_TARGET_AVX512 void output_row_avx512(const float* M, const Geometry& g, int64_t k, int64_t n, int64_t ty,
                                          int64_t P, int64_t p0, float bias, float* y, float* q, bool transposed,
                                          const WinogradReluPool* pool, float* rows) {
  if (transposed) return output_row(M, g, k, n, ty, P, p0, bias, y, q, transposed, pool, rows);
  // (o0[t], o1[t]) pairs for t = 0..7 (lo) and 8..15 (hi); then pairs of pairs, as doubles.
  const __m512i idx_lo = _mm512_load_si512(kPairLo.data()), idx_hi = _mm512_load_si512(kPairHi.data());
  const __m512i quad_lo = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0), quad_hi = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
  const __m512 vbias = _mm512_set1_ps(bias), zero = _mm512_setzero_ps();
  const float* m[kPoints];
  for (int64_t xi = 0; xi < kPoints; ++xi) m[xi] = M + xi * g.Cout * P + k * P + p0;
  float* plane = y + (n * g.Cout + k) * g.Ho * g.Wo;
  const int64_t out_rows = std::min<int64_t>(kOut, g.Ho - kOut * ty);
  for (int64_t tx0 = 0; tx0 < g.tw; tx0 += 16) {
    const int64_t tiles = std::min<int64_t>(16, g.tw - tx0);
    const __mmask16 load_mask = (__mmask16)((1u << tiles) - 1u);
    __m512 qv[kOut][kIn];  // qv[a][j] = sum_i A^T[a][i] M[i * 6 + j]
    for (int64_t j = 0; j < kIn; ++j) {
      __m512 mi[kIn];
      for (int64_t i = 0; i < kIn; ++i) mi[i] = _mm512_maskz_loadu_ps(load_mask, m[i * kIn + j] + tx0);
      OCRT_WINOGRAD_OUTPUT_1D(mi[0], mi[1], mi[2], mi[3], mi[4], mi[5], qv[0][j], qv[1][j], qv[2][j], qv[3][j]);
    }
    for (int64_t a = 0; a < out_rows; ++a) {
      __m512 o[kOut];
      OCRT_WINOGRAD_OUTPUT_1D(qv[a][0], qv[a][1], qv[a][2], qv[a][3], qv[a][4], qv[a][5], o[0], o[1], o[2], o[3]);
      for (__m512& v : o) {
        v = _mm512_add_ps(v, vbias);
        if (pool) v = _mm512_max_ps(v, zero);  // v > 0 ? v : 0, as the scalar path: NaN and -0 become +0
      }
      const __m512 lo01 = _mm512_permutex2var_ps(o[0], idx_lo, o[1]), hi01 = _mm512_permutex2var_ps(o[0], idx_hi, o[1]);
      const __m512 lo23 = _mm512_permutex2var_ps(o[2], idx_lo, o[3]), hi23 = _mm512_permutex2var_ps(o[2], idx_hi, o[3]);
      const __m512d a01[2] = {_mm512_castps_pd(lo01), _mm512_castps_pd(hi01)};
      const __m512d a23[2] = {_mm512_castps_pd(lo23), _mm512_castps_pd(hi23)};
      float* row = (pool ? rows + a * g.Wo : plane + (kOut * ty + a) * g.Wo) + kOut * tx0;
      for (int s = 0; s < 4; ++s) {  // columns 16 s .. 16 s + 15 of the block: tiles 4 s .. 4 s + 3
        const __m512 part = _mm512_castpd_ps(_mm512_permutex2var_pd(a01[s / 2], s % 2 ? quad_hi : quad_lo, a23[s / 2]));
        const int64_t first = kOut * tx0 + 16 * s;
        if (first >= g.Wo) break;
        const int64_t cols = std::min<int64_t>(16, g.Wo - first);
        _mm512_mask_storeu_ps(row + 16 * s, (__mmask16)((1u << cols) - 1u), part);
      }
    }
  }
  if (pool) pooled_rows(rows, g, *pool, k, n, ty, y);
}
#endif

OutputRow output_row_for_path() {
#if defined(OCRT_TARGET_ATTRS)
  if (cpu_isa() >= CpuIsa::avx512) return output_row_avx512;
  if (cpu_isa() >= CpuIsa::avx2) return output_row_avx2;
#endif
  return output_row_plain;
}

// The output of tile rows [r0, r0 + rows) from their products M (36 planes of Cout x rows * tw,
// or rows * tw x Cout when `transposed`), plus bias (or null), into y, on every thread.
void output_tiles(const float* M, const Geometry& g, int64_t r0, int64_t rows, const float* bias, float* y,
                  bool transposed = false, const WinogradReluPool* pool = nullptr) {
  const int64_t P = rows * g.tw;
  const OutputRow output_row = output_row_for_path();
#pragma omp parallel
  {
    std::vector<float> q((size_t)(kOut * kIn * g.tw + (pool ? (kOut + 1) * g.Wo : 0)));
    float* pool_rows = pool ? q.data() + kOut * kIn * g.tw : nullptr;
#pragma omp for schedule(static)
    for (int64_t kr = 0; kr < g.Cout * rows; ++kr) {
      const int64_t k = kr / rows, r = r0 + kr % rows;
      output_row(M, g, k, r / g.th, r % g.th, P, (r - r0) * g.tw, bias ? bias[k] : 0.0f, y, q.data(), transposed,
                 pool, pool_rows);
    }
  }
}

// The tiles of a convolution and the chunks of whole tile rows they go through (see Layout).
struct Plan {
  Geometry g;
  int64_t tile_rows, rows_per_chunk, max_tiles;
};

Plan make_plan(int64_t N, int64_t C, int64_t H, int64_t W, int64_t Cout, int64_t pad_h, int64_t pad_w,
               int64_t chunk_tiles, bool inference = false) {
  Plan p;
  Geometry& g = p.g;
  g = Geometry{N, C, H, W, Cout, pad_h, pad_w, 0, 0, 0, 0, 0};
  g.Ho = H + 2 * pad_h - 2, g.Wo = W + 2 * pad_w - 2;
  g.th = (g.Ho + kOut - 1) / kOut, g.tw = (g.Wo + kOut - 1) / kOut;
  g.Wp = kOut * g.tw + 2;  // >= Wo + 2 = W + 2 pad_w: every input column fits
  p.tile_rows = N * g.th;
  const int64_t bytes_per_tile = kPoints * (C + Cout) * (int64_t)sizeof(float);
  if (chunk_tiles <= 0)
    chunk_tiles = inference ? std::max(kInferenceMinChunkTiles, kInferenceChunkBytes / bytes_per_tile)
                            : std::max(kMinChunkTiles, kChunkBytes / bytes_per_tile);
  p.rows_per_chunk = std::clamp<int64_t>(chunk_tiles / g.tw, 1, p.tile_rows);
  p.max_tiles = p.rows_per_chunk * g.tw;
  return p;
}

// The weight gradient's transforms (winograd_conv2d_weight_grad). The forward's bilinear form
//   sum over tiles of dy . A^T [ (G g G^T) * (B^T d B) ] A
// has as its derivative in g
//   dw = G^T [ (A dy A^T) * (B^T d B) ] G        summed over tiles,
// so each 4x4 tile of dy goes through A (6x4, the output transform's transpose), each 6x6 input
// tile through the forward's own B^T . B, the sum over tiles becomes 36 products of (Cout x
// tiles) by (tiles x C), and each (k, c) pair's 6x6 sum comes back through G^T . G (3x3).
//   A = [ 1  0  0  0 ]      G^T = [ 1/4  -1/6  -1/6  1/24   1/24  0 ]
//       [ 1  1  1  1 ]            [  0   -1/6   1/6  1/12  -1/12  0 ]
//       [ 1 -1  1 -1 ]            [  0   -1/6  -1/6  1/6    1/6   1 ]
//       [ 1  2  4  8 ]
//       [ 1 -2  4 -8 ]
//       [ 0  0  0  1 ]
#define OCRT_WINOGRAD_DY_1D(d0, d1, d2, d3, e0, e1, e2, e3, e4, e5) \
  do {                                                               \
    const auto s02 = (d0) + (d2), s13 = (d1) + (d3);                 \
    const auto t02 = (d0) + 4 * (d2), t13 = 2 * (d1) + 8 * (d3);      \
    e0 = (d0);                                                       \
    e1 = s02 + s13;                                                  \
    e2 = s02 - s13;                                                  \
    e3 = t02 + t13;                                                  \
    e4 = t02 - t13;                                                  \
    e5 = (d3);                                                       \
  } while (0)

// D for output channel k and one row of tiles: the four dy rows of the tile row (zero past Ho
// and Wo) through A down the columns, then through A along each tile's four columns. rows is
// scratch of 4 * 4 tw floats, t of 6 * 4 tw.
// Compiled for each path (dy_row_plain, _avx2, _avx512 below, chosen by dy_row_for_path).
[[gnu::always_inline]] inline void dy_row(const float* dy, const Geometry& g, int64_t k, int64_t n, int64_t ty,
                                          float* D, int64_t P, int64_t p0, float* rows, float* t) {
  const int64_t len = kOut * g.tw;
  const float* plane = dy + (n * g.Cout + k) * g.Ho * g.Wo;
  for (int64_t a = 0; a < kOut; ++a) {
    float* r = rows + a * len;
    const int64_t oh = kOut * ty + a;
    if (oh >= g.Ho) {
      std::fill(r, r + len, 0.0f);
      continue;
    }
    std::copy(plane + oh * g.Wo, plane + (oh + 1) * g.Wo, r);
    std::fill(r + g.Wo, r + len, 0.0f);
  }
  {
    const float *r0 = rows, *r1 = rows + len, *r2 = rows + 2 * len, *r3 = rows + 3 * len;
    float *t0 = t, *t1 = t + len, *t2 = t + 2 * len, *t3 = t + 3 * len, *t4 = t + 4 * len, *t5 = t + 5 * len;
    for (int64_t q = 0; q < len; ++q)
      OCRT_WINOGRAD_DY_1D(r0[q], r1[q], r2[q], r3[q], t0[q], t1[q], t2[q], t3[q], t4[q], t5[q]);
  }
  for (int64_t i = 0; i < kIn; ++i) {
    const float* ti = t + i * len;
    float* out[kIn];
    for (int64_t j = 0; j < kIn; ++j) out[j] = D + ((i * kIn + j) * g.Cout + k) * P + p0;
    for (int64_t tx = 0; tx < g.tw; ++tx) {
      const float* d = ti + kOut * tx;
      OCRT_WINOGRAD_DY_1D(d[0], d[1], d[2], d[3], out[0][tx], out[1][tx], out[2][tx], out[3][tx], out[4][tx],
                          out[5][tx]);
    }
  }
}

using DyRow = void (*)(const float*, const Geometry&, int64_t, int64_t, int64_t, float*, int64_t, int64_t, float*,
                       float*);

void dy_row_plain(const float* dy, const Geometry& g, int64_t k, int64_t n, int64_t ty, float* D, int64_t P,
                  int64_t p0, float* rows, float* t) {
  dy_row(dy, g, k, n, ty, D, P, p0, rows, t);
}

#if defined(OCRT_TARGET_ATTRS)
OCRT_TARGET_AVX2 void dy_row_avx2(const float* dy, const Geometry& g, int64_t k, int64_t n, int64_t ty, float* D,
                                  int64_t P, int64_t p0, float* rows, float* t) {
  dy_row(dy, g, k, n, ty, D, P, p0, rows, t);
}

// dy_row on AVX-512, 16 tiles at a time, as input_row_avx512: each of the four dy rows loaded as
// 64 columns (masked: past Wo, zero) and dealt by permutes into its four phases, then A down the
// rows and A across the phases with the portable code's formulas in its order: the same D. The
// portable pass across stores its six values a tile at a time (most of its time in training).
OCRT_TARGET_AVX512 void dy_row_avx512(const float* dy, const Geometry& g, int64_t k, int64_t n, int64_t ty, float* D,
                                      int64_t P, int64_t p0, float*, float*) {
  const float* plane = dy + (n * g.Cout + k) * g.Ho * g.Wo;
  float* out[kPoints];
  for (int64_t xi = 0; xi < kPoints; ++xi) out[xi] = D + (xi * g.Cout + k) * P + p0;
  for (int64_t tx0 = 0; tx0 < g.tw; tx0 += 16) {
    const int64_t tiles = std::min<int64_t>(16, g.tw - tx0);
    const __mmask16 store_mask = (__mmask16)((1u << tiles) - 1u);
    __m512 ph[kOut][kOut];  // ph[row][phase]
    for (int64_t a = 0; a < kOut; ++a) {
      const int64_t oh = kOut * ty + a;
      if (oh >= g.Ho) {
        for (int m = 0; m < kOut; ++m) ph[a][m] = _mm512_setzero_ps();
        continue;
      }
      const float* row = plane + oh * g.Wo;
      __m512 v[4];
      for (int q = 0; q < 4; ++q) {
        const int64_t from = kOut * tx0 + 16 * q;
        v[q] = _mm512_maskz_loadu_ps(columns_inside(from, g.Wo), row + from);
      }
      deal_phases(v, ph[a]);
    }
    __m512 e[kIn][kOut];  // e[i][m] = (A dy)[i], column 4 tx + m
    for (int m = 0; m < kOut; ++m)
      OCRT_WINOGRAD_DY_1D(ph[0][m], ph[1][m], ph[2][m], ph[3][m], e[0][m], e[1][m], e[2][m], e[3][m], e[4][m], e[5][m]);
    for (int64_t i = 0; i < kIn; ++i) {
      __m512 o[kIn];
      OCRT_WINOGRAD_DY_1D(e[i][0], e[i][1], e[i][2], e[i][3], o[0], o[1], o[2], o[3], o[4], o[5]);
      for (int64_t j = 0; j < kIn; ++j) _mm512_mask_storeu_ps(out[i * kIn + j] + tx0, store_mask, o[j]);
    }
  }
}
#endif

DyRow dy_row_for_path() {
#if defined(OCRT_TARGET_ATTRS)
  if (cpu_isa() >= CpuIsa::avx512) return dy_row_avx512;
  if (cpu_isa() >= CpuIsa::avx2) return dy_row_avx2;
#endif
  return dy_row_plain;
}

// dw[k, c] (3x3) = G^T S G for the summed 6x6 S of every (k, c) pair of output channel k. Each
// step is a loop over c (S[xi] holds a row of C values for k), so that the compiler vectorizes
// it: G^T down the six rows of every column j into half (3 x 6 rows of C), then G^T along each
// of those rows. The same operations per value in the same order as one (k, c) pair at a time,
// which ran scalar (3.5% of a crnn training step). half is scratch of 18 C floats.
void weight_grad_out(const float* S, int64_t Cout, int64_t C, int64_t k, float* dw, float* half) {
  constexpr float sixth = 1.0f / 6, twelfth = 1.0f / 12, twenty_fourth = 1.0f / 24;
  // o[r][c] = (G^T (s[0][c], ..., s[5][c]))[r] for r = 0..2, c < C.
  auto gt = [&](const float* const* s, float* const* o) {
    const float *s0 = s[0], *s1 = s[1], *s2 = s[2], *s3 = s[3], *s4 = s[4], *s5 = s[5];
    float *__restrict o0 = o[0], *__restrict o1 = o[1], *__restrict o2 = o[2];
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      o0[c] = 0.25f * s0[c] - sixth * (s1[c] + s2[c]) + twenty_fourth * (s3[c] + s4[c]);
      o1[c] = sixth * (s2[c] - s1[c]) + twelfth * (s3[c] - s4[c]);
      o2[c] = sixth * (s3[c] + s4[c] - s1[c] - s2[c]) + s5[c];
    }
  };
  const int64_t plane = Cout * C;  // S[xi] is (Cout x C)
  for (int64_t j = 0; j < kIn; ++j) {  // column j: half[r][j] = sum_i G^T[r][i] S[i][j]
    const float* s[kIn];
    for (int64_t i = 0; i < kIn; ++i) s[i] = S + (i * kIn + j) * plane + k * C;
    float* o[3] = {half + (0 * kIn + j) * C, half + (1 * kIn + j) * C, half + (2 * kIn + j) * C};
    gt(s, o);
  }
  float* out = half + 3 * kIn * C;  // three rows of C: one row of every filter's 3x3 at a time
  for (int r = 0; r < 3; ++r) {
    const float* s[kIn];
    for (int64_t j = 0; j < kIn; ++j) s[j] = half + (r * kIn + j) * C;
    float* o[3] = {out, out + C, out + 2 * C};
    gt(s, o);
    for (int64_t c = 0; c < C; ++c)
      for (int q = 0; q < 3; ++q) dw[(k * C + c) * 9 + 3 * r + q] = o[q][c];
  }
}

}  // namespace

bool winograd_applies(int64_t C, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p) {
  if (!sgemm_available()) return false;  // its 36 products are ocrt's GEMM
  return kh == 3 && kw == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dilation_h == 1 && p.dilation_w == 1 &&
         p.groups == 1 && C >= 16 && Cout >= 16;
}

namespace {

// The 36 transformed weight planes of one layer, packed: as the B of the small-tile products
// (U[xi]^T, C x Cout), or as the A of the usual ones (U[xi], Cout x C; as_a).
// Which weights: where they lie, their shape, the precision of the products, their bytes'
// fingerprint, and the form they are kept in.
struct WeightsKey {
  const float* w;
  int64_t C, Cout;
  MatmulPrecision precision;
  uint64_t print;
  bool as_a;
  bool operator==(const WeightsKey&) const = default;
};

struct KeptWeights {
  WeightsKey key;
  std::vector<std::unique_ptr<SgemmPackedB>> planes;    // !key.as_a
  std::vector<std::unique_ptr<SgemmPackedA>> a_planes;  // key.as_a
  size_t bytes = 0;
};

// The kept transforms, newest use last, at most kKeptBytes in all (the least recently used go
// first). Process-wide: weights are told apart by address (and content), so the models of
// several predictors, or of a program's own threads, each get their own.
std::mutex g_kept_mu;
std::list<std::shared_ptr<const KeptWeights>> g_kept;

// Weights met once in a small call, not kept yet (the last, short batch of a long run is the
// only small call of its run: keeping its layers' transforms would only add to its memory).
std::list<WeightsKey> g_seen;
constexpr size_t kSeenEntries = 64;
KeysInMaking<WeightsKey> g_making;  // the forms being made now

// The kept transforms of these weights in the form asked for: found, or made on their second
// call (or on the first, with `at_once`); null on the first (the caller then takes the usual path).
std::shared_ptr<const KeptWeights> kept_weights(const float* w, int64_t C, int64_t Cout, bool as_a, bool at_once) {
  const WeightsKey key{w, C, Cout, matmul_precision(), weights_fingerprint(w, Cout * C * 9), as_a};
  {
    std::unique_lock<std::mutex> lock(g_kept_mu);
    if (auto found = find_kept(g_kept, key)) return found;
    auto seen = std::find(g_seen.begin(), g_seen.end(), key);
    if (seen == g_seen.end() && !at_once) {
      g_seen.push_back(key);
      if (g_seen.size() > kSeenEntries) g_seen.pop_front();
      return nullptr;
    }
    if (seen != g_seen.end()) g_seen.erase(seen);
    // Another thread making them now: waited for, then found (null if that making threw).
    if (!g_making.claim_or_wait(lock, key)) return find_kept(g_kept, key);
  }
  const Making<WeightsKey> making(g_kept_mu, g_making, key);
  auto k = std::make_shared<KeptWeights>();
  k->key = key;
  // A row of the tile's planes at a time (6 of the 36), each packed as soon as it is made: the
  // unpacked transforms held at once are a sixth of U (as in winograd_conv2d's usual path).
  Tensor U_mem = Tensor::empty({kIn * Cout * C});
  float* U = U_mem.data<float>();
  if (as_a) k->a_planes.resize((size_t)kPoints);
  else k->planes.resize((size_t)kPoints);
  for (int64_t i = 0; i < kIn; ++i) {
    transform_weights(w, Cout, C, U, i, i + 1);
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < kIn; ++j) {
      const int64_t xi = i * kIn + j;
      const float* plane = U + j * Cout * C;
      if (as_a) k->a_planes[(size_t)xi] = std::make_unique<SgemmPackedA>(Cout, C, plane, C, 1);
      else k->planes[(size_t)xi] = std::make_unique<SgemmPackedB>(C, Cout, plane, 1, C);  // U[xi]^T: strides (1, C)
    }
  }
  for (const auto& plane : k->a_planes) k->bytes += plane->bytes();
  for (const auto& plane : k->planes) k->bytes += plane->bytes();
  std::lock_guard<std::mutex> lock(g_kept_mu);
  g_kept.push_back(k);
  drop_oldest_beyond(g_kept, kKeptBytes);
  return k;
}

// The forward pass of a call with few tiles (a line or two), outside autograd: with a few dozen tiles, each of
// the 36 products would pack its whole transformed weight plane to use it for a few dozen
// columns, and transforming and packing the weights cost more than the products (for crnn's
// 512 x 512 layer on one 400-pixel line, 38 MB written and read again for 245M multiply-adds).
// Here the products are turned around, M[xi]^T (P x Cout) = V[xi]^T (P x C) @ U[xi]^T, so that
// the weights are their B, kept transformed and packed between calls (kept_weights). The same
// sums in the same order as the other path's products (over c, in blocks of the kernel's KC).
void small_forward(const float* x, const KeptWeights& kept, const float* bias, float* y, const Plan& plan,
                   const WinogradReluPool* pool) {
  const Geometry& g = plan.g;
  const int64_t P = plan.tile_rows * g.tw, C = g.C, Cout = g.Cout;
  Tensor V_mem = Tensor::empty({kPoints * C * P}), M_mem = Tensor::empty({kPoints * Cout * P});
  float *V = V_mem.data<float>(), *M = M_mem.data<float>();
  input_tiles(x, g, 0, plan.tile_rows, V);
#pragma omp parallel for schedule(static)
  for (int64_t xi = 0; xi < kPoints; ++xi)  // V[xi] is (C x P): its transpose is read with strides (1, P)
    sgemm_packed(P, V + xi * C * P, 1, P, *kept.planes[(size_t)xi], M + xi * P * Cout, Cout);
  output_tiles(M, g, 0, plan.tile_rows, bias, y, true, pool);
}

// A buffer of at least `floats` floats for this thread's inference calls, 64-byte aligned, kept
// (and grown when asked for more) until the thread ends. The predictor's workers are long-lived
// threads, one per device lane.
float* inference_scratch(int64_t floats) {
  struct Buffer {
    float* data = nullptr;
    int64_t size = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer b;
  if (floats > b.size) {
    std::free(b.data);
    b.data = nullptr, b.size = 0;
    const size_t bytes = ((size_t)floats * sizeof(float) + 63) / 64 * 64;
    b.data = static_cast<float*>(std::aligned_alloc(64, bytes));
    OCRT_CHECK(b.data, "out of memory on cpu: Winograd's scratch of ", bytes, " bytes");
    b.size = floats;
  }
  return b.data;
}

// The chunk loop of every forward pass but the small-tile one: for each chunk of whole tile rows
// [r0, r0 + rows) (P = rows * tw tiles), make_inputs(r0, rows, P) writes the chunk's input tiles
// in whatever form the products read, the 36 products product(xi, P, M[xi]) give M[xi] (Cout x
// P), one thread each (the GEMM runs on the calling thread inside a parallel region), and the
// output tiles go to y. With prepare_row, the products go a row of the tile at a time (xi = 6 i
// .. 6 i + 5), each row after prepare_row(i): the caller makes U's planes of that row only.
template <class MakeInputs, class Product, class PrepareRow = std::nullptr_t>
void for_each_chunk(const Plan& plan, float* M, const float* bias, float* y, const WinogradReluPool* pool,
                    const MakeInputs& make_inputs, const Product& product, const PrepareRow& prepare_row = nullptr) {
  const Geometry& g = plan.g;
  for (int64_t r0 = 0; r0 < plan.tile_rows; r0 += plan.rows_per_chunk) {
    const int64_t rows = std::min(plan.rows_per_chunk, plan.tile_rows - r0), P = rows * g.tw;
    make_inputs(r0, rows, P);
    if constexpr (std::is_same_v<PrepareRow, std::nullptr_t>) {
#pragma omp parallel for schedule(static)
      for (int64_t xi = 0; xi < kPoints; ++xi) product(xi, P, M + xi * g.Cout * P);
    } else {
      for (int64_t i = 0; i < kIn; ++i) {
        prepare_row(i);
#pragma omp parallel for schedule(static)
        for (int64_t xi = i * kIn; xi < (i + 1) * kIn; ++xi) product(xi, P, M + xi * g.Cout * P);
      }
    }
    output_tiles(M, g, r0, rows, bias, y, false, pool);
  }
}

// The usual forward pass with float32 input tiles: V[xi] (C x P) made by input_tiles, and
// product(xi, P, V[xi], M[xi]) giving M[xi] = U[xi] (Cout x C) @ V[xi] (C x P).
//
// Where V and M live, the caller says (`scratch`). In inference, in one buffer per thread that
// only grows (inference_scratch), not in the tensor allocator: every layer's pair comes to about
// kInferenceChunkBytes, so one buffer serves every layer of every batch. From the allocator's
// cache, which ocrt-infer trims to the largest working set, their blocks were given back and
// mapped again at every layer once the whole U no longer counted in that working set (3.8 GB
// mapped over 300 lines against 1.1 GB: 4% of the time). In training (and for the backward's
// weights_once) two tensors from the caching allocator (runtime/cpu_allocator.h), which the
// backward's tensors reuse (one block made a crnn step's backward 8% slower).
template <class Product, class PrepareRow = std::nullptr_t>
void chunked_forward(const float* x, const Plan& plan, const float* bias, float* y, const WinogradReluPool* pool,
                     bool scratch, const Product& product, const PrepareRow& prepare_row = nullptr) {
  const Geometry& g = plan.g;
  const int64_t v_size = kPoints * g.C * plan.max_tiles, m_size = kPoints * g.Cout * plan.max_tiles;
  Tensor V_mem = scratch ? Tensor() : Tensor::empty({v_size}), M_mem = scratch ? Tensor() : Tensor::empty({m_size});
  float* V = scratch ? inference_scratch(v_size + m_size) : V_mem.data<float>();
  float* M = scratch ? V + v_size : M_mem.data<float>();
  for_each_chunk(
      plan, M, bias, y, pool, [&](int64_t r0, int64_t rows, int64_t) { input_tiles(x, g, r0, rows, V); },
      [&](int64_t xi, int64_t P, float* Mxi) { product(xi, P, V + xi * g.C * P, Mxi); }, prepare_row);
}

// The usual forward pass with the weights kept transformed and packed as the products' A: the
// transform and the packing of U, redone at every call otherwise, are gone (6% of a bf16 run of
// ocrt-infer on 32-line batches). The same products as the usual path, bit for bit.
#if defined(OCRT_TARGET_ATTRS)
// kept_forward in bf16 on the avx512bf16 path: the input transform writes each chunk's V as the
// products' packed B (input_row_pairs), and the products read it as it lies (sgemm_packed_ab)
// with the kept A. Float32 V, written and read again by the GEMM's packing (3.4% of a crnn-en
// bf16 run in pack_b_pairs alone), is gone. The same operands, the same sums: the same bits.
void pairs_forward(const float* x, const KeptWeights& kept, const float* bias, float* y, const Plan& plan,
                   const WinogradReluPool* pool, const SgemmBf16Pairs& layout) {
  const Geometry& g = plan.g;
  const int64_t nr = layout.nr, d = g.C / 2;
  const int64_t plane = (plan.max_tiles + nr - 1) / nr * nr * d;  // uint32 pairs of one point's B
  const int64_t v_size = kPoints * plane, m_size = kPoints * g.Cout * plan.max_tiles;
  float* scratch = inference_scratch(v_size + m_size);
  uint32_t* Vp = reinterpret_cast<uint32_t*>(scratch);
  float* M = scratch + v_size;
  for_each_chunk(
      plan, M, bias, y, pool,
      [&](int64_t r0, int64_t rows, int64_t P) {
        // The last panel's columns past P are zero, as the GEMM's own packing leaves them.
        if (const int64_t used = P % nr; used > 0) {
          const int64_t last = P / nr * nr * d;
          for (int64_t xi = 0; xi < kPoints; ++xi)
            for (int64_t kp = 0; kp < d; ++kp) {
              uint32_t* row = Vp + xi * plane + last + kp * nr;
              std::fill(row + used, row + nr, 0u);
            }
        }
#pragma omp parallel for schedule(static)
        for (int64_t cr = 0; cr < d * rows; ++cr) {
          const int64_t cp = cr / rows, r = r0 + cr % rows;
          input_row_pairs(x, g, 2 * cp, r / g.th, r % g.th, Vp, plane, nr, (r - r0) * g.tw);
        }
      },
      [&](int64_t xi, int64_t P, float* Mxi) { sgemm_packed_ab(*kept.a_planes[(size_t)xi], P, Vp + xi * plane, Mxi, P); });
}
#endif

void kept_forward(const float* x, const KeptWeights& kept, const float* bias, float* y, const Plan& plan,
                  const WinogradReluPool* pool) {
#if defined(OCRT_TARGET_ATTRS)
  if (matmul_precision() == MatmulPrecision::bf16) {
    const SgemmBf16Pairs layout = sgemm_bf16_pairs_layout();
    if (layout.nr > 0 && plan.g.C % 2 == 0 && plan.g.C <= layout.kc && plan.max_tiles <= layout.nc)
      return pairs_forward(x, kept, bias, y, plan, pool, layout);
  }
#endif
  chunked_forward(x, plan, bias, y, pool, /*scratch=*/true, [&](int64_t xi, int64_t P, const float* V, float* M) {
    sgemm_packed_a(*kept.a_planes[(size_t)xi], P, V, P, 1, M, P);
  });
}

}  // namespace

float* winograd_scratch(int64_t floats) { return inference_scratch(floats); }

size_t winograd_kept_bytes() {
  std::lock_guard<std::mutex> lock(g_kept_mu);
  return kept_bytes(g_kept);
}

bool winograd_pool_fits(const Pool2dParams& p) {
  return p.kernel_h == 2 && p.stride_h == 2 && p.pad_h == 0 && p.dilation_h == 1 && p.dilation_w == 1 &&
         p.kernel_w >= 1 && p.stride_w >= 1 && p.pad_w >= 0;
}

void winograd_conv2d(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C, int64_t H,
                     int64_t W, int64_t Cout, int64_t pad_h, int64_t pad_w, int64_t chunk_tiles,
                     const WinogradReluPool* pool, bool weights_once) {
  const bool inference = chunk_tiles <= 0 && !grad_enabled() && !weights_once;
  const Plan plan = make_plan(N, C, H, W, Cout, pad_h, pad_w, chunk_tiles, inference);
  if (pool)
    OCRT_CHECK(pool->Hp >= 1 && pool->Wp >= 1 && 2 * (pool->Hp - 1) < plan.g.Ho && pool->kw >= 1 && pool->sw >= 1 &&
                   pool->pw >= 0,
               "winograd_conv2d: a pooled output of ", pool->Hp, "x", pool->Wp, " does not fit the ", plan.g.Ho, "x",
               plan.g.Wo, " output");
  // A call outside autograd (inference) reads the weights kept transformed, from their second
  // such call on: as the B of turned-around products where it has few tiles (a line or two),
  // else as the A of the usual ones.
  if (inference) {
    const bool small = plan.tile_rows * plan.g.tw <= kSmallTiles;
    // A call of several chunks keeps its weights at once: the first-call path below would make
    // U's rows again for every chunk (a crnn-s batch's first layers: 2% of a 300-line bf16 run).
    const bool chunks = plan.tile_rows > plan.rows_per_chunk;
    if (const auto kept = kept_weights(w, C, Cout, !small, chunks))
      return small ? small_forward(x, *kept, bias, y, plan, pool) : kept_forward(x, *kept, bias, y, plan, pool);
  }
  if (grad_enabled() || weights_once) {  // training: U whole, made once per call and used for every chunk
    Tensor U_mem = Tensor::empty({kPoints * Cout * C});
    float* U = U_mem.data<float>();
    transform_weights(w, Cout, C, U);
    chunked_forward(x, plan, bias, y, pool, /*scratch=*/false, [&](int64_t xi, int64_t P, const float* V, float* M) {
      sgemm(Cout, P, C, U + xi * Cout * C, C, 1, V, P, 1, M, P, false);
    });
    return;
  }
  // Inference, a first call (or explicit chunks): U a row of the tile at a time (6 of its 36
  // planes), made again for each chunk. Whole, it was held beside V and M (37.7 MB for a
  // 512 x 512 layer), the largest tensor of a float32 batch of lines, whose block the
  // allocator's cache then kept for the rest of the run (peak RSS on bench/peers_cpu.sh's 300
  // lines 225 -> 192 MiB, with V and M in inference_scratch). Six rounds of products instead of one and the transform made again
  // per chunk cost a training step's forward 20% (crnn), so training and weights_once keep U
  // whole. The same U values, the same products.
  Tensor U_mem = Tensor::empty({kIn * Cout * C});
  float* U = U_mem.data<float>();
  chunked_forward(
      x, plan, bias, y, pool, /*scratch=*/true,
      [&](int64_t xi, int64_t P, const float* V, float* M) {
        sgemm(Cout, P, C, U + (xi % kIn) * Cout * C, C, 1, V, P, 1, M, P, false);
      },
      [&](int64_t i) { transform_weights(w, Cout, C, U, i, i + 1); });
}

void winograd_conv2d_weight_grad(const float* x, const float* dy, float* dw, int64_t N, int64_t C, int64_t H,
                                 int64_t W, int64_t Cout, int64_t pad_h, int64_t pad_w, int64_t chunk_tiles) {
  const Plan plan = make_plan(N, C, H, W, Cout, pad_h, pad_w, chunk_tiles);
  const Geometry& g = plan.g;
  const int64_t tile_rows = plan.tile_rows, rows_per_chunk = plan.rows_per_chunk, max_tiles = plan.max_tiles;

  const InputRow input_row = input_row_for_path();
  const DyRow dy_row = dy_row_for_path();
  Tensor S_mem = Tensor::empty({kPoints * Cout * C}), V_mem = Tensor::empty({kPoints * C * max_tiles}),
         D_mem = Tensor::empty({kPoints * Cout * max_tiles});
  float *S = S_mem.data<float>(), *V = V_mem.data<float>(), *D = D_mem.data<float>();

  for (int64_t r0 = 0; r0 < tile_rows; r0 += rows_per_chunk) {
    const int64_t rows = std::min(rows_per_chunk, tile_rows - r0), P = rows * g.tw;
#pragma omp parallel
    {
      std::vector<float> scratch((size_t)(2 * kIn * g.Wp));
#pragma omp for schedule(static) nowait
      for (int64_t cr = 0; cr < C * rows; ++cr) {
        const int64_t c = cr / rows, r = r0 + cr % rows;
        input_row(x, g, c, r / g.th, r % g.th, V, P, (r - r0) * g.tw, scratch.data(), scratch.data() + kIn * g.Wp);
      }
#pragma omp for schedule(static)
      for (int64_t kr = 0; kr < Cout * rows; ++kr) {
        const int64_t k = kr / rows, r = r0 + kr % rows;
        dy_row(dy, g, k, r / g.th, r % g.th, D, P, (r - r0) * g.tw, scratch.data(),
               scratch.data() + kOut * kOut * g.tw);
      }
    }
    // S[xi] (Cout x C) (+)= D[xi] (Cout x P) @ V[xi]^T (P x C), one thread per product; the
    // chunks add up in order, so the sums do not depend on the thread count.
#pragma omp parallel for schedule(static)
    for (int64_t xi = 0; xi < kPoints; ++xi)
      sgemm(Cout, C, P, D + xi * Cout * P, P, 1, V + xi * C * P, 1, P, S + xi * Cout * C, C, r0 > 0);
  }
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < Cout; ++k) {
    thread_local std::vector<float> half;
    if (half.size() < (size_t)(21 * C)) half.resize((size_t)(21 * C));
    weight_grad_out(S, Cout, C, k, dw, half.data());
  }
}

}  // namespace ocrt::cpu

#endif
