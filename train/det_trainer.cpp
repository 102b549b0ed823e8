// The detector's training loop (see det_trainer.h).
#include "train/det_trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "models/dbnet.h"
#include "models/model_file.h"
#include "runtime/cpu_isa.h"
#include "runtime/error.h"
#include "runtime/image.h"
#include "runtime/interrupt.h"
#include "runtime/page_truth.h"
#include "runtime/rng.h"
#include "runtime/threading.h"
#include "train/checkpoint.h"
#include "train/det_loss.h"
#include "train/det_targets.h"
#include "train/grad_sync.h"
#include "train/optim.h"
#include "train/schedule.h"
#include "train/synth_page.h"
#include "train/train_loop.h"

namespace fs = std::filesystem;

namespace ocrt::train {

namespace {

// ---- pages and their lines

struct TruthPage {
  GrayImage image;
  std::vector<Quad> lines;
};

class PageSource {
 public:
  virtual ~PageSource() = default;
  // Page number `index` (synthetic: any index; folders: index modulo the pages).
  virtual TruthPage page(uint64_t index) const = 0;
  virtual int64_t size() const = 0;  // pages in a folder; 0: as many as asked for
};

// Pages rendered on the fly: page i is render_page(SampleRng::derive(seed, i)), the page that
// ocrt-synth --pages --seed SEED draws as its i-th.
class SynthPages : public PageSource {
 public:
  SynthPages(std::shared_ptr<const TextSource> text, std::vector<std::shared_ptr<Font>> fonts, uint64_t seed,
             PageSynthOptions o)
      : text_(std::move(text)), fonts_(std::move(fonts)), seed_(seed), o_(o) {}
  TruthPage page(uint64_t index) const override {
    SynthPage p = render_page(*text_, fonts_, SampleRng::derive(seed_, index), o_);
    TruthPage t;
    t.image = std::move(p.image);
    for (const auto& l : p.lines) t.lines.push_back(l.outline);
    return t;
  }
  int64_t size() const override { return 0; }

 private:
  std::shared_ptr<const TextSource> text_;
  std::vector<std::shared_ptr<Font>> fonts_;
  uint64_t seed_;
  PageSynthOptions o_;
};

// Pages from folders: every image with a NAME.json truth beside it.
class FolderPages : public PageSource {
 public:
  FolderPages(const std::vector<std::string>& dirs, const char* flag) {
    for (const auto& d : dirs) {
      OCRT_CHECK(fs::is_directory(d), flag, ": ", d, " is not a folder (give 'synth' or folders that ocrt-synth ",
                 "--pages wrote: NAME.png with NAME.json)");
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(d)) {
        const fs::path p = e.path();
        const std::string ext = p.extension().string();
        if (ext != ".png" && ext != ".jpg" && ext != ".jpeg" && ext != ".tif" && ext != ".tiff" && ext != ".pgm") continue;
        fs::path truth = p;
        truth.replace_extension(".json");
        if (fs::is_regular_file(truth)) found.push_back(p.string());
      }
      std::sort(found.begin(), found.end());
      images_.insert(images_.end(), found.begin(), found.end());
    }
    OCRT_CHECK(!images_.empty(), flag, ": no page image with a NAME.json truth beside it in ", dirs[0],
               dirs.size() > 1 ? " and the other folders" : "");
  }
  TruthPage page(uint64_t index) const override {
    const std::string& path = images_[index % images_.size()];
    TruthPage t;
    t.image = load_gray_image(path);
    fs::path truth(path);
    truth.replace_extension(".json");
    for (const PageTruthLine& l : read_page_truth(truth.string(), false).lines) t.lines.push_back(l.outline);
    return t;
  }
  int64_t size() const override { return (int64_t)images_.size(); }

