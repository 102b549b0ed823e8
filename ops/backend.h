// The layer kernel table: the computations of neural-network layers (softmax, convolution,
// pooling, normalisation, the LSTM cell, CTC), one function pointer each. It sits above the
// tensor kernel table (runtime/backend.h), which holds copy, fill, elementwise, reductions,
// matrix products, indexing and random numbers: a layer's front-end (ops/conv.cpp, ...) may use
// both, the runtime only the lower one. The CPU table is filled in ops/cpu/, the CUDA table in
// ops/cuda/; the kernel contract is the one at the top of runtime/backend.h.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/backend.h"

namespace ocrt {

// Geometry of a 2-D convolution (PyTorch's conv2d arguments; all already validated).
struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1, groups = 1;
  // The backend may use a faster algorithm whose float32 rounding differs from the direct sum,
  // for y in the forward pass and for dx and dw in the backward (the CPU's Winograd convolution,
  // ops/cpu/winograd.h; about 1e-5 relative). Set from conv_mode() (ops/conv.h).
  bool fast = false;
};
// Geometry of a 2-D pooling window (max_pool2d / avg_pool2d arguments, validated).
struct Pool2dParams {
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;  // max_pool2d only
  bool count_include_pad = true;           // avg_pool2d only
};

// The constants of one Adam / AdamW step (train/optim.cpp computes them from the options and
// the step count t).
struct AdamStepParams {
  double decay = 1;         // AdamW's decoupled weight decay: p *= 1 - lr wd first (1: none)
  double weight_decay = 0;  // Adam's weight decay, added to the gradient: g + wd p (0: none)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double step_size = 0;   // lr / (1 - beta1^t)
  double sqrt_bias2 = 1;  // sqrt(1 - beta2^t)
};

// Geometry of window_attention (ops/window_attention.h): an H x W grid of tokens, each query
// attending within window_h x window_w tokens around it (odd; clipped to the grid), in `heads`
// heads of E / heads channels, scores scaled by `scale` (1 / sqrt(E / heads)).
struct WindowAttentionParams {
  int64_t H = 1, W = 1, window_h = 1, window_w = 1, heads = 1;
  double scale = 1;
};

struct LayerBackend {
  const char* name;

  // ---- softmax (ops/reduce.cpp)
  // y = softmax(x) or log_softmax(x) along dim; x, y contiguous.
  void (*softmax)(bool log, const Tensor& x, int64_t dim, const Tensor& y);
  void (*softmax_backward)(bool log, const Tensor& y, const Tensor& dy, int64_t dim, const Tensor& dx);

  // ---- windowed self-attention (ops/attention.cpp)
  // q, k, v (L = H*W, N, E), E = heads x hd, head h in channels [h hd, (h+1) hd) (the
  // projections' layout: no head is moved anywhere), each channel-contiguous (stride 1) with one
  // token stride and one line stride among the three (three tensors, or the thirds of one
  // (L, N, 3E) projection); out (L, N, E) contiguous; key_padding (N, L) uint8 (nonzero: a
  // padding key, never attended) or undefined. Per line n, head h and query t: weights =
  // softmax over the query's window keys (ops/window_attention.h) of scale q_t . k_j, padding
  // keys left out; out_t = sum_j weights_j v_j. Writes out and probs (N, heads, L, slots) (the
  // weights in slot order, 0 in slots past a clipped window and for padding keys). A query
  // with no key allowed gets weights 0 and output 0. probs may be undefined (nothing will be
  // differentiated): then only out is written.
  void (*window_attention)(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_padding,
                           const WindowAttentionParams& p, const Tensor& out, const Tensor& probs);
  // Its gradients for dout (L, N, E) contiguous, from the forward's out and probs; dq, dk, dv
  // (L, N, E), with q's strides, are overwritten.
  void (*window_attention_backward)(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                    const Tensor& probs, const Tensor& dout, const WindowAttentionParams& p,
                                    const Tensor& dq, const Tensor& dk, const Tensor& dv);

