// The nn building blocks (see layers.h).
#include "models/layers.h"

#include <cmath>
#include <optional>

#include "models/int8.h"

#include "ops/linalg.h"
#include "ops/norm.h"
#include "ops/random.h"

namespace ocrt::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, Generator& gen)
    : in_features(in_features), out_features(out_features) {
  OCRT_CHECK(in_features >= 1 && out_features >= 1, "Linear: in_features and out_features must be >= 1, got ",
             in_features, " and ", out_features);
  weight = init_uniform_fan_in({out_features, in_features}, in_features, gen);
  register_parameter("weight", &weight);
  if (with_bias) {
    bias = init_uniform_fan_in({out_features}, in_features, gen);
    register_parameter("bias", &bias);
  }
}

namespace {
// Whether a layer with an int8 form computes x in it: on the CPU, without gradients.
bool runs_int8(const Tensor& x) { return x.device().is_cpu() && x.dtype() == DType::f32 && !grad_enabled(); }

// A layer loaded without its float32 weights (load_model_weights' inference_only, models/int8.h)
// computes in int8 or not at all: never with its placeholder.
void check_not_int8_only(bool int8_only, const char* layer) {
  OCRT_CHECK(!int8_only, layer, ": this int8 model was loaded for inference only (float32 CPU inputs, no gradients) ",
             "and keeps no float32 weights: load the file again, without releasing them, to run it otherwise");
}
}  // namespace

Tensor Linear::forward(const Tensor& x) {
  if (auto* calibration = Int8Calibration::active()) calibration->observe(this, 0, x);
  if (int8 && runs_int8(x)) return int8->forward(x);
  check_not_int8_only(int8_only, "Linear");
  return linear(x, weight, bias);
}

Dropout::Dropout(double p, uint64_t seed) : p(p), gen_(seed) {
  OCRT_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training(), gen_); }

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Pair kernel, Generator& gen, Conv2dOptions opt,
               bool with_bias)
    : options(opt) {
  OCRT_CHECK(in_channels >= 1 && out_channels >= 1 && kernel[0] >= 1 && kernel[1] >= 1 && opt.groups >= 1 &&
                 in_channels % opt.groups == 0 && out_channels % opt.groups == 0,
             "Conv2d: bad sizes: in ", in_channels, ", out ", out_channels, ", kernel ", kernel[0], "x", kernel[1],
             ", groups ", opt.groups);
  const int64_t fan_in = in_channels / opt.groups * kernel[0] * kernel[1];
  weight = init_uniform_fan_in({out_channels, in_channels / opt.groups, kernel[0], kernel[1]}, fan_in, gen);
  register_parameter("weight", &weight);
  if (with_bias) {
    bias = init_uniform_fan_in({out_channels}, fan_in, gen);
    register_parameter("bias", &bias);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  if (auto* calibration = Int8Calibration::active()) calibration->observe(this, 0, x);
  if (int8 && runs_int8(x)) return int8->forward(x);
  check_not_int8_only(int8_only, "Conv2d");
  return conv2d(x, weight, bias, options);
}

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum) : eps(eps), momentum(momentum) {
  OCRT_CHECK(num_features >= 1, "BatchNorm2d: num_features must be >= 1, got ", num_features);
  weight = Tensor::ones({num_features});
  bias = Tensor::zeros({num_features});
  running_mean = Tensor::zeros({num_features});
  running_var = Tensor::ones({num_features});
  num_batches_tracked = Tensor::zeros({}, DType::i64);
  register_parameter("weight", &weight);
  register_parameter("bias", &bias);
  register_buffer("running_mean", &running_mean);
  register_buffer("running_var", &running_var);
  // Optional, as in PyTorch: many exported state_dicts leave the counter out.
  register_buffer("num_batches_tracked", &num_batches_tracked, /*optional=*/true);
}

namespace {
thread_local Communicator* sync_bn_comm = nullptr;
}  // namespace

SyncBatchNormScope::SyncBatchNormScope(Communicator& comm) : previous_(sync_bn_comm) { sync_bn_comm = &comm; }
SyncBatchNormScope::~SyncBatchNormScope() { sync_bn_comm = previous_; }
Communicator* SyncBatchNormScope::current() { return sync_bn_comm; }

