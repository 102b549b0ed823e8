// 2x2 convolution by Winograd's minimal filtering along the rows, F(3, 2) (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016; ops/cpu/winograd.cpp has F(4x4, 3x3)).
//
// An output pixel of a 2x2 layer is the sum over the input channels c and the kernel's two rows
// i of a 2-tap filter (g0, g1) = w[k, c, i, :] run along input row i under it. Three outputs of
// such a filter over four inputs d0..d3,
//   y0 = d0 g0 + d1 g1,  y1 = d1 g0 + d2 g1,  y2 = d2 g0 + d3 g1,
// take six multiplications done directly and four by evaluating at the points 0, 1, -1 and
// infinity: y = A^T [ (G g) * (B^T d) ] with
//   G = [ 1    0  ]    B^T = [ 1  0 -1  0 ]    A^T = [ 1  1  1  0 ]
//       [ 1/2 1/2 ]          [ 0  1  1  0 ]          [ 0  1 -1  0 ]
//       [ 1/2 -1/2]          [ 0 -1  1  0 ]          [ 0  1  1  1 ]
//       [ 0    1  ]          [ 0 -1  0  1 ]
// (row 0 of A^T: (d0 - d2) g0 + (d1 + d2)(g0 + g1) / 2 + (d2 - d1)(g0 - g1) / 2 = d0 g0 + d1 g1).
// The transforms only add, subtract and halve, so the result rounds about as the direct sum
// does: no value is scaled up to cancel later, as F(4x4, 3x3)'s are.
// The sum over (i, c) moves inside as for 3x3 layers: with the 2 C pairs (i, c) as the products'
// inner dimension,
//   M[xi](k, tile) = sum_(i,c) U[xi](k, (i, c)) V[xi]((i, c), tile),   xi = 0..3,
// four matrix products of (Cout x 2C) by (2C x tiles) where im2col's single product is (Cout x 4C)
// by (4C x outputs): 4 x 2C multiply-adds a tile of three outputs against 4C x 3, a third fewer.
//
// Layout. A tile is three output columns of one output row; tile p = (n Ho + ho) tw + tx for tw
// tiles a row. Work goes in chunks of whole output rows, each chunk's V[xi] (2C x P) and M[xi]
// (Cout x P) in the calling thread's Winograd scratch (winograd.h). Threads share out the input
// transform's (pair, row) lines and the output transform's (k, row) lines; each product runs
// on all threads by itself (the GEMM's own split, the same sums on any thread count).
#include "ops/cpu/winograd_2x2.h"

#if defined(OCRT_CPU_WINOGRAD)

#include <algorithm>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "ops/cpu/fingerprint.h"
#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace ocrt::cpu {

namespace {

constexpr int64_t kOut = 3;     // output columns a tile
constexpr int64_t kPoints = 4;  // input columns a tile, and products

// Chunks hold at least this many tiles and, beyond that, at most kChunkBytes of V and M (the
// 3x3 convolution's inference sizes, ops/cpu/winograd.cpp).
constexpr int64_t kMinChunkTiles = 192;
constexpr int64_t kChunkBytes = int64_t(8) << 20;
// Transformed weights kept packed between calls outside autograd, at most this many bytes in
// the process (crnn-en's 2x2 layer: 8 MB in float32, 4 in bf16).
constexpr size_t kKeptBytes = size_t(64) << 20;

struct Geometry {
  int64_t N, C, H, W, Cout, ph, pw;
  int64_t Ho, Wo, tw;  // output size, tiles per output row
  int64_t K() const { return 2 * C; }
};

// U[xi] (Cout x 2C) = G g for every filter row g = w[k, c, i, :], at row k, column i C + c.
void transform_weights(const float* w, const Geometry& g, float* U) {
  const int64_t K = g.K(), plane = g.Cout * K;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < g.Cout; ++k)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t c = 0; c < g.C; ++c) {
        const float* f = w + ((k * g.C + c) * 2 + i) * 2;
        const int64_t at = k * K + i * g.C + c;
        U[at] = f[0];
        U[plane + at] = 0.5f * (f[0] + f[1]);
        U[2 * plane + at] = 0.5f * (f[0] - f[1]);
        U[3 * plane + at] = f[1];
      }
}

