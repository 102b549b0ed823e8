// The pieces of a training run (train_loop.h).
#include "train/train_loop.h"

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "models/ctc_decode.h"
#include "models/edit_distance.h"
#include "ops/ctc.h"
#include "ops/elementwise.h"
#include "runtime/cpu_isa.h"
#include "runtime/interrupt.h"

namespace fs = std::filesystem;

namespace ocrt::train {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// ---- where a run starts

// A resumed run ends bit-identical to an uninterrupted one only with the settings its trajectory
// depends on unchanged (resume_changes, trainer.h): a change is refused, listing every one, unless
// --allow-changes is given; then each is printed, and returned for the run's start event.
std::vector<std::string> check_resume_settings(const Checkpoint& ckpt, const TrainConfig& cfg, bool lead) {
  Json saved = ckpt.state.settings;
  // The seed is in the checkpoint's state even where its settings predate the seed's entry.
  if (saved.is_object() && !saved.contains("seed")) saved.set("seed", std::to_string(ckpt.state.seed));
  const std::vector<std::string> changes = resume_changes(saved, cfg);
  if (changes.empty()) return changes;
  std::string list;
  for (const std::string& c : changes) list += "\n  " + c;
  OCRT_CHECK(cfg.allow_changes, "--resume: ", ckpt.path, " was saved with other settings, so the run would not ",
             "continue exactly as it began:", list, "\ngive the same flags, or --allow-changes to continue with the new ones");
  if (lead) std::fprintf(stderr, "resume with --allow-changes: settings changed since %s:%s\n", ckpt.path.c_str(),
                         list.c_str());
  return changes;
}

void load_start(nn::Module& model, const StartFiles& files, const TrainConfig& cfg, bool lead, TrainState& state,
                std::optional<nn::StateDict>& optim, std::string& from) {
  state = TrainState{};
  if (files.ckpt) {
    const Checkpoint& ckpt = *files.ckpt;
    model.load_state_dict(ckpt.model);
    state = ckpt.state;
    if (!ckpt.optim.empty()) optim = ckpt.optim;
    from = ckpt.path;
    if (lead) std::fprintf(stderr, "resuming from %s at step %lld\n", ckpt.path.c_str(), (long long)state.step);
  } else if (files.init) {
    model.load_state_dict(files.init->weights);
    from = cfg.init;
  }
  state.seed = cfg.seed;  // the checkpoint's, or changed with --allow-changes
  state.settings = cfg.to_json();
}

std::optional<Checkpoint> checkpoint_to_resume(const TrainConfig& cfg) {
  if (!cfg.resume && !cfg.resume_if_present) return std::nullopt;
  auto all = list_checkpoints(cfg.out);
  // A mistyped or empty --out must not silently become a run from step 0.
  OCRT_CHECK(!all.empty() || cfg.resume_if_present, "--resume: no checkpoint (ckpt-*.safetensors) in '", cfg.out,
             "'; start without --resume, or give --resume-if-present to start afresh when there is none");
  if (all.empty()) return std::nullopt;
  return load_checkpoint(all.back());
}

const Json* StartFiles::config() const {
  if (ckpt) return &ckpt->info.config;
  if (init && init->info) return &init->info->config;
  return nullptr;
}

void StartFiles::bound_build(std::optional<nn::ModelSizeGuard>& guard) const {
  if (ckpt) guard.emplace(ckpt->model, ckpt->path);
  else if (init && init->info) guard.emplace(init->weights, init->path);
}

StartFiles find_start_files(const TrainConfig& cfg, const nn::ModelExpectation& want, bool lead) {
  StartFiles files;
  files.ckpt = checkpoint_to_resume(cfg);
  if (files.ckpt) {
    nn::check_model_info(files.ckpt->info, "--resume: " + files.ckpt->path, want);
    files.changes = check_resume_settings(*files.ckpt, cfg, lead);
  } else if (!cfg.init.empty()) {
    files.init = nn::load_model_file(cfg.init);
    if (files.init->info) nn::check_model_info(*files.init->info, "--init: " + cfg.init, want);
  }
  return files;
}

StartPoint resolve_start(const TrainConfig& cfg, const nn::Charset& charset, bool lead) {
  const std::vector<std::string> chars = charset.chars();
  const StartFiles files = find_start_files(cfg, {nn::ModelExpectation::Kind::recognizer, cfg.arch, "--arch", &chars}, lead);

  // The architecture config: the checkpoint's or the --init file's when they carry one (a model
  // of any config of the arch can be resumed or fine-tuned), else the arch's preset.
  Json conf;
  if (const Json* stored = files.config()) {
    conf = *stored;
  } else {
    Generator scratch(0);
    conf = nn::make_recognizer(cfg.arch, charset.num_classes(), scratch)->config_json();
  }
  if (!cfg.batch_norm) {
    OCRT_CHECK(cfg.arch == "crnn" || cfg.arch == "crnn-s", "--no-batch-norm: only crnn and crnn-s have the option");
    conf.set("batch_norm", false);
  }

  // The model, initialised from the seed; then the checkpoint's or the --init file's weights.
  StartPoint s;
  Generator gen(cfg.seed);
  {
    std::optional<nn::ModelSizeGuard> guard;  // a config from a file must fit that file's weights
    files.bound_build(guard);
    s.model = nn::make_recognizer(cfg.arch, conf, gen);
  }
  OCRT_CHECK(s.model->num_classes() == charset.num_classes(), "the model has ", s.model->num_classes(),
             " classes but the charset ", charset.size(), " characters (expected characters + 1)");
  s.info.arch = cfg.arch;
  s.info.config = s.model->config_json();
  s.info.charset = charset.chars();
  s.info.input = s.model->input_spec();
  load_start(*s.model, files, cfg, lead, s.state, s.optim, s.from);
  s.changes = files.changes;
  return s;
}

void sync_replicas(Communicator& comm, nn::Module& model, int64_t step, Device device, const std::string& out) {
  if (comm.size() < 2) return;
  const double s = (double)step;
  const auto hi = comm.all_reduce_values({s, -s}, ReduceOp::max, device);
  OCRT_CHECK(hi[0] == -hi[1], "rank ", comm.rank(), ": the replicas would start at different steps (", -hi[1], " to ",
             hi[0], "): with --resume, every replica must see the same checkpoints in ", out,
             " (a shared folder across machines)");
  std::vector<Tensor> all;
  for (auto& [name, t] : model.named_parameters()) all.push_back(t);
  for (auto& [name, t] : model.named_buffers()) all.push_back(t);
  broadcast_tensors(comm, all, 0);
}

// ---- one step

Tensor batch_loss(nn::Recognizer& model, const Batch& b, Device device, const Tensor& images) {
  Tensor logits = model.forward(images.defined() ? images : b.images.to(device), b.widths);
  std::vector<int64_t> frames, lengths, flat;
  for (size_t i = 0; i < b.widths.size(); ++i) {
    frames.push_back(model.frames_for_width(b.widths[i]));
    lengths.push_back((int64_t)b.targets[i].size());
    flat.insert(flat.end(), b.targets[i].begin(), b.targets[i].end());
  }
  CTCLossOptions o;
  o.reduction = Reduction::mean;
  o.zero_infinity = true;
  return ctc_loss_from_logits(logits, Tensor::from_vector(flat), frames, lengths, o);
}

StepResult train_step(StepParts& p, nn::Recognizer& model, const Batch& b, double lr) {
  Tensor images;
  return train_step(
      p, [&] { images = b.images.to(p.device); }, [&] { return batch_loss(model, b, p.device, images); },
      (int64_t)b.widths.size(), lr);
}

StepResult train_step(StepParts& p, const std::function<void()>& copy, const std::function<Tensor()>& forward,
                      int64_t shard, double lr) {
  StepResult r;
  const bool replicated = p.comm.size() > 1;
  double t = now_seconds();
  auto lap = [&t](double& into) {
    const double now = now_seconds();
    into += now - t;
    t = now;
  };

  // The inputs to the device (on a GPU, as far as the host waits for the copy).
  if (copy) copy();
  lap(r.copy_s);

  // Forward. This replica's share of the batch's mean loss: summed over replicas, the
  // gradients are those of the whole batch's mean. Whether to skip the step is decided by all
  // replicas together: the sum is non-finite as soon as one replica's loss is.
  Tensor loss = forward();
  if (replicated) loss = loss * ((double)shard / (double)p.global_batch);
  r.loss = loss.item();
  if (replicated) r.loss = p.comm.all_reduce_values({r.loss}, ReduceOp::sum, p.device)[0];
  lap(r.forward_s);
  r.ok = std::isfinite(r.loss);

  if (r.ok) {
    // Backward; then every replica holds the whole batch's gradient. Overlapped (on GPUs): each
    // bucket's sum starts as soon as backward has finished its gradients.
    if (p.overlap) p.grad_sync.begin(p.comm);
    loss.backward();
    lap(r.backward_s);
    if (p.overlap) p.grad_sync.finish();  // the buckets' sums still running after backward
    else p.grad_sync.all_reduce(p.comm);
    lap(r.sync_s);
    const double norm = p.clip_grad > 0 ? clip_grad_norm(p.optim.params(), p.clip_grad) : grad_norm(p.optim.params());
    r.ok = std::isfinite(norm);
    lap(r.clip_s);
  }
  if (r.ok) {  // update
    p.optim.set_lr(lr);
    p.optim.step();
  }
  p.optim.zero_grad();
  lap(r.optimizer_s);
  return r;
}

void Throughput::add(int64_t steps_done, int64_t batch, double data_s, const StepResult& s) {
  if (steps_done == 2) start = now_seconds();
  if (steps_done <= 2) return;
  samples += batch;
  steps++;
  const double parts[kPhases] = {data_s, s.copy_s, s.forward_s, s.backward_s, s.sync_s, s.clip_s, s.optimizer_s};
  for (int k = 0; k < kPhases; ++k) phase[k] += parts[k];
}

double Throughput::samples_per_sec() const {
  const double elapsed = start > 0 ? now_seconds() - start : 0;
  return elapsed > 0 ? (double)samples / elapsed : 0;
}

void Throughput::report(TrainResult& r) const {
  r.samples_per_sec = samples_per_sec();
  if (steps == 0) return;
  double* ms[kPhases] = {&r.data_ms, &r.copy_ms, &r.forward_ms, &r.backward_ms, &r.sync_ms, &r.clip_ms, &r.optimizer_ms};
  for (int k = 0; k < kPhases; ++k) *ms[k] = 1000 * phase[k] / (double)steps;
}

double peak_rss_mb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;  // Linux reports KiB
}

