// The predictor: model loading and checking, preprocessing, batching by width, the worker
// threads (one per device) and decoding. predictor.h explains the flow and the guarantees.
#include "infer/predictor.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <Eigen/Core>

#include "infer/model_loader.h"
#include "models/ctc_decode.h"
#include "models/int8.h"
#include "ops/index.h"
#include "ops/reduce.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/int8_gemm.h"
#include "runtime/cpu/int8_winograd.h"
#include "runtime/cuda/cuda_glue.h"
#include "runtime/precision.h"
#include "runtime/threading.h"

namespace ocrt::infer {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The model's input spec (models/model_file.h) as a BatchSpec, checked against what the models take.
BatchSpec input_spec(const Json& input, const std::string& path, int64_t& height) {
  auto number = [&](const char* key) {
    const Json* v = input.find(key);
    OCRT_CHECK(v && v->is_number(), path, ": the model's input spec has no number '", key, "' (got ", input.dump(), ")");
    return v->as_number();
  };
  height = (int64_t)number("height");
  const int64_t channels = (int64_t)number("channels");
  BatchSpec spec;
  spec.scale = number("scale");
  spec.offset = number("offset");
  spec.width_multiple = (int64_t)number("width_multiple");
  OCRT_CHECK(height == 32 && channels == 1 && spec.width_multiple == 4, path,
             ": ocrt's recognisers read 32-pixel-high gray lines padded to a multiple of 4, but the model's input spec says ",
             input.dump());
  OCRT_CHECK(std::isfinite(spec.scale) && spec.scale != 0 && std::isfinite(spec.offset), path,
             ": the model's input spec has a bad scale or offset: ", input.dump());
  return spec;
}

// Eigen's thread count is process-wide; CPU workers set it (all to the same share) one at a time.
std::mutex g_thread_count_mu;

}  // namespace

Decoder parse_decoder(const std::string& name) {
  if (name == "greedy") return Decoder::greedy;
  if (name == "beam") return Decoder::beam;
  fail("unknown decoder '", name, "' (expected greedy or beam)");
}

void use_auto_decoding(PredictorOptions& o, const std::string& lm_path, bool only_if_known) {
  if (lm_path.empty()) {
    o.decoder = Decoder::greedy;
    o.lm_path.clear();
    return;
  }
  o.decoder = Decoder::beam;
  o.lm_path = lm_path;
  o.lm_if_known = only_if_known;
  o.beam_doubt = kAutoBeamDoubt;
}

int64_t lines_to_take(int64_t lines, double mine, double fastest) {
  if (lines <= 1 || !(mine > 0) || !(fastest > 0)) return lines;  // nothing to split, or no measure
  const double allowed = std::max(fastest, kMinPieceSeconds);
  if (mine <= 2 * allowed) return lines;
  return std::clamp<int64_t>((int64_t)std::floor((double)lines * allowed / mine), 1, lines);
}

std::string Predictor::decoding() const {
  if (opt_.decoder != Decoder::beam) return "greedy";
  std::string s = "beam ";
  s.append(std::to_string(opt_.beam_width));
  if (lm_) s.append(" + LM ").append(opt_.lm_path);
  if (opt_.beam_doubt > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " (lines in doubt %g)", opt_.beam_doubt);
    s += buf;
  }
  return s;
}

std::string RunStats::summary() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%lld lines (%lld failed) in %.2f s, %.1f lines/s", (long long)lines,
                (long long)failed, seconds, lines_per_second());
  std::string s = buf;
  if (!cpu_path.empty()) s += "; cpu path " + cpu_path + ", " + precision;
  int64_t done = 0;
  for (const auto& w : workers) done += w.lines;
  for (size_t i = 0; i < workers.size(); ++i) {
    const auto& w = workers[i];
    std::snprintf(buf, sizeof buf, "; worker %zu (%s): %lld lines in %lld batches, %.1f%%, busy %.2f s", i,
                  w.device.str().c_str(), (long long)w.lines, (long long)w.batches,
                  done ? 100.0 * (double)w.lines / (double)done : 0.0, w.busy_seconds);
    s += buf;
    if (w.batches_on_all_threads > 0) s += " (" + std::to_string(w.batches_on_all_threads) + " on every thread)";
  }
  if (!decoding.empty()) s.append("; decoding ").append(decoding);
  return s;
}

// ---------------------------------------------------------------- the machinery behind Predictor

namespace {

// Lines read together: decoded, batched, run, and handed to the sink in input order.
struct Chunk {
  int64_t first = 0;  // index of its first line in the run
  std::vector<LineInput> inputs;
  std::vector<LineResult> results;
  std::vector<GrayImage> images;       // resized to the model height; each batch moves its lines' out
  std::vector<int64_t> source_widths;  // to map frames back to source pixels
  std::vector<char> blank;             // no ink: read as "" without the model (normalize_line)
  int64_t max_batch_columns = 0;       // the run's cap on a batch's columns
  int64_t pending = 0;                 // batches queued or running (guarded by Impl::mu)
};

struct Batch {
  Chunk* chunk = nullptr;
  std::vector<int64_t> lines;  // indices into the chunk, narrowest first
  int64_t width = 0;           // the widest line's padded width
  int64_t margin = 0;          // white columns added past the widest line (Impl::right_margin)
  // What it costs: columns of the packed input (what a worker's speed is measured in).
  double columns() const { return (double)lines.size() * (double)(width + margin); }
};

struct Worker {
  int index = 0;
  Device device;
  std::shared_ptr<nn::Recognizer> model;  // the checked CPU model, shared by every CPU worker
  std::thread thread;
  bool ready = false;       // setup finished (guarded by mu)
  std::string setup_error;  // why setup failed
  WorkerStats stats;        // guarded by mu
  double speed = 0;         // columns a second on its latest batch; 0 until one is done (guarded by mu)
};

}  // namespace

