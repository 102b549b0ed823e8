// Attention with torch.nn.MultiheadAttention's semantics, composed from matmul, softmax,
// masking and dropout (so it runs, and differentiates, on every device that has those).
//
// Masks follow PyTorch: a uint8 (boolean) mask marks with nonzero the positions that may NOT be
// attended; a float mask is added to the attention scores (-inf forbids). Unlike PyTorch, a
// query whose every key is forbidden does not produce NaN: its attention weights are all 0, so
// its attention output is 0 (before the output projection). The gradient is defined there too.
#pragma once
#include "runtime/rng.h"
#include "runtime/tensor.h"

namespace ocrt {

struct AttentionResult {
  Tensor output;   // (..., L, Ev) or, for multi-head, (L, N, E) / (N, L, E) with batch_first
  Tensor weights;  // attention probabilities (after masking, before dropout); multi-head: (N, L, S)
                   // averaged over heads, or (N, heads, L, S) when not averaged
};

// softmax(q k^T / sqrt(E) + mask) v for q (..., L, E), k (..., S, E), v (..., S, Ev); the batch
// dims broadcast, and attn_mask broadcasts to (..., L, S). Dropout (probability dropout_p, only
// when training) applies to the weights and draws from gen (required when it is active).
AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const Tensor& attn_mask = Tensor(), double dropout_p = 0,
                                             bool training = false, Generator* gen = nullptr);

struct MultiheadAttentionOptions {
  int64_t num_heads = 1;
  double dropout = 0;           // on the attention weights, in training mode only
  bool training = false;
  bool batch_first = false;     // (N, L, E) instead of (L, N, E)
  bool average_weights = true;  // return weights averaged over heads
};

// torch.nn.functional.multi_head_attention_forward with one packed projection:
// in_proj_weight (3E, E) = [W_q; W_k; W_v], in_proj_bias (3E) or undefined, out_proj_weight (E, E),
// out_proj_bias (E) or undefined. query (L, N, E), key and value (S, N, E) (or batch first).
// attn_mask (L, S) or (N*heads, L, S); key_padding_mask (N, S), uint8, nonzero = padding.
AttentionResult multi_head_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& in_proj_weight, const Tensor& in_proj_bias,
                                     const Tensor& out_proj_weight, const Tensor& out_proj_bias,
                                     const MultiheadAttentionOptions& opt, const Tensor& attn_mask = Tensor(),
                                     const Tensor& key_padding_mask = Tensor(), Generator* gen = nullptr);

// SVTR's local mixing mask for an H x W grid of tokens (row-major): token (i, j) may attend to
// (i', j') only when |i - i'| <= window_h / 2 and |j - j'| <= window_w / 2. Returns (H*W, H*W)
// uint8 with 1 where attention is forbidden (attn_mask convention). window sizes are odd.
Tensor local_attention_mask(int64_t H, int64_t W, int64_t window_h = 7, int64_t window_w = 11,
                            Device device = Device::cpu());

// Self-attention of the tokens of an H x W grid (row-major, L = H*W), each query attending to
// the keys of the window_h x window_w tokens around it (odd sizes, clipped to the grid; a window
// of at least 2H - 1 x 2W - 1 is plain self-attention), in num_heads heads: for q, k, v (L, N, E)
// as the input projections make them (head h in channels [h E/heads, (h+1) E/heads)), returns
// the heads' outputs side by side (L, N, E), ready for the output projection. Scores are
// q . k / sqrt(E/heads); key_padding_mask (N, L) uint8 (nonzero = padding) or undefined; a query
// with no key allowed gets output 0. One kernel of the layer table (window_attention): the
// window's keys only, no mask tensor, the weights made and applied in one pass
// (ops/cpu/attention.cpp). Differentiable in q, k and v.
Tensor window_self_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t H, int64_t W,
                             int64_t window_h, int64_t window_w, int64_t num_heads,
                             const Tensor& key_padding_mask = Tensor());

// window_self_attention on q, k and v side by side in each row of qkv (L, N, 3E), as one linear
// layer of 3E outputs makes them (multi_head_attention's in_proj_weight whole): the kernels read
// the thirds in place, and the gradient is one (L, N, 3E) tensor, so that the projection and its
// gradients are one product each instead of three. Returns (L, N, E).
Tensor window_self_attention_qkv(const Tensor& qkv, int64_t H, int64_t W, int64_t window_h, int64_t window_w,
                                 int64_t num_heads, const Tensor& key_padding_mask = Tensor());

// Self-attention over an H x W grid of tokens in which each token attends only within the
// window of local_attention_mask (SVTR's local mixing), a band of columns at a time: the queries
// of columns [a, a + chunk) against the keys of columns [a - window_w/2, a + chunk + window_w/2),
// so that time and memory grow linearly with W, where the full (L, L) mask makes them grow with
// its square. x (L = H*W, N, E), row-major over the grid; key_padding_mask (N, L) uint8 (nonzero
// = padding) or undefined; the projections as multi_head_attention's. No dropout on the weights.
// The result is multi_head_attention(x, x, x, ..., local_attention_mask(H, W, window_h,
// window_w), key_padding_mask).output up to float rounding: every query sees the same keys (the
// forbidden ones, left out here, add exact zeros there). A window of at least 2H - 1 x 2W - 1
// is plain self-attention. chunk >= 1: bands of `chunk` columns, views and concatenations of
// ops every device has (16: 8 and 16 measured alike, 32 slower, bench/results/svtr-width.md).
// chunk 0 (the default) chooses: on the CPU, window_self_attention's kernel; elsewhere bands of
// 16, or multi_head_attention without a mask when the window covers the grid.
Tensor local_multi_head_attention(const Tensor& x, int64_t H, int64_t W, int64_t window_h, int64_t window_w,
                                  const Tensor& in_proj_weight, const Tensor& in_proj_bias,
                                  const Tensor& out_proj_weight, const Tensor& out_proj_bias, int64_t num_heads,
                                  const Tensor& key_padding_mask = Tensor(), int64_t chunk = 0);

}  // namespace ocrt
