// The training loop behind ocrt-train: data -> model -> CTC loss -> backward -> clip -> step,
// with periodic evaluation (CER, line accuracy), checkpoints, exact resume, and a summary. The
// loop's pieces (where a run starts, one step, when to stop, what to save) are in
// train/train_loop.h, each usable on its own; trainer.cpp strings them together.
//
// One step, on the model's device (train_step):
//   batch (CPU, from the loader)  -> images.to(device)
//   logits = model(images, widths)                      (T, N, C)
//   loss   = ctc_loss_from_logits(logits, targets, frames(widths), lengths, mean, zero_infinity)
//   loss.backward(); norm = clip_grad_norm(params, clip); skip if loss or norm is not finite
//   optimizer.set_lr(schedule.lr_at(step)); optimizer.step(); optimizer.zero_grad()
// Everything random (data order, augmentation, initial weights) comes from the seed, and the
// loader's batch s depends only on (seed, s), so a run resumed from a checkpoint at step k
// ends bit-identical to an uninterrupted run on the CPU with a fixed thread count.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/conv.h"
#include "runtime/cpu/gemm.h"
#include "runtime/precision.h"
#include "runtime/device.h"
#include "runtime/json.h"
#include "train/augment.h"
#include "train/loader.h"
#include "train/schedule.h"

namespace ocrt::train {

// The settings that are one of a few names on the command line, parsed once (parse_* throw
// quoting the name and listing the ones they take; *_name give the name back for JSON).
enum class OptimizerKind { sgd, adam, adamw };
enum class Overlap { automatic, on, off };  // --overlap auto|on|off
enum class OnBadSample { skip, fail };
OptimizerKind parse_optimizer_kind(const std::string& name);
const char* optimizer_kind_name(OptimizerKind k);
Overlap parse_overlap(const std::string& name);
const char* overlap_name(Overlap o);
OnBadSample parse_on_bad_sample(const std::string& name);
const char* on_bad_sample_name(OnBadSample o);

// The largest values ocrt-train's flags take (docs/cli.md): far beyond any real run, and small
// enough that counts of steps and samples stay exact in an int64 and a double.
constexpr int64_t kMaxSteps = 1'000'000'000'000;  // --steps, --warmup, --save-every, ...
constexpr int64_t kMaxBatch = 1 << 20;             // --batch
constexpr int64_t kMaxLines = 1'000'000'000;       // --synth-epoch, --val-size
constexpr double kMaxEpochs = 1e6;                 // --epochs
constexpr int kMaxThreads = 4096;                  // --threads

struct TrainConfig {
  std::string arch = "crnn-s";               // crnn | crnn-s | svtr-lite, or the detector dbnet
  std::vector<std::string> train;            // label files / folders, or {"synth"}
  std::vector<std::string> val;              // the same, or {"synth"}; empty: no evaluation
  std::string charset_path;                  // empty: printable ASCII
  std::vector<std::string> fonts;            // synthetic training lines (empty: Debian's)
  std::vector<std::string> val_fonts;        // synthetic validation lines (empty: as fonts)
  std::string words = "/usr/share/dict/words";
  std::vector<std::string> prose;            // text files for prose lines (empty: none)
  std::string scan = "none";                 // scan simulation preset for synthetic lines (scan.h)
  int64_t val_size = 512;                    // synthetic validation lines
  SynthOptions synth;
  // --render-cache DIR: the synthetic training lines (--synth-epoch of them) rendered once into
  // shards in DIR and read from there every epoch with fresh augmentation (train/line_cache.h);
  // empty: rendered on the fly.
  std::string render_cache;
  Device device = Device::cpu();
  int threads = 0;                           // 0: leave the default
  int workers = 2;
  int64_t batch = 32;
  int64_t steps = 1000;
  double epochs = 0;                         // > 0: steps = ceil(epochs * training samples / batch)
  double lr = 1e-3;
  OptimizerKind optimizer = OptimizerKind::adamw;
  double momentum = 0.9, weight_decay = 1e-4;
  ScheduleKind schedule = ScheduleKind::cosine;
  int64_t warmup = 200;
  double clip_grad = 5.0;                    // 0: no clipping
  uint64_t seed = 1;
  bool augment = true;
  std::string init;                          // start from these weights (a model file)
  std::string out = "run";
  int64_t save_every = 1000, eval_every = 1000, log_every = 50, keep = 3;
  int64_t worst_lines = 16;                  // validation lines read worst, kept in out/worst/ (0: none)
  bool resume = false;                       // an error when `out` holds no checkpoint...
  bool resume_if_present = false;            // ...unless this is set: then a fresh start
  bool allow_changes = false;                // resume although settings the run depends on changed
  double max_minutes = 0;                    // > 0: evaluate, save and stop after this much wall time
  int64_t bucket_window = 8;                 // loader: sort lines by width within this many batches (0: off)
  int64_t stop_at = 0;                       // > 0: save and stop once this step is done (as if interrupted)
  bool shuffle = true;
  OnBadSample on_bad_sample = OnBadSample::skip;  // a bad sample in the data: leave it out, or stop
  int64_t max_bad_steps = 20;                // non-finite steps in a row before giving up
  bool batch_norm = true;                    // false: CRNN without BatchNorm (--no-batch-norm)
  // A detector's training (train/det_trainer.h): crops of crop x crop pixels (a multiple of 32)
  // from pages scaled to 800-1600 pixels; val_pages validation pages at each evaluation.
  int64_t crop = 640;
  int64_t val_pages = 16;
  // --conv: fast lets CPU 3x3 layers run through Winograd (about 1e-5 relative rounding),
  // exact keeps im2col (ops/conv.h, ConvMode). Set for the whole process during the run.
  ConvMode conv = ConvMode::fast;
  // --precision (runtime/precision.h): the matrix products and convolutions, forward and
  // backward, in fp32; bf16 (operands rounded to bf16, float32 sums: on CPUs runtime/cpu/gemm.h,
  // on GPUs tensor cores); or tf32 (GPUs' tensor cores only). Weights, gradients, optimizer
  // state, the loss and every other op stay float32. Set for the whole process.
  Precision precision = Precision::fp32;

