// SVTR-lite against the PyTorch reference module (tools/reference/svtr_lite.py; a reduced
// configuration in float64, two lines of different widths): state_dict names and shapes,
// logits in training and eval mode, the CTC loss and every parameter gradient. Plus the preset's
// size, the config's JSON round trip, padding invariance, exact dropout replay, and an overfit
// run whose saved model file is read back through the predictor.
#include <catch2/catch.hpp>
#include <omp.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "golden_runner.h"
#include "infer/predictor.h"
#include "models/ctc_decode.h"
#include "models/model_file.h"
#include "models/recognizer.h"
#include "models/svtr_lite.h"
#include "ops/ctc.h"
#include "train/optim.h"
#include "train/synth.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::nn;
using namespace ocrt::testing;
namespace fs = std::filesystem;

namespace {

const SafetensorsFile& fixture() {
  static const SafetensorsFile f =
      load_safetensors(std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/svtr_lite.safetensors");
  return f;
}

// The fixture's configuration (tools/reference/svtr_lite.py, main()).
SVTRLiteConfig fixture_config() {
  SVTRLiteConfig c;
  c.dims = {8, 12, 16};
  c.depths = {1, 2, 1};
  c.heads = {2, 3, 4};
  c.mixer = {"local", "local", "global", "global"};
  c.out_dim = 10;
  c.dropout = 0;
  c.num_classes = 7;
  return c;
}

// A small config with the preset's structure (local x6 then global x6), for fast tests.
SVTRLiteConfig small_config(int64_t num_classes) {
  SVTRLiteConfig c;
  c.dims = {16, 24, 32};
  c.depths = {2, 2, 2};
  c.heads = {2, 2, 4};
  c.mixer = {"local", "local", "local", "global", "global", "global"};
  c.out_dim = 32;
  c.num_classes = num_classes;
  return c;
}

std::unique_ptr<SVTRLite> fixture_model() {
  Generator gen(1);
  auto m = std::make_unique<SVTRLite>(fixture_config(), gen);
  m->to(DType::f64);
  m->load_state_dict(tensors_with_prefix(fixture(), "init."));  // strict: every name and shape must match the PyTorch module
  return m;
}

}  // namespace

TEST_CASE("svtr-lite preset: SVTR-Tiny's sizes, config JSON round trip, frames", "[svtr]") {
  Generator gen(0);
  SVTRLite m(SVTRLiteConfig::preset("svtr-lite", 97), gen);
  CHECK(m.num_parameters() == 4165953);  // printed by tools/reference/svtr_lite.py for the same module
  CHECK(SVTRLiteConfig::from_json(m.config.to_json()).to_json() == m.config.to_json());
  auto again = make_recognizer("svtr-lite", m.config_json(), gen);
  CHECK(again->config_json() == m.config_json());
  CHECK(again->num_parameters() == m.num_parameters());
  CHECK(m.frames_for_width(128) == 32);
  CHECK(frames_for_width("svtr-lite", 128) == 32);
  CHECK(m.frame_center(3) == 12.0);
  CHECK(is_known_arch("svtr-lite"));
  CHECK_THROWS_WITH(SVTRLiteConfig::preset("svtr-base", 97), Catch::Contains("unknown SVTR-lite preset 'svtr-base'"));

  Json bad = m.config.to_json();
  bad.set("mixer", Json::array());
  CHECK_THROWS_WITH(SVTRLiteConfig::from_json(bad), Catch::Contains("one entry per block (12)"));
  bad = m.config.to_json();
  bad.set("heads", Json(Json::Array{Json(3), Json(4), Json(8)}));
  CHECK_THROWS_WITH(SVTRLiteConfig::from_json(bad), Catch::Contains("stage 0: dims 64 must be a positive multiple of heads 3"));
  Json missing = Json::object();
  missing.set("dims", m.config.to_json().at("dims"));
  CHECK_THROWS_WITH(SVTRLiteConfig::from_json(missing), Catch::Contains("missing 'depths'"));

  SVTRLite small(small_config(11), gen);
  small.eval();
  NoGradGuard no_grad;
  CHECK(small.forward(Tensor::zeros({2, 1, 32, 40})).shape() == Shape{10, 2, 11});
  CHECK_THROWS_WITH(small.forward(Tensor::zeros({1, 1, 32, 42})), Catch::Contains("multiple of 4"));
  CHECK_THROWS_WITH(small.forward(Tensor::zeros({1, 1, 48, 40})), Catch::Contains("(N, 1, 32, W)"));
  CHECK_THROWS_WITH(small.forward(Tensor::zeros({2, 1, 32, 40}), {40, 44}), Catch::Contains("width 44 of line 1"));
}

TEST_CASE("svtr-lite matches the PyTorch reference: logits, loss and every gradient", "[svtr][golden]") {
  const auto& f = fixture();
  auto model = fixture_model();
  const Tensor x = f.get("x");
  const std::vector<int64_t> widths = f.get("widths").to_vector<int64_t>();
  model->train();
  Tensor logits = model->forward(x, widths);
  require_close(logits, f.get("train.logits"), 1e-9, 1e-11, "training-mode logits");
  std::vector<int64_t> input_lengths;
  for (int64_t w : widths) input_lengths.push_back(SVTRLite::frames(w));
  Tensor loss = ctc_loss_from_logits(logits, f.get("targets"), input_lengths, f.get("target_lengths").to_vector<int64_t>());
  CHECK(loss.item() == Approx(f.get("train.loss").item()).epsilon(1e-10));
  loss.backward();
  int64_t compared = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    INFO("parameter " << name);
    REQUIRE(p.grad().defined());
    require_close(p.grad(), f.get("grad." + name), 1e-7, 1e-10, "gradient of " + name);
    ++compared;
  }
  int64_t in_fixture = 0;
  for (const auto& [name, t] : f.tensors) in_fixture += name.rfind("grad.", 0) == 0;
  CHECK(compared == in_fixture);
  for (const auto& [name, t] : model->named_buffers())
    if (f.contains("after_forward." + name)) require_close(t, f.get("after_forward." + name), 1e-10, 1e-12, name);
  model->eval();
  NoGradGuard no_grad;
  require_close(model->forward(x, widths), f.get("eval.logits"), 1e-9, 1e-11, "eval logits with widths");
  require_close(model->forward(x), f.get("eval.logits_nowidths"), 1e-9, 1e-11, "eval logits without widths");
}