Tensor BatchNorm2d::forward(const Tensor& x) {
  if (is_training()) {
    NoGradGuard no_grad;
    add_(num_batches_tracked, Tensor::ones({}, DType::i64, num_batches_tracked.device()));
  }
  if (is_training() && sync_bn_comm)
    return sync_batch_norm(x, running_mean, running_var, weight, bias, *sync_bn_comm, momentum, eps);
  return batch_norm(x, running_mean, running_var, weight, bias, is_training(), momentum, eps);
}

void BatchNorm2d::normalize_in_place(const Tensor& y) const {
  OCRT_CHECK(!is_training() && y.dim() == 4 && y.size(1) == weight.numel(),
             "BatchNorm2d::normalize_in_place: eval mode and (N, ", weight.numel(), ", H, W) only, got ",
             shape_str(y.shape()));
  const auto [scale, shift] = eval_affine();
  const int64_t C = weight.numel();
  mul_(y, scale.reshape({1, C, 1, 1}));
  add_(y, shift.reshape({1, C, 1, 1}));
}

std::pair<Tensor, Tensor> BatchNorm2d::eval_affine() const {
  OCRT_CHECK(!is_training(), "BatchNorm2d::eval_affine: eval mode only");
  NoGradGuard no_grad;
  // y * scale + shift, with scale = weight / sqrt(var + eps) and shift = bias - mean * scale:
  // the per-channel affine map that batch_norm applies in eval mode.
  const Tensor scale = div(weight, sqrt(add(running_var, eps)));
  const Tensor shift = sub(bias, mul(running_mean, scale));
  return {scale, shift};
}

