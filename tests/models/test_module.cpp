// Module registry, state_dict round trips and their errors, train/eval, to(dtype), Linear's
// PyTorch-compatible shapes and initialisation bounds, Sequential naming.
#include <catch2/catch.hpp>

#include <cmath>
#include <thread>
#include <vector>

#include "models/layers.h"
#include "models/recognizer.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/reduce.h"

using namespace ocrt;
using namespace ocrt::nn;

namespace {

// A two-level model: "body.0" Linear(3,4), "body.1" ReLU, "body.2" Linear(4,2) without bias,
// plus a buffer "steps" (i64) on the top module.
struct Toy : Module {
  explicit Toy(Generator& gen) {
    body = register_module("body", std::make_shared<Sequential>());
    body->add(std::make_shared<Linear>(3, 4, true, gen));
    body->add(std::make_shared<ReLU>());
    body->add(std::make_shared<Linear>(4, 2, false, gen));
    steps = Tensor::zeros({1}, DType::i64);
    register_buffer("steps", &steps);
  }
  Tensor forward(const Tensor& x) override { return body->forward(x); }
  std::shared_ptr<Sequential> body;
  Tensor steps;
};

}  // namespace

TEST_CASE("modules name parameters and buffers like PyTorch's state_dict", "[module]") {
  Generator gen(1);
  Toy toy(gen);
  auto params = toy.named_parameters();
  REQUIRE(params.size() == 3);
  CHECK(params[0].first == "body.0.weight");
  CHECK(params[1].first == "body.0.bias");
  CHECK(params[2].first == "body.2.weight");
  CHECK(toy.num_parameters() == 3 * 4 + 4 + 4 * 2);
  for (auto& [n, t] : params) CHECK(t.requires_grad());
  auto sd = toy.state_dict();
  CHECK(sd.size() == 4);
  CHECK(sd.count("steps") == 1);
  CHECK(!sd.at("body.0.weight").requires_grad());
}

TEST_CASE("Linear initialises within PyTorch's bound and computes x W^T + b", "[module]") {
  Generator gen(7);
  Linear lin(16, 5, true, gen);
  CHECK(lin.weight.shape() == Shape{5, 16});
  CHECK(lin.bias.shape() == Shape{5});
  const double bound = 1.0 / std::sqrt(16.0);
  for (double v : lin.weight.to_vector<double>()) CHECK(std::abs(v) <= bound);
  for (double v : lin.bias.to_vector<double>()) CHECK(std::abs(v) <= bound);
  Tensor x = Tensor::ones({2, 16});
  Tensor y = lin(x);
  CHECK(y.shape() == Shape{2, 5});
  auto w = lin.weight.to_vector<double>(), b = lin.bias.to_vector<double>(), yv = y.to_vector<double>();
  for (int o = 0; o < 5; ++o) {
    double expect = b[o];
    for (int i = 0; i < 16; ++i) expect += w[o * 16 + i];
    CHECK(yv[o] == Approx(expect).epsilon(1e-5));
  }
}

TEST_CASE("load_state_dict copies values and keeps parameters trainable", "[module]") {
  Generator g1(1), g2(2);
  Toy a(g1), b(g2);
  b.load_state_dict(a.state_dict());
  for (auto& [n, t] : a.state_dict()) CHECK(b.state_dict().at(n).to_vector<double>() == t.to_vector<double>());
  Tensor y = sum(b(Tensor::ones({1, 3})));
  y.backward();
  CHECK(b.body->operator[](0).named_parameters()[0].second.grad().defined());
}

TEST_CASE("load_state_dict lists every missing, unexpected and mis-shaped tensor and changes nothing", "[module]") {
  Generator gen(1);
  Toy toy(gen);
  const auto before = toy.state_dict().at("body.0.bias").to_vector<double>();
  StateDict sd = toy.state_dict();
  sd.erase("body.2.weight");
  sd["body.9.weight"] = Tensor::zeros({1});
  sd["body.0.weight"] = Tensor::zeros({4, 4});
  sd["body.0.bias"] = Tensor::full({4}, 3.0);
  try {
    toy.load_state_dict(sd);
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("missing: body.2.weight") != std::string::npos);
    CHECK(msg.find("unexpected: body.9.weight") != std::string::npos);
    CHECK(msg.find("body.0.weight (expected [4, 3], got [4, 4])") != std::string::npos);
  }
  CHECK(toy.state_dict().at("body.0.bias").to_vector<double>() == before);
  // Non-strict: missing and unexpected names are fine, shapes are still checked.
  sd["body.0.weight"] = Tensor::zeros({4, 3});
  toy.load_state_dict(sd, false);
  CHECK(toy.state_dict().at("body.0.bias").to_vector<double>() == std::vector<double>(4, 3.0));
}

