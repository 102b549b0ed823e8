// A multi-layer, optionally bidirectional LSTM with torch.nn.LSTM's semantics and weight
// layout (batch_first = false), including variable sequence lengths within a batch.
#pragma once
#include <functional>
#include <vector>

#include "runtime/tensor.h"

namespace ocrt {

struct LSTMOptions {
  int64_t num_layers = 1;
  bool bidirectional = false;
  bool has_biases = true;
};

struct LSTMOutput {
  Tensor output;  // (T, N, dirs*H); zero at padded positions t >= lengths[n]
  Tensor h_n;     // (layers*dirs, N, H): each sample's state after its last valid step
  Tensor c_n;
};

// x (T, N, I). weights in torch.nn.LSTM's _flat_weights order: for each layer l and each
// direction (forward, then reverse): weight_ih (4H, I or dirs*H), weight_hh (4H, H), and, with
// has_biases, bias_ih (4H), bias_hh (4H). Gate order i, f, g, o.
// h0, c0 (layers*dirs, N, H) are optional (zeros). lengths (N values in [1, T]) are optional
// (all T): with them the result equals PyTorch's pack_padded_sequence(enforce_sorted=False) +
// LSTM + pad_packed_sequence: the reverse direction of sample n starts at lengths[n] - 1,
// padded positions give 0 and influence nothing.
// One autograd node covers the whole LSTM; its backward runs through time in fused kernels.
//
// projections, when set, replace the GEMMs of layer l's direction d: `input` gives its input
// projection x W_ih^T (x: (T*N, In), result (T*N, 4H)), `recurrent` the product of each step
// h_prev W_hh^T (h_prev: (N, H), result (N, 4H)); the biases are added as usual. Inference only
// (the int8 layers of models/int8.h, and their calibration): lstm throws when gradients are
// wanted with them.
struct LSTMProjections {
  std::function<Tensor(const Tensor& x, int64_t layer, int64_t dir)> input;
  std::function<Tensor(const Tensor& h_prev, int64_t layer, int64_t dir)> recurrent;
  bool any() const { return input || recurrent; }
};
LSTMOutput lstm(const Tensor& x, const std::vector<Tensor>& weights, const LSTMOptions& opt,
                const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor(), const std::vector<int64_t>& lengths = {},
                const LSTMProjections& projections = {});

}  // namespace ocrt
