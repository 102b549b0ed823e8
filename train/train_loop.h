// The pieces of a training run, each usable and tested on its own; trainer.cpp's run_replica
// strings them together:
//
//   StartPoint start = resolve_start(cfg, charset, lead);     // checkpoint, --init or seed
//   sync_replicas(comm, model, state.step, device, cfg.out);  // same step, rank 0's weights
//   while (state.step < steps) {
//     Batch b = loader.next();
//     StepResult s = train_step(parts, model, b, schedule.lr_at(state.step));  // the step itself
//     state.step++;
//     StopDecision stop = evaluate_and_save(run, state, steps,         // eval, best, checkpoint
//         decide_stop(cfg, state.step, steps, elapsed, signalled, comm, device));
//     if (stop.why != Stop::no) break;
//   }
#pragma once
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/charset.h"
#include "models/model_check.h"
#include "models/model_file.h"
#include "models/recognizer.h"
#include "runtime/comm.h"
#include "train/checkpoint.h"
#include "train/grad_sync.h"
#include "train/loader.h"
#include "train/optim.h"
#include "train/report.h"
#include "train/schedule.h"
#include "train/trainer.h"

namespace ocrt::train {

// Seconds on a steady clock (for the step's timers and --max-minutes).
double now_seconds();

// ---- where a run starts

// The model a run starts from, on the CPU, and what came with it: a recogniser for this loop
// (StartPoint), a text detector for the detector's (det_trainer.cpp).
template <class Model>
struct StartFrom {
  std::shared_ptr<Model> model;
  TrainState state;                   // the checkpoint's (step, best CER, ...) or a fresh one
  std::optional<nn::StateDict> optim;  // the checkpoint's optimizer state, if any
  nn::ModelInfo info;                 // what every saved model file of the run carries
  std::string from;                   // the checkpoint's or --init file's path; empty: the seed
  std::vector<std::string> changes;   // settings changed since the checkpoint (--allow-changes)
};
using StartPoint = StartFrom<nn::Recognizer>;

// The newest checkpoint in cfg.out (--resume), else the weights of cfg.init, else a model
// initialised from cfg.seed. Every mismatch between those files and the settings (arch,
// charset, seed, class count) is an error naming the file and the flag.
StartPoint resolve_start(const TrainConfig& cfg, const nn::Charset& charset, bool lead);

// resolve_start's parts that the detector's loop (det_trainer.h) shares: the newest checkpoint
// in cfg.out under --resume (none: an error naming the folder, unless --resume-if-present), and
// the check that the settings the trajectory depends on are those it was saved with (a change
// is an error listing them all, unless --allow-changes: then they are printed and returned).
std::optional<Checkpoint> checkpoint_to_resume(const TrainConfig& cfg);
std::vector<std::string> check_resume_settings(const Checkpoint& ckpt, const TrainConfig& cfg, bool lead);

// The files a run starts from: the newest checkpoint (--resume), else the --init model file,
// each checked against what the run trains (nn::check_model_info: arch, kind, charset) and a
// checkpoint against the run's settings (check_resume_settings).
struct StartFiles {
  std::optional<Checkpoint> ckpt;
  std::optional<nn::ModelFile> init;
  std::vector<std::string> changes;  // settings changed since the checkpoint (--allow-changes)

  // The architecture config the checkpoint or the --init file carries; null when neither does
  // (no --resume or --init, or a weights-only --init file).
  const Json* config() const;
  // While `guard` lives, building a model from config() is bounded by the size of the weights
  // that come with it (nn::ModelSizeGuard); nothing when config() is null.
  void bound_build(std::optional<nn::ModelSizeGuard>& guard) const;
};
StartFiles find_start_files(const TrainConfig& cfg, const nn::ModelExpectation& want, bool lead);

// Puts the checkpoint's weights (and its state and optimizer state) or else the --init file's
// weights into a model built from the seed, and the run's seed and settings into `state`.
void load_start(nn::Module& model, const StartFiles& files, const TrainConfig& cfg, bool lead, TrainState& state,
                std::optional<nn::StateDict>& optim, std::string& from);

// With several replicas: checks that all start at the same step (a resume must see the same
// checkpoints everywhere) and gives every replica rank 0's parameters and buffers. Nothing with
// one replica.
void sync_replicas(Communicator& comm, nn::Module& model, int64_t step, Device device, const std::string& out);

// The optimizer and the learning-rate schedule of a run's settings (--optimizer, --lr, --momentum,
// --weight-decay; --schedule, --steps, --warmup), for the recognisers' loop and the detector's.
std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& cfg, std::vector<Tensor> params);
Schedule make_schedule(const TrainConfig& cfg);

