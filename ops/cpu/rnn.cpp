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

#include "ops/backend.h"

namespace ocrt {

namespace {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

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
    for (int64_t j = 0; j < H; ++j) {
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
    for (int64_t j = 0; j < H; ++j) {
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