// ---- stopping

const char* stop_name(Stop s) {
  switch (s) {
    case Stop::no: return "no";
    case Stop::out_of_time: return "max_minutes";
    case Stop::stop_at: return "stop_at";
    case Stop::signal: return "signal";
  }
  return "?";
}

void report_stop(const TrainConfig& cfg, Stop why, int64_t step, bool lead) {
  if (!lead || why == Stop::no) return;
  const long long at = step;
  if (why == Stop::out_of_time)
    std::fprintf(stderr, "\n--max-minutes %g reached at step %lld: saved, stopping\n", cfg.max_minutes, at);
  else if (why == Stop::stop_at)
    std::fprintf(stderr, "\n--stop-at %lld reached: saved, stopping\n", at);
  else
    std::fprintf(stderr, "\n%s: saved a checkpoint at step %lld, stopping\n", signal_name(interrupt_signal()).c_str(), at);
}

void LossTrack::add(const StepResult& s, TrainState& state) {
  if (s.ok) {
    bad_in_row_ = 0;
    last_ = s.loss;
    average_ = state.step == first_step_ ? s.loss : 0.95 * average_ + 0.05 * s.loss;
    return;
  }
  state.skipped_steps++;
  bad_in_row_++;
  if (lead_)
    std::fprintf(stderr, "\nwarning: step %lld: non-finite loss or gradient (loss %g); step skipped\n",
                 (long long)state.step, s.loss);
  OCRT_CHECK(bad_in_row_ < max_bad_, "stopping: ", bad_in_row_,
             " steps in a row had a non-finite loss or gradient; the last good checkpoint is in ", out_);
}

