// The autograd engine: accumulation, graph freeing, retain_graph, no-grad, deep graphs.
#include <catch2/catch.hpp>

#include "gradcheck.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "runtime/autograd.h"

using namespace ocrt;
using ocrt::testing::det_uniform;

TEST_CASE("leaves, requires_grad and grad_fn", "[autograd]") {
  Tensor x = Tensor::ones({3}).set_requires_grad();
  REQUIRE(x.is_leaf());
  Tensor y = mul(x, 2.0);
  REQUIRE(y.requires_grad());
  REQUIRE(!y.is_leaf());
  REQUIRE(y.grad_fn()->name == "mul");
  REQUIRE_THROWS_WITH(y.set_requires_grad(false), Catch::Contains("leaf"));
  REQUIRE_THROWS_WITH(Tensor::ones({2}, DType::i64).set_requires_grad(), Catch::Contains("float"));
  Tensor d = y.detach();
  REQUIRE(!d.requires_grad());
  REQUIRE(d.storage() == y.storage());
  Tensor plain = Tensor::ones({3});
  REQUIRE(!mul(plain, 2.0).requires_grad());
}

TEST_CASE("gradients accumulate across backward calls until zero_grad", "[autograd]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3}).set_requires_grad();
  sum(mul(x, x)).backward();
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{2, 4, 6});
  sum(mul(x, x)).backward();
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{4, 8, 12});
  x.zero_grad();
  REQUIRE(!x.grad().defined());
  sum(x).backward();
  REQUIRE(x.grad().to_vector<double>() == std::vector<double>{1, 1, 1});
}

TEST_CASE("a tensor used twice gets both gradients", "[autograd]") {
  Tensor x = Tensor::from_vector(std::vector<double>{3}).set_requires_grad();
  Tensor y = add(mul(x, x), mul(x, 5.0));  // y = x^2 + 5x, dy/dx = 2x + 5
  y.backward(Tensor::ones({1}, DType::f64));
  REQUIRE(x.grad().item() == 11);
  // add's backward hands one tensor to both inputs; the leaves' grads must not alias.
  Tensor a = Tensor::zeros({2}, DType::f64).set_requires_grad();
  Tensor b = Tensor::zeros({2}, DType::f64).set_requires_grad();
  sum(add(a, b)).backward();
  REQUIRE(a.grad().storage() != b.grad().storage());
}

TEST_CASE("the leaf hook reports each leaf once, when its gradient is final, nearest the loss first",
          "[autograd]") {
  // A chain w1 -> w2 -> w3 -> loss, where w1 is also used a second time near the loss, and an
  // unused leaf; the hook records, when called, which leaf it is and its gradient then.
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2});
  Tensor w1 = Tensor::from_vector(std::vector<double>{0.5, -1}).set_requires_grad();
  Tensor w2 = Tensor::from_vector(std::vector<double>{2, 3}).set_requires_grad();
  Tensor w3 = Tensor::from_vector(std::vector<double>{-1, 4}).set_requires_grad();
  Tensor unused = Tensor::ones({2}, DType::f64).set_requires_grad();
  std::vector<std::pair<const TensorImpl*, std::vector<double>>> seen;
  {
    LeafGradHook hook([&](const TensorImpl* leaf) {
      Tensor t = leaf == w1.impl() ? w1 : leaf == w2.impl() ? w2 : leaf == w3.impl() ? w3 : unused;
      seen.push_back({leaf, t.grad().defined() ? t.grad().to_vector<double>() : std::vector<double>{}});
    });
    Tensor h = mul(mul(mul(x, w1), w2), w3);        // x*w1*w2*w3
    sum(add(h, mul(w1, 10.0))).backward();          // + 10*w1
  }
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].first == w3.impl());  // nearest the loss
  CHECK(seen[1].first == w2.impl());
  CHECK(seen[2].first == w1.impl());
  for (const auto& [leaf, g] : seen) {
    const Tensor& t = leaf == w1.impl() ? w1 : leaf == w2.impl() ? w2 : w3;
    CHECK(g == t.grad().to_vector<double>());  // nothing was added after the report
  }
  CHECK(w1.grad().to_vector<double>() == std::vector<double>{1 * 2 * -1 + 10, 2 * 3 * 4 + 10});
  CHECK(!unused.grad().defined());
  // Without a hook (it was destroyed) nothing is reported.
  const size_t before = seen.size();
  sum(mul(x, w2)).backward();
  CHECK(seen.size() == before);
  // Hooks nest; a leaf that is itself a root is reported too; an exception from the hook stops
  // the pass with that error.
  int outer = 0, inner = 0;
  LeafGradHook a([&](const TensorImpl*) { ++outer; });
  {
    LeafGradHook b([&](const TensorImpl*) { ++inner; });
    w3.backward(Tensor::ones({2}, DType::f64));
  }
  CHECK(inner == 1);
  CHECK(outer == 0);
  {
    LeafGradHook c([&](const TensorImpl*) { throw std::runtime_error("bucket failed"); });
    REQUIRE_THROWS_WITH(sum(mul(x, w2)).backward(), Catch::Contains("bucket failed"));
  }
  sum(mul(x, w2)).backward();
  CHECK(outer == 1);
}