struct Predictor::Impl {
  const Predictor& p;
  BatchSpec spec;
  int64_t height = 32;
  nn::StateDict weights;  // on the CPU; each worker loads its own copy from here (freed once all have)
  int threads = 1;        // CPU threads for preprocessing
  int cpu_share = 1;      // threads per CPU worker
  int saved_eigen_threads = 0;  // Eigen's count before CPU workers changed it (0: no CPU worker)
  int64_t max_batch_columns = 0, chunk_lines = 0;
  // White columns past every batch's widest line: the model's right context (how far right of a
  // line's end its logits can look), rounded up to the width multiple. Every line then sees the
  // same white within the model's reach, so batching never changes a line's result.
  int64_t right_margin = 0;

  std::vector<std::unique_ptr<Worker>> workers;
  std::mutex mu;                    // guards the queue, stop, the chunks' pending counts, stats
  std::condition_variable work_cv;  // a batch was queued, or stop
  std::condition_variable done_cv;  // a batch finished, or a worker finished its setup
  std::deque<Batch> queue;
  bool stop = false;
  bool mixed = false;  // GPU and CPU workers together (see lines_to_take in predictor.h)
  bool cpu_only = true;  // every worker a CPU: batches by plan_batches, else fill_batches
  // Where the CPU alone is split into several workers (cpu_pool): the threads their running
  // batches use (guarded by mu). A batch that a worker takes while no other runs one and none
  // waits in the queue gets every thread (a lone line, the last batch of a run), and the other
  // workers wait for threads until it is done: the threads are never oversubscribed.
  bool cpu_pool = false;
  int threads_busy = 0;
  // The devices that chunk sizes count: a CPU split into workers counts once, so that their lines
  // come in the same chunks, and so the same batches, as one worker's and read the same to the
  // last bit (the white past a batch's widest line changes a line's logits by rounding:
  // check_same_reading in tests/infer/test_predictor.cpp).
  int64_t chunk_devices = 1;
  std::mutex run_mu;  // one run() at a time

  explicit Impl(const Predictor& owner) : p(owner) {}
  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    work_cv.notify_all();
    for (auto& w : workers)
      if (w->thread.joinable()) w->thread.join();
    if (saved_eigen_threads > 0) {  // give Eigen back the count it had (predictors end in reverse order)
      std::lock_guard<std::mutex> lock(g_thread_count_mu);
      Eigen::setNbThreads(saved_eigen_threads);
    }
  }

  // A chunk's lines decoded and checked on the threads, then cut into batches.
  std::vector<Batch> prepare(Chunk& chunk) const;
  // Line i of the chunk decoded, resized, normalised and checked; a bad line gets its error.
  void prepare_line(Chunk& chunk, int64_t i) const;
  // The chunk's readable lines sorted by width and cut into batches, the costliest first.
  std::vector<Batch> batches_of(Chunk& chunk) const;
  Batch take(const Worker& w);
  // Threads per CPU worker, the batch cap and the chunk size, from the options.
  void size_work(int cpu_workers, int64_t first_channels);
  // Starts a thread per device and waits until each has its model (throws the first failure).
  // `checked` (the model built to check the file) becomes every CPU worker's.
  void start_workers(std::shared_ptr<nn::Recognizer> checked);
  void worker_main(Worker& w);
  void run_batch(Worker& w, nn::Recognizer& model, Batch& b);
  // A batch's logits (T, N, C) read by the options' decoder, each line to its own length.
  std::vector<nn::Decoded> decode(const Tensor& logits, const std::vector<int64_t>& lengths) const;
  std::vector<nn::Decoded> beam(const Tensor& logits, const std::vector<int64_t>& lengths) const;  // every line
};

