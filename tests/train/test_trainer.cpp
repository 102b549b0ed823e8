// The trainer end to end on the CPU: the overfit test (a few lines learnt exactly, saved, and
// read back through the model-file path), exact resume (a run stopped at a checkpoint and
// resumed ends bit-identical to an uninterrupted one), and flag validation.
#include <catch2/catch.hpp>

#include <cmath>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "models/crnn.h"
#include "models/ctc_decode.h"
#include "models/model_file.h"
#include "runtime/cuda/cuda_glue.h"
#include "runtime/image.h"
#include "runtime/threading.h"
#include "train/checkpoint.h"
#include "train/synth.h"
#include "train/trainer.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::train;
namespace fs = std::filesystem;
using ocrt::testing::TempDir;

namespace {

// Renders `texts` with the first Debian font into dir as name.png + name.gt.txt pairs; false
// when no font is installed.
bool write_lines(const fs::path& dir, const std::vector<std::string>& texts) {
  auto dirs = default_font_dirs();
  if (dirs.empty()) return false;
  auto fonts = load_fonts(dirs);
  std::shared_ptr<Font> font;
  for (auto& f : fonts)
    if (f->path().find("DejaVuSans.ttf") != std::string::npos) font = f;
  if (!font) font = fonts.front();
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string name = "line" + std::to_string(i);
    save_gray_png((dir / (name + ".png")).string(), font->render(texts[i], 28));
    std::ofstream(dir / (name + ".gt.txt")) << texts[i] << "\n";
  }
  return true;
}

// Two checkpoints hold bit-identical weights, buffers and optimizer state.
void require_bit_identical(const Checkpoint& ca, const Checkpoint& cb) {
  REQUIRE(ca.model.size() == cb.model.size());
  for (auto& [name, t] : ca.model) {
    INFO(name);
    REQUIRE(cb.model.count(name));
    CHECK(t.to_vector<float>() == cb.model.at(name).to_vector<float>());
  }
  REQUIRE(ca.optim.size() == cb.optim.size());
  for (auto& [name, t] : ca.optim) {
    INFO(name);
    CHECK(t.to_vector<double>() == cb.optim.at(name).to_vector<double>());
  }
}

TrainConfig small_config(const fs::path& data, const fs::path& out) {
  TrainConfig c;
  c.arch = "crnn-s";
  c.train = {data.string()};
  c.val = {data.string()};
  c.out = out.string();
  c.batch = 4;
  c.workers = 1;
  c.bucket_window = 0;
  c.augment = false;
  c.lr = 3e-3;
  c.warmup = 20;
  c.schedule = ScheduleKind::cosine;
  c.log_every = 1000;
  c.seed = 7;
  return c;
}

}  // namespace