void make_run_folder(const std::string& out) {
  std::error_code ec;
  const bool exists = fs::exists(out, ec);
  OCRT_CHECK(!exists || fs::is_directory(out, ec), "--out: ", out, " exists and is not a folder");
  fs::create_directories(out, ec);
  OCRT_CHECK(!ec, "--out: cannot make the folder ", out, ": ", ec.message());
}

StopDecision decide_stop(const TrainConfig& cfg, int64_t step, int64_t steps, double elapsed_s, bool signalled,
                         Communicator& comm, Device device) {
  StopDecision d;
  d.out_of_time = cfg.max_minutes > 0 && elapsed_s > cfg.max_minutes * 60;
  if (comm.size() > 1) {
    const auto any = comm.all_reduce_values({d.out_of_time ? 1.0 : 0.0, signalled ? 1.0 : 0.0}, ReduceOp::max, device);
    d.out_of_time = any[0] > 0;
    signalled = any[1] > 0;
  }
  if (d.out_of_time && step < steps) d.why = Stop::out_of_time;
  else if (cfg.stop_at > 0 && step >= cfg.stop_at && step < steps) d.why = Stop::stop_at;
  else if (signalled) d.why = Stop::signal;
  return d;
}

// ---- evaluation and files

namespace {

// Line i of a packed batch as the model read it: back from p * scale + offset to gray levels,
// cut at the line's own (padded) width.
GrayImage batch_line(const Tensor& images, const std::vector<int64_t>& widths, size_t i, const BatchSpec& spec) {
  const int64_t H = images.size(2), W = images.size(3);
  GrayImage g;
  g.height = H;
  g.width = std::clamp<int64_t>(widths[i], 1, W);
  g.pixels.resize((size_t)(g.width * H));
  const float* p = images.data<float>() + (int64_t)i * H * W;
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < g.width; ++x) {
      const double v = ((double)p[y * W + x] - spec.offset) / spec.scale;
      g.pixels[(size_t)(y * g.width + x)] = (uint8_t)std::clamp<long>(std::lround(v), 0, 255);
    }
  return g;
}

}  // namespace