namespace {

// Checks the options; returns how many of the workers are CPUs.
int check_options(const PredictorOptions& o) {
  OCRT_CHECK(!o.devices.empty(), "Predictor: no devices given");
  int cpu_workers = 0;
  for (size_t i = 0; i < o.devices.size(); ++i) {
    const Device& d = o.devices[i];
    validate(d);  // lists the devices that exist when this one does not
    cpu_workers += d.is_cpu();
    for (size_t j = 0; j < i; ++j)
      OCRT_CHECK(d.is_cpu() || o.devices[j] != d, "device ", d.str(),
                 " is listed twice: a GPU is driven by one worker thread (only cpu may repeat)");
  }
  OCRT_CHECK(o.batch >= 1, "batch size must be >= 1, got ", o.batch);
  OCRT_CHECK(o.beam_width >= 1, "beam width must be >= 1, got ", o.beam_width);
  OCRT_CHECK(o.lm_path.empty() || o.decoder == Decoder::beam,
             "a language model is used by beam search only (the beam decoder; ocrt-infer --decoder beam or auto)");
  OCRT_CHECK(o.lm_uniform >= 0 && o.lm_uniform < 1, "LM uniform share must be in [0, 1), got ", o.lm_uniform);
  OCRT_CHECK(o.beam_doubt >= 0 && o.beam_doubt <= 1, "beam doubt must be a probability in [0, 1], got ", o.beam_doubt);
  OCRT_CHECK(std::isfinite(o.lm_weight) && o.lm_weight >= 0 && std::isfinite(o.lm_bonus),
             "LM weight must be finite and >= 0 and LM bonus finite, got ", o.lm_weight, " and ", o.lm_bonus);
  OCRT_CHECK(o.threads >= 0, "thread count must be >= 1 (or 0 for the default), got ", o.threads);
  OCRT_CHECK(o.cpu_workers >= 0, "CPU workers must be >= 1 (or 0 for auto), got ", o.cpu_workers);
  OCRT_CHECK(o.max_image_pixels >= 1, "the pixel budget of an image must be >= 1, got ", o.max_image_pixels);
  OCRT_CHECK(o.min_source_height >= 1 && o.min_width >= 1 && o.max_width >= o.min_width,
             "line limits must satisfy min_source_height >= 1 and 1 <= min_width <= max_width");
  OCRT_CHECK(o.arch.empty() || nn::is_known_arch(o.arch), "unknown architecture '", o.arch, "' (expected one of ",
             nn::known_archs_str(), ")");
  OCRT_CHECK(is_predictor_precision(o.precision), "unknown precision '", o.precision, "' (expected ",
             kPredictorPrecisions, ")");
  return cpu_workers;
}

// What the workers' products compute in (runtime/precision.h), and its name for the summary.
struct WorkerPrecision {
  Precision cpu = Precision::fp32, gpu = Precision::fp32;
  std::string name;
};

// "auto" is auto_cpu_precision on CPU workers (the model file's training record says whether
// bf16 reads its validation lines as well as fp32) and fp32 on GPU workers, and its name says
// why; fp32, tf32 and bf16 apply to every worker, but tf32 is a GPU format (CPU workers
// compute in fp32 beside GPU ones, and a run with CPU workers only refuses it) and bf16 on CPU
// workers needs AVX2 and FMA at least.
WorkerPrecision choose_precision(const PredictorOptions& o, CpuIsa cpu_path, int cpu_workers, const Json& training) {
  const int gpu_workers = (int)o.devices.size() - cpu_workers;
  WorkerPrecision w;
  std::string why;
  if (o.precision == "auto") {
    w.cpu = parse_precision(auto_cpu_precision(cpu_path, training, &why));
  } else if (o.precision == "int8") {  // an int8 file (checked by the caller): its float ops in fp32
    w.cpu = Precision::fp32;
  } else {
    w.cpu = w.gpu = parse_precision(o.precision);
    OCRT_CHECK(w.cpu != Precision::tf32 || gpu_workers > 0, "--precision tf32 is a GPU tensor-core format; CPU ",
               "workers compute in fp32 or bf16");
    if (w.cpu == Precision::tf32) w.cpu = Precision::fp32;
  }
  if (cpu_workers == 0) w.cpu = Precision::fp32;  // no CPU products to set
  OCRT_CHECK(w.cpu != Precision::bf16 || cpu_path != CpuIsa::generic,
             "--precision bf16 on CPU workers needs a CPU with AVX2 and FMA at least (this one runs the generic path)");
  if (gpu_workers == 0) w.name = precision_name(w.cpu);
  else if (cpu_workers == 0 || w.cpu == w.gpu) w.name = precision_name(w.gpu);
  else w.name = std::string("cpu ") + precision_name(w.cpu) + ", gpu " + precision_name(w.gpu);
  if (o.precision == "auto" && cpu_workers > 0) w.name += " (auto: " + why + ")";
  return w;
}

// The CER of `precision` in a training record's precision_cer, if it has a finite one.
std::optional<double> recorded_cer(const Json& training, const std::string& precision) {
  const Json* record = training.is_object() ? training.find("precision_cer") : nullptr;
  const Json* cer = record && record->is_object() ? record->find(precision) : nullptr;
  if (!cer || !cer->is_number() || !std::isfinite(cer->as_number()) || cer->as_number() < 0) return std::nullopt;
  return cer->as_number();
}

std::string percent(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f%%", 100 * v);
  return b;
}

}  // namespace

bool precision_validated(const Json& training, const std::string& precision, std::string* why) {
  const std::optional<double> base = recorded_cer(training, "fp32"), cer = recorded_cer(training, precision);
  std::string reason;
  bool ok = false;
  if (!training.is_object() || !training.contains("precision_cer"))
    reason = "the model file has no precision_cer record";
  else if (!base || !cer)
    reason = "the model file's precision_cer has no " + std::string(!base ? "fp32" : precision) + " CER";
  else {
    ok = *cer <= *base + kAutoCerMargin;
    reason = precision + " CER " + percent(*cer) + " against fp32's " + percent(*base) + (ok ? "" : ", over 0.05 points");
  }
  if (why) *why = reason;
  return ok;
}

std::string auto_cpu_precision(CpuIsa path, const Json& training, std::string* why) {
  if ((int)path < (int)CpuIsa::avx512bf16) {
    if (why) *why = std::string("the ") + cpu_isa_name(path) + " path has no bf16 instructions";
    return "fp32";
  }
  return precision_validated(training, "bf16", why) ? "bf16" : "fp32";
}

bool is_predictor_precision(const std::string& name) {
  return name == "fp32" || name == "tf32" || name == "bf16" || name == "int8" || name == "auto";
}

int auto_cpu_workers(int threads) { return std::clamp(threads, 1, kAutoCpuWorkers); }

int64_t cpu_batch_columns(int64_t first_channels) {
  return std::clamp(kCpuBatchChannelColumns / std::max<int64_t>(1, first_channels), kCpuBatchColumnsMin,
                    kCpuBatchColumnsMax);
}

std::vector<int64_t> fill_batches(const std::vector<int64_t>& widths, int64_t margin, int64_t max_lines,
                                  int64_t max_columns) {
  std::vector<int64_t> sizes;
  for (int64_t w : widths) {  // the widest so far, as the lines come sorted
    if (sizes.empty() || sizes.back() >= max_lines || (sizes.back() + 1) * (w + margin) > max_columns)
      sizes.push_back(0);
    ++sizes.back();
  }
  return sizes;
}

