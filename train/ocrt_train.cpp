// ocrt-train: trains a CRNN recogniser from label files, folders of .gt.txt pairs, or
// synthetic lines, on the CPU or one GPU. Every flag is validated before any work starts; the
// run ends with a one-line JSON summary on stdout (docs/cli.md has the full reference).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/cli.h"
#include "runtime/error.h"
#include "train/trainer.h"

using namespace ocrt;
using namespace ocrt::train;

namespace {

const char* kUsage = R"(usage: ocrt-train --train SOURCES [options]

Data
  --train SOURCES        comma-separated label files (path<TAB>text) and folders of
                         name.png + name.gt.txt pairs, or 'synth' for lines rendered on the fly
  --val SOURCES          the same for validation ('synth': rendered with --val-fonts)
  --charset FILE         one character per line (default: the 95 printable ASCII characters)
  --on-bad-sample skip|fail   what to do with samples that fail the start-up check (skip)
  --fonts PATHS          fonts (files or folders) for synthetic training lines (default: Debian's)
  --val-fonts PATHS      fonts for synthetic validation lines (default: as --fonts)
  --words FILE           word list for synthetic text (/usr/share/dict/words)
  --val-size N           synthetic validation lines (512)
  --prose FILES          text files (commas between) whose consecutive words make most synthetic
                         lines (60%; 20% structured items: dates, prices, e-mail, URLs, ...)
  --scan PRESET          scan simulation of synthetic lines before the resize: none (default),
                         scan (the training mix), or one effect: binarized, lowres, blur-noise,
                         jpeg, speckle, warped, paper, ink, crop
  --synth-chars MIN:MAX  characters per synthetic line (3:28)
  --synth-height LO:HI   glyph height in pixels before the resize to 32 (22:40)
  --synth-epoch N        synthetic lines per epoch (100000)
  --augment / --no-augment    blur, noise, contrast, rotation, morphology, padding (on)
  --no-shuffle           keep the file order

Model and optimisation
  --arch A               crnn, crnn-s or svtr-lite (crnn-s; docs/models.md)
  --init FILE            start from these weights (a model file)
  --batch N              (32)        --steps N (1000)        --epochs E (instead of --steps)
  --lr LR                (1e-3)      --optimizer sgd|adam|adamw (adamw)
  --weight-decay W       (1e-4)      --momentum M (0.9, sgd)
  --schedule constant|step|cosine|onecycle (cosine)   --warmup N (200 steps, cosine)
  --clip-grad NORM       clip the global gradient norm (5; 0: off)
  --seed S               (1): data order, augmentation and initial weights

Run
  --device cpu|cuda:N    (cpu)       --threads N (CPU threads)   --workers N (2 loader threads)
  --conv fast|exact      CPU 3x3 convolutions through Winograd (fast: about 1e-5 relative
                         rounding) or im2col (exact: about 1e-7); docs/ops/conv.md
  --precision fp32|bf16  CPU matrix products and convolutions, forward and backward, in float32
                         or bf16 (float32 sums, weights and optimizer state); docs/ops/gemm.md.
                         The CPU path taken (OCRT_CPU_ISA forces one) is in the summary
  --out DIR              checkpoints, metrics.jsonl, best.safetensors, worst/, report.html (run)
  --save-every N (1000)  --eval-every N (1000)  --log-every N (50)  --keep K (3 checkpoints)
  --worst N              keep the N validation lines read worst at each evaluation in
                         DIR/worst/, for DIR/report.html (16; 0: none)
  --resume               continue from the newest checkpoint in --out (same --seed); an error
                         when --out holds none
  --resume-if-present    the same, but start afresh when --out holds no checkpoint
  --stop-at N            save a checkpoint and stop once step N is done (to split a run)
  --max-minutes M        evaluate, save and stop after M minutes of wall time
  --bucket-window N      batch lines of similar width: sort within N batches (8; 0: off)
  --max-bad-steps N      stop after N steps in a row with a non-finite loss or gradient (20)

Data parallel (docs/distributed.md)
  --devices LIST         one replica per device in this process, e.g. cuda:0,cuda:1 (NCCL)
                         or cpu,cpu (shared memory); the global --batch is split between them
  mpirun -np N ocrt-train ...   one replica per process (MPI; NCCL between GPUs); there
                         --device cuda picks cuda:<local rank mod GPUs>
  --comm-timeout S       a collective waiting longer than S seconds for the slowest replica
                         ends the run with an error naming the rank (300)
  --overlap auto|on|off  sum gradient buckets during the backward pass (on) or after it (off);
                         auto: on for GPUs (NCCL), off for CPUs (the same result either way)
  --sync-batch-norm      BatchNorm statistics of the whole global batch, summed over replicas
                         (default: each replica its own shard's)
  --no-batch-norm        crnn/crnn-s without BatchNorm: a replica's lines never affect another's
  --fault R:S:WHAT       testing only: replica R hangs|exit|kill|throw at the start of step S
)";

using cli::parse_double;
using cli::parse_int;
using cli::split_list;

// A flag that takes one of a few names: the parser's error, prefixed with the flag.
template <class Parse>
auto choice(const std::string& flag, const std::string& text, Parse parse) {
  try {
    return parse(text);
  } catch (const Error& e) {
    fail(flag, ": ", e.what());
  }
}

TrainConfig parse_args(int argc, char** argv) {
  TrainConfig c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      OCRT_CHECK(i + 1 < argc, a, ": expects a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--train") c.train = split_list(value());
    else if (a == "--val") c.val = split_list(value());
    else if (a == "--charset") c.charset_path = value();
    else if (a == "--on-bad-sample") c.on_bad_sample = choice(a, value(), parse_on_bad_sample);
    else if (a == "--fonts") c.fonts = split_list(value());
    else if (a == "--val-fonts") c.val_fonts = split_list(value());
    else if (a == "--words") c.words = value();
    else if (a == "--prose") c.prose = split_list(value());
    else if (a == "--scan") c.scan = value();
    else if (a == "--synth-height") {
      const std::string v = value();
      const size_t colon = v.find(':');
      OCRT_CHECK(colon != std::string::npos, a, ": expected LO:HI, got '", v, "'");
      c.synth.min_pixel_height = parse_double(a, v.substr(0, colon));
      c.synth.max_pixel_height = parse_double(a, v.substr(colon + 1));
    }
    else if (a == "--val-size") c.val_size = parse_int(a, value());
    else if (a == "--synth-chars") {
      const std::string v = value();
      const size_t colon = v.find(':');
      OCRT_CHECK(colon != std::string::npos, a, ": expected MIN:MAX, got '", v, "'");
      c.synth.min_chars = parse_int(a, v.substr(0, colon));
      c.synth.max_chars = parse_int(a, v.substr(colon + 1));
    } else if (a == "--synth-epoch") c.synth.size = parse_int(a, value());
    else if (a == "--augment") c.augment = true;
    else if (a == "--no-augment") c.augment = false;
    else if (a == "--no-shuffle") c.shuffle = false;
    else if (a == "--arch") c.arch = value();
    else if (a == "--init") c.init = value();
    else if (a == "--batch") c.batch = parse_int(a, value());
    else if (a == "--steps") c.steps = parse_int(a, value());
    else if (a == "--epochs") c.epochs = parse_double(a, value());
    else if (a == "--lr") c.lr = parse_double(a, value());
    else if (a == "--optimizer") c.optimizer = choice(a, value(), parse_optimizer_kind);
    else if (a == "--weight-decay") c.weight_decay = parse_double(a, value());
    else if (a == "--momentum") c.momentum = parse_double(a, value());
    else if (a == "--schedule") c.schedule = choice(a, value(), parse_schedule_kind);
    else if (a == "--warmup") c.warmup = parse_int(a, value());
    else if (a == "--clip-grad") c.clip_grad = parse_double(a, value());
    else if (a == "--seed") c.seed = cli::parse_u64(a, value());  // -1 is an error, not 2^64 - 1
    else if (a == "--device") {
      const std::string v = value();
      c.device_from_local_rank = v == "cuda";
      c.device = c.device_from_local_rank ? Device::cuda(0) : Device::parse(v);
    } else if (a == "--devices") {
      c.devices.clear();
      for (const auto& d : split_list(value())) c.devices.push_back(Device::parse(d));
      OCRT_CHECK(!c.devices.empty(), "--devices: give at least one device");
    } else if (a == "--comm-timeout") c.comm_timeout = parse_double(a, value());
    else if (a == "--fault") set_fault_injection(value());  // tests of failure handling only
    else if (a == "--no-batch-norm") c.batch_norm = false;
    else if (a == "--overlap") c.overlap = choice(a, value(), parse_overlap);
    else if (a == "--conv") c.conv = choice(a, value(), parse_conv_mode);
    else if (a == "--precision") c.precision = choice(a, value(), cpu::parse_matmul_precision);
    else if (a == "--sync-batch-norm") c.sync_batch_norm = true;
    else if (a == "--threads") c.threads = (int)parse_int(a, value());
    else if (a == "--workers") c.workers = (int)parse_int(a, value());
    else if (a == "--out") c.out = value();
    else if (a == "--save-every") c.save_every = parse_int(a, value());
    else if (a == "--eval-every") c.eval_every = parse_int(a, value());
    else if (a == "--log-every") c.log_every = parse_int(a, value());
    else if (a == "--keep") c.keep = parse_int(a, value());
    else if (a == "--worst") c.worst_lines = parse_int(a, value());
    else if (a == "--resume") c.resume = true;
    else if (a == "--resume-if-present") c.resume_if_present = true;
    else if (a == "--stop-at") c.stop_at = parse_int(a, value());
    else if (a == "--max-minutes") c.max_minutes = parse_double(a, value());
    else if (a == "--bucket-window") c.bucket_window = parse_int(a, value());
    else if (a == "--max-bad-steps") c.max_bad_steps = parse_int(a, value());
    else fail("unknown option '", a, "' (see ocrt-train --help)");
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    TrainConfig cfg = parse_args(argc, argv);
    cfg.validate();
    TrainResult r = run_training(cfg);
    if (r.rank == 0) std::printf("%s\n", r.to_json().dump().c_str());  // one summary per job
    return r.interrupted ? 130 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt-train: %s\n", e.what());
    return 1;
  }
}
