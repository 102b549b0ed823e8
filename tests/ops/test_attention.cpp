// Attention: golden tests against torch.nn.functional.multi_head_attention_forward
// (tools/reference/ops_attention.py: self/cross attention, boolean local-window and float masks,
// key padding, no bias, length 1), the local window mask, fully masked rows, dropout, gradient
// checks, and argument errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "golden_runner.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "runtime/threading.h"

using namespace ocrt;
using namespace ocrt::testing;

namespace {

const SafetensorsFile& fixture() {
  static const SafetensorsFile f =
      load_safetensors(std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/ops_attention.safetensors");
  return f;
}

void mha_golden(const std::string& name, int64_t heads, bool bias) {
  const auto& f = fixture();
  const Tensor mask = f.contains(name + ".attn_mask") ? f.get(name + ".attn_mask") : Tensor();
  const Tensor kp = f.contains(name + ".key_padding_mask") ? f.get(name + ".key_padding_mask") : Tensor();
  run_golden_case(f, name, [&](const TensorList& in) {
    MultiheadAttentionOptions o;
    o.num_heads = heads;
    AttentionResult r = multi_head_attention(in[0], in[1], in[2], in[3], bias ? in[5] : Tensor(), in[4],
                                             bias ? in[6] : Tensor(), o, mask, kp);
    return TensorList{r.output, r.weights};
  });
}

}  // namespace

TEST_CASE("multi-head attention matches PyTorch: output, weights and every gradient", "[attention][golden]") {
  mha_golden("mha_self", 2, true);
  mha_golden("mha_cross", 3, true);
  mha_golden("mha_nobias", 1, false);
  mha_golden("mha_local_mask", 2, true);
  mha_golden("mha_float_mask", 2, true);
  mha_golden("mha_key_padding", 4, true);
  mha_golden("mha_both_masks", 2, true);
  mha_golden("mha_len1_batch1", 2, true);
  mha_golden("mha_f32", 4, true);
}

TEST_CASE("local_attention_mask is the 7x11 window, and matches the fixture's", "[attention]") {
  require_close(local_attention_mask(2, 4, 3, 3), fixture().get("mha_local_mask.attn_mask"), 0, 0, "2x4 grid, 3x3");
  const Tensor m = local_attention_mask(8, 32);  // SVTR stage 1: 8 x 32 tokens
  CHECK(m.shape() == Shape{256, 256});
  const auto v = m.to_vector<int64_t>();
  auto allowed = [&](int64_t i, int64_t j, int64_t i2, int64_t j2) { return v[(size_t)((i * 32 + j) * 256 + i2 * 32 + j2)] == 0; };
  CHECK(allowed(4, 10, 4, 10));
  CHECK(allowed(4, 10, 1, 5));    // 3 rows up, 5 columns left: inside
  CHECK(!allowed(4, 10, 0, 10));  // 4 rows up: outside
  CHECK(!allowed(4, 10, 4, 16));  // 6 columns right: outside
  CHECK_THROWS_WITH(local_attention_mask(2, 2, 4, 3), Catch::Contains("window sizes must be odd"));
}

TEST_CASE("a query with no allowed key gets zero weights, no NaN, and finite gradients", "[attention]") {
  Tensor q = det_uniform({1, 3, 4}, 1), k = det_uniform({1, 5, 4}, 2), v = det_uniform({1, 5, 4}, 3);
  q.set_requires_grad(true), k.set_requires_grad(true), v.set_requires_grad(true);
  std::vector<uint8_t> m(15, 0);
  for (int s = 0; s < 5; ++s) m[(size_t)(5 + s)] = 1;  // query 1 may attend nothing
  AttentionResult r = scaled_dot_product_attention(q, k, v, Tensor::from_vector(m, {3, 5}));
  const auto w = r.weights.to_vector<double>(), out = r.output.to_vector<double>();
  for (int s = 0; s < 5; ++s) CHECK(w[(size_t)(5 + s)] == 0.0);
  for (int e = 0; e < 4; ++e) CHECK(out[(size_t)(4 + e)] == 0.0);
  for (double x : out) CHECK(std::isfinite(x));
  sum(r.output).backward();
  for (const Tensor* t : {&q, &k, &v})
    for (double g : t->grad().to_vector<double>()) CHECK(std::isfinite(g));
}

TEST_CASE("attention gradients agree with finite differences", "[attention][gradcheck]") {
  Tensor mask = local_attention_mask(2, 3, 1, 3);
  Tensor kp = Tensor::from_vector(std::vector<uint8_t>{0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1}, {2, 6});
  check_gradients("multi_head_attention with both masks", [&](const std::vector<Tensor>& in) {
    MultiheadAttentionOptions o;
    o.num_heads = 2;
    AttentionResult r = multi_head_attention(in[0], in[1], in[2], in[3], in[4], in[5], in[6], o, mask, kp);
    return r.output;
  }, {det_uniform({6, 2, 4}, 1), det_uniform({6, 2, 4}, 2), det_uniform({6, 2, 4}, 3), det_uniform({12, 4}, 4),
      det_uniform({12}, 5), det_uniform({4, 4}, 6), det_uniform({4}, 7)});
}

TEST_CASE("attention dropout is active only in training, reproducible from the generator", "[attention]") {
  Tensor q = det_uniform({2, 8, 4}, 1), k = det_uniform({2, 8, 4}, 2), v = det_uniform({2, 8, 4}, 3);
  Generator g1(5), g2(5);
  auto a = scaled_dot_product_attention(q, k, v, Tensor(), 0.5, true, &g1).output.to_vector<double>();
  auto b = scaled_dot_product_attention(q, k, v, Tensor(), 0.5, true, &g2).output.to_vector<double>();
  auto c = scaled_dot_product_attention(q, k, v, Tensor(), 0.5, false).output.to_vector<double>();
  CHECK(a == b);
  CHECK(a != c);
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, Tensor(), 0.5, true), Catch::Contains("needs a Generator"));
}

