// SVTR-lite: the layer plan of svtr_lite.h, in code.
#include "models/svtr_lite.h"

#include <cmath>

#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace ocrt::nn {

namespace {

constexpr double kLayerNormEps = 1e-6;  // SVTR's LayerNorm epsilon
// The position table's amplitude: small beside the stem's features (BatchNorm + GELU, spread
// about 0.6), as SVTR's learned table starts small. At 1.0 the positions swamp the content and
// training leaves CTC's blank-only plateau later (the overfit test's model read 2 of its 4
// lines after 300 steps; at 0.1 all 4 after about 190).
constexpr double kPositionScale = 0.1;

}  // namespace

// ---------------------------------------------------------------- config

SVTRLiteConfig SVTRLiteConfig::preset(const std::string& name, int64_t num_classes) {
  OCRT_CHECK(name == "svtr-lite", "unknown SVTR-lite preset '", name, "' (expected svtr-lite)");
  SVTRLiteConfig c;  // the defaults are SVTR-Tiny's sizes
  c.num_classes = num_classes;
  c.validate();
  return c;
}

void SVTRLiteConfig::validate() const {
  const char* what = "SVTR-lite config";
  OCRT_CHECK(num_classes >= 2, what, ": num_classes must be >= 2 (blank + at least one character), got ", num_classes);
  OCRT_CHECK(dims[0] >= 4 && dims[0] % 4 == 0, what, ": dims[0] must be a positive multiple of 4 (the 2-D position "
             "table), got ", dims[0]);
  int64_t blocks = 0;
  for (int s = 0; s < 3; ++s) {
    OCRT_CHECK(dims[s] >= 1 && heads[s] >= 1 && dims[s] % heads[s] == 0, what, ": stage ", s, ": dims ", dims[s],
               " must be a positive multiple of heads ", heads[s]);
    OCRT_CHECK(depths[s] >= 0, what, ": depths must be >= 0, got ", depths[s], " for stage ", s);
    blocks += depths[s];
  }
  OCRT_CHECK((int64_t)mixer.size() == blocks, what, ": 'mixer' needs one entry per block (", blocks, "), got ",
             mixer.size());
  for (const auto& m : mixer)
    OCRT_CHECK(m == "local" || m == "global", what, ": mixer entries are 'local' or 'global', got '", m, "'");
  OCRT_CHECK(window[0] >= 1 && window[1] >= 1 && window[0] % 2 == 1 && window[1] % 2 == 1, what,
             ": window sizes must be odd and >= 1, got ", window[0], "x", window[1]);
  OCRT_CHECK(mlp_ratio >= 1 && out_dim >= 1, what, ": mlp_ratio and out_dim must be >= 1");
  OCRT_CHECK(std::isfinite(dropout) && dropout >= 0 && dropout < 1, what, ": dropout must be in [0, 1), got ", dropout);
}

Json SVTRLiteConfig::to_json() const {
  auto ints = [](const auto& v) {
    Json a = Json::array();
    for (int64_t x : v) a.push_back(x);
    return a;
  };
  Json mix = Json::array();
  for (const auto& m : mixer) mix.push_back(m);
  Json j = Json::object();
  j.set("dims", ints(dims));
  j.set("depths", ints(depths));
  j.set("heads", ints(heads));
  j.set("mixer", mix);
  j.set("window", ints(window));
  j.set("mlp_ratio", mlp_ratio);
  j.set("out_dim", out_dim);
  j.set("dropout", dropout);
  j.set("num_classes", num_classes);
  return j;
}

SVTRLiteConfig SVTRLiteConfig::from_json(const Json& j) {
  const char* what = "SVTR-lite config";
  OCRT_CHECK(j.is_object(), what, ": expected a JSON object");
  auto field = [&](const char* key) -> const Json& {
    const Json* v = j.find(key);
    OCRT_CHECK(v != nullptr, what, ": missing '", key, "'");
    return *v;
  };
  auto ints = [&](const char* key, auto& out) {
    const Json& a = field(key);
    OCRT_CHECK(a.is_array() && a.size() == out.size(), what, ": '", key, "' must be an array of ", out.size(),
               " integers");
    for (size_t i = 0; i < out.size(); ++i) {
      OCRT_CHECK(a[i].is_int(), what, ": '", key, "' must be an array of ", out.size(), " integers");
      out[i] = a[i].as_int();
    }
  };
  SVTRLiteConfig c;
  ints("dims", c.dims);
  ints("depths", c.depths);
  ints("heads", c.heads);
  ints("window", c.window);
  const Json& mix = field("mixer");
  OCRT_CHECK(mix.is_array(), what, ": 'mixer' must be an array of \"local\" / \"global\"");
  c.mixer.clear();
  for (size_t i = 0; i < mix.size(); ++i) {
    OCRT_CHECK(mix[i].is_string(), what, ": 'mixer' must be an array of \"local\" / \"global\"");
    c.mixer.push_back(mix[i].as_string());
  }
  for (const char* key : {"mlp_ratio", "out_dim", "num_classes"})
    OCRT_CHECK(field(key).is_int(), what, ": '", key, "' must be an integer");
  c.mlp_ratio = field("mlp_ratio").as_int();
  c.out_dim = field("out_dim").as_int();
  c.num_classes = field("num_classes").as_int();
  OCRT_CHECK(field("dropout").is_number(), what, ": 'dropout' must be a number");
  c.dropout = field("dropout").as_number();
  c.validate();
  return c;
}