LayerNorm::LayerNorm(Shape shape, double eps, bool affine) : normalized_shape(std::move(shape)), eps(eps) {
  if (affine) {
    weight = Tensor::ones(normalized_shape);
    bias = Tensor::zeros(normalized_shape);
    register_parameter("weight", &weight);
    register_parameter("bias", &bias);
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

LSTM::LSTM(int64_t input_size, int64_t hidden_size, Generator& gen, LSTMOptions opt)
    : input_size(input_size), hidden_size(hidden_size), options(opt) {
  OCRT_CHECK(input_size >= 1 && hidden_size >= 1 && opt.num_layers >= 1, "LSTM: sizes must be >= 1 (input ",
             input_size, ", hidden ", hidden_size, ", layers ", opt.num_layers, ")");
  const int64_t dirs = opt.bidirectional ? 2 : 1, H = hidden_size;
  const double bound = 1.0 / std::sqrt((double)H);
  struct Entry {
    std::string name;
    Shape shape;
  };
  std::vector<Entry> entries;
  for (int64_t l = 0; l < opt.num_layers; ++l)
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string suffix = "_l" + std::to_string(l) + (d ? "_reverse" : "");
      entries.push_back({"weight_ih" + suffix, {4 * H, l == 0 ? input_size : dirs * H}});
      entries.push_back({"weight_hh" + suffix, {4 * H, H}});
      if (opt.has_biases) {
        entries.push_back({"bias_ih" + suffix, {4 * H}});
        entries.push_back({"bias_hh" + suffix, {4 * H}});
      }
    }
  weights_.reserve(entries.size());  // registered addresses must not move
  for (const Entry& e : entries) {
    weights_.push_back(init_uniform(e.shape, -bound, bound, gen));
    register_parameter(e.name, &weights_.back());
  }
}

std::vector<Tensor> LSTM::flat_weights() const { return weights_; }

Tensor* LSTM::weight_slot(const std::string& name) {
  // weights_ holds, per layer and direction, weight_ih, weight_hh[, bias_ih, bias_hh] (the constructor).
  const int64_t dirs = options.bidirectional ? 2 : 1, per = options.has_biases ? 4 : 2;
  for (int64_t l = 0; l < options.num_layers; ++l)
    for (int64_t d = 0; d < dirs; ++d) {
      std::string suffix = "_l";
      suffix += std::to_string(l);
      if (d) suffix += "_reverse";
      const size_t k = (size_t)((l * dirs + d) * per);
      if (name == "weight_ih" + suffix) return &weights_[k];
      if (name == "weight_hh" + suffix) return &weights_[k + 1];
    }
  return nullptr;
}

LSTMOutput LSTM::forward(const Tensor& x, const std::vector<int64_t>& lengths, const Tensor& h0, const Tensor& c0) {
  const int64_t dirs = options.bidirectional ? 2 : 1, per = options.has_biases ? 4 : 2, L = options.num_layers;
  if (!int8_input.empty() && runs_int8(x)) {
    LSTMProjections p;
    p.input = [this, dirs](const Tensor& in, int64_t l, int64_t d) {
      return int8_input[(size_t)(l * dirs + d)]->forward(in);
    };
    if (!int8_recurrent.empty())
      p.recurrent = [this, dirs](const Tensor& h, int64_t l, int64_t d) {
        return int8_recurrent[(size_t)(l * dirs + d)]->forward(h);
      };
    return lstm(x, weights_, options, h0, c0, lengths, p);
  }
  check_not_int8_only(int8_only, "LSTM");
  if (auto* calibration = Int8Calibration::active()) {
    // Calibration: the same products in float32, their inputs reported (Int8Calibration's
    // index: layer l's input is l, its recurrent state L + l).
    LSTMProjections p;
    p.input = [this, calibration, dirs, per](const Tensor& in, int64_t l, int64_t d) {
      if (d == 0) calibration->observe(this, l, in);
      return matmul(in, weights_[(size_t)((l * dirs + d) * per)].t());
    };
    p.recurrent = [this, calibration, dirs, per, L](const Tensor& h, int64_t l, int64_t d) {
      calibration->observe(this, L + l, h);
      return matmul(h, weights_[(size_t)((l * dirs + d) * per + 1)].t());
    };
    return lstm(x, weights_, options, h0, c0, lengths, p);
  }
  return lstm(x, weights_, options, h0, c0, lengths);
}

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, Generator& gen, double dropout,
                                       bool bias, bool batch_first, uint64_t dropout_seed)
    : embed_dim(embed_dim), num_heads(num_heads), dropout(dropout), batch_first(batch_first), gen_(dropout_seed) {
  OCRT_CHECK(embed_dim >= 1 && num_heads >= 1 && embed_dim % num_heads == 0, "MultiheadAttention: embed_dim ",
             embed_dim, " must be a positive multiple of num_heads ", num_heads);
  // PyTorch: xavier_uniform_ for in_proj_weight, zeros for the biases.
  const double bound = std::sqrt(6.0 / (double)(embed_dim + 3 * embed_dim));
  in_proj_weight = init_uniform({3 * embed_dim, embed_dim}, -bound, bound, gen);
  register_parameter("in_proj_weight", &in_proj_weight);
  if (bias) {
    in_proj_bias = Tensor::zeros({3 * embed_dim});
    register_parameter("in_proj_bias", &in_proj_bias);
  }
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias, gen));
  if (bias) {
    NoGradGuard no_grad;
    out_proj->bias.zero_();
  }
}

