// The same training run on the CPU and on cuda:0 sees the same batches (the loader prepares
// them on the CPU from the seed and the step alone) and so follows the same trajectory: after
// a few steps with augmentation and shuffling on, the losses and weights agree to float32
// accuracy.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "golden_runner.h"
#include "temp_dir.h"
#include "models/model_file.h"
#include "runtime/image.h"
#include "train/synth.h"
#include "train/trainer.h"

using namespace ocrt;
using namespace ocrt::train;
namespace fs = std::filesystem;

TEST_CASE("a CPU run and a CUDA run of ocrt-train see the same batches and end at the same weights",
          "[cuda][trainer]") {
  const ocrt::testing::TempDir tmp("cuda-train");  // removed however the test ends
  const fs::path root = tmp.path;
  fs::create_directories(root / "data");
  const auto font_dirs = default_font_dirs();
  auto fonts = font_dirs.empty() ? std::vector<std::shared_ptr<Font>>{} : load_fonts(font_dirs);
  if (fonts.empty()) {
    WARN("no fonts: skipped");
    return;
  }
  const char* texts[] = {"hello", "GPU 42", "same batches", "x-y-z", "ocrt", "train 7"};
  for (int i = 0; i < 6; ++i) {
    const std::string name = "l" + std::to_string(i);
    save_gray_png((root / "data" / (name + ".png")).string(), fonts[(size_t)i % fonts.size()]->render(texts[i], 28));
    std::ofstream(root / "data" / (name + ".gt.txt")) << texts[i] << "\n";
  }
  auto config = [&](Device d, const std::string& out) {
    TrainConfig c;
    c.arch = "crnn-s";
    c.train = {(root / "data").string()};
    c.out = (root / out).string();
    c.device = d;
    c.batch = 3;
    c.steps = 3;
    c.workers = 2;
    c.threads = 2;
    c.augment = true;  // drawn on the CPU from (seed, epoch, position): the same on every device
    c.shuffle = true;
    c.optimizer = OptimizerKind::sgd;
    c.momentum = 0.9;
    c.lr = 0.01;
    c.schedule = ScheduleKind::constant;
    c.log_every = 1000;
    // The CUDA conv is im2col + cuBLAS: compare it with the CPU's im2col, not its Winograd, whose
    // 1e-5 rounding can flip max-pool near-ties under BatchNorm (docs/ops/conv.md).
    c.conv = ConvMode::exact;
    return c;
  };
  const TrainResult cpu = run_training(config(Device::cpu(), "cpu"));
  const TrainResult gpu = run_training(config(Device::cuda(0), "gpu"));
  CHECK(gpu.final_loss == Approx(cpu.final_loss).epsilon(1e-3));
  const nn::ModelFile a = nn::load_model_file(cpu.best_model), b = nn::load_model_file(gpu.best_model);
  double worst = 0;
  for (const auto& [name, t] : a.weights)
    worst = std::max(worst, ocrt::testing::max_rel_diff(b.weights.at(name), t, 1e-3));  // relative to the CPU run
  CHECK(worst < 1e-3);
}