 private:
  std::vector<std::string> images_;
};

// Synthetic pages for detector training: the page renderer's defaults at 120-220 dpi (pages
// are scaled to 800-1600 pixels anyway; rendering fewer pixels is faster).
PageSynthOptions training_page_options() {
  PageSynthOptions o;
  o.min_dpi = 120, o.max_dpi = 220;
  return o;
}

std::shared_ptr<const PageSource> make_pages(const std::vector<std::string>& sources, const TrainConfig& cfg,
                                             bool is_val, bool lead, std::shared_ptr<const TextSource>& text) {
  const char* flag = is_val ? "--val" : "--train";
  if (sources.size() == 1 && sources[0] == "synth") {
    if (!text)
      text = std::make_shared<const TextSource>(TextSource::read_words(cfg.words), nn::Charset::ascii(),
                                                TextSource::read_prose(cfg.prose));
    const auto& paths = is_val && !cfg.val_fonts.empty() ? cfg.val_fonts : cfg.fonts;
    std::vector<std::string> p = paths.empty() ? default_font_dirs() : paths;
    OCRT_CHECK(!p.empty(), is_val ? "--val-fonts" : "--fonts", ": no fonts given and none of Debian's font folders exist");
    auto fonts = load_fonts(p);
    OCRT_CHECK(!fonts.empty(), flag, ": no usable font");
    if (lead) std::fprintf(stderr, "%s: synthetic pages from %zu fonts\n", flag, fonts.size());
    // Validation pages come from seeds no training page uses.
    return std::make_shared<SynthPages>(text, fonts, is_val ? ~cfg.seed : cfg.seed, training_page_options());
  }
  auto pages = std::make_shared<FolderPages>(sources, flag);
  if (lead) std::fprintf(stderr, "%s: %lld pages\n", flag, (long long)pages->size());
  return pages;
}

// ---- batches

struct DetBatch {
  int64_t step = 0;
  Tensor images;                    // (n, 1, S, S), p / 127.5 - 1
  std::vector<DetTargets> targets;  // one per image
  int64_t lines = 0;
};

// Makes the batch of a step: this replica's share of the step's samples. Sample i of step s
// (global index s * batch + i) is page SampleRng::derive(seed, s * batch + i) of the source (any
// page of a folder, with replacement), scaled and cropped with SampleRng::derive(seed ^ 1, ...).
DetBatch make_batch(const PageSource& pages, const TrainConfig& cfg, const DetSampleOptions& so, int64_t step,
                    int rank, int replicas) {
  DetBatch b;
  b.step = step;
  std::vector<int64_t> mine;
  for (int64_t i = rank; i < cfg.batch; i += replicas) mine.push_back(i);
  const int64_t count = (int64_t)mine.size();
  std::vector<GrayImage> crops((size_t)count);
  b.targets.resize((size_t)count);
  std::vector<int64_t> lines((size_t)count, 0);
  std::vector<std::string> errors((size_t)count);
  // Samples are independent: on the CPU's threads at once (one thread inside a DetLoader
  // worker, which limits itself to one).
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t k = 0; k < count; ++k) {
    try {
      const uint64_t g = (uint64_t)(step * cfg.batch + mine[(size_t)k]);
      TruthPage p = pages.page(SampleRng::derive(cfg.seed, g));
      DetSample s = make_det_sample(p.image, p.lines, SampleRng::derive(cfg.seed ^ 1, g), so);
      lines[(size_t)k] = (int64_t)s.lines.size();
      crops[(size_t)k] = std::move(s.image);
      b.targets[(size_t)k] = std::move(s.maps);
    } catch (const std::exception& e) {
      errors[(size_t)k] = e.what();
    }
  }
  for (const auto& e : errors) OCRT_CHECK(e.empty(), e);
  for (int64_t n : lines) b.lines += n;
  const int64_t n = (int64_t)crops.size(), S = so.size;
  b.images = Tensor::empty({n, 1, S, S});
  float* x = b.images.data<float>();
  for (int64_t k = 0; k < n; ++k)
    for (int64_t j = 0; j < S * S; ++j) x[k * S * S + j] = (float)crops[(size_t)k].pixels[(size_t)j] / 127.5f - 1.0f;
  return b;
}