AttentionResult MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                            const Tensor& attn_mask, const Tensor& key_padding_mask) {
  MultiheadAttentionOptions o;
  o.num_heads = num_heads, o.dropout = dropout, o.training = is_training(), o.batch_first = batch_first;
  return multi_head_attention(query, key, value, in_proj_weight, in_proj_bias, out_proj->weight, out_proj->bias, o,
                              attn_mask, key_padding_mask, &gen_);
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  std::optional<Int8Codes> codes;  // the activation, while it is held as the next int8 convolution's codes
  const auto& kids = children();
  for (size_t i = 0; i < kids.size(); ++i) {
    Module* child = kids[i].second.get();
    // In inference a ReLU, and a BatchNorm in eval mode (a fixed scale and shift per channel),
    // overwrite the activation they get instead of allocating another one, when that
    // activation is this Sequential's own intermediate (not its input) and nothing else holds
    // its memory: fewer fresh pages to fault in, half the memory traffic, and no second copy of
    // the largest activation (a page's detector head at full resolution, 81 MB a copy).
    const bool own = !grad_enabled() && y.storage() != x.storage() && y.storage().use_count() == 1 &&
                     !y.requires_grad();
    if (own && dynamic_cast<const ReLU*>(child)) {
      relu_(y);
      continue;
    }
    if (auto* bn = dynamic_cast<BatchNorm2d*>(child); own && bn && !bn->is_training() && y.dim() == 4) {
      bn->normalize_in_place(y);
      continue;
    }
    // Convolutions in inference (not while calibrating, which observes each layer's input).
    if (auto* conv = dynamic_cast<Conv2d*>(child); conv && !grad_enabled() && !Int8Calibration::active()) {
      // An int8 convolution takes the eval-mode BatchNorm and the ReLU after it into its
      // epilogue and pools its output image by image (models/int8.h): three passes over its
      // output fewer, and the output is never held at full size.
      if (conv->int8 && (codes || runs_int8(y))) {
        Int8PostOps post;
        auto* bn = i + 1 < kids.size() ? dynamic_cast<BatchNorm2d*>(kids[i + 1].second.get()) : nullptr;
        if (bn && !bn->is_training()) {
          post.affine = bn->eval_affine();
          ++i;
        }
        if (i + 1 < kids.size() && dynamic_cast<const ReLU*>(kids[i + 1].second.get())) {
          post.relu = true;
          ++i;
        }
        if (auto* pool = i + 1 < kids.size() ? dynamic_cast<const MaxPool2d*>(kids[i + 1].second.get()) : nullptr) {
          post.pool = pool->options;  // pooled image by image: the full-size output is never held
          ++i;
        }
        // Another int8 convolution right after: this one's output goes to it as its input's
        // codes, never as float32 (models/int8.h, Int8Codes; the same bits).
        auto* next = i + 1 < kids.size() ? dynamic_cast<Conv2d*>(kids[i + 1].second.get()) : nullptr;
        if (next && next->int8 && next->int8->in_channels() == conv->int8->out_channels()) {
          codes = codes ? conv->int8->forward_codes(*codes, post, *next->int8)
                        : conv->int8->forward_codes(y, post, *next->int8);
          continue;
        }
        y = codes ? conv->int8->forward(*codes, post) : conv->int8->forward(y, post);
        codes.reset();
        continue;
      }
      // A float one, a ReLU and a max-pool in a row (a CRNN block) run as one op, which on the
      // CPU never writes the convolution's full-size output where it has a path (ops/conv.h).
      check_not_int8_only(conv->int8_only, "Conv2d");
      const auto* pool = i + 2 < kids.size() ? dynamic_cast<const MaxPool2d*>(kids[i + 2].second.get()) : nullptr;
      if (pool && dynamic_cast<const ReLU*>(kids[i + 1].second.get())) {
        y = conv2d_relu_max_pool2d(y, conv->weight, conv->bias, conv->options, pool->options);
        i += 2;
        continue;
      }
    }
    // In training, a ReLU right before a max pool runs after it instead: max and ReLU commute
    // (relu(max(a, b)) = max(relu(a), relu(b)), exactly, padding included), and the gradient
    // reaches the same input (the window's first largest value if it is positive, nothing
    // otherwise, either way), so the ReLU and its backward see a quarter (2 x 2) or half (2 x 1)
    // of the values, and autograd keeps the pooled ReLU output instead of a full-size one.
    if (grad_enabled() && dynamic_cast<const ReLU*>(child) && i + 1 < kids.size() &&
        dynamic_cast<const MaxPool2d*>(kids[i + 1].second.get())) {
      y = child->forward(kids[i + 1].second->forward(y));
      ++i;
      continue;
    }
    y = child->forward(y);
  }
  return y;
}

Module& Sequential::operator[](int64_t i) const {
  OCRT_CHECK(i >= 0 && i < size_, "Sequential: index ", i, " out of range for ", size_, " modules");
  return *children()[(size_t)i].second;
}

}  // namespace ocrt::nn
