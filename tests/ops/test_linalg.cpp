// matmul and linear: results against the plain-loop reference (runtime/cpu/linalg_reference.h) on
// every kind of shape the front-end folds into (B,M,K) @ (B,K,N), the kernel's own layouts
// (transposed, broadcast, copied), both threading paths, gradients, and error messages.
#include <catch2/catch.hpp>

#include <functional>

#include "gradcheck.h"
#include "runtime/backend.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/linalg_reference.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "runtime/threading.h"
#include "tolerance.h"

using namespace ocrt;
using ocrt::testing::check_gradients;
using ocrt::testing::det_uniform;
using ocrt::testing::require_close;
using ocrt::testing::require_within_bound;

namespace {

// Restores the thread count a test changed.
struct ThreadCountGuard {
  int saved = num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

Shape cat_shapes(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// torch.matmul computed the slow way: promote 1-D operands, broadcast and materialise the
// batch dims, run the plain-loop reference on (B,M,K) @ (B,K,N), drop the promoted dims.
Tensor expected_matmul(const Tensor& a, const Tensor& b) {
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  Shape ba(a2.shape().begin(), a2.shape().end() - 2), bb(b2.shape().begin(), b2.shape().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "expected_matmul");
  const int64_t M = a2.size(-2), K = a2.size(-1), N = b2.size(-1), B = numel_of(batch);
  Tensor a3 = a2.expand(cat_shapes(batch, {M, K})).contiguous().view({B, M, K});
  Tensor b3 = b2.expand(cat_shapes(batch, {K, N})).contiguous().view({B, K, N});
  Tensor out = Tensor::empty({B, M, N}, a.dtype());
  cpu::matmul_reference(a3, b3, out);
  Shape shape = batch;
  if (a.dim() > 1) shape.push_back(M);
  if (b.dim() > 1) shape.push_back(N);
  return out.view(shape);
}

// out against the reference for a product with inner dimension K. float32: each element within
// the forward-error bound of its dot product, 2 gamma_K sum_k |a_ik b_kj| (tests/tolerance.h), the
// sums of |terms| being the reference run on |a| and |b|. float64 (the reference sums in double
// too): the same bound is K 2^-53 K <= 5e-12 for the K <= 200 and |values| < 1 used here, so 1e-11
// absolute holds for any cancellation.
void require_matmul_close(const Tensor& out, const Tensor& expected, const Tensor& a, const Tensor& b, int64_t K,
                          const std::function<Tensor(const Tensor&, const Tensor&)>& product) {
  if (out.dtype() == DType::f32) {
    require_within_bound(out, expected, product(abs(a), abs(b)), K, "matmul float32");
  } else {
    REQUIRE(K <= 200);
    require_close(out, expected, 1e-11, 1e-11);
  }
}

void check_matmul(const Tensor& a, const Tensor& b, const Shape& expected_shape) {
  INFO("a " << shape_str(a.shape()) << " strides " << shape_str(a.strides()) << ", b " << shape_str(b.shape())
            << " strides " << shape_str(b.strides()));
  Tensor out = matmul(a, b);
  REQUIRE(out.shape() == expected_shape);
  REQUIRE(out.dtype() == a.dtype());
  require_matmul_close(out, expected_matmul(a, b), a, b, a.size(-1), expected_matmul);
}

// Calls the CPU kernel directly on (B,M,K) @ (B,K,N) views and compares with the reference.
void check_kernel(const Tensor& a, const Tensor& b) {
  INFO("kernel: a " << shape_str(a.shape()) << " strides " << shape_str(a.strides()) << ", b "
                    << shape_str(b.shape()) << " strides " << shape_str(b.strides()));
  Tensor out = Tensor::empty({a.size(0), a.size(1), b.size(2)}, a.dtype());
  Tensor ref = Tensor::empty(out.shape(), a.dtype());
  kernel(Device::cpu(), &TensorBackend::matmul, "matmul")(a, b, out);
  cpu::matmul_reference(a, b, ref);
  require_matmul_close(out, ref, a, b, a.size(2), [](const Tensor& x, const Tensor& y) {
    Tensor r = Tensor::empty({x.size(0), x.size(1), y.size(2)}, x.dtype());
    cpu::matmul_reference(x, y, r);
    return r;
  });
}

}  // namespace

TEST_CASE("matmul matches the reference on torch.matmul shapes", "[linalg]") {
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    auto u = [dt](const Shape& s, uint64_t seed) { return det_uniform(s, seed, -1, 1, dt); };
    // 1-D operands
    check_matmul(u({5}, 1), u({5}, 2), {});
    check_matmul(u({4}, 3), u({4, 3}, 4), {3});
    check_matmul(u({3, 4}, 5), u({4}, 6), {3});
    check_matmul(u({4}, 7), u({2, 4, 3}, 8), {2, 3});
    check_matmul(u({2, 3, 4}, 9), u({4}, 10), {2, 3});
    // plain and odd-sized matrices, size-1 dims
    check_matmul(u({3, 4}, 11), u({4, 5}, 12), {3, 5});
    check_matmul(u({17, 33}, 13), u({33, 29}, 14), {17, 29});
    check_matmul(u({1, 1}, 15), u({1, 1}, 16), {1, 1});
    check_matmul(u({1, 7}, 17), u({7, 1}, 18), {1, 1});
    check_matmul(u({7, 1}, 19), u({1, 5}, 20), {7, 5});
    // batches: batch 1, equal batches, broadcast batches, only one side batched
    check_matmul(u({1, 3, 4}, 21), u({1, 4, 5}, 22), {1, 3, 5});
    check_matmul(u({6, 3, 4}, 23), u({6, 4, 5}, 24), {6, 3, 5});
    check_matmul(u({2, 1, 3, 4}, 25), u({5, 4, 6}, 26), {2, 5, 3, 6});
    check_matmul(u({4, 3, 5}, 27), u({5, 2}, 28), {4, 3, 2});        // folded into one GEMM
    check_matmul(u({2, 3, 3, 5}, 29), u({1, 5, 2}, 30), {2, 3, 3, 2});  // folded, b batch of 1
    check_matmul(u({3, 5}, 31), u({4, 5, 2}, 32), {4, 3, 2});
    check_matmul(u({3, 1, 2, 5}, 33), u({1, 4, 5, 3}, 34), {3, 4, 2, 3});
  }
}

TEST_CASE("matmul reads transposed and strided operands", "[linalg]") {
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    auto u = [dt](const Shape& s, uint64_t seed) { return det_uniform(s, seed, -1, 1, dt); };
    Tensor a = u({4, 3}, 1), b = u({5, 4}, 2);
    check_matmul(a.t(), b.t(), {3, 5});                        // both column-major
    check_matmul(a.t(), u({4, 6}, 3), {3, 6});
    check_matmul(u({6, 3}, 4), a.t().t().t(), {6, 4});
    check_matmul(u({2, 4, 3}, 5).transpose(1, 2), u({2, 5, 4}, 6).transpose(-1, -2), {2, 3, 5});
    // batch dims that cannot be merged without a copy (a permuted batch)
    check_matmul(u({3, 2, 4, 5}, 7).transpose(0, 1), u({5, 6}, 8), {2, 3, 4, 6});
    check_matmul(u({3, 2, 4, 5}, 9).transpose(0, 1), u({2, 3, 5, 6}, 10), {2, 3, 4, 6});
    // steps in the inner dims: neither row- nor column-major, the kernel copies
    check_matmul(u({4, 10}, 11).slice(1, 0, 10, 2), u({10, 3}, 12).slice(0, 0, 10, 2), {4, 3});
    check_matmul(u({8, 6}, 13).slice(0, 0, 8, 2).slice(1, 0, 6, 2), u({3, 7}, 14), {4, 7});
    // an expanded (stride 0) operand
    check_matmul(u({1, 5}, 15).expand({3, 5}), u({5, 2}, 16), {3, 2});
    check_matmul(u({4, 1}, 17).expand({4, 6}), u({6, 3}, 18), {4, 3});
  }
}

