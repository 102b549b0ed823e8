// The LSTM's pointwise time-step kernels on the CPU (the GEMMs around them are matmul's).
//
// Forward, per row n and unit j, with pre-activations a = gates_x + gates_h:
//   i = sigmoid(a_i), f = sigmoid(a_f), g = tanh(a_g), o = sigmoid(a_o)
//   c = f c_prev + i g,  h = o tanh(c)
// Backward, with dh_total = dh + dout (the state's and the output's gradient):
//   do = dh_total tanh(c)
//   dc_total = dc + dh_total o (1 - tanh(c)^2)
//   di = dc_total g,  dg = dc_total i,  df = dc_total c_prev,  dc_prev = dc_total f
//   and through the activations: da_i = di i(1-i), da_f = df f(1-f), da_g = dg (1-g^2),
//   da_o = do o(1-o).
#include <omp.h>

#include <cmath>
#include <type_traits>

#include "ops/backend.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/cpu/loops.h"
#include "runtime/cpu_isa.h"

namespace ocrt {

namespace {

// A cell element costs three exponentials and two tanh: worth threads at half the usual grain.
constexpr int64_t kCellParallelGrain = cpu::kParallelGrain / 2;

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

#if defined(OCRT_SIMD_MATH)
using simd::exp8;
using simd::sigmoid8;
using simd::tanh8;
constexpr int kLanes = 8;

// A gate's pre-activation, 8 units from `at`: the input's part plus the recurrence's.
OCRT_TARGET_AVX2 inline __m256 pre_activation(const float* x, const float* r, int64_t at) {
  return _mm256_add_ps(_mm256_loadu_ps(x + at), _mm256_loadu_ps(r + at));
}

// One active row of the forward cell, 8 lanes at a time from unit j0 while 8 remain; returns
// where the scalar tail starts.
OCRT_TARGET_AVX2 int64_t cell_forward_lanes(const float* x, const float* r, const float* cp, int64_t H, float* a, float* cn,
                                  float* hn, float* op, int64_t j0) {
  int64_t j = j0;
  for (; j + kLanes <= H; j += kLanes) {
    const __m256 i = sigmoid8(pre_activation(x, r, j)), f = sigmoid8(pre_activation(x, r, H + j));
    const __m256 g = tanh8(pre_activation(x, r, 2 * H + j)), o = sigmoid8(pre_activation(x, r, 3 * H + j));
    const __m256 c = _mm256_fmadd_ps(f, _mm256_loadu_ps(cp + j), _mm256_mul_ps(i, g));
    const __m256 h = _mm256_mul_ps(o, tanh8(c));
    _mm256_storeu_ps(a + j, i);
    _mm256_storeu_ps(a + H + j, f);
    _mm256_storeu_ps(a + 2 * H + j, g);
    _mm256_storeu_ps(a + 3 * H + j, o);
    _mm256_storeu_ps(cn + j, c);
    _mm256_storeu_ps(hn + j, h);
    _mm256_storeu_ps(op + j, h);
  }
  return j;
}

// The same 16 lanes at a time (AVX-512: the avx512 paths and above), from unit 0: each lane gets
// the 8-lane function's operations in its order (sigmoid16 and tanh16 are sigmoid8's and
// tanh8's, runtime/cpu/simd_math.h), so the results do not depend on the lanes' width.
// Returns where the 8-lane loop goes on.
// (A function, not a lambda: a lambda does not take its enclosing function's target attribute,
// and a build for the baseline x86-64 then refuses its AVX-512 intrinsics.)
OCRT_TARGET_AVX512 inline __m512 pre_activation16(const float* x, const float* r, int64_t at) {
  return _mm512_add_ps(_mm512_loadu_ps(x + at), _mm512_loadu_ps(r + at));
}

OCRT_TARGET_AVX512 int64_t cell_forward_lanes16(const float* x, const float* r, const float* cp, int64_t H, float* a,
                                                float* cn, float* hn, float* op) {
  int64_t j = 0;
  for (; j + 16 <= H; j += 16) {
    const __m512 i = simd::sigmoid16(pre_activation16(x, r, j)), f = simd::sigmoid16(pre_activation16(x, r, H + j));
    const __m512 g = simd::tanh16(pre_activation16(x, r, 2 * H + j));
    const __m512 o = simd::sigmoid16(pre_activation16(x, r, 3 * H + j));
    const __m512 c = _mm512_fmadd_ps(f, _mm512_loadu_ps(cp + j), _mm512_mul_ps(i, g));
    const __m512 h = _mm512_mul_ps(o, simd::tanh16(c));
    _mm512_storeu_ps(a + j, i);
    _mm512_storeu_ps(a + H + j, f);
    _mm512_storeu_ps(a + 2 * H + j, g);
    _mm512_storeu_ps(a + 3 * H + j, o);
    _mm512_storeu_ps(cn + j, c);
    _mm512_storeu_ps(hn + j, h);
    _mm512_storeu_ps(op + j, h);
  }
  return j;
}

// The backward of the 8-lane forward's lanes, from unit j0 (tanh(c) recomputed by the same tanh8
// as the forward).
OCRT_TARGET_AVX2 int64_t cell_backward_lanes(const float* a, const float* cp, const float* cn, const float* dh,
                                              const float* dhm, const float* dout, const float* dc, int64_t H, float* d,
                                              float* dcprev, float* carry, int64_t j0) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t j = j0;
  for (; j + kLanes <= H; j += kLanes) {
    const __m256 i = _mm256_loadu_ps(a + j), f = _mm256_loadu_ps(a + H + j);
    const __m256 g = _mm256_loadu_ps(a + 2 * H + j), o = _mm256_loadu_ps(a + 3 * H + j);
    const __m256 tc = tanh8(_mm256_loadu_ps(cn + j));
    __m256 dh_sum = _mm256_loadu_ps(dh + j);
    if (dhm) dh_sum = _mm256_add_ps(dh_sum, _mm256_loadu_ps(dhm + j));
    const __m256 dh_total = _mm256_add_ps(dh_sum, _mm256_loadu_ps(dout + j));
    const __m256 dct = _mm256_fmadd_ps(_mm256_mul_ps(dh_total, o), _mm256_fnmadd_ps(tc, tc, one), _mm256_loadu_ps(dc + j));
    _mm256_storeu_ps(d + j, _mm256_mul_ps(_mm256_mul_ps(dct, g), _mm256_mul_ps(i, _mm256_sub_ps(one, i))));
    _mm256_storeu_ps(d + H + j,
                     _mm256_mul_ps(_mm256_mul_ps(dct, _mm256_loadu_ps(cp + j)), _mm256_mul_ps(f, _mm256_sub_ps(one, f))));
    _mm256_storeu_ps(d + 2 * H + j, _mm256_mul_ps(_mm256_mul_ps(dct, i), _mm256_fnmadd_ps(g, g, one)));
    _mm256_storeu_ps(d + 3 * H + j,
                     _mm256_mul_ps(_mm256_mul_ps(dh_total, tc), _mm256_mul_ps(o, _mm256_sub_ps(one, o))));
    _mm256_storeu_ps(dcprev + j, _mm256_mul_ps(dct, f));
    _mm256_storeu_ps(carry + j, _mm256_setzero_ps());
  }
  return j;
}

// The backward, 16 lanes at a time from unit 0, as cell_forward_lanes16 is to the forward.
OCRT_TARGET_AVX512 int64_t cell_backward_lanes16(const float* a, const float* cp, const float* cn, const float* dh,
                                                 const float* dhm, const float* dout, const float* dc, int64_t H,
                                                 float* d, float* dcprev, float* carry) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t j = 0;
  for (; j + 16 <= H; j += 16) {
    const __m512 i = _mm512_loadu_ps(a + j), f = _mm512_loadu_ps(a + H + j);
    const __m512 g = _mm512_loadu_ps(a + 2 * H + j), o = _mm512_loadu_ps(a + 3 * H + j);
    const __m512 tc = simd::tanh16(_mm512_loadu_ps(cn + j));
    __m512 dh_sum = _mm512_loadu_ps(dh + j);
    if (dhm) dh_sum = _mm512_add_ps(dh_sum, _mm512_loadu_ps(dhm + j));
    const __m512 dh_total = _mm512_add_ps(dh_sum, _mm512_loadu_ps(dout + j));
    const __m512 dct = _mm512_fmadd_ps(_mm512_mul_ps(dh_total, o), _mm512_fnmadd_ps(tc, tc, one), _mm512_loadu_ps(dc + j));
    _mm512_storeu_ps(d + j, _mm512_mul_ps(_mm512_mul_ps(dct, g), _mm512_mul_ps(i, _mm512_sub_ps(one, i))));
    _mm512_storeu_ps(d + H + j,
                     _mm512_mul_ps(_mm512_mul_ps(dct, _mm512_loadu_ps(cp + j)), _mm512_mul_ps(f, _mm512_sub_ps(one, f))));
    _mm512_storeu_ps(d + 2 * H + j, _mm512_mul_ps(_mm512_mul_ps(dct, i), _mm512_fnmadd_ps(g, g, one)));
    _mm512_storeu_ps(d + 3 * H + j,
                     _mm512_mul_ps(_mm512_mul_ps(dh_total, tc), _mm512_mul_ps(o, _mm512_sub_ps(one, o))));
    _mm512_storeu_ps(dcprev + j, _mm512_mul_ps(dct, f));
    _mm512_storeu_ps(carry + j, _mm512_setzero_ps());
  }
  return j;
}
#endif

