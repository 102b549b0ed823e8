// Recognisers as ONNX graphs (see onnx_export.h): each layer of models/layers.h as the ONNX
// nodes that compute what its forward computes in eval mode, then CRNN and SVTR-lite built from
// them exactly as their forward passes are (models/crnn.cpp, models/svtr_lite.cpp).
//
// Value names follow the modules' state_dict names, so a graph viewer shows "cnn.6" or
// "blocks.3.attn" where the model has those layers. Initializers keep the state_dict names where
// they hold the same numbers (conv weights, norms' parameters and statistics, biases); the few
// that are rearranged say so: "<linear>.weight_t" (transposed to (in, out) for MatMul) and
// "rnn.W_l<k>", "rnn.R_l<k>", "rnn.B_l<k>" (ONNX's LSTM layout).
#include "models/onnx_export.h"

#include <algorithm>
#include <cmath>

#include "models/crnn.h"
#include "models/onnx.h"
#include "models/svtr_lite.h"

namespace ocrt::nn {

namespace {

using onnx::Attr;

class Emitter {
 public:
  explicit Emitter(onnx::GraphBuilder& graph) : g(graph) {}
  onnx::GraphBuilder& g;

  // ---------------------------------------------------------------- constants, shared by value

  // An int64 1-D constant (axes, shapes, Slice bounds), named by its values: "ints(0,0,-1)".
  std::string ints(const std::vector<int64_t>& v) {
    std::string name = "ints(";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) name += ',';
      name += std::to_string(v[i]);
    }
    name += ")";
    if (!g.defined(name)) g.add_ints(name, v);
    return name;
  }
  // A float32 scalar constant (shape ()), named by its value.
  std::string scalar(float v, const std::string& label) {
    const std::string name = "float(" + label + ")";
    if (!g.defined(name)) g.add_floats(name, {v}, {});
    return name;
  }
  std::string int_scalar(int64_t v) {
    const std::string name = "int(" + std::to_string(v) + ")";
    if (!g.defined(name)) g.add_ints(name, {v}, {});
    return name;
  }

  // ---------------------------------------------------------------- layers

  std::string conv(const std::string& name, const Conv2d& m, const std::string& x) {
    const Conv2dOptions& o = m.options;
    std::vector<std::string> in{x, g.add_tensor(name + ".weight", m.weight)};
    if (m.bias.defined()) in.push_back(g.add_tensor(name + ".bias", m.bias));
    return g.op("Conv", in, name,
                {Attr::Ints("kernel_shape", {m.weight.size(2), m.weight.size(3)}),
                 Attr::Ints("strides", {o.stride[0], o.stride[1]}),
                 // ONNX pads: begin of each spatial axis, then end of each (top, left, bottom, right)
                 Attr::Ints("pads", {o.padding[0], o.padding[1], o.padding[0], o.padding[1]}),
                 Attr::Ints("dilations", {o.dilation[0], o.dilation[1]}), Attr::Int("group", o.groups)});
  }

  // Inference form: (x - running_mean) / sqrt(running_var + eps) * weight + bias.
  std::string batch_norm(const std::string& name, const BatchNorm2d& m, const std::string& x) {
    return g.op("BatchNormalization",
                {x, g.add_tensor(name + ".weight", m.weight), g.add_tensor(name + ".bias", m.bias),
                 g.add_tensor(name + ".running_mean", m.running_mean), g.add_tensor(name + ".running_var", m.running_var)},
                name, {Attr::Float("epsilon", (float)m.eps)});
  }

  std::string max_pool(const std::string& name, const MaxPool2dOptions& o, const std::string& x) {
    const int64_t sh = o.stride[0] ? o.stride[0] : o.kernel[0], sw = o.stride[1] ? o.stride[1] : o.kernel[1];
    // Both treat padding as -inf (never the maximum).
    return g.op("MaxPool", {x}, name,
                {Attr::Ints("kernel_shape", {o.kernel[0], o.kernel[1]}), Attr::Ints("strides", {sh, sw}),
                 Attr::Ints("pads", {o.padding[0], o.padding[1], o.padding[0], o.padding[1]}),
                 Attr::Ints("dilations", {o.dilation[0], o.dilation[1]}), Attr::Int("ceil_mode", o.ceil_mode ? 1 : 0)});
  }