TEST_CASE("overfit: a handful of lines are learnt exactly and read back from the saved model", "[trainer]") {
  TempDir data("overfit-data"), out("overfit-out");
  const std::vector<std::string> texts = {"hello", "ocrt 42", "CTC", "line four"};
  if (!write_lines(data.path, texts)) {
    WARN("no Debian font installed: skipped");
    return;
  }
  TrainConfig c = small_config(data.path, out.path);
  // 250 steps with the cosine schedule: CER 0 from about step 200 on (seen: 0.92, 0.42, 0.04, 0,
  // 0 at steps 50..250); the decaying LR lets BatchNorm's running statistics catch up with
  // the weights, so eval mode reads what training learnt.
  c.steps = 250;
  c.eval_every = 50;
  c.save_every = 125;
  TrainResult r = run_training(c);
  REQUIRE(r.steps == 250);
  REQUIRE(r.best_cer == 0.0);
  REQUIRE(fs::exists(r.best_model));
  // The run's report and its worst lines: at the last evaluation every line was read right, so
  // the list is empty and no image of an earlier evaluation is left.
  CHECK(fs::exists(out.path / "report.html"));
  std::ifstream worst_in(out.path / "worst" / "index.json");
  const Json worst = parse_json(std::string(std::istreambuf_iterator<char>(worst_in), {}));
  CHECK(worst.at("step").as_int() == 250);
  CHECK(worst.at("lines").size() == 0);
  CHECK(std::distance(fs::directory_iterator(out.path / "worst"), fs::directory_iterator{}) == 1);
  std::ifstream metrics_in(out.path / "metrics.jsonl");
  std::string first_event;
  std::getline(metrics_in, first_event);
  CHECK(parse_json(first_event).at("event").as_string() == "start");

  // Read back through the model file, as inference does, and decode every line.
  nn::ModelFile f = nn::load_model_file(r.best_model);
  REQUIRE(f.info);
  REQUIRE(f.info->arch == "crnn-s");
  Generator gen(0);
  nn::CRNN model(nn::CRNNConfig::from_json(f.info->config), gen);
  model.load_state_dict(f.weights);
  model.train(false);
  nn::Charset cs = nn::Charset::from_chars(f.info->charset);
  std::vector<GrayImage> lines;
  for (size_t i = 0; i < texts.size(); ++i)
    lines.push_back(resize_to_height(load_gray_image((data.path / ("line" + std::to_string(i) + ".png")).string()), 32));
  std::vector<int64_t> widths;
  Tensor x = pack_batch(lines, BatchSpec{}, &widths);
  NoGradGuard ng;
  Tensor logits = model.forward(x, widths);
  std::vector<int64_t> frames;
  for (int64_t w : widths) frames.push_back(nn::CRNN::frames(w));
  auto decoded = nn::ctc_greedy_decode(logits, frames);
  for (size_t i = 0; i < texts.size(); ++i) CHECK(cs.decode(decoded[i].labels) == texts[i]);
}

TEST_CASE("resume: stopping at a checkpoint and resuming is bit-identical to one run", "[trainer]") {
  TempDir data("resume-data"), a("resume-a"), b("resume-b");
  if (!write_lines(data.path, {"abc", "resume 1", "x y z", "bits", "exact", "same"})) {
    WARN("no Debian font installed: skipped");
    return;
  }
  set_num_threads(2);
  TrainConfig c = small_config(data.path, a.path);
  c.val.clear();
  c.steps = 12;
  c.save_every = 4;
  c.augment = true;  // augmentation must resume exactly too
  run_training(c);

  // The second run stops at step 8 (as a kill after the checkpoint at 8 would), then resumes.
  TrainConfig c1 = c;
  c1.out = b.path.string();
  c1.stop_at = 8;
  run_training(c1);
  TrainConfig c2 = c;
  c2.out = b.path.string();
  c2.resume = true;
  run_training(c2);

  Checkpoint ca = load_checkpoint(checkpoint_path(a.path.string(), 12));
  Checkpoint cb = load_checkpoint(checkpoint_path(b.path.string(), 12));
  require_bit_identical(ca, cb);
}

TEST_CASE("resume: no checkpoint in --out is an error, and --resume-if-present starts afresh", "[trainer]") {
  TempDir data("resume-none-data"), out("resume-none-out");
  if (!write_lines(data.path, {"abc", "none yet"})) {
    WARN("no Debian font installed: skipped");
    return;
  }
  set_num_threads(2);
  TrainConfig c = small_config(data.path, out.path);
  c.val.clear();
  c.steps = 2;
  c.save_every = 2;
  c.resume = true;
  REQUIRE_THROWS_WITH(run_training(c), Catch::Contains("no checkpoint") && Catch::Contains(out.path.string()));
  c.resume = false;
  c.resume_if_present = true;
  const TrainResult r = run_training(c);
  CHECK(r.steps == 2);
  CHECK(!list_checkpoints(out.path.string()).empty());
}

