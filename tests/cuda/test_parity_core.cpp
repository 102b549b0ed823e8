// CPU-vs-CUDA parity for the core families: copy/fill, elementwise, reductions and softmax,
// matmul (cuBLAS), indexing, random numbers, attention (composed of the above), plus the
// caching allocator's behaviour. See parity.h for the method (fresh seeds, poisoned outputs).
#include <catch2/catch.hpp>

#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/linalg.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "parity.h"
#include "runtime/cuda/cuda_glue.h"

using namespace ocrt;
using namespace ocrt::parity;

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

TEST_CASE("copy: dtype conversions, strided and broadcast sources, fill", "[cuda]") {
  ParityEnv env;
  Tensor x = env.uniform({5, 7, 3}, -50, 50);
  const DType types[] = {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8};
  for (DType from : types) {
    Tensor src = (from == DType::u8 ? abs(x) : x).to(from);
    for (DType to : types) {
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      Tensor ref = src.to(to);
      Tensor got = src.to(kGpu).to(to);
      REQUIRE(got.to(Device::cpu()).to_vector<double>() == ref.to_vector<double>());
    }
  }
  // Non-contiguous views: a permute, a stepped slice, an expand.
  Tensor g = x.to(kGpu);
  REQUIRE(g.permute({2, 0, 1}).contiguous().to(Device::cpu()).to_vector<float>() ==
          x.permute({2, 0, 1}).contiguous().to_vector<float>());
  REQUIRE(g.slice(1, 1, 7, 3).contiguous().to(Device::cpu()).to_vector<float>() ==
          x.slice(1, 1, 7, 3).contiguous().to_vector<float>());
  Tensor row = x.narrow(0, 2, 1);
  REQUIRE(row.to(kGpu).expand({4, 7, 3}).contiguous().to(Device::cpu()).to_vector<float>() ==
          row.expand({4, 7, 3}).contiguous().to_vector<float>());
  // copy_ into a strided destination, and fill_ of a view.
  Tensor dst = Tensor::zeros({7, 5}, DType::f32, kGpu);
  {
    NoGradGuard ng;
    dst.t().copy_(x.select(2, 0).to(kGpu));
    dst.narrow(1, 1, 2).fill_(3.5);
  }
  Tensor ref = Tensor::zeros({7, 5});
  ref.t().copy_(x.select(2, 0));
  ref.narrow(1, 1, 2).fill_(3.5);
  REQUIRE(dst.to(Device::cpu()).to_vector<float>() == ref.to_vector<float>());
}

TEST_CASE("large host<->device copies go through pinned staging and arrive intact", "[cuda]") {
  ParityEnv env;
  Tensor x = env.uniform({5, 1000, 1000});  // 20 MB: several staging chunks
  Tensor g = x.to(kGpu);
  REQUIRE(g.to(Device::cpu()).to_vector<float>() == x.to_vector<float>());
  // Device-to-device (same GPU) clone.
  REQUIRE(g.clone().to(Device::cpu()).to_vector<float>() == x.to_vector<float>());
}

TEST_CASE("unary ops and their gradients", "[cuda]") {
  ParityEnv env;
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = env.uniform({37, 129}, -4, 4, dt);
    Tensor pos = env.uniform({37, 129}, 0.1, 4, dt);
    std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> fns = {
        {"neg", [](const Tensor& t) { return neg(t); }},
        {"exp", [](const Tensor& t) { return exp(t); }},
        {"abs", [](const Tensor& t) { return abs(t); }},
        {"sign", [](const Tensor& t) { return sign(t); }},
        {"relu", [](const Tensor& t) { return relu(t); }},
        {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
        {"tanh", [](const Tensor& t) { return tanh(t); }},
        {"gelu", [](const Tensor& t) { return gelu(t); }},
        {"gelu_tanh", [](const Tensor& t) { return gelu(t, GeluApprox::tanh); }},
        {"hardswish", [](const Tensor& t) { return hardswish(t); }},
        {"leaky_relu", [](const Tensor& t) { return leaky_relu(t, 0.2); }},
        {"clamp", [](const Tensor& t) { return clamp(t, -1.5, 2.0); }},
    };
    for (auto& [name, fn] : fns)
      check_op(env, name + " " + dtype_name(dt), {x}, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; },
               kTolElementwise);
    std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> pos_fns = {
        {"log", [](const Tensor& t) { return log(t); }},
        {"sqrt", [](const Tensor& t) { return sqrt(t); }},
        {"pow 2.5", [](const Tensor& t) { return pow(t, 2.5); }},
    };
    for (auto& [name, fn] : pos_fns)
      check_op(env, name + " " + dtype_name(dt), {pos}, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; },
               kTolElementwise);
    // A strided (transposed) input.
    check_op(env, "tanh of a transposed view", {x}, [](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{tanh(in[0].t())};
    }, kTolElementwise);
  }
}