  // The exact (erf) GELU, in the order ocrt's kernel computes it: (0.5 x) (1 + erf(x / sqrt 2)).
  // opset 17 has no Gelu operator (it came in opset 20).
  std::string gelu(const std::string& name, const std::string& x) {
    const std::string e = g.op("Erf", {g.op("Div", {x, scalar((float)std::sqrt(2.0), "sqrt2")}, name + ".scaled")},
                               name + ".erf");
    const std::string half_x = g.op("Mul", {scalar(0.5f, "0.5"), x}, name + ".half_x");
    return g.op("Mul", {half_x, g.op("Add", {scalar(1.0f, "1"), e}, name + ".one_plus_erf")}, name);
  }

  // y = x W^T + b over the last dim of x (any rank). out names the result (default: name).
  std::string linear(const std::string& name, const Linear& m, const std::string& x, const std::string& out = "") {
    const std::string y = out.empty() ? name : out;
    const std::string wt = g.add_tensor(name + ".weight_t", m.weight.t());  // (in, out)
    if (!m.bias.defined()) return g.op("MatMul", {x, wt}, y);
    const std::string xw = g.op("MatMul", {x, wt}, name + ".matmul");
    return g.op("Add", {xw, g.add_tensor(name + ".bias", m.bias)}, y);
  }

  // LayerNorm over the last dim.
  std::string layer_norm(const std::string& name, const LayerNorm& m, const std::string& x) {
    OCRT_CHECK(m.normalized_shape.size() == 1, "ONNX export: LayerNorm '", name, "' normalises over ",
               m.normalized_shape.size(), " dims; only the last dim is supported");
    const int64_t C = m.normalized_shape[0];
    const std::string scale = m.weight.defined() ? g.add_tensor(name + ".weight", m.weight)
                                                  : g.add_tensor(name + ".weight", Tensor::ones({C}));
    const std::string bias = m.bias.defined() ? g.add_tensor(name + ".bias", m.bias)
                                              : g.add_tensor(name + ".bias", Tensor::zeros({C}));
    return g.op("LayerNormalization", {x, scale, bias}, name,
                {Attr::Int("axis", -1), Attr::Float("epsilon", (float)m.eps)});
  }

  // The layers a Sequential of ocrt's models holds, each as its ONNX counterpart.
  std::string sequential(const std::string& prefix, const Sequential& s, std::string x) {
    for (const auto& [child, module] : s.children()) {
      const std::string name = prefix + "." + child;
      const Module* m = module.get();
      if (auto* c = dynamic_cast<const Conv2d*>(m)) x = conv(name, *c, x);
      else if (auto* b = dynamic_cast<const BatchNorm2d*>(m)) x = batch_norm(name, *b, x);
      else if (dynamic_cast<const ReLU*>(m)) x = g.op("Relu", {x}, name);
      else if (auto* p = dynamic_cast<const MaxPool2d*>(m)) x = max_pool(name, p->options, x);
      else if (auto* ge = dynamic_cast<const GELU*>(m)) {
        OCRT_CHECK(ge->approximate() == GeluApprox::none, "ONNX export: '", name,
                   "' is a tanh-approximated GELU, which the exporter does not write (only the exact one)");
        x = gelu(name, x);
      } else if (dynamic_cast<const Hardswish*>(m)) x = g.op("HardSwish", {x}, name);
      else if (dynamic_cast<const Identity*>(m)) continue;
      else fail("ONNX export: '", name, "' is a layer the exporter does not know");
    }
    return x;
  }

