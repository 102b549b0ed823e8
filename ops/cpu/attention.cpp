// CPU windowed self-attention (ops/backend.h's window_attention entries; the window's geometry in
// ops/window_attention.h), forward and backward, float32 and float64.
//
// Why a kernel of its own: composed from matmul, masking and softmax, SVTR-lite's attention
// spent more time around its products than in them. Its products are small (a band of 128
// queries against 168 keys of 32 channels: the GEMM kernel's packing and tile edges cost as
// much as its multiply-adds), and around each sat a scaling, a mask (a where in the backward),
// a check for rows with no key, copies of each band's queries and keys, and a concatenation of
// the bands; a local window also scored every key of its band, about twice the keys in the
// window. Here a query scores exactly its window's keys, q, k and v are taken from where the
// input projections wrote them (no op copies them in between), and the weights are made and
// applied in one pass.
//
// Work split: the N x heads (line, head) pairs are shared out among the threads, a pair's
// queries running one after another on its thread. A pair's keys and values stay in that
// thread's caches while its queries run, and in the backward the sums into a key's gradient (a
// term from every query whose window holds it) are one thread's, in query order: the results
// do not depend on the thread count.
//
// Scores: a query's window is cut into runs of at most kRun keys, each along one window row
// (neighbours in a grid row are neighbouring tokens). A pair's keys are first copied transposed
// into a scratch Kt (hd rows of L + kRun values), so that a run's scores are kRun lanes over
// contiguous keys, summed over the hd channels; four runs at a time keep enough independent
// sums in flight (channels as lanes would need a horizontal sum per key). The backward's
// dO . v_j the same way from V transposed.
//
// Backward, per query t with weights p_j (0 for padding keys and for a query with no key):
//   dp_j = dO_t . v_j,  D = dO_t . O_t (= sum_j p_j dp_j),  ds_j = p_j (dp_j - D) scale,
//   dq_t = sum_j ds_j k_j;
// then per key u, over the queries t whose windows hold it (the window around u: windows are
// symmetric): dk_u = sum_t ds_tu q_t, dv_u = sum_t p_tu dO_t, summed in registers. (Added into
// per-key rows query by query instead, those rows went back and forth between the registers and
// the caches: stage 1's global backward took 24.7 ms instead of 13.7-18.3 in
// bench_window_attention.)
//
// A pair's rows are first gathered into contiguous scratch (q and v for the forward; k, q, dO
// and the output for the backward), all at once: where they lie, a line's rows are N x E values apart, a power of two in
// SVTR-lite's batches, so that a window's rows fall into a few cache sets and evict each other,
// and a query's own row read where it lies was a cache miss in the middle of its work (the
// forward's q and the backward's dO . O: half of those loops' time).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/backend.h"
#include "ops/window_attention.h"
#include "runtime/cpu/loops.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/cpu_isa.h"

