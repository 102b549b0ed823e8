// The pieces of a training run (train/train_loop.h), each on its own: where a run starts, the
// replicas' agreement, one step, the stop decision, and what is evaluated and saved when.
#include <catch2/catch.hpp>

#include <chrono>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include <unistd.h>

#include "models/charset.h"
#include "runtime/comm.h"
#include "ops/random.h"
#include "runtime/rng.h"
#include "temp_dir.h"
#include "train/train_loop.h"

using namespace ocrt;
using namespace ocrt::train;
namespace fs = std::filesystem;
using ocrt::testing::TempDir;

namespace {

TrainConfig tiny_config(const fs::path& out) {
  TrainConfig c;
  c.arch = "crnn-s";
  c.out = out.string();
  c.seed = 11;
  c.batch = 2;
  return c;
}

std::vector<std::vector<float>> weights_of(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (auto& [name, t] : m.named_parameters()) out.push_back(t.contiguous().to_vector<float>());
  return out;
}

// Two lines of random pixels with short labels (enough frames for CTC at width 64).
// Five lines of stripes, each its own width and period, labelled "a", "bb", ..., "eeeee": a
// fresh model reads them wrong.
class StripesDataset : public Dataset {
 public:
  int64_t size() const override { return 5; }
  LineSample get(int64_t i, uint64_t) const override {
    LineSample s;
    s.image.width = 41 + 10 * i;
    s.image.height = 32;
    for (int64_t y = 0; y < 32; ++y)
      for (int64_t x = 0; x < s.image.width; ++x) s.image.pixels.push_back((uint8_t)((x / (i + 2)) % 2 ? 20 : 235));
    s.text = std::string((size_t)i + 1, (char)('a' + i));
    s.classes = nn::Charset::ascii().encode_or_throw(s.text);
    s.id = "line" + std::to_string(i);
    return s;
  }
};

Batch random_batch(uint64_t seed) {
  Generator g(seed);
  Batch b;
  b.images = uniform({2, 1, 32, 64}, -1, 1, g);
  b.widths = {64, 64};
  b.targets = {{5, 6, 7}, {8, 9}};
  b.texts = {"abc", "de"};
  b.ids = {"0", "1"};
  return b;
}

}  // namespace

