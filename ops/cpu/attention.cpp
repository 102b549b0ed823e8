// CPU windowed self-attention (ops/backend.h's window_attention entries; the window's geometry in
// ops/window_attention.h), forward and backward, float32 and float64.
//
// Why a kernel of its own: composed from matmul, masking and softmax, SVTR-lite's attention
// spent more time around its products than in them. Its products are small (a band of 128
// queries against 168 keys of 32 channels: the GEMM kernel's packing and tile edges cost as
// much as its multiply-adds), and around each sat a scaling, a mask (a where in the backward),
// a check for rows with no key, copies of each band's queries and keys, and a concatenation of
// the bands; a local window also scored every key of its band, about twice the keys in the
// window. Here a query scores exactly its window's keys, reading q, k and v where the input
// projections wrote them, and the weights are made and applied in one pass.
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
// symmetric): dk_u = sum_t ds_tu q_t, dv_u = sum_t p_tu dO_t, as weighted sums of rows like
// dq's. (Added into per-key rows query by query instead, those rows went back and forth
// between the registers and the caches: the backward ran 1.3x slower.)
#include <omp.h>

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
// out[0 .. 32) = sum_j w[j] rows[j][0 .. 32), keys in pairs: 8 sums in flight.
OCRT_TARGET_AVX2 void weighted_rows32_lanes(const float* w, const float* const* rows, int64_t nk, int64_t d0,
                                            float* out) {
  static_assert(kBlock == 32, "a block is four registers");
  __m256 a[4], b[4];
  for (int i = 0; i < 4; ++i) a[i] = b[i] = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 2 <= nk; j += 2) {
    const __m256 w0 = _mm256_broadcast_ss(w + j), w1 = _mm256_broadcast_ss(w + j + 1);
    const float *r0 = rows[j] + d0, *r1 = rows[j + 1] + d0;
    for (int i = 0; i < 4; ++i) {
      a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(r0 + 8 * i), a[i]);
      b[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(r1 + 8 * i), b[i]);
    }
  }
  if (j < nk) {
    const __m256 w0 = _mm256_broadcast_ss(w + j);
    for (int i = 0; i < 4; ++i) a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(rows[j] + d0 + 8 * i), a[i]);
  }
  for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + d0 + 8 * i, _mm256_add_ps(a[i], b[i]));
}

#endif

// out[0 .. hd) = sum_j w[j] rows[j] (each row hd values), keys in pairs so that two sets of
// sums are in flight.
template <class T>
void weighted_rows(const T* w, const T* const* rows, int64_t nk, int64_t hd, T* out, bool lanes) {
  for (int64_t d0 = 0; d0 < hd; d0 += kBlock) {
#if defined(OCRT_SIMD_MATH)
    if constexpr (std::is_same_v<T, float>) {
      if (lanes && hd - d0 >= kBlock) {
        weighted_rows32_lanes(w, rows, nk, d0, out);
        continue;
      }
    }
#endif
    (void)lanes;
    T a[kBlock], b[kBlock];
    for (int64_t d = 0; d < kBlock; ++d) a[d] = b[d] = 0;
    if (hd - d0 >= kBlock) {
      int64_t j = 0;
      for (; j + 2 <= nk; j += 2) {
        const T w0 = w[j], w1 = w[j + 1];
        const T *r0 = rows[j] + d0, *r1 = rows[j + 1] + d0;
        for (int64_t d = 0; d < kBlock; ++d) {
          a[d] += w0 * r0[d];
          b[d] += w1 * r1[d];
        }
      }
      if (j < nk)
        for (int64_t d = 0; d < kBlock; ++d) a[d] += w[j] * rows[j][d0 + d];
      for (int64_t d = 0; d < kBlock; ++d) out[d0 + d] = a[d] + b[d];
    } else {
      const int64_t nd = hd - d0;
      for (int64_t j = 0; j < nk; ++j)
        for (int64_t d = 0; d < nd; ++d) a[d] += w[j] * rows[j][d0 + d];
      for (int64_t d = 0; d < nd; ++d) out[d0 + d] = a[d];
    }
  }
}