TEST_CASE("svtr-lite: a line's logits are the same alone and in a batch with a wider line", "[svtr]") {
  Generator gen(3);
  SVTRLite model(small_config(11), gen);
  model.eval();
  NoGradGuard no_grad;
  // 60 columns: 15 token columns, wider than the 11-column window, so the window masks matter.
  const int64_t w = 60, wide = 200;
  const Tensor line = det_uniform({1, 1, 32, w}, 5, -1, 1, DType::f32);
  const Tensor other = det_uniform({1, 1, 32, wide}, 6, -1, 1, DType::f32);
  const Tensor alone = model.forward(line, {w});
  REQUIRE(alone.shape() == Shape{15, 1, 11});
  Tensor batch = Tensor::ones({2, 1, 32, wide});  // white padding, as the data pipeline pads
  batch.narrow(0, 0, 1).copy_(other);
  batch.narrow(0, 1, 1).narrow(3, 0, w).copy_(line);
  const Tensor both = model.forward(batch, {wide, w});
  require_close(both.narrow(1, 1, 1).narrow(0, 0, 15), alone, 1e-5, 1e-5, "the narrow line, batched with a wider one");
  // The wider line too is unaffected by its neighbour.
  require_close(both.narrow(1, 0, 1), model.forward(other, {wide}), 1e-5, 1e-5, "the wide line");
  // Without the widths, attention reaches into the padding and the result changes.
  const Tensor unmasked = model.forward(batch).narrow(1, 1, 1).narrow(0, 0, 15);
  CHECK(unmasked.to_vector<float>() != alone.to_vector<float>());
}

TEST_CASE("svtr-lite: threads running one model at once, on lines of other widths, read as one thread does",
          "[svtr]") {
  // The predictor's CPU workers share one model. SVTR-lite keeps its position table for the
  // last width between calls: four threads, each on its own width, over and over, must each
  // get what one thread gets (the table renewed under a lock, each call with its own handle).
  Generator gen(4);
  SVTRLite model(small_config(11), gen);
  model.eval();
  const std::vector<int64_t> widths{40, 60, 96, 128};
  std::vector<Tensor> lines, expected;
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < widths.size(); ++i) {
      lines.push_back(det_uniform({1, 1, 32, widths[i]}, 30 + i, -1, 1, DType::f32));
      expected.push_back(model.forward(lines[i], {widths[i]}));
    }
  }
  std::vector<int> mismatches(widths.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < widths.size(); ++i)
    threads.emplace_back([&, i] {
      omp_set_num_threads(1);
      NoGradGuard no_grad;
      for (int rep = 0; rep < 20; ++rep)
        if (model.forward(lines[i], {widths[i]}).to_vector<float>() != expected[i].to_vector<float>()) ++mismatches[i];
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < widths.size(); ++i) {
    INFO("width " << widths[i]);
    CHECK(mismatches[i] == 0);
  }
}

