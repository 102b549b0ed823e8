// The detector's loss (train/det_loss.h): about zero for a prediction that matches its targets,
// float64 finite differences through the whole loss (the mining included), the hard negative
// mining's exact choice and its floor, a crop without text, the batch of target maps, and the
// arguments it refuses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "gradcheck.h"
#include "ops/elementwise.h"
#include "train/det_loss.h"

using namespace ocrt;
using namespace ocrt::train;
using namespace ocrt::testing;

namespace {

Tensor map(const std::vector<double>& v, int64_t n, int64_t h, int64_t w) {
  return Tensor::from_vector(v, {n, 1, h, w});
}

Tensor map_where(const Tensor& like, const std::function<double(size_t, double)>& f) {
  std::vector<double> v = like.to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = f(i, v[i]);
  return Tensor::from_vector(v, like.shape());
}

double softplus(double x) { return std::log1p(std::exp(x)); }

}  // namespace

TEST_CASE("det loss: about zero when the prediction matches the targets, large when it does not", "[det_loss]") {
  const DetTargets t = make_det_targets({Quad::from_rect({4, 8, 60, 24}), Quad::from_rect({6, 36, 40, 50})}, 64, 64);
  const DetLossTargets targets = det_loss_targets({&t, &t}, Device::cpu());
  REQUIRE(targets.shrink.shape() == Shape{2, 1, 64, 64});
  // Logits of the targets themselves: +-20 for the shrink map, log(t / (1 - t)) for the threshold.
  const Tensor prob = sub(mul(targets.shrink, 40.0), 20.0);
  const Tensor thresh = log(div(targets.thresh, rsub(1.0, targets.thresh)));
  const DetLoss right = det_loss(prob, thresh, targets);
  CHECK(right.prob < 1e-7);
  CHECK(right.thresh < 1e-6);
  CHECK(right.binary < 1e-5);
  CHECK(right.total.item() < 1e-4);
  CHECK(right.total.dim() == 0);
  CHECK(right.total.item() == Approx(5 * right.prob + 10 * right.thresh + right.binary));
  // Every positive, and three negatives for each, but at least min_negatives (4096).
  int64_t positives = 0;
  for (float v : t.shrink) positives += v == 1;
  CHECK(right.positives == 2 * positives);
  CHECK(right.negatives == std::max<int64_t>(3 * right.positives, 4096));
  DetLossOptions o;
  o.min_negatives = 0;
  CHECK(det_loss(prob, thresh, targets, o).negatives == 3 * right.positives);

  const DetLoss wrong = det_loss(neg(prob), neg(thresh), targets);
  CHECK(wrong.prob > 10);
  CHECK(wrong.binary > 0.9);
  CHECK(wrong.thresh > 0.05);
}

TEST_CASE("det loss: gradients agree with finite differences (float64)", "[det_loss][gradcheck]") {
  // Two 4 x 5 maps: few positives, so the mining keeps 3 per positive and leaves some out; a
  // few pixels masked out of each map.
  const Tensor u = det_uniform({2, 1, 4, 5}, 21, 0, 1);
  DetLossTargets t;
  t.shrink = map_where(u, [](size_t, double v) { return v > 0.88 ? 1.0 : 0.0; });
  t.shrink_mask = map_where(det_uniform({2, 1, 4, 5}, 22, 0, 1), [](size_t, double v) { return v > 0.15 ? 1.0 : 0.0; });
  t.thresh = det_uniform({2, 1, 4, 5}, 23, 0.3, 0.7);
  t.thresh_mask = map_where(det_uniform({2, 1, 4, 5}, 24, 0, 1), [](size_t, double v) { return v > 0.3 ? 1.0 : 0.0; });
  DetLossOptions o;
  o.min_negatives = 0;
  o.k = 5;  // a gentler binarisation than 50, so that its gradients are not all saturated
  const DetLoss probe = det_loss(det_uniform({2, 1, 4, 5}, 25, -2, 2), det_uniform({2, 1, 4, 5}, 26, -2, 2), t, o);
  REQUIRE(probe.positives > 0);
  REQUIRE(probe.negatives == 3 * probe.positives);
  check_gradients("det_loss", [&](const std::vector<Tensor>& in) { return det_loss(in[0], in[1], t, o).total; },
                  {det_uniform({2, 1, 4, 5}, 25, -2, 2), det_uniform({2, 1, 4, 5}, 26, -2, 2)});
  o.k = 50;
  check_gradients("det_loss, k = 50", [&](const std::vector<Tensor>& in) { return det_loss(in[0], in[1], t, o).total; },
                  {det_uniform({2, 1, 4, 5}, 27, -0.5, 0.5), det_uniform({2, 1, 4, 5}, 28, -0.5, 0.5)});
}

