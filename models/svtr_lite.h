// SVTR-lite: a transformer text-line recogniser after SVTR-Tiny (Du et al., "SVTR: Scene Text
// Recognition with a Single Visual Model", IJCAI 2022), adapted to lines of any width. The
// PyTorch reference module is tools/reference/svtr_lite.py; its state_dict loads here unchanged,
// and the reverse. docs/models.md has the tensor names and shapes.
//
//   x (N, 1, 32, W) -> patch_embed: conv 3x3/2 + BN + GELU, conv 3x3/2 + BN + GELU -> (N, C0, 8, W/4)
//     -> tokens (L = 8 * W/4, N, C0) + fixed 2-D sine/cosine positions
//     -> blocks of stage 0 on the 8 x W/4 grid, merges.0 (conv 3x3 stride (2,1) + LayerNorm)
//     -> blocks of stage 1 on 4 x W/4,          merges.1
//     -> blocks of stage 2 on 2 x W/4 -> norm -> mean over the 2 rows -> (T = W/4, N, C2)
//     -> proj (Linear, no bias) -> hardswish -> dropout -> head (Linear) -> (T, N, num_classes)
//
// A mixing block is pre-LayerNorm: x += attn(norm1(x)); x += mlp(norm2(x)), mlp = fc1, GELU,
// fc2 (ratio 4). A "local" block attends only within a window (7 rows x 11 columns) around each
// token; a "global" one attends to the whole line.
//
// Padding: with per-line widths, no token attends to a key in a padding column, and padding
// columns are zeroed before each merging conv (so the conv at a line's right edge sees the same
// zeros as the conv's own padding when the line is alone); the stem's stride-2 convs never reach
// past a line's last column when the width is a multiple of 4; norms, MLPs and the row pooling
// work per token or per column. So a line's logits are the same alone and in any batch (in eval
// mode; in training mode the stem's BatchNorm statistics are the batch's, as for CRNN).
#pragma once
#include <array>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "models/layers.h"
#include "models/recognizer.h"
#include "runtime/json.h"

namespace ocrt::nn {

struct SVTRLiteConfig {
  std::array<int64_t, 3> dims{64, 128, 256};  // token channels of the three stages (dims[0] % 4 == 0)
  std::array<int64_t, 3> depths{3, 6, 3};     // blocks per stage
  std::array<int64_t, 3> heads{2, 4, 8};      // attention heads per stage (dims[s] % heads[s] == 0)
  // "local" or "global" for each block, depths[0] + depths[1] + depths[2] entries.
  std::vector<std::string> mixer = {"local", "local", "local", "local", "local", "local",
                                    "global", "global", "global", "global", "global", "global"};
  std::array<int64_t, 2> window{7, 11};  // local window: rows x columns of tokens, odd
  int64_t mlp_ratio = 4;
  int64_t out_dim = 192;   // the combining projection's width
  double dropout = 0.1;    // after the combining projection, in training mode
  int64_t num_classes = 96;

  // "svtr-lite" (SVTR-Tiny's sizes) for a charset of num_classes - 1 characters.
  static SVTRLiteConfig preset(const std::string& name, int64_t num_classes);
  Json to_json() const;
  static SVTRLiteConfig from_json(const Json& j);  // throws naming the missing or bad field
  void validate() const;                           // throws naming the bad field
};

// fc1 (dim -> hidden), GELU, fc2 (hidden -> dim).
class Mlp : public Module {
 public:
  Mlp(int64_t dim, int64_t hidden, Generator& gen);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Linear> fc1, fc2;