std::vector<int64_t> plan_batches(const std::vector<int64_t>& widths, int64_t margin, int64_t max_lines,
                                  int64_t max_columns, double overhead) {
  OCRT_CHECK(max_lines >= 1 && overhead >= 0, "plan_batches: max_lines must be >= 1 and overhead >= 0");
  OCRT_CHECK(std::is_sorted(widths.begin(), widths.end()), "plan_batches: the widths must come narrowest first");
  const size_t L = widths.size();
  // best[i]: the least cost of the first i lines; from[i]: where the last batch of that cut starts.
  // The last batch of lines [j, i) is as wide as line i - 1; j goes down from i - 1 while the
  // batch stays within the limits (one line always may).
  std::vector<double> best(L + 1, 0.0);
  std::vector<size_t> from(L + 1, 0);
  for (size_t i = 1; i <= L; ++i) {
    const double wide = (double)(widths[i - 1] + margin);
    best[i] = std::numeric_limits<double>::infinity();
    for (size_t j = i; j-- > 0;) {
      const int64_t n = (int64_t)(i - j);
      if (n > 1 && (n > max_lines || n * (widths[i - 1] + margin) > max_columns)) break;
      // Ties (up to rounding): the j found first, so that the last batch is the smallest.
      const double cost = best[j] + ((double)n + overhead) * wide;
      if (cost < best[i] * (1 - 1e-12)) best[i] = cost, from[i] = j;
    }
  }
  std::vector<int64_t> sizes;
  for (size_t i = L; i > 0; i = from[i]) sizes.push_back((int64_t)(i - from[i]));
  std::reverse(sizes.begin(), sizes.end());
  return sizes;
}

void Predictor::Impl::size_work(int cpu_workers, int64_t first_channels) {
  const PredictorOptions& o = p.opt_;
  threads = o.threads > 0 ? o.threads : default_num_threads();
  cpu_share = std::max(1, threads / std::max(1, cpu_workers));
  if (cpu_workers > 0) {
    std::lock_guard<std::mutex> lock(g_thread_count_mu);
    saved_eigen_threads = Eigen::nbThreads();
  }
  mixed = cpu_workers > 0 && cpu_workers < (int)o.devices.size();
  // A batch's columns bound its memory (crnn's first conv holds 64 x 32 floats a column). On
  // CPUs alone the default follows the model's first channels (cpu_batch_columns): as fast as
  // larger batches or faster, in less memory (bench/results/infer-cpu.md); a GPU wants its
  // batches full.
  cpu_only = cpu_workers == (int)o.devices.size();
  cpu_pool = cpu_only && cpu_workers > 1 && threads > cpu_share;
  max_batch_columns = o.max_batch_columns > 0 ? o.max_batch_columns
                      : cpu_only               ? cpu_batch_columns(first_channels)
                                               : o.batch * 2048;
  chunk_devices = cpu_pool ? 1 : (int64_t)o.devices.size();
  chunk_lines = o.chunk_lines > 0 ? o.chunk_lines : std::max<int64_t>(1024, 8 * o.batch * chunk_devices);
}

void Predictor::Impl::start_workers(std::shared_ptr<nn::Recognizer> checked) {
  for (size_t i = 0; i < p.opt_.devices.size(); ++i) {
    auto w = std::make_unique<Worker>();
    w->index = (int)i;
    w->device = p.opt_.devices[i];
    w->stats.device = w->device;
    if (w->device.is_cpu()) w->model = checked;  // one model for every CPU worker (see worker_main)
    workers.push_back(std::move(w));
  }
  for (auto& w : workers) {
    Worker* wp = w.get();
    w->thread = std::thread([this, wp] { worker_main(*wp); });
  }
  std::unique_lock<std::mutex> lock(mu);
  done_cv.wait(lock, [&] { return std::all_of(workers.begin(), workers.end(), [](const auto& w) { return w->ready; }); });
  for (const auto& w : workers)
    OCRT_CHECK(w->setup_error.empty(), "cannot set up the model on ", w->device.str(), ": ", w->setup_error);
  weights.clear();  // every worker has its model: the file's copy of the weights is not needed again
}

namespace {

// A language model file loaded once per process while some predictor holds it: predictors that
// name the same file (the same path, size and modification time) share one read-only copy.
std::shared_ptr<const nn::CharLM> shared_language_model(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const nn::CharLM>> loaded;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const auto when = std::filesystem::last_write_time(path, ec);
  std::string key;
  if (!ec) {
    key = std::filesystem::absolute(path).lexically_normal().string();
    key.append("|").append(std::to_string(size)).append("|").append(std::to_string(when.time_since_epoch().count()));
  }
  std::lock_guard<std::mutex> lock(mu);
  if (!key.empty())
    if (auto lm = loaded[key].lock()) return lm;
  auto lm = std::make_shared<const nn::CharLM>(nn::CharLM::load(path));  // throws naming the file
  if (!key.empty()) loaded[key] = lm;
  return lm;
}

}  // namespace