  // ---- convolution and pooling (ops/conv.cpp)
  // y (N,Cout,Ho,Wo) = conv2d(x (N,Cin,H,W), w (Cout,Cin/groups,kh,kw)) + bias (Cout; may be
  // undefined). x and w contiguous, y contiguous.
  void (*conv2d)(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dParams& p, const Tensor& y);
  // The gradients of conv2d for dy (N,Cout,Ho,Wo); each of dx, dw, db may be undefined (not
  // wanted). They are overwritten, not accumulated. x, w, dy contiguous.
  void (*conv2d_backward)(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dParams& p,
                          const Tensor& dx, const Tensor& dw, const Tensor& db);
  // y (N,C,Ho,Wo) = window maxima of x (N,C,H,W); indices (i64, y's shape) = h * W + w of each
  // maximum within its (H,W) plane, as PyTorch. Padding never wins. x contiguous. indices is
  // undefined when nothing will be differentiated (inference): then only y is written.
  void (*max_pool2d)(const Tensor& x, const Pool2dParams& p, const Tensor& y, const Tensor& indices);
  // dx (N,C,H,W) = dy scattered to the saved indices (dx is overwritten).
  void (*max_pool2d_backward)(const Tensor& dy, const Tensor& indices, const Tensor& dx);
  void (*avg_pool2d)(const Tensor& x, const Pool2dParams& p, const Tensor& y);
  void (*avg_pool2d_backward)(const Tensor& dy, const Pool2dParams& p, const Tensor& dx);  // dx overwritten
  // y (N,C,Ho,Wo): the mean of window [floor(o*In/Out), ceil((o+1)*In/Out)) in each dim.
  void (*adaptive_avg_pool2d)(const Tensor& x, const Tensor& y);
  void (*adaptive_avg_pool2d_backward)(const Tensor& dy, const Tensor& dx);  // dx overwritten
  // y (N,C,H*sh,W*sw): each pixel of x (N,C,H,W) repeated as an sh x sw block (nearest-neighbour
  // upsampling by whole factors, as a feature pyramid's top-down path uses). x contiguous.
  void (*upsample_nearest2d)(const Tensor& x, int64_t sh, int64_t sw, const Tensor& y);
  // dx (N,C,H,W) = the sum of dy over each pixel's block (overwritten).
  void (*upsample_nearest2d_backward)(const Tensor& dy, int64_t sh, int64_t sw, const Tensor& dx);
  // The same upsampling written into y (N,C,H*sh,W*sw) in place, or added to it (accumulate):
  // y's planes are contiguous, its first two dims of any strides (a slice of a larger tensor's
  // channels). x contiguous. Inference only (upsample_nearest2d_into).
  void (*upsample_nearest2d_into)(const Tensor& x, int64_t sh, int64_t sw, const Tensor& y, bool accumulate);

  // ---- normalisation (ops/norm.cpp)
  // Batch normalisation over x (N,C,S) contiguous (S = the spatial size, 1 for (N,C) input).
  // Per-channel batch statistics: mean (C) and the biased variance var (C), in x's dtype.
  void (*batch_norm_stats)(const Tensor& x, const Tensor& mean, const Tensor& var);
  // y = (x - mean[c]) * invstd[c] * weight[c] + bias[c]; weight and bias may be undefined.
  void (*batch_norm_apply)(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                           const Tensor& bias, const Tensor& y);
  // Gradients for dy (N,C,S). training: mean and invstd were the batch's own (so they depend
  // on x); otherwise they were constants (running statistics). dx, dweight, dbias may be
  // undefined (not wanted); they are overwritten.
  void (*batch_norm_backward)(const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& invstd,
                              const Tensor& weight, bool training, const Tensor& dx, const Tensor& dweight,
                              const Tensor& dbias);
  // Layer normalisation of each row of x (M,D) contiguous: y = (x - mean) * rstd * weight + bias
  // (weight, bias (D) may be undefined); saves mean and rstd (M).
  void (*layer_norm)(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& y,
                     const Tensor& mean, const Tensor& rstd);
  void (*layer_norm_backward)(const Tensor& x, const Tensor& dy, const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);

  // ---- the LSTM cell (ops/lstm.cpp)
  // The pointwise part of one LSTM time step (the GEMMs go through matmul). The gate
  // pre-activations are gates_x + gates_h (N,4H): x W_ih^T + b_ih + b_hh and h_prev W_hh^T, in
  // PyTorch's order (i, f, g, o).
  // Rows with active[n] == 0 (u8; past that sample's length) keep their state: h = h_prev,
  // c = c_prev, and output 0. Writes act (N,4H) = (sigmoid(i), sigmoid(f), tanh(g),
  // sigmoid(o)), c = f c_prev + i g, h = o tanh(c), and out = h for active rows, 0 for the
  // others. h_prev, c_prev, act, h, c are contiguous; out may have any row stride.
  void (*lstm_cell)(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h_prev, const Tensor& c_prev,
                    const Tensor& active, const Tensor& act, const Tensor& h, const Tensor& c, const Tensor& out);
  // Its backward. dh + dh_more and dc: the gradients reaching this step's state h and c from
  // later steps (dh_more may be undefined: then dh alone; the caller passes the later step's
  // product dgates @ W_hh as dh and that step's dh_carry as dh_more, so that no launch adds
  // them); dout: the gradient of this step's output (any row stride; ignored for inactive rows,
  // whose output was a constant 0). Writes dgates (N,4H) (0 for inactive rows), dc_prev (N,H),
  // and dh_carry (N,H): dh + dh_more for inactive rows (the state passed through), 0 for active
  // ones (their dh_prev is dgates @ W_hh). Everything else contiguous. The sum is taken as
  // (dh + dh_more) + dout, in that order.
  void (*lstm_cell_backward)(const Tensor& act, const Tensor& c_prev, const Tensor& c, const Tensor& dh,
                             const Tensor& dh_more, const Tensor& dout, const Tensor& dc, const Tensor& active,
                             const Tensor& dgates, const Tensor& dc_prev, const Tensor& dh_carry);