namespace ocrt {

namespace {

constexpr int64_t kRun = 16;  // keys scored together along a window row
constexpr int64_t kBlock = 32;  // channels summed together in a weighted sum of rows

struct KeyRun {
  int64_t key, slot, len;  // first key's token, its slot, keys in the run (<= kRun)
};

// The runs of a window, rows top to bottom, each row's keys left to right (slot order).
int64_t window_runs(const TokenWindow& w, int64_t W, KeyRun* runs) {
  int64_t n = 0;
  const int64_t cols = w.cols();
  for (int64_t r = w.r0; r <= w.r1; ++r)
    for (int64_t c = w.c0; c <= w.c1; c += kRun)
      runs[n++] = {r * W + c, (r - w.r0) * cols + (c - w.c0), std::min(kRun, w.c1 - c + 1)};
  return n;
}

int64_t max_runs(const WindowAttentionParams& p) {
  return std::min(p.window_h, p.H) * ((std::min(p.window_w, p.W) + kRun - 1) / kRun);
}

// s[slot + j] = x . xt[:, key + j] for G runs (x: hd values; xt: hd rows of Lp values, whose
// last kRun are zero, so a run may read kRun lanes past its keys).
template <class T, int G>
inline void dot_runs(const T* x, const T* xt, int64_t Lp, int64_t hd, const KeyRun* runs, T* s) {
  T acc[G][kRun];
  for (int g = 0; g < G; ++g)
    for (int64_t j = 0; j < kRun; ++j) acc[g][j] = 0;
  for (int64_t d = 0; d < hd; ++d) {
    const T xd = x[d];
    const T* row = xt + d * Lp;
    for (int g = 0; g < G; ++g) {
      const T* r = row + runs[g].key;
      for (int64_t j = 0; j < kRun; ++j) acc[g][j] += xd * r[j];
    }
  }
  for (int g = 0; g < G; ++g)
    for (int64_t j = 0; j < runs[g].len; ++j) s[runs[g].slot + j] = acc[g][j];
}

#if defined(OCRT_SIMD_MATH)
// The same for float32 in AVX2 registers (GCC vectorised the plain loops across the runs, with
// gathers, and kept the sums in memory).
template <int G>
OCRT_TARGET_AVX2 void dot_runs_lanes(const float* x, const float* xt, int64_t Lp, int64_t hd, const KeyRun* runs,
                                     float* s) {
  static_assert(kRun == 16, "a run is two registers");
  __m256 acc[G][2];
  for (int g = 0; g < G; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
  for (int64_t d = 0; d < hd; ++d) {
    const __m256 xd = _mm256_broadcast_ss(x + d);
    const float* row = xt + d * Lp;
    for (int g = 0; g < G; ++g) {
      acc[g][0] = _mm256_fmadd_ps(xd, _mm256_loadu_ps(row + runs[g].key), acc[g][0]);
      acc[g][1] = _mm256_fmadd_ps(xd, _mm256_loadu_ps(row + runs[g].key + 8), acc[g][1]);
    }
  }
  for (int g = 0; g < G; ++g) {
    float lanes[kRun];
    _mm256_storeu_ps(lanes, acc[g][0]);
    _mm256_storeu_ps(lanes + 8, acc[g][1]);
    for (int64_t j = 0; j < runs[g].len; ++j) s[runs[g].slot + j] = lanes[j];
  }
}
#endif

template <class T>
void dot_window(const T* x, const T* xt, int64_t Lp, int64_t hd, const KeyRun* runs, int64_t n, T* s, bool lanes) {
  int64_t i = 0;
#if defined(OCRT_SIMD_MATH)
  if constexpr (std::is_same_v<T, float>) {
    if (lanes) {
      for (; i + 4 <= n; i += 4) dot_runs_lanes<4>(x, xt, Lp, hd, runs + i, s);
      if (n - i == 3) dot_runs_lanes<3>(x, xt, Lp, hd, runs + i, s);
      if (n - i == 2) dot_runs_lanes<2>(x, xt, Lp, hd, runs + i, s);
      if (n - i == 1) dot_runs_lanes<1>(x, xt, Lp, hd, runs + i, s);
      return;
    }
  }
#endif
  (void)lanes;
  for (; i + 4 <= n; i += 4) dot_runs<T, 4>(x, xt, Lp, hd, runs + i, s);
  if (n - i == 3) dot_runs<T, 3>(x, xt, Lp, hd, runs + i, s);
  if (n - i == 2) dot_runs<T, 2>(x, xt, Lp, hd, runs + i, s);
  if (n - i == 1) dot_runs<T, 1>(x, xt, Lp, hd, runs + i, s);
}

#if defined(OCRT_SIMD_MATH)
// weighted_runs for rows of 32 values in AVX2 registers: keys in pairs, 8 sums in flight.
OCRT_TARGET_AVX2 void weighted_runs32_lanes(const float* w, const KeyRun* runs, int64_t nr, const float* x,
                                            float* out) {
  static_assert(kBlock == 32, "a row is four registers");
  __m256 a[4], b[4];
  for (int i = 0; i < 4; ++i) a[i] = b[i] = _mm256_setzero_ps();
  for (int64_t r = 0; r < nr; ++r) {
    const float* ws = w + runs[r].slot;
    const float* row = x + runs[r].key * kBlock;
    const int64_t len = runs[r].len;
    int64_t j = 0;
    for (; j + 2 <= len; j += 2, row += 2 * kBlock) {
      const __m256 w0 = _mm256_broadcast_ss(ws + j), w1 = _mm256_broadcast_ss(ws + j + 1);
      for (int i = 0; i < 4; ++i) {
        a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(row + 8 * i), a[i]);
        b[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(row + kBlock + 8 * i), b[i]);
      }
    }
    if (j < len) {
      const __m256 w0 = _mm256_broadcast_ss(ws + j);
      for (int i = 0; i < 4; ++i) a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(row + 8 * i), a[i]);
    }
  }
  for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + 8 * i, _mm256_add_ps(a[i], b[i]));
}
#endif

