// index_select, gather and embedding: values against the plain loops of
// runtime/cpu/index_reference.h on host vectors (several
// shapes, negative dims, strided inputs, repeated and int32 indices, size-1 dims), gradient
// checks, the scatter_add path of max/min's backward, thread-count independence of the
// accumulating kernels, and the error messages.
#include <catch2/catch.hpp>

#include <omp.h>

#include "gradcheck.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/reduce.h"
#include "runtime/autograd.h"
#include "runtime/cpu/index_reference.h"

using namespace ocrt;
using ocrt::testing::check_gradients;
using ocrt::testing::det_uniform;

namespace {

// Deterministic indices in [0, bound).
std::vector<int64_t> det_indices(int64_t n, int64_t bound, uint64_t seed) {
  std::vector<int64_t> v((size_t)n);
  uint64_t s = seed * 2862933555777941757ull + 3037000493ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = (int64_t)((s >> 33) % (uint64_t)bound);
  }
  return v;
}

Tensor i64(const std::vector<int64_t>& v) { return Tensor::from_vector(v); }
Tensor i64(const std::vector<int64_t>& v, const Shape& s) { return Tensor::from_vector(v, s); }

// Runs f with the given OpenMP thread count, restoring the previous one.
template <class F>
auto with_threads(int n, F f) {
  int prev = omp_get_max_threads();
  omp_set_num_threads(n);
  auto r = f();
  omp_set_num_threads(prev);
  return r;
}

}  // namespace

// ---------------------------------------------------------------- index_select

TEST_CASE("index_select: hand-computed values", "[index]") {
  Tensor x = Tensor::arange(12, DType::f32).reshape({3, 4});  // rows 0..3, 4..7, 8..11
  Tensor rows = index_select(x, 0, i64({2, 0, 2}));
  REQUIRE(rows.shape() == Shape{3, 4});
  REQUIRE(rows.to_vector<float>() == std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
  Tensor cols = index_select(x, -1, i64({3, 1}));
  REQUIRE(cols.shape() == Shape{3, 2});
  REQUIRE(cols.to_vector<float>() == std::vector<float>{3, 1, 7, 5, 11, 9});
  // Integer data works too.
  Tensor xi = Tensor::arange(6).reshape({2, 3});
  REQUIRE(index_select(xi, 1, i64({2, 2})).to_vector<int64_t>() == std::vector<int64_t>{2, 2, 5, 5});
}

TEST_CASE("index_select: matches the plain loop for several shapes and dims", "[index]") {
  const std::vector<Shape> shapes = {{5}, {3, 4, 5}, {2, 1, 3, 4}, {1, 6}, {4, 1}};
  uint64_t seed = 1;
  for (const Shape& shape : shapes) {
    const int64_t nd = (int64_t)shape.size();
    for (int64_t dim = -nd; dim < nd; ++dim) {
      for (DType xt : {DType::f32, DType::f64}) {
        Tensor x = det_uniform(shape, ++seed).to(xt);
        int64_t D = shape[(size_t)(dim < 0 ? dim + nd : dim)];
        std::vector<int64_t> idx = det_indices(7, D, seed);  // 7 > most D: repeats guaranteed
        INFO("shape " << shape_str(shape) << " dim " << dim << " " << dtype_name(xt));
        Tensor out = index_select(x, dim, i64(idx));
        Shape expect_shape = shape;
        expect_shape[(size_t)(dim < 0 ? dim + nd : dim)] = 7;
        REQUIRE(out.shape() == expect_shape);
        REQUIRE(out.to_vector<double>() == reference::index_select(x.to_vector<double>(), shape, dim, idx));
        // int32 indices give the same result.
        std::vector<int32_t> idx32(idx.begin(), idx.end());
        REQUIRE(index_select(x, dim, Tensor::from_vector(idx32)).to_vector<double>() == out.to_vector<double>());
      }
    }
  }
}

TEST_CASE("index_select: strided inputs and indices, empty index", "[index]") {
  Tensor base = det_uniform({4, 6, 5}, 3);
  Tensor xt = base.transpose(0, 2);  // (5, 6, 4), no dim packed
  REQUIRE(!xt.is_contiguous());
  for (int64_t dim : {0, 1, 2, -1}) {
    int64_t D = xt.size(dim);
    std::vector<int64_t> idx = det_indices(9, D, 10 + dim);
    INFO("dim " << dim);
    REQUIRE(index_select(xt, dim, i64(idx)).to_vector<double>() ==
            reference::index_select(xt.to_vector<double>(), xt.shape(), dim, idx));
  }
  // A sliced (strided) index and a broadcast (stride-0) input.
  Tensor idx_all = i64({4, 0, 3, 3, 1, 2});
  Tensor idx_strided = idx_all.slice(0, 0, 6, 2);  // 4, 3, 1
  Tensor x = det_uniform({5, 3}, 4);
  REQUIRE(index_select(x, 0, idx_strided).to_vector<double>() ==
          reference::index_select(x.to_vector<double>(), {5, 3}, 0, {4, 3, 1}));
  Tensor xe = det_uniform({1, 3}, 5).expand({5, 3});
  REQUIRE(index_select(xe, 0, i64({4, 1})).to_vector<double>() ==
          reference::index_select(xe.to_vector<double>(), {5, 3}, 0, {4, 1}));
  // An empty index gives an empty dim.
  Tensor empty = index_select(x, 1, Tensor::empty({0}, DType::i64));
  REQUIRE(empty.shape() == Shape{5, 0});
}

TEST_CASE("index_select: gradients", "[index]") {
  Tensor idx = i64({2, 0, 2, 2});
  for (int64_t dim : {0, 1, -1}) {
    check_gradients("index_select dim " + std::to_string(dim),
                    [&](const std::vector<Tensor>& in) { return index_select(in[0], dim, idx); },
                    {det_uniform({3, 3, 4}, 20 + dim)});
  }
  check_gradients("index_select of a transposed input",
                  [&](const std::vector<Tensor>& in) { return index_select(in[0].t(), 1, i64({1, 1, 0})); },
                  {det_uniform({2, 4}, 30)});
  // Repeated indices accumulate: row 2 picked three times gets 3 * g.
  Tensor x = Tensor::zeros({3, 2}, DType::f64).set_requires_grad();
  index_select(x, 0, idx).backward(Tensor::ones({4, 2}, DType::f64));
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{1, 1, 0, 0, 3, 3});
}