  // ---- CTC loss (ops/ctc.cpp)
  // CTC loss, log-space forward-backward. log_probs (T,N,C) contiguous; targets: all samples'
  // labels concatenated (i64, contiguous), sample n's at target_offsets[n] with
  // target_lengths[n] labels (host vectors, as input_lengths). Writes losses (N) (+inf where
  // the target cannot be aligned) and alpha (N, T, 2*max_target_length+1), float64, kept for
  // the backward.
  void (*ctc_loss)(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& target_offsets,
                   const std::vector<int64_t>& input_lengths, const std::vector<int64_t>& target_lengths,
                   int64_t blank, const Tensor& losses, const Tensor& alpha);
  // grad (T,N,C) = scale[n] * (exp(log_probs) - posterior of each class), PyTorch's formula
  // (which is also the gradient with respect to the logits when log_probs = log_softmax(logits));
  // 0 past input_lengths[n] and for samples whose loss is infinite.
  void (*ctc_loss_backward)(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& target_offsets,
                            const std::vector<int64_t>& input_lengths, const std::vector<int64_t>& target_lengths,
                            int64_t blank, const Tensor& losses, const Tensor& alpha,
                            const std::vector<double>& scale, const Tensor& grad);
  // ---- optimizers (train/optim.cpp)
  // One Adam / AdamW step on one parameter, elementwise and in place, in p's dtype, in this
  // order (torch.optim's): p *= decay; g' = g + weight_decay p; m = beta1 m + (1 - beta1) g';
  // v = beta2 v + (1 - beta2) g'^2; p -= step_size m / (sqrt(v) / sqrt_bias2 + eps).
  // p, g, m, v contiguous, of one shape and floating dtype; g is not written.
  void (*adam_step)(const AdamStepParams& a, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v);
  // The sum of x's squares in float64 (x contiguous, float32 or float64), for a gradient's norm
  // (train/optim.cpp's grad_norm) without a float64 copy of the gradient. Its value does not
  // depend on the thread count. grad_norm calls it on the CPU; on a GPU it sums all gradients
  // in one float64 vector instead (one read-back for all of them, not one a parameter).
  double (*sum_squares)(const Tensor& x);
};

// The layer table for a device's kind (validating the device); throws when the build lacks it.
const LayerBackend& layer_backend(Device device);
#ifdef OCRT_HAVE_CUDA
const LayerBackend& cuda_layer_backend();  // the CUDA table without a GPU (as cuda_tensor_backend)
#endif

// The kernel `field` of `device`'s layer table; throws "<op>: not implemented on <device>".
template <class F>
F kernel(Device device, F LayerBackend::*field, const char* op) {
  return checked_kernel(layer_backend(device), field, op, device);
}

// Filled by each family's file in ops/cpu/ (and ops/cuda/ for the CUDA table).
void register_cpu_softmax(LayerBackend& b);
void register_cpu_conv(LayerBackend& b);
void register_cpu_pool(LayerBackend& b);
void register_cpu_norm(LayerBackend& b);
void register_cpu_lstm(LayerBackend& b);
void register_cpu_ctc(LayerBackend& b);
void register_cpu_optim(LayerBackend& b);
void register_cpu_attention(LayerBackend& b);

void register_cuda_softmax(LayerBackend& b);
void register_cuda_conv(LayerBackend& b);
void register_cuda_pool(LayerBackend& b);
void register_cuda_norm(LayerBackend& b);
void register_cuda_lstm(LayerBackend& b);
void register_cuda_ctc(LayerBackend& b);
void register_cuda_optim(LayerBackend& b);
void register_cuda_attention(LayerBackend& b);

}  // namespace ocrt
