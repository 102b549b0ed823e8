// PyTorch parity of one training step through the whole trainer: lines written as PNG files
// with their labels, initial weights given with --init, one plain SGD step of run_training (what
// ocrt-train runs), compared with tools/reference/train_step.py's float64 reference: the loss of
// the step, and every parameter and BatchNorm buffer after it. Unlike the model-level step test
// (tests/models/test_crnn.cpp), this also covers reading and padding the images, the label
// classes, the loader's batch, the CTC lengths, the optimizer and the model file written at the
// end.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "models/crnn.h"
#include "models/model_file.h"
#include "runtime/image.h"
#include "runtime/safetensors.h"
#include "golden_runner.h"
#include "temp_dir.h"
#include "train/trainer.h"

using namespace ocrt;
using namespace ocrt::train;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) out.push_back(part);
  return out;
}

}  // namespace

TEST_CASE("one ocrt-train step from --init matches PyTorch's loss and weights", "[trainer][golden]") {
  const SafetensorsFile f =
      load_safetensors(std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/train_step.safetensors");
  const std::string charset = f.metadata.at("charset");
  const std::vector<std::string> texts = split(f.metadata.at("texts"), '|');
  const std::vector<std::string> channels = split(f.metadata.at("channels"), ',');
  REQUIRE(channels.size() == 7);

  ocrt::testing::TempDir dir("train-step");
  const fs::path data = dir.path / "lines", out = dir.path / "run";
  fs::create_directories(data);
  // The lines, in file-name order (the order the loader keeps without shuffling).
  for (size_t n = 0; n < texts.size(); ++n) {
    const Tensor img = f.get("image" + std::to_string(n));  // (32, w) uint8
    GrayImage g;
    g.height = img.size(0);
    g.width = img.size(1);
    g.pixels = img.to_vector<uint8_t>();
    const std::string name = "line" + std::to_string(n);
    save_gray_png((data / (name + ".png")).string(), g);
    std::ofstream(data / (name + ".gt.txt")) << texts[n] << "\n";
  }
  std::ofstream cs(dir.path / "charset.txt");
  for (char c : charset) cs << c << "\n";
  cs.close();

  // The initial weights as a model file with the fixture's (tiny) config.
  nn::CRNNConfig config;
  for (size_t i = 0; i < 7; ++i) config.channels[i] = std::stoll(channels[i]);
  config.hidden = std::stoll(f.metadata.at("hidden"));
  config.num_classes = (int64_t)charset.size() + 1;
  Generator gen(0);
  nn::CRNN init_model(config, gen);
  const nn::StateDict init = ocrt::testing::tensors_with_prefix(f, "init.");
  init_model.load_state_dict(init);
  nn::ModelInfo info;
  info.arch = "crnn-s";
  info.config = config.to_json();
  for (char c : charset) info.charset.push_back(std::string(1, c));
  info.input = nn::default_input_spec();
  const std::string init_path = (dir.path / "init.safetensors").string();
  nn::save_model_file(init_path, init_model, info);

  TrainConfig c;
  c.arch = "crnn-s";
  c.train = {data.string()};
  c.charset_path = (dir.path / "charset.txt").string();
  c.init = init_path;
  c.out = out.string();
  c.batch = (int64_t)texts.size();
  c.steps = 1;
  c.workers = 1;
  c.threads = 1;
  c.shuffle = false;
  c.augment = false;
  c.bucket_window = 0;
  c.optimizer = OptimizerKind::sgd;
  c.momentum = 0;
  c.weight_decay = 0;
  c.clip_grad = 0;
  c.schedule = ScheduleKind::constant;
  c.warmup = 0;
  c.lr = std::stod(f.metadata.at("lr"));
  const TrainResult r = run_training(c);
  REQUIRE(r.steps == 1);

  const double want_loss = f.get("loss").item();
  CHECK(r.final_loss == Approx(want_loss).epsilon(1e-5));

  const nn::ModelFile trained = nn::load_model_file(r.best_model);
  int compared = 0;
  for (const auto& [key, want] : ocrt::testing::tensors_with_prefix(f, "after.")) {
    INFO(key);
    REQUIRE(trained.weights.count(key));
    CHECK(ocrt::testing::max_rel_diff(trained.weights.at(key), want, 1e-3) < 2e-5);
    // The step moved the parameters (a no-op step would also "match" a stale fixture).
    if (key.find("running") == std::string::npos && key.find("num_batches") == std::string::npos &&
        init.count(key))
      CHECK(ocrt::testing::max_rel_diff(want, init.at(key), 1.0) > 0);
    ++compared;
  }
  CHECK(compared == (int)trained.weights.size());
}