// ---------------------------------------------------------------- gather

TEST_CASE("gather: hand-computed values", "[index]") {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  REQUIRE(gather(x, 1, i64({0, 0, 1, 0}, {2, 2})).to_vector<float>() == std::vector<float>{1, 1, 4, 3});
  REQUIRE(gather(x, 0, i64({1, 0}, {1, 2})).to_vector<float>() == std::vector<float>{3, 2});
  // A smaller index in the other dim, and more entries than x has along dim.
  REQUIRE(gather(x, 1, i64({1, 1, 1}, {1, 3})).to_vector<float>() == std::vector<float>{2, 2, 2});
}

TEST_CASE("gather: matches the plain loop for several shapes and dims", "[index]") {
  struct Case {
    Shape x, index;
  };
  const std::vector<Case> cases = {
      {{6}, {4}}, {{3, 4, 5}, {3, 4, 5}}, {{3, 4, 5}, {2, 3, 2}}, {{2, 1, 3}, {2, 1, 3}}, {{4, 1}, {4, 1}}};
  uint64_t seed = 50;
  for (const Case& c : cases) {
    const int64_t nd = (int64_t)c.x.size();
    for (int64_t dim = -nd; dim < nd; ++dim) {
      Shape ishape = c.index;
      ishape[(size_t)(dim < 0 ? dim + nd : dim)] += 2;  // along dim any count is fine
      int64_t D = c.x[(size_t)(dim < 0 ? dim + nd : dim)];
      Tensor x = det_uniform(c.x, ++seed).to(DType::f32);
      std::vector<int64_t> idx = det_indices(numel_of(ishape), D, seed);
      INFO("x " << shape_str(c.x) << " index " << shape_str(ishape) << " dim " << dim);
      Tensor out = gather(x, dim, i64(idx, ishape));
      REQUIRE(out.shape() == ishape);
      REQUIRE(out.to_vector<double>() == reference::gather(x.to_vector<double>(), c.x, dim, idx, ishape));
      std::vector<int32_t> idx32(idx.begin(), idx.end());
      REQUIRE(gather(x, dim, Tensor::from_vector(idx32, ishape)).to_vector<double>() == out.to_vector<double>());
    }
  }
}