TEST_CASE("resolve_start: the seed, a missing checkpoint, a checkpoint, and mismatches", "[trainer]") {
  TempDir dir("resolve-start");
  const nn::Charset charset = nn::Charset::ascii();
  TrainConfig cfg = tiny_config(dir.path);

  // From the seed: step 0, and the same seed gives the same weights.
  StartPoint a = resolve_start(cfg, charset, false), b = resolve_start(cfg, charset, false);
  CHECK(a.state.step == 0);
  CHECK(a.from.empty());
  CHECK_FALSE(a.optim.has_value());
  CHECK(a.info.arch == "crnn-s");
  CHECK(weights_of(*a.model) == weights_of(*b.model));
  TrainConfig other_seed = cfg;
  other_seed.seed = 12;
  CHECK(weights_of(*resolve_start(other_seed, charset, false).model) != weights_of(*a.model));

  // --resume with nothing to resume is an error naming the folder; --resume-if-present starts afresh.
  TrainConfig resume = cfg;
  resume.resume = true;
  REQUIRE_THROWS_WITH(resolve_start(resume, charset, false), Catch::Contains("no checkpoint") &&
                                                                 Catch::Contains(dir.path.string()));
  TrainConfig if_present = cfg;
  if_present.resume_if_present = true;
  CHECK(resolve_start(if_present, charset, false).state.step == 0);

  // A checkpoint at step 5: its weights, state and optimizer state come back.
  {
    Adam optim(a.model->parameters(), AdamOptions{});
    TrainState st = a.state;
    st.step = 5;
    st.best_cer = 0.25;
    RunFiles files(cfg, a.info, true);
    files.checkpoint(*a.model, optim, st, "schedule");
  }
  StartPoint r = resolve_start(resume, charset, false);
  CHECK(r.state.step == 5);
  CHECK(r.state.best_cer == 0.25);
  CHECK(r.optim.has_value());
  CHECK(r.from.find("ckpt-") != std::string::npos);
  CHECK(weights_of(*r.model) == weights_of(*a.model));

  // ...but not with another seed, arch or charset.
  TrainConfig wrong_seed = resume;
  wrong_seed.seed = 99;
  CHECK_THROWS_WITH(resolve_start(wrong_seed, charset, false), Catch::Contains("--seed"));
  TrainConfig wrong_arch = resume;
  wrong_arch.arch = "crnn";
  CHECK_THROWS_WITH(resolve_start(wrong_arch, charset, false), Catch::Contains("--arch is crnn"));
  CHECK_THROWS_WITH(resolve_start(resume, nn::Charset::from_chars({"a", "b"}), false),
                    Catch::Contains("another charset"));

  // Settings the trajectory does not depend on may change (docs/cli.md, "Resuming").
  TrainConfig free = resume;
  free.eval_every = 7, free.save_every = 3, free.log_every = 1, free.keep = 9, free.worst_lines = 0;
  free.stop_at = 9, free.max_minutes = 5, free.max_bad_steps = 2, free.workers = 3, free.threads = 1;
  free.val = {"synth"}, free.val_size = 4, free.conv = ConvMode::exact, free.overlap = Overlap::off;
  free.init = "ignored-on-resume.safetensors";
  CHECK(resolve_start(free, charset, false).state.step == 5);

  // Others are refused, each change listed, unless --allow-changes; then the run goes on.
  TrainConfig changed = resume;
  changed.batch = 4;
  changed.lr = 2e-3;
  changed.optimizer = OptimizerKind::sgd;
  changed.augment = false;
  CHECK_THROWS_WITH(resolve_start(changed, charset, false),
                    Catch::Contains("--batch: 2 -> 4") && Catch::Contains("--lr: 0.001 -> 0.002") &&
                        Catch::Contains("--optimizer: adamw -> sgd") &&
                        Catch::Contains("--augment/--no-augment: on -> off") && Catch::Contains("--allow-changes"));
  changed.allow_changes = true;
  const StartPoint allowed = resolve_start(changed, charset, false);
  CHECK(allowed.state.step == 5);
  CHECK(allowed.state.settings.at("batch").as_int() == 4);  // later checkpoints carry the new settings
  CHECK(allowed.changes.size() == 4);                         // and the start event lists the changes

  // --init with a model file of another arch.
  const fs::path model_file = dir.path / "svtr.safetensors";
  {
    Generator g(1);
    auto svtr = nn::make_recognizer("svtr-lite", charset.num_classes(), g);
    nn::ModelInfo info;
    info.arch = "svtr-lite";
    info.config = svtr->config_json();
    info.charset = charset.chars();
    info.input = nn::default_input_spec();
    nn::save_model_file(model_file.string(), *svtr, info);
  }
  TrainConfig init = cfg;
  init.init = model_file.string();
  CHECK_THROWS_WITH(resolve_start(init, charset, false), Catch::Contains("--init") && Catch::Contains("svtr-lite"));
}

TEST_CASE("sync_replicas: rank 0's weights everywhere, and replicas at different steps are an error", "[trainer][distributed]") {
  const nn::Charset charset = nn::Charset::ascii();
  TempDir dir("sync-replicas");
  auto run = [&](int64_t step1, std::vector<std::vector<std::vector<float>>>& weights, std::vector<std::string>& errors) {
    auto comms = make_thread_communicators(2, 30);
    weights.assign(2, {});
    errors.assign(2, "");
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r)
      threads.emplace_back([&, r] {
        TrainConfig cfg = tiny_config(dir.path);
        cfg.seed = 100 + (uint64_t)r;  // different starting weights on each replica
        StartPoint s = resolve_start(cfg, charset, false);
        try {
          sync_replicas(*comms[r], *s.model, r == 0 ? 3 : step1, Device::cpu(), cfg.out);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
        weights[r] = weights_of(*s.model);
      });
    for (auto& t : threads) t.join();
  };
  std::vector<std::vector<std::vector<float>>> w;
  std::vector<std::string> errors;
  run(3, w, errors);
  CHECK(errors[0].empty());
  CHECK(errors[1].empty());
  CHECK(w[0] == w[1]);

  run(4, w, errors);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].find("different steps") != std::string::npos);
  }
}