// ---------------------------------------------------------------- blocks

Mlp::Mlp(int64_t dim, int64_t hidden, Generator& gen) {
  fc1 = register_module("fc1", std::make_shared<Linear>(dim, hidden, true, gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(hidden, dim, true, gen));
}

Tensor Mlp::forward(const Tensor& x) { return fc2->forward(gelu(fc1->forward(x))); }

MixingBlock::MixingBlock(int64_t dim, int64_t heads, int64_t mlp_ratio, bool local, Generator& gen) : local(local) {
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{dim}, kLayerNormEps));
  attn = register_module("attn", std::make_shared<MultiheadAttention>(dim, heads, gen));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{dim}, kLayerNormEps));
  mlp = register_module("mlp", std::make_shared<Mlp>(dim, dim * mlp_ratio, gen));
}

Tensor MixingBlock::forward(const Tensor& x, int64_t H, int64_t W, const std::array<int64_t, 2>& window,
                            const Tensor& key_padding_mask) {
  const Tensor h = norm1->forward(x);
  // A global block's window is the whole grid (no dropout on the weights either way).
  const int64_t wh = local ? window[0] : 2 * H - 1, ww = local ? window[1] : 2 * W - 1;
  const Tensor a = local_multi_head_attention(h, H, W, wh, ww, attn->in_proj_weight, attn->in_proj_bias,
                                              attn->out_proj->weight, attn->out_proj->bias, attn->num_heads,
                                              key_padding_mask);
  const Tensor y = x + a;
  return y + mlp->forward(norm2->forward(y));
}

MergeLayer::MergeLayer(int64_t in_dim, int64_t out_dim, Generator& gen) {
  Conv2dOptions o;
  o.stride = {2, 1};
  o.padding = {1, 1};
  conv = register_module("conv", std::make_shared<Conv2d>(in_dim, out_dim, Pair{3, 3}, gen, o, true));
  norm = register_module("norm", std::make_shared<LayerNorm>(Shape{out_dim}, kLayerNormEps));
}

Tensor MergeLayer::forward(const Tensor& grid) {
  const Tensor g = conv->forward(grid);  // (N, C', H/2, W)
  const int64_t N = g.size(0), C = g.size(1), L = g.size(2) * g.size(3);
  return norm->forward(g.reshape({N, C, L}).permute({2, 0, 1}).contiguous());  // (L, N, C')
}

// ---------------------------------------------------------------- the model

SVTRLite::SVTRLite(const SVTRLiteConfig& cfg, Generator& gen) : config(cfg) {
  cfg.validate();
  const auto& d = cfg.dims;
  Conv2dOptions s2;
  s2.stride = {2, 2};
  s2.padding = {1, 1};
  patch_embed = register_module("patch_embed", std::make_shared<Sequential>());
  patch_embed->add(std::make_shared<Conv2d>(1, d[0] / 2, Pair{3, 3}, gen, s2, false));     // 0
  stem_bn_ = patch_embed->add(std::make_shared<BatchNorm2d>(d[0] / 2));                     // 1
  patch_embed->add(std::make_shared<GELU>());                                                // 2
  patch_embed->add(std::make_shared<Conv2d>(d[0] / 2, d[0], Pair{3, 3}, gen, s2, false));  // 3
  patch_embed->add(std::make_shared<BatchNorm2d>(d[0]));                                    // 4
  patch_embed->add(std::make_shared<GELU>());                                                // 5
  blocks_list = register_module("blocks", std::make_shared<ModuleList>());
  for (int s = 0, i = 0; s < 3; ++s)
    for (int64_t k = 0; k < cfg.depths[s]; ++k, ++i)
      blocks.push_back(blocks_list->add(
          std::make_shared<MixingBlock>(d[s], cfg.heads[s], cfg.mlp_ratio, cfg.mixer[(size_t)i] == "local", gen)));
  merges_list = register_module("merges", std::make_shared<ModuleList>());
  for (int s = 1; s < 3; ++s) merges.push_back(merges_list->add(std::make_shared<MergeLayer>(d[s - 1], d[s], gen)));
  norm = register_module("norm", std::make_shared<LayerNorm>(Shape{d[2]}, kLayerNormEps));
  proj = register_module("proj", std::make_shared<Linear>(d[2], cfg.out_dim, false, gen));
  dropout_seed_ = gen.next_u64();
  drop = register_module("drop", std::make_shared<Dropout>(cfg.dropout, dropout_seed_));
  head = register_module("head", std::make_shared<Linear>(cfg.out_dim, cfg.num_classes, true, gen));
}