template <class T>
void cell_forward(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h_prev, const Tensor& c_prev,
                  const Tensor& active, const Tensor& act, const Tensor& h, const Tensor& c, const Tensor& out) {
  const int64_t N = h.size(0), H = h.size(1);
  const int64_t gx_rs = gates_x.stride(0), gh_rs = gates_h.stride(0), out_rs = out.stride(0);
  const T *gx = gates_x.data<T>(), *gh = gates_h.data<T>(), *hp = h_prev.data<T>(), *cp = c_prev.data<T>();
  const uint8_t* on = active.data<uint8_t>();
  T *ap = act.data<T>(), *hn = h.data<T>(), *cn = c.data<T>(), *op = out.data<T>();
  // The 8-lane functions where the path has AVX2 (the build may be for the baseline x86-64), after
  // the 16-lane ones where it has AVX-512.
  [[maybe_unused]] const bool lanes = cpu_isa() >= CpuIsa::avx2, wide = cpu_isa() >= CpuIsa::avx512;
#pragma omp parallel for schedule(static) if (N * H > kCellParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    T* a = ap + n * 4 * H;
    if (!on[n]) {  // past this sample's end: the state passes through, the output is 0
      for (int64_t j = 0; j < 4 * H; ++j) a[j] = 0;
      for (int64_t j = 0; j < H; ++j) {
        hn[n * H + j] = hp[n * H + j];
        cn[n * H + j] = cp[n * H + j];
        op[n * out_rs + j] = 0;
      }
      continue;
    }
    const T *x = gx + n * gx_rs, *r = gh + n * gh_rs;
    int64_t j0 = 0;
#if defined(OCRT_SIMD_MATH)
    if constexpr (std::is_same_v<T, float>)
      if (lanes) {
        if (wide) j0 = cell_forward_lanes16(x, r, cp + n * H, H, a, cn + n * H, hn + n * H, op + n * out_rs);
        j0 = cell_forward_lanes(x, r, cp + n * H, H, a, cn + n * H, hn + n * H, op + n * out_rs, j0);
      }
#endif
    for (int64_t j = j0; j < H; ++j) {
      const T i = sigmoid(x[j] + r[j]);
      const T f = sigmoid(x[H + j] + r[H + j]);
      const T g = std::tanh(x[2 * H + j] + r[2 * H + j]);
      const T o = sigmoid(x[3 * H + j] + r[3 * H + j]);
      const T cj = f * cp[n * H + j] + i * g;
      const T hj = o * std::tanh(cj);
      a[j] = i, a[H + j] = f, a[2 * H + j] = g, a[3 * H + j] = o;
      cn[n * H + j] = cj;
      hn[n * H + j] = hj;
      op[n * out_rs + j] = hj;
    }
  }
}