TEST_CASE("binary ops with broadcasting, comparisons, where", "[cuda]") {
  ParityEnv env;
  Tensor a = env.uniform({4, 1, 33}, -3, 3);
  Tensor b = env.uniform({5, 33}, 0.5, 3);
  std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>> fns = {
      {"add", [](const Tensor& x, const Tensor& y) { return add(x, y); }},
      {"sub", [](const Tensor& x, const Tensor& y) { return sub(x, y); }},
      {"mul", [](const Tensor& x, const Tensor& y) { return mul(x, y); }},
      {"div", [](const Tensor& x, const Tensor& y) { return div(x, y); }},
      {"maximum", [](const Tensor& x, const Tensor& y) { return maximum(x, y); }},
      {"minimum", [](const Tensor& x, const Tensor& y) { return minimum(x, y); }},
      {"pow", [](const Tensor& x, const Tensor& y) { return pow(y, x); }},
  };
  for (auto& [name, fn] : fns)
    check_op(env, name, {a, b}, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0], in[1])}; },
             kTolElementwise);
  check_op(env, "tensor op scalar", {a}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{add(mul(in[0], 2.5), 1.0), div(in[0], 3.0), rsub(1.0, in[0])};
  }, kTolElementwise);
  // Comparisons give u8; where picks by them.
  using Cmp = Tensor (*)(const Tensor&, const Tensor&);
  for (Cmp cmp : {(Cmp)eq, (Cmp)ne, (Cmp)lt, (Cmp)le, (Cmp)gt, (Cmp)ge}) {
    Tensor ref = cmp(a, b);
    Tensor got = cmp(a.to(kGpu), b.to(kGpu));
    REQUIRE(got.dtype() == DType::u8);
    REQUIRE(got.to(Device::cpu()).to_vector<uint8_t>() == ref.to_vector<uint8_t>());
  }
  check_op(env, "where", {a, b}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{where(gt(in[0], 0.0), in[0], in[1]), masked_fill(in[1], lt(in[1], 1.0), -7.0)};
  }, kTolElementwise);
  // Integer arithmetic.
  Tensor ia = Tensor::arange(0, 60, 1, DType::i64).reshape({6, 10});
  Tensor ib = Tensor::arange(1, 11, 1, DType::i64);
  REQUIRE(mul(ia.to(kGpu), ib.to(kGpu)).to(Device::cpu()).to_vector<int64_t>() == mul(ia, ib).to_vector<int64_t>());
  // In-place helpers.
  Tensor s = a.to(kGpu).clone();
  Tensor sc = a.clone();
  add_(s, b.narrow(0, 0, 1).to(kGpu).expand({4, 1, 33}), 0.5);
  add_(sc, b.narrow(0, 0, 1).expand({4, 1, 33}), 0.5);
  expect_close(sc, s, kTolElementwise, "add_", env.seed);
}

