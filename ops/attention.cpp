// Attention, composed from differentiable primitives (see attention.h for the conventions).
//
//   scores  = q k^T / sqrt(E)          (..., L, S)
//   scores += mask (float), or scores = -inf where mask (uint8)
//   weights = softmax(scores, -1), with rows that allow no key set to 0 instead of NaN
//   output  = dropout(weights) v
// Multi-head attention projects q, k, v with one packed matrix, splits E into heads of E/h,
// attends per head (heads folded into the batch, as PyTorch does: (N*h, L, E/h)), joins the
// heads back and applies the output projection.
#include "ops/attention.h"

#include <algorithm>
#include <cmath>

#include "ops/backend.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/window_attention.h"
#include "runtime/autograd.h"

namespace ocrt {

namespace {

// Rows (..., L, 1) in which every score is -inf (no key allowed): 1, else 0, as uint8.
Tensor dead_rows(const Tensor& scores) {
  NoGradGuard no_grad;
  return eq(amax(scores.detach(), {-1}, true), -INFINITY);
}

}  // namespace

AttentionResult scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                             double dropout_p, bool training, Generator* gen) {
  const char* op = "scaled_dot_product_attention";
  OCRT_CHECK(q.defined() && k.defined() && v.defined(), op, ": q, k and v must be defined");
  OCRT_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, op, ": q, k, v need at least 2 dims (L, E), got ",
             shape_str(q.shape()), ", ", shape_str(k.shape()), ", ", shape_str(v.shape()));
  OCRT_CHECK(q.size(-1) == k.size(-1), op, ": q ", shape_str(q.shape()), " and k ", shape_str(k.shape()),
             " differ in the embedding dim");
  OCRT_CHECK(k.size(-2) == v.size(-2), op, ": k ", shape_str(k.shape()), " and v ", shape_str(v.shape()),
             " differ in the number of keys");
  OCRT_CHECK(dropout_p >= 0 && dropout_p < 1, op, ": dropout must be in [0, 1), got ", dropout_p);
  const bool drop = training && dropout_p > 0;
  OCRT_CHECK(!drop || gen != nullptr, op, ": attention dropout in training mode needs a Generator");

  Tensor scores = mul(matmul(q, k.transpose(-1, -2)), 1.0 / std::sqrt((double)q.size(-1)));
  if (attn_mask.defined()) {
    if (attn_mask.dtype() == DType::u8) {
      scores = masked_fill(scores, attn_mask, -INFINITY);
    } else {
      OCRT_CHECK(attn_mask.dtype() == scores.dtype(), op, ": a float attn_mask must be ", dtype_name(scores.dtype()),
                 " like q, got ", dtype_name(attn_mask.dtype()));
      scores = add(scores, attn_mask);
    }
  }
  Tensor dead;
  if (attn_mask.defined()) {
    dead = dead_rows(scores);
    // The common case has no dead rows, and on the CPU it is cheaper to look than to mask twice.
    // On a GPU looking would mean waiting for the device (a host read) in every attention call,
    // so there the two masked_fills always run (they change nothing when no row is dead).
    if (scores.device().is_cpu()) {
      NoGradGuard no_grad;
      if (amax(dead.to(DType::f32), {}).item() == 0) dead = Tensor();
    }
  }
  if (dead.defined()) scores = masked_fill(scores, dead, 0.0);  // finite, so softmax stays finite
  Tensor weights = softmax(scores, -1);
  if (dead.defined()) weights = masked_fill(weights, dead, 0.0);
  const Tensor attended = drop ? dropout(weights, dropout_p, true, *gen) : weights;
  return {matmul(attended, v), weights};
}

namespace {

// Part `part` (0: q, 1: k, 2: v) of the packed input projection applied to x (..., E).
Tensor in_projection(const Tensor& x, const Tensor& in_proj_weight, const Tensor& in_proj_bias, int64_t part,
                     int64_t E) {
  const Tensor w = in_proj_weight.narrow(0, part * E, E);
  const Tensor b = in_proj_bias.defined() ? in_proj_bias.narrow(0, part * E, E) : Tensor();
  return linear(x, w, b);
}

// A key padding mask (N, S) as a mask of every head's scores, (N*h, 1, S).
Tensor per_head(const Tensor& key_padding, int64_t N, int64_t h, int64_t S) {
  return key_padding.reshape({N, 1, 1, S}).expand({N, h, 1, S}).reshape({N * h, 1, S});
}

}  // namespace