TEST_CASE("train/eval reaches every child, to(dtype) converts floats and keeps integer buffers", "[module]") {
  Generator gen(1);
  Toy toy(gen);
  CHECK(toy.is_training());
  toy.eval();
  CHECK(!toy.body->operator[](0).is_training());
  toy.to(DType::f64);
  for (auto& [n, t] : toy.named_parameters()) {
    CHECK(t.dtype() == DType::f64);
    CHECK(t.requires_grad());
    CHECK(t.is_leaf());
  }
  CHECK(toy.steps.dtype() == DType::i64);
  CHECK(toy(Tensor::ones({2, 3}, DType::f64)).dtype() == DType::f64);
}

TEST_CASE("module misuse gives clear errors", "[module]") {
  Generator gen(1);
  CHECK_THROWS_WITH(Linear(0, 3, true, gen), Catch::Contains("in_features and out_features must be >= 1"));
  CHECK_THROWS_WITH(Dropout(1.5), Catch::Contains("p must be in [0, 1]"));
  Sequential s;
  CHECK_THROWS_WITH(s[0], Catch::Contains("index 0 out of range"));
  Module plain;
  CHECK_THROWS_WITH(plain.forward(Tensor::ones({1})), Catch::Contains("no one-tensor forward"));
  struct Twice : Module {
    Tensor w = Tensor::ones({1});
    Twice() {
      register_parameter("w", &w);
      register_buffer("w", &w);
    }
  };
  CHECK_THROWS_WITH(Twice(), Catch::Contains("registered twice"));
}

TEST_CASE("Dropout is the identity in eval mode and reproducible from its seed", "[module]") {
  Dropout a(0.5, 42), b(0.5, 42);
  Tensor x = Tensor::ones({1000});
  auto ya = a(x).to_vector<float>(), yb = b(x).to_vector<float>();
  CHECK(ya == yb);
  int zeros = 0;
  for (float v : ya) zeros += v == 0.f;
  CHECK(zeros > 400);
  CHECK(zeros < 600);
  a.eval();
  CHECK(a(x).to_vector<float>() == x.to_vector<float>());
}

TEST_CASE("layer modules carry PyTorch's parameter and buffer names", "[module]") {
  Generator gen(1);
  MultiheadAttention mha(8, 2, gen);
  std::vector<std::string> names;
  for (auto& [n, t] : mha.state_dict()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"in_proj_bias", "in_proj_weight", "out_proj.bias", "out_proj.weight"});
  BatchNorm2d bn(3);
  names.clear();
  for (auto& [n, t] : bn.state_dict()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"bias", "num_batches_tracked", "running_mean", "running_var", "weight"});
  bn.train();
  bn(Tensor::ones({2, 3, 2, 2}));
  CHECK(bn.num_batches_tracked.item() == 1);
  LSTMOptions lo;
  lo.num_layers = 2, lo.bidirectional = true;
  LSTM lstm(5, 4, gen, lo);
  CHECK(lstm.named_parameters().size() == 16);
  CHECK(lstm.named_parameters()[4].first == "weight_ih_l0_reverse");
  CHECK(lstm.named_parameters()[8].second.shape() == Shape{16, 8});  // weight_ih_l1: input 2 * hidden
  LayerNorm ln({6});
  CHECK(ln(Tensor::ones({2, 6})).shape() == Shape{2, 6});
}

TEST_CASE("Sequential in inference runs Conv2d, ReLU, MaxPool2d as one op with the same values", "[module]") {
  // A CRNN's first block (1 -> 16 channels, 3x3, padding 1, then a 2x2 pool: the direct
  // convolution's fused path), a block of CRNN's later kind (16 -> 16, a pool at a stride of
  // (2, 1): Winograd's) and one that no fused path takes (16 -> 8: the three ops): without
  // gradients each block goes through conv2d_relu_max_pool2d, with them the modules one by one;
  // the outputs are the same bits.
  Generator gen(5);
  Sequential s;
  s.add(std::make_shared<Conv2d>(1, 16, Pair{3, 3}, gen, Conv2dOptions{{1, 1}, {1, 1}}));
  s.add(std::make_shared<ReLU>());
  s.add(std::make_shared<MaxPool2d>(MaxPool2dOptions{}));
  s.add(std::make_shared<Conv2d>(16, 16, Pair{3, 3}, gen, Conv2dOptions{{1, 1}, {1, 1}}));
  s.add(std::make_shared<ReLU>());
  s.add(std::make_shared<MaxPool2d>(MaxPool2dOptions{{2, 2}, {2, 1}, {0, 1}}));
  s.add(std::make_shared<Conv2d>(16, 8, Pair{3, 3}, gen, Conv2dOptions{{1, 1}, {1, 1}}));
  s.add(std::make_shared<ReLU>());
  s.add(std::make_shared<MaxPool2d>(MaxPool2dOptions{{2, 2}, {2, 1}, {0, 1}}));
  const Tensor x = uniform({2, 1, 16, 30}, -1.0, 1.0, gen);
  const Tensor with_grad = s.forward(x);
  Tensor without;
  {
    NoGradGuard no_grad;
    without = s.forward(x);
  }
  REQUIRE(without.shape() == with_grad.shape());
  CHECK(without.to_vector<float>() == with_grad.to_vector<float>());
}

