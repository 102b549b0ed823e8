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
  for (int64_t chunk : {1, 5, 16, 64}) {
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
  CHECK_THROWS_WITH(local_multi_head_attention(x0, H, W, 3, 5, w_in0, b_in0, w_out0, b_out0, heads, Tensor(), 0),
                    Catch::Contains("chunk must be >= 1"));
}
