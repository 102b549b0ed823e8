// ocrt-train as a command (train/ocrt_train.cpp): every number on its command line is read
// strictly and range-checked before any work, the error naming the flag; --help lists the flags
// docs/cli.md describes; --resume refuses changed settings unless --allow-changes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/image.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::testing;
namespace fs = std::filesystem;

TEST_CASE("ocrt-train refuses every bad number by its flag before any work", "[trainer][cli]") {
  TempDir dir("train-numbers");
  const fs::path out = dir.path / "run";
  const std::string bin = program("ocrt-train") + " --train synth --out " + out.string() + " ";
  // (arguments, the start of the error): each flag with a value out of range, not finite, too
  // large for its type, or not a number at all.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--epochs 1e300", "--epochs: must be in (0, 1e6], got 1e300"},
      {"--epochs 0", "--epochs: must be in (0, 1e6]"},
      {"--seed -1", "--seed: expected an integer in [0, 2^64 - 1], got '-1'"},
      {"--seed 18446744073709551616", "--seed: expected an integer in [0, 2^64 - 1]"},
      {"--clip-grad -1", "--clip-grad: must be in [0, inf), got -1"},
      {"--momentum 5", "--momentum: must be in [0, 1), got 5"},
      {"--weight-decay nan", "--weight-decay: expected a finite number, got 'nan'"},
      {"--weight-decay=-1e-4", "--weight-decay: must be in [0, inf)"},
      {"--lr inf", "--lr: expected a finite number, got 'inf'"},
      {"--lr 0", "--lr: must be in (0, inf), got 0"},
      {"--lr 1e-400", "--lr: 1e-400 is too small for a double"},
      {"--batch 0", "--batch: must be in [1, 1048576], got 0"},
      {"--batch 1e3", "--batch: expected an integer, got '1e3'"},
      {"--batch 99999999999999999999", "--batch: 99999999999999999999 is beyond the range of a 64-bit integer"},
      {"--steps -5", "--steps: must be in [1, 1000000000000]"},
      {"--steps 1000000000001", "--steps: must be in [1, 1000000000000]"},
      {"--warmup -1", "--warmup: must be in [0, 1000000000000]"},
      {"--val-size 0", "--val-size: must be in [1, 1000000000]"},
      {"--synth-epoch 0", "--synth-epoch: must be in [1, 1000000000]"},
      {"--synth-chars 3", "--synth-chars: expected MIN:MAX, got '3'"},
      {"--synth-chars 0:5", "--synth-chars: must be in [1, 1000], got 0"},
      {"--synth-chars 3:x", "--synth-chars: expected an integer, got 'x'"},
      {"--synth-height 2:40", "--synth-height: must be in [4, 512], got 2"},
      {"--synth-height 22:nan", "--synth-height: expected a finite number, got 'nan'"},
      {"--threads -1", "--threads: must be in [0, 4096]"},
      {"--threads 4294967297", "--threads: must be in [0, 4096]"},
      {"--workers 0", "--workers: must be in [1, 256]"},
      {"--save-every 0", "--save-every: must be in [1, 1000000000000]"},
      {"--eval-every 0", "--eval-every: must be in [1, 1000000000000]"},
      {"--log-every 0", "--log-every: must be in [1, 1000000000000]"},
      {"--keep 0", "--keep: must be in [1, 1000000]"},
      {"--worst 1001", "--worst: must be in [0, 1000]"},
      {"--stop-at -1", "--stop-at: must be in [0, 1000000000000]"},
      {"--max-minutes -1", "--max-minutes: must be in [0, inf)"},
      {"--max-minutes nan", "--max-minutes: expected a finite number"},
      {"--bucket-window -1", "--bucket-window: must be in [0, 1000000]"},
      {"--max-bad-steps 0", "--max-bad-steps: must be in [1, 1000000000000]"},
      {"--comm-timeout 0", "--comm-timeout: must be in (0, inf)"},
      {"--comm-timeout inf", "--comm-timeout: expected a finite number"},
      {"--fault 1:x:hang", "--fault: expected an integer, got 'x'"},
      {"--device gpu", "--device: invalid device 'gpu'"},
      {"--devices cpu,cuda:x", "--devices: invalid device 'cuda:x'"},
      {"--batch", "--batch: expects a value (N)"},
      {"--out --resume", "--out: expects a value (DIR), got the flag '--resume'"},
      {"--resume=1", "--resume: takes no value"},
      {"--frobnicate 3", "unknown option '--frobnicate' (see ocrt-train --help)"},
      {"stray", "unexpected argument 'stray'"},
  };
  check_refusals("ocrt-train", bin, 1, cases);
  CHECK_FALSE(fs::exists(out));  // refused before anything was written
}