  // torch.nn.LSTM (time first) as one ONNX LSTM node per layer, both directions in the node.
  // x (T, N, I) -> (T, N, dirs * H), the forward direction's H values first (PyTorch's layout).
  // lengths: "" or an int32 (N) value, each line's frame count: ONNX's sequence_lens, which,
  // like ocrt's lengths, starts the reverse direction at a line's last frame and zeroes the
  // output past it.
  std::string lstm(const std::string& name, const LSTM& m, std::string x, const std::string& lengths) {
    const LSTMOptions& o = m.options;
    const int64_t H = m.hidden_size, dirs = o.bidirectional ? 2 : 1;
    const std::vector<Tensor> w = m.flat_weights();  // per layer and direction: w_ih, w_hh[, b_ih, b_hh]
    const size_t per_dir = o.has_biases ? 4 : 2;
    OCRT_CHECK(w.size() == per_dir * (size_t)(o.num_layers * dirs), "ONNX export: LSTM '", name, "' has ", w.size(),
               " weight tensors, expected ", per_dir * (size_t)(o.num_layers * dirs));
    // PyTorch stacks the gates' rows as i, f, g, o; ONNX as i, o, f, c (c is PyTorch's g).
    auto gates_iofc = [&](const Tensor& t, std::vector<float>& out) {
      const std::vector<float> v = t.to(Device::cpu()).contiguous().to_vector<float>();
      const size_t block = v.size() / 4;
      for (int k : {0, 3, 1, 2}) out.insert(out.end(), v.begin() + (ptrdiff_t)(k * block), v.begin() + (ptrdiff_t)((k + 1) * block));
    };
    for (int64_t l = 0; l < o.num_layers; ++l) {
      const int64_t in_size = w[(size_t)(l * dirs) * per_dir].size(1);
      std::vector<float> W, R, B;
      for (int64_t d = 0; d < dirs; ++d) {
        const size_t base = (size_t)(l * dirs + d) * per_dir;
        gates_iofc(w[base], W);
        gates_iofc(w[base + 1], R);
        if (o.has_biases) gates_iofc(w[base + 2], B), gates_iofc(w[base + 3], B);  // per direction: Wb then Rb
      }
      const std::string k = std::to_string(l);
      std::vector<std::string> in{x, g.add_floats(name + ".W_l" + k, W, {dirs, 4 * H, in_size}),
                                  g.add_floats(name + ".R_l" + k, R, {dirs, 4 * H, H})};
      in.push_back(o.has_biases ? g.add_floats(name + ".B_l" + k, B, {dirs, 8 * H}) : std::string());
      if (!lengths.empty()) in.push_back(lengths);
      while (in.back().empty()) in.pop_back();  // optional inputs left out at the end
      const std::string y = g.add_node(
          "LSTM", in, {name + ".l" + k + ".Y"},
          {Attr::Int("hidden_size", H), Attr::String("direction", o.bidirectional ? "bidirectional" : "forward")});
      // Y (T, dirs, N, H) -> (T, N, dirs, H) -> (T, N, dirs * H)
      const std::string t = g.op("Transpose", {y}, name + ".l" + k + ".Y_tnd", {Attr::Ints("perm", {0, 2, 1, 3})});
      x = g.op("Reshape", {t, ints({0, 0, -1})}, name + ".l" + k);
    }
    return x;
  }

  // ---------------------------------------------------------------- SVTR-lite's parts