TEST_CASE("attention rejects bad arguments", "[attention]") {
  Tensor x = det_uniform({3, 2, 6}, 1), w_in = det_uniform({18, 6}, 2), w_out = det_uniform({6, 6}, 3);
  MultiheadAttentionOptions o;
  o.num_heads = 4;
  CHECK_THROWS_WITH(multi_head_attention(x, x, x, w_in, Tensor(), w_out, Tensor(), o),
                    Catch::Contains("embed dim 6 is not divisible by num_heads 4"));
  o.num_heads = 2;
  CHECK_THROWS_WITH(multi_head_attention(x, x, x, det_uniform({12, 6}, 2), Tensor(), w_out, Tensor(), o),
                    Catch::Contains("in_proj_weight must have shape [18, 6]"));
  CHECK_THROWS_WITH(multi_head_attention(x, x, x, w_in, Tensor(), w_out, Tensor(), o, Tensor::zeros({3, 4}, DType::u8)),
                    Catch::Contains("attn_mask must have shape [3, 3]"));
  CHECK_THROWS_WITH(multi_head_attention(x, x, x, w_in, Tensor(), w_out, Tensor(), o, Tensor(), Tensor::zeros({2, 3})),
                    Catch::Contains("key_padding_mask must be uint8 of shape [2, 3]"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(det_uniform({2, 3}, 1), det_uniform({2, 4}, 1), det_uniform({2, 4}, 1)),
                    Catch::Contains("differ in the embedding dim"));
}

TEST_CASE("local attention band by band equals the full local mask's, outputs and every gradient", "[attention]") {
  // float64, so that the two ways differ only by float64 rounding: the same keys for each
  // query, in bands of 1, 5, 16 and 64 columns (64: the whole line in one band).
  Generator gen(7);
  const int64_t H = 3, W = 23, N = 2, E = 12, heads = 3, L = H * W;
  const Tensor x0 = uniform({L, N, E}, -1, 1, gen, DType::f64);
  const Tensor w_in0 = uniform({3 * E, E}, -0.5, 0.5, gen, DType::f64), b_in0 = uniform({3 * E}, -0.1, 0.1, gen, DType::f64);
  const Tensor w_out0 = uniform({E, E}, -0.5, 0.5, gen, DType::f64), b_out0 = uniform({E}, -0.1, 0.1, gen, DType::f64);
  // Line 1 ends at column 17: its last 6 columns are padding.
  std::vector<uint8_t> pad((size_t)(N * L), 0);
  for (int64_t i = 0; i < H; ++i)
    for (int64_t j = 17; j < W; ++j) pad[(size_t)(L + i * W + j)] = 1;
  const Tensor padding = Tensor::from_vector(pad, {N, L});
  const Tensor r = uniform({L, N, E}, -1, 1, gen, DType::f64);  // the output's gradient

  struct Run {
    Tensor out, dx, dw_in, db_in, dw_out;
  };
  auto run = [&](const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&)>& f) {
    Tensor x = x0.clone(), w_in = w_in0.clone(), b_in = b_in0.clone(), w_out = w_out0.clone(), b_out = b_out0.clone();
    for (Tensor* t : {&x, &w_in, &b_in, &w_out, &b_out}) t->set_requires_grad();
    Tensor y = f(x, w_in, b_in, w_out, b_out);
    sum(mul(y, r), {}).backward();
    return Run{y.detach(), x.grad(), w_in.grad(), b_in.grad(), w_out.grad()};
  };
  const Run full = run([&](const Tensor& x, const Tensor& wi, const Tensor& bi, const Tensor& wo, const Tensor& bo) {
    MultiheadAttentionOptions o;
    o.num_heads = heads;
    return multi_head_attention(x, x, x, wi, bi, wo, bo, o, local_attention_mask(H, W, 3, 5), padding).output;
  });
  for (int64_t chunk : {0, 1, 5, 16, 64}) {  // 0: the window_attention kernel
    INFO("chunk " << chunk);
    const Run band = run([&](const Tensor& x, const Tensor& wi, const Tensor& bi, const Tensor& wo, const Tensor& bo) {
      return local_multi_head_attention(x, H, W, 3, 5, wi, bi, wo, bo, heads, padding, chunk);
    });
    require_close(band.out, full.out, 1e-12, 1e-12, "output");
    require_close(band.dx, full.dx, 1e-12, 1e-12, "gradient of x");
    require_close(band.dw_in, full.dw_in, 1e-12, 1e-12, "gradient of in_proj_weight");
    require_close(band.db_in, full.db_in, 1e-12, 1e-12, "gradient of in_proj_bias");
    require_close(band.dw_out, full.dw_out, 1e-12, 1e-12, "gradient of out_proj_weight");
  }
  // Bad arguments name themselves.
  CHECK_THROWS_WITH(local_multi_head_attention(x0, H, W + 1, 3, 5, w_in0, b_in0, w_out0, b_out0, heads),
                    Catch::Contains("not the 3 x 24 of its grid"));
  CHECK_THROWS_WITH(local_multi_head_attention(x0, H, W, 4, 5, w_in0, b_in0, w_out0, b_out0, heads),
                    Catch::Contains("window sizes must be odd"));
  CHECK_THROWS_WITH(local_multi_head_attention(x0, H, W, 3, 5, w_in0, b_in0, w_out0, b_out0, heads, Tensor(), -1),
                    Catch::Contains("chunk must be >= 0"));
}