TEST_CASE("backward needs a gradient for non-scalars", "[autograd]") {
  Tensor x = Tensor::ones({2, 2}).set_requires_grad();
  Tensor y = mul(x, 3.0);
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("one-element"));
  REQUIRE_THROWS_WITH(y.backward(Tensor::ones({3})), Catch::Contains("shape"));
  y.backward(Tensor::full({2, 2}, 2.0));
  REQUIRE(x.grad().to_vector<float>() == std::vector<float>(4, 6.f));
  REQUIRE_THROWS_WITH(Tensor::ones({1}).backward(), Catch::Contains("does not require grad"));
}

TEST_CASE("the graph is freed after backward unless retain_graph", "[autograd]") {
  Tensor x = Tensor::from_vector(std::vector<double>{2}).set_requires_grad();
  Tensor y = sum(exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  REQUIRE(x.grad().item() == Approx(2 * std::exp(2.0)));
  REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("second time"));
}

TEST_CASE("no-grad guard records nothing and restores the mode", "[autograd]") {
  Tensor x = Tensor::ones({2}).set_requires_grad();
  {
    NoGradGuard g;
    REQUIRE(!grad_enabled());
    Tensor y = mul(x, 2.0);
    REQUIRE(!y.requires_grad());
    REQUIRE(y.grad_fn() == nullptr);
    {
      NoGradGuard inner;
    }
    REQUIRE(!grad_enabled());
  }
  REQUIRE(grad_enabled());
}

TEST_CASE("in-place ops refuse tensors that require grad", "[autograd]") {
  Tensor w = Tensor::ones({2}).set_requires_grad();
  REQUIRE_THROWS_WITH(w.fill_(0), Catch::Contains("in-place"));
  REQUIRE_THROWS_WITH(add_(w, Tensor::ones({2})), Catch::Contains("in-place"));
  NoGradGuard g;  // as an optimizer does
  add_(w, Tensor::ones({2}), -0.5);
  REQUIRE(w.to_vector<float>() == std::vector<float>{0.5f, 0.5f});
  mul_(w, 4.0);
  REQUIRE(w.to_vector<float>() == std::vector<float>{2.f, 2.f});
}

TEST_CASE("a 100k-node graph backpropagates and is destroyed without deep recursion", "[autograd]") {
  const int n = 100000;
  Tensor x = Tensor::from_vector(std::vector<double>{1.0}).set_requires_grad();
  Tensor y = x;
  for (int i = 0; i < n; ++i) y = mul(y, 1.00001);
  y.backward(Tensor::ones({1}, DType::f64));
  REQUIRE(x.grad().item() == Approx(std::pow(1.00001, n)).epsilon(1e-9));
  // A chain that is never backpropagated must also be freed without recursion.
  Tensor z = x;
  for (int i = 0; i < n; ++i) z = add(z, 1.0);
  z = Tensor();
  SUCCEED("destroyed");
}

