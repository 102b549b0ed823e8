// int8 inference on the CPU: quantized weights, the layers that compute with them, the
// calibration that picks their input scales, and the model files that hold them (docs/int8.md).
//
// The scheme (post-training, static):
//   - weights: per output channel, symmetric: scale_o = max |w_o| / 127, code = round(w / scale_o)
//     in [-127, 127]. A BatchNorm after a convolution stays a float32 BatchNorm: it scales each
//     output channel, which a per-channel weight scale absorbs anyway, so folding it would not
//     change the codes' resolution.
//   - a layer's input: one scale per tensor, from calibration lines. Inputs that are never
//     negative (after a ReLU) take codes 0..127 (scale = range / 127); signed inputs (the LSTM's
//     second layer, the classifier) take -63..63 stored with an offset of 64 (scale = range / 63),
//     because runtime/cpu/int8_gemm.h's kernel takes activation codes 0..127 only. The offset's
//     contribution, 64 x the sum of a column's weight codes, is subtracted in the epilogue, and a
//     convolution's zero padding takes the code of 0.0, so padding stays exactly zero.
//   - products in int32 (exact), scaled back to float32 per output channel, plus the float32
//     bias. Everything between the products (BatchNorm, ReLU, pooling, the LSTM's gates and
//     cell, softmax, decoding) stays float32, except that a max-pool between two
//     int8 convolutions runs on the second one's codes (Int8Codes below: the same result, as
//     the quantization never decreases).
//
// Which layers: every Conv2d with one group and at least 4 input channels, every Linear, and the
// LSTM's input projections (weight_ih) and recurrent products (weight_hh: the state h is
// o * tanh(c), inside (-1, 1), so one calibrated scale serves every step; on the validation
// lines the int8 recurrence changes crnn-s's CER by 0.01 points, docs/int8.md). Left in float32,
// and why: a first convolution of 1 to 3 channels (its 9-27 products per output are a few
// percent of the work, and its input is the raw image, whose quantization would be a second
// rounding of every pixel); the LSTM's cell (gates, c, h); attention's projections (the packed
// one and out_proj, which the attention op reads itself) and its scores.
//
// Files: an ocrt model file (models/model_file.h) whose training record holds "quantization",
// and whose quantized weight W is stored as int8 codes under W's own name, with more tensors:
//   "<W>.int8_scale"  float32 (out): the weight scale of each output channel
//   "<W>.int8_input"  float32 (2): the input's scale, and 1 if the input is signed else 0
// A float model is never silently read as int8 or back: the codes have dtype int8.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "models/module.h"
#include "ops/conv.h"
#include "runtime/cpu/int8_gemm.h"
#include "runtime/tensor.h"

namespace ocrt::cpu {
class Int8WinogradWeights;  // runtime/cpu/int8_winograd.h (not installed: a kernel header)
}  // namespace ocrt::cpu