// V for one (kernel row i, channel c) pair and output row r = n Ho + ho: the input row under it
// (zeros above or below the image) dealt into its phases D_j[tx] = padded column 3 tx + j (the
// tile's fourth column is D_0 one tile on), then B^T d over contiguous arrays. D is scratch of
// 3 (tw + 1) floats. Compiled for each path below.
[[gnu::always_inline]] inline void input_line(const float* x, const Geometry& g, int64_t i, int64_t c, int64_t r,
                                              float* V, int64_t P, int64_t p0, float* D) {
  const int64_t n = r / g.Ho, ho = r % g.Ho, ih = ho - g.ph + i, K = g.K();
  float* __restrict o0 = V + (i * g.C + c) * P + p0;
  float* __restrict o1 = o0 + K * P;
  float* __restrict o2 = o1 + K * P;
  float* __restrict o3 = o2 + K * P;
  if (ih < 0 || ih >= g.H) {  // padding rows: B^T of zeros
    std::fill(o0, o0 + g.tw, 0.0f), std::fill(o1, o1 + g.tw, 0.0f);
    std::fill(o2, o2 + g.tw, 0.0f), std::fill(o3, o3 + g.tw, 0.0f);
    return;
  }
  const float* row = x + ((n * g.C + c) * g.H + ih) * g.W;
  float* D0 = D;
  float* D1 = D0 + g.tw + 1;
  float* D2 = D1 + g.tw + 1;
  float* phase[3] = {D0, D1, D2};
  for (int64_t tx = 0; tx <= g.tw; ++tx)
    for (int64_t j = 0; j < 3; ++j) {
      const int64_t q = kOut * tx + j - g.pw;
      phase[j][tx] = q >= 0 && q < g.W ? row[q] : 0.0f;
    }
#pragma omp simd
  for (int64_t tx = 0; tx < g.tw; ++tx) {
    const float d0 = D0[tx], d1 = D1[tx], d2 = D2[tx], d3 = D0[tx + 1];
    o0[tx] = d0 - d2;
    o1[tx] = d1 + d2;
    o2[tx] = d2 - d1;
    o3[tx] = d3 - d1;
  }
}

// Output row r of channel k from the products: A^T m per tile, plus the bias, dealt back from
// phases into the row's Wo columns. O is scratch of 3 tw floats.
[[gnu::always_inline]] inline void output_line(const float* M, const Geometry& g, int64_t k, int64_t r, int64_t P,
                                               int64_t p0, const float* bias, float* y, float* O) {
  const int64_t plane = g.Cout * P;
  const float* __restrict m0 = M + k * P + p0;
  const float* __restrict m1 = m0 + plane;
  const float* __restrict m2 = m1 + plane;
  const float* __restrict m3 = m2 + plane;
  const float b = bias ? bias[k] : 0.0f;
  float* __restrict y0 = O;
  float* __restrict y1 = O + g.tw;
  float* __restrict y2 = O + 2 * g.tw;
#pragma omp simd
  for (int64_t tx = 0; tx < g.tw; ++tx) {
    const float s = m1[tx] + m2[tx];
    y0[tx] = (m0[tx] + s) + b;
    y1[tx] = (m1[tx] - m2[tx]) + b;
    y2[tx] = (s + m3[tx]) + b;
  }
  const int64_t n = r / g.Ho, ho = r % g.Ho;
  float* out = y + ((n * g.Cout + k) * g.Ho + ho) * g.Wo;
  const int64_t whole = g.Wo / kOut;  // tiles whose three columns all lie in the row
  for (int64_t tx = 0; tx < whole; ++tx) {
    out[kOut * tx] = y0[tx];
    out[kOut * tx + 1] = y1[tx];
    out[kOut * tx + 2] = y2[tx];
  }
  const float* last[3] = {y0, y1, y2};
  for (int64_t q = kOut * whole; q < g.Wo; ++q) out[q] = last[q - kOut * whole][whole];
}

using InputLine = void (*)(const float*, const Geometry&, int64_t, int64_t, int64_t, float*, int64_t, int64_t, float*);
using OutputLine = void (*)(const float*, const Geometry&, int64_t, int64_t, int64_t, int64_t, const float*, float*,
                            float*);

