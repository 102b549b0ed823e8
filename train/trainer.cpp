// The training loop (see trainer.h for the shape of a step and the resume guarantee).
#include "train/trainer.h"

#include <unistd.h>

#include <algorithm>
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

#include "models/dbnet.h"
#include "models/recognizer.h"
#include "models/layers.h"
#include "models/model_file.h"
#include "ops/conv.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cli.h"
#include "runtime/comm.h"
#include "runtime/cpu_isa.h"
#include "runtime/cuda/cuda_glue.h"
#include "runtime/mpi_comm.h"
#include "runtime/interrupt.h"
#include "runtime/nccl_comm.h"
#include "runtime/threading.h"
#include "train/checkpoint.h"
#include "train/det_trainer.h"
#include "train/grad_sync.h"
#include "train/line_cache.h"
#include "train/optim.h"
#include "train/schedule.h"
#include "train/train_loop.h"

namespace fs = std::filesystem;

namespace ocrt::train {

namespace {

std::string join_devices(const std::vector<Device>& devices) {
  std::string s;
  for (const Device& d : devices) {
    if (!s.empty()) s += ',';
    s += d.str();
  }
  return s;
}


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

// A file named by its base name and size: what a render cache's lines depend on, whichever
// folder the file is found in on this machine.
std::string file_key(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return fs::path(path).filename().string() + ":" + (ec ? std::string("?") : std::to_string(size));
}

// The render cache of the synthetic training lines: --synth-epoch lines, drawn from a fixed
// seed (not --seed: one cache serves runs of any seed, which order and augment it their own
// way), and the settings the lines depend on.
LineCacheSpec render_cache_spec(const TrainConfig& cfg, const std::vector<std::shared_ptr<Font>>& fonts,
                                const nn::Charset& charset) {
  LineCacheSpec spec;
  spec.lines = cfg.synth.size;
  spec.height = 32;
  spec.seed = 0x0C2A7E5EEDull;
  const Json all = cfg.to_json();
  Json& s = spec.settings;
  Json font_keys = Json::array();
  for (const auto& f : fonts) font_keys.push_back(file_key(f->path()));
  s.set("fonts", font_keys);
  s.set("words", cfg.words.empty() || cfg.words == "none" ? cfg.words : file_key(cfg.words));
  Json prose = Json::array();
  for (const auto& p : cfg.prose) prose.push_back(file_key(p));
  s.set("prose", prose);
  for (const char* key : {"scan", "synth_chars", "synth_height", "synth_spacing", "synth_tracking", "synth_small_caps"})
    s.set(key, all.at(key));
  std::string chars;
  for (const auto& c : charset.chars()) chars += c;
  s.set("charset", chars);
  s.set("arch", cfg.arch);  // its frames for a width decide which lines CTC can align
  return spec;
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
    auto synth = std::make_shared<SynthDataset>(fonts, text, charset, o);
    if (is_val || cfg.render_cache.empty()) return synth;
    const LineCacheSpec spec = render_cache_spec(cfg, fonts, charset);
    const int threads = cfg.threads > 0 ? cfg.threads : (int)std::max(1u, std::thread::hardware_concurrency());
    build_line_cache(cfg.render_cache, *synth, spec, threads, verbose);
    auto cached = std::make_shared<CachedLineDataset>(cfg.render_cache, spec, charset);
    if (verbose)
      std::fprintf(stderr, "%s: %lld lines from the render cache %s (%.1f MB), fresh augmentation each epoch\n", flag,
                   (long long)cached->size(), cfg.render_cache.c_str(), (double)cached->bytes() / 1e6);
    return cached;
  }
  for (const auto& s : sources)
    OCRT_CHECK(s != "synth", flag, ": 'synth' cannot be mixed with files (got ", sources.size(), " sources)");
  std::vector<Sample> samples;
  for (const auto& s : sources) {
    std::vector<Sample> part = read_source(s);
    if (part.empty() && verbose)
      std::fprintf(stderr, "note: %s %s: no samples in it (%s)\n", flag, s.c_str(),
                   std::filesystem::is_directory(s) ? "a folder needs name.png + name.gt.txt pairs, in it or below"
                                                    : "a label file holds path<TAB>text lines");
    samples.insert(samples.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  ValidationReport report = validate_samples(samples, charset, 32, frame_rule(cfg.arch));
  if (verbose)
    std::fprintf(stderr, "%s: %lld samples, %lld usable\n", flag, (long long)report.total,
                 (long long)report.good.size());
  if (report.bad() > 0) {
    if (verbose) std::fprintf(stderr, "%s", report.summary().c_str());
    OCRT_CHECK(cfg.on_bad_sample != OnBadSample::fail, flag, ": ", report.bad(), " bad samples and --on-bad-sample fail");
  }
  OCRT_CHECK(!report.good.empty(), flag, ": no usable sample");
  return std::make_shared<FileDataset>(std::move(report.good));
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

std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& cfg, std::vector<Tensor> params) {
  if (cfg.optimizer == OptimizerKind::sgd) {
    SGDOptions o;
    o.lr = cfg.lr;
    o.momentum = cfg.momentum;
    o.weight_decay = cfg.weight_decay;
    return std::make_unique<SGD>(std::move(params), o);
  }
  AdamOptions o;
  o.lr = cfg.lr;
  o.weight_decay = cfg.weight_decay;
  return std::make_unique<Adam>(std::move(params), o, cfg.optimizer == OptimizerKind::adamw);
}

Schedule make_schedule(const TrainConfig& cfg) {
  Schedule s;
  s.kind = cfg.schedule;
  s.base_lr = cfg.lr;
  s.total_steps = cfg.steps;
  s.warmup_steps = std::min(cfg.warmup, cfg.steps - 1);  // a short run keeps at least one step past warm-up
  s.step_size = std::max<int64_t>(1, cfg.steps / 3);
  s.min_lr = cfg.lr * 0.01;
  s.validate();
  return s;
}

void TrainConfig::validate() const {
  OCRT_CHECK(nn::is_known_arch(arch) || nn::is_detector_arch(arch), "--arch: expected one of ", nn::known_archs_str(),
             " or the detector dbnet, got '", arch, "'");
  OCRT_CHECK(crop >= 64 && crop <= 4096 && crop % 32 == 0, "--crop: must be a multiple of 32 in [64, 4096], got ", crop);
  OCRT_CHECK(val_pages >= 1 && val_pages <= 100000, "--val-pages: must be in [1, 100000], got ", val_pages);
  OCRT_CHECK(!train.empty(), "--train: give label files, folders of .gt.txt pairs, or 'synth'");
  if (precision != Precision::fp32) {
    bool gpu = device.is_cuda() || device_from_local_rank, cpu = !gpu && devices.empty();
    for (const Device& d : devices) gpu = gpu || d.is_cuda(), cpu = cpu || d.is_cpu();
    OCRT_CHECK(precision != Precision::tf32 || !cpu, "--precision tf32 is a GPU tensor-core format; CPUs train ",
               "in fp32 or bf16");
    // PrecisionScope sets the CPU's bf16 as well (evaluation and checks may run there).
    OCRT_CHECK(precision != Precision::bf16 || cpu_isa() != CpuIsa::generic, "--precision bf16 needs a CPU with ",
               "AVX2 and FMA at least (this one runs the generic path)");
  }
  try {
    ScanOptions::preset(scan);
  } catch (const Error& e) {
    fail("--scan: ", e.what());
  }
  for (const auto& p : prose) OCRT_CHECK(std::filesystem::is_regular_file(p), "--prose: ", p, " is not a file");
  OCRT_CHECK(render_cache.empty() || (train.size() == 1 && train[0] == "synth" && !nn::is_detector_arch(arch)),
             "--render-cache: only for a recogniser trained on synthetic lines (--train synth)");
  OCRT_CHECK(synth.min_pixel_height >= 4 && synth.min_pixel_height <= synth.max_pixel_height &&
                 synth.max_pixel_height <= 512,
             "--synth-height: need 4 <= LO <= HI <= 512, got ", synth.min_pixel_height, ":", synth.max_pixel_height);
  OCRT_CHECK(synth.min_word_spacing >= 0 && synth.min_word_spacing <= synth.max_word_spacing &&
                 synth.max_word_spacing <= 4,
             "--synth-spacing: need 0 <= LO <= HI <= 4, got ", synth.min_word_spacing, ":", synth.max_word_spacing);
  OCRT_CHECK(synth.small_caps >= 0 && synth.small_caps <= 1, "--synth-small-caps: need a share in [0, 1], got ",
             synth.small_caps);
  OCRT_CHECK(synth.min_tracking >= -0.5 && synth.min_tracking <= synth.max_tracking && synth.max_tracking <= 0.5,
             "--synth-tracking: need -0.5 <= LO <= HI <= 0.5, got ", synth.min_tracking, ":", synth.max_tracking);
  // The same ranges as ocrt-train's flags (ocrt_train.cpp), for callers that fill a TrainConfig
  // themselves. 1e6 epochs is far beyond any real run and keeps epochs * samples / batch exact.
  auto in = [](auto x, auto lo, auto hi) { return x >= lo && x <= hi; };
  OCRT_CHECK(in(batch, 1, kMaxBatch), "--batch: must be in [1, ", kMaxBatch, "], got ", batch);
  OCRT_CHECK(in(steps, 1, kMaxSteps), "--steps: must be in [1, ", kMaxSteps, "], got ", steps);
  OCRT_CHECK(std::isfinite(epochs) && epochs >= 0 && epochs <= kMaxEpochs, "--epochs: must be in (0, 1e6], got ",
             epochs);
  OCRT_CHECK(std::isfinite(lr) && lr > 0, "--lr: must be > 0, got ", lr);
  OCRT_CHECK(std::isfinite(momentum) && momentum >= 0 && momentum < 1, "--momentum: must be in [0, 1), got ",
             momentum);
  OCRT_CHECK(std::isfinite(weight_decay) && weight_decay >= 0, "--weight-decay: must be >= 0 and finite, got ",
             weight_decay);
  OCRT_CHECK(std::isfinite(clip_grad) && clip_grad >= 0, "--clip-grad: must be >= 0 (0: no clipping), got ",
             clip_grad);
  OCRT_CHECK(in(workers, 1, 256), "--workers: must be in [1, 256], got ", workers);
  OCRT_CHECK(in(threads, 0, kMaxThreads), "--threads: must be in [0, ", kMaxThreads, "], got ", threads);
  OCRT_CHECK(in(save_every, 1, kMaxSteps), "--save-every: must be in [1, ", kMaxSteps, "], got ", save_every);
  OCRT_CHECK(in(eval_every, 1, kMaxSteps), "--eval-every: must be in [1, ", kMaxSteps, "], got ", eval_every);
  OCRT_CHECK(in(log_every, 1, kMaxSteps), "--log-every: must be in [1, ", kMaxSteps, "], got ", log_every);
  OCRT_CHECK(in(keep, 1, 1000000), "--keep: must be in [1, 1000000], got ", keep);
  OCRT_CHECK(in(worst_lines, 0, 1000), "--worst: must be in [0, 1000], got ", worst_lines);
  OCRT_CHECK(in(stop_at, 0, kMaxSteps), "--stop-at: must be in [0, ", kMaxSteps, "], got ", stop_at);
  OCRT_CHECK(std::isfinite(max_minutes) && max_minutes >= 0, "--max-minutes: must be >= 0, got ", max_minutes);
  OCRT_CHECK(in(bucket_window, 0, 1000000), "--bucket-window: must be in [0, 1000000], got ", bucket_window);
  OCRT_CHECK(in(max_bad_steps, 1, kMaxSteps), "--max-bad-steps: must be in [1, ", kMaxSteps, "], got ",
             max_bad_steps);
  OCRT_CHECK(in(val_size, 1, kMaxLines), "--val-size: must be in [1, ", kMaxLines, "], got ", val_size);
  OCRT_CHECK(in(synth.size, 1, kMaxLines), "--synth-epoch: must be in [1, ", kMaxLines, "], got ", synth.size);
  OCRT_CHECK(in(warmup, 0, kMaxSteps), "--warmup: must be in [0, ", kMaxSteps, "], got ", warmup);
  OCRT_CHECK(!out.empty(), "--out: give a folder for checkpoints and logs");
  OCRT_CHECK(synth.min_chars >= 1 && synth.max_chars >= synth.min_chars && synth.max_chars <= 1000,
             "--synth-chars: need 1 <= MIN <= MAX <= 1000, got ", synth.min_chars, ":", synth.max_chars);
  if (!init.empty()) OCRT_CHECK(fs::exists(init), "--init: ", init, " does not exist");
  OCRT_CHECK(std::isfinite(comm_timeout) && comm_timeout > 0, "--comm-timeout: must be > 0 seconds, got ", comm_timeout);
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
  auto pair = [](auto lo, auto hi) { return Json(lo).dump() + ":" + Json(hi).dump(); };
  j.set("arch", arch);
  j.set("train", list(train));
  j.set("val", list(val));
  j.set("charset", charset_path);
  j.set("fonts", list(fonts));
  j.set("val_fonts", list(val_fonts));
  j.set("words", words);
  j.set("prose", list(prose));
  j.set("scan", scan);
  j.set("synth_chars", pair(synth.min_chars, synth.max_chars));
  j.set("synth_height", pair(synth.min_pixel_height, synth.max_pixel_height));
  j.set("synth_epoch", synth.size);
  j.set("synth_spacing", pair(synth.min_word_spacing, synth.max_word_spacing));
  j.set("synth_tracking", pair(synth.min_tracking, synth.max_tracking));
  j.set("synth_small_caps", synth.small_caps);
  j.set("render_cache", !render_cache.empty());
  j.set("device", device.str());
  j.set("batch", batch);
  j.set("steps", steps);
  j.set("epochs", epochs);
  j.set("lr", lr);
  j.set("optimizer", optimizer_kind_name(optimizer));
  j.set("momentum", momentum);
  j.set("weight_decay", weight_decay);
  j.set("schedule", schedule_kind_name(schedule));
  j.set("warmup", warmup);
  j.set("clip_grad", clip_grad);
  j.set("seed", std::to_string(seed));
  j.set("augment", augment);
  j.set("shuffle", shuffle);
  j.set("bucket_window", bucket_window);
  j.set("init", init);
  j.set("batch_norm", batch_norm);
  j.set("sync_batch_norm", sync_batch_norm);
  if (overlap != Overlap::automatic) j.set("overlap", overlap_name(overlap));
  if (conv != ConvMode::fast) j.set("conv", conv_mode_name(conv));
  if (precision != Precision::fp32) j.set("precision", precision_name(precision));
  if (!devices.empty()) j.set("devices", join_devices(devices));
  if (nn::is_detector_arch(arch)) j.set("crop", crop);
  return j;
}

namespace {

// A setting that a resumed run must keep for the resume to be exact: how the user sets it, its
// key in TrainConfig::to_json(), and when it matters (momentum only for SGD, --steps only when
// no --epochs and the schedule depends on the run's length, the synthetic lines' settings only
// when training on them).
struct KeptSetting {
  const char* flag;
  const char* key;
  bool (*matters)(const TrainConfig&);
};
bool always(const TrainConfig&) { return true; }
bool synthetic(const TrainConfig& c) { return std::find(c.train.begin(), c.train.end(), "synth") != c.train.end(); }
bool sgd(const TrainConfig& c) { return c.optimizer == OptimizerKind::sgd; }
bool length_sets_lr(const TrainConfig& c) { return c.schedule != ScheduleKind::constant; }
bool by_steps(const TrainConfig& c) { return c.epochs <= 0 && length_sets_lr(c); }
bool cosine(const TrainConfig& c) { return c.schedule == ScheduleKind::cosine; }

const KeptSetting kKeptOnResume[] = {
    {"--train", "train", always},
    {"--charset", "charset", always},
    {"--fonts", "fonts", synthetic},
    {"--words", "words", synthetic},
    {"--prose", "prose", synthetic},
    {"--scan", "scan", synthetic},
    {"--synth-chars", "synth_chars", synthetic},
    {"--synth-height", "synth_height", synthetic},
    {"--synth-epoch", "synth_epoch", synthetic},
    {"--synth-spacing", "synth_spacing", synthetic},  // a checkpoint from before them lacks both:
    {"--synth-tracking", "synth_tracking", synthetic},  // not compared
    {"--synth-small-caps", "synth_small_caps", synthetic},  // likewise
    {"--render-cache", "render_cache", synthetic},          // likewise
    {"--augment/--no-augment", "augment", always},
    {"--no-shuffle", "shuffle", always},
    {"--bucket-window", "bucket_window", always},
    {"--batch", "batch", always},
    {"--steps", "steps", by_steps},
    {"--epochs", "epochs", length_sets_lr},
    {"--lr", "lr", always},
    {"--optimizer", "optimizer", always},
    {"--momentum", "momentum", sgd},
    {"--weight-decay", "weight_decay", always},
    {"--schedule", "schedule", always},
    {"--warmup", "warmup", cosine},
    {"--clip-grad", "clip_grad", always},
    {"--seed", "seed", always},
    {"--no-batch-norm", "batch_norm", always},
    {"--sync-batch-norm", "sync_batch_norm", always},
    {"--crop", "crop", always},  // detectors only (saved only for them)
};

// A setting's value as the user wrote it: lists with commas, switches as on/off.
std::string setting_text(const Json& v) {
  if (v.is_string()) return v.as_string().empty() ? "''" : v.as_string();
  if (v.is_bool()) return v.as_bool() ? "on" : "off";
  if (v.is_array()) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s += ',';
      s += setting_text(v[i]);
    }
    return v.size() ? s : "''";
  }
  return v.dump();
}

}  // namespace

std::vector<std::string> resume_changes(const Json& saved, const TrainConfig& now) {
  std::vector<std::string> changes;
  if (!saved.is_object()) return changes;
  const Json current = now.to_json();
  for (const KeptSetting& k : kKeptOnResume) {
    const Json* before = saved.find(k.key);
    if (!before || !k.matters(now)) continue;
    const Json& after = current.at(k.key);
    if (!(*before == after))
      changes.push_back(std::string(k.flag) + ": " + setting_text(*before) + " -> " + setting_text(after));
  }
  return changes;
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
  phases.set("copy", copy_ms);
  phases.set("forward", forward_ms);
  phases.set("backward", backward_ms);
  phases.set("sync", sync_ms);
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

// Test hook (set_fault_injection): this replica hangs, exits, kills itself or throws at `step`.
struct Fault {
  int rank = -1;
  int64_t step = -1;
  std::string what;  // hang | exit | kill | throw; empty: no fault
};
std::mutex g_fault_mu;
Fault g_fault;

void maybe_inject_fault(int rank, int64_t step) {
  Fault f;
  {
    std::lock_guard<std::mutex> lock(g_fault_mu);
    f = g_fault;
  }
  if (f.what.empty() || f.rank != rank || f.step != step) return;
  std::fprintf(stderr, "rank %d: injected fault '%s' at step %lld\n", rank, f.what.c_str(), (long long)step);
  if (f.what == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (f.what == "exit") std::_Exit(7);
  if (f.what == "kill") std::raise(SIGKILL);
  fail("rank ", rank, ": injected fault at step ", step);
}

// The run's length in optimizer steps: --steps, or --epochs over the training samples.
int64_t total_steps(const TrainConfig& cfg, int64_t samples, bool lead) {
  if (cfg.epochs <= 0) return cfg.steps;
  const double want = std::ceil(cfg.epochs * (double)samples / (double)cfg.batch);
  OCRT_CHECK(want <= 1e12, "--epochs ", cfg.epochs, ": ", want, " steps of ", cfg.batch, " samples is too many");
  const int64_t steps = std::max<int64_t>(1, (int64_t)want);
  if (lead)
    std::fprintf(stderr, "--epochs %g: %lld steps of %lld samples\n", cfg.epochs, (long long)steps,
                 (long long)cfg.batch);
  return steps;
}

// This replica's training loader: its shard of every batch.
LoaderOptions loader_options(const TrainConfig& cfg, int rank, int replicas) {
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
  lo.interruptible = replicas == 1;
  return lo;
}

// Validation batches: the training loader's shape with a seed of their own, so that synthetic
// validation lines are never training lines (evaluate() turns off shuffling and augmentation).
constexpr uint64_t kValidationSeedMask = 0x5eed0fa1u;
LoaderOptions validation_loader_options(LoaderOptions lo) {
  lo.seed ^= kValidationSeedMask;
  return lo;
}

// The progress line (lead replica) and a "train" event in metrics.jsonl.
void log_progress(const RunParts& run, const TrainState& state, int64_t steps, double loss_avg,
                  const Throughput& speed) {
  const double sps = speed.samples_per_sec();
  const double eta = sps > 0 ? (double)(steps - state.step) * (double)run.cfg.batch / sps : 0;
  if (run.files.lead()) print_progress(run.tty, state.step, steps, loss_avg, run.optim.lr(), sps, eta);
  Json j = Json::object();
  j.set("event", "train");
  j.set("step", state.step);
  j.set("loss", loss_avg);
  j.set("lr", run.optim.lr());
  j.set("samples_per_sec", sps);
  j.set("skipped_steps", state.skipped_steps);
  j.set("time", run.files.elapsed());
  run.files.event(j);
}

// A run's data: its training and validation sets (validation may be absent) and its length.
struct RunData {
  std::shared_ptr<const Dataset> train, val;
  int64_t steps = 0;
};

// Data first: a bad sample or a missing font fails here, before any model is built.
RunData load_run_data(const TrainConfig& cfg, const nn::Charset& charset, int replicas, bool lead) {
  OCRT_CHECK(cfg.batch >= replicas, "--batch ", cfg.batch, " is smaller than the number of replicas (", replicas,
             "): every replica needs at least one line of each batch");
  std::shared_ptr<const TextSource> text;  // one reading of the word list and prose for both sets
  RunData d;
  d.train = make_dataset(cfg.train, cfg, charset, false, lead, text);
  d.steps = total_steps(cfg, d.train->size(), lead);
  if (!cfg.val.empty()) d.val = make_dataset(cfg.val, cfg, charset, true, lead, text);
  return d;
}

// A signal came while the next batch was being made: a checkpoint of the last step, if this run
// did one, and a word to the user.
void stop_while_loading(RunFiles& files, nn::Recognizer& model, Optimizer& optim, const TrainState& state,
                        int64_t first_step, bool lead) {
  const bool stepped = state.step > first_step;
  if (stepped) files.checkpoint(model, optim, state, stop_name(Stop::signal));
  if (lead)
    std::fprintf(stderr, "\n%s while making batch %lld: %s, stopping\n", signal_name(interrupt_signal()).c_str(),
                 (long long)state.step,
                 stepped ? ("saved a checkpoint at step " + std::to_string(state.step)).c_str()
                         : "no step done, nothing saved");
}

// One replica's whole run: for a single replica `comm` is the no-op communicator, and every
// collective below does nothing.
TrainResult run_replica(const TrainConfig& cfg, Communicator& comm, Device device) {
  if (nn::is_detector_arch(cfg.arch)) return run_detector_replica(cfg, comm, device);
  const int rank = comm.rank(), replicas = comm.size();
  const bool lead = rank == 0;  // writes progress, metrics and checkpoints
  make_run_folder(cfg.out);
  const nn::Charset charset = load_charset(cfg.charset_path);
  const RunData data = load_run_data(cfg, charset, replicas, lead);
  const int64_t steps = data.steps;

  // The model, where it starts, on every replica alike.
  StartPoint start = resolve_start(cfg, charset, lead);
  nn::Recognizer& model = *start.model;
  TrainState state = start.state;
  model.to(device);
  model.train(true);
  sync_replicas(comm, model, state.step, device, cfg.out);

  auto optim = make_optimizer(cfg, model.parameters());
  if (start.optim) optim->load_state_dict(*start.optim);
  TrainConfig sched_cfg = cfg;
  sched_cfg.steps = steps;
  const Schedule schedule = make_schedule(sched_cfg);
  GradSync grad_sync(optim->params());
  const bool overlap = cfg.overlap == Overlap::on || (cfg.overlap == Overlap::automatic && comm.kind() == "nccl");
  // --sync-batch-norm: BatchNorm layers of this replica's training steps normalise with the
  // whole global batch's statistics (validation runs in eval mode, with the running ones).
  std::optional<nn::SyncBatchNormScope> sync_bn;
  if (cfg.sync_batch_norm && replicas > 1) sync_bn.emplace(comm);
  StepParts parts{*optim, grad_sync, comm, device, cfg.batch, cfg.clip_grad, overlap};

  const LoaderOptions lo = loader_options(cfg, rank, replicas);
  Loader loader(data.train, lo, state.step);
  RunFiles files(cfg, start.info, lead, state.step);
  files.start(model, state, start.from, start.changes, replicas);
  RunParts run{cfg, model, *optim, comm, device, files, charset, data.val.get(), validation_loader_options(lo),
               lead && isatty(2)};

  TrainResult result;
  Throughput speed;
  const int64_t first_step = state.step;
  LossTrack loss(first_step, cfg.max_bad_steps, cfg.out, lead);
  const double run_start = now_seconds();
  while (state.step < steps) {
    maybe_inject_fault(rank, state.step);
    const double t_data = now_seconds();
    // One replica stops waiting for data at a signal (a batch of 100,000 lines takes minutes
    // to make); replicas stop together, at a step boundary (decide_stop).
    std::optional<Batch> got = lo.interruptible ? loader.next_or_interrupted() : std::optional<Batch>(loader.next());
    if (!got) {
      result.interrupted = true;
      stop_while_loading(files, model, *optim, state, first_step, lead);
      break;
    }
    Batch b = std::move(*got);
    OCRT_CHECK(b.step == state.step, "loader returned batch ", b.step, " for step ", state.step);
    const double data_s = now_seconds() - t_data;

    const StepResult s = train_step(parts, model, b, schedule.lr_at(state.step));
    loss.add(s, state);
    state.step++;
    speed.add(state.step - first_step, cfg.batch, data_s, s);
    if (state.step % cfg.log_every == 0 || state.step == steps) log_progress(run, state, steps, loss.average(), speed);

    const StopDecision stop = evaluate_and_save(
        run, state, steps, decide_stop(cfg, state.step, steps, now_seconds() - run_start, interrupt_signal() != 0, comm, device));
    if (stop.why == Stop::no) continue;
    report_stop(cfg, stop.why, state.step, lead);
    result.interrupted = stop.why == Stop::signal;
    break;
  }
  if (run.tty) std::fprintf(stderr, "\n");
  if (!data.val && !result.interrupted) files.best_model(model, state, -1, device, replicas);
  comm.barrier();  // the files rank 0 writes are complete before any replica reports them

  files.summary(result, state, speed, loss, rank, replicas, precision_name(cfg.precision));
  files.report();
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
  const ConvModeScope conv_mode(cfg.conv);
  const PrecisionScope precision(cfg.precision);
  if (cfg.devices.size() == 1) cfg.device = cfg.devices[0];
  // The first SIGINT/SIGTERM stops the run at the next safe point: during start-up before
  // anything is written (Interrupted is thrown), in the loop with a checkpoint; a second one
  // ends the process at once (runtime/interrupt.h).
  const InterruptHandlers handlers;
  if (mpi_launched()) return run_mpi(cfg);
  if (cfg.devices.size() > 1) return run_threads(cfg);
  auto single = make_single_communicator();
  return run_replica(cfg, *single, cfg.device);
}

OptimizerKind parse_optimizer_kind(const std::string& name) {
  if (name == "sgd") return OptimizerKind::sgd;
  if (name == "adam") return OptimizerKind::adam;
  if (name == "adamw") return OptimizerKind::adamw;
  fail("unknown optimizer '", name, "' (expected sgd, adam or adamw)");
}
const char* optimizer_kind_name(OptimizerKind k) {
  return k == OptimizerKind::sgd ? "sgd" : k == OptimizerKind::adam ? "adam" : "adamw";
}

Overlap parse_overlap(const std::string& name) {
  if (name == "auto") return Overlap::automatic;
  if (name == "on") return Overlap::on;
  if (name == "off") return Overlap::off;
  fail("unknown overlap '", name, "' (expected auto, on or off)");
}
const char* overlap_name(Overlap o) { return o == Overlap::automatic ? "auto" : o == Overlap::on ? "on" : "off"; }

OnBadSample parse_on_bad_sample(const std::string& name) {
  if (name == "skip") return OnBadSample::skip;
  if (name == "fail") return OnBadSample::fail;
  fail("unknown choice '", name, "' (expected skip or fail)");
}
const char* on_bad_sample_name(OnBadSample o) { return o == OnBadSample::skip ? "skip" : "fail"; }

void set_fault_injection(const std::string& spec) {
  Fault f;
  if (!spec.empty()) {
    const size_t a = spec.find(':'), b = a == std::string::npos ? a : spec.find(':', a + 1);
    f.what = b == std::string::npos ? "" : spec.substr(b + 1);
    OCRT_CHECK(b != std::string::npos && (f.what == "hang" || f.what == "exit" || f.what == "kill" || f.what == "throw"),
               "--fault: expected RANK:STEP:hang|exit|kill|throw, got '", spec, "'");
    f.rank = (int)cli::parse_int("--fault", spec.substr(0, a));
    f.step = cli::parse_int("--fault", spec.substr(a + 1, b - a - 1));
  }
  std::lock_guard<std::mutex> lock(g_fault_mu);
  g_fault = f;
}

}  // namespace ocrt::train