AttentionResult multi_head_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& in_proj_weight, const Tensor& in_proj_bias,
                                     const Tensor& out_proj_weight, const Tensor& out_proj_bias,
                                     const MultiheadAttentionOptions& opt, const Tensor& attn_mask,
                                     const Tensor& key_padding_mask, Generator* gen) {
  const char* op = "multi_head_attention";
  OCRT_CHECK(query.defined() && key.defined() && value.defined(), op, ": query, key and value must be defined");
  OCRT_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3, op,
             ": expected 3-D query, key, value, got ", shape_str(query.shape()), ", ", shape_str(key.shape()), ", ",
             shape_str(value.shape()));
  // Work in (L, N, E).
  const Tensor q_in = opt.batch_first ? query.transpose(0, 1) : query;
  const Tensor k_in = opt.batch_first ? key.transpose(0, 1) : key;
  const Tensor v_in = opt.batch_first ? value.transpose(0, 1) : value;
  const int64_t L = q_in.size(0), N = q_in.size(1), E = q_in.size(2), S = k_in.size(0), h = opt.num_heads;
  OCRT_CHECK(h >= 1 && E % h == 0, op, ": embed dim ", E, " is not divisible by num_heads ", h);
  OCRT_CHECK(k_in.size(1) == N && v_in.size(1) == N && k_in.size(2) == E && v_in.size(2) == E && v_in.size(0) == S, op,
             ": key ", shape_str(key.shape()), " and value ", shape_str(value.shape()), " do not match query ",
             shape_str(query.shape()));
  OCRT_CHECK(in_proj_weight.defined() && in_proj_weight.shape() == Shape({3 * E, E}), op,
             ": in_proj_weight must have shape ", shape_str({3 * E, E}));
  OCRT_CHECK(!in_proj_bias.defined() || in_proj_bias.shape() == Shape({3 * E}), op, ": in_proj_bias must have shape ",
             shape_str({3 * E}));
  OCRT_CHECK(out_proj_weight.defined() && out_proj_weight.shape() == Shape({E, E}), op,
             ": out_proj_weight must have shape ", shape_str({E, E}));
  OCRT_CHECK(!out_proj_bias.defined() || out_proj_bias.shape() == Shape({E}), op, ": out_proj_bias must have shape ",
             shape_str({E}));
  const int64_t hd = E / h;

  auto project = [&](const Tensor& x, int64_t part, int64_t len) {
    // (len, N, E) -> (len, N*h, hd) -> (N*h, len, hd)
    return in_projection(x, in_proj_weight, in_proj_bias, part, E).reshape({len, N * h, hd}).transpose(0, 1);
  };
  const Tensor q = project(q_in, 0, L), k = project(k_in, 1, S), v = project(v_in, 2, S);

  // One mask (N*h or 1, L, S), uint8 or float, from attn_mask and key_padding_mask.
  Tensor mask;
  if (attn_mask.defined()) {
    const bool ok = (attn_mask.dim() == 2 && attn_mask.shape() == Shape({L, S})) ||
                    (attn_mask.dim() == 3 && attn_mask.shape() == Shape({N * h, L, S}));
    OCRT_CHECK(ok, op, ": attn_mask must have shape ", shape_str({L, S}), " or ", shape_str({N * h, L, S}), ", got ",
               shape_str(attn_mask.shape()));
    mask = attn_mask.dim() == 2 ? attn_mask.unsqueeze(0) : attn_mask;
  }
  if (key_padding_mask.defined()) {
    OCRT_CHECK(key_padding_mask.shape() == Shape({N, S}) && key_padding_mask.dtype() == DType::u8, op,
               ": key_padding_mask must be uint8 of shape ", shape_str({N, S}), ", got ",
               dtype_name(key_padding_mask.dtype()), " ", shape_str(key_padding_mask.shape()));
    // (N, S) -> (N, h, 1, S) -> (N*h, 1, S)
    const Tensor kp = per_head(key_padding_mask, N, h, S);
    if (!mask.defined()) {
      mask = kp;
    } else if (mask.dtype() == DType::u8) {
      mask = maximum(mask, kp);
    } else {
      mask = masked_fill(mask.expand({N * h, L, S}), kp, -INFINITY);
    }
  }
  AttentionResult r = scaled_dot_product_attention(q, k, v, mask, opt.dropout, opt.training, gen);
  // (N*h, L, hd) -> (L, N*h, hd) -> (L, N, E)
  Tensor out = linear(r.output.transpose(0, 1).reshape({L, N, E}), out_proj_weight, out_proj_bias);
  if (opt.batch_first) out = out.transpose(0, 1);
  Tensor weights = r.weights.reshape({N, h, L, S});
  if (opt.average_weights) weights = mean(weights, {1});
  return {out, weights};
}