Predictor::Predictor(const std::string& model_path, PredictorOptions options)
    : opt_(std::move(options)), model_path_(model_path) {
  int cpu_workers = check_options(opt_);
  cpu_path_ = cpu_isa();  // OCRT_CPU_ISA is checked here, before any work

  // The model file (read as ocrt-export reads it: infer/model_loader.h), built once here to
  // check it; the CPU workers share it, GPU workers build their own copies from its weights.
  LoadedModel loaded = load_model(model_path, opt_.arch, opt_.charset_path);
  const bool int8_file = nn::is_int8_state_dict(loaded.weights);
  OCRT_CHECK(opt_.precision != "int8" || int8_file, "--precision int8 reads an int8 model file, and ", model_path,
             " is a float one: make an int8 file of it with ocrt-quantize (docs/int8.md)");
  const WorkerPrecision precision = choose_precision(opt_, cpu_path_, cpu_workers, loaded.training);
  precision_ = precision.name;
  cpu::set_matmul_precision(cpu_precision_for(precision.cpu));
  set_gpu_precision(precision.gpu);
  if (int8_file) {
    // models/int8.h: the int8 kernels are the CPU's; a GPU would compute in float32 from the
    // dequantized weights, which is not what the file was made for.
    for (const Device& d : opt_.devices)
      OCRT_CHECK(d.is_cpu(), model_path, " is an int8 model file, which runs on the CPU only (not on ", d.str(),
                 "): use the float model file on GPUs");
    OCRT_CHECK(opt_.precision == "fp32" || opt_.precision == "auto" || opt_.precision == "int8", model_path,
               " is an int8 model file: it computes in int8, and --precision ", opt_.precision, " does not apply");
    precision_ = "int8 (" + cpu::int8_path_description() + ")";
    if (opt_.precision == "auto") {  // an int8 file computes in int8; auto says what its record says
      std::string why;
      precision_validated(loaded.training, "int8", &why);
      precision_ += " (auto: " + why + ")";
    }
  }
  if (opt_.devices.size() == 1 && opt_.devices[0].is_cpu() && opt_.cpu_workers != 1) {
    const int threads = opt_.threads > 0 ? opt_.threads : default_num_threads();
    const int n = opt_.cpu_workers > 0 ? std::min(opt_.cpu_workers, threads) : auto_cpu_workers(threads);
    opt_.devices.assign((size_t)n, Device::cpu());
    cpu_workers = n;
  }
  for (const auto& [name, t] : loaded.weights) model_bytes_ += t.numel() * (int64_t)dtype_size(t.dtype());
  arch_ = loaded.arch;
  config_ = loaded.config;
  charset_ = loaded.charset;
  if (!opt_.lm_path.empty()) {
    lm_ = shared_language_model(opt_.lm_path);
    lm_ids_ = nn::lm_ids_for(*lm_, charset_.chars());
    const int32_t other = lm_->vocab_size() + 1;
    if (opt_.lm_if_known && std::find(lm_ids_.begin() + 1, lm_ids_.end(), other) != lm_ids_.end()) {
      lm_.reset();
      lm_ids_.clear();
      opt_.lm_path.clear();
      opt_.decoder = Decoder::greedy;
    }
  }
  impl_ = std::make_unique<Impl>(*this);
  Impl& s = *impl_;
  s.spec = input_spec(loaded.input, model_path, s.height);
  // Inference only: an int8 file's layers keep no float32 copy of their weights (a predictor
  // computes on the CPU without gradients, where they are never read).
  std::shared_ptr<nn::Recognizer> checked = build_model(loaded, /*inference_only=*/true);
  s.weights = std::move(loaded.weights);
  const int64_t m = s.spec.width_multiple;
  s.right_margin = (checked->right_context() + m - 1) / m * m;

  s.size_work(cpu_workers, checked->first_channels());
  // Each GPU worker sets up its own model copy on its GPU, in its own thread (on a throw,
  // impl_ is destroyed as a member: ~Impl stops and joins the workers).
  s.start_workers(std::move(checked));
}

Predictor::~Predictor() = default;

void Predictor::Impl::worker_main(Worker& w) {
  std::shared_ptr<nn::Recognizer> model;
  try {
    if (w.device.is_cpu()) {
      std::lock_guard<std::mutex> lock(g_thread_count_mu);
      set_num_threads(cpu_share);
    }
    model = w.model ? std::move(w.model) : build_model(p.arch_, p.config_, weights, /*inference_only=*/true);
    const DeviceTurn turn(w.device);  // other predictors may share this GPU (page lanes)
    model->to(w.device);  // the first CUDA call for this GPU happens here, in its own thread
    if (w.device.is_cuda()) cuda_synchronize(w.device.index);
  } catch (const std::exception& e) {
    w.setup_error = e.what();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    w.ready = true;
  }
  done_cv.notify_all();
  if (!w.setup_error.empty()) return;

  NoGradGuard no_grad;  // grad mode is per thread
  const bool pooled = cpu_pool && w.device.is_cpu();
  for (;;) {
    Batch b;
    int use = cpu_share;  // threads for this batch (cpu_pool)
    {
      std::unique_lock<std::mutex> lock(mu);
      work_cv.wait(lock, [&] { return stop || (!queue.empty() && (!pooled || threads_busy + cpu_share <= threads)); });
      if (stop) return;
      b = take(w);
      if (pooled) {
        if (queue.empty() && threads_busy == 0) use = threads;  // alone: every thread
        threads_busy += use;
      }
    }
    if (pooled && use != omp_get_max_threads()) omp_set_num_threads(use);  // this thread's own setting
    const double columns = b.columns();
    const auto t0 = Clock::now();
    int lent = 0;  // threads lent for this batch besides `use` (PredictorOptions::borrow_threads)
    {
      const LentThreads scope(w.device.is_cpu() && p.opt_.borrow_threads ? p.opt_.borrow_threads() : 0);
      lent = scope.extra();
      run_batch(w, *model, b);
    }
    const double busy = seconds_since(t0);
    {
      std::lock_guard<std::mutex> lock(mu);
      w.stats.lines += (int64_t)b.lines.size();
      w.stats.batches += 1;
      w.stats.batches_on_all_threads += use + lent > cpu_share;
      w.stats.busy_seconds += busy;
      // The speed that shares a batch between workers: measured on the worker's own threads.
      if (busy > 0 && use + lent == cpu_share) w.speed = columns / busy;
      b.chunk->pending -= 1;
      if (pooled) threads_busy -= use;
    }
    done_cv.notify_all();
    if (pooled) work_cv.notify_all();  // threads are free for a waiting worker
  }
}