TEST_CASE("ocrt-train settings are validated with the flag's name", "[trainer]") {
  TrainConfig c;
  c.train = {"synth"};
  c.batch = 0;
  REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("--batch"));
  c.batch = 8;
  // Numbers out of their meaningful range are refused with the flag's name, before any data.
  auto refused = [&](auto change, const char* flag) {
    TrainConfig bad = c;
    change(bad);
    CHECK_THROWS_WITH(bad.validate(), Catch::Contains(flag));
  };
  refused([](TrainConfig& t) { t.epochs = 1e300; }, "--epochs");
  refused([](TrainConfig& t) { t.clip_grad = -1; }, "--clip-grad");
  refused([](TrainConfig& t) { t.momentum = 5; }, "--momentum");
  refused([](TrainConfig& t) { t.momentum = 1; }, "--momentum");
  refused([](TrainConfig& t) { t.weight_decay = std::nan(""); }, "--weight-decay");
  refused([](TrainConfig& t) { t.weight_decay = -1e-4; }, "--weight-decay");
  refused([](TrainConfig& t) { t.precision = Precision::tf32; }, "--precision tf32 is a GPU tensor-core format");
  c.lr = -1;
  REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("--lr"));
  c.lr = 1e-3;
  c.arch = "resnet";
  REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("--arch"));
  c.arch = "crnn";
  c.train.clear();
  REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("--train"));
  c.train = {"synth"};
  c.device = Device::cuda(7);
  if (!cuda_built() || cuda_device_count() < 8) REQUIRE_THROWS_WITH(c.validate(), Catch::Contains("cuda:7"));
}

TEST_CASE("resume_changes lists the settings a resumed run must keep", "[trainer]") {
  TrainConfig c;
  c.train = {"data/train.txt"};
  const Json saved = c.to_json();
  CHECK(resume_changes(saved, c).empty());
  TrainConfig d = c;
  d.batch = 64;
  d.lr = 0.002;
  d.augment = false;
  d.seed = 7;
  d.train = {"data/train.txt", "more"};
  CHECK(resume_changes(saved, d) == std::vector<std::string>{"--train: data/train.txt -> data/train.txt,more",
                                                             "--augment/--no-augment: on -> off",
                                                             "--batch: 32 -> 64", "--lr: 0.001 -> 0.002",
                                                             "--seed: 1 -> 7"});
  // Where the run goes, how often it reports and saves, and when it stops: free.
  d = c;
  d.out = "elsewhere", d.eval_every = 5, d.save_every = 1, d.log_every = 1, d.keep = 1, d.worst_lines = 0;
  d.stop_at = 3, d.max_minutes = 2, d.max_bad_steps = 3, d.val = {"val.txt"}, d.val_size = 9, d.threads = 3;
  d.workers = 5, d.device = Device::cuda(0), d.devices = {Device::cpu(), Device::cpu()}, d.comm_timeout = 9;
  d.conv = ConvMode::exact, d.precision = Precision::bf16, d.overlap = Overlap::on;
  d.on_bad_sample = OnBadSample::fail, d.init = "x.safetensors";
  CHECK(resume_changes(saved, d).empty());
  // Settings that do not matter to this run: momentum without SGD, the synthetic lines' settings
  // without synthetic training lines, --steps with a constant learning rate.
  d = c;
  d.momentum = 0.5, d.fonts = {"f.ttf"}, d.synth.min_chars = 5, d.scan = "jpeg";
  CHECK(resume_changes(saved, d).empty());
  d.optimizer = OptimizerKind::sgd;
  CHECK(resume_changes(saved, d) ==
        std::vector<std::string>{"--optimizer: adamw -> sgd", "--momentum: 0.9 -> 0.5"});
  TrainConfig constant = c;
  constant.schedule = ScheduleKind::constant;
  TrainConfig longer = constant;
  longer.steps = 5000;
  CHECK(resume_changes(constant.to_json(), longer).empty());
  longer.schedule = ScheduleKind::cosine;
  CHECK(resume_changes(constant.to_json(), longer) ==
        std::vector<std::string>{"--steps: 1000 -> 5000", "--schedule: constant -> cosine"});
  TrainConfig synth = c;
  synth.train = {"synth"};
  TrainConfig other_fonts = synth;
  other_fonts.fonts = {"f.ttf"};
  other_fonts.synth.min_chars = 5;
  CHECK(resume_changes(synth.to_json(), other_fonts) ==
        std::vector<std::string>{"--fonts: '' -> f.ttf", "--synth-chars: 3:28 -> 5:28"});
  // A checkpoint from before a setting was recorded: that setting is not compared.
  Json old = Json::object();
  old.set("batch", 32);
  d = c;
  d.lr = 5;
  CHECK(resume_changes(old, d).empty());
  d.batch = 8;
  CHECK(resume_changes(old, d) == std::vector<std::string>{"--batch: 32 -> 8"});
}