TEST_CASE("matmul kernel layouts against the reference", "[linalg]") {
  auto u = [](const Shape& s, uint64_t seed) { return det_uniform(s, seed, -1, 1, DType::f32); };
  Tensor a = u({3, 5, 7}, 1), b = u({3, 7, 4}, 2);
  check_kernel(a, b);
  check_kernel(u({3, 7, 5}, 3).transpose(1, 2), u({3, 4, 7}, 4).transpose(1, 2));  // column-major
  check_kernel(u({1, 5, 7}, 5).expand({3, 5, 7}), b);                               // batch stride 0
  check_kernel(a, u({7, 4}, 6).unsqueeze(0).expand({3, 7, 4}));
  check_kernel(u({3, 5, 14}, 7).slice(2, 0, 14, 2), b);                              // copied
  check_kernel(u({1, 5, 14}, 8).slice(2, 0, 14, 2).expand({3, 5, 7}), b);           // copied once
  check_kernel(u({3, 5, 7}, 9).slice(1, 0, 5, 1), u({3, 7, 9}, 10).narrow(2, 2, 4));  // row stride > cols
}

TEST_CASE("matmul on both threading paths", "[linalg]") {
  ThreadCountGuard guard;
  set_num_threads(2);
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    auto u = [dt](const Shape& s, uint64_t seed) { return det_uniform(s, seed, -1, 1, dt); };
    // One large GEMM, cut into bands of rows (M >= N) or of columns (N > M).
    check_matmul(u({300, 200}, 1), u({200, 100}, 2), {300, 100});
    check_matmul(u({200, 300}, 3).t(), u({100, 200}, 4).t(), {300, 100});
    check_matmul(u({70, 90}, 5), u({90, 301}, 6), {70, 301});
    check_matmul(u({90, 70}, 7).t(), u({301, 90}, 8).t(), {70, 301});
    // Many small GEMMs, one task each.
    check_matmul(u({64, 9, 8}, 9), u({64, 8, 7}, 10), {64, 9, 7});
    check_matmul(u({33, 9, 8}, 11), u({8, 7}, 12).unsqueeze(0).expand({33, 8, 7}), {33, 9, 7});
    // A batch that does not divide among the threads: products are cut in bands too.
    check_matmul(u({3, 150, 140}, 13), u({3, 140, 130}, 14), {3, 150, 130});
  }
  // An odd thread count, and one thread.
  for (int n : {3, 1}) {
    set_num_threads(n);
    auto u = [](const Shape& s, uint64_t seed) { return det_uniform(s, seed, -1, 1, DType::f32); };
    check_matmul(u({5, 97, 64}, 15), u({64, 83}, 16), {5, 97, 83});
    check_matmul(u({2, 97, 64}, 17), u({2, 64, 130}, 18), {2, 97, 130});
  }
  // The same inputs give bit-identical results on a fixed thread count.
  Tensor a = det_uniform({257, 190}, 11, -1, 1, DType::f32), b = det_uniform({190, 133}, 12, -1, 1, DType::f32);
  REQUIRE(matmul(a, b).to_vector<float>() == matmul(a, b).to_vector<float>());
}