// The front batch of the queue, or its first lines when this worker is too slow to take all of
// it (lines_to_take in predictor.h). Called with mu held.
Batch Predictor::Impl::take(const Worker& w) {
  Batch& front = queue.front();
  const int64_t n = (int64_t)front.lines.size();
  int64_t k = n;
  // Workers that split one CPU are alike: never split a batch between them (a speed measured on
  // a batch of one short line understates a worker's and would, by timing alone, split others).
  if (workers.size() > 1 && n > 1 && !cpu_pool) {
    double fastest = 0;
    bool gpu_measured = false;
    for (const auto& o : workers) {
      fastest = std::max(fastest, o->speed);
      gpu_measured = gpu_measured || (o->device.is_cuda() && o->speed > 0);
    }
    if (mixed && w.device.is_cpu() && (w.speed == 0 || !gpu_measured))
      k = std::min(n, std::max<int64_t>(1, p.opt_.batch / 8));  // a first, small piece
    else if (w.speed > 0)
      k = lines_to_take(n, front.columns() / w.speed, front.columns() / fastest);
  }
  if (k >= n) {
    Batch b = std::move(front);
    queue.pop_front();
    return b;
  }
  // The narrowest k lines (a batch holds its lines narrowest first); the rest stays in front.
  Batch piece{front.chunk, std::vector<int64_t>(front.lines.begin(), front.lines.begin() + k), 0};
  piece.width = padded_width(front.chunk->images[(size_t)front.lines[(size_t)k - 1]].width, spec.width_multiple);
  front.lines.erase(front.lines.begin(), front.lines.begin() + k);
  front.chunk->pending += 1;  // one batch more for this chunk
  return piece;
}

void Predictor::Impl::run_batch(Worker& w, nn::Recognizer& model, Batch& b) {
  Chunk& chunk = *b.chunk;
  try {
    std::vector<GrayImage> images;
    for (int64_t i : b.lines) images.push_back(std::move(chunk.images[(size_t)i]));
    std::vector<int64_t> widths;
    const Tensor packed = pack_batch(images, spec, &widths);  // (N, 1, H, W), white past each line
    const int64_t N = packed.size(0), W = packed.size(3);
    // b.margin more white columns, so that the widest line sees white too (predictor.h).
    const double white = spec.pad_value * spec.scale + spec.offset;
    Tensor x = Tensor::full({N, 1, height, W + b.margin}, white);
    x.narrow(3, 0, W).copy_(packed);
    std::vector<int64_t> lengths;
    for (int64_t width : widths) lengths.push_back(model.frames_for_width(width));
    // The GPU's part under its turn (DeviceTurn: other predictors may share the GPU): the
    // forward, and the greedy decoding's arithmetic, which runs on the logits where they are.
    // A beam search is CPU work: the logits come to the host and it runs after the turn.
    const bool on_host = p.opt_.decoder == Decoder::beam || p.opt_.keep_logits;
    Tensor logits;
    std::vector<nn::Decoded> decoded;
    {
      const DeviceTurn turn(w.device);
      logits = model.forward(x.to(w.device), widths);  // (T, N, C)
      if (on_host) logits = logits.to(Device::cpu());
      else decoded = decode(logits, lengths);
    }
    if (on_host) decoded = decode(logits, lengths);
    for (int64_t n = 0; n < N; ++n) {
      const int64_t line = b.lines[(size_t)n];
      LineResult& r = chunk.results[(size_t)line];
      const nn::Decoded& d = decoded[(size_t)n];
      r.text = p.charset_.decode(d.labels);
      r.confidence = d.confidence;
      r.width = widths[(size_t)n];
      r.worker = w.index;
      // Frame t is centred on an input column that the model knows (frame_center), which maps
      // back to the source image by its resize factor.
      const double to_source = (double)chunk.source_widths[(size_t)line] / (double)images[(size_t)n].width;
      for (size_t k = 0; k < d.labels.size(); ++k) {
        const double x_in = std::min(model.frame_center(d.frames[k]), (double)images[(size_t)n].width);
        r.chars.push_back(
            {p.charset_.chars()[(size_t)d.labels[k] - 1], d.frames[k], x_in * to_source, d.char_confidence[k]});
      }
      if (p.opt_.keep_logits)
        r.logits = logits.narrow(0, 0, lengths[(size_t)n]).select(1, n).clone().to(Device::cpu());
      // NaN or infinite outputs (finite weights can still overflow): the line fails on its own,
      // so that no writer meets a number it cannot write.
      bool finite = std::isfinite(r.confidence);
      for (const auto& c : r.chars) finite = finite && std::isfinite(c.x) && std::isfinite(c.confidence);
      if (!finite) {
        LineResult failed;
        failed.name = r.name;
        failed.error = r.name + ": recognition on " + w.device.str() + " gave non-finite numbers (confidence " +
                       std::to_string(r.confidence) + "); the model's output is unusable";
        r = std::move(failed);
      }
    }
  } catch (const std::exception& e) {
    for (int64_t i : b.lines) {
      LineResult& r = chunk.results[(size_t)i];
      LineResult failed;
      failed.name = r.name;
      r = std::move(failed);
      r.error = r.name + ": recognition failed on " + w.device.str() + ": " + e.what();
    }
  }
}

