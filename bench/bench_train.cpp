// CRNN training throughput: samples/s and peak RSS of whole training steps, as the CRNN issue
// asks (on the CPU: batch 32, 32 x 128 lines, 2 threads; on a GPU with --device cuda:0: batch
// 256, each phase timed after a device synchronisation). bench/torch_train.py runs the same
// steps with the PyTorch reference module (tools/reference/crnn.py); its --compare prints the
// side-by-side table (bench/README.md, results in bench/results/train-cpu.md).
//
//   bench_train [--arch crnn|crnn-s|svtr-lite|both] [--batch 32] [--width 128] [--threads 2]
//               [--steps 20] [--warmup 3] [--seed 1] [--phases] [--json FILE] [--device cpu|cuda:N]
//               [--conv fast|exact] [--precision fp32|tf32|bf16]
//
// One step is what train/trainer.cpp does per batch: forward in train mode (every line's width
// = --width), ctc_loss_from_logits (mean, zero_infinity), backward, clip_grad_norm(5), AdamW
// (lr 1e-3, weight decay 1e-4, the trainer's defaults), zero_grad. The batch is drawn once
// (images uniform in [-1, 1], targets of T/3 +- 2 labels in [1, 95], T = width/4 + 1) and reused
// every step, so the data costs nothing. --warmup steps, then --steps timed ones; the median step
// time gives samples/s. Peak RSS is getrusage's ru_maxrss at the end: it is a per-process
// high-water mark, so with --arch both each preset runs in a child process (this program
// re-executed with --arch <preset>) and reports its own. The JSON also has the peak of live
// tensor bytes and the allocator cache, which say how much of the RSS is tensors.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "models/crnn.h"
#include "models/recognizer.h"
#include "ops/conv.h"
#include "ops/ctc.h"
#include "ops/random.h"
#include "runtime/cpu_allocator.h"
#include "runtime/json.h"
#include "runtime/precision.h"
#include "runtime/cuda/cuda_glue.h"
#include "runtime/threading.h"
#include "train/optim.h"
#include "timing.h"

using namespace ocrt;