// out[0 .. hd) = the sum over the runs' keys of w[slot] x[key] (x: rows of hd values, one a
// token, contiguous: the pair's gathered rows).
template <class T>
void weighted_runs(const T* w, const KeyRun* runs, int64_t nr, const T* x, int64_t hd, T* out, bool lanes) {
#if defined(OCRT_SIMD_MATH)
  if constexpr (std::is_same_v<T, float>) {
    if (lanes && hd == kBlock) return weighted_runs32_lanes(w, runs, nr, x, out);
  }
#endif
  (void)lanes;
  std::fill(out, out + hd, T(0));
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t j = 0; j < runs[r].len; ++j) {
      const T wj = w[runs[r].slot + j];
      const T* row = x + (runs[r].key + j) * hd;
      for (int64_t d = 0; d < hd; ++d) out[d] += wj * row[d];
    }
}

// The sums of key u's gradients over the queries whose windows hold it (the window around u:
// windows are symmetric), in row-major query order: dk = sum_t ds_tu q_t, dv = sum_t p_tu dO_t.
// ds and probs: the pair's (L, S) rows; qc, gc: its gathered q and dO rows.
struct KeySlot {
  int64_t t, slot;  // a query holding the key, and the key's entry in that query's row (t * S + its slot)
};

inline int64_t key_slots(const WindowAttentionParams& p, int64_t S, int64_t u, KeySlot* out) {
  const TokenWindow around = token_window(u, p.H, p.W, p.window_h, p.window_w);
  const int64_t ru = u / p.W, cu = u % p.W, rh = p.window_h / 2, rw = p.window_w / 2;
  int64_t n = 0;
  for (int64_t r = around.r0; r <= around.r1; ++r) {
    const int64_t r0 = std::max<int64_t>(0, r - rh);
    for (int64_t c = around.c0; c <= around.c1; ++c) {
      const int64_t t = r * p.W + c, c0 = std::max<int64_t>(0, c - rw);
      const int64_t cols = std::min(p.W - 1, c + rw) - c0 + 1;
      out[n++] = {t, t * S + (ru - r0) * cols + (cu - c0)};
    }
  }
  return n;
}

#if defined(OCRT_SIMD_MATH)
OCRT_TARGET_AVX2 void key_sums32_lanes(const KeySlot* ks, int64_t n, const float* ds, const float* pp, const float* qc,
                                       const float* gc, float* dk, float* dv) {
  __m256 a[4], b[4];
  for (int i = 0; i < 4; ++i) a[i] = b[i] = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const __m256 wa = _mm256_broadcast_ss(ds + ks[j].slot), wb = _mm256_broadcast_ss(pp + ks[j].slot);
    const float* qr = qc + ks[j].t * kBlock;
    const float* gr = gc + ks[j].t * kBlock;
    for (int i = 0; i < 4; ++i) {
      a[i] = _mm256_fmadd_ps(wa, _mm256_loadu_ps(qr + 8 * i), a[i]);
      b[i] = _mm256_fmadd_ps(wb, _mm256_loadu_ps(gr + 8 * i), b[i]);
    }
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dk + 8 * i, a[i]);
    _mm256_storeu_ps(dv + 8 * i, b[i]);
  }
}
#endif

template <class T>
void key_sums(const KeySlot* ks, int64_t n, const T* ds, const T* pp, const T* qc, const T* gc, int64_t hd, T* dk,
              T* dv, bool lanes) {
#if defined(OCRT_SIMD_MATH)
  if constexpr (std::is_same_v<T, float>) {
    if (lanes && hd == kBlock) return key_sums32_lanes(ks, n, ds, pp, qc, gc, dk, dv);
  }
#endif
  (void)lanes;
  std::fill(dk, dk + hd, T(0));
  std::fill(dv, dv + hd, T(0));
  for (int64_t j = 0; j < n; ++j) {
    const T a = ds[ks[j].slot], b = pp[ks[j].slot];
    const T* qr = qc + ks[j].t * hd;
    const T* gr = gc + ks[j].t * hd;
    for (int64_t d = 0; d < hd; ++d) {
      dk[d] += a * qr[d];
      dv[d] += b * gr[d];
    }
  }
}

#if defined(OCRT_SIMD_MATH)
// The largest of s[0 .. n) (a NaN among them makes it NaN).
OCRT_TARGET_AVX2 float max_lanes(const float* s, int64_t n) {
  __m256 m8 = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(s + j));  // a NaN stays
  float lanes[8];
  _mm256_storeu_ps(lanes, m8);
  float m = lanes[0];
  for (int i = 1; i < 8; ++i) m = lanes[i] != lanes[i] ? lanes[i] : std::max(m, lanes[i]);
  for (; j < n; ++j) m = s[j] != s[j] ? s[j] : std::max(m, s[j]);
  return m;
}