// Batches made ahead by worker threads (rendering a page costs more than a GPU step), handed out
// in step order; or, with no workers, made when asked for. Every batch depends only on its step,
// so the workers' timing never changes what the model sees. A run on the CPU uses no workers:
// a worker rendering beside the step's OpenMP team would leave that team waiting for a core at
// every barrier (measured: a 256 x 256 step of 4 crops took 12 s instead of well under 1 s on
// 2 cores, 76% of the time in libgomp's spin-wait); the batch's pages are then rendered on
// every core between steps.
class DetLoader {
 public:
  DetLoader(std::function<DetBatch(int64_t)> make, int workers, int64_t first_step, int64_t last_step)
      : make_(std::move(make)), next_make_(first_step), next_take_(first_step), last_(last_step),
        ahead_(std::max(2, workers + 1)) {
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this] { work(); });
  }
  ~DetLoader() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  DetBatch next() {
    if (threads_.empty()) return make_(next_take_++);  // no workers: made here, on every CPU thread
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return ready_.count(next_take_) || !error_.empty(); });
    OCRT_CHECK(error_.empty(), error_);
    DetBatch b = std::move(ready_[next_take_]);
    ready_.erase(next_take_++);
    cv_.notify_all();
    return b;
  }

 private:
  void work() {
    // Each worker makes whole batches on its own thread: make_batch's parallel loop would
    // otherwise start a team of every core in every worker (14 workers on the 16-core H200
    // machine: 224 threads each making a crop of its own page; that run peaked at 10 GB RSS).
    limit_this_thread(1);
    for (;;) {
      int64_t step;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || (next_make_ < last_ && next_make_ < next_take_ + ahead_); });
        if (stop_) return;
        step = next_make_++;
      }
      try {
        DetBatch b = make_(step);
        std::lock_guard<std::mutex> lock(mu_);
        ready_[step] = std::move(b);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu_);
        if (error_.empty()) error_ = std::string("making the batch of step ") + std::to_string(step) + ": " + e.what();
      }
      cv_.notify_all();
    }
  }

  std::function<DetBatch(int64_t)> make_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, DetBatch> ready_;
  int64_t next_make_, next_take_, last_, ahead_;
  bool stop_ = false;
  std::string error_;
  std::vector<std::thread> threads_;
};

// ---- where the run starts

using DetStart = StartFrom<nn::DBNet>;  // train_loop.h

// The recognisers' resolve_start for a detector: checkpoint, --init file or seed, checked the same way.
DetStart resolve_detector_start(const TrainConfig& cfg, bool lead) {
  const StartFiles files = find_start_files(cfg, {nn::ModelExpectation::Kind::detector, cfg.arch, "--arch", nullptr}, lead);
  const Json* stored = files.config();
  const Json conf = stored ? *stored : nn::DBNetConfig::preset(cfg.arch).to_json();
  DetStart s;
  Generator gen(cfg.seed);
  {
    std::optional<nn::ModelSizeGuard> guard;  // a config from a file must fit that file's weights
    files.bound_build(guard);
    s.model = nn::make_detector(cfg.arch, conf, gen);
  }
  s.info.arch = cfg.arch;
  s.info.config = s.model->config_json();
  s.info.input = nn::detector_input_spec();
  load_start(*s.model, files, cfg, lead, s.state, s.optim, s.from);
  s.changes = files.changes;
  return s;
}

// ---- evaluation

// Every validation page read as inference reads it; the counts summed over replicas (each reads
// its share of the pages).
DetectionScore evaluate_detector(nn::DBNet& model, const PageSource& pages, int64_t count, Communicator& comm,
                                 Device device) {
  DetectionScore total;
  for (int64_t i = comm.rank(); i < count; i += comm.size()) {
    if (comm.size() == 1) throw_if_interrupted("validating");  // replicas stop together, at a step
    TruthPage p = pages.page((uint64_t)i);
    const nn::DetectedPage d = nn::detect_text_lines(model, p.image);
    std::vector<Quad> found;
    for (const auto& b : d.boxes) found.push_back(b.outline);
    total.add(score_detection(found, p.lines));
  }
  if (comm.size() > 1) {
    const auto s = comm.all_reduce_values({(double)total.found, (double)total.truth, (double)total.matched},
                                          ReduceOp::sum, device);
    total.found = (int64_t)s[0], total.truth = (int64_t)s[1], total.matched = (int64_t)s[2];
  }
  return total;
}