std::vector<nn::Decoded> Predictor::Impl::decode(const Tensor& logits, const std::vector<int64_t>& lengths) const {
  if (p.opt_.decoder != Decoder::beam) return nn::ctc_greedy_decode(logits, lengths);
  if (p.opt_.beam_doubt > 0) {
    // Greedy first; the beam reads, as a batch of their own, only the lines with a frame where
    // the runner-up class reaches beam_doubt: elsewhere one class dominates every frame.
    std::vector<nn::Decoded> out = nn::ctc_greedy_decode(logits, lengths);
    const Tensor lp = log_softmax(logits.to(Device::cpu()).to(DType::f32), -1).contiguous();  // (T, N, C)
    const int64_t T = lp.size(0), N = lp.size(1), C = lp.size(2);
    const float* q = lp.data<float>();
    const float floor = (float)std::log(p.opt_.beam_doubt);
    std::vector<int64_t> unsure, unsure_lengths;
    for (int64_t n = 0; n < N; ++n) {
      const int64_t len = lengths.empty() ? T : lengths[(size_t)n];
      bool doubt = false;
      for (int64_t t = 0; t < len && !doubt; ++t) {
        const float* f = q + (t * N + n) * C;
        float first = -INFINITY, second = -INFINITY;
        for (int64_t c = 0; c < C; ++c)
          if (f[c] > first) second = first, first = f[c];
          else if (f[c] > second) second = f[c];
        doubt = second >= floor;
      }
      if (doubt) unsure.push_back(n), unsure_lengths.push_back(len);
    }
    if (unsure.empty()) return out;
    const Tensor idx = Tensor::from_vector(unsure, {(int64_t)unsure.size()});
    std::vector<nn::Decoded> again = beam(index_select(logits, 1, idx.to(logits.device())), unsure_lengths);
    for (size_t k = 0; k < unsure.size(); ++k) out[(size_t)unsure[k]] = std::move(again[k]);
    return out;
  }
  return beam(logits, lengths);
}

std::vector<nn::Decoded> Predictor::Impl::beam(const Tensor& logits, const std::vector<int64_t>& lengths) const {
  nn::BeamOptions bo;
  bo.beam_width = p.opt_.beam_width;
  if (p.lm_) {
    bo.lm = p.lm_.get();
    bo.lm_ids = p.lm_ids_;
    bo.lm_weight = p.opt_.lm_weight;
    bo.lm_bonus = p.opt_.lm_bonus;
    bo.lm_uniform = p.opt_.lm_uniform;
  }
  return nn::ctc_beam_decode(logits, bo, lengths);
}

std::vector<Batch> Predictor::Impl::prepare(Chunk& c) const {
  const int64_t n = (int64_t)c.inputs.size();
  c.results.assign((size_t)n, LineResult{});
  c.images.assign((size_t)n, GrayImage{});
  c.source_widths.assign((size_t)n, 0);
  c.blank.assign((size_t)n, 0);
  // Decoding, resizing and the line checks (normalize_line in runtime/image.h), one line per
  // iteration.
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) prepare_line(c, i);
  return batches_of(c);
}

void Predictor::Impl::prepare_line(Chunk& c, int64_t i) const {
  const PredictorOptions& o = p.opt_;
  LineInput& in = c.inputs[(size_t)i];
  LineResult& r = c.results[(size_t)i];
  r.name = in.name;
  try {
    GrayImage src = in.image ? std::move(*in.image) : load_gray_image(in.name, o.max_image_pixels);
    OCRT_CHECK(src.width >= 1 && src.height >= 1 && (int64_t)src.pixels.size() == src.width * src.height, in.name,
               ": the image is empty or inconsistent (", src.width, "x", src.height, ")");
    c.source_widths[(size_t)i] = src.width;
    bool fits = true;
    try {
      OCRT_CHECK(src.height >= o.min_source_height, in.name, ": the image is too small for a text line (", src.width,
                 "x", src.height, "; at least ", o.min_source_height, " pixels high)");
      // The width resize_to_height will give (the same formula), checked before any work.
      const int64_t w = src.height == height ? src.width
                                             : std::max<int64_t>(1, std::llround((double)src.width * (double)height /
                                                                                (double)src.height));
      OCRT_CHECK(w >= o.min_width, in.name, ": the image is too narrow for a text line (", src.width, "x", src.height,
                 " becomes ", w, "x", height, "; at least ", o.min_width, " wide is needed)");
      OCRT_CHECK(w <= o.max_width, in.name, ": the image is too wide (", src.width, "x", src.height, " becomes ", w,
                 "x", height, ", more than the ", o.max_width, " pixels a line may have; split the line)");
    } catch (const Error&) {
      // An image of one flat tone holds no text whatever its size (a 1x1 crop, say): it reads
      // as "". Any other image outside the limits keeps its error.
      if (!o.normalize.enabled || !is_uniform(src, o.normalize.ink_threshold)) throw;
      fits = false;
    }
    LineNormalization checks;
    if (fits) c.images[(size_t)i] = normalize_line(resize_to_height(src, height), o.normalize, &checks);
    if (!fits || checks.blank) {
      c.blank[(size_t)i] = 1;
      c.images[(size_t)i] = GrayImage{};
      r.confidence = 1;  // certain: there is no ink
    }
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  in.image.reset();
}

std::vector<Batch> Predictor::Impl::batches_of(Chunk& c) const {
  // Blank lines are done already (empty text, no model); the others, sorted by width, are cut
  // into batches of similar widths.
  std::vector<int64_t> order;
  for (int64_t i = 0; i < (int64_t)c.results.size(); ++i)
    if (c.results[(size_t)i].ok() && !c.blank[(size_t)i]) order.push_back(i);
  auto width_of = [&](int64_t i) { return padded_width(c.images[(size_t)i].width, spec.width_multiple); };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return width_of(a) < width_of(b); });
  std::vector<int64_t> widths;
  for (int64_t i : order) widths.push_back(width_of(i));
  const std::vector<int64_t> sizes =
      cpu_only ? plan_batches(widths, right_margin, p.opt_.batch, c.max_batch_columns, kCpuBatchOverhead)
               : fill_batches(widths, right_margin, p.opt_.batch, c.max_batch_columns);
  std::vector<Batch> batches;
  size_t at = 0;
  for (int64_t n : sizes) {
    Batch b{&c, std::vector<int64_t>(order.begin() + (int64_t)at, order.begin() + (int64_t)at + n), 0, right_margin};
    at += (size_t)n;
    b.width = widths[at - 1];
    batches.push_back(std::move(b));
  }
  // The costliest batches first: the workers then end at about the same time.
  std::stable_sort(batches.begin(), batches.end(), [](const Batch& a, const Batch& b) {
    return (int64_t)a.lines.size() * a.width > (int64_t)b.lines.size() * b.width;
  });
  return batches;
}