#if defined(OCRT_CPU_SGEMM)
TEST_CASE("a wide product over a long K (run transposed) is the kernel's direct product, bit for bit", "[linalg]") {
  // runtime/cpu/linalg.cpp runs C = A B with N >= 2M and K >= N as C^T = B^T A^T and transposes:
  // the same k-ordered sums in the same blocks, so the same bits as the kernel called on C
  // directly; near the reference too. K past one KC block; A as a weight gradient's g^T.
  if (!cpu::sgemm_available()) return;  // the generic path: Eigen, tested elsewhere
  ThreadCountGuard guard;
  for (int n : {1, 2, 3}) {
    set_num_threads(n);
    INFO(n << " threads");
    for (auto [M, N, K] : {std::array<int64_t, 3>{20, 70, 1100}, {7, 130, 600}, {33, 66, 66}}) {
      INFO(M << " x " << N << " x " << K);
      const Tensor g = det_uniform({K, M}, 31, -1, 1, DType::f32), x = det_uniform({K, N}, 32, -1, 1, DType::f32);
      const Tensor a = g.t();
      const Tensor c = matmul(a, x);
      std::vector<float> direct((size_t)(M * N));
      cpu::sgemm(M, N, K, g.data<float>(), 1, M, x.data<float>(), N, 1, direct.data(), N);
      CHECK(c.to_vector<float>() == direct);
      check_matmul(a, x, {M, N});
    }
  }
}
#endif

TEST_CASE("matmul with empty dims", "[linalg]") {
  Tensor a = Tensor::ones({0, 3}), b = Tensor::ones({3, 4});
  REQUIRE(matmul(a, b).shape() == Shape{0, 4});
  Tensor e = matmul(Tensor::ones({3, 0}), Tensor::ones({0, 4}));  // an empty sum is 0
  REQUIRE(e.shape() == Shape{3, 4});
  require_close(e, Tensor::zeros({3, 4}), 0, 0);
  REQUIRE(matmul(Tensor::ones({2, 0, 3, 0}), Tensor::ones({0, 4})).shape() == Shape{2, 0, 3, 4});
}