EvalResult evaluate(nn::Recognizer& model, const Dataset& data, const LoaderOptions& base, Device device,
                    const nn::Charset& charset, Communicator& comm, int64_t keep_worst) {
  LoaderOptions o = base;
  o.shuffle = false;
  o.augment = false;
  o.bucket_window = 0;
  Loader loader(std::shared_ptr<const Dataset>(&data, [](const Dataset*) {}), o);
  model.train(false);
  NoGradGuard no_grad;
  double edits = 0, chars = 0, exact = 0, seen = 0;
  EvalResult r;
  // The worst lines so far, worst first, with their place in the validation set for ties.
  std::vector<std::pair<int64_t, WorstLine>> worst;
  auto worse = [](const std::pair<int64_t, WorstLine>& a, const std::pair<int64_t, WorstLine>& b) {
    if (a.second.cer != b.second.cer) return a.second.cer > b.second.cer;
    if (a.second.distance != b.second.distance) return a.second.distance > b.second.distance;
    return a.first < b.first;
  };
  const int64_t total = data.size(), B = o.batch;
  const int64_t first = B * o.shard_index / o.shard_count;  // this shard's first line in a batch
  for (int64_t step = 0; step * B < total; ++step) {
    std::optional<Batch> got = o.interruptible ? loader.next_or_interrupted() : std::optional<Batch>(loader.next());
    if (!got) {
      model.train(true);
      throw Interrupted(interrupt_signal(), "evaluating");
    }
    Batch& b = *got;
    Tensor logits = model.forward(b.images.to(device), b.widths);
    std::vector<int64_t> frames;
    for (int64_t w : b.widths) frames.push_back(model.frames_for_width(w));
    auto decoded = nn::ctc_greedy_decode(logits, frames);
    for (size_t i = 0; i < decoded.size() && step * B + first + (int64_t)i < total; ++i) {
      const int64_t e = nn::edit_distance(decoded[i].labels, b.targets[i]);
      edits += (double)e;
      chars += (double)b.targets[i].size();
      exact += e == 0;
      seen += 1;
      if (r.examples.size() < 4) r.examples.emplace_back(b.texts[i], charset.decode(decoded[i].labels));
      r.worst_from++;
      if (e == 0 || keep_worst <= 0) continue;
      std::pair<int64_t, WorstLine> cand;
      cand.first = step * B + first + (int64_t)i;
      cand.second.distance = e;
      cand.second.cer = (double)e / (double)std::max<size_t>(1, b.targets[i].size());
      if ((int64_t)worst.size() >= keep_worst && !worse(cand, worst.back())) continue;
      cand.second.id = b.ids[i];
      cand.second.truth = b.texts[i];
      cand.second.reading = charset.decode(decoded[i].labels);
      cand.second.image = batch_line(b.images, b.widths, i, o.spec);
      worst.insert(std::upper_bound(worst.begin(), worst.end(), cand, worse), std::move(cand));
      if ((int64_t)worst.size() > keep_worst) worst.pop_back();
    }
  }
  model.train(true);
  for (auto& [position, line] : worst) r.worst.push_back(std::move(line));
  const std::vector<double> sums = comm.all_reduce_values({edits, chars, exact, seen}, ReduceOp::sum, device);
  r.lines = (int64_t)sums[3];
  r.cer = sums[1] > 0 ? sums[0] / sums[1] : 0;
  r.line_accuracy = sums[3] > 0 ? sums[2] / sums[3] : 0;
  return r;
}