TEST_CASE("gather: strided input and index", "[index]") {
  Tensor xt = det_uniform({5, 4, 3}, 60).permute({2, 0, 1});  // (3, 5, 4)
  Tensor idx_t = i64(det_indices(4 * 5 * 3, 3, 61), {4, 5, 3}).permute({2, 1, 0});  // (3, 5, 4), values < 3
  REQUIRE(!xt.is_contiguous());
  REQUIRE(!idx_t.is_contiguous());
  std::vector<int64_t> idx = idx_t.to_vector<int64_t>();
  for (int64_t dim : {0, 2}) {
    INFO("dim " << dim);
    REQUIRE(gather(xt, dim, idx_t).to_vector<double>() ==
            reference::gather(xt.to_vector<double>(), xt.shape(), dim, idx, idx_t.shape()));
  }
}

TEST_CASE("gather: gradients, with repeated indices", "[index]") {
  Tensor idx = i64({0, 0, 2, 1, 1, 1, 2, 0, 2}, {3, 3});
  check_gradients("gather dim 1", [&](const std::vector<Tensor>& in) { return gather(in[0], 1, idx); },
                  {det_uniform({3, 4}, 70)});
  check_gradients("gather dim 0", [&](const std::vector<Tensor>& in) { return gather(in[0], 0, idx); },
                  {det_uniform({3, 4}, 71)});
  check_gradients("gather dim -1 of a transposed input",
                  [&](const std::vector<Tensor>& in) { return gather(in[0].t(), -1, idx); },
                  {det_uniform({3, 3}, 72)});
  Tensor x = Tensor::zeros({1, 3}, DType::f64).set_requires_grad();
  gather(x, 1, i64({2, 2, 0, 2}, {1, 4})).backward(Tensor::ones({1, 4}, DType::f64));
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{1, 0, 3});
}

TEST_CASE("max/min along a dim backpropagate through scatter_add", "[index]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 5, 2, 7, 3, 0}, {2, 3}).set_requires_grad();
  auto [values, indices] = max(x, 1, false);
  REQUIRE(indices.to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  values.backward(Tensor::from_vector(std::vector<double>{10, 20}));
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{0, 10, 0, 20, 0, 0});
  x.zero_grad();
  auto [mins, argmins] = min(x, 0, true);
  mins.backward(Tensor::ones({1, 3}, DType::f64));
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{1, 0, 0, 0, 1, 1});
  check_gradients("max dim -1", [](const std::vector<Tensor>& in) { return max(in[0], -1, false).first; },
                  {det_uniform({3, 4, 5}, 80)});
}

// ---------------------------------------------------------------- embedding

TEST_CASE("embedding: values, shapes and int32 indices", "[index]") {
  Tensor w = Tensor::arange(10, DType::f32).reshape({5, 2});  // row r = (2r, 2r+1)
  Tensor out = embedding(w, i64({4, 0, 4, 1, 1, 3}, {2, 3}));
  REQUIRE(out.shape() == Shape{2, 3, 2});
  REQUIRE(out.to_vector<float>() == std::vector<float>{8, 9, 0, 1, 8, 9, 2, 3, 2, 3, 6, 7});
  Tensor out32 = embedding(w, Tensor::from_vector(std::vector<int32_t>{4, 0, 4, 1, 1, 3}, {2, 3}));
  REQUIRE(out32.to_vector<float>() == out.to_vector<float>());
  Tensor one = embedding(w, Tensor::scalar(2, DType::i64));  // a 0-d index gives one row
  REQUIRE(one.shape() == Shape{2});
  REQUIRE(one.to_vector<float>() == std::vector<float>{4, 5});
  // A transposed weight reads the same rows as its contiguous copy.
  Tensor wt = det_uniform({3, 5}, 90).t();
  REQUIRE(embedding(wt, i64({4, 2})).to_vector<double>() == embedding(wt.contiguous(), i64({4, 2})).to_vector<double>());
}