namespace {
// A tiny model in training mode, Adam over its weights, and one replica's StepParts: what the
// train_step cases start from.
struct OneReplica {
  TempDir dir;
  TrainConfig cfg;
  StartPoint s;
  Adam optim;
  GradSync sync;
  std::unique_ptr<Communicator> comm = make_single_communicator();
  StepParts parts;
  explicit OneReplica(const std::string& name)
      : dir(name),
        cfg(tiny_config(dir.path)),
        s(resolve_start(cfg, nn::Charset::ascii(), false)),
        optim(s.model->parameters(), AdamOptions{}),
        sync(optim.params()),
        parts{optim, sync, *comm, Device::cpu(), 2, 5.0, false} {
    s.model->train(true);
  }
};
}  // namespace

TEST_CASE("train_step: the copy to the device, forward, backward and the gradient sum are timed apart", "[trainer]") {
  OneReplica one("train-step-phases");
  StartPoint& s = one.s;
  StepParts& parts = one.parts;
  const Batch b = random_batch(4);
  Tensor images;
  // A copy that takes 30 ms and a forward that takes 20 ms more than its loss: each lands in its
  // own phase, and the phases add up to the step's wall time.
  const double t0 = now_seconds();
  const StepResult r = train_step(
      parts,
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        images = b.images.to(Device::cpu());
      },
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return batch_loss(*s.model, b, Device::cpu(), images);
      },
      2, 1e-3);
  const double wall = now_seconds() - t0;
  REQUIRE(r.ok);
  CHECK(r.copy_s >= 0.029);
  CHECK(r.copy_s < 0.029 + 0.5 * wall);
  CHECK(r.forward_s >= 0.019);
  CHECK(r.backward_s > 0);
  CHECK(r.sync_s >= 0);
  const double sum = r.copy_s + r.forward_s + r.backward_s + r.sync_s + r.clip_s + r.optimizer_s;
  CHECK(sum <= wall);
  CHECK(sum >= 0.9 * wall);
  // The recogniser's own step times its copy too (a CPU copy is quick, but it is measured).
  const StepResult own = train_step(parts, *s.model, b, 1e-3);
  CHECK(own.ok);
  CHECK(own.copy_s >= 0);
  CHECK(own.copy_s < own.forward_s + own.backward_s);
  // Throughput reports the seven phases in ms a step, from the third step on.
  Throughput t;
  for (int64_t k = 1; k <= 4; ++k) t.add(k, 2, 0.004, r);
  TrainResult out;
  t.report(out);
  CHECK(out.data_ms == Approx(4.0));
  CHECK(out.copy_ms == Approx(1000 * r.copy_s));
  CHECK(out.sync_ms == Approx(1000 * r.sync_s));
  CHECK(out.optimizer_ms == Approx(1000 * r.optimizer_s));
}

