// Direct convolution for few output channels (conv_direct.h says when and why).
//
// One output row at a time. Along the row, blocks of B columns are "interior" when every tap of
// the kernel lands inside the input row; such a block keeps Cout x B running sums in vector
// registers and, for each (c, i, j), loads B input values once and multiplies them by each of
// the Cout weights w[., c, i, j]: one load per Cout multiply-adds. The few columns near the
// left and right edges, where taps fall into the zero padding, are summed one by one. Rows of
// the kernel that fall into the padding above or below are skipped (they add zeros).
//
//   y[n, o, oh, ow] = bias[o] + sum over c, i, j of w[o, c, i, j] x[n, c, oh - pad_h + i, ow - pad_w + j]
//
// With AVX2, B is chosen so that the sums take 8 vectors of 8 floats whatever Cout is (Cout 1:
// 64 columns, 2: 32, 3-4: 16, 5-8: 8), which leaves the other registers for the loaded inputs.
// On the avx512 paths and above the vectors hold 16 floats and B is 64 columns for Cout 1-2, 32
// for more (16 of the 32 registers for 8 channels): each weight's broadcast then serves two
// vectors of inputs, and the first layer of crnn-s took 1.9% of a bf16 run on Zen 4 instead of
// 3.1% (the same sums: each output's chain of multiply-adds does not depend on the width).
#include "ops/cpu/conv_direct.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "runtime/cpu/loops.h"
#include "runtime/cpu_isa.h"

#if defined(OCRT_TARGET_ATTRS)
#include <immintrin.h>
#endif

namespace ocrt::cpu {

namespace {

// The functions below are inlined whole into output_row_avx2 (the end of this namespace), which
// compiles them for AVX2 and FMA on CPUs whose path has them: a build for the baseline x86-64
// (OCRT_NATIVE=OFF) otherwise runs their 8-float vectors as SSE2 halves without FMA (the first
// layer of crnn: 5.9% of a bf16 run against 1.9%).
#define OCRT_DIRECT_INLINE [[gnu::always_inline]] inline

typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));
// The vector of L floats (8: AVX2's registers; 16: AVX-512's).
template <int L>
using VecOf = std::conditional_t<L == 8, Vec8, Vec16>;

// Through references, not by value: a 32- or 64-byte vector passed or returned by value in a
// build without AVX would change the calling convention (GCC warns), even where it is inlined.
template <class V>
OCRT_DIRECT_INLINE void load_vec(V& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}

template <class V>
OCRT_DIRECT_INLINE void store_vec(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

struct Shape {
  int64_t C, H, W, Cout, kh, kw, pad_h, pad_w, Ho, Wo;
  // Where output (o, oh, ow) is written: y[o * y_plane + (oh - y_row0) * Wo + ow]. The whole
  // output (y_plane Ho Wo, y_row0 0), or a scratch of a few rows (the fused ReLU and max-pool).
  int64_t y_plane, y_row0;
  float* out(float* y, int64_t o, int64_t oh) const { return y + o * y_plane + (oh - y_row0) * Wo; }
};

// Output column ow of row oh, every channel, with bounds checks: the edges of the row.
OCRT_DIRECT_INLINE void edge_column(const float* x, const float* wt, const float* bias, float* y, const Shape& s, int64_t oh, int64_t ow) {
  float acc[kDirectConvMaxCout] = {};
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t i = 0; i < s.kh; ++i) {
      const int64_t ih = oh - s.pad_h + i;
      if (ih < 0 || ih >= s.H) continue;
      for (int64_t j = 0; j < s.kw; ++j) {
        const int64_t iw = ow - s.pad_w + j;
        if (iw < 0 || iw >= s.W) continue;
        const float v = x[(c * s.H + ih) * s.W + iw];
        const float* wr = wt + ((c * s.kh + i) * s.kw + j) * s.Cout;
        for (int64_t o = 0; o < s.Cout; ++o) acc[o] += wr[o] * v;
      }
    }
  for (int64_t o = 0; o < s.Cout; ++o) s.out(y, o, oh)[ow] = acc[o] + (bias ? bias[o] : 0.0f);
}

