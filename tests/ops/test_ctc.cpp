// CTC loss: golden tests against torch.nn.functional.ctc_loss (tools/reference/ops_ctc.py:
// reductions, repeats, empty and infeasible targets, blank != 0, 1-D targets, T = 2000 with
// extreme logits, the fused logits path), the sum over all alignments of
// ops/cpu/ctc_reference.h (loss and gradient), float64
// gradient checks, gradient properties, and argument errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

#include "golden_runner.h"
#include "ops/cpu/ctc_reference.h"
#include "ops/ctc.h"
#include "ops/reduce.h"

using namespace ocrt;
using namespace ocrt::testing;

namespace {

const SafetensorsFile& fixture() {
  static const SafetensorsFile f = load_safetensors(std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/ops_ctc.safetensors");
  return f;
}

void ctc_golden(const std::string& name, CTCLossOptions opt, bool logits = false) {
  run_golden_case(fixture(), name, [&](const TensorList& in) {
    const auto il = in[2].to_vector<int64_t>(), tl = in[3].to_vector<int64_t>();
    return TensorList{logits ? ctc_loss_from_logits(in[0], in[1], il, tl, opt) : ctc_loss(in[0], in[1], il, tl, opt)};
  });
}

CTCLossOptions with(Reduction r, int64_t blank = 0, bool zero_infinity = false) {
  CTCLossOptions o;
  o.reduction = r, o.blank = blank, o.zero_infinity = zero_infinity;
  return o;
}

}  // namespace

TEST_CASE("ctc_loss matches PyTorch: loss and gradient", "[ctc][golden]") {
  ctc_golden("ctc_mean", with(Reduction::mean));
  ctc_golden("ctc_sum", with(Reduction::sum));
  ctc_golden("ctc_none", with(Reduction::none));
  ctc_golden("ctc_empty_target", with(Reduction::none));
  ctc_golden("ctc_blank_last", with(Reduction::none, 4));
  ctc_golden("ctc_flat_targets", with(Reduction::mean));
  ctc_golden("ctc_infeasible_zero_inf", with(Reduction::none, 0, true));
  ctc_golden("ctc_infeasible_mean_zero_inf", with(Reduction::mean, 0, true));
  ctc_golden("ctc_batch1_t1", with(Reduction::none));
  ctc_golden("ctc_long_extreme", with(Reduction::mean));
  ctc_golden("ctc_f32", with(Reduction::mean));
  ctc_golden("ctc_logits", with(Reduction::mean), true);
  ctc_golden("ctc_logits_f32", with(Reduction::mean), true);
}

TEST_CASE("an infeasible target gives +inf and a zero gradient, never NaN", "[ctc]") {
  // PyTorch agrees on the loss; its gradient there is NaN, ocrt's is 0 (see ops/ctc.h).
  const auto& f = fixture();
  Tensor lp = f.get("ctc_infeasible.in0").clone();
  lp.set_requires_grad(true);
  Tensor loss = ctc_loss(lp, f.get("ctc_infeasible.in1"), f.get("ctc_infeasible.in2").to_vector<int64_t>(),
                         f.get("ctc_infeasible.in3").to_vector<int64_t>(), with(Reduction::none));
  require_close(loss, f.get("ctc_infeasible.out"), 1e-10, 1e-12, "losses");
  const auto l = loss.to_vector<double>();
  CHECK(std::isinf(l[0]));  // "aaa" needs 5 frames (a blank between equal labels); it has 4
  CHECK(std::isfinite(l[1]));
  loss.backward(f.get("ctc_infeasible.gout"));
  const Tensor g = lp.grad();
  for (double v : g.narrow(1, 0, 1).to_vector<double>()) CHECK(v == 0.0);
  require_close(g.narrow(1, 1, 1), f.get("ctc_infeasible.grad0").narrow(1, 1, 1), 1e-9, 1e-11, "feasible sample");
}

TEST_CASE("ctc_loss equals the sum over every alignment (the reference), loss and gradient", "[ctc]") {
  // T = 5 frames, C = 3 classes: reference::ctc_loss_all_paths enumerates all 3^5 paths.
  const int64_t T = 5, C = 3;
  const Tensor lp0 = log_softmax(det_uniform({T, 1, C}, 3, -2, 2), 2);
  const auto y = lp0.to_vector<double>();
  for (int64_t blank : {0, 2})
    for (const std::vector<int64_t>& target :
         std::vector<std::vector<int64_t>>{{1}, {1, 1}, {1, 2}, {2, 2, 1}, {}, {1, 1, 1}}) {
      if (std::find(target.begin(), target.end(), blank) != target.end()) continue;
      INFO("target of length " << target.size() << ", blank " << blank);
      std::vector<double> grad_ref;
      const double nll = reference::ctc_loss_all_paths(y, T, C, target, blank, &grad_ref);
      Tensor lp = lp0.clone();
      lp.set_requires_grad(true);
      Tensor loss = ctc_loss(lp, Tensor::from_vector(target), {T}, {(int64_t)target.size()}, with(Reduction::sum, blank));
      if (std::isinf(nll)) {
        CHECK(std::isinf(loss.item()));
        continue;
      }
      CHECK(loss.item() == Approx(nll).epsilon(1e-12));
      loss.backward();
      require_close(lp.grad(), Tensor::from_vector(grad_ref, {T, 1, C}), 1e-10, 1e-12, "gradient");
    }
}

TEST_CASE("ctc gradients agree with finite differences", "[ctc][gradcheck]") {
  Tensor targets = Tensor::from_vector(std::vector<int64_t>{1, 1, 2, 3, 0, 0}, {2, 3});
  check_gradients("ctc_loss(log_softmax(z)) mean", [&](const std::vector<Tensor>& in) {
    return ctc_loss(log_softmax(in[0], 2), targets, {6, 4}, {3, 1});
  }, {det_uniform({6, 2, 4}, 1, -2, 2)});
  check_gradients("ctc_loss_from_logits none, blank 3", [&](const std::vector<Tensor>& in) {
    return ctc_loss_from_logits(in[0], Tensor::from_vector(std::vector<int64_t>{1, 2, 2, 0}), {5, 5}, {3, 1},
                                with(Reduction::none, 3));
  }, {det_uniform({5, 2, 4}, 2, -2, 2)});
}

TEST_CASE("the fused logits path equals log_softmax + ctc_loss, and its gradient sums to zero per frame", "[ctc]") {
  Tensor z = det_uniform({9, 3, 6}, 5, -3, 3, DType::f32);
  Tensor targets = Tensor::from_vector(std::vector<int64_t>{1, 2, 2, 0, 5, 4, 3, 0, 1, 1, 1, 0}, {3, 4});
  const std::vector<int64_t> il{9, 7, 8}, tl{3, 3, 3};
  Tensor a = z.clone(), b = z.clone();
  a.set_requires_grad(true), b.set_requires_grad(true);
  Tensor la = ctc_loss_from_logits(a, targets, il, tl), lb = ctc_loss(log_softmax(b, 2), targets, il, tl);
  CHECK(la.item() == Approx(lb.item()).epsilon(1e-6));
  la.backward(), lb.backward();
  require_close(a.grad(), b.grad(), 1e-5, 1e-7, "fused vs chained gradient");
  const auto g = a.grad().to_vector<float>();
  for (int64_t tn = 0; tn < 9 * 3; ++tn) {
    double s = 0;
    for (int64_t c = 0; c < 6; ++c) s += g[(size_t)(tn * 6 + c)];
    CHECK(std::abs(s) < 1e-6);
  }
}

TEST_CASE("ctc_loss stays finite for T = 2000 and extreme logits", "[ctc]") {
  const int64_t T = 2000, C = 5;
  Tensor z = det_uniform({T, 1, C}, 11, -80, 80);
  std::vector<int64_t> target;
  for (int i = 0; i < 300; ++i) target.push_back(1 + i % 4);
  z.set_requires_grad(true);
  Tensor loss = ctc_loss_from_logits(z, Tensor::from_vector(target), {T}, {300}, with(Reduction::sum));
  CHECK(std::isfinite(loss.item()));
  loss.backward();
  for (double g : z.grad().to_vector<double>()) REQUIRE(std::isfinite(g));
}

TEST_CASE("ctc_loss rejects bad arguments", "[ctc]") {
  Tensor lp = log_softmax(det_uniform({6, 2, 4}, 1), 2);
  Tensor tg = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 1}, {2, 2});
  CHECK_THROWS_WITH(ctc_loss(lp, tg, {6}, {2, 2}), Catch::Contains("expected 2 input lengths and target lengths"));
  CHECK_THROWS_WITH(ctc_loss(lp, tg, {7, 6}, {2, 2}), Catch::Contains("input length 7 of sample 0 is outside [0, T = 6]"));
  CHECK_THROWS_WITH(ctc_loss(lp, tg, {6, 6}, {3, 2}), Catch::Contains("exceeds the padded target width 2"));
  CHECK_THROWS_WITH(ctc_loss(lp, Tensor::from_vector(std::vector<int64_t>{1, 0, 3, 1}, {2, 2}), {6, 6}, {2, 2}),
                    Catch::Contains("target 1 of sample 0 is 0, expected a class in [0, 4) other than the blank (0)"));
  CHECK_THROWS_WITH(ctc_loss(lp, Tensor::from_vector(std::vector<int64_t>{1, 4}, {2, 1}), {6, 6}, {1, 1}),
                    Catch::Contains("target 0 of sample 1 is 4"));
  CHECK_THROWS_WITH(ctc_loss(lp, Tensor::from_vector(std::vector<int64_t>{1, 2, 3}), {6, 6}, {2, 2}),
                    Catch::Contains("1-D targets hold 3 labels but the target lengths add up to 4"));
  CHECK_THROWS_WITH(ctc_loss(lp, tg, {6, 6}, {2, 2}, with(Reduction::mean, 4)), Catch::Contains("blank 4 is not a class"));
  CHECK_THROWS_WITH(ctc_loss(lp, tg.to(DType::f32), {6, 6}, {2, 2}), Catch::Contains("targets must be an int64 or int32"));
}