TEST_CASE("svtr-lite dropout replays from the step count (exact resume)", "[svtr]") {
  SVTRLiteConfig c = small_config(9);
  c.dropout = 0.5;
  Generator gen(4);
  SVTRLite model(c, gen);
  model.train();
  const Tensor x = det_uniform({2, 1, 32, 48}, 8, -1, 1, DType::f32);
  auto run_at = [&](int64_t count) {
    NoGradGuard no_grad;
    for (auto& [name, t] : model.named_buffers())
      if (name.find("num_batches_tracked") != std::string::npos) t.fill_((double)count);
    return model.forward(x, {48, 40}).to_vector<float>();
  };
  const auto a = run_at(3), b = run_at(4), a2 = run_at(3);
  CHECK(a == a2);  // same step, same masks (and the same batch statistics)
  CHECK(a != b);
}

TEST_CASE("svtr-lite overfits a few lines, and the saved model reads them through the predictor", "[svtr][train]") {
  auto dirs = train::default_font_dirs();
  if (dirs.empty()) {
    WARN("no Debian font installed: skipped");
    return;
  }
  auto fonts = train::load_fonts(dirs);
  std::shared_ptr<train::Font> font;
  for (auto& f : fonts)
    if (f->path().find("DejaVuSans.ttf") != std::string::npos) font = f;
  if (!font) font = fonts.front();
  const std::vector<std::string> texts = {"hello", "ocrt 42", "CTC", "line four"};
  const Charset cs = Charset::ascii();
  std::vector<GrayImage> lines;
  std::vector<int64_t> targets, target_lengths;
  for (const auto& t : texts) {
    lines.push_back(resize_to_height(font->render(t, 28), 32));
    std::vector<int64_t> cls;
    REQUIRE(cs.encode(t, cls));
    targets.insert(targets.end(), cls.begin(), cls.end());
    target_lengths.push_back((int64_t)cls.size());
  }
  std::vector<int64_t> widths;
  const Tensor x = pack_batch(lines, BatchSpec{}, &widths);
  std::vector<int64_t> frames;
  for (int64_t w : widths) frames.push_back(SVTRLite::frames(w));

  SVTRLiteConfig c = small_config(cs.num_classes());
  c.dropout = 0;
  Generator gen(11);
  SVTRLite model(c, gen);
  train::AdamOptions ao;
  ao.lr = 3e-3;
  train::Adam opt(model.parameters(), ao);
  const Tensor target_tensor = Tensor::from_vector(targets);
  double loss_v = 0;
  int64_t step = 0;
  for (; step < 400; ++step) {
    model.train();
    Tensor loss = ctc_loss_from_logits(model.forward(x, widths), target_tensor, frames, target_lengths);
    loss_v = loss.item();
    loss.backward();
    opt.step();
    opt.zero_grad();
    if (step % 10 == 9) {  // done when eval mode reads every line (seen: after 190 steps)
      model.eval();
      NoGradGuard no_grad;
      auto decoded = ctc_greedy_decode(model.forward(x, widths), frames);
      bool all = true;
      for (size_t i = 0; i < texts.size(); ++i) all = all && cs.decode(decoded[i].labels) == texts[i];
      if (all) break;
    }
  }
  INFO("stopped at step " << step << ", loss " << loss_v);
  REQUIRE(step < 400);

  const fs::path path = ocrt::testing::process_temp_dir("svtr") / "model.safetensors";
  ModelInfo info;
  info.arch = "svtr-lite";
  info.config = model.config_json();
  info.charset = cs.chars();
  info.input = default_input_spec();
  save_model_file(path.string(), model, info);
  std::vector<infer::LineResult> results;
  {
    infer::PredictorOptions po;
    po.threads = 2;
    infer::Predictor predictor(path.string(), po);
    std::vector<infer::LineInput> in;
    for (size_t i = 0; i < lines.size(); ++i) in.push_back({"line" + std::to_string(i), lines[i]});
    results = predictor.recognize(in);
  }
  fs::remove(path);
  REQUIRE(results.size() == texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO(results[i].error);
    CHECK(results[i].text == texts[i]);
    CHECK(results[i].chars.size() == nn::utf8_chars(texts[i]).size());
  }
}