// ---- one step

// The CTC loss (mean over the batch) of a batch on the model's device. `images`: the batch's
// images already on that device (what train_step's copy phase made), or undefined to copy them.
Tensor batch_loss(nn::Recognizer& model, const Batch& b, Device device, const Tensor& images = {});

// What a training step works on, besides the model.
struct StepParts {
  Optimizer& optim;
  GradSync& grad_sync;
  Communicator& comm;
  Device device;
  int64_t global_batch;  // lines of the whole batch over all replicas (a replica's share scales its loss)
  double clip_grad;      // 0: no clipping, the norm is only measured
  bool overlap;          // sum gradient buckets during the backward pass rather than after it
};

struct StepResult {
  double loss = 0;  // the whole batch's mean loss (summed over replicas)
  bool ok = false;  // false: the loss or the gradient norm was not finite and the step was skipped
  // Host wall time of each part: the batch's copy to the device, forward + loss, backward, the
  // wait for the gradient sum over replicas after backward, clipping, the update.
  double copy_s = 0, forward_s = 0, backward_s = 0, sync_s = 0, clip_s = 0, optimizer_s = 0;
};

// copy to the device, forward, backward (+ gradient sum over replicas), clip, update at `lr`,
// zero_grad. A step whose loss or gradient norm is not finite on any replica changes no weight
// on any replica.
StepResult train_step(StepParts& p, nn::Recognizer& model, const Batch& b, double lr);
// The same step for any model (the detector's loop uses it): `copy` moves this replica's inputs
// to the device (may be empty), `forward` gives its mean loss over its `shard` samples of the
// global batch.
StepResult train_step(StepParts& p, const std::function<void()>& copy, const std::function<Tensor()>& forward,
                      int64_t shard, double lr);

// Samples/s and where a step's time goes, from the end of the second step of this run on
// (the warm-up steps allocate and fault in memory).
struct Throughput {
  int64_t samples = 0, steps = 0;
  double start = 0;
  static constexpr int kPhases = 7;
  // data, copy, forward, backward, sync, clip, optimizer: seconds over the timed steps
  double phase[kPhases] = {};

  void add(int64_t steps_done, int64_t batch, double data_s, const StepResult& s);
  double samples_per_sec() const;
  void report(TrainResult& r) const;  // samples/s and the ms a step of each phase
};

// The training loss a run reports: the last good step's, and a running average (each step
// weighs 0.05, starting from the run's first loss). A step whose loss or gradient was not finite
// is counted in the state's skipped_steps, with a warning from the lead replica; max_bad of them
// in a row stop the run with an error that names the folder of the last good checkpoint.
class LossTrack {
 public:
  LossTrack(int64_t first_step, int64_t max_bad, std::string out, bool lead)
      : first_step_(first_step), max_bad_(max_bad), out_(std::move(out)), lead_(lead) {}
  void add(const StepResult& s, TrainState& state);  // before state.step counts the step
  double last() const { return last_; }
  double average() const { return average_; }

 private:
  int64_t first_step_, max_bad_;
  std::string out_;
  bool lead_;
  int64_t bad_in_row_ = 0;
  double last_ = 0, average_ = 0;
};

// Makes the run's folder (--out) and its parents, or fails saying why ("--out: /dev/null exists
// and is not a folder", "--out: cannot make the folder X: Permission denied").
void make_run_folder(const std::string& out);

// The process's peak resident memory so far, in MiB (getrusage).
double peak_rss_mb();

// ---- stopping

enum class Stop { no, out_of_time, stop_at, signal };
const char* stop_name(Stop s);  // "max_minutes", "stop_at", "signal" (the checkpoint's "why")

struct StopDecision {
  Stop why = Stop::no;
  bool out_of_time = false;  // --max-minutes has passed (evaluate now, even at the last step)
};

// Whether to stop after step `step` (1-based: steps done) of `steps`: --max-minutes passed
// (before the last step), --stop-at reached (before the last step), or a signal. Decided by all
// replicas together (the clock or a signal may reach them at different steps, and one leaving
// alone would leave the others waiting); the first reason in that order wins.
StopDecision decide_stop(const TrainConfig& cfg, int64_t step, int64_t steps, double elapsed_s, bool signalled,
                         Communicator& comm, Device device);

