// DBNet-lite against the PyTorch reference module (tools/reference/dbnet.py; a reduced
// configuration in float64): state_dict names and shapes, both maps in training mode, DB's loss
// on hand-made targets (every pixel weighing 1), every parameter's gradient, BatchNorm's running
// statistics, and the probability map in eval mode. Plus the preset's size, the config round
// trip, input checks and a detector model file.
#include <catch2/catch.hpp>

#include "golden_runner.h"
#include "models/dbnet.h"
#include "models/model_file.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/loss.h"
#include "ops/reduce.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::nn;
using namespace ocrt::testing;

namespace {

const SafetensorsFile& fixture() {
  static const SafetensorsFile f = load_safetensors(std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/dbnet.safetensors");
  return f;
}

// tools/reference/dbnet.py's db_loss: alpha BCE over the shrink mask + beta masked L1 of the
// threshold map + the dice loss of the approximate binary map sigmoid(k (P - T)).
Tensor reference_loss(const DBNet::Maps& m, const Tensor& shrink, const Tensor& shrink_mask, const Tensor& tmap,
                      const Tensor& tmask) {
  const double eps = 1e-6;
  Tensor bce = binary_cross_entropy_with_logits(m.prob, shrink, shrink_mask, Reduction::sum);
  Tensor l_prob = div(bce, add(sum(shrink_mask), eps));
  Tensor t = sigmoid(m.thresh);
  Tensor l_thresh = div(sum(mul(abs(sub(t, tmap)), tmask)), add(sum(tmask), eps));
  Tensor b = sigmoid(mul(sub(sigmoid(m.prob), t), 50.0));
  Tensor l_bin = dice_loss(b, shrink, shrink_mask, eps);
  return add(add(mul(l_prob, 5.0), mul(l_thresh, 10.0)), l_bin);
}

}  // namespace

TEST_CASE("DBNet preset: size, config round trip and input checks", "[dbnet]") {
  Generator gen(0);
  auto m = make_detector("dbnet", gen);
  CHECK(m->num_parameters() == 325946);  // printed by tools/reference/dbnet.py for the same module
  CHECK(DBNetConfig::from_json(m->config.to_json()).to_json() == m->config.to_json());
  CHECK_THROWS_WITH(make_detector("dbnet-xl", gen), Catch::Contains("unknown detector architecture 'dbnet-xl'"));
  Json bad = m->config.to_json();
  bad.set("fpn", 30);
  CHECK_THROWS_WITH(DBNetConfig::from_json(bad), Catch::Contains("'fpn' must be a positive multiple of 4"));
  bad = m->config.to_json();
  bad.set("shrink_ratio", 1.5);
  CHECK_THROWS_WITH(DBNetConfig::from_json(bad), Catch::Contains("'shrink_ratio' must be in"));
  m->eval();
  NoGradGuard no_grad;
  CHECK(m->forward(Tensor::zeros({2, 1, 64, 96})).shape() == Shape{2, 1, 64, 96});
  CHECK_THROWS_WITH(m->forward(Tensor::zeros({1, 1, 64, 80})), Catch::Contains("multiples of 32"));
  CHECK_THROWS_WITH(m->forward(Tensor::zeros({1, 3, 64, 64})), Catch::Contains("expected input (N, 1, H, W)"));
  CHECK_FALSE(m->forward_maps(Tensor::zeros({1, 1, 32, 32}), false).thresh.defined());
}

TEST_CASE("DBNet matches the PyTorch reference: maps, DB loss, gradients and eval", "[dbnet][golden]") {
  const auto& f = fixture();
  DBNetConfig c;
  c.channels = {3, 4, 5, 6, 7};
  c.fpn = 8;
  c.head = 3;
  Generator gen(1);
  DBNet model(c, gen);
  model.to(DType::f64);
  model.load_state_dict(tensors_with_prefix(f, "init."));  // strict: every name and shape must match
  const Tensor x = f.get("x");
  model.train();
  DBNet::Maps maps = model.forward_maps(x, true);
  require_close(maps.prob, f.get("train.prob"), 1e-9, 1e-11, "probability logits");
  require_close(maps.thresh, f.get("train.thresh"), 1e-9, 1e-11, "threshold logits");
  Tensor loss = reference_loss(maps, f.get("shrink"), f.get("shrink_mask"), f.get("tmap"), f.get("tmask"));
  CHECK(loss.item() == Approx(f.get("train.loss").item()).epsilon(1e-10));
  loss.backward();
  for (const auto& [name, p] : model.named_parameters()) {
    INFO("parameter " << name);
    REQUIRE(p.grad().defined());
    require_close(p.grad(), f.get("grad." + name), 1e-7, 1e-10, "gradient of " + name);
  }
  for (const auto& [name, t] : model.named_buffers())
    if (f.contains("after_forward." + name)) require_close(t, f.get("after_forward." + name), 1e-10, 1e-12, name);
  model.eval();
  NoGradGuard no_grad;
  require_close(model.forward(x), f.get("eval.prob"), 1e-9, 1e-11, "eval probability logits");
}

TEST_CASE("a detector model file has no charset and loads back", "[dbnet]") {
  TempDir dir("dbnet-file");
  Generator gen(5);
  auto m = make_detector("dbnet", gen);
  ModelInfo info;
  info.arch = "dbnet";
  info.config = m->config_json();
  info.input = detector_input_spec();
  const std::string path = (dir.path / "det.safetensors").string();
  save_model_file(path, *m, info);
  ModelFile f = load_model_file(path);
  REQUIRE(f.info.has_value());
  CHECK(f.info->arch == "dbnet");
  CHECK(f.info->charset.empty());
  CHECK(f.info->input.at("size_multiple").as_int() == 32);
  Generator gen2(6);
  auto back = make_detector(f.info->arch, f.info->config, gen2);
  back->load_state_dict(f.weights);
  for (const auto& [name, t] : m->named_parameters())
    CHECK(back->state_dict().at(name).to_vector<float>() == t.to_vector<float>());
  // A recogniser's file still needs its characters.
  ModelInfo rec = info;
  rec.arch = "crnn";
  CHECK_THROWS_WITH(save_model_file(path, *m, rec), Catch::Contains("the charset is empty"));
}

TEST_CASE("DBNet in inference runs its probability head in bands, with its upsamplings folded into convolutions, and gives the whole-page map", "[dbnet]") {
  // 1184 rows: F has 296 rows, 5 bands of 64 (the last 40); every band edge is inside the page.
  Generator gen(5);
  DBNet model(DBNetConfig::preset("dbnet"), gen);
  // Statistics that are not the identity, so the in-place eval BatchNorm is exercised too.
  for (auto& [name, t] : model.named_buffers())
    if (name.find("running_var") != std::string::npos) t.copy_(uniform(t.shape(), 0.5, 2.0, gen));
    else if (name.find("running_mean") != std::string::npos) t.copy_(uniform(t.shape(), -0.2, 0.2, gen));
  // And BatchNorm scales and shifts, which the inference head folds into its convolutions.
  {
    NoGradGuard no_grad;
    for (auto& [name, t] : model.named_parameters())
      if (name.find("head.1.") != std::string::npos || name.find("head.5.") != std::string::npos)
        t.copy_(uniform(t.shape(), name.find("weight") != std::string::npos ? 0.5 : -0.3,
                        name.find("weight") != std::string::npos ? 1.5 : 0.3, gen));
  }
  model.eval();
  const Tensor x = uniform({1, 1, 1184, 96}, -1.0, 1.0, gen);
  const Tensor whole = model.forward(x).detach();  // grad on: the whole map in one pass
  Tensor banded;
  {
    NoGradGuard no_grad;
    banded = model.forward(x);
  }
  REQUIRE(banded.shape() == whole.shape());
  const auto a = banded.to_vector<float>(), b = whole.to_vector<float>();
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs((double)a[i] - b[i])), scale = std::max(scale, std::abs((double)b[i]));
  INFO("largest difference " << worst << " of values up to " << scale);
  CHECK(worst <= 1e-5 * std::max(1.0, scale));
}