TEST_CASE("reductions over any dims, whole tensors, integer types, max/min with indices", "[cuda]") {
  ParityEnv env;
  Tensor x = env.uniform({6, 7, 300}, -2, 2);
  std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {1}, {2}, {0, 2}, {1, 2}, {-1}, {0, 1, 2}};
  for (auto dims : dim_sets) {
    for (bool keep : {false, true}) {
      std::string d = "dims " + std::to_string(dims.size()) + (dims.empty() ? "" : " first " + std::to_string(dims[0]));
      check_op(env, "sum " + d, {x}, [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{dims.empty() ? sum(in[0]) : sum(in[0], dims, keep)};
      }, kTolElementwise);
      if (dims.empty()) continue;
      check_op(env, "mean/amax/amin " + d, {x}, [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{mean(in[0], dims, keep), amax(in[0], dims, keep), amin(in[0], dims, keep)};
      }, kTolElementwise);
    }
  }
  // A transposed input, a large whole-tensor sum (the chunked path), float64.
  check_op(env, "sum of a permuted view", {x}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(in[0].permute({2, 0, 1}), {1}), sum(in[0].transpose(0, 2), {0, 1})};
  }, kTolElementwise);
  Tensor big = env.uniform({3000, 1000});
  check_op(env, "sum of 3M elements", {big}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(in[0]), mean(in[0], {0}), sum(in[0], {1})};
  }, kTolElementwise);
  Tensor xd = env.uniform({9, 130}, -1, 1, DType::f64);
  check_op(env, "sum float64", {xd}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(in[0], {1}), amax(in[0], {0})};
  }, 1e-12);
  // Integers.
  Tensor xi = Tensor::arange(-500, 500, 1, DType::i64).reshape({10, 100});
  REQUIRE(sum(xi.to(kGpu), {1}).to(Device::cpu()).to_vector<int64_t>() == sum(xi, {1}).to_vector<int64_t>());
  REQUIRE(amax(xi.to(kGpu), {0}).to(Device::cpu()).to_vector<int64_t>() == amax(xi, {0}).to_vector<int64_t>());
  // NaN propagates through max.
  Tensor withnan = x.clone();
  withnan.narrow(2, 5, 1).narrow(1, 3, 1).fill_(NAN);
  auto m = amax(withnan.to(kGpu), {2}).to(Device::cpu()).to_vector<float>();
  auto mref = amax(withnan, {2}).to_vector<float>();
  for (size_t i = 0; i < m.size(); ++i) REQUIRE((std::isnan(m[i]) == std::isnan(mref[i])));
  // max/min with indices, argmax.
  for (int64_t dim : {0, 1, 2}) {
    auto [v, idx] = max(x.to(kGpu), dim);
    auto [vr, idxr] = max(x, dim);
    REQUIRE(v.to(Device::cpu()).to_vector<float>() == vr.to_vector<float>());
    REQUIRE(idx.to(Device::cpu()).to_vector<int64_t>() == idxr.to_vector<int64_t>());
    REQUIRE(argmin(x.to(kGpu), dim).to(Device::cpu()).to_vector<int64_t>() == argmin(x, dim).to_vector<int64_t>());
  }
  check_op(env, "max values gradient", {x}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{max(in[0], 1, true).first};
  }, kTolElementwise);
}

TEST_CASE("softmax and log_softmax over the last and a middle dim", "[cuda]") {
  ParityEnv env;
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = env.uniform({26, 8, 97}, -10, 10, dt);
    for (int64_t dim : {2, 1, 0}) {
      check_op(env, std::string("softmax dim ") + std::to_string(dim) + " " + dtype_name(dt), {x},
               [dim](const std::vector<Tensor>& in) {
                 return std::vector<Tensor>{softmax(in[0], dim), log_softmax(in[0], dim)};
               },
               kTolElementwise);
    }
  }
  // A long row and extreme values.
  Tensor wide = env.uniform({3, 5000}, -80, 80);
  check_op(env, "softmax of long rows", {wide}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{log_softmax(in[0], 1), softmax(in[0], -1)};
  }, kTolElementwise);
}