  // Data parallelism (docs/distributed.md). devices: one replica per device in this process,
  // each in its own thread (cuda:0,cuda:1 through NCCL; cpu,cpu through shared memory); empty
  // or one device: `device` alone. Under mpirun every process is one replica instead; then
  // device_from_local_rank picks cuda:<local rank mod GPUs> (--device cuda).
  std::vector<Device> devices;
  bool device_from_local_rank = false;
  double comm_timeout = 300;                 // seconds a collective may wait for the slowest rank
  // When gradient buckets are summed (--overlap): "on" during the backward pass, "off" after it,
  // "auto" during it on GPUs (NCCL runs on its own stream) and after it on CPUs (there MPI's
  // collectives need the same cores as backward: measured no faster, bench/results/distributed-cpu.md).
  Overlap overlap = Overlap::automatic;
  bool sync_batch_norm = false;              // BatchNorm statistics over the global batch (--sync-batch-norm)

  // Checks every field; throws naming the flag (--batch, --lr, ...) and what was expected.
  void validate() const;
  // The settings as JSON (checkpoints, metrics.jsonl's start event): every setting a resumed run
  // must keep (resume_changes) and the devices, not output paths or intervals.
  Json to_json() const;
};

// What `now` changes of the settings a checkpoint was saved with (`saved`: its to_json()), among
// those the run's trajectory depends on (data, model, batch, optimiser, schedule, seed, ...): one
// line per change, "--lr 0.001 -> 0.002". Settings that `saved` lacks (older checkpoints) are
// not compared. docs/cli.md ("Resuming") lists what may change freely.
std::vector<std::string> resume_changes(const Json& saved, const TrainConfig& now);

struct TrainResult {
  int64_t steps = 0;
  double samples_per_sec = 0;  // excluding the first two steps (warm-up, allocations)
  // Where a training step's wall time went, in ms per step over the same timed steps, by host
  // timers: waiting for the loader's batch, the batch's copy to the device (what the host waits
  // for of it), forward + loss (ends in a read of the loss, so the device's work is in it),
  // backward, the gradient sum over replicas after backward (with overlapped buckets, the wait
  // for the sums still running), clipping (reads the norm: the device's backward work ends
  // there), optimizer step + zero_grad (queued on a GPU: its device time lands in the next
  // forward). data_ms large against the rest: the data pipeline is the limit.
  double data_ms = 0, copy_ms = 0, forward_ms = 0, backward_ms = 0, sync_ms = 0, clip_ms = 0, optimizer_ms = 0;
  double peak_rss_mb = 0;
  double final_loss = 0;
  double best_cer = -1;
  std::string best_model;
  bool interrupted = false;    // stopped by SIGINT/SIGTERM after saving a checkpoint
  int rank = 0;                // this process's replica (MPI); 0 otherwise
  std::string cpu_path;        // the CPU kernels' instruction-set path (runtime/cpu_isa.h)
  std::string precision;       // fp32, tf32 or bf16
  Json to_json() const;
};

// Runs the whole training: one replica, several in threads (devices), or this process's replica
// of an MPI job (started by mpirun). Only replica 0 writes progress, metrics and checkpoints;
// every replica returns the same steps, losses and CERs. Progress goes to stderr (a bar on a terminal, log lines otherwise),
// events to OUT/metrics.jsonl, checkpoints to OUT/ckpt-*.safetensors, the best model (by val
// CER; the last one when there is no validation) to OUT/best.safetensors, the worst validation
// lines of the latest evaluation to OUT/worst/, and the report to OUT/report.html.
TrainResult run_training(const TrainConfig& cfg);

// For tests of failure handling only (ocrt-train's hidden --fault flag): "RANK:STEP:hang|exit|kill|
// throw" makes that replica hang, exit, kill itself or throw at the start of that step, in every
// run_training of this process from now on; "" turns it off. Throws on a malformed spec.
void set_fault_injection(const std::string& spec);

}  // namespace ocrt::train
