// Training checkpoints (train/checkpoint.h): a round trip keeps the model, the optimizer's
// moments and the run's state exactly; the folder's checkpoints are listed by step and pruned
// to the newest; a file that is not a checkpoint, or a damaged one, is refused by name.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "models/layers.h"
#include "models/model_file.h"
#include "runtime/rng.h"
#include "runtime/safetensors.h"
#include "temp_dir.h"
#include "train/checkpoint.h"

using namespace ocrt;
using namespace ocrt::train;
using ocrt::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// A Linear layer and an AdamW that has taken one step (so it has moments to save).
struct Trained {
  Generator gen{21};
  nn::Linear model{3, 2, true, gen};
  Adam optim{model.parameters(), AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.1}, true};
  Trained() {
    for (Tensor& p : model.parameters()) p.set_grad(Tensor::full(p.shape(), 0.5));
    optim.step();
  }
};

nn::ModelInfo info() {
  nn::ModelInfo i;
  i.arch = "toy";
  i.config.set("in", 3);
  i.charset = {"a", " ", "\xc3\xa9"};
  i.input = nn::default_input_spec();
  return i;
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// info() as a checkpoint's "model" entry holds it.
std::string info_json_text() {
  return R"({"arch": "toy", "config": {"in": 3}, "charset": ["a"], "input": {"height": 32}})";
}

}  // namespace

TEST_CASE("a checkpoint round trip keeps the weights, the optimizer state and the run's state", "[checkpoint]") {
  TempDir dir("checkpoint-roundtrip");
  Trained t;
  TrainState state;
  state.step = 1234;
  state.seed = 18446744073709551557ull;  // above 2^53: kept as text, not a JSON number
  state.best_cer = 0.0421;
  state.best_step = 1000;
  state.skipped_steps = 3;
  state.settings.set("lr", 0.001);
  const std::string path = checkpoint_path(dir.path.string(), state.step);
  CHECK(fs::path(path).filename() == "ckpt-00001234.safetensors");
  save_checkpoint(path, t.model, t.optim, state, info());

  const Checkpoint c = load_checkpoint(path);
  CHECK(c.path == path);
  CHECK(c.state.step == 1234);
  CHECK(c.state.seed == 18446744073709551557ull);
  CHECK(c.state.best_cer == 0.0421);
  CHECK(c.state.best_step == 1000);
  CHECK(c.state.skipped_steps == 3);
  CHECK(c.state.settings.at("lr").as_number() == 0.001);
  CHECK(c.info.arch == "toy");
  CHECK(c.info.charset == info().charset);
  CHECK(c.info.config.at("in").as_int() == 3);
  const nn::StateDict weights = t.model.state_dict();
  REQUIRE(c.model.size() == weights.size());
  for (const auto& [name, w] : weights) CHECK(values(c.model.at(name)) == values(w));
  const nn::StateDict moments = t.optim.state_dict();
  REQUIRE(c.optim.size() == moments.size());
  for (const auto& [key, m] : moments) CHECK(values(c.optim.at(key).to(DType::f32)) == values(m.to(DType::f32)));

  // An optimizer loaded from it steps exactly as the saved one does.
  Generator other_gen(99);
  nn::Linear again(3, 2, true, other_gen);
  again.load_state_dict(c.model);
  Adam resumed(again.parameters(), AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.1}, true);
  resumed.load_state_dict(c.optim);
  for (Tensor& p : t.model.parameters()) p.set_grad(Tensor::full(p.shape(), -0.25));
  for (Tensor& p : again.parameters()) p.set_grad(Tensor::full(p.shape(), -0.25));
  t.optim.step();
  resumed.step();
  CHECK(values(again.weight) == values(t.model.weight));
}