namespace ocrt::nn {

// How a layer's float32 input becomes activation codes.
struct Int8Input {
  float scale = 1;
  bool is_signed = false;
  int offset() const { return is_signed ? 64 : 0; }
  int max_code() const { return is_signed ? 63 : cpu::kInt8CodeMax; }
};

// x (n floats) -> codes: clamp(round(x / scale), lo, max_code) + offset, lo = -max_code signed, 0 unsigned.
void int8_quantize_input(const float* x, int64_t n, const Int8Input& in, uint8_t* codes);

// Per-output-channel (dim 0) symmetric quantization of a float32 weight of any rank >= 1.
struct Int8Weight {
  Tensor codes;   // int8, w's shape
  Tensor scales;  // float32 (w.size(0)); a channel of zeros gets scale 1
};
Int8Weight quantize_weight(const Tensor& w);
Tensor dequantize_weight(const Tensor& codes, const Tensor& scales);  // float32, codes' shape

// y = x W^T + b for x (..., in) float32 on the CPU, in int8.
class Int8Linear {
 public:
  Int8Linear(const Tensor& codes, const Tensor& scales, const Tensor& bias, Int8Input input);
  Tensor forward(const Tensor& x) const;
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  int64_t in_, out_, kp_;
  Int8Input input_;
  cpu::Int8PackedWeights packed_;
  std::vector<float> scale_, bias_;
  std::vector<int32_t> offset_;
};

// What an int8 convolution may apply to its output in its epilogue: an eval-mode BatchNorm's
// per-channel affine map (scale, shift: float32 (Cout) tensors) and then a ReLU.
struct Int8PostOps {
  std::pair<Tensor, Tensor> affine;
  bool relu = false;
  // Max-pooling after all that: each image is pooled as soon as it is made, in a buffer of its
  // own, so the convolution's full-size output is never held (the same values as max_pool2d).
  std::optional<MaxPool2dOptions> pool;
};

class Int8Conv2d;

// An activation between two int8 convolutions, held as the codes the second one reads: its
// input quantized and laid out channels last with its padding (Int8Conv2d::forward_codes), so
// that the float32 activation is never written, read back, quantized and transposed.
struct Int8Codes {
  Tensor codes;  // uint8 (N, codes an image), each image from a cache line's start
  int64_t N = 0, C = 0, H = 0, W = 0;  // the activation they stand for
  const Int8Conv2d* reader = nullptr;  // the layer they were laid out for
};

// conv2d(x, W, b) with one group, for x (N, C, H, W) float32 on the CPU, in int8.
class Int8Conv2d {
 public:
  Int8Conv2d(const Tensor& codes, const Tensor& scales, const Tensor& bias, const Conv2dOptions& options,
             Int8Input input);
  ~Int8Conv2d();  // in int8.cpp, where the Winograd weights' type is complete
  Tensor forward(const Tensor& x) const { return forward(x, Int8PostOps{}); }
  // pool(relu(conv(x) * scale + shift)): the same values as the layers one after the other, up to
  // float32 rounding (the affine map is folded into the epilogue's scale and bias).
  Tensor forward(const Tensor& x, const Int8PostOps& post) const;
  Tensor forward(const Int8Codes& x, const Int8PostOps& post) const;
  // The same output as next's input codes: the bits next->forward would make of forward(x,
  // post) itself (the same floats, the same quantization; pooled on the codes, which is the
  // same since the quantization never decreases). next must take this layer's channels.
  Int8Codes forward_codes(const Tensor& x, const Int8PostOps& post, const Int8Conv2d& next) const;
  Int8Codes forward_codes(const Int8Codes& x, const Int8PostOps& post, const Int8Conv2d& next) const;
  const Int8Input& input() const { return input_; }
  int64_t in_channels() const { return c_; }
  int64_t out_channels() const { return cout_; }

 private:
  // How an H x W input's codes lie: padded channels last, Hp x Wp pixels of cp codes (more for
  // the AMX kernels' reads past the last row), `stride` codes an image.
  struct Layout {
    int64_t H = 0, W = 0, Ho = 0, Wo = 0, Hp = 0, Wp = 0, codes = 0, stride = 0;
    std::vector<int64_t> tap_offset;  // where each tap's codes lie from the pixel at its top left
    cpu::Int8Image geometry;          // stride 1 only (pixel 0 otherwise)
  };
  Layout layout(int64_t H, int64_t W) const;
  // One float32 image (C, H, W) into its codes.
  void lay_out(const float* x, const Layout& l, uint8_t* image) const;
  // H x W pixels of C floats each (channels last), max-pooled first when pool is given, into this
  // layer's input codes laid out as l says.
  void codes_from_pixels(const float* pixels, int64_t H, int64_t W, const MaxPool2dOptions* pool, const Layout& l,
                         uint8_t* image) const;
  std::pair<Tensor, Int8Codes> run(const Tensor* xf, const Int8Codes* xc, const Int8PostOps& post,
                                   const Int8Conv2d* next) const;