// A step's line: the loss averaged since the last line and its three parts at this step.
void log_detector_step(RunFiles& files, const TrainState& state, int64_t steps, double loss, const DetLoss& l,
                       double lr, double crops_per_sec, bool lead) {
  if (lead)
    std::fprintf(stderr, "step %lld/%lld loss %.4f (prob %.4f thresh %.4f binary %.4f) lr %.2e %.2f crops/s\n",
                 (long long)state.step, (long long)steps, loss, l.prob, l.thresh, l.binary, lr, crops_per_sec);
  Json j = Json::object();
  j.set("event", "train");
  j.set("step", state.step);
  j.set("loss", loss);
  j.set("loss_prob", l.prob);
  j.set("loss_thresh", l.thresh);
  j.set("loss_binary", l.binary);
  j.set("lr", lr);
  j.set("samples_per_sec", crops_per_sec);
  j.set("skipped_steps", state.skipped_steps);
  j.set("time", files.elapsed());
  files.event(j);
}

// Line detection on the validation pages: logged, and the model saved as the run's best when
// its F measure is the best so far (the run's "cer" is 1 - F). A signal during validation
// leaves this step's score out and stops the run at this step.
void validate_and_keep_best(nn::DBNet& model, const PageSource& pages, int64_t count, Communicator& comm,
                            Device device, RunFiles& files, TrainState& state, StopDecision& stop, bool lead) {
  DetectionScore s;
  try {
    s = evaluate_detector(model, pages, count, comm, device);
  } catch (const Interrupted& e) {
    if (lead) std::fprintf(stderr, "%s: this step's validation is left out\n", e.what());
    stop.why = Stop::signal;
    return;
  }
  const double error = 1 - s.f_measure();
  if (lead)
    std::fprintf(stderr, "step %lld: validation on %lld pages: precision %.2f%%, recall %.2f%%, F %.2f%% (%lld of %lld lines found)\n",
                 (long long)state.step, (long long)count, 100 * s.precision(), 100 * s.recall(), 100 * s.f_measure(),
                 (long long)s.matched, (long long)s.truth);
  Json j = Json::object();
  j.set("event", "eval");
  j.set("step", state.step);
  j.set("precision", s.precision());
  j.set("recall", s.recall());
  j.set("f_measure", s.f_measure());
  j.set("cer", error);  // the report's charts read "cer": here 1 - F
  j.set("lines", s.truth);
  j.set("time", files.elapsed());
  files.event(j);
  if (state.best_cer < 0 || error < state.best_cer) {
    state.best_cer = error;
    state.best_step = state.step;
    files.best_model(model, state, error, device, (int)comm.size());
  }
}

}  // namespace

DetectionScore score_detection(const std::vector<Quad>& found, const std::vector<Quad>& truth, double iou) {
  DetectionScore s;
  s.found = (int64_t)found.size();
  s.truth = (int64_t)truth.size();
  std::vector<bool> used(truth.size(), false);
  for (const Quad& f : found) {
    const Rect a = f.box();
    double best = 0;
    size_t best_k = truth.size();
    for (size_t k = 0; k < truth.size(); ++k) {
      if (used[k]) continue;
      const Rect b = truth[k].box();
      const double w = std::min(a.x1, b.x1) - std::max(a.x0, b.x0), h = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
      if (w <= 0 || h <= 0) continue;
      const double inter = w * h, u = a.width() * a.height() + b.width() * b.height() - inter;
      const double v = u > 0 ? inter / u : 0;
      if (v > best) best = v, best_k = k;
    }
    if (best_k < truth.size() && best >= iou) {
      used[best_k] = true;
      s.matched++;
    }
  }
  return s;
}