  // Multi-head self-attention with torch.nn.MultiheadAttention's packed parameters on tokens
  // (N, L, C). mask: "" or a bool value broadcasting to (N, heads, L, L), true = may not attend.
  // dead_rows: the mask may forbid every key of a query; those rows get weights 0 (ocrt's rule)
  // instead of softmax's NaN, which would reach the real tokens through 0 * NaN.
  std::string attention(const std::string& name, const MultiheadAttention& m, const std::string& x,
                        const std::string& mask, bool dead_rows) {
    const int64_t C = m.embed_dim, h = m.num_heads, d = C / h;
    const std::string wt = g.add_tensor(name + ".in_proj_weight_t", m.in_proj_weight.t());  // (C, 3C)
    std::string qkv = g.op("MatMul", {x, wt}, name + ".qkv_matmul");
    if (m.in_proj_bias.defined()) qkv = g.op("Add", {qkv, g.add_tensor(name + ".in_proj_bias", m.in_proj_bias)}, name + ".qkv");
    g.add_node("Split", {qkv, ints({C, C, C})}, {name + ".q", name + ".k", name + ".v"}, {Attr::Int("axis", 2)});
    auto heads = [&](const std::string& t, std::vector<int64_t> perm) {  // (N, L, C) -> (N, L, h, d) -> perm
      const std::string r = g.op("Reshape", {t, ints({0, 0, h, d})}, t + "_heads");
      return g.op("Transpose", {r}, t + "_t", {Attr::Ints("perm", perm)});
    };
    const std::string q = heads(name + ".q", {0, 2, 1, 3});   // (N, h, L, d)
    const std::string kt = heads(name + ".k", {0, 2, 3, 1});  // (N, h, d, L)
    const std::string v = heads(name + ".v", {0, 2, 1, 3});   // (N, h, L, d)
    // scores = q k^T / sqrt(d), in ocrt's order: the product, then the scale
    std::string s = g.op("Mul", {g.op("MatMul", {q, kt}, name + ".qk"), scalar((float)(1.0 / std::sqrt((double)d)),
                                                                                 "1/sqrt(" + std::to_string(d) + ")")},
                         name + ".scores");
    if (!mask.empty()) s = g.op("Where", {mask, scalar(-INFINITY, "-inf"), s}, name + ".scores_masked");
    std::string p = g.op("Softmax", {s}, name + ".weights", {Attr::Int("axis", -1)});
    if (dead_rows) p = g.op("Where", {mask, scalar(0.0f, "0"), p}, name + ".weights_masked");
    const std::string o = g.op("MatMul", {p, v}, name + ".heads_out");  // (N, h, L, d)
    const std::string ot = g.op("Transpose", {o}, name + ".heads_out_t", {Attr::Ints("perm", {0, 2, 1, 3})});
    const std::string joined = g.op("Reshape", {ot, ints({0, 0, C})}, name + ".joined");  // (N, L, C)
    return linear(name + ".out_proj", *m.out_proj, joined);
  }

  std::string mixing_block(const std::string& name, const MixingBlock& b, const std::string& x, const std::string& mask,
                           bool dead_rows) {
    const std::string a = attention(name + ".attn", *b.attn, layer_norm(name + ".norm1", *b.norm1, x), mask, dead_rows);
    const std::string y = g.op("Add", {x, a}, name + ".attn_residual");
    const std::string h = layer_norm(name + ".norm2", *b.norm2, y);
    const std::string f = linear(name + ".mlp.fc2", *b.mlp->fc2,
                                 gelu(name + ".mlp.gelu", linear(name + ".mlp.fc1", *b.mlp->fc1, h)));
    return g.op("Add", {y, f}, name);
  }
};

// ---------------------------------------------------------------- CRNN

std::string export_crnn(Emitter& e, const CRNN& m, const std::string& image, const std::string& widths) {
  onnx::GraphBuilder& g = e.g;
  std::string f = e.sequential("cnn", *m.cnn, image);                                     // (N, c6, 1, T)
  f = g.op("Squeeze", {f, e.ints({2})}, "cnn.squeezed");                                   // (N, c6, T)
  f = g.op("Transpose", {f}, "rnn.input", {Attr::Ints("perm", {2, 0, 1})});                // (T, N, c6)
  std::string lengths;
  if (!widths.empty()) {  // each line's frames, CRNN::frames: width / 4 + 1 (int32 for ONNX's LSTM)
    const std::string frames = g.op("Add", {g.op("Div", {widths, e.int_scalar(4)}, "rnn.width_cols"), e.int_scalar(1)},
                                    "rnn.frames");
    lengths = g.op("Cast", {frames}, "rnn.lengths", {Attr::Int("to", (int32_t)onnx::ElemType::i32)});
  }
  f = e.lstm("rnn", *m.rnn, f, lengths);                                                   // (T, N, 2H)
  return e.linear("fc", *m.fc, f, "logits");                                               // (T, N, classes)
}

