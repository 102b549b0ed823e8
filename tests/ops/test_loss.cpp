// The dense-prediction losses (ops/loss.h): golden values and gradients against PyTorch
// (tools/reference/ops_loss.py, float64, logits out to |x| = 80 where a naive formula overflows),
// float64 finite differences, and the arguments they refuse.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "golden_runner.h"
#include "gradcheck.h"
#include "ops/elementwise.h"
#include "ops/loss.h"
#include "runtime/safetensors.h"

using namespace ocrt;
using namespace ocrt::testing;

namespace {

const SafetensorsFile& fixture() {
  static const SafetensorsFile f = load_safetensors(std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/ops_loss.safetensors");
  return f;
}

}  // namespace

TEST_CASE("binary_cross_entropy_with_logits and dice_loss match PyTorch, values and gradients", "[loss][golden]") {
  const auto& f = fixture();
  run_golden_case(f, "bce_mean", [](const TensorList& in) { return TensorList{binary_cross_entropy_with_logits(in[0], in[1])}; });
  run_golden_case(f, "bce_sum_weight", [](const TensorList& in) {
    return TensorList{binary_cross_entropy_with_logits(in[0], in[1], in[2], Reduction::sum)};
  });
  run_golden_case(f, "bce_none_broadcast_weight", [](const TensorList& in) {
    return TensorList{binary_cross_entropy_with_logits(in[0], in[1], in[2], Reduction::none)};
  });
  run_golden_case(f, "bce_extreme", [](const TensorList& in) {
    return TensorList{binary_cross_entropy_with_logits(in[0], in[1], Tensor(), Reduction::sum)};
  });
  run_golden_case(f, "dice_mask", [](const TensorList& in) { return TensorList{dice_loss(in[0], in[1], in[2])}; });
  run_golden_case(f, "dice_nomask", [](const TensorList& in) { return TensorList{dice_loss(in[0], in[1])}; });
}

TEST_CASE("the losses' gradients agree with finite differences", "[loss][gradcheck]") {
  check_gradients("bce with weight", [](const std::vector<Tensor>& in) {
    return binary_cross_entropy_with_logits(in[0], in[1], in[2], Reduction::none);
  }, {det_uniform({2, 3, 4}, 1, -4, 4), det_uniform({2, 3, 4}, 2, 0, 1), det_uniform({3, 1}, 3, 0.5, 2)});
  check_gradients("dice with mask", [](const std::vector<Tensor>& in) { return dice_loss(in[0], in[1], in[2]); },
                  {det_uniform({2, 5, 6}, 4, 0, 1), det_uniform({2, 5, 6}, 5, 0, 1), det_uniform({2, 5, 6}, 6, 0, 1)});
}

TEST_CASE("the losses: a perfect prediction, extremes, and refused arguments", "[loss]") {
  const Tensor t = Tensor::from_vector(std::vector<double>{1, 0, 1, 0}, {4});
  CHECK(dice_loss(t, t).item() == Approx(0).margin(1e-6));
  CHECK(dice_loss(t, rsub(1.0, t)).item() == Approx(1).margin(1e-6));
  // Far from 0 the loss is |x| for a wrong sign and 0 for a right one, never inf or NaN.
  const Tensor x = Tensor::from_vector(std::vector<double>{1000, -1000, 1000, -1000}, {4});
  const Tensor t2 = Tensor::from_vector(std::vector<double>{1, 0, 0, 1}, {4});
  const std::vector<double> l = binary_cross_entropy_with_logits(x, t2, Tensor(), Reduction::none).to_vector<double>();
  CHECK(l == std::vector<double>{0, 0, 1000, 1000});
  CHECK_THROWS_WITH(binary_cross_entropy_with_logits(x, Tensor::zeros({3}, DType::f64)), Catch::Contains("same shape"));
  CHECK_THROWS_WITH(binary_cross_entropy_with_logits(x, t, Tensor::zeros({5}, DType::f64)),
                    Catch::Contains("binary_cross_entropy_with_logits: weight [5] does not broadcast"));
  // At x = 0 the gradient is sigmoid(0) - t exactly (a composition of relu and abs gives -t).
  Tensor z = Tensor::zeros({1}, DType::f64);
  z.set_requires_grad(true);
  binary_cross_entropy_with_logits(z, Tensor::from_vector(std::vector<double>{0.25}, {1}), Tensor(), Reduction::sum).backward();
  CHECK(z.grad().item() == Approx(0.25));
  CHECK_THROWS_WITH(dice_loss(t, t.to(DType::f32)), Catch::Contains("one dtype"));
  CHECK_THROWS_WITH(dice_loss(t, t, Tensor(), 0), Catch::Contains("eps must be > 0"));
}
