// The training loop (see trainer.h for the shape of a step and the resume guarantee).
#include "train/trainer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "models/recognizer.h"
#include "models/ctc_decode.h"
#include "models/edit_distance.h"
#include "models/layers.h"
#include "models/model_file.h"
#include "ops/conv.h"
#include "ops/cpu/gemm.h"
#include "ops/ctc.h"
#include "ops/elementwise.h"
#include "runtime/comm.h"
#include "runtime/cpu_isa.h"
#include "runtime/cuda/cuda_glue.h"
#include "runtime/mpi_comm.h"
#include "runtime/nccl_comm.h"
#include "runtime/threading.h"
#include "train/checkpoint.h"
#include "train/grad_sync.h"
#include "train/optim.h"
#include "train/schedule.h"

namespace fs = std::filesystem;

namespace ocrt::train {

namespace {

// ---- signals: SIGINT/SIGTERM ask the loop to stop after the current step (and save).
std::atomic<int> g_signal{0};
extern "C" void on_signal(int sig) { g_signal = sig; }

double peak_rss_mb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;  // Linux reports KiB
}

std::string join_devices(const std::vector<Device>& devices) {
  std::string s;
  for (const Device& d : devices) {
    if (!s.empty()) s += ',';
    s += d.str();
  }
  return s;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Appends one JSON object a line to OUT/metrics.jsonl.
class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path) : out_(path, std::ios::app) {
    OCRT_CHECK(out_.good(), "cannot write ", path);
  }
  void write(const Json& j) {
    out_ << j.dump() << '\n';
    out_.flush();
  }

 private:
  std::ofstream out_;
};

nn::Charset load_charset(const std::string& path) {
  return path.empty() ? nn::Charset::ascii() : nn::Charset::from_file(path);
}

std::vector<std::shared_ptr<Font>> fonts_or_default(const std::vector<std::string>& paths, const char* flag) {
  std::vector<std::string> p = paths.empty() ? default_font_dirs() : paths;
  OCRT_CHECK(!p.empty(), flag, ": no fonts given and none of Debian's font folders exist (install fonts-dejavu-core, "
             "fonts-liberation, fonts-freefont-ttf, fonts-urw-base35, or pass ", flag, " PATH)");
  std::vector<std::string> skipped;
  auto fonts = load_fonts(p, &skipped);
  for (const auto& s : skipped) std::fprintf(stderr, "note: %s: skipped %s\n", flag, s.c_str());
  return fonts;
}

// The architecture's frames for a width, for the data pipeline's CTC checks.
FrameRule frame_rule(const std::string& arch) {
  return [arch](int64_t width) { return nn::frames_for_width(arch, width); };
}

// A dataset from --train / --val sources: "synth", or label files and folders (checked).
// `text` holds the synthetic text source once made, so that training and validation lines
// share one reading of the word list and the prose.
std::shared_ptr<const Dataset> make_dataset(const std::vector<std::string>& sources, const TrainConfig& cfg,
                                            const nn::Charset& charset, bool is_val, bool verbose,
                                            std::shared_ptr<const TextSource>& text) {
  const char* flag = is_val ? "--val" : "--train";
  if (sources.size() == 1 && sources[0] == "synth") {
    if (!text)
      text = std::make_shared<const TextSource>(TextSource::read_words(cfg.words), charset,
                                                TextSource::read_prose(cfg.prose));
    auto fonts = fonts_or_default(is_val && !cfg.val_fonts.empty() ? cfg.val_fonts : cfg.fonts,
                                  is_val ? "--val-fonts" : "--fonts");
    SynthOptions o = cfg.synth;
    if (is_val) o.size = cfg.val_size;
    o.frames = frame_rule(cfg.arch);
    o.scan = cfg.scan != "none";
    o.scan_options = ScanOptions::preset(cfg.scan);
    if (verbose)
      std::fprintf(stderr, "%s: synthetic lines from %zu fonts, %zu words, %zu words of prose, scan '%s'\n", flag,
                   fonts.size(), text->num_words(), text->num_prose_words(), cfg.scan.c_str());
    return std::make_shared<SynthDataset>(fonts, text, charset, o);
  }
  for (const auto& s : sources)
    OCRT_CHECK(s != "synth", flag, ": 'synth' cannot be mixed with files (got ", sources.size(), " sources)");
  ValidationReport report = validate_samples(read_sources(sources), charset, 32, frame_rule(cfg.arch));
  if (verbose)
    std::fprintf(stderr, "%s: %lld samples, %lld usable\n", flag, (long long)report.total,
                 (long long)report.good.size());
  if (report.bad() > 0) {
    if (verbose) std::fprintf(stderr, "%s", report.summary().c_str());
    OCRT_CHECK(cfg.on_bad_sample != "fail", flag, ": ", report.bad(), " bad samples and --on-bad-sample fail");
  }
  OCRT_CHECK(!report.good.empty(), flag, ": no usable sample");
  return std::make_shared<FileDataset>(std::move(report.good));
}