// ---------------------------------------------------------------- SVTR-lite

std::string export_svtr(Emitter& e, const SVTRLite& m, const std::string& image, const std::string& widths) {
  onnx::GraphBuilder& g = e.g;
  const SVTRLiteConfig& cfg = m.config;
  const int64_t C0 = cfg.dims[0], q = C0 / 4;
  std::string grid = e.sequential("patch_embed", *m.patch_embed, image);  // (N, C0, 8, Wt)
  int64_t H = 8;  // 32 / 4: the input height is fixed

  // The grid's width Wt as a 1-D value [Wt] (the Slice bound), and the column indices 0 .. Wt-1
  // for the local window and the padding masks, when there are any.
  const std::string wt1 = g.op("Shape", {grid}, "grid.width", {Attr::Int("start", 3), Attr::Int("end", 4)});
  const bool any_local = std::any_of(m.blocks.begin(), m.blocks.end(), [](const auto& b) { return b->local; });
  std::string cols;
  if (any_local || !widths.empty()) {
    const std::string wt0 = g.op("Squeeze", {wt1}, "grid.width_scalar");
    cols = g.op("Range", {e.int_scalar(0), wt0, e.int_scalar(1)}, "grid.cols");  // (Wt)
  }

  // Tokens (N, 8, Wt, C0) plus the position table. Its column half (channels [0, 2q)) depends
  // only on the column and is stored for kOnnxMaxTokenColumns columns, sliced to Wt; its row half
  // (channels [2q, 4q)) is stored for the 8 rows. Each table is zero in the other's channels, so
  // adding one and then the other gives, channel by channel, exactly x + the table ocrt adds.
  std::string t = g.op("Transpose", {grid}, "tokens.grid", {Attr::Ints("perm", {0, 2, 3, 1})});
  {
    const std::vector<float> full = SVTRLite::position_table(1, kOnnxMaxTokenColumns, C0).to(DType::f32).to_vector<float>();
    std::vector<float> col_table = full, row_table = SVTRLite::position_table(H, 1, C0).to(DType::f32).to_vector<float>();
    for (int64_t j = 0; j < kOnnxMaxTokenColumns; ++j)
      for (int64_t c = 2 * q; c < C0; ++c) col_table[(size_t)(j * C0 + c)] = 0;
    for (int64_t i = 0; i < H; ++i)
      for (int64_t c = 0; c < 2 * q; ++c) row_table[(size_t)(i * C0 + c)] = 0;
    const std::string col_all = g.add_floats("positions.columns", col_table, {kOnnxMaxTokenColumns, C0});
    const std::string col = g.op("Slice", {col_all, e.ints({0}), wt1, e.ints({0})}, "positions.columns_used");  // (Wt, C0)
    const std::string row = g.add_floats("positions.rows", row_table, {H, 1, C0});
    t = g.op("Add", {g.op("Add", {t, col}, "tokens.plus_columns"), row}, "tokens.positioned");
  }
  t = g.op("Reshape", {t, e.ints({0, -1, C0})}, "tokens");  // (N, L = 8 Wt, C0), token (i, j) at i * Wt + j

  // Padding columns (with widths): (N, Wt) bool, true past each line's width / 4 columns.
  std::string pad_cols;
  if (!widths.empty()) {
    const std::string line_cols = g.op("Div", {widths, e.int_scalar(4)}, "padding.line_cols");  // (N)
    pad_cols = g.op("GreaterOrEqual",
                    {g.op("Unsqueeze", {cols, e.ints({0})}, "padding.cols_row"),                 // (1, Wt)
                     g.op("Unsqueeze", {line_cols, e.ints({1})}, "padding.line_cols_col")},      // (N, 1)
                    "padding.cols");
  }
  // The local window's column test, the same for every stage: |j - j'| > window_w / 2, (Wt, Wt).
  std::string far_cols;
  if (any_local) {
    const std::string dj = g.op("Abs", {g.op("Sub", {g.op("Unsqueeze", {cols, e.ints({1})}, "window.cols_q"),
                                                     g.op("Unsqueeze", {cols, e.ints({0})}, "window.cols_k")},
                                             "window.col_diff")},
                                "window.col_dist");
    far_cols = g.op("Greater", {dj, e.int_scalar(cfg.window[1] / 2)}, "window.far_cols");
  }

  size_t next_block = 0;
  for (int s = 0; s < 3; ++s) {
    const std::string stage = "stage" + std::to_string(s);
    if (s > 0) {
      const int64_t Cin = cfg.dims[(size_t)s - 1];
      const std::string name = "merges." + std::to_string(s - 1);
      const MergeLayer& merge = *m.merges[(size_t)s - 1];
      // tokens (N, L, Cin) -> grid (N, Cin, H, Wt), padding columns zeroed (with widths)
      std::string gr = g.op("Transpose", {g.op("Reshape", {t, e.ints({0, H, -1, Cin})}, name + ".grid_nhwc")},
                            name + ".grid", {Attr::Ints("perm", {0, 3, 1, 2})});
      if (!pad_cols.empty())
        gr = g.op("Where", {g.op("Unsqueeze", {pad_cols, e.ints({1, 2})}, name + ".pad_cols"), e.scalar(0.0f, "0"), gr},
                  name + ".grid_masked");
      const std::string c = e.conv(name + ".conv", *merge.conv, gr);  // (N, C, H/2, Wt)
      H /= 2;
      // (N, C, H, Wt) -> (N, C, L) -> (N, L, C), then LayerNorm per token
      const std::string flat = g.op("Reshape", {c, e.ints({0, 0, -1})}, name + ".flat");
      t = e.layer_norm(name + ".norm", *merge.norm, g.op("Transpose", {flat}, name + ".tokens", {Attr::Ints("perm", {0, 2, 1})}));
    }
    // This stage's masks: the local window on its H x Wt grid, and the padding keys.
    std::string window, keys;
    const int64_t first = (int64_t)next_block;
    bool stage_local = false;
    for (int64_t k = 0; k < cfg.depths[(size_t)s]; ++k) stage_local |= m.blocks[(size_t)(first + k)]->local;
    if (stage_local) {
      // |i - i'| > window_h / 2 for the stage's H rows: a constant (H, 1, H, 1)
      std::vector<uint8_t> far_rows((size_t)(H * H));
      for (int64_t i = 0; i < H; ++i)
        for (int64_t i2 = 0; i2 < H; ++i2) far_rows[(size_t)(i * H + i2)] = std::abs(i - i2) > cfg.window[0] / 2 ? 1 : 0;
      const std::string rows = g.add_bools(stage + ".window.far_rows", far_rows, {H, 1, H, 1});
      // token (i, j) may not attend to (i', j') when the rows or the columns are too far apart:
      // (H, 1, H, 1) | (1, Wt, 1, Wt) -> (H, Wt, H, Wt) -> (L, L), tokens row-major as above
      const std::string both = g.op("Or", {rows, g.op("Unsqueeze", {far_cols, e.ints({0, 2})}, stage + ".window.far_cols")},
                                    stage + ".window.grid");
      window = g.op("Flatten", {both}, stage + ".window", {Attr::Int("axis", 2)});
    }
    if (!pad_cols.empty() && cfg.depths[(size_t)s] > 0) {
      // (N, Wt) -> (N, 1, Wt) -> (N, H, Wt) -> (N, 1, 1, L): key (i, j) is padding when column j is
      const std::string e3 = g.op("Expand", {g.op("Unsqueeze", {pad_cols, e.ints({1})}, stage + ".pad_keys_row"), e.ints({1, H, 1})},
                                  stage + ".pad_keys_grid");
      keys = g.op("Reshape", {e3, e.ints({0, 1, 1, -1})}, stage + ".pad_keys");
    }
    std::string local_mask = window;
    if (!window.empty() && !keys.empty()) local_mask = g.op("Or", {window, keys}, stage + ".local_mask");
    for (int64_t k = 0; k < cfg.depths[(size_t)s]; ++k) {
      const MixingBlock& b = *m.blocks[next_block];
      const std::string name = "blocks." + std::to_string(next_block++);
      t = e.mixing_block(name, b, t, b.local ? local_mask : keys, !pad_cols.empty());
    }
  }
  // norm, then the mean over the 2 rows of each column: (N, 2 Wt, C2) -> (N, 2, Wt, C2) -> (N, Wt, C2)
  const int64_t C2 = cfg.dims[2];
  t = e.layer_norm("norm", *m.norm, t);
  t = g.op("ReduceMean", {g.op("Reshape", {t, e.ints({0, H, -1, C2})}, "norm.grid")}, "pooled",
           {Attr::Ints("axes", {1}), Attr::Int("keepdims", 0)});
  t = g.op("HardSwish", {e.linear("proj", *m.proj, t)}, "proj.hardswish");  // dropout: none in eval mode
  t = e.linear("head", *m.head, t);                                         // (N, T, classes)
  return g.op("Transpose", {t}, "logits", {Attr::Ints("perm", {1, 0, 2})});  // (T, N, classes)
}

}  // namespace