TEST_CASE("a label whose only paths are e^-1000 below the best gets an exact finite loss and gradient", "[ctc]") {
  // Three frames; the label's only character has log-probability -1000 everywhere, the blank ~0:
  // p(label) = 3 e^-1000 (up to the blank's tiny deficit), which underflows any probability.
  std::vector<double> v;
  for (int t = 0; t < 3; ++t) {
    const double lp1 = -1000.0, lp2 = -5.0;
    const double lp0 = std::log(1 - std::exp(lp2));  // exp(lp1) is 0 in double
    v.insert(v.end(), {lp0, lp1, lp2});
  }
  Tensor lp = Tensor::from_vector(v, {3, 1, 3});
  lp.set_requires_grad(true);
  Tensor loss = ctc_loss(lp, Tensor::from_vector(std::vector<int64_t>{1}), {3}, {1}, with(Reduction::sum));
  const double expected = 1000.0 - std::log(3.0) - 2 * v[0];  // -log(3 * e^-1000 * e^(2 lp0))
  CHECK(loss.item() == Approx(expected).epsilon(1e-12));
  loss.backward();
  const auto g = lp.grad().to_vector<double>();
  for (int t = 0; t < 3; ++t) {
    CHECK(g[(size_t)(t * 3 + 1)] == Approx(-1.0 / 3).epsilon(1e-9));  // class 1 at each frame: 1/3 of the paths
    double s = 0;
    for (int c = 0; c < 3; ++c) s += g[(size_t)(t * 3 + c)];
    CHECK(std::abs(s) < 1e-9);
  }
}