RunStats Predictor::run(const std::function<bool(LineInput&)>& next,
                        const std::function<void(int64_t, LineResult&&)>& sink, int64_t max_batch_columns) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> run_lock(s.run_mu);
  const auto t0 = Clock::now();
  RunStats stats;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto& w : s.workers) w->stats = WorkerStats{w->device};
  }

  // The run's cap is for the host's memory: GPU workers alone keep the predictor's own (small
  // batches leave a GPU waiting on the host between them).
  const bool cpu_worker =
      std::any_of(s.workers.begin(), s.workers.end(), [](const auto& w) { return w->device.is_cpu(); });
  // The first chunk is small unless the options size chunks: the workers start on its few
  // batches while the main thread decodes the next chunk, instead of waiting for a thousand
  // lines to be decoded (300 lines at batch 32 on 2 cores: 4% of the run was that wait).
  const int64_t first_chunk =
      opt_.chunk_lines > 0 ? s.chunk_lines : std::min(s.chunk_lines, 2 * opt_.batch * s.chunk_devices);
  auto read_chunk = [&](int64_t first) {
    auto c = std::make_unique<Chunk>();
    c->first = first;
    c->max_batch_columns = max_batch_columns > 0 && cpu_worker ? std::min(max_batch_columns, s.max_batch_columns)
                                                               : s.max_batch_columns;
    const int64_t limit = first == 0 ? first_chunk : s.chunk_lines;
    LineInput in;
    while ((int64_t)c->inputs.size() < limit && next(in)) {
      c->inputs.push_back(std::move(in));
      in = LineInput{};
    }
    return c;
  };
  auto submit = [&](Chunk& c) {
    std::vector<Batch> batches = s.prepare(c);
    {
      std::lock_guard<std::mutex> lock(s.mu);
      c.pending = (int64_t)batches.size();
      for (auto& b : batches) s.queue.push_back(std::move(b));
    }
    s.work_cv.notify_all();
  };
  auto wait_for = [&](Chunk& c) {
    std::unique_lock<std::mutex> lock(s.mu);
    s.done_cv.wait(lock, [&] { return c.pending == 0; });
  };

  // Two chunks in flight at most: the next is read and decoded while the workers run this one.
  std::deque<std::unique_ptr<Chunk>> inflight;
  try {
    inflight.push_back(read_chunk(0));
    submit(*inflight.back());
    while (!inflight.empty()) {
      Chunk& cur = *inflight.front();
      if (!cur.inputs.empty() && inflight.size() == 1) {
        inflight.push_back(read_chunk(cur.first + (int64_t)cur.inputs.size()));
        if (!inflight.back()->inputs.empty()) submit(*inflight.back());
      }
      wait_for(cur);
      for (size_t i = 0; i < cur.results.size(); ++i) {
        stats.failed += !cur.results[i].ok();
        sink(cur.first + (int64_t)i, std::move(cur.results[i]));
      }
      stats.lines += (int64_t)cur.results.size();
      inflight.pop_front();
      if (!inflight.empty() && inflight.front()->inputs.empty()) inflight.pop_front();
    }
  } catch (...) {
    // The workers may still hold batches of the chunks in flight: let them finish first.
    for (auto& c : inflight) wait_for(*c);
    throw;
  }
  stats.seconds = seconds_since(t0);
  stats.cpu_path = cpu_isa_name(cpu_path_);
  stats.precision = precision_;
  stats.decoding = decoding();
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto& w : s.workers) stats.workers.push_back(w->stats);
  return stats;
}

std::vector<LineResult> Predictor::recognize(const std::vector<LineInput>& lines) {
  std::vector<LineResult> out(lines.size());
  size_t i = 0;
  run(
      [&](LineInput& in) {
        if (i == lines.size()) return false;
        in = lines[i++];
        return true;
      },
      [&](int64_t index, LineResult&& r) { out[(size_t)index] = std::move(r); });
  return out;
}

std::vector<LineResult> Predictor::recognize(const std::vector<std::string>& paths) {
  std::vector<LineInput> lines;
  for (const auto& p : paths) lines.push_back({p, std::nullopt});
  return recognize(lines);
}

}  // namespace ocrt::infer
