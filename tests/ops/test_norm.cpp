// batch_norm and layer_norm: the CPU kernels against the plain-loop references
// (ops/cpu/norm_reference.h), golden tests against PyTorch (tools/reference/ops_norm.py)
// including the running-statistics update, float64 gradient checks, and argument errors.
#include <catch2/catch.hpp>

#include "golden_runner.h"
#include "ops/backend.h"
#include "ops/cpu/norm_reference.h"
#include "ops/norm.h"

using namespace ocrt;
using namespace ocrt::testing;

namespace {

const SafetensorsFile& fixture() {
  static const SafetensorsFile f = load_safetensors(std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/ops_norm.safetensors");
  return f;
}

void bn_golden(const std::string& name, bool affine, bool training, double momentum = 0.1) {
  const auto& f = fixture();
  Tensor rm = f.get(name + ".rm0").clone(), rv = f.get(name + ".rv0").clone();
  run_golden_case(f, name, [&](const TensorList& in) {
    return TensorList{batch_norm(in[0], rm, rv, affine ? in[1] : Tensor(), affine ? in[2] : Tensor(), training, momentum)};
  });
  // One mean and one variance per channel over the batch (at most a few hundred values): ocrt
  // sums in double (off by about u), PyTorch in float32 (about log2(n) u relative to the sum of
  // |terms|, the data being centred near 0 with unit scale). 1e-6 is about 17 u: a margin over
  // those, not a worst-case bound (tests/golden_runner.h).
  require_close(rm, f.get(name + ".rm1"), 1e-6, 1e-7, name + ": running_mean after the call");
  require_close(rv, f.get(name + ".rv1"), 1e-6, 1e-7, name + ": running_var after the call");
}

}  // namespace

TEST_CASE("the normalisation kernels equal the plain-loop reference", "[norm]") {
  const LayerBackend& cpu = layer_backend(Device::cpu());
  const int64_t N = 3, C = 4, S = 5;
  const Tensor x = det_uniform({N, C, S}, 1, -2, 3), dy = det_uniform({N, C, S}, 2);
  const Tensor w = det_uniform({C}, 3, 0.5, 1.5), b = det_uniform({C}, 4);
  const auto xv = x.to_vector<double>(), dyv = dy.to_vector<double>(), wv = w.to_vector<double>(),
             bv = b.to_vector<double>();
  auto vec = [](const std::vector<double>& v, const Shape& shape) { return Tensor::from_vector(v, shape); };
  const double tight = 1e-13;

  Tensor mean = Tensor::empty({C}, DType::f64), var = Tensor::empty({C}, DType::f64);
  cpu.batch_norm_stats(x, mean, var);
  std::vector<double> mean_ref((size_t)C), var_ref((size_t)C);
  reference::batch_norm_stats(xv.data(), mean_ref.data(), var_ref.data(), N, C, S);
  require_close(mean, vec(mean_ref, {C}), tight, tight, "batch_norm_stats mean");
  require_close(var, vec(var_ref, {C}), tight, tight, "batch_norm_stats var");

  const Tensor invstd = det_uniform({C}, 5, 0.5, 2);
  const auto iv = invstd.to_vector<double>();
  for (bool affine : {true, false}) {
    INFO((affine ? "affine" : "no weight or bias"));
    const Tensor wt = affine ? w : Tensor(), bt = affine ? b : Tensor();
    const double* wp = affine ? wv.data() : nullptr;
    Tensor y = Tensor::empty({N, C, S}, DType::f64);
    cpu.batch_norm_apply(x, mean, invstd, wt, bt, y);
    std::vector<double> y_ref((size_t)(N * C * S));
    reference::batch_norm_apply(xv.data(), mean_ref.data(), iv.data(), wp, affine ? bv.data() : nullptr,
                                y_ref.data(), N, C, S);
    require_close(y, vec(y_ref, {N, C, S}), tight, tight, "batch_norm_apply");
    for (bool training : {true, false}) {
      INFO((training ? "training" : "eval"));
      Tensor dx = Tensor::empty({N, C, S}, DType::f64), dw = Tensor::empty({C}, DType::f64),
             db = Tensor::empty({C}, DType::f64);
      cpu.batch_norm_backward(x, dy, mean, invstd, wt, training, dx, dw, db);
      std::vector<double> dx_ref((size_t)(N * C * S)), dw_ref((size_t)C), db_ref((size_t)C);
      reference::batch_norm_backward(xv.data(), dyv.data(), mean_ref.data(), iv.data(), wp, training, dx_ref.data(),
                                     dw_ref.data(), db_ref.data(), N, C, S);
      require_close(dx, vec(dx_ref, {N, C, S}), tight, tight, "batch_norm_backward dx");
      require_close(dw, vec(dw_ref, {C}), tight, tight, "batch_norm_backward dweight");
      require_close(db, vec(db_ref, {C}), tight, tight, "batch_norm_backward dbias");
    }
  }

  const int64_t M = 6, D = 7;
  const Tensor lx = det_uniform({M, D}, 6, -1, 2), ldy = det_uniform({M, D}, 7);
  const Tensor lw = det_uniform({D}, 8, 0.5, 1.5), lb = det_uniform({D}, 9);
  const auto lxv = lx.to_vector<double>(), ldyv = ldy.to_vector<double>(), lwv = lw.to_vector<double>(),
             lbv = lb.to_vector<double>();
  for (bool affine : {true, false}) {
    INFO("layer_norm " << (affine ? "affine" : "no weight or bias"));
    const Tensor wt = affine ? lw : Tensor(), bt = affine ? lb : Tensor();
    const double* wp = affine ? lwv.data() : nullptr;
    Tensor y = Tensor::empty({M, D}, DType::f64), lm = Tensor::empty({M}, DType::f64),
           lr = Tensor::empty({M}, DType::f64);
    cpu.layer_norm(lx, wt, bt, 1e-5, y, lm, lr);
    std::vector<double> y_ref((size_t)(M * D)), lm_ref((size_t)M), lr_ref((size_t)M);
    reference::layer_norm(lxv.data(), wp, affine ? lbv.data() : nullptr, 1e-5, y_ref.data(), lm_ref.data(),
                          lr_ref.data(), M, D);
    require_close(y, vec(y_ref, {M, D}), tight, tight, "layer_norm y");
    require_close(lm, vec(lm_ref, {M}), tight, tight, "layer_norm mean");
    require_close(lr, vec(lr_ref, {M}), tight, tight, "layer_norm rstd");
    Tensor dx = Tensor::empty({M, D}, DType::f64), dw = Tensor::empty({D}, DType::f64),
           db = Tensor::empty({D}, DType::f64);
    cpu.layer_norm_backward(lx, ldy, lm, lr, wt, dx, dw, db);
    std::vector<double> dx_ref((size_t)(M * D)), dw_ref((size_t)D), db_ref((size_t)D);
    reference::layer_norm_backward(lxv.data(), ldyv.data(), lm_ref.data(), lr_ref.data(), wp, dx_ref.data(),
                                   dw_ref.data(), db_ref.data(), M, D);
    require_close(dx, vec(dx_ref, {M, D}), tight, tight, "layer_norm_backward dx");
    require_close(dw, vec(dw_ref, {D}), tight, tight, "layer_norm_backward dweight");
    require_close(db, vec(db_ref, {D}), tight, tight, "layer_norm_backward dbias");
  }
}

TEST_CASE("batch_norm matches PyTorch, including the running-statistics update", "[norm][golden]") {
  bn_golden("bn_train", true, true);
  bn_golden("bn_train_momentum", true, true, 0.3);
  bn_golden("bn_train_2d", true, true);
  bn_golden("bn_train_noaffine", false, true);
  bn_golden("bn_eval", true, false);
  bn_golden("bn_f32", true, true);
}

TEST_CASE("layer_norm matches PyTorch", "[norm][golden]") {
  const auto& f = fixture();
  run_golden_case(f, "ln_basic", [](const TensorList& in) { return TensorList{layer_norm(in[0], {8}, in[1], in[2])}; });
  run_golden_case(f, "ln_two_dims", [](const TensorList& in) { return TensorList{layer_norm(in[0], {4, 5}, in[1], in[2])}; });
  run_golden_case(f, "ln_noaffine", [](const TensorList& in) { return TensorList{layer_norm(in[0], {7})}; });
  run_golden_case(f, "ln_one_row", [](const TensorList& in) { return TensorList{layer_norm(in[0], {16}, in[1], in[2])}; });
  run_golden_case(f, "ln_f32", [](const TensorList& in) { return TensorList{layer_norm(in[0], {64}, in[1], in[2])}; });
}

TEST_CASE("batch_norm and layer_norm gradients agree with finite differences", "[norm][gradcheck]") {
  check_gradients("batch_norm training", [](const std::vector<Tensor>& in) {
    return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true);
  }, {det_uniform({3, 2, 2, 3}, 1), det_uniform({2}, 2), det_uniform({2}, 3)});
  Tensor rm = det_uniform({2}, 4), rv = det_uniform({2}, 5, 0.5, 1.5);
  check_gradients("batch_norm eval", [&](const std::vector<Tensor>& in) {
    return batch_norm(in[0], rm, rv, in[1], in[2], false);
  }, {det_uniform({2, 2, 3}, 6), det_uniform({2}, 7), det_uniform({2}, 8)});
  check_gradients("layer_norm", [](const std::vector<Tensor>& in) { return layer_norm(in[0], {2, 3}, in[1], in[2]); },
                  {det_uniform({4, 2, 3}, 9), det_uniform({2, 3}, 10), det_uniform({2, 3}, 11)});
}

TEST_CASE("normalisation arguments are checked", "[norm]") {
  Tensor x = Tensor::zeros({2, 3, 4});
  CHECK_THROWS_WITH(batch_norm(Tensor::zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    Catch::Contains("expected more than 1 value per channel when training"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor::zeros({2}), Tensor::ones({2}), Tensor(), Tensor(), true),
                    Catch::Contains("running_mean must have shape [3]"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false),
                    Catch::Contains("eval mode needs running_mean and running_var"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor::zeros({3}), Tensor(), Tensor(), Tensor(), true),
                    Catch::Contains("give both running_mean and running_var"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor(), Tensor(), Tensor::ones({3}, DType::f64), Tensor(), true),
                    Catch::Contains("weight must be float32 on cpu like the input"));
  CHECK_THROWS_WITH(layer_norm(x, {3}), Catch::Contains("does not end in normalized_shape [3]"));
  CHECK_THROWS_WITH(layer_norm(x, {4}, Tensor::ones({5})), Catch::Contains("weight must have shape [4]"));
  CHECK_THROWS_WITH(layer_norm(x, {2, 3, 4, 5}), Catch::Contains("must name 1 to 3 trailing dims"));
}