// s[j] = exp(s[j] - m) for j < n, and their sum: exp on 8 lanes (simd::exp8, as the softmax
// kernel: values more than 87.3 below m, -inf among them, give exactly 0).
OCRT_TARGET_AVX2 double exp_shifted_lanes(float* s, int64_t n, float m) {
  const __m256 mv = _mm256_set1_ps(m), floor = _mm256_set1_ps(-87.3f);
  __m256 s8 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(s + j), mv);
    const __m256 e = _mm256_and_ps(simd::exp8(d), _mm256_cmp_ps(d, floor, _CMP_GE_OQ));
    _mm256_storeu_ps(s + j, e);
    s8 = _mm256_add_ps(s8, e);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, s8);
  double sum = 0;
  for (float v : lanes) sum += v;
  for (; j < n; ++j) {
    s[j] = std::exp(s[j] - m);
    sum += s[j];
  }
  return sum;
}
#endif

// The weights of one query from its scores s[0 .. nk) (-inf: a padding key), in place. false
// (and s all 0) when no key is allowed.
template <class T>
bool softmax_slots(T* s, int64_t nk, bool lanes) {
  T m = -std::numeric_limits<T>::infinity();
  bool have_max = false;
#if defined(OCRT_SIMD_MATH)
  if constexpr (std::is_same_v<T, float>) {
    if (lanes) {
      m = max_lanes(s, nk);
      have_max = true;
    }
  }
#endif
  if (!have_max)
    for (int64_t j = 0; j < nk; ++j) m = s[j] != s[j] ? s[j] : std::max(m, s[j]);
  if (m == -std::numeric_limits<T>::infinity()) {
    std::fill(s, s + nk, T(0));
    return false;
  }
  double sum = -1;
#if defined(OCRT_SIMD_MATH)
  if constexpr (std::is_same_v<T, float>) {
    if (lanes) sum = exp_shifted_lanes(s, nk, m);
  }
#endif
  if (sum < 0) {
    sum = 0;
    for (int64_t j = 0; j < nk; ++j) {
      s[j] = std::exp(s[j] - m);
      sum += s[j];
    }
  }
  const T inv = (T)(1.0 / sum);
  for (int64_t j = 0; j < nk; ++j) s[j] *= inv;
  return true;
}

// a . b over n values, in 8 partial sums added in a fixed order (one vector register; a
// single running sum made the backward's dO . O a chain of dependent additions).
template <class T>
inline T dot_rows(const T* a, const T* b, int64_t n) {
  T acc[8] = {};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    for (int i = 0; i < 8; ++i) acc[i] += a[d + i] * b[d + i];
  T s = 0;
  for (; d < n; ++d) s += a[d] * b[d];
  for (int i = 0; i < 8; ++i) s += acc[i];
  return s;
}

#if defined(OCRT_SIMD_MATH)
// By function attributes rather than `#pragma GCC target`, which clang ignores (the fuzz build,
// scripts/fuzz.sh, compiles this file with clang).
#define OCRT_TRANSPOSE8_TARGET OCRT_TARGET_AVX2
#include "runtime/cpu/transpose8.inc"