#if defined(OCRT_SIMD_MATH)
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
  for (int64_t j = 0; j < nk; ++j) m = std::max(m, s[j]);
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

// Rows of x (L, N, E) for pair (n, h), transposed into xt (hd rows of Lp = L + kRun values, the
// last kRun zero).
template <class T>
void transpose_pair(const T* x, int64_t L, int64_t ts, int64_t hd, T* xt, int64_t Lp) {
  for (int64_t t = 0; t < L; ++t)
    for (int64_t d = 0; d < hd; ++d) xt[d * Lp + t] = x[t * ts + d];
  for (int64_t d = 0; d < hd; ++d) std::fill(xt + d * Lp + L, xt + (d + 1) * Lp, T(0));
}

// Rows of x (L, N, E) for pair (n, h) gathered into xc (L rows of hd values). Read where they lie,
// a line's rows are N E values apart, a power of two in SVTR-lite's batches, so that the rows of a
// window fall into a few cache sets and evict each other: the weighted sums ran 5x slower.
template <class T>
void gather_pair(const T* x, int64_t L, int64_t ts, int64_t hd, T* xc) {
  for (int64_t t = 0; t < L; ++t) std::copy(x + t * ts, x + t * ts + hd, xc + t * hd);
}

template <class T>
void forward_typed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding,
                   const WindowAttentionParams& p, const Tensor& out, const Tensor& probs) {
  const int64_t L = q.size(0), N = q.size(1), E = q.size(2), heads = p.heads, hd = E / heads;
  const int64_t ts = N * E, Lp = L + kRun, S = window_slots(p.H, p.W, p.window_h, p.window_w);
  const T* qd = q.data<T>();
  const T* kd = k.data<T>();
  const T* vd = v.data<T>();
  const uint8_t* pad = key_padding.defined() ? key_padding.data<uint8_t>() : nullptr;
  T* od = out.data<T>();
  T* pd = probs.defined() ? probs.data<T>() : nullptr;  // undefined: no backward to come
  const T scale = (T)p.scale, minus_inf = -std::numeric_limits<T>::infinity();
  const bool lanes = cpu_isa() >= CpuIsa::avx2;
  const int64_t pairs = N * heads;
#pragma omp parallel if (pairs > 1 && (double)L * S * hd * pairs >= cpu::kParallelGrain)
  {
    std::vector<T> kt((size_t)(hd * Lp)), vc((size_t)(L * hd));
    std::vector<KeyRun> runs((size_t)max_runs(p));
    std::vector<const T*> rows((size_t)S);
    std::vector<T> scratch(pd ? 0 : (size_t)S);
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t n = pair / heads, h = pair % heads, off = n * E + h * hd;
      transpose_pair(kd + off, L, ts, hd, kt.data(), Lp);
      gather_pair(vd + off, L, ts, hd, vc.data());
      for (int64_t t = 0; t < L; ++t) {
        const TokenWindow w = token_window(t, p.H, p.W, p.window_h, p.window_w);
        const int64_t nr = window_runs(w, p.W, runs.data()), nk = w.slots();
        T* s = pd ? pd + (pair * L + t) * S : scratch.data();
        dot_window(qd + t * ts + off, kt.data(), Lp, hd, runs.data(), nr, s, lanes);
        for (int64_t i = 0; i < nr; ++i)
          for (int64_t j = 0; j < runs[i].len; ++j) {
            const int64_t key = runs[i].key + j;
            T& x = s[runs[i].slot + j];
            x = pad && pad[n * L + key] ? minus_inf : x * scale;
            rows[(size_t)(runs[i].slot + j)] = vc.data() + key * hd;
          }
        std::fill(s + nk, s + S, T(0));
        T* o = od + t * ts + off;
        if (softmax_slots(s, nk, lanes))
          weighted_rows(s, rows.data(), nk, hd, o, lanes);
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
  const int64_t L = q.size(0), N = q.size(1), E = q.size(2), heads = p.heads, hd = E / heads;
  const int64_t ts = N * E, Lp = L + kRun, S = window_slots(p.H, p.W, p.window_h, p.window_w);
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
  const bool lanes = cpu_isa() >= CpuIsa::avx2;
  const int64_t pairs = N * heads;
#pragma omp parallel if (pairs > 1 && (double)L * S * hd * pairs >= cpu::kParallelGrain)
  {
    std::vector<T> vt((size_t)(hd * Lp)), kc((size_t)(L * hd)), qc((size_t)(L * hd)), gc((size_t)(L * hd));
    std::vector<T> ds((size_t)(L * S)), wa((size_t)S), wb((size_t)S);
    std::vector<KeyRun> runs((size_t)max_runs(p));
    std::vector<const T*> rows((size_t)S), rows_b((size_t)S);
#pragma omp for schedule(static)
    for (int64_t pair = 0; pair < pairs; ++pair) {
      const int64_t n = pair / heads, h = pair % heads, off = n * E + h * hd;
      transpose_pair(vd + off, L, ts, hd, vt.data(), Lp);
      gather_pair(kd + off, L, ts, hd, kc.data());
      gather_pair(qd + off, L, ts, hd, qc.data());
      gather_pair(gd + off, L, ts, hd, gc.data());
      const T* pp = pd + pair * L * S;
      // Per query: ds of its window's slots (kept for the keys' pass), and dq.
      for (int64_t t = 0; t < L; ++t) {
        const TokenWindow w = token_window(t, p.H, p.W, p.window_h, p.window_w);
        const int64_t nr = window_runs(w, p.W, runs.data()), nk = w.slots();
        const T* pw = pp + t * S;
        const T* g = gc.data() + t * hd;
        const T* o = od + t * ts + off;
        T* dst = ds.data() + t * S;
        T dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += g[d] * o[d];
        dot_window(g, vt.data(), Lp, hd, runs.data(), nr, dst, lanes);  // dp
        for (int64_t i = 0; i < nr; ++i)
          for (int64_t j = 0; j < runs[i].len; ++j) rows[(size_t)(runs[i].slot + j)] = kc.data() + (runs[i].key + j) * hd;
        for (int64_t j = 0; j < nk; ++j) dst[j] = pw[j] * (dst[j] - dot) * scale;
        weighted_rows(dst, rows.data(), nk, hd, dqd + t * ts + off, lanes);
      }
      // Per key u: the queries whose windows hold it (the window around u: windows are
      // symmetric), u's slot in each, dk_u = sum ds q, dv_u = sum p dO.
      const int64_t rh = p.window_h / 2, rw = p.window_w / 2;
      for (int64_t u = 0; u < L; ++u) {
        const TokenWindow around = token_window(u, p.H, p.W, p.window_h, p.window_w);
        const int64_t ru = u / p.W, cu = u % p.W;
        int64_t count = 0;
        for (int64_t r = around.r0; r <= around.r1; ++r) {
          const int64_t r0 = std::max<int64_t>(0, r - rh);
          for (int64_t c = around.c0; c <= around.c1; ++c) {
            const int64_t t = r * p.W + c, c0 = std::max<int64_t>(0, c - rw);
            const int64_t cols = std::min(p.W - 1, c + rw) - c0 + 1, slot = t * S + (ru - r0) * cols + (cu - c0);
            wa[(size_t)count] = ds[(size_t)slot];
            wb[(size_t)count] = pp[slot];
            rows[(size_t)count] = qc.data() + t * hd;
            rows_b[(size_t)count] = gc.data() + t * hd;
            ++count;
          }
        }
        weighted_rows(wa.data(), rows.data(), count, hd, dkd + u * ts + off, lanes);
        weighted_rows(wb.data(), rows_b.data(), count, hd, dvd + u * ts + off, lanes);
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