TrainResult run_detector_replica(const TrainConfig& cfg, Communicator& comm, Device device) {
  const int rank = comm.rank(), replicas = comm.size();
  const bool lead = rank == 0;
  make_run_folder(cfg.out);
  OCRT_CHECK(cfg.batch >= replicas, "--batch ", cfg.batch, " is smaller than the number of replicas (", replicas, ")");
  OCRT_CHECK(cfg.epochs <= 0, "--epochs: a detector trains by --steps (synthetic pages have no epoch)");

  std::shared_ptr<const TextSource> text;
  auto train_pages = make_pages(cfg.train, cfg, false, lead, text);
  std::shared_ptr<const PageSource> val_pages;
  if (!cfg.val.empty()) val_pages = make_pages(cfg.val, cfg, true, lead, text);
  const int64_t val_count = val_pages ? (val_pages->size() > 0 ? std::min(val_pages->size(), cfg.val_pages) : cfg.val_pages) : 0;

  DetStart start = resolve_detector_start(cfg, lead);
  nn::DBNet& model = *start.model;
  TrainState state = start.state;
  model.to(device);
  model.train(true);
  sync_replicas(comm, model, state.step, device, cfg.out);

  auto optim = make_optimizer(cfg, model.parameters());
  if (start.optim) optim->load_state_dict(*start.optim);
  const Schedule schedule = make_schedule(cfg);
  GradSync grad_sync(optim->params());

  DetSampleOptions so;
  so.size = cfg.crop;
  so.targets.shrink_ratio = model.config.shrink_ratio;
  so.validate();
  const int64_t steps = cfg.steps;
  DetLoader loader([&](int64_t step) { return make_batch(*train_pages, cfg, so, step, rank, replicas); },
                   device.is_cpu() ? 0 : cfg.workers, state.step, steps);

  RunFiles files(cfg, start.info, lead, state.step);
  files.start(model, state, start.from, start.changes, replicas);
  if (lead)
    std::fprintf(stderr, "training %s (%lld parameters) on %s: %lld steps of %lld crops of %lld x %lld\n",
                 cfg.arch.c_str(), (long long)model.num_parameters(), device.str().c_str(), (long long)steps,
                 (long long)cfg.batch, (long long)cfg.crop, (long long)cfg.crop);

  TrainResult result;
  const bool overlap = cfg.overlap == Overlap::on || (cfg.overlap == Overlap::automatic && comm.kind() == "nccl");
  StepParts parts{*optim, grad_sync, comm, device, cfg.batch, cfg.clip_grad, overlap};
  Throughput speed;
  const int64_t first_step = state.step;
  LossTrack loss(first_step, cfg.max_bad_steps, cfg.out, lead);
  const double run_start = now_seconds();
  while (state.step < steps) {
    const double t_data = now_seconds();
    DetBatch b = loader.next();
    const double data_s = now_seconds() - t_data;
    DetLoss l;
    Tensor images;
    DetLossTargets targets;
    auto copy = [&] {
      std::vector<const DetTargets*> maps;
      for (const auto& t : b.targets) maps.push_back(&t);
      images = b.images.to(device);
      targets = det_loss_targets(maps, device);
    };
    auto forward = [&] {
      nn::DBNet::Maps out = model.forward_maps(images, true);
      l = det_loss(out.prob, out.thresh, targets);
      return l.total;
    };
    const StepResult s = train_step(parts, copy, forward, (int64_t)b.targets.size(), schedule.lr_at(state.step));
    loss.add(s, state);
    state.step++;
    speed.add(state.step - first_step, cfg.batch, data_s, s);
    if (state.step % cfg.log_every == 0 || state.step == steps)
      log_detector_step(files, state, steps, loss.average(), l, optim->lr(), speed.samples_per_sec(), lead);
    StopDecision stop =
        decide_stop(cfg, state.step, steps, now_seconds() - run_start, interrupt_signal() != 0, comm, device);
    const bool last = state.step == steps;
    if (val_pages && (state.step % cfg.eval_every == 0 || last || stop.out_of_time))
      validate_and_keep_best(model, *val_pages, val_count, comm, device, files, state, stop, lead);
    if (state.step % cfg.save_every == 0 || last || stop.why != Stop::no)
      files.checkpoint(model, *optim, state, last ? "end" : stop.why != Stop::no ? stop_name(stop.why) : "periodic");
    if (stop.why == Stop::no) continue;
    report_stop(cfg, stop.why, state.step, lead);
    result.interrupted = stop.why == Stop::signal;
    break;
  }
  if (!val_pages && !result.interrupted) files.best_model(model, state, -1, device, replicas);
  comm.barrier();
  files.summary(result, state, speed, loss, rank, replicas, "fp32");
  return result;
}

}  // namespace ocrt::train