TEST_CASE("ocrt-train's named choices are parsed once, and the binary names the flag", "[trainer]") {
  CHECK(parse_optimizer_kind("sgd") == OptimizerKind::sgd);
  CHECK(parse_optimizer_kind("adamw") == OptimizerKind::adamw);
  CHECK_THROWS_WITH(parse_optimizer_kind("lbfgs"), Catch::Contains("'lbfgs'") && Catch::Contains("sgd, adam or adamw"));
  CHECK(parse_overlap("auto") == Overlap::automatic);
  CHECK_THROWS_WITH(parse_overlap("sometimes"), Catch::Contains("auto, on or off"));
  CHECK(parse_on_bad_sample("fail") == OnBadSample::fail);
  CHECK_THROWS(parse_on_bad_sample("ignore"));
  for (auto k : {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw})
    CHECK(parse_optimizer_kind(optimizer_kind_name(k)) == k);
  for (auto o : {Overlap::automatic, Overlap::on, Overlap::off}) CHECK(parse_overlap(overlap_name(o)) == o);
  // The binary: each of these is refused before any data is read, naming its flag.
  const std::string bin = std::string(OCRT_BINARY_DIR) + "/ocrt-train --train synth --steps 1 --out /tmp/ocrt-never ";
  for (const std::string bad : {"--optimizer lbfgs", "--overlap sometimes", "--conv winograd", "--schedule linear",
                                "--on-bad-sample ignore", "--precision fp8", "--fault 1:2:explode"}) {
    INFO(bad);
    const std::string flag = bad.substr(0, bad.find(' '));
    std::string out;
    CHECK(ocrt::testing::run_command(bin + bad, &out) != 0);
    CHECK(out.find(flag + ":") != std::string::npos);
  }
}