// transpose_pair's tokens t < L8 (a multiple of 8) for hd a multiple of 8: 8 x 8 blocks
// through registers (one value at a time, the copy was an eighth of the backward).
OCRT_TARGET_AVX2 void transpose_pair_lanes(const float* x, int64_t L8, int64_t ts, int64_t hd, float* xt, int64_t Lp) {
  for (int64_t t0 = 0; t0 < L8; t0 += 8)
    for (int64_t d0 = 0; d0 < hd; d0 += 8) {
      __m256 r[8];
      for (int64_t i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(x + (t0 + i) * ts + d0);
      transpose8(r);
      for (int64_t j = 0; j < 8; ++j) _mm256_storeu_ps(xt + (d0 + j) * Lp + t0, r[j]);
    }
}
#endif

// Rows of x (L, N, E) for pair (n, h), transposed into xt (hd rows of Lp = L + kRun values, the
// last kRun zero).
template <class T>
void transpose_pair(const T* x, int64_t L, int64_t ts, int64_t hd, T* xt, int64_t Lp, bool lanes) {
  int64_t t = 0;
#if defined(OCRT_SIMD_MATH)
  if constexpr (std::is_same_v<T, float>) {
    if (lanes && hd % 8 == 0) {
      t = L / 8 * 8;
      transpose_pair_lanes(x, t, ts, hd, xt, Lp);
    }
  }
#endif
  (void)lanes;
  for (; t < L; ++t)
    for (int64_t d = 0; d < hd; ++d) xt[d * Lp + t] = x[t * ts + d];
  for (int64_t d = 0; d < hd; ++d) std::fill(xt + d * Lp + L, xt + (d + 1) * Lp, T(0));
}

// Rows of x (L, N, E) for pair (n, h) gathered into xc (L rows of hd values) (read in place,
// the weighted sums ran several times slower: the file's head comment).
template <class T>
void gather_pair(const T* x, int64_t L, int64_t ts, int64_t hd, T* xc) {
  for (int64_t t = 0; t < L; ++t) std::copy(x + t * ts, x + t * ts + hd, xc + t * hd);
}

// The sizes both passes work with, from q (L, N, E) and the parameters.
struct Layout {
  int64_t L, N, E, heads, hd;
  int64_t qs, ql;  // q, k, v (and dq, dk, dv): a token's and a line's stride (q's own)
  int64_t ts;      // a token's row stride in the output and its gradient (contiguous: N x E)
  int64_t Lp;     // row length of a transposed scratch: L, then kRun zeros
  int64_t S;      // weight slots a query (window_slots)
  int64_t pairs;  // (line, head) pairs, N x heads
  bool lanes;     // this build has the float32 AVX2 loops and the CPU runs them
  bool parallel;  // enough work to share the pairs among the threads

  Layout(const Tensor& q, const WindowAttentionParams& p)
      : L(q.size(0)), N(q.size(1)), E(q.size(2)), heads(p.heads), hd(E / heads), qs(q.stride(0)), ql(q.stride(1)),
        ts(N * E), Lp(L + kRun),
        S(window_slots(p.H, p.W, p.window_h, p.window_w)), pairs(N * heads) {
#if defined(OCRT_SIMD_MATH)
    lanes = cpu_isa() >= CpuIsa::avx2;
#else
    lanes = false;
#endif
    parallel = pairs > 1 && (double)L * S * hd * pairs >= cpu::kParallelGrain;
  }
  // Where pair (line n, head h)'s channels start in a row of q, k, v: n ql + h hd; of the
  // output: n E + h hd.
  int64_t in_offset(int64_t pair) const { return pair / heads * ql + pair % heads * hd; }
  int64_t offset(int64_t pair) const { return pair / heads * E + pair % heads * hd; }
};

template <class T>
void forward_typed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding,
                   const WindowAttentionParams& p, const Tensor& out, const Tensor& probs) {
  const Layout g(q, p);
  const int64_t L = g.L, hd = g.hd, ts = g.ts, Lp = g.Lp, S = g.S;
  const bool lanes = g.lanes;
  const T* qd = q.data<T>();
  const T* kd = k.data<T>();
  const T* vd = v.data<T>();
  const uint8_t* pad = key_padding.defined() ? key_padding.data<uint8_t>() : nullptr;
  T* od = out.data<T>();
  T* pd = probs.defined() ? probs.data<T>() : nullptr;  // undefined: no backward to come
  const T scale = (T)p.scale, minus_inf = -std::numeric_limits<T>::infinity();
#pragma omp parallel if (g.parallel)
  {
    std::vector<T> kt((size_t)(hd * Lp)), vc((size_t)(L * hd)), qc((size_t)(L * hd)), qs((size_t)hd);
    std::vector<KeyRun> runs((size_t)max_runs(p));
    std::vector<T> scratch(pd ? 0 : (size_t)S);
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < g.pairs; ++pair) {
      const int64_t n = pair / g.heads, off = g.offset(pair), in = g.in_offset(pair);
      transpose_pair(kd + in, L, g.qs, hd, kt.data(), Lp, lanes);
      gather_pair(vd + in, L, g.qs, hd, vc.data());
      gather_pair(qd + in, L, g.qs, hd, qc.data());
      for (int64_t t = 0; t < L; ++t) {
        const TokenWindow w = token_window(t, p.H, p.W, p.window_h, p.window_w);
        const int64_t nr = window_runs(w, p.W, runs.data()), nk = w.slots();
        T* s = pd ? pd + (pair * L + t) * S : scratch.data();
        const T* qt = qc.data() + t * hd;
        for (int64_t d = 0; d < hd; ++d) qs[(size_t)d] = qt[d] * scale;
        dot_window(qs.data(), kt.data(), Lp, hd, runs.data(), nr, s, lanes);
        if (pad)
          for (int64_t i = 0; i < nr; ++i)
            for (int64_t j = 0; j < runs[i].len; ++j)
              if (pad[n * L + runs[i].key + j]) s[runs[i].slot + j] = minus_inf;
        std::fill(s + nk, s + S, T(0));
        T* o = od + t * ts + off;
        if (softmax_slots(s, nk, lanes))
          weighted_runs(s, runs.data(), nr, vc.data(), hd, o, lanes);
        else
          std::fill(o, o + hd, T(0));
      }
    }
  }
}