void input_line_plain(const float* x, const Geometry& g, int64_t i, int64_t c, int64_t r, float* V, int64_t P,
                      int64_t p0, float* D) {
  input_line(x, g, i, c, r, V, P, p0, D);
}
void output_line_plain(const float* M, const Geometry& g, int64_t k, int64_t r, int64_t P, int64_t p0,
                       const float* bias, float* y, float* O) {
  output_line(M, g, k, r, P, p0, bias, y, O);
}
#if defined(OCRT_TARGET_ATTRS)
OCRT_TARGET_AVX2 void input_line_avx2(const float* x, const Geometry& g, int64_t i, int64_t c, int64_t r, float* V,
                                      int64_t P, int64_t p0, float* D) {
  input_line(x, g, i, c, r, V, P, p0, D);
}
OCRT_TARGET_AVX2 void output_line_avx2(const float* M, const Geometry& g, int64_t k, int64_t r, int64_t P, int64_t p0,
                                       const float* bias, float* y, float* O) {
  output_line(M, g, k, r, P, p0, bias, y, O);
}
OCRT_TARGET_AVX512 void input_line_avx512(const float* x, const Geometry& g, int64_t i, int64_t c, int64_t r, float* V,
                                          int64_t P, int64_t p0, float* D) {
  input_line(x, g, i, c, r, V, P, p0, D);
}
OCRT_TARGET_AVX512 void output_line_avx512(const float* M, const Geometry& g, int64_t k, int64_t r, int64_t P,
                                           int64_t p0, const float* bias, float* y, float* O) {
  output_line(M, g, k, r, P, p0, bias, y, O);
}
#endif

// The transforms compiled for this CPU's path.
struct Lines {
  InputLine input;
  OutputLine output;
};
Lines lines_for_path() {
#if defined(OCRT_TARGET_ATTRS)
  if (cpu_isa() >= CpuIsa::avx512) return {input_line_avx512, output_line_avx512};
  if (cpu_isa() >= CpuIsa::avx2) return {input_line_avx2, output_line_avx2};
#endif
  return {input_line_plain, output_line_plain};
}

// The four transformed weight planes of a layer, packed as the products' A, kept between calls
// outside autograd; matched as the 3x3 layers' kept transforms are (ops/cpu/winograd.cpp).
struct KeptKey {
  const float* w;
  int64_t C, Cout;
  MatmulPrecision precision;
  uint64_t print;
  bool operator==(const KeptKey&) const = default;
};

struct Kept {
  KeptKey key;
  std::vector<std::unique_ptr<SgemmPackedA>> planes;
  size_t bytes = 0;
};

std::mutex g_kept_mu;
std::list<std::shared_ptr<const Kept>> g_kept;  // newest use last
KeysInMaking<KeptKey> g_making;                 // the forms being made now

// The four planes of U = G g packed as the products' A (made for this call).
std::vector<std::unique_ptr<SgemmPackedA>> packed_planes(const float* w, const Geometry& g) {
  const int64_t K = g.K();
  Tensor U_mem = Tensor::empty({kPoints * g.Cout * K});
  float* U = U_mem.data<float>();
  transform_weights(w, g, U);
  std::vector<std::unique_ptr<SgemmPackedA>> planes((size_t)kPoints);
#pragma omp parallel for schedule(static)
  for (int64_t xi = 0; xi < kPoints; ++xi)
    planes[(size_t)xi] = std::make_unique<SgemmPackedA>(g.Cout, K, U + xi * g.Cout * K, K, 1);
  return planes;
}

// The kept planes of these weights: found, or made now (by another thread: waited for).
std::shared_ptr<const Kept> kept_weights(const float* w, const Geometry& g) {
  const KeptKey key{w, g.C, g.Cout, matmul_precision(), weights_fingerprint(w, g.Cout * g.C * 4)};
  {
    std::unique_lock<std::mutex> lock(g_kept_mu);
    if (auto found = find_kept(g_kept, key)) return found;
    // Another thread making them now: waited for, then found (null if that making threw: this
    // call packs its own).
    if (!g_making.claim_or_wait(lock, key)) return find_kept(g_kept, key);
  }
  const Making<KeptKey> making(g_kept_mu, g_making, key);
  auto k = std::make_shared<Kept>();
  k->key = key;
  k->planes = packed_planes(w, g);
  for (const auto& plane : k->planes) k->bytes += plane->bytes();
  std::lock_guard<std::mutex> lock(g_kept_mu);
  g_kept.push_back(k);
  drop_oldest_beyond(g_kept, kKeptBytes);
  return k;
}

}  // namespace