namespace {

// A save that was killed leaves NAME.tmp.PID behind (runtime/safetensors.h writes through one).
// Those of processes that no longer run are removed; a live process's file is left alone.
void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || !e.is_regular_file()) continue;
    const std::string pid_text = name.substr(at + 5);
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(pid_text.c_str(), nullptr, 10);
    if (pid <= 0 || (::kill((pid_t)pid, 0) == 0 || errno == EPERM)) continue;  // still running
    std::fprintf(stderr, "note: removing %s, left by a save that did not finish\n", e.path().c_str());
    fs::remove(e.path(), ec);
  }
}

// After a resume at `step`, the events of steps past it (written before the interruption, and
// about to be written again) are dropped, so that metrics.jsonl reads as one run. Lines that
// are not JSON objects with a "step" are kept.
void truncate_metrics(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;
  std::string line, kept;
  bool dropped = false;
  while (std::getline(in, line)) {
    bool keep = true;
    try {
      const Json j = parse_json(line);
      const Json* s = j.is_object() ? j.find("step") : nullptr;
      keep = !(s && s->is_number() && s->as_number() > (double)step);
    } catch (const Error&) {
    }
    if (keep) kept += line + "\n";
    dropped |= !keep;
  }
  in.close();
  if (!dropped) return;
  std::ofstream out(path, std::ios::trunc);
  out << kept;
  OCRT_CHECK(out.good(), "cannot rewrite ", path);
}

}  // namespace

RunFiles::RunFiles(const TrainConfig& cfg, nn::ModelInfo info, bool lead, int64_t start_step)
    : out_(cfg.out), keep_(cfg.keep), info_(std::move(info)), lead_(lead),
      best_path_((fs::path(cfg.out) / "best.safetensors").string()), t0_(now_seconds()) {
  if (!lead_) return;
  remove_stale_temporaries(cfg.out);
  remove_stale_temporaries((fs::path(cfg.out) / "worst").string());
  const std::string path = (fs::path(cfg.out) / "metrics.jsonl").string();
  if (start_step > 0) truncate_metrics(path, start_step);
  metrics_.open(path, std::ios::app);
  OCRT_CHECK(metrics_.good(), "cannot write ", path);
}

void RunFiles::start(const nn::Module& model, const TrainState& state, const std::string& from,
                     const std::vector<std::string>& changes, int replicas) {
  Json j = Json::object();
  j.set("event", "start");
  j.set("step", state.step);
  j.set("time", 0);
  j.set("unix_time", (int64_t)std::time(nullptr));
  j.set("from", from);
  j.set("arch", info_.arch);
  j.set("model", info_.config);
  j.set("parameters", model.num_parameters());
  if (replicas > 1) j.set("replicas", replicas);
  j.set("settings", state.settings);
  if (!changes.empty()) {
    Json list = Json::array();
    for (const std::string& c : changes) list.push_back(c);
    j.set("changed_settings", list);
  }
  event(j);
}

void RunFiles::event(const Json& j) {
  if (!lead_) return;
  metrics_ << j.dump() << '\n';
  metrics_.flush();
}