// Columns [ow, ow + L NV) of output row oh, every tap inside the input row: CO x NV vectors of
// L running sums, one load of L inputs per CO multiply-adds. Each sum is the same chain of
// multiply-adds in (c, i, j) order whatever L is: the 8- and 16-lane rows give the same bits.
template <int CO, int NV, int L>
OCRT_DIRECT_INLINE void interior_block(const float* x, const float* wt, const float* bias, float* y, const Shape& s,
                                       int64_t oh, int64_t ow) {
  using V = VecOf<L>;
  V acc[CO][NV] = {};
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t i = 0; i < s.kh; ++i) {
      const int64_t ih = oh - s.pad_h + i;
      if (ih < 0 || ih >= s.H) continue;
      const float* row = x + (c * s.H + ih) * s.W + ow - s.pad_w;
      const float* wr = wt + (c * s.kh + i) * s.kw * CO;
      for (int64_t j = 0; j < s.kw; ++j) {
        V v[NV];
        for (int u = 0; u < NV; ++u) load_vec(v[u], row + j + L * u);
        for (int o = 0; o < CO; ++o) {
          const float wv = wr[j * CO + o];
          for (int u = 0; u < NV; ++u) acc[o][u] += v[u] * wv;
        }
      }
    }
  for (int o = 0; o < CO; ++o) {
    const float b = bias ? bias[o] : 0.0f;
    for (int u = 0; u < NV; ++u) {
      const V out = acc[o][u] + b;
      store_vec(s.out(y, o, oh) + ow + L * u, out);
    }
  }
}

// Output row oh of one sample: x (C, H, W), wt (C, kh, kw, CO) the weights turned so that one
// tap's CO weights lie side by side, y (CO, Ho, Wo). Wide blocks, then blocks of one vector for
// what is left of the interior (and, with 16 lanes, one of 8), then the edges one column at a
// time. With 8 lanes the running sums take 8 vectors (of AVX2's 16 registers); with 16 lanes up
// to 16 (of AVX-512's 32): two vectors of 16 columns for each of 8 channels, so that every
// weight broadcast serves two vectors of inputs (with 8 lanes, a load and a broadcast came with
// every multiply-add: the first layer of crnn ran at a third of the FMA peak on Zen 4).
template <int CO, int L>
OCRT_DIRECT_INLINE void output_row(const float* x, const float* wt, const float* bias, float* y, const Shape& s,
                                   int64_t oh) {
  constexpr int NV = L == 8 ? (CO == 1 ? 8 : CO == 2 ? 4 : CO <= 4 ? 2 : 1)
                            : (CO <= 2 ? 4 : 2);  // vectors of L columns a block
  // Columns [lo, hi) have every tap inside the input row: ow - pad_w >= 0, ow - pad_w + kw <= W.
  const int64_t lo = std::min(s.pad_w, s.Wo), hi = std::max(lo, std::min(s.Wo, s.W - s.kw + s.pad_w + 1));
  for (int64_t ow = 0; ow < lo; ++ow) edge_column(x, wt, bias, y, s, oh, ow);
  int64_t ow = lo;
  for (; ow + L * NV <= hi; ow += L * NV) interior_block<CO, NV, L>(x, wt, bias, y, s, oh, ow);
  if constexpr (NV > 1)
    for (; ow + L <= hi; ow += L) interior_block<CO, 1, L>(x, wt, bias, y, s, oh, ow);
  if constexpr (L > 8)
    for (; ow + 8 <= hi; ow += 8) interior_block<CO, 1, 8>(x, wt, bias, y, s, oh, ow);
  for (; ow < s.Wo; ++ow) edge_column(x, wt, bias, y, s, oh, ow);
}

// output_row for a chunk of co output channels.
using ChunkRow = void (*)(const float*, const float*, const float*, float*, const Shape&, int64_t);

template <int CO>
void output_row_base(const float* x, const float* wt, const float* bias, float* y, const Shape& s, int64_t oh) {
  output_row<CO, 8>(x, wt, bias, y, s, oh);
}

#if defined(OCRT_TARGET_ATTRS)
template <int CO>
OCRT_TARGET_AVX2 void output_row_avx2(const float* x, const float* wt, const float* bias, float* y, const Shape& s,
                                    int64_t oh) {
  output_row<CO, 8>(x, wt, bias, y, s, oh);
}

template <int CO>
OCRT_TARGET_AVX512 void output_row_avx512(const float* x, const float* wt, const float* bias, float* y, const Shape& s,
                                        int64_t oh) {
  output_row<CO, 16>(x, wt, bias, y, s, oh);
}
#endif

