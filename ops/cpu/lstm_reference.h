// Plain-loop references for the LSTM: the cell of one time step (forward and backward, the
// contract of LayerBackend::lstm_cell in ops/backend.h) and a whole unidirectional layer, in
// float64 and without any of the fast kernels' vector lanes. ops/cpu/lstm.cpp, the CUDA cell and
// ops/lstm.cpp's time loop are tested against these (tests/ops/test_lstm.cpp,
// tests/cuda/test_norm_lstm.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace ocrt::reference {

inline double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// One step for N rows of H units. a = gx + gh (N,4H) are the gate pre-activations in PyTorch's
// order (i, f, g, o); h_prev, c_prev (N,H). Writes act (N,4H) = (sigmoid(i), sigmoid(f),
// tanh(g), sigmoid(o)), c = f c_prev + i g, h = o tanh(c), out = h. A row with active[n] == 0
// keeps its state (h = h_prev, c = c_prev), and its act and out are 0. All contiguous.
template <class T>
void lstm_cell(const T* gx, const T* gh, const T* h_prev, const T* c_prev, const uint8_t* active, T* act, T* h, T* c,
               T* out, int64_t N, int64_t H) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < H; ++j) {
      auto pre = [&](int64_t gate) { return (double)gx[n * 4 * H + gate * H + j] + (double)gh[n * 4 * H + gate * H + j]; };
      const int64_t k = n * H + j;
      if (!active[n]) {
        for (int64_t gate = 0; gate < 4; ++gate) act[n * 4 * H + gate * H + j] = 0;
        h[k] = h_prev[k], c[k] = c_prev[k], out[k] = 0;
        continue;
      }
      const double i = sigmoid(pre(0)), f = sigmoid(pre(1)), g = std::tanh(pre(2)), o = sigmoid(pre(3));
      const double cj = f * (double)c_prev[k] + i * g;
      act[n * 4 * H + j] = (T)i, act[n * 4 * H + H + j] = (T)f, act[n * 4 * H + 2 * H + j] = (T)g;
      act[n * 4 * H + 3 * H + j] = (T)o;
      c[k] = (T)cj;
      h[k] = out[k] = (T)(o * std::tanh(cj));
    }
}

// Its backward. dh, dc (N,H): the gradients reaching this step's state from later steps; dout
// (N,H): the gradient of this step's output. With dh_total = dh + dout:
//   do = dh_total tanh(c),  dc_total = dc + dh_total o (1 - tanh(c)^2)
//   di = dc_total g,  df = dc_total c_prev,  dg = dc_total i,  dc_prev = dc_total f
// and through the activations: da_i = di i(1-i), da_f = df f(1-f), da_g = dg (1-g^2),
// da_o = do o(1-o), written to dgates (N,4H). dh_carry = 0 for active rows (their dh_prev is
// dgates @ W_hh, the caller's GEMM). Inactive rows pass dh and dc through (dh_carry = dh,
// dc_prev = dc) and get dgates 0.
template <class T>
void lstm_cell_backward(const T* act, const T* c_prev, const T* c, const T* dh, const T* dout, const T* dc,
                        const uint8_t* active, T* dgates, T* dc_prev, T* dh_carry, int64_t N, int64_t H) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < H; ++j) {
      const int64_t k = n * H + j;
      T* d = dgates + n * 4 * H;
      if (!active[n]) {
        d[j] = d[H + j] = d[2 * H + j] = d[3 * H + j] = 0;
        dc_prev[k] = dc[k], dh_carry[k] = dh[k];
        continue;
      }
      const double i = act[n * 4 * H + j], f = act[n * 4 * H + H + j], g = act[n * 4 * H + 2 * H + j],
                   o = act[n * 4 * H + 3 * H + j];
      const double tc = std::tanh((double)c[k]), dh_total = (double)dh[k] + (double)dout[k];
      const double dct = (double)dc[k] + dh_total * o * (1 - tc * tc);
      d[j] = (T)(dct * g * i * (1 - i));
      d[H + j] = (T)(dct * (double)c_prev[k] * f * (1 - f));
      d[2 * H + j] = (T)(dct * i * (1 - g * g));
      d[3 * H + j] = (T)(dh_total * tc * o * (1 - o));
      dc_prev[k] = (T)(dct * f);
      dh_carry[k] = 0;
    }
}

// One unidirectional layer from zero state: x (T,N,I) -> y (T,N,H), w_ih (4H,I), w_hh (4H,H),
// b (4H) = b_ih + b_hh. Each sample runs only its first len[n] steps (in reverse from step
// len[n] - 1 when `reverse`); y is 0 past them. The definition, sample by sample.
inline std::vector<double> lstm_layer(const std::vector<double>& x, const std::vector<double>& w_ih,
                                      const std::vector<double>& w_hh, const std::vector<double>& b, int64_t T,
                                      int64_t N, int64_t I, int64_t H, const std::vector<int64_t>& len, bool reverse) {
  std::vector<double> y((size_t)(T * N * H), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> h((size_t)H, 0.0), c((size_t)H, 0.0);
    for (int64_t s = 0; s < len[(size_t)n]; ++s) {
      const int64_t t = reverse ? len[(size_t)n] - 1 - s : s;
      std::vector<double> a((size_t)(4 * H));
      for (int64_t r = 0; r < 4 * H; ++r) {
        double v = b[(size_t)r];
        for (int64_t k = 0; k < I; ++k) v += w_ih[(size_t)(r * I + k)] * x[(size_t)((t * N + n) * I + k)];
        for (int64_t k = 0; k < H; ++k) v += w_hh[(size_t)(r * H + k)] * h[(size_t)k];
        a[(size_t)r] = v;
      }
      for (int64_t j = 0; j < H; ++j) {
        const double i = sigmoid(a[(size_t)j]), f = sigmoid(a[(size_t)(H + j)]), g = std::tanh(a[(size_t)(2 * H + j)]),
                     o = sigmoid(a[(size_t)(3 * H + j)]);
        c[(size_t)j] = f * c[(size_t)j] + i * g;
        h[(size_t)j] = o * std::tanh(c[(size_t)j]);
        y[(size_t)((t * N + n) * H + j)] = h[(size_t)j];
      }
    }
  }
  return y;
}

}  // namespace ocrt::reference
