// CRNN against the PyTorch reference module (tools/reference/crnn.py; a tiny configuration in
// float64): state_dict names and shapes, logits in training and eval mode with per-line widths,
// the CTC loss, every parameter gradient, BatchNorm's running statistics, and the weights after
// one plain SGD step (the training-step parity of the CRNN issue). Plus the presets' sizes.
#include <catch2/catch.hpp>

#include "golden_runner.h"
#include "models/crnn.h"
#include "ops/ctc.h"

using namespace ocrt;
using namespace ocrt::nn;
using namespace ocrt::testing;

namespace {

const SafetensorsFile& fixture() {
  static const SafetensorsFile f = load_safetensors(std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/crnn.safetensors");
  return f;
}

std::unique_ptr<CRNN> tiny_model() {
  CRNNConfig c;
  c.channels = {4, 6, 8, 8, 10, 10, 12};
  c.hidden = 7;
  c.num_classes = 9;
  Generator gen(1);
  auto m = std::make_unique<CRNN>(c, gen);
  m->to(DType::f64);
  m->load_state_dict(tensors_with_prefix(fixture(), "init."));  // strict: every name and shape must match the PyTorch module
  return m;
}

}  // namespace

TEST_CASE("CRNN presets have the sizes of docs/models.md", "[crnn]") {
  Generator gen(0);
  CRNN crnn(CRNNConfig::preset("crnn", 97), gen);
  CHECK(crnn.num_parameters() == 8753761);  // printed by tools/reference/crnn.py for the same module
  CRNN small(CRNNConfig::preset("crnn-s", 97), gen);
  CHECK(small.num_parameters() == 2204001);
  CHECK(CRNNConfig::from_json(crnn.config.to_json()).to_json() == crnn.config.to_json());
  CHECK_THROWS_WITH(CRNNConfig::preset("crnn-xl", 97), Catch::Contains("unknown CRNN preset 'crnn-xl'"));
  Tensor x = Tensor::zeros({2, 1, 32, 40});
  CHECK(small.forward(x).shape() == Shape{11, 2, 97});
  CHECK_THROWS_WITH(small.forward(Tensor::zeros({1, 1, 32, 42})), Catch::Contains("multiple of 4"));
  CHECK_THROWS_WITH(small.forward(x, {40, 44}), Catch::Contains("width 44 of line 1"));
}

TEST_CASE("CRNN matches the PyTorch reference: a training step, gradients and eval", "[crnn][golden]") {
  const auto& f = fixture();
  auto model = tiny_model();
  const Tensor x = f.get("x");
  const std::vector<int64_t> widths = f.get("widths").to_vector<int64_t>();
  model->train();
  Tensor logits = model->forward(x, widths);
  require_close(logits, f.get("train.logits"), 1e-9, 1e-11, "training-mode logits");
  std::vector<int64_t> input_lengths;
  for (int64_t w : widths) input_lengths.push_back(CRNN::frames(w));
  Tensor loss = ctc_loss_from_logits(logits, f.get("targets"), input_lengths, f.get("target_lengths").to_vector<int64_t>());
  CHECK(loss.item() == Approx(f.get("train.loss").item()).epsilon(1e-10));
  loss.backward();
  for (const auto& [name, p] : model->named_parameters()) {
    INFO("parameter " << name);
    REQUIRE(p.grad().defined());
    require_close(p.grad(), f.get("grad." + name), 1e-7, 1e-10, "gradient of " + name);
  }
  for (const auto& [name, t] : model->named_buffers())
    if (f.contains("after_forward." + name)) require_close(t, f.get("after_forward." + name), 1e-10, 1e-12, name);
  {
    NoGradGuard no_grad;
    for (auto& p : model->parameters()) add_(p, p.grad(), -0.1);
  }
  for (const auto& [name, p] : model->named_parameters())
    require_close(p, f.get("after_sgd." + name), 1e-9, 1e-11, "after one SGD step: " + name);
  model->eval();
  NoGradGuard no_grad;
  require_close(model->forward(x, widths), f.get("eval.logits"), 1e-9, 1e-11, "eval logits with widths");
  require_close(model->forward(x), f.get("eval.logits_unpacked"), 1e-9, 1e-11, "eval logits without widths");
}

TEST_CASE("a line's result does not depend on how much padding its batch adds", "[crnn]") {
  CRNNConfig c = CRNNConfig::preset("crnn-s", 11);
  Generator gen(3);
  CRNN model(c, gen);
  model.eval();
  NoGradGuard no_grad;
  const Tensor line = ocrt::testing::det_uniform({1, 1, 32, 24}, 5, -1, 1, DType::f32);
  auto padded_to = [&](int64_t width) {  // white (1.0) background, as the data pipeline pads
    Tensor p = Tensor::ones({1, 1, 32, width});
    p.narrow(3, 0, 24).copy_(line);
    return p;
  };
  const int64_t T = CRNN::frames(24);
  const Tensor narrow_batch = model.forward(padded_to(48), {24}).narrow(0, 0, T);
  const Tensor wide_batch = model.forward(padded_to(96), {24}).narrow(0, 0, T);
  require_close(wide_batch, narrow_batch, 1e-5, 1e-6, "same line, batches of different widths");
  // Without the widths the reverse LSTM starts in the padding, and the results differ.
  const Tensor no_widths = model.forward(padded_to(96)).narrow(0, 0, T);
  CHECK(no_widths.to_vector<float>() != narrow_batch.to_vector<float>());
}