std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& cfg, std::vector<Tensor> params) {
  if (cfg.optimizer == "sgd") {
    SGDOptions o;
    o.lr = cfg.lr;
    o.momentum = cfg.momentum;
    o.weight_decay = cfg.weight_decay;
    return std::make_unique<SGD>(std::move(params), o);
  }
  AdamOptions o;
  o.lr = cfg.lr;
  o.weight_decay = cfg.weight_decay;
  return std::make_unique<Adam>(std::move(params), o, cfg.optimizer == "adamw");
}

Schedule make_schedule(const TrainConfig& cfg) {
  Schedule s;
  s.kind = parse_schedule_kind(cfg.schedule);
  s.base_lr = cfg.lr;
  s.total_steps = cfg.steps;
  s.warmup_steps = std::min(cfg.warmup, cfg.steps - 1);  // a short run keeps at least one step past warm-up
  s.step_size = std::max<int64_t>(1, cfg.steps / 3);
  s.min_lr = cfg.lr * 0.01;
  s.validate();
  return s;
}

// The CTC loss of a batch on the model's device.
Tensor batch_loss(nn::Recognizer& model, const Batch& b, Device device) {
  Tensor logits = model.forward(b.images.to(device), b.widths);
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

struct EvalResult {
  double cer = 0, line_accuracy = 0;
  int64_t lines = 0;
  std::vector<std::pair<std::string, std::string>> examples;  // (label, prediction)
};

// Greedy-decodes every validation line (each exactly once) in eval mode. With several
// replicas each decodes its shard of every batch, and the counts are summed over replicas.
EvalResult evaluate(nn::Recognizer& model, const Dataset& data, const LoaderOptions& base, Device device,
                    const nn::Charset& charset, Communicator& comm) {
  LoaderOptions o = base;
  o.shuffle = false;
  o.augment = false;
  o.bucket_window = 0;
  Loader loader(std::shared_ptr<const Dataset>(&data, [](const Dataset*) {}), o);
  model.train(false);
  NoGradGuard no_grad;
  double edits = 0, chars = 0, exact = 0, seen = 0;
  EvalResult r;
  const int64_t total = data.size(), B = o.batch;
  const int64_t first = B * o.shard_index / o.shard_count;  // this shard's first line in a batch
  for (int64_t step = 0; step * B < total; ++step) {
    Batch b = loader.next();
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
    }
  }
  model.train(true);
  const std::vector<double> sums = comm.all_reduce_values({edits, chars, exact, seen}, ReduceOp::sum, device);
  r.lines = (int64_t)sums[3];
  r.cer = sums[1] > 0 ? sums[0] / sums[1] : 0;
  r.line_accuracy = sums[3] > 0 ? sums[2] / sums[3] : 0;
  return r;
}

void print_progress(bool tty, int64_t step, int64_t total, double loss, double lr, double sps, double eta_s) {
  if (tty) {
    const int width = 30;
    const int filled = total > 0 ? (int)(width * step / total) : 0;
    std::string bar(filled, '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r[%s] %lld/%lld loss %.4f lr %.2e %.0f samples/s ETA %.0fs   ", bar.c_str(),
                 (long long)step, (long long)total, loss, lr, sps, eta_s);
  } else {
    std::fprintf(stderr, "step %lld/%lld loss %.4f lr %.3e %.1f samples/s ETA %.0fs\n", (long long)step,
                 (long long)total, loss, lr, sps, eta_s);
  }
}

}  // namespace

