// The LSTM: time loop, bidirectional layers, variable lengths, and backpropagation through
// time as one fused autograd node. Device-agnostic: the GEMMs are matmul, the per-step
// pointwise work is LayerBackend::lstm_cell / lstm_cell_backward (ops/cpu/lstm.cpp).
//
// Forward, for each layer and direction:
//   1. one GEMM for the input projection of every time step:  X W_ih^T + b_ih + b_hh  (T*N, 4H)
//   2. per step t (forward: 0..T-1, reverse: T-1..0): one GEMM h_prev W_hh^T, then the cell.
// Samples past their length are "inactive" at step t: their state passes through unchanged and
// their output is 0. So the forward direction's state stops at its last valid step, and the
// reverse direction starts from h0 at step lengths[n] - 1: exactly what packed sequences give.
//
// Backward, per layer from the top, per direction, steps in the reverse of processing order:
//   dgates_t = cell_backward(...);  dh_prev = dgates_t W_hh (+ the carried dh of inactive rows)
// and after the loop three big GEMMs over all steps at once:
//   dW_ih = dgates^T X,  dW_hh = dgates^T H_prev,  dX = dgates W_ih;  db = sum of dgates.
#include "ops/lstm.h"

#include <omp.h>

#include <exception>
#include <functional>
#include <optional>

#include "ops/backend.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "runtime/autograd.h"