namespace {

struct Settings {
  std::string arch = "both";
  int64_t batch = 32, width = 128;
  int threads = 2, steps = 20, warmup = 3;
  uint64_t seed = 1;
  bool phases = false;
  std::string json;
  Device device = Device::cpu();  // cuda:N: the GPU comparison (batch 256 in the CRNN issue)
};

// The phases of one step, in seconds.
struct Phases {
  double forward = 0, loss = 0, backward = 0, clip = 0, optim = 0;
  double total() const { return forward + loss + backward + clip + optim; }
};



// Trains one preset for warmup + steps steps; returns its result as a JSON object.
Json run_arch(const Settings& s) {
  const double rss_start = bench::peak_rss_mib();
  Generator gen(s.seed);
  const int64_t classes = 96;  // blank + 95 characters, as the English charset
  std::shared_ptr<nn::Recognizer> net = nn::make_recognizer(s.arch, classes, gen);
  nn::Recognizer& model = *net;
  model.to(s.device);
  model.train(true);
  train::AdamOptions ao;
  ao.lr = 1e-3, ao.weight_decay = 1e-4;
  train::Adam optim(model.parameters(), ao, /*decoupled_weight_decay=*/true);

  const int64_t N = s.batch, W = s.width, T = model.frames_for_width(W);
  const Tensor x = uniform({N, 1, 32, W}, -1.0, 1.0, gen).to(s.device);
  // GPU work is asynchronous: each phase waits for it before reading the clock.
  auto sync = [&] {
    if (s.device.is_cuda()) cuda_synchronize(s.device.index);
  };
  const std::vector<int64_t> widths((size_t)N, W), input_lengths((size_t)N, T);
  std::vector<int64_t> targets, target_lengths;
  const int64_t mid = std::max<int64_t>(3, T / 3);
  for (int64_t n = 0; n < N; ++n) {
    target_lengths.push_back(mid - 2 + (int64_t)(gen.next_u64() % 5));
    for (int64_t k = 0; k < target_lengths.back(); ++k) targets.push_back(1 + (int64_t)(gen.next_u64() % 95));
  }
  const Tensor tg = Tensor::from_vector(targets);
  CTCLossOptions co;
  co.reduction = Reduction::mean;
  co.zero_infinity = true;

  std::vector<Phases> timed;
  double last_loss = 0;
  for (int i = 0; i < s.warmup + s.steps; ++i) {
    Phases p;
    double t0 = bench::now_seconds();
    Tensor logits = model.forward(x, widths);
    sync();
    double t1 = bench::now_seconds();
    p.forward = t1 - t0;
    Tensor loss = ctc_loss_from_logits(logits, tg, input_lengths, target_lengths, co);
    last_loss = loss.item();
    t0 = bench::now_seconds(), p.loss = t0 - t1;
    loss.backward();
    sync();
    t1 = bench::now_seconds(), p.backward = t1 - t0;
    train::clip_grad_norm(optim.params(), 5.0);
    sync();
    t0 = bench::now_seconds(), p.clip = t0 - t1;
    optim.step();
    optim.zero_grad();
    sync();
    p.optim = bench::now_seconds() - t0;
    if (i >= s.warmup) timed.push_back(p);
  }

  auto med = [&](double Phases::*f) {
    std::vector<double> v;
    for (const Phases& p : timed) v.push_back(1e3 * (p.*f));
    return bench::median(v);
  };
  std::vector<double> ms;
  for (const Phases& p : timed) ms.push_back(1e3 * p.total());
  const double step_ms = bench::median(ms);
  Json ph = Json::object();
  ph.set("forward", med(&Phases::forward));
  ph.set("loss", med(&Phases::loss));
  ph.set("backward", med(&Phases::backward));
  ph.set("clip", med(&Phases::clip));
  ph.set("optim", med(&Phases::optim));
  Json r = Json::object();
  r.set("arch", s.arch);
  r.set("device", s.device.str());
  r.set("params", model.num_parameters());
  r.set("ms_median", step_ms);
  r.set("ms_min", *std::min_element(ms.begin(), ms.end()));
  r.set("ms_max", *std::max_element(ms.begin(), ms.end()));
  r.set("samples_per_s", 1e3 * (double)N / step_ms);
  r.set("peak_rss_mib", bench::peak_rss_mib());
  r.set("rss_before_model_mib", rss_start);
  // Of the peak RSS: the most bytes live tensors held at once, and what the CPU allocator's
  // cache (runtime/cpu_allocator.h) holds at the end, free for reuse.
  const CpuMemoryStats mem = cpu_memory_stats();
  r.set("tensor_peak_mib", (double)mem.peak / (1 << 20));
  r.set("allocator_cached_mib", (double)mem.cached / (1 << 20));
  r.set("steps", s.steps);
  r.set("warmup", s.warmup);
  r.set("last_loss", last_loss);
  r.set("phases_ms", ph);
  return r;
}

void print_result(const Json& r, bool phases) {
  std::printf("%-7s %9.1f %10.1f - %7.1f %10.2f %10.0f\n", r.at("arch").as_string().c_str(),
              r.at("ms_median").as_number(), r.at("ms_min").as_number(), r.at("ms_max").as_number(),
              r.at("samples_per_s").as_number(), r.at("peak_rss_mib").as_number());
  if (phases) {
    const Json& p = r.at("phases_ms");
    std::printf("        median ms per phase: forward %.1f, loss %.1f, backward %.1f, clip %.1f, "
                "adamw+zero_grad %.1f\n",
                p.at("forward").as_number(), p.at("loss").as_number(), p.at("backward").as_number(),
                p.at("clip").as_number(), p.at("optim").as_number());
  }
  std::fflush(stdout);
}

// --arch both: each preset in its own process (this program, re-executed), so that each peak
// RSS is its own. The children write JSON to temporary files; returns their results.
Json run_children(const Settings& s, int argc, char** argv) {
  Json results = Json::array();
  for (const char* arch : {"crnn", "crnn-s"}) {
    const std::string tmp = "/tmp/bench_train." + std::to_string(getpid()) + "." + arch + ".json";
    std::vector<std::string> args = {argv[0]};
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if ((a == "--arch" || a == "--json") && i + 1 < argc) {
        ++i;
        continue;
      }
      if (a == "--phases") continue;  // the parent prints
      args.push_back(a);
    }
    args.insert(args.end(), {"--arch", arch, "--json", tmp, "--quiet"});
    std::vector<char*> cargs;
    for (std::string& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      execv("/proc/self/exe", cargs.data());
      std::perror("bench_train: execv");
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    OCRT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "bench_train: the run for --arch ", arch, " failed");
    std::ifstream in(tmp);
    std::stringstream ss;
    ss << in.rdbuf();
    std::remove(tmp.c_str());
    Json r = parse_json(ss.str()).at("results")[0];
    print_result(r, s.phases);
    results.push_back(r);
  }
  return results;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  Precision precision = Precision::fp32;
  bool quiet = false;  // set for the children of --arch both: the parent prints their rows
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: bench_train [--arch crnn|crnn-s|both] [--batch 32] [--width 128] [--threads 2]\n"
          "                   [--steps 20] [--warmup 3] [--seed 1] [--phases] [--json FILE]\n"
          "                   [--device cpu|cuda:N] [--conv fast|exact] [--precision fp32|tf32|bf16]\n"
          "CRNN training steps on the CPU (forward, CTC from logits, backward, clip_grad_norm 5,\n"
          "AdamW, zero_grad) on one random batch of 32-pixel-high lines: median ms per step,\n"
          "samples/s and peak RSS (each preset in its own process with --arch both).\n"
          "--phases prints the median time of each phase of a step. --precision: the matrix\n"
          "products' (runtime/precision.h; tf32 on GPUs only). bench/torch_train.py is\n"
          "the PyTorch side.\n");
      return 0;
    } else if (a == "--arch" && next) {
      s.arch = argv[++i];
    } else if (a == "--batch" && next) {
      s.batch = std::atoll(argv[++i]);
    } else if (a == "--width" && next) {
      s.width = std::atoll(argv[++i]);
    } else if (a == "--threads" && next) {
      s.threads = std::atoi(argv[++i]);
    } else if (a == "--steps" && next) {
      s.steps = std::atoi(argv[++i]);
    } else if (a == "--warmup" && next) {
      s.warmup = std::atoi(argv[++i]);
    } else if (a == "--seed" && next) {
      s.seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--json" && next) {
      s.json = argv[++i];
    } else if (a == "--device" && next) {
      s.device = Device::parse(argv[++i]);
    } else if (a == "--conv" && next) {
      const std::string v = argv[++i];
      if (v != "fast" && v != "exact") {
        std::fprintf(stderr, "bench_train: --conv must be fast or exact, got '%s'\n", v.c_str());
        return 2;
      }
      set_conv_mode(parse_conv_mode(v));
    } else if (a == "--precision" && next) {
      try {
        precision = parse_precision(argv[++i]);
      } catch (const Error& e) {
        std::fprintf(stderr, "bench_train: --precision: %s\n", e.what());
        return 2;
      }
    } else if (a == "--phases") {
      s.phases = true;
    } else if (a == "--quiet") {
      quiet = true;
    } else {
      std::fprintf(stderr, "bench_train: unknown or incomplete argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (s.arch != "crnn" && s.arch != "crnn-s" && s.arch != "svtr-lite" && s.arch != "both") {
    std::fprintf(stderr, "bench_train: --arch must be crnn, crnn-s or both, got '%s'\n", s.arch.c_str());
    return 2;
  }
  if (s.batch < 1 || s.width < 4 || s.width % 4 || s.threads < 1 || s.steps < 1 || s.warmup < 0) {
    std::fprintf(stderr,
                 "bench_train: need --batch >= 1, --width a positive multiple of 4, --threads >= 1, "
                 "--steps >= 1, --warmup >= 0\n");
    return 2;
  }
  if (precision == Precision::tf32 && s.device.is_cpu()) {
    std::fprintf(stderr, "bench_train: --precision tf32 is a GPU format\n");
    return 2;
  }
  std::unique_ptr<PrecisionScope> precision_scope;
  try {
    precision_scope = std::make_unique<PrecisionScope>(precision);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_train: --precision: %s\n", e.what());
    return 2;
  }
  if (!quiet)
    std::printf("ocrt, %d thread%s, batch %lld, 32x%lld lines, %s products, %d warm-up + %d timed steps\n"
                "%-7s %9s %20s %10s %10s\n",
                s.threads, s.threads == 1 ? "" : "s", (long long)s.batch, (long long)s.width,
                precision_name(precision), s.warmup, s.steps,
                "arch", "ms/step", "min - max", "samples/s", "peak MiB");
  Json results = Json::array();
  if (s.arch == "both") {
    results = run_children(s, argc, argv);
  } else {
    set_num_threads(s.threads);
    results.push_back(run_arch(s));
    if (!quiet) print_result(results[0], s.phases);
  }
  if (!s.json.empty()) {
    Json j = Json::object();
    j.set("impl", "ocrt");
    j.set("threads", s.threads);
    j.set("batch", s.batch);
    j.set("width", s.width);
    j.set("conv", conv_mode_name(conv_mode()));
    j.set("precision", precision_name(precision));
    j.set("results", results);
    std::ofstream(s.json) << j.dump(1) << "\n";
  }
  return 0;
}