namespace {

// window_self_attention's result composed the long way: per line and head, the window's mask and
// the key padding as one boolean mask of scaled_dot_product_attention.
Tensor window_attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, int64_t H, int64_t W, int64_t wh,
                                 int64_t ww, int64_t heads, const Tensor& padding) {
  const int64_t L = q.size(0), N = q.size(1), E = q.size(2), hd = E / heads;
  auto split = [&](const Tensor& x) { return x.reshape({L, N * heads, hd}).transpose(0, 1); };  // (N*h, L, hd)
  Tensor mask = local_attention_mask(H, W, wh, ww).unsqueeze(0);                                 // (1, L, L)
  if (padding.defined())
    mask = maximum(mask, padding.reshape({N, 1, 1, L}).expand({N, heads, 1, L}).reshape({N * heads, 1, L}));
  const Tensor o = scaled_dot_product_attention(split(q), split(k), split(v), mask).output;  // (N*h, L, hd)
  return o.transpose(0, 1).reshape({L, N, E});
}

struct WindowCase {
  int64_t H, W, N, heads, hd, wh, ww;
};

}  // namespace

TEST_CASE("window_self_attention equals the composed masked attention: outputs and every gradient", "[attention]") {
  // float64: the two ways differ by float64 rounding only. Head sizes below, at and above the
  // kernel's block of 32 channels; windows clipped at the grid's edges, wider than the grid (a
  // whole-grid window) and of one token; line 1 padded from column 5, line 2 all padding (its
  // queries have no key: output 0, gradient 0).
  const WindowCase cases[] = {{3, 23, 3, 2, 5, 3, 5}, {4, 9, 3, 1, 32, 7, 11}, {2, 6, 3, 2, 37, 3, 11},
                              {3, 8, 3, 3, 4, 5, 15}, {2, 5, 3, 1, 3, 1, 1}, {1, 40, 3, 2, 8, 1, 11}};
  for (const WindowCase& c : cases) {
    const int64_t L = c.H * c.W, E = c.heads * c.hd;
    INFO("grid " << c.H << "x" << c.W << ", " << c.heads << " heads of " << c.hd << ", window " << c.wh << "x" << c.ww);
    std::vector<uint8_t> pad((size_t)(c.N * L), 0);
    for (int64_t t = 0; t < L; ++t) {
      if (t % c.W >= 5) pad[(size_t)(L + t)] = 1;
      pad[(size_t)(2 * L + t)] = 1;
    }
    const Tensor padding = Tensor::from_vector(pad, {c.N, L});
    const Tensor q0 = det_uniform({L, c.N, E}, 11, -2, 2), k0 = det_uniform({L, c.N, E}, 12, -2, 2);
    const Tensor v0 = det_uniform({L, c.N, E}, 13), r = det_uniform({L, c.N, E}, 14);
    std::vector<Tensor> outs, grads;
    for (int way = 0; way < 2; ++way) {
      Tensor q = q0.clone(), k = k0.clone(), v = v0.clone();
      for (Tensor* t : {&q, &k, &v}) t->set_requires_grad();
      const Tensor y = way == 0 ? window_self_attention(q, k, v, c.H, c.W, c.wh, c.ww, c.heads, padding)
                                : window_attention_composed(q, k, v, c.H, c.W, c.wh, c.ww, c.heads, padding);
      sum(mul(y, r), {}).backward();
      outs.push_back(y.detach());
      for (Tensor* t : {&q, &k, &v}) grads.push_back(t->grad());
    }
    require_close(outs[0], outs[1], 1e-12, 1e-12, "output");
    for (int i = 0; i < 3; ++i) require_close(grads[(size_t)i], grads[(size_t)(3 + i)], 1e-12, 1e-12, "gradient");
    // Line 2's queries have no key.
    const auto y = outs[0].to_vector<double>();
    for (int64_t t = 0; t < L; ++t)
      for (int64_t e = 0; e < E; ++e) CHECK(y[(size_t)((t * c.N + 2) * E + e)] == 0.0);
  }
}