TEST_CASE("Sequential in inference overwrites its own activations with ReLU, never its input", "[module]") {
  Generator gen(3);
  Sequential s;
  s.add(std::make_shared<ReLU>());  // first: gets the caller's tensor, which must stay as it is
  s.add(std::make_shared<Linear>(4, 5, true, gen));
  s.add(std::make_shared<ReLU>());  // gets the Linear's output: overwritten in place
  const Tensor x = Tensor::from_vector(std::vector<float>{-1, 2, -3, 4, 0.5f, -0.5f, 1, -2}, {2, 4});
  const std::vector<float> x_before = x.to_vector<float>();
  const Tensor with_grad = s.forward(x);  // grad mode on: the plain forward
  Tensor without;
  {
    NoGradGuard no_grad;
    without = s.forward(x);
  }
  CHECK(x.to_vector<float>() == x_before);
  CHECK(without.to_vector<float>() == with_grad.to_vector<float>());
  for (float v : without.to_vector<float>()) CHECK(v >= 0);
  // relu_ itself: in place, and refused on a tensor that records gradients.
  Tensor y = Tensor::from_vector(std::vector<float>{-1, 0, 3}, {3});
  relu_(y);
  CHECK(y.to_vector<float>() == std::vector<float>{0, 0, 3});
  Tensor p = Tensor::ones({2});
  p.set_requires_grad(true);
  CHECK_THROWS_WITH(relu_(p), Catch::Contains("in-place change of a tensor that requires grad"));
}

TEST_CASE("SkipInit: new parameters draw no random numbers, for its scope on its thread only", "[module]") {
  // Every architecture draws its initial values from the generator; under SkipInit none does.
  for (const std::string arch : {"crnn", "crnn-s", "svtr-lite"}) {
    INFO(arch);
    Generator skipped(7), drawn(7);
    {
      const nn::SkipInit skip;
      nn::make_recognizer(arch, 11, skipped);
    }
    CHECK(skipped.offset() == (arch == "svtr-lite" ? 1u : 0u));  // svtr-lite draws its dropout seed
    nn::make_recognizer(arch, 11, drawn);  // the scope has ended: initialised again
    CHECK(drawn.offset() > 2);
  }
  // Nested scopes restore the outer setting; another thread initialises as usual.
  Generator g(1);
  {
    const nn::SkipInit outer;
    { const nn::SkipInit inner; }
    nn::Linear still_skipped(4, 3, true, g);
    CHECK(g.offset() == 0);
    Generator other(1);
    std::thread([&] { nn::Linear drawn_there(4, 3, true, other); }).join();
    CHECK(other.offset() > 0);
  }
  nn::Linear drawn_here(4, 3, true, g);
  CHECK(g.offset() > 0);
}

TEST_CASE("Sequential in training pools before a ReLU that comes before a max pool: the same values and gradients", "[module]") {
  // relu(max(a, b)) = max(relu(a), relu(b)), and the gradient reaches the window's first
  // largest value when it is positive, nothing otherwise, in either order. Values on a grid of
  // halves, so that windows tie, and windows of negatives only; a 2 x 2 pool, and CRNN's 2 x 1
  // pool with a padded column.
  Generator gen(11);
  for (const MaxPool2dOptions& pool : {MaxPool2dOptions{}, MaxPool2dOptions{{2, 2}, {2, 1}, {0, 1}}}) {
    Sequential s;
    s.add(std::make_shared<ReLU>());
    s.add(std::make_shared<MaxPool2d>(pool));
    std::vector<float> grid = uniform({2, 3, 6, 9}, -1.0, 1.0, gen).to_vector<float>();
    for (float& v : grid) v = std::round(v * 2) / 2;
    Tensor x = Tensor::from_vector(grid, {2, 3, 6, 9});
    x.set_requires_grad(true);
    Tensor x_ref = x.detach().clone();
    x_ref.set_requires_grad(true);
    const Tensor y = s.forward(x);
    const Tensor y_ref = max_pool2d(relu(x_ref), pool);
    REQUIRE(y.shape() == y_ref.shape());
    CHECK(y.to_vector<float>() == y_ref.to_vector<float>());
    const Tensor w = uniform(y.shape(), -1.0, 1.0, gen);
    sum(mul(y, w)).backward();
    sum(mul(y_ref, w)).backward();
    CHECK(x.grad().to_vector<float>() == x_ref.grad().to_vector<float>());
  }
}