TEST_CASE("matmul through cuBLAS: batched, transposed, broadcast, linear, float64", "[cuda]") {
  ParityEnv env;
  Tensor a = env.uniform({3, 17, 40});
  Tensor b = env.uniform({3, 40, 23});
  check_op(env, "batched matmul", {a, b}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(in[0], in[1])};
  }, kTolGemm);
  check_op(env, "transposed operands", {a, b}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(in[1].transpose(1, 2), in[0].transpose(1, 2))};
  }, kTolGemm);
  Tensor w = env.uniform({40, 29});
  check_op(env, "broadcast right operand", {a, w}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(in[0], in[1])};
  }, kTolGemm);
  Tensor m = env.uniform({33, 40});
  check_op(env, "2-D times batched", {m, b}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(in[0], in[1])};
  }, kTolGemm);
  Tensor x = env.uniform({26, 8, 512});
  Tensor lw = env.uniform({97, 512}, -0.05, 0.05);
  Tensor lb = env.uniform({97});
  check_op(env, "linear (CRNN head)", {x, lw, lb}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{linear(in[0], in[1], in[2])};
  }, kTolGemm);
  Tensor vec = env.uniform({40});
  check_op(env, "matrix-vector and a stepped view", {a, vec}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(in[0], in[1]), matmul(in[0].slice(2, 0, 40, 2), in[1].slice(0, 0, 40, 2))};
  }, kTolGemm);
  Tensor ad = env.uniform({2, 31, 50}, -1, 1, DType::f64);
  Tensor bd = env.uniform({2, 50, 7}, -1, 1, DType::f64);
  check_op(env, "float64 matmul", {ad, bd}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{matmul(in[0], in[1])};
  }, 1e-12);
  // K = 0 gives zeros, not poison.
  Tensor e = matmul(Tensor::zeros({4, 0}, DType::f32, kGpu), Tensor::zeros({0, 5}, DType::f32, kGpu));
  REQUIRE(e.to(Device::cpu()).to_vector<float>() == std::vector<float>(20, 0.0f));
}

TEST_CASE("index_select, gather, embedding and their scatter-add gradients", "[cuda]") {
  ParityEnv env;
  Tensor x = env.uniform({6, 9, 5});
  Tensor idx = Tensor::from_vector<int64_t>({3, 0, 3, 8, 1, 3}, {6});
  for (int64_t dim : {0, 1}) {
    Tensor id = dim == 0 ? Tensor::from_vector<int64_t>({5, 0, 5, 2}, {4}) : idx;
    check_op(env, "index_select dim " + std::to_string(dim), {x, id}, [dim](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{index_select(in[0], dim, in[1])};
    }, kTolElementwise);
  }
  std::vector<int64_t> gi(6 * 4 * 5);
  for (size_t i = 0; i < gi.size(); ++i) gi[i] = (int64_t)((i * 7 + 3) % 9);
  Tensor gidx = Tensor::from_vector(gi, {6, 4, 5});
  check_op(env, "gather dim 1 (repeated indices)", {x, gidx}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gather(in[0], 1, in[1])};
  }, kTolElementwise);
  check_op(env, "gather of a transposed input", {x, gidx}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gather(in[0].transpose(0, 2), 1, in[1].transpose(0, 2))};
  }, kTolElementwise);
  Tensor table = env.uniform({20, 16});
  Tensor tokens = Tensor::from_vector<int64_t>({1, 4, 4, 19, 0, 7, 4, 2}, {2, 4});
  check_op(env, "embedding", {table, tokens}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{embedding(in[0], in[1]), embedding(in[0], in[1], 4)};
  }, kTolElementwise);
  // Out-of-range indices are caught by the front-end on the GPU too.
  Tensor bad = Tensor::from_vector<int64_t>({0, 9}, {2}).to(kGpu);
  REQUIRE_THROWS_WITH(index_select(x.to(kGpu), 1, bad), Catch::Contains("out of range"));
}