TEST_CASE("window_self_attention gradients agree with finite differences", "[attention][gradcheck]") {
  const Tensor padding = Tensor::from_vector(std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 6});
  for (int64_t hd : {3, 33}) {
    INFO("head size " << hd);
    check_gradients("window_self_attention, 2 x 3 grid, window 1 x 3, key padding",
                    [&](const std::vector<Tensor>& in) {
                      return window_self_attention(in[0], in[1], in[2], 2, 3, 1, 3, 2, padding);
                    },
                    {det_uniform({6, 2, 2 * hd}, 1), det_uniform({6, 2, 2 * hd}, 2), det_uniform({6, 2, 2 * hd}, 3)});
  }
}

TEST_CASE("window_self_attention in float32: within float32's rounding of float64, and the same on any thread count",
          "[attention]") {
  // SVTR-lite's first stage: an 8 x 32 grid, 2 heads of 32 channels, the 7 x 11 window.
  const int64_t H = 8, W = 32, N = 3, heads = 2, E = 64, L = H * W;
  std::vector<uint8_t> pad((size_t)(N * L), 0);
  for (int64_t t = 0; t < L; ++t)
    if (t % W >= 20) pad[(size_t)(L + t)] = 1;
  const Tensor padding = Tensor::from_vector(pad, {N, L});
  const Tensor q64 = det_uniform({L, N, E}, 21, -2, 2), k64 = det_uniform({L, N, E}, 22, -2, 2);
  const Tensor v64 = det_uniform({L, N, E}, 23), r64 = det_uniform({L, N, E}, 24);
  auto run = [&](DType dt, bool grad, std::vector<Tensor>& grads) {
    Tensor q = q64.to(dt).detach(), k = k64.to(dt).detach(), v = v64.to(dt).detach();
    if (grad)
      for (Tensor* t : {&q, &k, &v}) t->set_requires_grad();
    const Tensor y = window_self_attention(q, k, v, H, W, 7, 11, heads, padding);
    if (grad) {
      sum(mul(y, r64.to(dt)), {}).backward();
      grads = {q.grad(), k.grad(), v.grad()};
    }
    return y.detach();
  };
  std::vector<Tensor> g64, g32;
  const Tensor y64 = run(DType::f64, true, g64);
  const int saved = num_threads();
  std::vector<float> first_y, first_dq;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    const Tensor y32 = run(DType::f32, true, g32);
    // Scores: 32 products of values below 2 in magnitude, each rounded, sum |q||k| <= 128:
    // at most about 32 u 128 / sqrt(32) ~ 4e-5 absolute after scaling; the weights (exp of
    // that, normalised) and the outputs (weights times values of magnitude <= 1) keep that
    // order of absolute error; 2e-4 leaves room for exp8's own 2e-7 relative error.
    require_close(y32.to(DType::f64), y64, 1e-4, 2e-4, "float32 output");
    for (int i = 0; i < 3; ++i) require_close(g32[(size_t)i].to(DType::f64), g64[(size_t)i], 1e-3, 2e-3, "float32 gradient");
    if (first_y.empty()) {
      first_y = y32.to_vector<float>();
      first_dq = g32[0].to_vector<float>();
    } else {
      CHECK(y32.to_vector<float>() == first_y);
      CHECK(g32[0].to_vector<float>() == first_dq);
    }
    // Without a gradient to come (no weights kept): the same output, bit for bit.
    std::vector<Tensor> none;
    CHECK(run(DType::f32, false, none).to_vector<float>() == first_y);
  }
  set_num_threads(saved);
}