template <class T>
void backward_typed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& probs,
                    const Tensor& dout, const WindowAttentionParams& p, const Tensor& dq, const Tensor& dk,
                    const Tensor& dv) {
  const Layout g(q, p);
  const int64_t L = g.L, hd = g.hd, ts = g.ts, Lp = g.Lp, S = g.S;
  const bool lanes = g.lanes;
  const T* qd = q.data<T>();
  const T* kd = k.data<T>();
  const T* vd = v.data<T>();
  const T* od = out.data<T>();
  const T* pd = probs.data<T>();
  const T* gd = dout.data<T>();
  T* dqd = dq.data<T>();
  T* dkd = dk.data<T>();
  T* dvd = dv.data<T>();
  const T scale = (T)p.scale;
#pragma omp parallel if (g.parallel)
  {
    std::vector<T> vt((size_t)(hd * Lp)), kc((size_t)(L * hd)), qc((size_t)(L * hd)), gc((size_t)(L * hd));
    std::vector<T> oc((size_t)(L * hd)), ds((size_t)(L * S));
    std::vector<KeyRun> runs((size_t)max_runs(p));
    std::vector<KeySlot> slots((size_t)S);
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < g.pairs; ++pair) {
      const int64_t off = g.offset(pair), in = g.in_offset(pair), qs = g.qs;
      transpose_pair(vd + in, L, qs, hd, vt.data(), Lp, lanes);
      gather_pair(kd + in, L, qs, hd, kc.data());
      gather_pair(qd + in, L, qs, hd, qc.data());
      gather_pair(gd + off, L, ts, hd, gc.data());
      gather_pair(od + off, L, ts, hd, oc.data());
      const T* pp = pd + pair * L * S;
      // Per query: ds of its window's slots (kept for the keys' pass), and dq.
      for (int64_t t = 0; t < L; ++t) {
        const TokenWindow w = token_window(t, p.H, p.W, p.window_h, p.window_w);
        const int64_t nr = window_runs(w, p.W, runs.data()), nk = w.slots();
        const T* pw = pp + t * S;
        const T* g = gc.data() + t * hd;
        const T* o = oc.data() + t * hd;
        T* dst = ds.data() + t * S;
        const T dot = dot_rows(g, o, hd);
        dot_window(g, vt.data(), Lp, hd, runs.data(), nr, dst, lanes);  // dp
        for (int64_t j = 0; j < nk; ++j) dst[j] = pw[j] * (dst[j] - dot) * scale;
        weighted_runs(dst, runs.data(), nr, kc.data(), hd, dqd + t * qs + in, lanes);
      }
      // Per key: dk and dv.
      for (int64_t u = 0; u < L; ++u) {
        const int64_t count = key_slots(p, S, u, slots.data());
        key_sums(slots.data(), count, ds.data(), pp, qc.data(), gc.data(), hd, dkd + u * qs + in, dvd + u * qs + in,
                 lanes);
      }
    }
  }
}

void cpu_window_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding,
                          const WindowAttentionParams& p, const Tensor& out, const Tensor& probs) {
  dispatch_float(q.dtype(), "window_attention",
                 [&](auto zero) { forward_typed<decltype(zero)>(q, k, v, key_padding, p, out, probs); });
}

void cpu_window_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                   const Tensor& probs, const Tensor& dout, const WindowAttentionParams& p,
                                   const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  dispatch_float(q.dtype(), "window_attention_backward", [&](auto zero) {
    backward_typed<decltype(zero)>(q, k, v, out, probs, dout, p, dq, dk, dv);
  });
}

}  // namespace

void register_cpu_attention(LayerBackend& b) {
  b.window_attention = cpu_window_attention;
  b.window_attention_backward = cpu_window_attention_backward;
}

}  // namespace ocrt