TEST_CASE("matmul gradients", "[linalg]") {
  auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
  check_gradients("matmul 2-D", mm, {det_uniform({3, 4}, 1), det_uniform({4, 5}, 2)});
  check_gradients("matmul dot", mm, {det_uniform({4}, 3), det_uniform({4}, 4)});
  check_gradients("matmul vec-mat", mm, {det_uniform({4}, 5), det_uniform({4, 3}, 6)});
  check_gradients("matmul mat-vec", mm, {det_uniform({2, 3, 4}, 7), det_uniform({4}, 8)});
  check_gradients("matmul vec-batch", mm, {det_uniform({4}, 9), det_uniform({2, 4, 3}, 10)});
  check_gradients("matmul batch-mat (folded)", mm, {det_uniform({2, 3, 4}, 11), det_uniform({4, 5}, 12)});
  check_gradients("matmul mat-batch", mm, {det_uniform({3, 4}, 13), det_uniform({2, 4, 5}, 14)});
  check_gradients("matmul broadcast batch", mm, {det_uniform({2, 1, 3, 4}, 15), det_uniform({5, 4, 2}, 16)});
  check_gradients("matmul batch of one", mm, {det_uniform({2, 2, 3, 4}, 17), det_uniform({1, 4, 2}, 18)});
  check_gradients("matmul transposed", [](const std::vector<Tensor>& in) { return matmul(in[0].t(), in[1].transpose(0, 1)); },
                  {det_uniform({4, 3}, 19), det_uniform({5, 4}, 20)});

  // Only one input requires grad: the other gets none.
  Tensor a = det_uniform({3, 4}, 21).set_requires_grad(), b = det_uniform({4, 2}, 22);
  sum(matmul(a, b)).backward();
  REQUIRE(a.grad().defined());
  REQUIRE_FALSE(b.grad().defined());
  // d/da sum(a @ b) = ones @ b^T: every row is the row sums of b.
  require_close(a.grad(), matmul(Tensor::ones({3, 2}, DType::f64), b.t()), 1e-12, 1e-12);
}

TEST_CASE("linear forward and gradients", "[linalg]") {
  Tensor x = det_uniform({2, 3, 4}, 1), w = det_uniform({5, 4}, 2), bias = det_uniform({5}, 3);
  Tensor y = linear(x, w, bias);
  REQUIRE(y.shape() == Shape{2, 3, 5});
  require_close(y, add(matmul(x, w.t()), bias), 1e-12, 1e-12);
  require_close(linear(x, w), matmul(x, w.t()), 1e-12, 1e-12);
  REQUIRE(linear(det_uniform({4}, 4), w).shape() == Shape{5});
  Tensor xf = x.to(DType::f32), wf = w.to(DType::f32), bf = bias.to(DType::f32);
  // float32 against float64: 4 products and the bias, within 2 gamma_5 of the sum of |terms|.
  require_within_bound(linear(xf, wf, bf), add(matmul(x, w.t()), bias),
                       add(matmul(abs(x), abs(w).t()), abs(bias)), 5, "linear float32");
  // Non-contiguous input and weight
  Tensor xt = det_uniform({4, 2, 3}, 5).permute({1, 2, 0}), wt = det_uniform({4, 5}, 6).t();
  require_close(linear(xt, wt, bias), add(matmul(xt, wt.t()), bias), 1e-12, 1e-12);

  auto lin_b = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
  auto lin = [](const std::vector<Tensor>& in) { return linear(in[0], in[1]); };
  check_gradients("linear with bias, 3-D input", lin_b, {x, w, bias});
  check_gradients("linear without bias, 3-D input", lin, {x, w});
  check_gradients("linear 2-D input", lin_b, {det_uniform({6, 4}, 7), w, bias});
  check_gradients("linear 1-D input", lin_b, {det_uniform({4}, 8), w, bias});
  check_gradients("linear permuted input", [](const std::vector<Tensor>& in) {
    return linear(in[0].permute({1, 2, 0}), in[1], in[2]);
  }, {det_uniform({4, 2, 3}, 9), w, bias});
}