TEST_CASE("random numbers: a seed gives the same tensor on CPU and CUDA", "[cuda]") {
  ParityEnv env;
  for (DType dt : {DType::f32, DType::f64}) {
    Generator g1(env.seed), g2(env.seed);
    Tensor u1 = uniform({1000, 33}, -2, 3, g1, dt);
    Tensor u2 = uniform({1000, 33}, -2, 3, g2, dt, kGpu);
    REQUIRE(u2.to(Device::cpu()).to_vector<double>() == u1.to_vector<double>());
    Tensor n1 = randn({777, 13}, g1, dt);
    Tensor n2 = randn({777, 13}, g2, dt, kGpu);
    // Box-Muller in double: CUDA's log/cos may differ from glibc's in the last ulp.
    expect_close(n1, n2, 1e-14, std::string("randn ") + dtype_name(dt), env.seed);
  }
  Generator g1(env.seed), g2(env.seed);
  Tensor x = env.uniform({64, 100});
  Tensor d1 = dropout(x, 0.3, true, g1);
  Tensor d2 = dropout(x.to(kGpu), 0.3, true, g2);
  // The same mask: zero in the same places.
  auto a = d1.to_vector<float>(), b = d2.to(Device::cpu()).to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) REQUIRE((a[i] == 0) == (b[i] == 0));
  expect_close(d1, d2, kTolElementwise, "dropout", env.seed);
}

TEST_CASE("attention: scaled dot-product with masks, multi-head with key padding, SVTR window", "[cuda]") {
  ParityEnv env;
  Tensor q = env.uniform({2, 3, 10, 16}), k = env.uniform({2, 3, 12, 16}), v = env.uniform({2, 3, 12, 8});
  Tensor fmask = env.uniform({10, 12}, -1, 1);
  std::vector<uint8_t> bm(10 * 12);
  for (size_t i = 0; i < bm.size(); ++i) bm[i] = (i % 5 == 0);
  for (int64_t j = 0; j < 12; ++j) bm[3 * 12 + j] = 1;  // row 3 allows no key: 0, not NaN
  Tensor bmask = Tensor::from_vector(bm, {10, 12});
  check_op(env, "sdpa, float mask", {q, k, v, fmask}, [](const std::vector<Tensor>& in) {
    auto r = scaled_dot_product_attention(in[0], in[1], in[2], in[3]);
    return std::vector<Tensor>{r.output, r.weights};
  }, kTolGemm);
  check_op(env, "sdpa, bool mask with a dead row", {q, k, v, bmask}, [](const std::vector<Tensor>& in) {
    auto r = scaled_dot_product_attention(in[0], in[1], in[2], in[3]);
    return std::vector<Tensor>{r.output, r.weights};
  }, kTolGemm);

  const int64_t E = 64, heads = 2, H = 4, W = 25, L = H * W, N = 3;
  Tensor x = env.uniform({L, N, E});
  Tensor in_w = env.uniform({3 * E, E}, -0.15, 0.15), in_b = env.uniform({3 * E}, -0.1, 0.1);
  Tensor out_w = env.uniform({E, E}, -0.15, 0.15), out_b = env.uniform({E}, -0.1, 0.1);
  std::vector<uint8_t> pad((size_t)(N * L), 0);
  for (int64_t s = 80; s < L; ++s) pad[(size_t)(1 * L + s)] = 1;  // sample 1 is shorter
  Tensor kpm = Tensor::from_vector(pad, {N, L});
  Tensor local = local_attention_mask(H, W);
  REQUIRE(local_attention_mask(H, W, 7, 11, kGpu).to(Device::cpu()).to_vector<uint8_t>() == local.to_vector<uint8_t>());
  check_op(env, "multi-head attention, local window mask and key padding", {x, in_w, in_b, out_w, out_b, local, kpm},
           [&](const std::vector<Tensor>& in) {
             MultiheadAttentionOptions opt;
             opt.num_heads = heads;
             auto r = multi_head_attention(in[0], in[0], in[0], in[1], in[2], in[3], in[4], opt, in[5], in[6]);
             return std::vector<Tensor>{r.output, r.weights};
           },
           kTolGemm);
  // SVTR's local blocks: the same window band by band (bands of 8 columns; the last is short).
  check_op(env, "local multi-head attention in bands, with key padding", {x, in_w, in_b, out_w, out_b, kpm},
           [&](const std::vector<Tensor>& in) {
             return std::vector<Tensor>{
                 local_multi_head_attention(in[0], H, W, 7, 11, in[1], in[2], in[3], in[4], heads, in[5], 8)};
           },
           kTolGemm);
}