// The lead replica's line when a run stops early after saving the checkpoint of `step`
// ("--max-minutes 5 reached at step 120: saved, stopping"); nothing for Stop::no.
void report_stop(const TrainConfig& cfg, Stop why, int64_t step, bool lead);

// ---- evaluation and files

struct EvalResult {
  double cer = 0, line_accuracy = 0;
  int64_t lines = 0;
  std::vector<std::pair<std::string, std::string>> examples;  // (label, prediction)
  // The lines read worst, worst first: the highest CER, then the most edits, then the earliest
  // in the validation set (so the choice depends on nothing but the lines); lines read right
  // are never among them. With several replicas, those of this replica's shard.
  std::vector<WorstLine> worst;
  int64_t worst_from = 0;  // the lines they were chosen from (this replica's)
};

// Greedy-decodes every validation line (each exactly once) in eval mode, keeping the `keep_worst`
// lines read worst. With several replicas each decodes its shard of every batch, and the counts
// are summed over replicas With an interruptible loader (one replica), a signal ends it by
// throwing Interrupted.
EvalResult evaluate(nn::Recognizer& model, const Dataset& data, const LoaderOptions& base, Device device,
                    const nn::Charset& charset, Communicator& comm, int64_t keep_worst = 0);

// What a run writes into cfg.out (only on the lead replica; the others' calls do nothing):
// metrics.jsonl events, checkpoints (pruned to cfg.keep), best.safetensors, the worst
// validation lines (worst/) and the report (report.html, train/report.h). Opening it removes
// what a killed run left: temporary files of saves that never finished, and the metrics of
// steps past start_step (a resumed run writes them again).
class RunFiles {
 public:
  RunFiles(const TrainConfig& cfg, nn::ModelInfo info, bool lead, int64_t start_step = 0);
  // The "start" event, either loop's: the step this process starts at, where from (`from`),
  // the settings, the settings changed since the checkpoint, and the model.
  void start(const nn::Module& model, const TrainState& state, const std::string& from,
             const std::vector<std::string>& changes, int replicas);
  void event(const Json& j);
  void checkpoint(const nn::Module& model, const Optimizer& optim, const TrainState& state, const char* why);
  // best.safetensors: the model with a training record (data, steps, val CER, device, replicas).
  void best_model(const nn::Module& model, const TrainState& state, double cer, Device device, int replicas);
  // worst/: the lines an evaluation at `step` read worst, replacing the previous evaluation's.
  void worst_lines(int64_t step, const EvalResult& r);
  // report.html, from what the folder holds now. A failure is a warning on stderr (once), never
  // the end of the run: the report is for reading, the run is what matters.
  void report();
  // Seconds since this process opened the run's files, to the millisecond: the "time" of its
  // events (metrics.jsonl stays short).
  double elapsed() const { return std::round((now_seconds() - t0_) * 1000) / 1000; }
  const std::string& best_path() const { return best_path_; }
  bool lead() const { return lead_; }
  // The end of a run, either loop's: the result's figures (steps, speed, peak RSS, CPU path,
  // precision, last loss, best CER and model) filled in and written as the "summary" event.
  void summary(TrainResult& result, const TrainState& state, const Throughput& speed, const LossTrack& loss,
               int rank, int replicas, const std::string& precision);

 private:
  std::string out_;
  int64_t keep_;
  nn::ModelInfo info_;
  bool lead_;
  std::ofstream metrics_;  // OUT/metrics.jsonl, appended to: one JSON object a line
  std::string best_path_;
  double t0_;
  bool report_failed_ = false;
};

// A run's parts that evaluation and saving use.
struct RunParts {
  const TrainConfig& cfg;
  nn::Recognizer& model;
  Optimizer& optim;
  Communicator& comm;
  Device device;
  RunFiles& files;
  const nn::Charset& charset;
  const Dataset* val_data;  // null: no evaluation
  LoaderOptions val_loader;
  bool tty = false;         // progress is a bar on a terminal (end it before printing)
};

// After a step: evaluates when due (every cfg.eval_every steps, at the last step, or when out of
// time), keeping the best model and the worst lines; writes a checkpoint when one is due (every
// cfg.save_every steps and at the last) or when the run stops early; after either, refreshes
// the report (it costs milliseconds, an evaluation seconds, so a long run can be watched).
// A signal during the evaluation (one replica: its loader is interruptible) abandons it: the
// checkpoint is saved and the decision returned says Stop::signal; otherwise `stop` as given.
StopDecision evaluate_and_save(RunParts& run, TrainState& state, int64_t steps, StopDecision stop);

}  // namespace ocrt::train