void TrainConfig::validate() const {
  OCRT_CHECK(nn::is_known_arch(arch), "--arch: expected one of ", nn::known_archs_str(), ", got '", arch, "'");
  OCRT_CHECK(!train.empty(), "--train: give label files, folders of .gt.txt pairs, or 'synth'");
  OCRT_CHECK(overlap == "auto" || overlap == "on" || overlap == "off", "--overlap: expected auto, on or off, got '",
             overlap, "'");
  OCRT_CHECK(conv == "fast" || conv == "exact", "--conv: expected fast or exact, got '", conv, "'");
  OCRT_CHECK(precision == "fp32" || precision == "bf16", "--precision: expected fp32 or bf16, got '", precision, "'");
  if (precision == "bf16") {
    bool gpu = device.is_cuda() || device_from_local_rank;
    for (const Device& d : devices) gpu = gpu || d.is_cuda();
    OCRT_CHECK(!gpu, "--precision bf16 is for CPU training; GPU devices train in float32");
    OCRT_CHECK(cpu_isa() != CpuIsa::generic, "--precision bf16 needs a CPU with AVX2 and FMA at least ",
               "(this one runs the generic path)");
  }
  try {
    ScanOptions::preset(scan);
  } catch (const Error& e) {
    fail("--scan: ", e.what());
  }
  for (const auto& p : prose) OCRT_CHECK(std::filesystem::is_regular_file(p), "--prose: ", p, " is not a file");
  OCRT_CHECK(synth.min_pixel_height >= 4 && synth.min_pixel_height <= synth.max_pixel_height &&
                 synth.max_pixel_height <= 512,
             "--synth-height: need 4 <= LO <= HI <= 512, got ", synth.min_pixel_height, ":", synth.max_pixel_height);
  OCRT_CHECK(batch >= 1, "--batch: must be >= 1, got ", batch);
  OCRT_CHECK(steps >= 1, "--steps: must be >= 1, got ", steps);
  // 1e6 epochs is far beyond any real run and keeps epochs * samples / batch exact in an int64.
  OCRT_CHECK(std::isfinite(epochs) && epochs >= 0 && epochs <= 1e6, "--epochs: must be in (0, 1e6], got ", epochs);
  OCRT_CHECK(std::isfinite(lr) && lr > 0, "--lr: must be > 0, got ", lr);
  OCRT_CHECK(std::isfinite(momentum) && momentum >= 0 && momentum < 1, "--momentum: must be in [0, 1), got ",
             momentum);
  OCRT_CHECK(std::isfinite(weight_decay) && weight_decay >= 0, "--weight-decay: must be >= 0 and finite, got ",
             weight_decay);
  OCRT_CHECK(std::isfinite(clip_grad) && clip_grad >= 0, "--clip-grad: must be >= 0 (0: no clipping), got ",
             clip_grad);
  OCRT_CHECK(optimizer == "sgd" || optimizer == "adam" || optimizer == "adamw",
             "--optimizer: expected sgd, adam or adamw, got '", optimizer, "'");
  parse_schedule_kind(schedule);  // throws naming the accepted names
  OCRT_CHECK(workers >= 1 && workers <= 256, "--workers: must be in [1, 256], got ", workers);
  OCRT_CHECK(threads >= 0, "--threads: must be >= 0, got ", threads);
  OCRT_CHECK(save_every >= 1, "--save-every: must be >= 1, got ", save_every);
  OCRT_CHECK(eval_every >= 1, "--eval-every: must be >= 1, got ", eval_every);
  OCRT_CHECK(log_every >= 1, "--log-every: must be >= 1, got ", log_every);
  OCRT_CHECK(keep >= 1, "--keep: must be >= 1, got ", keep);
  OCRT_CHECK(stop_at >= 0, "--stop-at: must be >= 0, got ", stop_at);
  OCRT_CHECK(std::isfinite(max_minutes) && max_minutes >= 0, "--max-minutes: must be >= 0, got ", max_minutes);
  OCRT_CHECK(bucket_window >= 0, "--bucket-window: must be >= 0, got ", bucket_window);
  OCRT_CHECK(max_bad_steps >= 1, "--max-bad-steps: must be >= 1, got ", max_bad_steps);
  OCRT_CHECK(val_size >= 1, "--val-size: must be >= 1, got ", val_size);
  OCRT_CHECK(warmup >= 0, "--warmup: must be >= 0, got ", warmup);
  OCRT_CHECK(on_bad_sample == "skip" || on_bad_sample == "fail", "--on-bad-sample: expected skip or fail, got '",
             on_bad_sample, "'");
  OCRT_CHECK(!out.empty(), "--out: give a folder for checkpoints and logs");
  OCRT_CHECK(synth.min_chars >= 1 && synth.max_chars >= synth.min_chars, "--synth-chars: need 1 <= min <= max, got ",
             synth.min_chars, ":", synth.max_chars);
  if (!init.empty()) OCRT_CHECK(fs::exists(init), "--init: ", init, " does not exist");
  OCRT_CHECK(std::isfinite(comm_timeout) && comm_timeout > 0, "--comm-timeout: must be > 0 seconds, got ", comm_timeout);
  if (!fault.empty()) {
    const size_t a = fault.find(':'), b = a == std::string::npos ? a : fault.find(':', a + 1);
    const std::string what = b == std::string::npos ? "" : fault.substr(b + 1);
    OCRT_CHECK(b != std::string::npos && (what == "hang" || what == "exit" || what == "kill" || what == "throw"),
               "--fault: expected RANK:STEP:hang|exit|kill|throw, got '", fault, "'");
  }
  if (!device_from_local_rank) ocrt::validate(device);
  for (size_t i = 0; i < devices.size(); ++i) {
    ocrt::validate(devices[i]);
    OCRT_CHECK(devices[i].kind == devices[0].kind, "--devices: all cpu or all cuda; ", devices[0].str(), " and ",
               devices[i].str(), " cannot train together (their speeds differ too much for synchronous steps)");
    for (size_t j = 0; j < i; ++j)
      OCRT_CHECK(!(devices[i].is_cuda() && devices[i] == devices[j]), "--devices: ", devices[i].str(),
                 " is listed twice (one replica per GPU)");
  }
  OCRT_CHECK(devices.size() <= 1 || batch >= (int64_t)devices.size(), "--batch ", batch, " is smaller than the ",
             devices.size(), " replicas of --devices");
}