size_t winograd_2x2_kept_bytes() {
  std::lock_guard<std::mutex> lock(g_kept_mu);
  return kept_bytes(g_kept);
}

bool winograd_2x2_applies(int64_t C, int64_t Cout, int64_t kh, int64_t kw, int64_t Wo, const Conv2dParams& p) {
  if (!sgemm_available()) return false;
  return kh == 2 && kw == 2 && p.stride_h == 1 && p.stride_w == 1 && p.dilation_h == 1 && p.dilation_w == 1 &&
         p.groups == 1 && C >= 16 && Cout >= 16 && Wo >= 2 * kOut;
}

void winograd_2x2_conv2d(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C, int64_t H,
                         int64_t W, int64_t Cout, int64_t pad_h, int64_t pad_w, int64_t chunk_tiles) {
  Geometry g{N, C, H, W, Cout, pad_h, pad_w, H + 2 * pad_h - 1, W + 2 * pad_w - 1, 0};
  OCRT_CHECK(N >= 1 && C >= 1 && Cout >= 1 && g.Ho >= 1 && g.Wo >= 1 && pad_h >= 0 && pad_w >= 0,
             "winograd_2x2_conv2d: an empty output (", N, " x ", Cout, " x ", g.Ho, " x ", g.Wo, ")");
  g.tw = (g.Wo + kOut - 1) / kOut;
  const int64_t K = g.K(), out_rows = N * g.Ho;
  if (chunk_tiles <= 0)
    chunk_tiles = std::max(kMinChunkTiles, kChunkBytes / (kPoints * (K + Cout) * (int64_t)sizeof(float)));
  const int64_t rows_per_chunk = std::clamp<int64_t>(chunk_tiles / g.tw, 1, out_rows);
  const int64_t max_tiles = rows_per_chunk * g.tw;

  // Outside autograd the packed transforms are kept; in training the weights change every step
  // and are transformed and packed for this call only (packed once for all its chunks: the GEMM
  // would pack U's planes again for every chunk).
  std::shared_ptr<const Kept> kept;
  std::vector<std::unique_ptr<SgemmPackedA>> own;
  if (!grad_enabled()) kept = kept_weights(w, g);
  if (!kept) own = packed_planes(w, g);
  const std::vector<std::unique_ptr<SgemmPackedA>>& planes = kept ? kept->planes : own;

  const int64_t v_size = kPoints * K * max_tiles;
  float* V = winograd_scratch(v_size + kPoints * Cout * max_tiles);
  float* M = V + v_size;
  const Lines lines = lines_for_path();
  for (int64_t r0 = 0; r0 < out_rows; r0 += rows_per_chunk) {
    const int64_t rows = std::min(rows_per_chunk, out_rows - r0), P = rows * g.tw;
#pragma omp parallel
    {
      std::vector<float> D((size_t)(3 * (g.tw + 1)));
#pragma omp for schedule(static)
      for (int64_t line = 0; line < K * rows; ++line) {
        const int64_t pair = line / rows, r = r0 + line % rows;
        lines.input(x, g, pair / C, pair % C, r, V, P, (r - r0) * g.tw, D.data());
      }
    }
    for (int64_t xi = 0; xi < kPoints; ++xi) {
      const float* Vxi = V + xi * K * P;
      float* Mxi = M + xi * Cout * P;
      sgemm_packed_a(*planes[(size_t)xi], P, Vxi, P, 1, Mxi, P);
    }
#pragma omp parallel
    {
      std::vector<float> O((size_t)(3 * g.tw));
#pragma omp for schedule(static)
      for (int64_t line = 0; line < Cout * rows; ++line) {
        const int64_t k = line / rows, r = r0 + line % rows;
        lines.output(M, g, k, r, P, (r - r0) * g.tw, bias, y, O.data());
      }
    }
  }
}

}  // namespace ocrt::cpu

#endif