TEST_CASE("list_checkpoints orders by step and skips other files, and prune keeps the newest", "[checkpoint]") {
  TempDir dir("checkpoint-list");
  const std::string d = dir.path.string();
  CHECK(list_checkpoints((dir.path / "missing").string()).empty());
  Trained t;
  for (int64_t step : {300, 20, 1000, 5}) {
    TrainState s;
    s.step = step;
    save_checkpoint(checkpoint_path(d, step), t.model, t.optim, s, info());
  }
  // What a killed save leaves, and files that are not checkpoints.
  std::ofstream(checkpoint_path(d, 2000) + ".tmp.4242") << "partial";
  std::ofstream(dir.path / "best.safetensors") << "x";
  std::ofstream(dir.path / "ckpt-notes.txt") << "x";
  std::vector<std::string> names;
  for (const auto& p : list_checkpoints(d)) names.push_back(fs::path(p).filename().string());
  CHECK(names == std::vector<std::string>{"ckpt-00000005.safetensors", "ckpt-00000020.safetensors",
                                          "ckpt-00000300.safetensors", "ckpt-00001000.safetensors"});
  prune_checkpoints(d, 2);
  names.clear();
  for (const auto& p : list_checkpoints(d)) names.push_back(fs::path(p).filename().string());
  CHECK(names == std::vector<std::string>{"ckpt-00000300.safetensors", "ckpt-00001000.safetensors"});
  CHECK(fs::exists(dir.path / "best.safetensors"));
}

TEST_CASE("load_checkpoint refuses what is not a checkpoint, naming the file", "[checkpoint]") {
  TempDir dir("checkpoint-bad");
  Trained t;
  // A model file is not a checkpoint.
  const std::string model_path = (dir.path / "model.safetensors").string();
  nn::save_model_file(model_path, t.model, info());
  CHECK_THROWS_WITH(load_checkpoint(model_path),
                    Catch::Contains(model_path) && Catch::Contains("expected 'ocrt-checkpoint-1'"));
  // Weights without metadata.
  const std::string bare = (dir.path / "bare.safetensors").string();
  save_safetensors(bare, {{"model.weight", t.model.weight}});
  CHECK_THROWS_WITH(load_checkpoint(bare), Catch::Contains("not an ocrt checkpoint"));
  // Damaged state, and a tensor of neither the model nor the optimizer.
  const std::string damaged = (dir.path / "damaged.safetensors").string();
  save_safetensors(damaged, {{"model.weight", t.model.weight}},
                   {{"format", "ocrt-checkpoint-1"}, {"state", "{\"step\": 1}"}, {"model", "{}"}});
  CHECK_THROWS_WITH(load_checkpoint(damaged), Catch::Contains("damaged checkpoint metadata"));
  TrainState s;
  const std::string good = (dir.path / "good.safetensors").string();
  save_checkpoint(good, t.model, t.optim, s, info());
  SafetensorsFile f = load_safetensors(good);
  std::vector<std::pair<std::string, Tensor>> tensors(f.tensors.begin(), f.tensors.end());
  tensors.emplace_back("extra.bias", t.model.bias);
  const std::string extra = (dir.path / "extra.safetensors").string();
  save_safetensors(extra, tensors, f.metadata);
  CHECK_THROWS_WITH(load_checkpoint(extra), Catch::Contains("unexpected tensor 'extra.bias'"));
}

TEST_CASE("a checkpoint reads as a model file: its model's weights and fields, not the optimizer's state",
          "[checkpoint]") {
  TempDir dir("checkpoint-as-model");
  Trained t;
  TrainState state;
  state.step = 7;
  const std::string path = checkpoint_path(dir.path.string(), state.step);
  save_checkpoint(path, t.model, t.optim, state, info());
  const nn::ModelFile f = nn::load_model_file(path);
  REQUIRE(f.info.has_value());
  CHECK(f.info->arch == "toy");
  CHECK(f.info->charset == info().charset);
  CHECK(f.info->config.at("in").as_int() == 3);
  CHECK(f.info->input.at("height").as_int() == 32);
  const nn::StateDict weights = t.model.state_dict();
  REQUIRE(f.weights.size() == weights.size());  // no "optim.*" tensors
  for (const auto& [name, w] : weights) CHECK(values(f.weights.at(name)) == values(w));
  // A checkpoint whose "model" entry is damaged is refused by name, as a model file's fields are.
  const std::string bad = (dir.path / "bad.safetensors").string();
  save_safetensors(bad, {{"model.weight", Tensor::ones({2, 3})}},
                   {{"format", "ocrt-checkpoint-1"}, {"state", "{}"}, {"model", "{\"arch\": \"toy\"}"}});
  CHECK_THROWS_WITH(nn::load_model_file(bad), Catch::Contains(bad) && Catch::Contains("config"));
  save_safetensors(bad, {{"optim.step", Tensor::ones({1})}},
                   {{"format", "ocrt-checkpoint-1"}, {"state", "{}"}, {"model", info_json_text()}});
  CHECK_THROWS_WITH(nn::load_model_file(bad), Catch::Contains("without model tensors"));
}