 protected:
  const char* type_name() const override { return "Mlp"; }
};

// One mixing block: pre-LayerNorm multi-head self-attention, then a pre-LayerNorm MLP.
class MixingBlock : public Module {
 public:
  MixingBlock(int64_t dim, int64_t heads, int64_t mlp_ratio, bool local, Generator& gen);
  // x (L = H*W, N, C), row-major over an H x W grid of tokens; key_padding_mask (N, L) uint8
  // (1 = padding) or undefined. A local block attends within `window` (rows x columns, odd), so
  // its cost grows linearly with W; a global one to every token of its line. Both through
  // local_multi_head_attention (ops/attention.h): the window_attention kernel on the CPU; on
  // other devices bands of columns (local) or multi_head_attention (global).
  Tensor forward(const Tensor& x, int64_t H, int64_t W, const std::array<int64_t, 2>& window,
                 const Tensor& key_padding_mask);
  using Module::forward;
  const bool local;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<MultiheadAttention> attn;
  std::shared_ptr<Mlp> mlp;

 protected:
  const char* type_name() const override { return "MixingBlock"; }
};

// Halves the token grid's height: Conv2d 3x3, stride (2, 1), padding 1, then LayerNorm.
class MergeLayer : public Module {
 public:
  MergeLayer(int64_t in_dim, int64_t out_dim, Generator& gen);
  // grid (N, C, H, W) -> tokens (H/2 * W, N, C').
  Tensor forward(const Tensor& grid) override;
  std::shared_ptr<Conv2d> conv;
  std::shared_ptr<LayerNorm> norm;

 protected:
  const char* type_name() const override { return "MergeLayer"; }
};

class SVTRLite : public Recognizer {
 public:
  SVTRLite(const SVTRLiteConfig& config, Generator& gen);
  // x (N, 1, 32, W), W a multiple of 4 -> logits (T = W/4, N, num_classes). widths: each line's
  // true width (a multiple of 4, at most W); padding past it does not change the line's result.
  Tensor forward(const Tensor& x, const std::vector<int64_t>& widths) override;
  using Recognizer::forward;
  // One frame per token column: W / 4.
  static int64_t frames(int64_t width) { return width / 4; }
  int64_t frames_for_width(int64_t width) const override { return frames(width); }
  // The stem's two stride-2 3x3 convs centre token column t on input column 4t.
  double frame_center(int64_t t) const override { return 4.0 * (double)t; }
  // No column past a line's width reaches its logits (see "Padding" above).
  int64_t right_context() const override { return 0; }
  int64_t num_classes() const override { return config.num_classes; }
  int64_t first_channels() const override { return config.dims[0]; }
  Json config_json() const override { return config.to_json(); }

  // The fixed position table for an H x W token grid: (H*W, C) float64 on the CPU, token
  // (i, j) at row i*W + j; q = C/4 frequencies omega_k = 10000^(-k/q), channels
  // 0.1 * [sin(j omega), cos(j omega), sin(i omega), cos(i omega)].
  static Tensor position_table(int64_t H, int64_t W, int64_t C);

  const SVTRLiteConfig config;
  std::shared_ptr<Sequential> patch_embed;
  std::shared_ptr<ModuleList> blocks_list, merges_list;
  std::vector<std::shared_ptr<MixingBlock>> blocks;
  std::vector<std::shared_ptr<MergeLayer>> merges;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Linear> proj, head;
  std::shared_ptr<Dropout> drop;

 protected:
  const char* type_name() const override { return "SVTRLite"; }

 private:
  // Per-shape tables, kept between calls (batches of one width repeat).
  struct Cached {
    int64_t H = -1, W = -1;
    DType dtype = DType::f32;
    Device device = Device::cpu();
    Tensor t;
  };
  // Threads that run one model at once (the predictor's CPU workers share one) read and renew
  // the cached table under the lock, each keeping its own handle to the table it got.
  Tensor positions(int64_t H, int64_t W, DType dtype, Device device);
  Cached positions_;
  std::mutex positions_mu_;
  std::shared_ptr<BatchNorm2d> stem_bn_;  // patch_embed.1: its num_batches_tracked keys dropout
  uint64_t dropout_seed_ = 0;
};

}  // namespace ocrt::nn