Tensor local_attention_mask(int64_t H, int64_t W, int64_t window_h, int64_t window_w, Device device) {
  OCRT_CHECK(H >= 1 && W >= 1, "local_attention_mask: grid must be at least 1x1, got ", H, "x", W);
  OCRT_CHECK(window_h >= 1 && window_w >= 1 && window_h % 2 == 1 && window_w % 2 == 1,
             "local_attention_mask: window sizes must be odd and >= 1, got ", window_h, "x", window_w);
  const int64_t rh = window_h / 2, rw = window_w / 2, n = H * W;
  std::vector<uint8_t> m((size_t)(n * n));
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < n; ++b) {
      const int64_t di = a / W - b / W, dj = a % W - b % W;
      m[(size_t)(a * n + b)] = (std::abs(di) > rh || std::abs(dj) > rw) ? 1 : 0;
    }
  return Tensor::from_vector(m, {n, n}, device);
}

namespace {

// The local window's mask between the queries of an H x qw block of columns starting at column
// q0 and the keys of an H x kw block starting at k0 (1 = forbidden), uint8 (H*qw, H*kw).
Tensor band_mask(int64_t H, int64_t q0, int64_t qw, int64_t k0, int64_t kw, int64_t rh, int64_t rw, Device device) {
  const int64_t lq = H * qw, lk = H * kw;
  std::vector<uint8_t> m((size_t)(lq * lk));
  for (int64_t a = 0; a < lq; ++a)
    for (int64_t b = 0; b < lk; ++b) {
      const int64_t di = a / qw - b / kw, dj = (q0 + a % qw) - (k0 + b % kw);
      m[(size_t)(a * lk + b)] = (std::abs(di) > rh || std::abs(dj) > rw) ? 1 : 0;
    }
  return Tensor::from_vector(m, {lq, lk}, device);
}

}  // namespace

namespace {

// The checks and parameters window_self_attention and window_self_attention_qkv share, for q of
// (L, N, E).
WindowAttentionParams window_params(const char* op, const Tensor& q, int64_t H, int64_t W, int64_t window_h,
                                    int64_t window_w, int64_t num_heads, const Tensor& key_padding_mask) {
  OCRT_CHECK(is_floating(q.dtype()), op, ": q, k and v must be of one float dtype");
  OCRT_CHECK(H >= 1 && W >= 1 && q.size(0) == H * W, op, ": q has ", q.size(0), " tokens, not the ", H, " x ", W,
             " of its grid");
  OCRT_CHECK(window_h >= 1 && window_w >= 1 && window_h % 2 == 1 && window_w % 2 == 1, op,
             ": window sizes must be odd and >= 1, got ", window_h, "x", window_w);
  const int64_t L = q.size(0), N = q.size(1), E = q.size(2);
  OCRT_CHECK(num_heads >= 1 && E % num_heads == 0, op, ": embed dim ", E, " is not divisible by num_heads ", num_heads);
  OCRT_CHECK(!key_padding_mask.defined() ||
                 (key_padding_mask.shape() == Shape({N, L}) && key_padding_mask.dtype() == DType::u8 &&
                  key_padding_mask.device() == q.device()),
             op, ": key_padding_mask must be uint8 of shape ", shape_str({N, L}), " on ", q.device().str());
  WindowAttentionParams p;
  p.H = H;
  p.W = W;
  p.window_h = window_h;
  p.window_w = window_w;
  p.heads = num_heads;
  p.scale = 1.0 / std::sqrt((double)(E / num_heads));
  return p;
}

// The forward kernel on q, k, v (views with one set of strides, channels contiguous): the output
// (L, N, E), and the weights for the backward in probs when `keep` (else probs stays undefined).
Tensor window_forward(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& pad,
                      const WindowAttentionParams& p, bool keep, Tensor& probs) {
  const int64_t L = q.size(0), N = q.size(1), E = q.size(2);
  Tensor out = Tensor::empty({L, N, E}, q.dtype(), q.device());
  if (keep) probs = Tensor::empty({N, p.heads, L, window_slots(p.H, p.W, p.window_h, p.window_w)}, q.dtype(), q.device());
  if (out.numel() > 0) kernel(q.device(), &LayerBackend::window_attention, op)(q, k, v, pad, p, out, probs);
  return out;
}

}  // namespace