TEST_CASE("det loss: hard negative mining keeps every positive and exactly the k hardest negatives", "[det_loss]") {
  // One row of 20 pixels: 2 positives (logits 0.5 and -1), 2 masked out (one with the largest
  // logit of all, which must not count), 16 negatives with distinct logits.
  std::vector<double> logit(20), shrink(20, 0), mask(20, 1);
  for (int i = 0; i < 20; ++i) logit[(size_t)i] = -3 + 0.3 * ((i * 7) % 20);  // a permutation of -3 .. 2.7
  shrink[3] = shrink[11] = 1;
  mask[5] = mask[17] = 0;
  logit[5] = 9;
  DetLossTargets t{map(shrink, 1, 1, 20), map(mask, 1, 1, 20), Tensor::full({1, 1, 1, 20}, 0.5, DType::f64),
                   Tensor::zeros({1, 1, 1, 20}, DType::f64)};
  const Tensor x = map(logit, 1, 1, 20), thresh = Tensor::zeros({1, 1, 1, 20}, DType::f64);

  auto expected = [&](int64_t k) {
    double sum = 0;
    std::vector<double> neg;
    for (size_t i = 0; i < 20; ++i) {
      if (mask[i] == 0) continue;
      if (shrink[i] == 1) sum += softplus(-logit[i]);  // loss of a positive: log(1 + e^-x)
      else neg.push_back(softplus(logit[i]));          // of a negative: log(1 + e^x)
    }
    std::sort(neg.rbegin(), neg.rend());
    for (int64_t j = 0; j < k; ++j) sum += neg[(size_t)j];
    return sum / ((double)(2 + k) + 1e-6);
  };
  DetLossOptions o;
  o.min_negatives = 0;
  DetLoss l = det_loss(x, thresh, t, o);
  CHECK(l.positives == 2);
  CHECK(l.negatives == 6);
  CHECK(l.prob == Approx(expected(6)).epsilon(1e-9));
  o.negative_ratio = 1;
  l = det_loss(x, thresh, t, o);
  CHECK(l.negatives == 2);
  CHECK(l.prob == Approx(expected(2)).epsilon(1e-9));
  // The floor: at least min_negatives, at most every negative there is.
  o.min_negatives = 10;
  CHECK(det_loss(x, thresh, t, o).negatives == 10);
  CHECK(det_loss(x, thresh, t, o).prob == Approx(expected(10)).epsilon(1e-9));
  o.min_negatives = 100;
  CHECK(det_loss(x, thresh, t, o).negatives == 16);
  CHECK(det_loss(x, thresh, t, o).prob == Approx(expected(16)).epsilon(1e-9));

  // Only the chosen pixels pass a gradient through L_prob. L_binary's share is taken away: a
  // threshold of 1 and a binarisation steep enough (k = 1000) that the binary map and its
  // gradient are 0 to double precision, so the unchosen negatives get next to none.
  o = {};
  o.min_negatives = 0;
  o.k = 1000;
  Tensor xg = x.clone();
  xg.set_requires_grad(true);
  det_loss(xg, Tensor::full({1, 1, 1, 20}, 40.0, DType::f64), t, o).total.backward();
  const std::vector<double> g = xg.grad().to_vector<double>();
  std::vector<double> neg_losses;
  for (size_t i = 0; i < 20; ++i)
    if (mask[i] == 1 && shrink[i] == 0) neg_losses.push_back(softplus(logit[i]));
  std::sort(neg_losses.rbegin(), neg_losses.rend());
  const double cut = neg_losses[5];  // the sixth hardest negative's loss
  int64_t with_gradient = 0;
  for (size_t i = 0; i < 20; ++i) {
    if (mask[i] == 0 || shrink[i] == 1) continue;
    INFO("pixel " << i << " logit " << logit[i] << " gradient " << g[i]);
    if (softplus(logit[i]) >= cut) {
      CHECK(std::abs(g[i]) > 1e-2);  // alpha sigmoid(x) / (2 + 6) at least
      ++with_gradient;
    } else {
      CHECK(std::abs(g[i]) < 1e-6);
    }
  }
  CHECK(with_gradient == 6);
}