Json TrainConfig::to_json() const {
  Json j = Json::object();
  auto list = [](const std::vector<std::string>& v) {
    Json a = Json::array();
    for (const auto& s : v) a.push_back(s);
    return a;
  };
  j.set("arch", arch);
  j.set("train", list(train));
  j.set("val", list(val));
  j.set("charset", charset_path);
  j.set("fonts", list(fonts));
  j.set("val_fonts", list(val_fonts));
  j.set("device", device.str());
  j.set("batch", batch);
  j.set("steps", steps);
  j.set("lr", lr);
  j.set("optimizer", optimizer);
  j.set("weight_decay", weight_decay);
  j.set("schedule", schedule);
  j.set("warmup", warmup);
  j.set("clip_grad", clip_grad);
  j.set("seed", std::to_string(seed));
  j.set("augment", augment);
  if (scan != "none") j.set("scan", scan);
  if (!prose.empty()) {
    Json files = Json::array();
    for (const auto& p : prose) files.push_back(p);
    j.set("prose", files);
  }
  j.set("init", init);
  if (!batch_norm) j.set("batch_norm", false);
  if (overlap != "auto") j.set("overlap", overlap);
  if (conv != "fast") j.set("conv", conv);
  if (sync_batch_norm) j.set("sync_batch_norm", true);
  if (!devices.empty()) j.set("devices", join_devices(devices));
  return j;
}

Json TrainResult::to_json() const {
  Json j = Json::object();
  j.set("steps", steps);
  j.set("samples_per_sec", samples_per_sec);
  j.set("peak_rss_mb", peak_rss_mb);
  j.set("final_train_loss", final_loss);
  j.set("best_val_cer", best_cer);
  Json phases = Json::object();
  phases.set("data", data_ms);
  phases.set("forward", forward_ms);
  phases.set("backward", backward_ms);
  phases.set("clip", clip_ms);
  phases.set("optimizer", optimizer_ms);
  j.set("ms_per_step", phases);
  j.set("best_model", best_model);
  j.set("interrupted", interrupted);
  j.set("cpu_path", cpu_path);
  j.set("precision", precision);
  return j;
}