Tensor window_self_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t H, int64_t W,
                             int64_t window_h, int64_t window_w, int64_t num_heads, const Tensor& key_padding_mask) {
  const char* op = "window_self_attention";
  OCRT_CHECK(q.defined() && k.defined() && v.defined() && q.dim() == 3, op, ": expected q, k, v (L, N, E)");
  OCRT_CHECK(k.shape() == q.shape() && v.shape() == q.shape(), op, ": q ", shape_str(q.shape()), ", k ",
             shape_str(k.shape()), " and v ", shape_str(v.shape()), " must have one shape");
  OCRT_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), op, ": q, k and v must be of one float dtype");
  OCRT_CHECK(k.device() == q.device() && v.device() == q.device(), op, ": q, k and v must be on one device");
  const WindowAttentionParams p = window_params(op, q, H, W, window_h, window_w, num_heads, key_padding_mask);
  const Tensor qc = q.detach().contiguous(), kc = k.detach().contiguous(), vc = v.detach().contiguous();
  const Tensor pad = key_padding_mask.defined() ? key_padding_mask.contiguous() : Tensor();
  const bool grad = any_requires_grad({q, k, v});
  Tensor probs;
  Tensor out = window_forward(op, qc, kc, vc, pad, p, grad, probs);
  if (grad) {
    const Tensor os = out.detach();
    record(op, {q, k, v}, {out}, [qc, kc, vc, os, probs, p](const TensorList& g) {
      const Tensor gc = g[0].contiguous();
      Tensor dq = Tensor::empty(qc.shape(), qc.dtype(), qc.device());
      Tensor dk = Tensor::empty(qc.shape(), qc.dtype(), qc.device());
      Tensor dv = Tensor::empty(qc.shape(), qc.dtype(), qc.device());
      if (dq.numel() > 0)
        kernel(qc.device(), &LayerBackend::window_attention_backward, "window_self_attention backward")(
            qc, kc, vc, os, probs, gc, p, dq, dk, dv);
      return TensorList{dq, dk, dv};
    });
  }
  return out;
}

Tensor window_self_attention_qkv(const Tensor& qkv, int64_t H, int64_t W, int64_t window_h, int64_t window_w,
                                 int64_t num_heads, const Tensor& key_padding_mask) {
  const char* op = "window_self_attention_qkv";
  OCRT_CHECK(qkv.defined() && qkv.dim() == 3 && qkv.size(2) % 3 == 0, op,
             ": expected qkv (L, N, 3E), got ", qkv.defined() ? shape_str(qkv.shape()) : std::string("undefined"));
  const int64_t E = qkv.size(2) / 3;
  const Tensor x = qkv.detach().contiguous();
  // q, k, v: the thirds of each row, views with x's strides (the kernels read them in place).
  const Tensor q = x.narrow(2, 0, E), k = x.narrow(2, E, E), v = x.narrow(2, 2 * E, E);
  const WindowAttentionParams p = window_params(op, q, H, W, window_h, window_w, num_heads, key_padding_mask);
  const Tensor pad = key_padding_mask.defined() ? key_padding_mask.contiguous() : Tensor();
  const bool grad = qkv.requires_grad();
  Tensor probs;
  Tensor out = window_forward(op, q, k, v, pad, p, grad, probs);
  if (grad) {
    const Tensor os = out.detach();
    record(op, {qkv}, {out}, [x, os, probs, p, E](const TensorList& g) {
      const Tensor gc = g[0].contiguous();
      // One gradient for qkv, its thirds written by the kernel in place.
      Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
      if (dx.numel() > 0)
        kernel(x.device(), &LayerBackend::window_attention_backward, "window_self_attention_qkv backward")(
            x.narrow(2, 0, E), x.narrow(2, E, E), x.narrow(2, 2 * E, E), os, probs, gc, p, dx.narrow(2, 0, E),
            dx.narrow(2, E, E), dx.narrow(2, 2 * E, E));
      return TensorList{dx};
    });
  }
  return out;
}