template <class T>
void cell_backward(const Tensor& act, const Tensor& c_prev, const Tensor& c, const Tensor& dh, const Tensor& dh_more,
                   const Tensor& dout, const Tensor& dc, const Tensor& active, const Tensor& dgates,
                   const Tensor& dc_prev, const Tensor& dh_carry) {
  const int64_t N = c.size(0), H = c.size(1), dout_rs = dout.stride(0);
  const T *ap = act.data<T>(), *cp = c_prev.data<T>(), *cn = c.data<T>(), *dhp = dh.data<T>(), *dop = dout.data<T>(),
          *dcp = dc.data<T>();
  const T* dhm = dh_more.defined() ? dh_more.data<T>() : nullptr;
  const uint8_t* on = active.data<uint8_t>();
  T *dg = dgates.data<T>(), *dcprev = dc_prev.data<T>(), *carry = dh_carry.data<T>();
  // As the forward: 16 lanes, then 8, then the scalar tail.
  [[maybe_unused]] const bool lanes = cpu_isa() >= CpuIsa::avx2, wide = cpu_isa() >= CpuIsa::avx512;
#pragma omp parallel for schedule(static) if (N * H > kCellParallelGrain)
  for (int64_t n = 0; n < N; ++n) {
    T* d = dg + n * 4 * H;
    if (!on[n]) {
      for (int64_t j = 0; j < 4 * H; ++j) d[j] = 0;
      for (int64_t j = 0; j < H; ++j) {
        dcprev[n * H + j] = dcp[n * H + j];
        carry[n * H + j] = dhm ? dhp[n * H + j] + dhm[n * H + j] : dhp[n * H + j];
      }
      continue;
    }
    const T* a = ap + n * 4 * H;
    int64_t j0 = 0;
#if defined(OCRT_SIMD_MATH)
    if constexpr (std::is_same_v<T, float>)
      if (lanes) {
        if (wide)
          j0 = cell_backward_lanes16(a, cp + n * H, cn + n * H, dhp + n * H, dhm ? dhm + n * H : nullptr,
                                     dop + n * dout_rs, dcp + n * H, H, d, dcprev + n * H, carry + n * H);
        j0 = cell_backward_lanes(a, cp + n * H, cn + n * H, dhp + n * H, dhm ? dhm + n * H : nullptr, dop + n * dout_rs,
                                 dcp + n * H, H, d, dcprev + n * H, carry + n * H, j0);
      }
#endif
    for (int64_t j = j0; j < H; ++j) {
      const T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
      const T tc = std::tanh(cn[n * H + j]);
      const T dh_sum = dhm ? dhp[n * H + j] + dhm[n * H + j] : dhp[n * H + j];
      const T dh_total = dh_sum + dop[n * dout_rs + j];
      const T dct = dcp[n * H + j] + dh_total * o * (T(1) - tc * tc);
      d[j] = dct * g * i * (T(1) - i);
      d[H + j] = dct * cp[n * H + j] * f * (T(1) - f);
      d[2 * H + j] = dct * i * (T(1) - g * g);
      d[3 * H + j] = dh_total * tc * o * (T(1) - o);
      dcprev[n * H + j] = dct * f;
      carry[n * H + j] = 0;
    }
  }
}

}  // namespace

void register_cpu_lstm(LayerBackend& b) {
  b.lstm_cell = [](const Tensor& gx, const Tensor& gh, const Tensor& hp, const Tensor& cp, const Tensor& active,
                   const Tensor& act, const Tensor& h, const Tensor& c, const Tensor& out) {
    dispatch_float(h.dtype(), "lstm",
        [&](auto zero) { cell_forward<decltype(zero)>(gx, gh, hp, cp, active, act, h, c, out); });
  };
  b.lstm_cell_backward = [](const Tensor& act, const Tensor& cp, const Tensor& c, const Tensor& dh, const Tensor& dhm,
                            const Tensor& dout, const Tensor& dc, const Tensor& active, const Tensor& dg,
                            const Tensor& dcp, const Tensor& carry) {
    dispatch_float(c.dtype(), "lstm backward",
        [&](auto zero) { cell_backward<decltype(zero)>(act, cp, c, dh, dhm, dout, dc, active, dg, dcp, carry); });
  };
}

}  // namespace ocrt