namespace {

// Test hook (TrainConfig::fault): this replica hangs, exits, kills itself or throws at `step`.
void maybe_inject_fault(const std::string& fault, int rank, int64_t step) {
  if (fault.empty()) return;
  const size_t a = fault.find(':'), b = fault.find(':', a + 1);
  if (std::stoi(fault.substr(0, a)) != rank || std::stoll(fault.substr(a + 1, b - a - 1)) != step) return;
  const std::string what = fault.substr(b + 1);
  std::fprintf(stderr, "rank %d: injected fault '%s' at step %lld\n", rank, what.c_str(), (long long)step);
  if (what == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (what == "exit") std::_Exit(7);
  if (what == "kill") std::raise(SIGKILL);
  fail("rank ", rank, ": injected fault at step ", step);
}

// One replica's whole run: for a single replica `comm` is the no-op communicator, and every
// collective below does nothing.
TrainResult run_replica(const TrainConfig& cfg, Communicator& comm, Device device) {
  const int rank = comm.rank(), replicas = comm.size();
  const bool lead = rank == 0;  // writes progress, metrics and checkpoints
  fs::create_directories(cfg.out);
  const nn::Charset charset = load_charset(cfg.charset_path);
  OCRT_CHECK(cfg.batch >= replicas, "--batch ", cfg.batch, " is smaller than the number of replicas (", replicas,
             "): every replica needs at least one line of each batch");

  // Data first: a bad sample or a missing font fails here, before any model is built.
  std::shared_ptr<const TextSource> text;
  auto train_data = make_dataset(cfg.train, cfg, charset, false, lead, text);
  int64_t steps = cfg.steps;
  if (cfg.epochs > 0) {
    const double want = std::ceil(cfg.epochs * (double)train_data->size() / (double)cfg.batch);
    OCRT_CHECK(want <= 1e12, "--epochs ", cfg.epochs, ": ", want, " steps of ", cfg.batch, " samples is too many");
    steps = std::max<int64_t>(1, (int64_t)want);
    if (lead)
      std::fprintf(stderr, "--epochs %g: %lld steps of %lld samples\n", cfg.epochs, (long long)steps,
                   (long long)cfg.batch);
  }
  std::shared_ptr<const Dataset> val_data;
  if (!cfg.val.empty()) val_data = make_dataset(cfg.val, cfg, charset, true, lead, text);

  // What to start from: the newest checkpoint (--resume), else the --init weights, else the seed.
  std::optional<Checkpoint> resume_from;
  if (cfg.resume || cfg.resume_if_present) {
    auto all = list_checkpoints(cfg.out);
    // A mistyped or empty --out must not silently become a run from step 0.
    OCRT_CHECK(!all.empty() || cfg.resume_if_present, "--resume: no checkpoint (ckpt-*.safetensors) in '", cfg.out,
               "'; start without --resume, or give --resume-if-present to start afresh when there is none");
    if (!all.empty()) resume_from = load_checkpoint(all.back());
  }
  std::optional<nn::ModelFile> init_file;
  if (!resume_from && !cfg.init.empty()) init_file = nn::load_model_file(cfg.init);

  // The architecture config: the checkpoint's or the --init file's when they carry one (a model
  // of any config of the arch can be resumed or fine-tuned), else the arch's preset.
  Json conf;
  if (resume_from) {
    OCRT_CHECK(resume_from->info.arch == cfg.arch, "--resume: ", resume_from->path, " is a ", resume_from->info.arch,
               " checkpoint, but --arch is ", cfg.arch);
    conf = resume_from->info.config;
  } else if (init_file && init_file->info) {
    OCRT_CHECK(init_file->info->arch == cfg.arch, "--init: ", cfg.init, " holds a ", init_file->info->arch,
               " model, but --arch is ", cfg.arch);
    conf = init_file->info->config;
  } else {
    Generator scratch(0);
    conf = nn::make_recognizer(cfg.arch, charset.num_classes(), scratch)->config_json();
  }
  if (!cfg.batch_norm) {
    OCRT_CHECK(cfg.arch == "crnn" || cfg.arch == "crnn-s", "--no-batch-norm: only crnn and crnn-s have the option");
    conf.set("batch_norm", false);
  }
  // The model, on the CPU, initialised from the seed; then the checkpoint or --init; then moved.
  Generator gen(cfg.seed);
  std::shared_ptr<nn::Recognizer> model = nn::make_recognizer(cfg.arch, conf, gen);
  OCRT_CHECK(model->num_classes() == charset.num_classes(), "the model has ", model->num_classes(),
             " classes but the charset ", charset.size(), " characters (expected characters + 1)");
  nn::ModelInfo info;
  info.arch = cfg.arch;
  info.config = model->config_json();
  info.charset = charset.chars();
  info.input = nn::default_input_spec();

  TrainState state;
  state.seed = cfg.seed;
  state.settings = cfg.to_json();
  if (resume_from) {
    OCRT_CHECK(resume_from->info.arch == cfg.arch, "--resume: ", resume_from->path, " is a ", resume_from->info.arch,
               " checkpoint, but --arch is ", cfg.arch);
    OCRT_CHECK(resume_from->info.charset == charset.chars(), "--resume: ", resume_from->path,
               " was trained with another charset");
    OCRT_CHECK(resume_from->state.seed == cfg.seed, "--resume: ", resume_from->path, " was made with --seed ",
               resume_from->state.seed, "; resume with the same seed (the data order depends on it)");
    model->load_state_dict(resume_from->model);
    state = resume_from->state;
    state.settings = cfg.to_json();
    if (lead) std::fprintf(stderr, "resuming from %s at step %lld\n", resume_from->path.c_str(), (long long)state.step);
  } else if (init_file) {
    if (init_file->info)
      OCRT_CHECK(init_file->info->charset == charset.chars(), "--init: ", cfg.init, " was trained with another charset");
    model->load_state_dict(init_file->weights);
  }
  model->to(device);
  model->train(true);
  if (replicas > 1) {
    // Every replica must start from the same step (a resume reads --out, which must then be a
    // folder every replica sees) and from rank 0's weights and buffers.
    const double step = (double)state.step;
    const auto hi = comm.all_reduce_values({step, -step}, ReduceOp::max, device);
    OCRT_CHECK(hi[0] == -hi[1], "rank ", rank, ": the replicas would start at different steps (", -hi[1], " to ",
               hi[0], "): with --resume, every replica must see the same checkpoints in ", cfg.out,
               " (a shared folder across machines)");
    std::vector<Tensor> all;
    for (auto& [name, t] : model->named_parameters()) all.push_back(t);
    for (auto& [name, t] : model->named_buffers()) all.push_back(t);
    broadcast_tensors(comm, all, 0);
  }

  auto optim = make_optimizer(cfg, model->parameters());
  if (resume_from && !resume_from->optim.empty()) optim->load_state_dict(resume_from->optim);
  TrainConfig sched_cfg = cfg;
  sched_cfg.steps = steps;
  const Schedule schedule = make_schedule(sched_cfg);
  GradSync grad_sync(optim->params());
  const bool overlap = cfg.overlap == "on" || (cfg.overlap == "auto" && comm.kind() == "nccl");
  // --sync-batch-norm: BatchNorm layers of this replica's training steps normalise with the
  // whole global batch's statistics (validation runs in eval mode, with the running ones).
  std::optional<nn::SyncBatchNormScope> sync_bn;
  if (cfg.sync_batch_norm && replicas > 1) sync_bn.emplace(comm);

  LoaderOptions lo;
  lo.batch = cfg.batch;
  lo.workers = cfg.workers;
  lo.prefetch = std::max(4, 2 * cfg.workers);
  lo.seed = cfg.seed;
  lo.shuffle = cfg.shuffle;
  lo.augment = cfg.augment;
  lo.bucket_window = cfg.bucket_window;
  lo.frames = frame_rule(cfg.arch);
  lo.shard_index = rank;
  lo.shard_count = replicas;
  Loader loader(train_data, lo, state.step);
  LoaderOptions val_lo = lo;
  val_lo.seed = cfg.seed ^ 0x5eed0fa1u;  // validation lines differ from training lines

  std::optional<MetricsLog> metrics;
  if (lead) metrics.emplace((fs::path(cfg.out) / "metrics.jsonl").string());
  auto log_event = [&](const Json& j) {
    if (metrics) metrics->write(j);
  };
  const std::string best_path = (fs::path(cfg.out) / "best.safetensors").string();
  const bool tty = lead && isatty(2);

  auto save = [&](const char* why) {
    if (!lead) return;
    save_checkpoint(checkpoint_path(cfg.out, state.step), *model, *optim, state, info);
    prune_checkpoints(cfg.out, cfg.keep);
    Json j = Json::object();
    j.set("event", "checkpoint");
    j.set("step", state.step);
    j.set("why", why);
    log_event(j);
  };
  auto save_best = [&](double cer) {
    if (!lead) return;
    nn::ModelInfo i = info;
    i.training = Json::object();
    i.training.set("data", state.settings.at("train"));
    i.training.set("steps", state.step);
    i.training.set("val_cer", cer);
    i.training.set("device", device.str());
    if (replicas > 1) i.training.set("replicas", replicas);
    nn::save_model_file(best_path, *model, i);
  };

  TrainResult result;
  int64_t bad_in_row = 0, timed_samples = 0, timed_steps = 0;
  double phase_total[5] = {};  // data, forward, backward, clip, optimizer: seconds over the timed steps
  double t_start = 0, last_loss = 0, loss_avg = 0;
  const int64_t first_step = state.step;
  const double run_start = now_seconds();
  bool out_of_time = false;
  while (state.step < steps) {
    maybe_inject_fault(cfg.fault, rank, state.step);
    double t_phase = now_seconds();
    double phase[5] = {};  // data, forward, backward, clip, optimizer (seconds, this step)
    auto lap = [&](int k) {
      const double t = now_seconds();
      phase[k] += t - t_phase;
      t_phase = t;
    };
    Batch b = loader.next();
    lap(0);
    OCRT_CHECK(b.step == state.step, "loader returned batch ", b.step, " for step ", state.step);
    // This replica's share of the batch's mean loss: summed over replicas, the gradients are
    // those of the whole batch's mean.
    const double share = (double)b.widths.size() / (double)cfg.batch;
    Tensor loss = batch_loss(*model, b, device);
    if (replicas > 1) loss = loss * share;
    double loss_v = loss.item();
    // Skipping a step must be decided by all replicas together: the sum is non-finite as soon
    // as one replica's loss is.
    if (replicas > 1) loss_v = comm.all_reduce_values({loss_v}, ReduceOp::sum, device)[0];
    lap(1);
    bool ok = std::isfinite(loss_v);
    if (ok) {
      // Every replica then holds the whole batch's gradient. Overlapped (on GPUs): each
      // bucket's sum starts as soon as backward has finished its gradients.
      if (overlap) grad_sync.begin(comm);
      loss.backward();
      if (overlap) grad_sync.finish();
      else grad_sync.all_reduce(comm);
      lap(2);
      const double norm = cfg.clip_grad > 0 ? clip_grad_norm(optim->params(), cfg.clip_grad)
                                            : grad_norm(optim->params());
      ok = std::isfinite(norm);
      lap(3);
    }
    if (ok) {
      optim->set_lr(schedule.lr_at(state.step));
      optim->step();
      bad_in_row = 0;
      last_loss = loss_v;
      loss_avg = state.step == first_step ? loss_v : 0.95 * loss_avg + 0.05 * loss_v;
    } else {
      state.skipped_steps++;
      bad_in_row++;
      if (lead)
        std::fprintf(stderr, "\nwarning: step %lld: non-finite loss or gradient (loss %g); step skipped\n",
                     (long long)state.step, loss_v);
      OCRT_CHECK(bad_in_row < cfg.max_bad_steps, "stopping: ", bad_in_row,
                 " steps in a row had a non-finite loss or gradient; the last good checkpoint is in ", cfg.out);
    }
    optim->zero_grad();
    lap(4);
    state.step++;

    // Throughput: from the end of the second step of this run on (warm-up excluded).
    if (state.step - first_step == 2) t_start = now_seconds();
    if (state.step - first_step > 2) {
      timed_samples += cfg.batch;
      timed_steps++;
      for (int k = 0; k < 5; ++k) phase_total[k] += phase[k];
    }
    const double elapsed = t_start > 0 ? now_seconds() - t_start : 0;
    const double sps = elapsed > 0 ? timed_samples / elapsed : 0;

    if (state.step % cfg.log_every == 0 || state.step == steps) {
      const double eta = sps > 0 ? (steps - state.step) * cfg.batch / sps : 0;
      if (lead) print_progress(tty, state.step, steps, loss_avg, optim->lr(), sps, eta);
      Json j = Json::object();
      j.set("event", "train");
      j.set("step", state.step);
      j.set("loss", loss_avg);
      j.set("lr", optim->lr());
      j.set("samples_per_sec", sps);
      j.set("skipped_steps", state.skipped_steps);
      log_event(j);
    }
    // Stopping early is decided together too: a signal or the clock may reach the replicas
    // at different steps, and one replica leaving alone would leave the others waiting.
    out_of_time = cfg.max_minutes > 0 && now_seconds() - run_start > cfg.max_minutes * 60;
    bool signalled = g_signal != 0;
    if (replicas > 1) {
      const auto any = comm.all_reduce_values({out_of_time ? 1.0 : 0.0, signalled ? 1.0 : 0.0}, ReduceOp::max, device);
      out_of_time = any[0] > 0;
      signalled = any[1] > 0;
    }
    if (val_data && (state.step % cfg.eval_every == 0 || state.step == steps || out_of_time)) {
      EvalResult r = evaluate(*model, *val_data, val_lo, device, charset, comm);
      if (lead) {
        if (tty) std::fprintf(stderr, "\n");
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
      log_event(j);
      if (state.best_cer < 0 || r.cer < state.best_cer) {
        state.best_cer = r.cer;
        state.best_step = state.step;
        save_best(r.cer);
      }
    }
    if (state.step % cfg.save_every == 0 || state.step == steps) save("schedule");
    if (out_of_time && state.step < steps) {
      if (lead)
        std::fprintf(stderr, "\n--max-minutes %g reached at step %lld: saved, stopping\n", cfg.max_minutes,
                     (long long)state.step);
      if (state.step % cfg.save_every != 0) save("max_minutes");
      break;
    }
    if (cfg.stop_at > 0 && state.step >= cfg.stop_at && state.step < steps) {
      if (state.step % cfg.save_every != 0) save("stop_at");
      break;
    }
    if (signalled) {
      if (lead)
        std::fprintf(stderr, "\nsignal %d: saving a checkpoint at step %lld and stopping\n", (int)g_signal,
                     (long long)state.step);
      if (state.step % cfg.save_every != 0 && state.step != steps) save("signal");
      result.interrupted = true;
      break;
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  if (!val_data && !result.interrupted) save_best(-1);
  comm.barrier();  // the files rank 0 writes are complete before any replica reports them

  result.steps = state.step;
  result.rank = rank;
  const double elapsed = t_start > 0 ? now_seconds() - t_start : 0;
  result.samples_per_sec = elapsed > 0 ? timed_samples / elapsed : 0;
  if (timed_steps > 0) {
    double* ms[5] = {&result.data_ms, &result.forward_ms, &result.backward_ms, &result.clip_ms, &result.optimizer_ms};
    for (int k = 0; k < 5; ++k) *ms[k] = 1000 * phase_total[k] / (double)timed_steps;
  }
  result.peak_rss_mb = peak_rss_mb();
  result.cpu_path = cpu_isa_name(cpu_isa());
  result.precision = cfg.precision;
  result.final_loss = last_loss;
  result.best_cer = state.best_cer;
  result.best_model = fs::exists(best_path) ? best_path : "";
  Json j = result.to_json();
  j.set("event", "summary");
  if (replicas > 1) j.set("replicas", replicas);
  log_event(j);
  return result;
}

// Several replicas in this process, one thread each: NCCL between GPUs, shared memory between
// CPU replicas. The first failure aborts the communicators so that no thread waits forever.
TrainResult run_threads(const TrainConfig& cfg) {
  const auto& devices = cfg.devices;
  const int n = (int)devices.size();
  std::vector<std::unique_ptr<Communicator>> comms;
  if (devices[0].is_cuda()) {
    std::vector<int> gpus;
    for (const Device& d : devices) gpus.push_back(d.index);
    std::fprintf(stderr, "data parallel: %d replicas on %s, NCCL %s\n", n, join_devices(devices).c_str(),
                 nccl_version().c_str());
    comms = make_nccl_communicators(gpus, cfg.comm_timeout);
  } else {
    std::fprintf(stderr, "data parallel: %d CPU replicas in threads\n", n);
    comms = make_thread_communicators(n, cfg.comm_timeout);
  }
  const int threads = cfg.threads > 0 ? cfg.threads : default_num_threads();
  std::vector<TrainResult> results((size_t)n);
  std::mutex error_mu;
  int first_failed = -1;  // the replica that failed first: the cause (the others fail after it)
  std::string first_error;
  std::vector<std::thread> pool;
  for (int r = 0; r < n; ++r) {
    pool.emplace_back([&, r] {
      try {
        if (devices[(size_t)r].is_cpu()) set_num_threads(std::max(1, threads / n));
        results[(size_t)r] = run_replica(cfg, *comms[(size_t)r], devices[(size_t)r]);
      } catch (const std::exception& e) {
        {
          std::lock_guard<std::mutex> lock(error_mu);
          if (first_failed < 0) first_failed = r, first_error = e.what();
        }
        comms[(size_t)r]->abort();
      }
    });
  }
  for (auto& t : pool) t.join();
  if (first_failed >= 0)
    fail("replica ", first_failed, " (", devices[(size_t)first_failed].str(), ") failed: ", first_error);
  return results[0];
}

// This process's replica of an MPI job. Errors end the whole job at once (MPI_Abort), naming
// the rank, rather than leaving the other ranks to time out.
TrainResult run_mpi(const TrainConfig& config) {
  MpiSession mpi;
  TrainConfig cfg = config;
  Device device = cfg.device;
  if (cfg.device_from_local_rank) {
    const int gpus = cuda_device_count();
    OCRT_CHECK(gpus > 0, "rank ", mpi.rank(), " on ", mpi.host(), ": --device cuda, but no GPU is visible",
               cuda_status_note());
    device = Device::cuda(mpi.local_rank() % gpus);
  }
  try {
    OCRT_CHECK(cfg.devices.size() <= 1, "under mpirun every process is one replica: use --device, not --devices");
    std::unique_ptr<Communicator> comm;
    if (device.is_cuda() && nccl_built()) {
      const std::string id = mpi.broadcast_bytes(mpi.rank() == 0 ? nccl_unique_id() : std::string(), 0);
      comm = make_nccl_communicator(device.index, mpi.rank(), mpi.size(), id, cfg.comm_timeout);
    } else {
      comm = make_mpi_communicator(mpi, cfg.comm_timeout);
    }
    if (mpi.rank() == 0)
      std::fprintf(stderr, "data parallel: %d MPI ranks, gradients through %s\n", mpi.size(), comm->kind().c_str());
    std::fprintf(stderr, "rank %d of %d on %s: %s\n", mpi.rank(), mpi.size(), mpi.host().c_str(),
                 device.str().c_str());
    TrainResult r = run_replica(cfg, *comm, device);
    return r;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt-train: rank %d (of %d, on %s, %s) failed: %s; aborting the job\n", mpi.rank(),
                 mpi.size(), mpi.host().c_str(), device.str().c_str(), e.what());
    mpi.abort_job(1);
  }
}

}  // namespace

TrainResult run_training(const TrainConfig& config) {
  config.validate();
  TrainConfig cfg = config;
  if (cfg.threads > 0) set_num_threads(cfg.threads);
  const ConvModeScope conv_mode(parse_conv_mode(cfg.conv));
  const cpu::MatmulPrecisionScope precision(cpu::parse_matmul_precision(cfg.precision));
  if (cfg.devices.size() == 1) cfg.device = cfg.devices[0];
  auto prev_int = std::signal(SIGINT, on_signal);
  auto prev_term = std::signal(SIGTERM, on_signal);
  g_signal = 0;
  struct RestoreSignals {
    void (*i)(int), (*t)(int);
    ~RestoreSignals() {
      std::signal(SIGINT, i);
      std::signal(SIGTERM, t);
    }
  } restore{prev_int, prev_term};
  if (mpi_launched()) return run_mpi(cfg);
  if (cfg.devices.size() > 1) return run_threads(cfg);
  auto single = make_single_communicator();
  return run_replica(cfg, *single, cfg.device);
}

}  // namespace ocrt::train