TEST_CASE("window_attention: local and whole-grid windows, key padding, queries with no key", "[cuda]") {
  ParityEnv env;
  const int64_t H = 4, W = 19, L = H * W, N = 3, heads = 2, E = 2 * 40;  // 40 channels a head: two lane blocks
  Tensor q = env.uniform({L, N, E}), k = env.uniform({L, N, E}), v = env.uniform({L, N, E});
  std::vector<uint8_t> pad((size_t)(N * L), 0);
  for (int64_t t = 0; t < L; ++t) {
    if (t % W >= 12) pad[(size_t)(1 * L + t)] = 1;  // line 1 is 12 columns long
    pad[(size_t)(2 * L + t)] = 1;                   // line 2 is all padding: no query has a key
  }
  Tensor kpm = Tensor::from_vector(pad, {N, L});
  for (auto [wh, ww] : {std::pair<int64_t, int64_t>{3, 5}, {7, 11}, {2 * H - 1, 2 * W - 1}}) {
    check_op(env, "window " + std::to_string(wh) + "x" + std::to_string(ww), {q, k, v, kpm},
             [&](const std::vector<Tensor>& in) {
               return std::vector<Tensor>{window_self_attention(in[0], in[1], in[2], H, W, wh, ww, heads, in[3])};
             },
             kTolGemm);
  }
  // q, k, v as the thirds of one (L, N, 3E) projection, read and their gradient written in place
  // (the kernels' token and line strides 3NE and 3E, not NE and E).
  Tensor qkv = env.uniform({L, N, 3 * E});
  check_op(env, "window 7x11 on one qkv tensor", {qkv, kpm},
           [&](const std::vector<Tensor>& in) {
             return std::vector<Tensor>{window_self_attention_qkv(in[0], H, W, 7, 11, heads, in[1])};
           },
           kTolGemm);
}

TEST_CASE("caching allocator: reuse without cudaMalloc, statistics, empty_cache, OOM message", "[cuda]") {
  cuda_synchronize(0);
  cuda_empty_cache(0);
  auto before = cuda_memory_stats(0);
  {
    Tensor a = Tensor::empty({1 << 20}, DType::f32, kGpu);  // 4 MiB
    auto s = cuda_memory_stats(0);
    REQUIRE(s.allocated >= before.allocated + (4u << 20));
    REQUIRE(s.peak_allocated >= s.allocated);
  }
  auto after_free = cuda_memory_stats(0);
  REQUIRE(after_free.allocated == before.allocated);
  REQUIRE(after_free.reserved > before.reserved);  // cached, not returned
  // A steady loop of the same sizes makes no new cudaMalloc.
  for (int i = 0; i < 3; ++i) Tensor t = Tensor::empty({1 << 20}, DType::f32, kGpu);
  auto steady = cuda_memory_stats(0);
  for (int i = 0; i < 10; ++i) Tensor t = Tensor::empty({1 << 20}, DType::f32, kGpu);
  REQUIRE(cuda_memory_stats(0).num_mallocs == steady.num_mallocs);
  cuda_empty_cache(0);
  REQUIRE(cuda_memory_stats(0).reserved == cuda_memory_stats(0).allocated);
  // Asking for far more than any GPU has: a clear message, and the allocator still works.
  REQUIRE_THROWS_WITH(Tensor::empty({int64_t(1) << 45}, DType::f32, kGpu),
                      Catch::Contains("out of memory on cuda:0") && Catch::Contains("asked for"));
  Tensor ok = Tensor::ones({10}, DType::f32, kGpu);
  REQUIRE(sum(ok).item() == 10.0);
}