TEST_CASE("window_self_attention_qkv reads q, k, v in place: the same output and gradients as on three tensors",
          "[attention]") {
  // The thirds of one (L, N, 3E) tensor, as a 3E-output linear layer makes them: the kernels
  // read them with its strides and write the gradient's thirds in place. The same arithmetic
  // either way, so the same bits; float64 and float32, with padding, on 1 and 2 threads.
  const int64_t H = 3, W = 13, N = 3, heads = 2, hd = 33, E = heads * hd, L = H * W;
  std::vector<uint8_t> pad((size_t)(N * L), 0);
  for (int64_t t = 0; t < L; ++t) {
    if (t % W >= 8) pad[(size_t)(L + t)] = 1;
    pad[(size_t)(2 * L + t)] = 1;
  }
  const Tensor padding = Tensor::from_vector(pad, {N, L});
  auto equal = [](const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() &&
           a.to(DType::f64).contiguous().to_vector<double>() == b.to(DType::f64).contiguous().to_vector<double>();
  };
  const int saved = num_threads();
  for (DType dt : {DType::f64, DType::f32}) {
    for (int threads : {1, 2}) {
      INFO((dt == DType::f64 ? "float64" : "float32") << ", " << threads << " threads");
      set_num_threads(threads);
      const Tensor x0 = det_uniform({L, N, 3 * E}, 31, -2, 2).to(dt), r = det_uniform({L, N, E}, 32).to(dt);
      Tensor x = x0.clone();
      x.set_requires_grad();
      const Tensor y = window_self_attention_qkv(x, H, W, 3, 5, heads, padding);
      sum(mul(y, r), {}).backward();
      Tensor q = x0.narrow(2, 0, E).contiguous(), k = x0.narrow(2, E, E).contiguous(), v = x0.narrow(2, 2 * E, E).contiguous();
      for (Tensor* t : {&q, &k, &v}) t->set_requires_grad();
      const Tensor y3 = window_self_attention(q, k, v, H, W, 3, 5, heads, padding);
      sum(mul(y3, r), {}).backward();
      REQUIRE(y.shape() == Shape({L, N, E}));
      CHECK(equal(y.detach(), y3.detach()));
      REQUIRE(x.grad().shape() == x0.shape());
      CHECK(equal(x.grad().narrow(2, 0, E).contiguous(), q.grad()));
      CHECK(equal(x.grad().narrow(2, E, E).contiguous(), k.grad()));
      CHECK(equal(x.grad().narrow(2, 2 * E, E).contiguous(), v.grad()));
      // Three views of one tensor given to window_self_attention: the same again.
      const Tensor y_views = window_self_attention(x0.narrow(2, 0, E), x0.narrow(2, E, E), x0.narrow(2, 2 * E, E), H, W,
                                                   3, 5, heads, padding);
      CHECK(equal(y_views, y3.detach()));
    }
  }
  set_num_threads(saved);
  check_gradients("window_self_attention_qkv, 2 x 3 grid, window 1 x 3",
                  [&](const std::vector<Tensor>& in) { return window_self_attention_qkv(in[0], 2, 3, 1, 3, 2); },
                  {det_uniform({6, 2, 3 * 2 * 5}, 5)});
  CHECK_THROWS_WITH(window_self_attention_qkv(det_uniform({6, 2, 8}, 1), 2, 3, 1, 3, 2),
                    Catch::Contains("expected qkv (L, N, 3E)"));
  CHECK_THROWS_WITH(window_self_attention_qkv(det_uniform({6, 2, 12}, 1), 2, 3, 1, 3, 3),
                    Catch::Contains("not divisible by num_heads"));
}

TEST_CASE("window_self_attention rejects bad arguments", "[attention]") {
  const Tensor q = det_uniform({6, 2, 4}, 1), k = det_uniform({6, 2, 4}, 2);
  CHECK_THROWS_WITH(window_self_attention(q, k, det_uniform({6, 2, 5}, 3), 2, 3, 1, 3, 2),
                    Catch::Contains("must have one shape"));
  CHECK_THROWS_WITH(window_self_attention(q, k, k, 2, 4, 1, 3, 2), Catch::Contains("not the 2 x 4 of its grid"));
  CHECK_THROWS_WITH(window_self_attention(q, k, k, 2, 3, 2, 3, 2), Catch::Contains("window sizes must be odd"));
  CHECK_THROWS_WITH(window_self_attention(q, k, k, 2, 3, 1, 3, 3), Catch::Contains("not divisible by num_heads"));
  CHECK_THROWS_WITH(window_self_attention(q, k, k, 2, 3, 1, 3, 2, Tensor::zeros({2, 6})),
                    Catch::Contains("key_padding_mask must be uint8"));
}