TEST_CASE("det loss: a crop without text gives a finite loss that still teaches no text", "[det_loss]") {
  const DetTargets blank = make_det_targets({}, 32, 32);
  const DetLossTargets t = det_loss_targets({&blank}, Device::cpu());
  Tensor prob = det_uniform({1, 1, 32, 32}, 31, -1, 1, DType::f32);
  prob.set_requires_grad(true);
  const Tensor thresh = det_uniform({1, 1, 32, 32}, 32, -1, 1, DType::f32);
  DetLossOptions o;
  o.min_negatives = 100;
  const DetLoss l = det_loss(prob, thresh, t, o);
  CHECK(l.positives == 0);
  CHECK(l.negatives == 100);
  CHECK(std::isfinite(l.total.item()));
  CHECK(l.prob > 0);
  CHECK(l.thresh == 0);  // no border anywhere
  l.total.backward();
  int64_t pushed_down = 0;
  for (float g : prob.grad().to_vector<float>()) {
    REQUIRE(std::isfinite(g));
    pushed_down += g > 0;
  }
  CHECK(pushed_down == 100);  // the 100 hardest pixels are pushed towards "no text"
  // Without the floor (PaddleOCR's rule) the crop teaches nothing, and still nothing breaks.
  o.min_negatives = 0;
  const DetLoss none = det_loss(prob, thresh, t, o);
  CHECK(none.negatives == 0);
  CHECK(none.prob == 0);
  CHECK(std::isfinite(none.total.item()));
}

TEST_CASE("det loss: the batch of maps and the arguments it refuses", "[det_loss]") {
  const DetTargets a = make_det_targets({Quad::from_rect({2, 2, 30, 12})}, 16, 32);
  const DetTargets b = make_det_targets({}, 16, 32);
  const DetLossTargets t = det_loss_targets({&a, &b}, Device::cpu(), DType::f64);
  REQUIRE(t.thresh.shape() == Shape{2, 1, 16, 32});
  CHECK(t.thresh.dtype() == DType::f64);
  const std::vector<double> shrink = t.shrink.to_vector<double>();
  CHECK(std::equal(a.shrink.begin(), a.shrink.end(), shrink.begin()));
  CHECK(std::all_of(shrink.begin() + 16 * 32, shrink.end(), [](double v) { return v == 0; }));
  const DetTargets other = make_det_targets({}, 8, 32);
  CHECK_THROWS_WITH(det_loss_targets({&a, &other}, Device::cpu()), Catch::Contains("item 1 is 8x32"));
  CHECK_THROWS_WITH(det_loss_targets({}, Device::cpu()), Catch::Contains("empty batch"));

  const Tensor x = Tensor::zeros({2, 1, 16, 32}, DType::f64);
  CHECK_THROWS_WITH(det_loss(x, Tensor::zeros({2, 1, 16, 31}, DType::f64), t), Catch::Contains("thresh_logits is [2, 1, 16, 31]"));
  CHECK_THROWS_WITH(det_loss(x.to(DType::f32), x.to(DType::f32), t), Catch::Contains("shrink must have the probability logits' dtype"));
  CHECK_THROWS_WITH(det_loss(Tensor::zeros({2, 16, 32}, DType::f64), x, t), Catch::Contains("must be (N, 1, H, W)"));
  DetLossTargets missing = t;
  missing.thresh_mask = Tensor();
  CHECK_THROWS_WITH(det_loss(x, x, missing), Catch::Contains("thresh_mask is undefined"));
  DetLossOptions o;
  o.k = 0;
  CHECK_THROWS_WITH(det_loss(x, x, t, o), Catch::Contains("k must be > 0"));
  o = {};
  o.min_negatives = -1;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("min_negatives"));
}