template <int CO>
ChunkRow row_function() {
#if defined(OCRT_TARGET_ATTRS)
  if (cpu_isa() >= CpuIsa::avx512) return output_row_avx512<CO>;
  if (cpu_isa() >= CpuIsa::avx2) return output_row_avx2<CO>;
#endif
  return output_row_base<CO>;
}

ChunkRow chunk_row_for(int64_t co) {
  switch (co) {
    case 1: return row_function<1>();
    case 2: return row_function<2>();
    case 3: return row_function<3>();
    case 4: return row_function<4>();
    case 5: return row_function<5>();
    case 6: return row_function<6>();
    case 7: return row_function<7>();
    case 8: return row_function<8>();
  }
  OCRT_CHECK(false, "direct_conv2d: a chunk of ", co, " output channels");
  return nullptr;
}

// Output channels in chunks of up to 8; chunk k's weights turned to wt[k] (C, kh, kw, its CO):
// wt[k][c, i, j, o] = w[8 k + o, c, i, j].
std::vector<std::vector<float>> turned_weights(const float* w, int64_t Cout, int64_t taps) {
  std::vector<std::vector<float>> wt((size_t)((Cout + 7) / 8));
  for (int64_t k = 0; k < (int64_t)wt.size(); ++k) {
    const int64_t co = std::min<int64_t>(8, Cout - 8 * k);
    wt[(size_t)k].resize((size_t)(taps * co));
    for (int64_t o = 0; o < co; ++o)
      for (int64_t r = 0; r < taps; ++r) wt[(size_t)k][(size_t)(r * co + o)] = w[(8 * k + o) * taps + r];
  }
  return wt;
}

}  // namespace

namespace {

// The kernel's rows that land in the image for output row oh, and each one's inputs along the
// row for each column offset j: taps[(i * kw + j) * Wo + ow] = x[2 oh - pad_h + i, 2 ow - pad_w + j]
// (0 in the padding). Returns the first and one past the last such i.
std::pair<int64_t, int64_t> stride2_taps(const float* x, int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t pad_h,
                                         int64_t pad_w, int64_t Wo, int64_t oh, float* taps) {
  const int64_t i0 = std::max<int64_t>(0, pad_h - 2 * oh), i1 = std::min<int64_t>(kh, H + pad_h - 2 * oh);
  for (int64_t i = i0; i < i1; ++i) {
    const float* row = x + (2 * oh - pad_h + i) * W;
    for (int64_t j = 0; j < kw; ++j) {
      float* t = taps + (i * kw + j) * Wo;
      // ow with 0 <= 2 ow - pad_w + j < W: [lo, hi)
      const int64_t lo = std::min<int64_t>(Wo, std::max<int64_t>(0, (pad_w - j + 1) / 2));
      const int64_t hi = std::max<int64_t>(lo, std::min<int64_t>(Wo, (W + pad_w - j + 1) / 2));
      std::fill(t, t + lo, 0.0f);
      const float* src = row + 2 * lo - pad_w + j;
      for (int64_t ow = lo; ow < hi; ++ow) t[ow] = src[2 * (ow - lo)];
      std::fill(t + hi, t + Wo, 0.0f);
    }
  }
  return {i0, i1};
}

// Columns [ow, Wo) of output row oh of channels [o0, o0 + co) (w8: their weights, 8 a tap, zero
// past Cout), one at a time: each output a chain of fused multiply-adds from zero over the taps
// in (i, j) order, then the bias. The whole row where the CPU has no AVX2; inlined into the avx2
// function below for the columns its blocks of 8 leave (its fma then compiled for FMA there).
OCRT_DIRECT_INLINE void stride2_columns(const float* taps, int64_t i0, int64_t i1, int64_t kw, const float* w8,
                                        const float* bias, int64_t co, float* y, int64_t plane, int64_t Wo,
                                        int64_t ow) {
  for (; ow < Wo; ++ow)
    for (int64_t o = 0; o < co; ++o) {
      float acc = 0.0f;
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = 0; j < kw; ++j) acc = std::fma(w8[(i * kw + j) * 8 + o], taps[(i * kw + j) * Wo + ow], acc);
      y[o * plane + ow] = bias ? acc + bias[o] : acc;
    }
}