TEST_CASE("matmul_into writes matmul's result into the given rows, bit for bit", "[linalg]") {
  // The LSTM's recurrent step in inference: a few rows, a transposed-then-copied right operand,
  // the same out written again and again (ops/lstm.cpp). Every size of rows that the GEMM's
  // tiles split differently, float32 and float64, and a strided left operand.
  for (DType dt : {DType::f32, DType::f64}) {
    for (int64_t rows : {1, 3, 4, 5, 10, 14, 15, 32}) {
      INFO(dtype_name(dt) << ", " << rows << " rows");
      const Tensor a = det_uniform({rows, 64}, 1 + rows, -1, 1, dt);
      const Tensor b = det_uniform({256, 64}, 2, -1, 1, dt).t().contiguous();
      const Tensor out = Tensor::full({rows, 256}, 7.0, dt);
      for (int pass = 0; pass < 2; ++pass) {  // written over, not added to
        matmul_into(a, b, out);
        const Tensor expected = matmul(a, b);
        REQUIRE(out.shape() == expected.shape());
        REQUIRE(sum(abs(sub(out, expected))).item() == 0.0);
      }
      const Tensor wide = det_uniform({rows, 128}, 3, -1, 1, dt);
      const Tensor strided = wide.slice(1, 0, 128, 2);  // every other column
      matmul_into(strided, b, out);
      REQUIRE(sum(abs(sub(out, matmul(strided, b)))).item() == 0.0);
    }
  }
  const Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({3, 4});
  REQUIRE_THROWS_WITH(matmul_into(a, b, Tensor::empty({2, 5})),
                      Catch::Contains("matmul_into") && Catch::Contains("[2, 5]"));
  REQUIRE_THROWS_WITH(matmul_into(a, Tensor::ones({4, 4}), Tensor::empty({2, 4})),
                      Catch::Contains("matmul_into") && Catch::Contains("[4, 4]"));
  REQUIRE_THROWS_WITH(matmul_into(a, b, Tensor::empty({4, 2}).t()), Catch::Contains("contiguous"));
  REQUIRE_THROWS_WITH(matmul_into(a, b, Tensor::empty({2, 4}, DType::f64)), Catch::Contains("float32"));
  REQUIRE_THROWS_WITH(matmul_into(Tensor::ones({2, 2, 3}), b, Tensor::empty({2, 4})), Catch::Contains("2-D"));
  Tensor w = Tensor::ones({3, 4});
  w.set_requires_grad(true);
  REQUIRE_THROWS_WITH(matmul_into(a, w, Tensor::empty({2, 4})), Catch::Contains("gradient"));
}

TEST_CASE("matmul and linear reject bad arguments", "[linalg]") {
  Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({4, 5});
  REQUIRE_THROWS_WITH(matmul(a, b), Catch::Contains("matmul") && Catch::Contains("inner dimensions") &&
                                        Catch::Contains("[2, 3]") && Catch::Contains("[4, 5]"));
  REQUIRE_THROWS_WITH(matmul(Tensor::ones({3}), Tensor::ones({4})), Catch::Contains("matmul"));
  REQUIRE_THROWS_WITH(matmul(a, Tensor::ones({3, 2}, DType::f64)),
                      Catch::Contains("matmul") && Catch::Contains("float32") && Catch::Contains("float64"));
  REQUIRE_THROWS_WITH(matmul(Tensor::scalar(2.0), a), Catch::Contains("matmul") && Catch::Contains("at least 1 dim"));
  REQUIRE_THROWS_WITH(matmul(a, Tensor::scalar(2.0)), Catch::Contains("matmul"));
  REQUIRE_THROWS_WITH(matmul(Tensor::ones({2, 3}, DType::i64), Tensor::ones({3, 2}, DType::i64)),
                      Catch::Contains("matmul") && Catch::Contains("int64"));
  REQUIRE_THROWS_WITH(matmul(Tensor::ones({2, 2, 3}), Tensor::ones({3, 3, 4})),
                      Catch::Contains("matmul") && Catch::Contains("batch") && Catch::Contains("[2, 2, 3]"));
  REQUIRE_THROWS_WITH(matmul(Tensor(), a), Catch::Contains("matmul"));

  Tensor x = Tensor::ones({2, 4}), w = Tensor::ones({5, 4});
  REQUIRE_THROWS_WITH(linear(x, Tensor::ones({4})), Catch::Contains("linear") && Catch::Contains("2-D"));
  REQUIRE_THROWS_WITH(linear(Tensor::ones({2, 3}), w), Catch::Contains("linear") && Catch::Contains("in_features"));
  REQUIRE_THROWS_WITH(linear(x, w, Tensor::ones({4})), Catch::Contains("linear") && Catch::Contains("bias"));
  REQUIRE_THROWS_WITH(linear(x, w, Tensor::ones({5}, DType::f64)), Catch::Contains("linear"));
  REQUIRE_THROWS_WITH(linear(Tensor::scalar(1.0), w), Catch::Contains("linear"));
}