  int64_t cout_, c_, cp_, kh_, kw_;
  Conv2dOptions opt_;
  Int8Input input_;
  cpu::Int8PackedWeights packed_;  // K = kh * kw * cp (tap-major, then channel), N = cout
  std::vector<float> scale_, bias_;
  std::vector<int32_t> offset_;
  // A 3x3, stride-1, padding-1 layer on a CPU whose int8 product is the AVX2 one runs through
  // Winograd F(4x4, 3x3) or F(2x2, 3x3) in exact integers instead (runtime/cpu/int8_winograd.h: the same sums, the same
  // floats). Its transformed weights are made at the first such call, from the codes kept here.
  bool winograd_shape_ = false;
  Tensor codes_;  // (cout, c, 3, 3) int8 codes, kept for the transformed weights (shares the model's)
  mutable std::once_flag winograd_made_;
  mutable std::shared_ptr<const cpu::Int8WinogradWeights> winograd_;  // shared with equal layers (page lanes)
  const cpu::Int8WinogradWeights* winograd_weights() const;
};

// Whether int8 computes this module's weight `name` (a Conv2d's "weight", a Linear's "weight",
// an LSTM's "weight_ih_l<k>[_reverse]" and "weight_hh_l<k>[_reverse]"), by the rules at the top
// of this file.
bool int8_quantizable(const Module& module, const std::string& name);

// Records the inputs of every layer int8 would quantize, while it lives (one at a time, process
// wide): Conv2d, Linear and LSTM forward passes report to it (observe), from any thread. Models
// built while it lives are registered (infer::build_model calls add_model) so that their layers
// are known by name.
class Int8Calibration {
 public:
  explicit Int8Calibration(double percentile = 99.999);
  ~Int8Calibration();
  Int8Calibration(const Int8Calibration&) = delete;
  Int8Calibration& operator=(const Int8Calibration&) = delete;

  static Int8Calibration* active();
  void add_model(const Module& model);
  // The input x of module m's quantizable weight number `index` (0 for conv and linear; for an
  // LSTM of L layers, layer l's input is l (its two directions share it) and its recurrent
  // state, both directions', L + l).
  void observe(const Module* m, int64_t index, const Tensor& x);

  // The input of weight `name` ("cnn.3.weight", "rnn.weight_ih_l1_reverse"), from what was seen;
  // throws when that layer never ran.
  Int8Input input_for(const std::string& name) const;
  int64_t values_seen(const std::string& name) const;

 private:
  struct Seen {
    double max_abs = 0;
    bool negative = false;
    int64_t count = 0;
    std::vector<float> sample;  // |x| of a spread of the values seen
  };
  std::string key_of(const Module* m, int64_t index) const;
  double percentile_;
  mutable std::mutex mutex_;
  std::map<const Module*, std::string> names_;
  std::map<std::string, Seen> seen_;
};

// The int8 file's tensors for model (a float model, calibrated): every quantizable weight as
// codes plus its .int8_scale and .int8_input; every other tensor as it is.
StateDict int8_state_dict(const Module& model, const Int8Calibration& calibration);

// Whether a state dict holds int8 codes (an int8 model file's).
bool is_int8_state_dict(const StateDict& weights);

// For an int8 file's tensors: the float32 state dict (codes x scales in place of the codes, the
// .int8_* tensors left out) that the model loads as usual, so that it also runs in float32.
// Checks the codes and scales either way; without `dequantize` the codes' names are left out.
StateDict int8_float_weights(const StateDict& weights, bool dequantize = true);

// Gives each quantized layer of model (built from int8_float_weights(weights)) its int8 form:
// from then on its CPU forward passes without gradients run in int8. Throws when an int8 tensor
// is not a weight that int8 computes, or its scales are missing or misshapen.
void attach_int8(Module& model, const StateDict& weights);

// Loads weights into model (strictly): a float state dict by load_state_dict, an int8 one by
// int8_float_weights and attach_int8. A model loaded while an Int8Calibration lives is registered
// with it. Every builder of models from files (models/model_check.h, infer/model_loader.h) loads
// through this.
//
// inference_only (ocrt-infer's predictor): an int8 state dict's codes are not
// dequantized into float32 copies (4x the codes' size: 33 of crnn-en's 35 MB, never read by a
// CPU forward pass without gradients). Each weight that an int8 form computes becomes a
// placeholder of its shape holding one value (a zero, broadcast; the layer's memory, allocated
// but never written, is given back untouched), and its layer is marked int8_only
// (models/layers.h): a forward pass the int8 form does not take (with gradients, on another
// device, while calibrating) fails with a clear error instead of computing with the placeholder.
// Such a model's state_dict holds the placeholders: export or save the file's weights, not it.
// For a float state dict it changes nothing. Not for the detector: its fused head folds the
// float32 weights of two int8 convolutions into new ones when it is built (models/dbnet.cpp).
void load_model_weights(Module& model, const StateDict& weights, bool inference_only = false);

}  // namespace ocrt::nn