namespace ocrt {

namespace {

// What the forward keeps of one layer and direction for the backward.
struct DirSaved {
  Tensor act;  // (T, N, 4H) activated gates
  Tensor hs;   // (T, N, H) state h after step t (carried through inactive steps)
  Tensor cs;   // (T, N, H) state c after step t
};

struct LayerSaved {
  Tensor input;               // (T, N, In) this layer's input
  std::vector<DirSaved> dirs;
};

// The weights of layer l, direction d, in _flat_weights order.
struct DirWeights {
  Tensor w_ih, w_hh, b_ih, b_hh;
};

DirWeights weights_of(const std::vector<Tensor>& w, int64_t l, int64_t d, int64_t dirs, bool biases) {
  const int64_t per = biases ? 4 : 2, base = (l * dirs + d) * per;
  DirWeights out{w[base], w[base + 1], Tensor(), Tensor()};
  if (biases) out.b_ih = w[base + 2], out.b_hh = w[base + 3];
  return out;
}

// The state before step t in direction d: h0 at the first processed step, else the state
// after the previous processed step.
Tensor state_before(const Tensor& states, const Tensor& init, int64_t t, int64_t d, int64_t T) {
  if (d == 0) return t == 0 ? init : states.select(0, t - 1);
  return t == T - 1 ? init : states.select(0, t + 1);
}

// Checks the input, the weights of every layer and direction, the initial states and the
// lengths against each other; returns the hidden size H.
int64_t check_lstm_args(const Tensor& x, const std::vector<Tensor>& weights, const LSTMOptions& opt, const Tensor& h0,
                        const Tensor& c0, const std::vector<int64_t>& lengths) {
  const char* op = "lstm";
  OCRT_CHECK(x.defined() && x.dim() == 3, op, ": expected an input (T, N, input_size), got ",
             x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  OCRT_CHECK(is_floating(x.dtype()), op, ": expected a float input, got ", dtype_name(x.dtype()));
  OCRT_CHECK(opt.num_layers >= 1, op, ": num_layers must be >= 1, got ", opt.num_layers);
  const int64_t T = x.size(0), N = x.size(1), I = x.size(2), L = opt.num_layers;
  const int64_t dirs = opt.bidirectional ? 2 : 1, per = opt.has_biases ? 4 : 2;
  OCRT_CHECK((int64_t)weights.size() == L * dirs * per, op, ": expected ", L * dirs * per, " weight tensors (",
             L, " layers x ", dirs, " directions x ", per, "), got ", weights.size());
  OCRT_CHECK(T >= 1 && N >= 1, op, ": input ", shape_str(x.shape()), " has no time steps or no samples");
  OCRT_CHECK(weights[1].defined() && weights[1].dim() == 2, op, ": weight_hh_l0 must be 2-D (4*hidden, hidden)");
  const int64_t H = weights[1].size(1);
  OCRT_CHECK(H >= 1, op, ": hidden size must be >= 1");
  for (int64_t l = 0; l < L; ++l)
    for (int64_t d = 0; d < dirs; ++d) {
      const DirWeights w = weights_of(weights, l, d, dirs, opt.has_biases);
      std::string name = "l";  // appended, not "l" + ...: GCC 12 warns falsely (-Wrestrict) about that once inlined
      name += std::to_string(l);
      if (d) name += "_reverse";
      const int64_t in = l == 0 ? I : dirs * H;
      auto check = [&](const Tensor& t, const char* what, const Shape& shape) {
        OCRT_CHECK(t.defined() && t.shape() == shape, op, ": ", what, name, " must have shape ", shape_str(shape),
                   ", got ", t.defined() ? shape_str(t.shape()) : std::string("undefined"));
        OCRT_CHECK(t.device() == x.device() && t.dtype() == x.dtype(), op, ": ", what, name, " must be ",
                   dtype_name(x.dtype()), " on ", x.device().str(), " like the input");
      };
      check(w.w_ih, "weight_ih_", {4 * H, in});
      check(w.w_hh, "weight_hh_", {4 * H, H});
      if (opt.has_biases) {
        check(w.b_ih, "bias_ih_", {4 * H});
        check(w.b_hh, "bias_hh_", {4 * H});
      }
    }
  for (const Tensor* s : {&h0, &c0}) {
    if (!s->defined()) continue;
    OCRT_CHECK(s->shape() == Shape({L * dirs, N, H}), op, ": initial state must have shape ",
               shape_str({L * dirs, N, H}), ", got ", shape_str(s->shape()));
    OCRT_CHECK(s->device() == x.device() && s->dtype() == x.dtype(), op, ": initial state must be ",
               dtype_name(x.dtype()), " on ", x.device().str());
  }
  OCRT_CHECK(lengths.empty() || (int64_t)lengths.size() == N, op, ": expected ", N, " lengths, got ", lengths.size());
  for (size_t n = 0; n < lengths.size(); ++n)
    OCRT_CHECK(lengths[n] >= 1 && lengths[n] <= T, op, ": length ", lengths[n], " of sample ", n,
               " is outside [1, T = ", T, "]");
  return H;
}

// active (T, N) u8: active[t][n] = t < lengths[n] (every step of every sample without lengths).
Tensor active_steps(int64_t T, int64_t N, const std::vector<int64_t>& lengths, Device dev) {
  std::vector<uint8_t> mask((size_t)(T * N), 1);
  if (!lengths.empty())
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) mask[(size_t)(t * N + n)] = t < lengths[(size_t)n];
  return Tensor::from_vector(mask, {T, N}, dev);
}

// Direction d of layer l, forward: x (T, N, In) -> its H columns of out (T, N, dirs*H),
// starting from the state (h_first, c_first) (N, H), its products from p where p has them.
// Returns what the backward keeps; without a backward (`for_backward` false) the activated gates
// are not kept: every step writes them into the same (N, 4H) rows (in inference they were 13 MB
// of fresh memory per layer and direction for crnn's 32 lines of 400 pixels, written and never read).
DirSaved forward_direction(const Tensor& x, const DirWeights& w, bool biases, const Tensor& h_first,
                           const Tensor& c_first, const Tensor& active, int64_t l, int64_t d, const Tensor& out,
                           const LSTMProjections& p, bool for_backward) {
  const int64_t T = x.size(0), N = x.size(1), In = x.size(2), H = h_first.size(1);
  const DType dt = x.dtype();
  const Device dev = x.device();
  auto cell = kernel(dev, &LayerBackend::lstm_cell, "lstm");
  // The input projection of every step in one GEMM: gx (T, N, 4H) = x W_ih^T + b_ih + b_hh.
  Tensor gx = p.input ? p.input(x.view({T * N, In}), l, d) : matmul(x.view({T * N, In}), w.w_ih.t());
  if (biases) add_(gx, add(w.b_ih, w.b_hh));
  gx = gx.view({T, N, 4 * H});
  DirSaved s{Tensor::empty({for_backward ? T : 1, N, 4 * H}, dt, dev), Tensor::empty({T, N, H}, dt, dev),
             Tensor::empty({T, N, H}, dt, dev)};
  // Contiguous, so that a step of few lines reads its rows straight (runtime/cpu/gemm_loops.inc
  // few_rows), and packed once for the GEMM of every step (MatmulRhsReuse); neither is needed
  // when p gives the recurrent products. Without a backward, where the steps read it packed,
  // the packing is kept between calls (the next batch finds it) and made from the weight's
  // transposed view: no copy of it a call either (a crnn-en batch packed and copied 4 MB, a
  // quarter of ocrt-infer's page faults).
  Tensor w_hh_t;
  std::optional<MatmulRhsReuse> reuse;
  if (!p.recurrent) {
    const bool keep = !for_backward && !grad_enabled() && MatmulRhsReuse::packs(w.w_hh.t());
    w_hh_t = keep ? w.w_hh.t() : w.w_hh.t().contiguous();
    reuse.emplace(w_hh_t, N, keep);
  }
  // Without a backward every step's recurrent product goes into the same (N, 4H) rows.
  const Tensor gh_rows = !for_backward && !p.recurrent ? Tensor::empty({N, 4 * H}, dt, dev) : Tensor();
  for (int64_t step = 0; step < T; ++step) {
    const int64_t t = d == 0 ? step : T - 1 - step;
    const Tensor h_prev = state_before(s.hs, h_first, t, d, T), c_prev = state_before(s.cs, c_first, t, d, T);
    Tensor gh;
    if (p.recurrent) {
      gh = p.recurrent(h_prev, l, d);
    } else if (gh_rows.defined()) {
      matmul_into(h_prev, w_hh_t, gh_rows);
      gh = gh_rows;
    } else {
      gh = matmul(h_prev, w_hh_t);
    }
    cell(gx.select(0, t), gh, h_prev, c_prev, active.select(0, t), s.act.select(0, for_backward ? t : 0),
         s.hs.select(0, t), s.cs.select(0, t), out.select(0, t).narrow(1, d * H, H));
  }
  return s;
}

// Whether a bidirectional layer's two directions run side by side, one thread each: on the CPU
// with two or three threads, outside any parallel region. (With more threads, one direction's
// product of the whole sequence's inputs keeps more than one thread busy; nested teams would be
// needed to share them out, and are not used.)
bool split_directions(Device dev, int64_t dirs) {
  return dirs == 2 && dev.is_cpu() && !omp_in_parallel() && (omp_get_max_threads() == 2 || omp_get_max_threads() == 3);
}

// run(d) for each direction d of a layer. Where split_directions says so the two run side by
// side, one thread each, whose GEMMs and cells then run on that thread alone, instead of both
// threads meeting twice at every step of a product of N x H states (the same results: no
// kernel's sums depend on the thread count); else one after the other. An exception from
// either direction is rethrown here.
void for_each_direction(Device dev, int64_t dirs, const std::function<void(int64_t)>& run) {
  if (!split_directions(dev, dirs)) {
    for (int64_t d = 0; d < dirs; ++d) run(d);
    return;
  }
  std::exception_ptr failed[2];
#pragma omp parallel num_threads(2)
  {
    const int d = omp_get_thread_num();
    try {
      run(d);
    } catch (...) {
      failed[d] = std::current_exception();
    }
  }
  for (const auto& e : failed)
    if (e) std::rethrow_exception(e);
}

// The gradients of one direction of one layer.
struct DirGrads {
  Tensor dw_ih, dw_hh, db;  // db: of b_ih and of b_hh alike (undefined without biases)
  Tensor dh0, dc0;          // of the initial state (N, H)
};

// Backpropagation through time for direction d of one layer: dout (T, N, dirs*H) is the
// gradient of the layer's output, dh and dc (N, H) those of its final state. Adds the
// gradient of the layer's input into dx (T, N, In).
DirGrads backward_direction(const Tensor& x, const DirSaved& s, const DirWeights& w, bool biases,
                            const Tensor& h_first, const Tensor& c_first, const Tensor& active, int64_t d,
                            const Tensor& dout, Tensor dh, Tensor dc, const Tensor& dx) {
  const int64_t T = x.size(0), N = x.size(1), In = x.size(2), H = h_first.size(1);
  const DType dt = x.dtype();
  const Device dev = x.device();
  auto cell_back = kernel(dev, &LayerBackend::lstm_cell_backward, "lstm backward");
  Tensor dgates = Tensor::empty({T, N, 4 * H}, dt, dev);
  const MatmulRhsReuse reuse(w.w_hh, N);  // dgates_t W_hh at every step: packed once
  // The gradient reaching the state h before step t is carry_t + dgates_t W_hh (carry_t: dh
  // passed through the rows inactive at t); the cell of the next step adds the two itself (as
  // dh and dh_more), so no step launches an addition. Two buffers each for the carries and
  // dc_prev, used in turn: a step reads the previous step's and writes the other.
  Tensor carry[2] = {Tensor::empty({N, H}, dt, dev), Tensor::empty({N, H}, dt, dev)};
  Tensor dcs[2] = {Tensor::empty({N, H}, dt, dev), Tensor::empty({N, H}, dt, dev)};
  Tensor dh_more;  // undefined at the first step: dh alone
  for (int64_t step = 0; step < T; ++step) {
    const int64_t t = d == 0 ? T - 1 - step : step;  // reverse of the processing order
    const Tensor& carry_out = carry[step % 2];
    const Tensor& dc_prev = dcs[step % 2];
    cell_back(s.act.select(0, t), state_before(s.cs, c_first, t, d, T), s.cs.select(0, t), dh, dh_more,
              dout.select(0, t).narrow(1, d * H, H), dc, active.select(0, t), dgates.select(0, t), dc_prev, carry_out);
    dh = matmul(dgates.select(0, t), w.w_hh);
    dh_more = carry_out;
    dc = dc_prev;
  }
  DirGrads g;
  g.dh0 = add(dh_more, dh);  // carry + dgates W_hh, as the cell would have summed them
  g.dc0 = dc;
  // H_prev (T, N, H): the state before each step, in time order.
  Tensor h_prev_all = d == 0 ? concat({h_first.unsqueeze(0), s.hs.narrow(0, 0, T - 1)}, 0)
                             : concat({s.hs.narrow(0, 1, T - 1), h_first.unsqueeze(0)}, 0);
  const Tensor dg2 = dgates.view({T * N, 4 * H});
  g.dw_ih = matmul(dg2.t(), x.view({T * N, In}));
  g.dw_hh = matmul(dg2.t(), h_prev_all.view({T * N, H}));
  if (biases) g.db = sum(dg2, {0});
  add_(dx, matmul(dg2, w.w_ih).view({T, N, In}));
  return g;
}

}  // namespace

LSTMOutput lstm(const Tensor& x, const std::vector<Tensor>& weights, const LSTMOptions& opt, const Tensor& h0,
                const Tensor& c0, const std::vector<int64_t>& lengths, const LSTMProjections& projections) {
  const char* op = "lstm";
  const int64_t H = check_lstm_args(x, weights, opt, h0, c0, lengths);
  const int64_t T = x.size(0), N = x.size(1), L = opt.num_layers, dirs = opt.bidirectional ? 2 : 1;
  const bool biases = opt.has_biases;
  const Device dev = x.device();
  const DType dt = x.dtype();
  const Tensor active = active_steps(T, N, lengths, dev);
  const Tensor h_init = h0.defined() ? h0.detach().contiguous() : Tensor::zeros({L * dirs, N, H}, dt, dev);
  const Tensor c_init = c0.defined() ? c0.detach().contiguous() : Tensor::zeros({L * dirs, N, H}, dt, dev);
  std::vector<Tensor> w;
  for (const Tensor& t : weights) w.push_back(t.detach());

  TensorList inputs{x, h0, c0};
  inputs.insert(inputs.end(), weights.begin(), weights.end());
  const bool backward = any_requires_grad(inputs);

  // Forward: layer by layer, each direction over all steps; the final states go to h_n, c_n.
  // Only a backward needs each layer's input and the directions' saved steps kept.
  std::vector<LayerSaved> saved((size_t)L);
  Tensor h_n = Tensor::empty({L * dirs, N, H}, dt, dev), c_n = Tensor::empty({L * dirs, N, H}, dt, dev);
  Tensor layer_in = x.detach().contiguous();
  {
    NoGradGuard no_grad;
    for (int64_t l = 0; l < L; ++l) {
      Tensor layer_out = Tensor::empty({T, N, dirs * H}, dt, dev);
      if (backward) saved[(size_t)l].input = layer_in;
      std::vector<DirSaved> per_dir((size_t)dirs);
      auto run_direction = [&](int64_t d) {
        NoGradGuard no_grad_here;  // grad mode is per thread
        const int64_t k = l * dirs + d;
        per_dir[(size_t)d] = forward_direction(layer_in, weights_of(w, l, d, dirs, biases), biases,
                                               h_init.select(0, k), c_init.select(0, k), active, l, d, layer_out,
                                               projections, backward);
      };
      for_each_direction(dev, dirs, run_direction);
      for (int64_t d = 0; d < dirs; ++d) {
        const int64_t k = l * dirs + d;
        const DirSaved& s = per_dir[(size_t)d];
        const int64_t last = d == 0 ? T - 1 : 0;
        h_n.select(0, k).copy_(s.hs.select(0, last));
        c_n.select(0, k).copy_(s.cs.select(0, last));
        if (backward) saved[(size_t)l].dirs.push_back(s);
      }
      layer_in = layer_out;
    }
  }
  const Tensor output = layer_in;

  // Backward: one fused node for the whole LSTM, layers from the top.
  if (backward) {
    OCRT_CHECK(!projections.any(), op, ": projections of its own (int8 inference) have no gradient");
    const bool need_h0 = h0.defined() && h0.requires_grad(), need_c0 = c0.defined() && c0.requires_grad();
    record(op, inputs, {output, h_n, c_n}, [=](const TensorList& grads) {
      TensorList out((size_t)(3 + w.size()));
      Tensor dh0 = Tensor::zeros({L * dirs, N, H}, dt, dev), dc0 = Tensor::zeros({L * dirs, N, H}, dt, dev);
      Tensor dlayer_out = grads[0].contiguous();  // (T, N, dirs*H)
      for (int64_t l = L - 1; l >= 0; --l) {
        const LayerSaved& ls = saved[(size_t)l];
        Tensor dlayer_in = Tensor::zeros({T, N, ls.input.size(2)}, dt, dev);
        for (int64_t d = 0; d < dirs; ++d) {
          const int64_t k = l * dirs + d;
          const DirGrads g = backward_direction(
              ls.input, ls.dirs[(size_t)d], weights_of(w, l, d, dirs, biases), biases, h_init.select(0, k),
              c_init.select(0, k), active, d, dlayer_out, grads[1].select(0, k).contiguous().clone(),
              grads[2].select(0, k).contiguous().clone(), dlayer_in);
          dh0.select(0, k).copy_(g.dh0);
          dc0.select(0, k).copy_(g.dc0);
          const size_t base = (size_t)(3 + k * (biases ? 4 : 2));
          out[base] = g.dw_ih;
          out[base + 1] = g.dw_hh;
          if (biases) {
            out[base + 2] = g.db;
            out[base + 3] = g.db.clone();
          }
        }
        dlayer_out = dlayer_in;
      }
      out[0] = dlayer_out;
      if (need_h0) out[1] = dh0;
      if (need_c0) out[2] = dc0;
      return out;
    });
  }
  return {output, h_n, c_n};
}

}  // namespace ocrt