Tensor SVTRLite::position_table(int64_t H, int64_t W, int64_t C) {
  OCRT_CHECK(H >= 1 && W >= 1 && C >= 4 && C % 4 == 0, "SVTR-lite position table: bad size ", H, "x", W, "x", C);
  const int64_t q = C / 4;
  std::vector<double> omega((size_t)q), t((size_t)(H * W * C));
  for (int64_t k = 0; k < q; ++k) omega[(size_t)k] = std::pow(10000.0, -(double)k / (double)q);
  for (int64_t i = 0; i < H; ++i)
    for (int64_t j = 0; j < W; ++j) {
      double* row = &t[(size_t)((i * W + j) * C)];
      for (int64_t k = 0; k < q; ++k) {
        const double a = (double)j * omega[(size_t)k], b = (double)i * omega[(size_t)k];
        row[k] = kPositionScale * std::sin(a);
        row[q + k] = kPositionScale * std::cos(a);
        row[2 * q + k] = kPositionScale * std::sin(b);
        row[3 * q + k] = kPositionScale * std::cos(b);
      }
    }
  return Tensor::from_vector(t, {H * W, C});
}

Tensor SVTRLite::positions(int64_t H, int64_t W, DType dtype, Device device) {
  std::lock_guard<std::mutex> lock(positions_mu_);
  Cached& c = positions_;
  if (c.H != H || c.W != W || c.dtype != dtype || !(c.device == device) || !c.t.defined()) {
    c.t = position_table(H, W, config.dims[0]).to(dtype).to(device).reshape({H * W, 1, config.dims[0]});
    c.H = H, c.W = W, c.dtype = dtype, c.device = device;
  }
  return c.t;
}

Tensor SVTRLite::forward(const Tensor& x, const std::vector<int64_t>& widths) {
  OCRT_CHECK(x.defined() && x.dim() == 4 && x.size(1) == 1 && x.size(2) == 32,
             "SVTR-lite: expected input (N, 1, 32, W), got ", x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const int64_t N = x.size(0), W = x.size(3), Wt = W / 4;
  OCRT_CHECK(W >= 4 && W % 4 == 0, "SVTR-lite: the input width must be a positive multiple of 4, got ", W);
  const Device device = x.device();

  // Padding columns of the token grid, when some line is narrower than the batch.
  Tensor pad_cols;  // (N, Wt) uint8, 1 = padding
  if (!widths.empty()) {
    OCRT_CHECK((int64_t)widths.size() == N, "SVTR-lite: expected ", N, " widths, got ", widths.size());
    std::vector<uint8_t> pad((size_t)(N * Wt), 0);
    bool any = false;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t w = widths[(size_t)n];
      OCRT_CHECK(w >= 4 && w <= W && w % 4 == 0, "SVTR-lite: width ", w, " of line ", n, " must be a multiple of 4 in [4, ",
                 W, "]");
      for (int64_t j = w / 4; j < Wt; ++j) pad[(size_t)(n * Wt + j)] = 1, any = true;
    }
    if (any) pad_cols = Tensor::from_vector(pad, {N, Wt}, device);
  }

  // Dropout draws from a stream keyed by the number of training steps taken so far (the stem's
  // BatchNorm counts them, and checkpoints keep that count), so a resumed run repeats the masks
  // an uninterrupted one would have drawn. The count is an optional buffer: weights loaded
  // from a file without it (a PyTorch export that dropped it) keep the model's own count, 0 in a
  // freshly built model, so such a run draws the masks a run from scratch would.
  if (is_training() && config.dropout > 0) {
    const auto count = (uint64_t)stem_bn_->num_batches_tracked.item();
    drop->generator().set_state(dropout_seed_, count);
  }

  const Tensor f = patch_embed->forward(x);  // (N, C0, 8, Wt)
  int64_t H = f.size(2), C = f.size(1);
  // Tokens, row-major over the grid: (L = H*Wt, N, C).
  Tensor t = f.permute({2, 3, 0, 1}).reshape({H * Wt, N, C}) + positions(H, Wt, f.dtype(), device);
  size_t next_block = 0;
  for (int s = 0; s < 3; ++s) {
    if (s > 0) {
      Tensor grid = t.reshape({H, Wt, N, C}).permute({2, 3, 0, 1});  // (N, C, H, Wt)
      if (pad_cols.defined()) grid = masked_fill(grid, pad_cols.reshape({N, 1, 1, Wt}), 0.0);
      t = merges[(size_t)s - 1]->forward(grid.contiguous());
      H = H / 2;
      C = t.size(2);
    }
    Tensor key_padding;  // (N, L)
    if (pad_cols.defined()) key_padding = pad_cols.reshape({N, 1, Wt}).expand({N, H, Wt}).reshape({N, H * Wt});
    for (int64_t k = 0; k < config.depths[s]; ++k) {
      MixingBlock& b = *blocks[next_block++];
      t = b.forward(t, H, Wt, config.window, key_padding);
    }
  }
  t = mean(norm->forward(t).reshape({H, Wt, N, C}), {0});  // (T, N, C2): the rows pooled per column
  t = drop->forward(hardswish(proj->forward(t)));
  return head->forward(t);  // (T, N, classes)
}

}  // namespace ocrt::nn