TEST_CASE("train_step: a finite step updates the weights and clears the gradients, a NaN step changes nothing",
          "[trainer]") {
  OneReplica one("train-step");
  StartPoint& s = one.s;
  StepParts& parts = one.parts;
  Adam& optim = one.optim;

  const auto before = weights_of(*s.model);
  StepResult r = train_step(parts, *s.model, random_batch(1), 1e-3);
  CHECK(r.ok);
  CHECK(std::isfinite(r.loss));
  CHECK(r.loss > 0);
  CHECK(weights_of(*s.model) != before);
  for (const Tensor& p : optim.params()) CHECK_FALSE(p.grad().defined());

  // The loss against batch_loss on the same weights: train_step's loss is the forward's.
  double expect = 0;
  {
    NoGradGuard no_grad;
    expect = batch_loss(*s.model, random_batch(2), Device::cpu()).item();
  }
  CHECK(train_step(parts, *s.model, random_batch(2), 1e-3).loss == Approx(expect).epsilon(1e-6));

  // A column of NaN pixels makes the loss or the gradient non-finite: the step is skipped, no
  // weight moves, no gradient is left.
  Batch bad = random_batch(3);
  bad.images.narrow(3, 0, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  const auto held = weights_of(*s.model);
  StepResult rb = train_step(parts, *s.model, bad, 1e-3);
  CHECK_FALSE(rb.ok);
  CHECK(weights_of(*s.model) == held);
  for (const Tensor& p : optim.params()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("LossTrack: the last good loss, a running average, skipped steps, and too many bad ones in a row",
          "[trainer]") {
  TrainState state;
  state.step = 10;  // a resumed run: the average starts at its first step's loss
  LossTrack loss(10, 3, "/runs/x", false);
  auto step = [&](bool ok, double value) {
    StepResult r;
    r.ok = ok, r.loss = value;
    loss.add(r, state);
    state.step++;
  };
  step(true, 2.0);
  CHECK(loss.last() == 2.0);
  CHECK(loss.average() == 2.0);
  step(true, 4.0);
  CHECK(loss.last() == 4.0);
  CHECK(loss.average() == Approx(0.95 * 2.0 + 0.05 * 4.0));
  const double average = loss.average();
  step(false, NAN);  // skipped: neither the last loss nor the average moves
  step(false, INFINITY);
  CHECK(state.skipped_steps == 2);
  CHECK(loss.last() == 4.0);
  CHECK(loss.average() == average);
  step(true, 1.0);  // a good step ends the run of bad ones
  step(false, NAN);
  step(false, NAN);
  CHECK(state.skipped_steps == 4);
  StepResult bad;
  bad.ok = false, bad.loss = NAN;
  CHECK_THROWS_WITH(loss.add(bad, state), Catch::Contains("3 steps in a row") && Catch::Contains("/runs/x"));
}

TEST_CASE("decide_stop: max-minutes and stop-at only before the last step, then a signal", "[trainer]") {
  auto comm = make_single_communicator();
  TrainConfig cfg;
  const Device cpu = Device::cpu();
  CHECK(decide_stop(cfg, 5, 10, 1e9, false, *comm, cpu).why == Stop::no);  // no limits set
  CHECK(decide_stop(cfg, 5, 10, 0, true, *comm, cpu).why == Stop::signal);
  CHECK(decide_stop(cfg, 10, 10, 0, true, *comm, cpu).why == Stop::signal);

  cfg.max_minutes = 1;
  CHECK(decide_stop(cfg, 5, 10, 59, false, *comm, cpu).why == Stop::no);
  StopDecision late = decide_stop(cfg, 5, 10, 61, true, *comm, cpu);
  CHECK(late.why == Stop::out_of_time);  // ahead of the signal
  CHECK(late.out_of_time);
  StopDecision last = decide_stop(cfg, 10, 10, 61, false, *comm, cpu);
  CHECK(last.why == Stop::no);  // the run ends anyway...
  CHECK(last.out_of_time);      // ...but still evaluates now

  cfg.max_minutes = 0;
  cfg.stop_at = 4;
  CHECK(decide_stop(cfg, 3, 10, 0, false, *comm, cpu).why == Stop::no);
  CHECK(decide_stop(cfg, 4, 10, 0, false, *comm, cpu).why == Stop::stop_at);
  CHECK(decide_stop(cfg, 10, 10, 0, false, *comm, cpu).why == Stop::no);
  CHECK(std::string(stop_name(Stop::out_of_time)) == "max_minutes");
}

TEST_CASE("evaluate_and_save: checkpoints on schedule, at the last step and when stopping early", "[trainer]") {
  TempDir dir("evaluate-and-save");
  const nn::Charset charset = nn::Charset::ascii();
  TrainConfig cfg = tiny_config(dir.path);
  cfg.save_every = 4;
  cfg.keep = 100;
  StartPoint s = resolve_start(cfg, charset, false);
  Adam optim(s.model->parameters(), AdamOptions{});
  auto comm = make_single_communicator();
  RunFiles files(cfg, s.info, true);
  RunParts run{cfg, *s.model, optim, *comm, Device::cpu(), files, charset, nullptr, LoaderOptions{}, false};

  TrainState st = s.state;
  auto saved_at = [&](int64_t step, StopDecision stop) {
    st.step = step;
    evaluate_and_save(run, st, 10, stop);
    return fs::exists(checkpoint_path(cfg.out, step));
  };
  CHECK_FALSE(saved_at(3, {}));
  CHECK(saved_at(4, {}));   // on schedule
  CHECK(saved_at(10, {}));  // the last step
  CHECK(saved_at(5, {Stop::signal, false}));
  CHECK(saved_at(6, {Stop::stop_at, false}));
  CHECK_FALSE(saved_at(7, {}));

  // Each save is an event with its reason.
  std::ifstream metrics(dir.path / "metrics.jsonl");
  std::string line, all;
  while (std::getline(metrics, line)) all += line + "\n";
  CHECK(all.find("\"why\":\"signal\"") != std::string::npos);
  CHECK(all.find("\"why\":\"stop_at\"") != std::string::npos);
  CHECK(all.find("\"why\":\"schedule\"") != std::string::npos);
  // No validation data: nothing is evaluated and no best model is written.
  CHECK(all.find("\"event\":\"eval\"") == std::string::npos);
  CHECK_FALSE(fs::exists(files.best_path()));
}

TEST_CASE("evaluate keeps the lines read worst, worst first, as the model saw them", "[trainer][report]") {
  const nn::Charset charset = nn::Charset::ascii();
  Generator gen(3);
  auto model = nn::make_recognizer("crnn-s", charset.num_classes(), gen);
  auto comm = make_single_communicator();
  StripesDataset data;
  LoaderOptions lo;
  lo.batch = 2;
  lo.workers = 1;
  const EvalResult all = evaluate(*model, data, lo, Device::cpu(), charset, *comm, 100);
  CHECK(all.worst_from == 5);
  REQUIRE(all.worst.size() >= 2);  // an untrained model does not read stripes as letters
  for (size_t k = 0; k < all.worst.size(); ++k) {
    const WorstLine& w = all.worst[k];
    INFO(w.id << " read as '" << w.reading << "'");
    const int64_t i = w.id.back() - '0';
    const LineSample s = data.get(i, 0);
    CHECK(w.truth == s.text);
    CHECK(w.distance > 0);
    CHECK(w.cer == Approx((double)w.distance / (double)s.text.size()));
    if (k > 0) {  // worst first: CER, then edits
      const WorstLine& prev = all.worst[k - 1];
      CHECK((prev.cer > w.cer || (prev.cer == w.cer && prev.distance >= w.distance)));
    }
    // The image is the line as packed for the model: the sample's pixels, then white up to its
    // padded width (a multiple of 4).
    REQUIRE(w.image.height == 32);
    CHECK(w.image.width == padded_width(s.image.width));
    for (int64_t y = 0; y < 32; ++y)
      for (int64_t x = 0; x < w.image.width; ++x)
        REQUIRE((int)w.image.at(x, y) == (x < s.image.width ? (int)s.image.at(x, y) : 255));
  }
  // Keeping fewer keeps the worst of them; keeping none keeps none.
  const EvalResult two = evaluate(*model, data, lo, Device::cpu(), charset, *comm, 2);
  REQUIRE(two.worst.size() == 2);
  CHECK(two.worst[0].id == all.worst[0].id);
  CHECK(two.worst[1].id == all.worst[1].id);
  CHECK(two.cer == all.cer);
  CHECK(evaluate(*model, data, lo, Device::cpu(), charset, *comm, 0).worst.empty());
}

TEST_CASE("a resumed run's files: stale temporaries of killed saves go, metrics past the checkpoint go",
          "[trainer]") {
  TempDir dir("run-files");
  const nn::Charset charset = nn::Charset::ascii();
  TrainConfig cfg = tiny_config(dir.path);
  StartPoint s = resolve_start(cfg, charset, false);
  // A save killed mid-write by a process that is gone (pid 2^22 + 1 is above Linux's pid_max of
  // 2^22), and one of this live process.
  const fs::path dead = dir.path / "ckpt-00000008.safetensors.tmp.4194305";
  const fs::path live = dir.path / ("ckpt-00000009.safetensors.tmp." + std::to_string(::getpid()));
  std::ofstream(dead) << "partial";
  std::ofstream(live) << "partial";
  {
    std::ofstream m(dir.path / "metrics.jsonl");
    m << "{\"event\":\"train\",\"step\":4}\n{\"event\":\"checkpoint\",\"step\":5}\n"
      << "{\"event\":\"train\",\"step\":6}\n{\"event\":\"summary\",\"steps\":7}\nnot json\n";
  }
  RunFiles files(cfg, s.info, true, 5);
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(live));
  files.event(parse_json("{\"event\":\"train\",\"step\":6}"));
  std::ifstream in(dir.path / "metrics.jsonl");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  CHECK(lines == std::vector<std::string>{"{\"event\":\"train\",\"step\":4}", "{\"event\":\"checkpoint\",\"step\":5}",
                                          "{\"event\":\"summary\",\"steps\":7}", "not json",
                                          "{\"event\":\"train\",\"step\":6}"});
  // A fresh run (start step 0) keeps what is there.
  RunFiles fresh(cfg, s.info, true, 0);
  std::ifstream again(dir.path / "metrics.jsonl");
  int64_t n = 0;
  for (std::string l; std::getline(again, l);) ++n;
  CHECK(n == 5);
}