#if defined(OCRT_TARGET_ATTRS)
// The same row with AVX2: 8 columns at a time, the 8 channels' sums in registers (the same
// chains). The intrinsics sit in this function, compiled for AVX2 itself, so that a build for
// the baseline x86-64 compiles them too.
OCRT_TARGET_AVX2 void stride2_chunk_row_avx2(const float* taps, int64_t i0, int64_t i1, int64_t kw, const float* w8,
                                             const float* bias, int64_t co, float* y, int64_t plane, int64_t Wo) {
  int64_t ow = 0;
  for (; ow + 8 <= Wo; ow += 8) {
    __m256 acc[8];
    for (int o = 0; o < 8; ++o) acc[o] = _mm256_setzero_ps();
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        const __m256 v = _mm256_loadu_ps(taps + (i * kw + j) * Wo + ow);
        const float* wt = w8 + (i * kw + j) * 8;
        for (int o = 0; o < 8; ++o) acc[o] = _mm256_fmadd_ps(_mm256_broadcast_ss(wt + o), v, acc[o]);
      }
    for (int64_t o = 0; o < co; ++o) {
      __m256 r = acc[o];
      if (bias) r = _mm256_add_ps(r, _mm256_set1_ps(bias[o]));
      _mm256_storeu_ps(y + o * plane + ow, r);
    }
  }
  stride2_columns(taps, i0, i1, kw, w8, bias, co, y, plane, Wo, ow);
}
#endif

void stride2_row(bool avx2, const float* x, const std::vector<std::vector<float>>& w8, const float* bias, float* y,
                 int64_t H, int64_t W, int64_t Cout, int64_t kh, int64_t kw, int64_t pad_h, int64_t pad_w, int64_t Ho,
                 int64_t Wo, int64_t oh, float* taps) {
  const auto [i0, i1] = stride2_taps(x, H, W, kh, kw, pad_h, pad_w, Wo, oh, taps);
  for (size_t k = 0; k < w8.size(); ++k) {
    const int64_t o0 = 8 * (int64_t)k, co = std::min<int64_t>(8, Cout - o0);
    const float* b = bias ? bias + o0 : nullptr;
    float* out = y + o0 * Ho * Wo + oh * Wo;
#if defined(OCRT_TARGET_ATTRS)
    if (avx2) {
      stride2_chunk_row_avx2(taps, i0, i1, kw, w8[k].data(), b, co, out, Ho * Wo, Wo);
      continue;
    }
#endif
    (void)avx2;
    stride2_columns(taps, i0, i1, kw, w8[k].data(), b, co, out, Ho * Wo, Wo, 0);
  }
}

}  // namespace

bool direct_stride2_applies(int64_t C, int64_t kh, int64_t kw, const Conv2dParams& p) {
  return C == 1 && kh >= 1 && kh <= 7 && kw >= 1 && kw <= 7 && p.stride_h == 2 && p.stride_w == 2 &&
         p.dilation_h == 1 && p.dilation_w == 1 && p.groups == 1;
}

void direct_conv2d_stride2(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t H,
                           int64_t W, int64_t Cout, int64_t kh, int64_t kw, int64_t pad_h, int64_t pad_w) {
  const int64_t Ho = (H + 2 * pad_h - kh) / 2 + 1, Wo = (W + 2 * pad_w - kw) / 2 + 1;
  if (N == 0 || Ho <= 0 || Wo <= 0) return;
  // The weights of each chunk of 8 output channels, 8 a tap (zero past Cout).
  const int64_t taps_n = kh * kw;
  std::vector<std::vector<float>> w8((size_t)((Cout + 7) / 8), std::vector<float>((size_t)(taps_n * 8), 0.0f));
  for (int64_t o = 0; o < Cout; ++o)
    for (int64_t t = 0; t < taps_n; ++t) w8[(size_t)(o / 8)][(size_t)(t * 8 + o % 8)] = w[o * taps_n + t];
#if defined(OCRT_TARGET_ATTRS)
  const bool avx2 = cpu_isa() >= CpuIsa::avx2;
#else
  const bool avx2 = false;
#endif
  const int64_t rows = N * Ho;
  const bool parallel = rows > 1 && rows * Wo * taps_n * Cout > kParallelGrain && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
    std::vector<float> taps((size_t)(taps_n * Wo));
#pragma omp for schedule(static)
    for (int64_t rr = 0; rr < rows; ++rr) {
      const int64_t n = rr / Ho, oh = rr % Ho;
      const float* xn = x + n * H * W;
      float* yn = y + n * Cout * Ho * Wo;
      stride2_row(avx2, xn, w8, bias, yn, H, W, Cout, kh, kw, pad_h, pad_w, Ho, Wo, oh, taps.data());
    }
  }
}