void RunFiles::checkpoint(const nn::Module& model, const Optimizer& optim, const TrainState& state, const char* why) {
  if (!lead_) return;
  save_checkpoint(checkpoint_path(out_, state.step), model, optim, state, info_);
  prune_checkpoints(out_, keep_);
  Json j = Json::object();
  j.set("event", "checkpoint");
  j.set("step", state.step);
  j.set("why", why);
  j.set("time", elapsed());
  event(j);
}

void RunFiles::best_model(const nn::Module& model, const TrainState& state, double cer, Device device, int replicas) {
  if (!lead_) return;
  nn::ModelInfo i = info_;
  i.training = Json::object();
  i.training.set("data", state.settings.at("train"));
  i.training.set("steps", state.step);
  i.training.set("val_cer", cer);
  i.training.set("device", device.str());
  if (replicas > 1) i.training.set("replicas", replicas);
  nn::save_model_file(best_path_, model, i);
}

void RunFiles::worst_lines(int64_t step, const EvalResult& r) {
  if (!lead_) return;
  write_worst_lines(out_, step, r.worst_from, r.worst);
}

void RunFiles::summary(TrainResult& result, const TrainState& state, const Throughput& speed, const LossTrack& loss,
                       int rank, int replicas, const std::string& precision) {
  result.steps = state.step;
  result.rank = rank;
  speed.report(result);
  result.peak_rss_mb = peak_rss_mb();
  result.cpu_path = cpu_isa_name(cpu_isa());
  result.precision = precision;
  result.final_loss = loss.last();
  result.best_cer = state.best_cer;
  result.best_model = fs::exists(best_path_) ? best_path_ : "";
  Json j = result.to_json();
  j.set("event", "summary");
  if (replicas > 1) j.set("replicas", replicas);
  j.set("time", elapsed());
  event(j);
}

void RunFiles::report() {
  if (!lead_) return;
  try {
    write_report(out_, (fs::path(out_) / "report.html").string());
  } catch (const std::exception& e) {
    if (!report_failed_)
      std::fprintf(stderr, "\nwarning: the report could not be written (the run goes on): %s\n", e.what());
    report_failed_ = true;
  }
}

StopDecision evaluate_and_save(RunParts& run, TrainState& state, int64_t steps, StopDecision stop) {
  const TrainConfig& cfg = run.cfg;
  bool wrote = false;
  std::optional<EvalResult> evaluated;
  if (run.val_data && (state.step % cfg.eval_every == 0 || state.step == steps || stop.out_of_time)) {
    try {
      evaluated = evaluate(run.model, *run.val_data, run.val_loader, run.device, run.charset, run.comm,
                           cfg.worst_lines);
    } catch (const Interrupted& e) {  // one replica only (run.val_loader.interruptible)
      if (run.files.lead()) std::fprintf(stderr, "\n%s: this step's evaluation is left out\n", e.what());
      stop.why = Stop::signal;
    }
  }
  if (evaluated) {
    EvalResult& r = *evaluated;
    wrote = true;
    if (run.files.lead()) {
      if (run.tty) std::fprintf(stderr, "\n");
      std::fprintf(stderr, "eval step %lld: CER %.4f, line accuracy %.4f on %lld lines\n", (long long)state.step,
                   r.cer, r.line_accuracy, (long long)r.lines);
      for (auto& [label, pred] : r.examples)
        std::fprintf(stderr, "  label: %-40s read: %s\n", label.c_str(), pred.c_str());
    }
    Json j = Json::object();
    j.set("event", "eval");
    j.set("step", state.step);
    j.set("cer", r.cer);
    j.set("line_accuracy", r.line_accuracy);
    j.set("lines", r.lines);
    j.set("time", run.files.elapsed());
    run.files.event(j);
    if (cfg.worst_lines > 0) run.files.worst_lines(state.step, r);
    if (state.best_cer < 0 || r.cer < state.best_cer) {
      state.best_cer = r.cer;
      state.best_step = state.step;
      run.files.best_model(run.model, state, r.cer, run.device, run.comm.size());
    }
  }
  if (state.step % cfg.save_every == 0 || state.step == steps) {
    run.files.checkpoint(run.model, run.optim, state, "schedule");
    wrote = true;
  } else if (stop.why != Stop::no) {
    run.files.checkpoint(run.model, run.optim, state, stop_name(stop.why));
    wrote = true;
  }
  if (wrote) run.files.report();
  return stop;
}

}  // namespace ocrt::train