TEST_CASE("SIGINT saves a checkpoint and stops, --resume finishes the run", "[trainer]") {
  TempDir data("signal-data"), out("signal-out");
  if (!write_lines(data.path, {"stop", "here"})) {
    WARN("no Debian font installed: skipped");
    return;
  }
  TrainConfig c = small_config(data.path, out.path);
  c.val.clear();
  c.steps = 100000;  // far more than the test waits for
  c.log_every = 1;
  c.save_every = 100000;
  // The signal goes once a "train" event (a finished step) is in metrics.jsonl. The handler is
  // in place by then (it is installed before the loop starts), so the default action (exit) can
  // never run. The "start" line that comes first names the --train folder under the key "train":
  // only the event counts, or the signal can land before step 1 (it did on a fast CI machine).
  std::thread sender([&] {
    const fs::path metrics = out.path / "metrics.jsonl";
    bool stepped = false;
    for (int i = 0; i < 6000 && !stepped; ++i) {
      std::ifstream in(metrics);
      for (std::string line; !stepped && std::getline(in, line);)
        stepped = line.find("\"event\":\"train\"") != std::string::npos;
      if (!stepped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::raise(SIGINT);
  });
  TrainResult r = run_training(c);
  sender.join();
  REQUIRE(r.interrupted);
  REQUIRE(r.steps >= 1);
  REQUIRE(r.steps < 100000);
  auto ckpts = list_checkpoints(out.path.string());
  REQUIRE(ckpts.size() == 1);
  REQUIRE(ckpts.back() == checkpoint_path(out.path.string(), r.steps));
  // Resume and stop a few steps later (with the same --steps: a resume that changes the run's
  // length, and with it the learning rate schedule, is refused without --allow-changes).
  TrainConfig c2 = c;
  c2.resume = true;
  c2.stop_at = r.steps + 3;
  TrainResult r2 = run_training(c2);
  REQUIRE_FALSE(r2.interrupted);
  REQUIRE(r2.steps == r.steps + 3);
}

TEST_CASE("non-finite steps are skipped and too many in a row stop the run with a clear message", "[trainer]") {
  TempDir data("nan-data"), out("nan-out");
  if (!write_lines(data.path, {"blow", "up"})) {
    WARN("no Debian font installed: skipped");
    return;
  }
  TrainConfig c = small_config(data.path, out.path);
  c.val.clear();
  c.optimizer = OptimizerKind::sgd;
  c.momentum = 0;
  c.lr = 1e12;  // the first update overflows the weights; every later loss is NaN
  c.clip_grad = 0;
  c.schedule = ScheduleKind::constant;
  c.steps = 50;
  c.max_bad_steps = 4;
  REQUIRE_THROWS_WITH(run_training(c), Catch::Contains("4 steps in a row") && Catch::Contains("non-finite"));
}

TEST_CASE("resume: svtr-lite (dropout active) resumes bit-identical to one run", "[trainer][svtr]") {
  TempDir data("svtr-resume-data"), a("svtr-resume-a"), b("svtr-resume-b");
  if (!write_lines(data.path, {"abc", "svtr", "x y", "bits"})) {
    WARN("no Debian font installed: skipped");
    return;
  }
  set_num_threads(2);
  TrainConfig c = small_config(data.path, a.path);
  c.arch = "svtr-lite";  // the preset: dropout 0.1 after the combining projection
  c.val.clear();
  c.steps = 4;
  c.save_every = 2;
  c.augment = true;
  run_training(c);

  TrainConfig c1 = c;
  c1.out = b.path.string();
  c1.stop_at = 2;
  run_training(c1);
  TrainConfig c2 = c;
  c2.out = b.path.string();
  c2.resume = true;
  run_training(c2);

  Checkpoint ca = load_checkpoint(checkpoint_path(a.path.string(), 4));
  Checkpoint cb = load_checkpoint(checkpoint_path(b.path.string(), 4));
  REQUIRE(ca.info.arch == "svtr-lite");
  require_bit_identical(ca, cb);
}

TEST_CASE("the data pipeline checks CTC feasibility with the trained architecture's frame rule", "[trainer][svtr]") {
  TempDir data("svtr-frames-data"), out("svtr-frames-out");
  // "aaaa" needs 7 frames (4 characters + 3 repeats). Rendered small it is about 24-28 pixels
  // wide: CRNN's W/4 + 1 may fit it where svtr-lite's W/4 does not; the rule must be the model's.
  if (!write_lines(data.path, {"aaaa"})) {
    WARN("no Debian font installed: skipped");
    return;
  }
  std::vector<Sample> samples = read_source(data.path.string());
  REQUIRE(samples.size() == 1);
  const int64_t width = validate_samples(samples, nn::Charset::ascii()).good.at(0).width;
  auto report = validate_samples(samples, nn::Charset::ascii(), 32,
                                 [](int64_t w) { return nn::frames_for_width("svtr-lite", w); });
  CHECK(report.good.size() == (width / 4 >= 7 ? 1u : 0u));
  auto never = validate_samples(samples, nn::Charset::ascii(), 32, [](int64_t) { return int64_t{1}; });
  CHECK(never.good.empty());
  CHECK(never.counts[Problem::too_long_for_image] == 1);
}