TEST_CASE("embedding: gradients, padding_idx and repeated indices", "[index]") {
  Tensor idx = i64({1, 3, 1, 0, 3, 3}, {2, 3});
  check_gradients("embedding", [&](const std::vector<Tensor>& in) { return embedding(in[0], idx); },
                  {det_uniform({4, 3}, 100)});
  // With padding: row 3 gets no gradient; the numeric check agrees only where it is not
  // padding, so compare by hand.
  Tensor w = det_uniform({4, 3}, 101).set_requires_grad();
  Tensor g = det_uniform({2, 3, 3}, 102);
  embedding(w, idx, 3).backward(g);
  std::vector<double> gv = g.to_vector<double>();
  std::vector<double> expect(12, 0.0);
  const std::vector<int64_t> iv = {1, 3, 1, 0, 3, 3};
  for (size_t p = 0; p < iv.size(); ++p)
    if (iv[p] != 3)
      for (size_t k = 0; k < 3; ++k) expect[(size_t)iv[p] * 3 + k] += gv[p * 3 + k];
  REQUIRE(w.grad().to_vector<double>() == expect);
  // The forward still reads the padding row.
  REQUIRE(embedding(w, i64({3})).to_vector<double>() == index_select(w, 0, i64({3})).to_vector<double>());
  // Gradcheck with the padding positions masked out of the output: the loss then does not
  // depend on row 3, whose numeric gradient (0) must match the analytic one.
  Tensor keep = Tensor::from_vector(std::vector<double>{1, 0, 1, 1, 0, 0}, {2, 3, 1});
  check_gradients("embedding with padding_idx",
                  [&](const std::vector<Tensor>& in) { return mul(embedding(in[0], idx, 3), keep); },
                  {det_uniform({4, 3}, 103)});
}

// ---------------------------------------------------------------- big inputs: parallel paths

TEST_CASE("accumulating kernels are exact and thread-count independent", "[index]") {
  // Embedding backward: few rows (dim 0, outer = 1), many repeated indices: the inner range
  // is split across threads.
  const int64_t V = 10, D = 64, N = 1000;
  std::vector<int64_t> iv = det_indices(N, V, 110);
  Tensor g = det_uniform({N, D}, 111).to(DType::f32);
  auto grad_with = [&](int threads) {
    return with_threads(threads, [&] {
      Tensor w = Tensor::zeros({V, D}).set_requires_grad();
      embedding(w, i64(iv)).backward(g);
      return w.grad().to_vector<float>();
    });
  };
  std::vector<float> g1 = grad_with(1), g2 = grad_with(2);
  REQUIRE(g1 == g2);
  // Against the serial reference, summed in float in the same order (so bit-exact).
  std::vector<float> ref((size_t)(V * D), 0.f);
  std::vector<float> gv = g.to_vector<float>();
  for (int64_t j = 0; j < N; ++j)
    for (int64_t k = 0; k < D; ++k) ref[(size_t)(iv[(size_t)j] * D + k)] += gv[(size_t)(j * D + k)];
  REQUIRE(g1 == ref);

  // index_select backward along a middle dim with a strided gradient (the plain path).
  Tensor x = det_uniform({8, 5, 40}, 112);
  std::vector<int64_t> iv2 = det_indices(200, 5, 113);
  Tensor gt = det_uniform({40, 200, 8}, 114).permute({2, 1, 0});  // (8, 200, 40), strided
  auto grad2_with = [&](int threads) {
    return with_threads(threads, [&] {
      Tensor xr = x.detach().clone().set_requires_grad();
      index_select(xr, 1, i64(iv2)).backward(gt);
      return xr.grad().to_vector<double>();
    });
  };
  std::vector<double> a1 = grad2_with(1), a2 = grad2_with(2);
  REQUIRE(a1 == a2);
  REQUIRE(a1 == reference::index_add(std::vector<double>(8 * 5 * 40, 0.0), {8, 5, 40}, 1, iv2, gt.to_vector<double>()));

  // gather backward (scatter_add) along dim 0 with many repeats.
  Tensor xg = det_uniform({4, 300}, 115);
  std::vector<int64_t> iv3 = det_indices(120 * 300, 4, 116);
  Tensor idx3 = i64(iv3, {120, 300});
  auto grad3_with = [&](int threads) {
    return with_threads(threads, [&] {
      Tensor xr = xg.detach().clone().set_requires_grad();
      gather(xr, 0, idx3).backward(Tensor::ones({120, 300}, DType::f64));
      return xr.grad().to_vector<double>();
    });
  };
  std::vector<double> s1 = grad3_with(1), s2 = grad3_with(2);
  REQUIRE(s1 == s2);
  std::vector<double> counts(4 * 300, 0.0);
  for (int64_t p = 0; p < 120 * 300; ++p) counts[(size_t)(iv3[(size_t)p] * 300 + p % 300)] += 1.0;
  REQUIRE(s1 == counts);

  // Large forwards against the references.
  Tensor big = det_uniform({300, 200}, 117).to(DType::f32);
  std::vector<int64_t> rows = det_indices(250, 300, 118);
  REQUIRE(index_select(big, 0, i64(rows)).to_vector<double>() == reference::index_select(big.to_vector<double>(), {300, 200}, 0, rows));
  REQUIRE(index_select(big.t(), 1, i64(rows)).to_vector<double>() ==
          reference::index_select(big.t().to_vector<double>(), {200, 300}, 1, rows));
  std::vector<int64_t> cols = det_indices(300 * 150, 200, 119);
  REQUIRE(gather(big, 1, i64(cols, {300, 150})).to_vector<double>() ==
          reference::gather(big.to_vector<double>(), {300, 200}, 1, cols, {300, 150}));
}