std::string export_onnx(const Recognizer& model, const ModelInfo& info, const OnnxExportOptions& options) {
  onnx::GraphBuilder g;
  Emitter e(g);
  const std::string image = "image";
  g.add_input(image, onnx::ElemType::f32, {"N", 1, 32, "W"});
  std::string widths;
  if (options.widths_input) {
    widths = "widths";
    g.add_input(widths, onnx::ElemType::i64, {"N"});
  }
  std::string frames;
  if (auto* crnn = dynamic_cast<const CRNN*>(&model)) {
    OCRT_CHECK(info.arch == "crnn" || info.arch == "crnn-s", "ONNX export: the model is a CRNN but its arch is '",
               info.arch, "'");
    export_crnn(e, *crnn, image, widths);
    frames = "W/4 + 1";
  } else if (auto* svtr = dynamic_cast<const SVTRLite*>(&model)) {
    OCRT_CHECK(info.arch == "svtr-lite", "ONNX export: the model is an SVTR-lite but its arch is '", info.arch, "'");
    export_svtr(e, *svtr, image, widths);
    frames = "W/4";
  } else {
    fail("ONNX export: architecture '", info.arch, "' has no exporter (it writes ", known_archs_str(), ")");
  }
  g.add_output("logits", onnx::ElemType::f32, {"T", "N", model.num_classes()});

  Json charset = Json::array();
  for (const auto& c : info.charset) charset.push_back(c);
  OCRT_CHECK((int64_t)info.charset.size() + 1 == model.num_classes(), "ONNX export: the model has ",
             model.num_classes(), " classes but the charset ", info.charset.size(), " characters");
  onnx::ModelOptions mo;
  mo.producer_version = options.producer_version;
  mo.graph_name = "ocrt-" + info.arch;
  mo.doc_string = "ocrt " + info.arch + " text-line recogniser: image (N, 1, 32, W)" +
                  (options.widths_input ? " and widths (N)" : "") + " -> raw CTC logits (T, N, " +
                  std::to_string(model.num_classes()) + "), T = " + frames + ", class 0 the blank";
  mo.metadata = {{"format", "ocrt-onnx-1"},
                 {"ocrt_version", options.producer_version},
                 {"arch", info.arch},
                 {"config", info.config.dump()},
                 {"charset", charset.dump()},
                 {"input", info.input.dump()},
                 {"widths_input", options.widths_input ? "true" : "false"},
                 {"logits", "raw CTC logits (no softmax), time first: (T, N, C), T = " + frames},
                 {"blank", "0"}};
  if (info.training.is_object() && info.training.size() > 0) mo.metadata.emplace_back("training", info.training.dump());
  return g.model(mo);
}

}  // namespace ocrt::nn