bool direct_conv_applies(int64_t C, int64_t Cout, int64_t kh, int64_t kw, const Conv2dParams& p) {
  return Cout >= 1 && (Cout <= kDirectConvMaxCout || C * kh * kw <= kDirectConvMaxTaps) && p.stride_h == 1 &&
         p.stride_w == 1 && p.dilation_h == 1 && p.dilation_w == 1 && p.groups == 1;
}

void direct_conv2d(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C, int64_t H,
                   int64_t W, int64_t Cout, int64_t kh, int64_t kw, int64_t pad_h, int64_t pad_w) {
  const int64_t Ho = H + 2 * pad_h - kh + 1, Wo = W + 2 * pad_w - kw + 1;
  if (N == 0 || Ho <= 0 || Wo <= 0) return;
  const int64_t taps = C * kh * kw, chunks = (Cout + 7) / 8;
  const std::vector<std::vector<float>> wt = turned_weights(w, Cout, taps);
  const int64_t rows = N * Ho;
  const bool parallel = rows > 1 && rows * Wo * taps * Cout > kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = r / Ho, oh = r % Ho;
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t co = std::min<int64_t>(8, Cout - 8 * k);
      const Shape s{C, H, W, co, kh, kw, pad_h, pad_w, Ho, Wo, Ho * Wo, 0};
      chunk_row_for(co)(x + n * C * H * W, wt[(size_t)k].data(), bias ? bias + 8 * k : nullptr,
                        y + (n * Cout + 8 * k) * Ho * Wo, s, oh);
    }
  }
}

void direct_conv2d_relu_max_pool2(const float* x, const float* w, const float* bias, float* y, int64_t N, int64_t C,
                                  int64_t H, int64_t W, int64_t Cout, int64_t kh, int64_t kw, int64_t pad_h,
                                  int64_t pad_w) {
  const int64_t Ho = H + 2 * pad_h - kh + 1, Wo = W + 2 * pad_w - kw + 1, Hq = Ho / 2, Wq = Wo / 2;
  if (N == 0 || Hq <= 0 || Wq <= 0) return;
  const int64_t taps = C * kh * kw, chunks = (Cout + 7) / 8;
  const std::vector<std::vector<float>> wt = turned_weights(w, Cout, taps);
  const int64_t rows = N * Hq;
  const bool parallel = rows > 1 && rows * 2 * Wo * taps * Cout > kParallelGrain && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
    // Two convolution rows of a chunk's channels at a time: (co, 2, Wo), then pooled out.
    std::vector<float> two((size_t)(8 * 2 * Wo));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t n = r / Hq, q = r % Hq;
      for (int64_t k = 0; k < chunks; ++k) {
        const int64_t co = std::min<int64_t>(8, Cout - 8 * k);
        const Shape s{C, H, W, co, kh, kw, pad_h, pad_w, Ho, Wo, 2 * Wo, 2 * q};
        const ChunkRow row = chunk_row_for(co);
        const float* b = bias ? bias + 8 * k : nullptr;
        row(x + n * C * H * W, wt[(size_t)k].data(), b, two.data(), s, 2 * q);
        row(x + n * C * H * W, wt[(size_t)k].data(), b, two.data(), s, 2 * q + 1);
        // relu(v) = v > 0 ? v : 0 and the window's first maximum: after the ReLU no value is NaN
        // (a NaN sum becomes 0), so the maximum of the four is max(0, each v > it).
        for (int64_t o = 0; o < co; ++o) {
          const float* r0 = two.data() + o * 2 * Wo;
          const float* r1 = r0 + Wo;
          float* out = y + ((n * Cout + 8 * k + o) * Hq + q) * Wq;
          for (int64_t c = 0; c < Wq; ++c) {
            float m = 0.0f;
            for (float v : {r0[2 * c], r0[2 * c + 1], r1[2 * c], r1[2 * c + 1]}) m = v > m ? v : m;
            out[c] = m;
          }
        }
      }
    }
  }
}

}  // namespace ocrt::cpu