TEST_CASE("gradients flow through views", "[autograd][views]") {
  using ocrt::testing::check_gradients;
  Tensor x = det_uniform({2, 3, 4}, 1);
  check_gradients("permute", [](auto& in) { return in[0].permute({2, 0, 1}).contiguous(); }, {x});
  check_gradients("transpose+reshape", [](auto& in) { return in[0].transpose(0, 2).reshape({4, 6}); }, {x});
  check_gradients("narrow", [](auto& in) { return in[0].narrow(1, 1, 2); }, {x});
  check_gradients("slice step", [](auto& in) { return in[0].slice(2, 1, 4, 2); }, {x});
  check_gradients("select", [](auto& in) { return in[0].select(0, 1); }, {x});
  check_gradients("slice of transposed", [](auto& in) { return in[0].transpose(1, 2).slice(1, 0, 3, 2); }, {x});
  check_gradients("expand", [](auto& in) { return in[0].narrow(1, 0, 1).expand({5, 2, 3, 4}); }, {x});
  check_gradients("squeeze/unsqueeze",
                  [](auto& in) { return in[0].narrow(1, 0, 1).squeeze(1).unsqueeze(0).unsqueeze(-1); }, {x});
  check_gradients("flatten", [](auto& in) { return in[0].flatten(1); }, {x});
  check_gradients("clone", [](auto& in) { return mul(in[0].clone(), in[0]); }, {x});
  check_gradients("dtype round trip", [](auto& in) { return in[0].to(DType::f32).to(DType::f64); }, {x},
                  {1e-3, 1e-3, 1e-6});
}

TEST_CASE("a leaf's first gradient is its own: taken when nothing else holds it, else copied", "[autograd]") {
  // Two leaves handed the same tensor (add's backward gives one gradient to both inputs), the
  // seed the caller passes, and a node whose backward returns a tensor its closure and the
  // caller also hold: every .grad must be a tensor of its own, which the optimizers may change
  // in place without touching anything else.
  Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3}).set_requires_grad();
  Tensor b = Tensor::from_vector(std::vector<float>{4, 5, 6}).set_requires_grad();
  Tensor seed = Tensor::from_vector(std::vector<float>{1, 1, 1});
  add(a, b).backward(seed);
  REQUIRE(a.grad().defined());
  REQUIRE(b.grad().defined());
  CHECK(a.grad().storage() != b.grad().storage());
  CHECK(a.grad().storage() != seed.storage());
  CHECK(b.grad().storage() != seed.storage());
  a.grad().fill_(7);
  CHECK(b.grad().to_vector<float>() == std::vector<float>{1, 1, 1});
  CHECK(seed.to_vector<float>() == std::vector<float>{1, 1, 1});

  // A leaf as a root: its gradient is the seed, copied.
  Tensor c = Tensor::from_vector(std::vector<float>{1, 2}).set_requires_grad();
  Tensor c_seed = Tensor::from_vector(std::vector<float>{3, 4});
  c.backward(c_seed);
  CHECK(c.grad().storage() != c_seed.storage());

  // A backward that hands back a tensor its closure keeps and the caller holds.
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2}).set_requires_grad();
  Tensor held = Tensor::from_vector(std::vector<float>{5, 6});
  Tensor y = Tensor::from_vector(std::vector<float>{0, 0});
  record("hands back a held tensor", {x}, {y}, [held](const TensorList&) { return TensorList{held}; });
  sum(y).backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().storage() != held.storage());
  x.grad().fill_(0);
  CHECK(held.to_vector<float>() == std::vector<float>{5, 6});

  // A fresh result that nothing else holds becomes the .grad itself, contiguous, with the
  // right values (mul's backward: 2 * the incoming gradient).
  Tensor w = Tensor::from_vector(std::vector<float>{1, 2, 3}).set_requires_grad();
  sum(mul(w, 2.0)).backward();
  CHECK(w.grad().is_contiguous());
  CHECK(w.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
}
