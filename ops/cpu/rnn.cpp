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

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "ops/backend.h"

namespace ocrt {

namespace {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

#if defined(__AVX2__) && defined(__FMA__)
// float32 activations 8 lanes at a time (the cell's scalar std::exp/std::tanh were about 8% of
// CRNN inference). Accuracy, checked by tests/ops/test_lstm.cpp against float64: sigmoid within
// 2e-7 absolute, tanh within 2e-7 relative. NaN propagates: every clamp takes the constant as
// its first operand, and _mm256_min_ps/_mm256_max_ps return the second one when either is NaN.
constexpr int kLanes = 8;

// exp(x): x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact n ln2), exp(r) by a
// degree-6 polynomial (the classic Cephes expf coefficients), 2^n built in the exponent bits.
// x is clamped to [-87.3, 88.3], where 2^n stays a normal float.
inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-87.3f), _mm256_min_ps(_mm256_set1_ps(88.3f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// tanh: for |x| < 0.625, x + x^3 P(x^2) (a degree-4 P fitted here for relative error, 8e-8 on
// that interval); beyond, 1 - 2 / (exp(2|x|) + 1) with x's sign, where no cancellation hurts.
inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
  const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-0.00569194f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(0.02062625f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-0.0537353f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(0.1333138f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-0.3333328f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(x, z), p, x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp8(_mm256_add_ps(ax, ax));
  const __m256 big = _mm256_or_ps(sign, _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one))));
  // ax < 0.625 is false for NaN, which then takes `big`: NaN as well.
  return _mm256_blendv_ps(big, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
}

// One active row of the forward cell, lanes [0, H - H % 8); returns where the scalar tail starts.
inline int64_t cell_forward_lanes(const float* x, const float* r, const float* cp, int64_t H, float* a, float* cn,
                                  float* hn, float* op) {
  int64_t j = 0;
  for (; j + kLanes <= H; j += kLanes) {
    auto pre = [&](int64_t gate) {
      return _mm256_add_ps(_mm256_loadu_ps(x + gate * H + j), _mm256_loadu_ps(r + gate * H + j));
    };
    const __m256 i = sigmoid8(pre(0)), f = sigmoid8(pre(1)), g = tanh8(pre(2)), o = sigmoid8(pre(3));
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

// The backward of those lanes (tanh(c) recomputed by the same tanh8 as the forward).
inline int64_t cell_backward_lanes(const float* a, const float* cp, const float* cn, const float* dh, const float* dout,
                                   const float* dc, int64_t H, float* d, float* dcprev, float* carry) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t j = 0;
  for (; j + kLanes <= H; j += kLanes) {
    const __m256 i = _mm256_loadu_ps(a + j), f = _mm256_loadu_ps(a + H + j);
    const __m256 g = _mm256_loadu_ps(a + 2 * H + j), o = _mm256_loadu_ps(a + 3 * H + j);
    const __m256 tc = tanh8(_mm256_loadu_ps(cn + j));
    const __m256 dh_total = _mm256_add_ps(_mm256_loadu_ps(dh + j), _mm256_loadu_ps(dout + j));
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
#endif

template <class T>
void cell_forward(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h_prev, const Tensor& c_prev,
                  const Tensor& active, const Tensor& act, const Tensor& h, const Tensor& c, const Tensor& out) {
  const int64_t N = h.size(0), H = h.size(1);
  const int64_t gx_rs = gates_x.stride(0), gh_rs = gates_h.stride(0), out_rs = out.stride(0);
  const T *gx = gates_x.data<T>(), *gh = gates_h.data<T>(), *hp = h_prev.data<T>(), *cp = c_prev.data<T>();
  const uint8_t* on = active.data<uint8_t>();
  T *ap = act.data<T>(), *hn = h.data<T>(), *cn = c.data<T>(), *op = out.data<T>();
#pragma omp parallel for schedule(static) if (N * H > 16384)
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
#if defined(__AVX2__) && defined(__FMA__)
    if constexpr (std::is_same_v<T, float>)
      j0 = cell_forward_lanes(x, r, cp + n * H, H, a, cn + n * H, hn + n * H, op + n * out_rs);
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
void cell_backward(const Tensor& act, const Tensor& c_prev, const Tensor& c, const Tensor& dh, const Tensor& dout,
                   const Tensor& dc, const Tensor& active, const Tensor& dgates, const Tensor& dc_prev,
                   const Tensor& dh_carry) {
  const int64_t N = c.size(0), H = c.size(1), dout_rs = dout.stride(0);
  const T *ap = act.data<T>(), *cp = c_prev.data<T>(), *cn = c.data<T>(), *dhp = dh.data<T>(), *dop = dout.data<T>(),
          *dcp = dc.data<T>();
  const uint8_t* on = active.data<uint8_t>();
  T *dg = dgates.data<T>(), *dcprev = dc_prev.data<T>(), *carry = dh_carry.data<T>();
#pragma omp parallel for schedule(static) if (N * H > 16384)
  for (int64_t n = 0; n < N; ++n) {
    T* d = dg + n * 4 * H;
    if (!on[n]) {
      for (int64_t j = 0; j < 4 * H; ++j) d[j] = 0;
      for (int64_t j = 0; j < H; ++j) {
        dcprev[n * H + j] = dcp[n * H + j];
        carry[n * H + j] = dhp[n * H + j];
      }
      continue;
    }
    const T* a = ap + n * 4 * H;
    int64_t j0 = 0;
#if defined(__AVX2__) && defined(__FMA__)
    if constexpr (std::is_same_v<T, float>)
      j0 = cell_backward_lanes(a, cp + n * H, cn + n * H, dhp + n * H, dop + n * dout_rs, dcp + n * H, H, d,
                               dcprev + n * H, carry + n * H);
#endif
    for (int64_t j = j0; j < H; ++j) {
      const T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
      const T tc = std::tanh(cn[n * H + j]);
      const T dh_total = dhp[n * H + j] + dop[n * dout_rs + j];
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

void register_cpu_rnn(Backend& b) {
  b.lstm_cell = [](const Tensor& gx, const Tensor& gh, const Tensor& hp, const Tensor& cp, const Tensor& active,
                   const Tensor& act, const Tensor& h, const Tensor& c, const Tensor& out) {
    OCRT_DISPATCH_FLOAT(h.dtype(), "lstm", [&] { cell_forward<scalar_t>(gx, gh, hp, cp, active, act, h, c, out); });
  };
  b.lstm_cell_backward = [](const Tensor& act, const Tensor& cp, const Tensor& c, const Tensor& dh, const Tensor& dout,
                            const Tensor& dc, const Tensor& active, const Tensor& dg, const Tensor& dcp,
                            const Tensor& carry) {
    OCRT_DISPATCH_FLOAT(c.dtype(), "lstm backward",
                        [&] { cell_backward<scalar_t>(act, cp, c, dh, dout, dc, active, dg, dcp, carry); });
  };
}

}  // namespace ocrt