TEST_CASE("ocrt-train --help lists its flags, and docs/cli.md describes each", "[trainer][cli]") {
  CHECK(help_flags("ocrt-train").size() >= 50);
  CHECK(undocumented_flags("ocrt-train").empty());
}

namespace {

// A label file of a few striped lines (no fonts needed), each with a short text.
fs::path write_stripes(const fs::path& dir) {
  std::ofstream labels(dir / "labels.txt");
  for (int i = 0; i < 4; ++i) {
    GrayImage img;
    img.width = 64 + 8 * i;
    img.height = 32;
    for (int64_t y = 0; y < img.height; ++y)
      for (int64_t x = 0; x < img.width; ++x) img.pixels.push_back((uint8_t)((x / (i + 2)) % 2 ? 30 : 230));
    const std::string name = "line" + std::to_string(i) + ".png";
    save_gray_png((dir / name).string(), img);
    labels << name << "\t" << std::string((size_t)i + 1, (char)('a' + i)) << "\n";
  }
  return dir / "labels.txt";
}

}  // namespace

TEST_CASE("ocrt-train --resume refuses changed settings, lists them, and --allow-changes prints them",
          "[trainer][cli]") {
  TempDir dir("train-resume-changes");
  const fs::path labels = write_stripes(dir.path);
  const std::string base = program("ocrt-train") + " --train " + labels.string() + " --out " +
                           (dir.path / "run").string() + " --arch crnn-s --threads 1 --workers 1 --no-augment ";
  std::string said;
  REQUIRE(run_command(base + "--batch 2 --steps 4 --stop-at 2", &said) == 0);
  INFO(said);

  // Changed: the batch and the learning rate. Refused, both listed, nothing trained.
  CHECK(run_command(base + "--batch 3 --steps 4 --lr 2e-3 --resume", &said) == 1);
  CHECK_THAT(said, Catch::Contains("--resume:") && Catch::Contains("was saved with other settings") &&
                       Catch::Contains("--batch: 2 -> 3") && Catch::Contains("--lr: 0.001 -> 0.002") &&
                       Catch::Contains("--allow-changes"));
  // Free: when to stop, evaluate, save and log.
  CHECK(run_command(base + "--batch 2 --steps 4 --stop-at 3 --eval-every 9 --save-every 9 --log-every 1 "
                           "--max-minutes 60 --keep 5 --resume",
                    &said) == 0);
  CHECK_THAT(said, Catch::Contains("resuming from") && !Catch::Contains("settings changed"));
  // With --allow-changes: accepted, every change printed.
  CHECK(run_command(base + "--batch 3 --steps 4 --lr 2e-3 --resume --allow-changes", &said) == 0);
  CHECK_THAT(said, Catch::Contains("settings changed") && Catch::Contains("--batch: 2 -> 3") &&
                       Catch::Contains("--lr: 0.001 -> 0.002"));
  CHECK_THAT(said, Catch::Contains("\"steps\":4"));
  // metrics.jsonl's start event of that part records them.
  std::ifstream metrics(dir.path / "run" / "metrics.jsonl");
  std::string line, starts;
  while (std::getline(metrics, line))
    if (line.find("\"event\":\"start\"") != std::string::npos) starts += line + "\n";
  CHECK_THAT(starts, Catch::Contains(R"("changed_settings":["--batch: 2 -> 3","--lr: 0.001 -> 0.002"])"));
}

TEST_CASE("ocrt-train --out that cannot be a folder is refused by name", "[trainer][cli]") {
  const std::string bin = program("ocrt-train") + " --arch crnn-s --steps 1 --train " + OCRT_SOURCE_DIR +
                          "/samples/lines --threads 1 --out ";
  std::string out;
  CHECK(run_command(bin + "/dev/null", &out) == 1);
  CHECK_THAT(out, Catch::Contains("--out: /dev/null exists and is not a folder"));
  CHECK(run_command(bin + "/dev/null/run", &out) == 1);
  CHECK_THAT(out, Catch::Contains("--out: cannot make the folder /dev/null/run"));
  CHECK(out.find("filesystem error") == std::string::npos);
}