// ---------------------------------------------------------------- errors

TEST_CASE("indexing errors name the op, the index and what was expected", "[index]") {
  Tensor x = Tensor::zeros({5, 3});
  REQUIRE_THROWS_WITH(index_select(x, 0, i64({0, 1, 4, 7})),
                      Catch::Contains("index_select: index 7 at position 3 is out of range for dim 0 of size 5"));
  REQUIRE_THROWS_WITH(index_select(x, -1, i64({-1})),
                      Catch::Contains("index_select: index -1 at position 0 is out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(index_select(x, 0, Tensor::from_vector(std::vector<int32_t>{5})),
                      Catch::Contains("index 5 at position 0 is out of range"));
  REQUIRE_THROWS_WITH(index_select(x, 0, Tensor::zeros({2})), Catch::Contains("index must be an int64 or int32 tensor, got float32"));
  REQUIRE_THROWS_WITH(index_select(x, 0, Tensor::zeros({2}, DType::u8)), Catch::Contains("got uint8"));
  REQUIRE_THROWS_WITH(index_select(x, 0, i64({0, 1}, {1, 2})), Catch::Contains("index must be 1-D"));
  REQUIRE_THROWS_WITH(index_select(x, 2, i64({0})), Catch::Contains("dim 2 is out of range"));
  REQUIRE_THROWS_WITH(index_select(x, -3, i64({0})), Catch::Contains("dim -3 is out of range"));
  REQUIRE_THROWS_WITH(index_select(Tensor::scalar(1), 0, i64({0})), Catch::Contains("at least one dim"));
  REQUIRE_THROWS_WITH(index_select(x, 0, Tensor()), Catch::Contains("index is an undefined tensor"));

  REQUIRE_THROWS_WITH(gather(x, 1, i64({0, 1, 2, 3}, {2, 2})),
                      Catch::Contains("gather: index 3 at position [1, 1] is out of range for dim 1 of size 3"));
  REQUIRE_THROWS_WITH(gather(x, 1, i64({0, 1})), Catch::Contains("gather: index must have the input's rank (2)"));
  REQUIRE_THROWS_WITH(gather(x, 0, i64({0, 0, 0, 0}, {1, 4})), Catch::Contains("larger than the input's shape"));
  REQUIRE_THROWS_WITH(gather(x, 0, Tensor::zeros({1, 1}, DType::f64)), Catch::Contains("got float64"));
  REQUIRE_THROWS_WITH(gather(x, 5, i64({0}, {1, 1})), Catch::Contains("dim 5 is out of range"));

  Tensor w = Tensor::zeros({4, 2});
  REQUIRE_THROWS_WITH(embedding(w, i64({0, 1, 2, 4, 9, 0}, {2, 3})),
                      Catch::Contains("embedding: index 4 at position [1, 0] is out of range for dim 0 of size 4"));
  REQUIRE_THROWS_WITH(embedding(w, i64({0}), 4), Catch::Contains("padding_idx 4 is out of range"));
  REQUIRE_THROWS_WITH(embedding(Tensor::zeros({4}), i64({0})), Catch::Contains("weight must be 2-D"));
  REQUIRE_THROWS_WITH(embedding(w, Tensor::zeros({2})), Catch::Contains("embedding: index must be an int64 or int32"));
}
