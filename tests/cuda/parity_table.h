// The CPU-vs-CUDA parity cases, keyed by the entries of the two kernel tables (runtime/backend.h's
// TensorBackend and ops/backend.h's LayerBackend), after ggml's test-backend-ops: for every kernel
// a backend can have, the tests in tests/cuda/ that run it on the CPU and on cuda:0 and compare
// (forward, and backward through autograd where the entry is a gradient).
//
// tests/runtime/test_backend_tables.cpp checks this table in every build, with or without a GPU:
// every entry of both tables has a row here, every row names at least one case, and every case
// named exists as a TEST_CASE in its file. A new kernel entry therefore fails the CPU test suite
// until it has a CUDA kernel (checked in CUDA builds) and a parity case here.
#pragma once
#include <string>
#include <vector>

namespace ocrt::parity {

struct ParityCase {
  const char* file;  // under tests/cuda/
  const char* name;  // the TEST_CASE's name
};

struct ParityRow {
  const char* entry;  // a field of TensorBackend or LayerBackend
  std::vector<ParityCase> cases;
};

inline const std::vector<ParityRow>& parity_table() {
  static const ParityCase adam{"test_optim.cpp", "Adam and AdamW steps on CUDA equal the CPU's bit for bit"};
  static const ParityCase squares{"test_optim.cpp", "a gradient's sum of squares on CUDA matches the CPU's in float64"};
  static const ParityCase copy{"test_parity_core.cpp", "copy: dtype conversions, strided and broadcast sources, fill"};
  static const ParityCase unary{"test_parity_core.cpp", "unary ops and their gradients"};
  static const ParityCase binary{"test_parity_core.cpp", "binary ops with broadcasting, comparisons, where"};
  static const ParityCase reduce{"test_parity_core.cpp",
                                 "reductions over any dims, whole tensors, integer types, max/min with indices"};
  static const ParityCase matmul{"test_parity_core.cpp",
                                 "matmul through cuBLAS: batched, transposed, broadcast, linear, float64"};
  static const ParityCase index{"test_parity_core.cpp", "index_select, gather, embedding and their scatter-add gradients"};
  static const ParityCase random{"test_parity_core.cpp", "random numbers: a seed gives the same tensor on CPU and CUDA"};
  static const ParityCase softmax{"test_parity_core.cpp", "softmax and log_softmax over the last and a middle dim"};
  static const ParityCase window_attention{"test_parity_core.cpp",
                                           "window_attention: local and whole-grid windows, key padding, queries "
                                           "with no key"};
  static const ParityCase conv_crnn{"test_conv_pool.cpp", "conv2d on CUDA matches the CPU on the CRNN layer shapes"};
  static const ParityCase conv_odd{"test_conv_pool.cpp",
                                   "conv2d on CUDA matches the CPU with groups, depthwise, dilation and odd geometry"};
  static const ParityCase conv_some{"test_conv_pool.cpp",
                                    "conv2d on CUDA matches the CPU when only some gradients are wanted"};
  static const ParityCase max_pool{"test_conv_pool.cpp", "max_pool2d on CUDA matches the CPU"};
  static const ParityCase avg_pool{"test_conv_pool.cpp", "avg_pool2d on CUDA matches the CPU"};
  static const ParityCase adaptive{"test_conv_pool.cpp", "adaptive_avg_pool2d on CUDA matches the CPU"};
  static const ParityCase upsample{"test_conv_pool.cpp", "upsample_nearest2d on CUDA matches the CPU"};
  static const ParityCase upsample_into{"test_conv_pool.cpp",
                                        "upsample_nearest2d_into on CUDA matches the CPU: into a channel slice, and added"};
  static const ParityCase bn_train{"test_norm_lstm.cpp",
                                   "cuda batch_norm in training mode matches the CPU, running statistics included"};
  static const ParityCase bn_eval{"test_norm_lstm.cpp", "cuda batch_norm in eval mode matches the CPU"};
  static const ParityCase norm_grads{"test_norm_lstm.cpp", "cuda norm backward kernels write exactly the gradients asked for"};
  static const ParityCase layer_norm{"test_norm_lstm.cpp", "cuda layer_norm matches the CPU"};
  static const ParityCase lstm_cell{"test_norm_lstm.cpp",
                                    "cuda lstm_cell kernels match the CPU on every output, strided views and inactive "
                                    "rows included"};
  static const ParityCase lstm{"test_norm_lstm.cpp", "cuda lstm matches the CPU: outputs, final states and every gradient"};
  static const ParityCase ctc{"test_ctc.cpp", "ctc_loss: every reduction, zero_infinity on and off, padded targets"};
  static const ParityCase ctc_f64{"test_ctc.cpp", "ctc_loss in float64, blank = C - 1, concatenated targets"};

  static const std::vector<ParityRow> table = {
      // the tensor table (runtime/backend.h)
      {"copy", {copy}},
      {"fill", {copy}},
      {"unary", {unary}},
      {"unary_backward", {unary}},
      {"binary", {binary}},
      {"where", {binary}},
      {"reduce", {reduce}},
      {"arg_reduce", {reduce}},
      {"matmul", {matmul}},
      {"index_select", {index}},
      {"index_add", {index}},    // index_select's gradient
      {"gather", {index}},
      {"scatter_add", {index}},  // gather's gradient
      {"uniform", {random}},
      {"normal", {random}},
      // the layer table (ops/backend.h)
      {"softmax", {softmax}},
      {"softmax_backward", {softmax}},
      {"window_attention", {window_attention}},
      {"window_attention_backward", {window_attention}},
      {"conv2d", {conv_crnn, conv_odd}},
      {"conv2d_backward", {conv_crnn, conv_odd, conv_some}},
      {"max_pool2d", {max_pool}},
      {"max_pool2d_backward", {max_pool}},
      {"avg_pool2d", {avg_pool}},
      {"avg_pool2d_backward", {avg_pool}},
      {"adaptive_avg_pool2d", {adaptive}},
      {"adaptive_avg_pool2d_backward", {adaptive}},
      {"upsample_nearest2d", {upsample}},
      {"upsample_nearest2d_backward", {upsample}},
      {"upsample_nearest2d_into", {upsample_into}},
      {"batch_norm_stats", {bn_train}},
      {"batch_norm_apply", {bn_train, bn_eval}},
      {"batch_norm_backward", {bn_train, bn_eval, norm_grads}},
      {"layer_norm", {layer_norm}},
      {"layer_norm_backward", {layer_norm, norm_grads}},
      {"lstm_cell", {lstm_cell, lstm}},
      {"lstm_cell_backward", {lstm_cell, lstm}},
      {"ctc_loss", {ctc, ctc_f64}},
      {"ctc_loss_backward", {ctc, ctc_f64}},
      {"adam_step", {adam}},
      {"sum_squares", {squares}},
  };
  return table;
}

}  // namespace ocrt::parity