Tensor local_multi_head_attention(const Tensor& x, int64_t H, int64_t W, int64_t window_h, int64_t window_w,
                                  const Tensor& in_proj_weight, const Tensor& in_proj_bias,
                                  const Tensor& out_proj_weight, const Tensor& out_proj_bias, int64_t num_heads,
                                  const Tensor& key_padding_mask, int64_t chunk) {
  const char* op = "local_multi_head_attention";
  OCRT_CHECK(x.defined() && x.dim() == 3, op, ": expected x (L, N, E)");
  OCRT_CHECK(H >= 1 && W >= 1 && x.size(0) == H * W, op, ": x has ", x.size(0), " tokens, not the ", H, " x ", W,
             " of its grid");
  OCRT_CHECK(window_h >= 1 && window_w >= 1 && window_h % 2 == 1 && window_w % 2 == 1, op,
             ": window sizes must be odd and >= 1, got ", window_h, "x", window_w);
  OCRT_CHECK(chunk >= 0, op, ": chunk must be >= 0, got ", chunk);
  const int64_t L = H * W, N = x.size(1), E = x.size(2), h = num_heads;
  OCRT_CHECK(h >= 1 && E % h == 0, op, ": embed dim ", E, " is not divisible by num_heads ", h);
  OCRT_CHECK(in_proj_weight.defined() && in_proj_weight.shape() == Shape({3 * E, E}), op,
             ": in_proj_weight must have shape ", shape_str({3 * E, E}));
  OCRT_CHECK(!key_padding_mask.defined() || (key_padding_mask.shape() == Shape({N, L}) &&
                                             key_padding_mask.dtype() == DType::u8),
             op, ": key_padding_mask must be uint8 of shape ", shape_str({N, L}));
  if (chunk == 0 && x.device().is_cpu()) {
    // The window_attention kernel, on q, k and v as one linear layer of 3E outputs makes them:
    // one product for the three (and one for their gradient in x), read by the kernel in place.
    return linear(window_self_attention_qkv(linear(x, in_proj_weight, in_proj_bias), H, W, window_h, window_w, h,
                                            key_padding_mask),
                  out_proj_weight, out_proj_bias);
  }
  if (chunk == 0 && window_h >= 2 * H - 1 && window_w >= 2 * W - 1) {
    // Every token sees the whole grid: plain multi-head attention, no mask but the padding.
    MultiheadAttentionOptions o;
    o.num_heads = h;
    o.average_weights = false;
    return multi_head_attention(x, x, x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, o, Tensor(),
                                key_padding_mask)
        .output;
  }
  if (chunk == 0) chunk = 16;
  const int64_t hd = E / h, rh = window_h / 2, rw = window_w / 2;
  // The projections once for the whole line, as multi_head_attention makes them, as grids
  // (N*h, H, W, hd).
  auto project = [&](int64_t part) {
    return in_projection(x, in_proj_weight, in_proj_bias, part, E)
        .reshape({L, N * h, hd})
        .transpose(0, 1)
        .reshape({N * h, H, W, hd});
  };
  const Tensor q = project(0), k = project(1), v = project(2);
  const Tensor padding = key_padding_mask.defined() ? key_padding_mask.reshape({N, H, W}) : Tensor();
  std::vector<Tensor> bands;
  for (int64_t a = 0; a < W; a += chunk) {
    const int64_t qw = std::min(chunk, W - a), k0 = std::max<int64_t>(0, a - rw);
    const int64_t kw = std::min(W, a + qw + rw) - k0, lq = H * qw, lk = H * kw;
    // The whole line in one band is the full local mask's attention, op for op.
    const Tensor qb = q.narrow(2, a, qw).reshape({N * h, lq, hd});
    const Tensor kb = k.narrow(2, k0, kw).reshape({N * h, lk, hd});
    const Tensor vb = v.narrow(2, k0, kw).reshape({N * h, lk, hd});
    Tensor mask = band_mask(H, a, qw, k0, kw, rh, rw, x.device()).unsqueeze(0);  // (1, lq, lk)
    if (padding.defined()) {
      mask = maximum(mask, per_head(padding.narrow(2, k0, kw).reshape({N, lk}), N, h, lk));
    }
    bands.push_back(scaled_dot_product_attention(qb, kb, vb, mask).output.reshape({N * h, H, qw, hd}));
  }
  const Tensor o = bands.size() == 1 ? bands[0] : concat(bands, 2);  // (N*h, H, W, hd)
  // (N*h, L, hd) -> (L, N*h, hd) -> (L, N, E)
  return linear(o.reshape({N * h, L, hd}).transpose(0, 1).reshape({L, N, E}), out_proj_weight, out_proj_bias);
}

}  // namespace ocrt
