// ocrt-train: trains a CRNN recogniser from label files, folders of .gt.txt pairs, or
// synthetic lines, on the CPU or one GPU. Every flag is validated before any work starts; the
// run ends with a one-line JSON summary on stdout (docs/cli.md has the full reference).
#include <cmath>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/cli.h"
#include "runtime/interrupt.h"
#include "runtime/error.h"
#include "train/trainer.h"

using namespace ocrt;
using namespace ocrt::train;

namespace {

using cli::Range;
constexpr double kInf = HUGE_VAL;

// "--synth-chars 3:28": two integers, each checked like a flag's.
cli::Flag synth_chars(SynthOptions& s) {
  return {"--synth-chars", "MIN:MAX", "characters per synthetic line (3:28; each in [1, 1000])",
          [&s](const std::string& v) {
            const auto [lo, hi] = cli::split_pair("--synth-chars", v, "MIN:MAX");
            s.min_chars = cli::parse_int("--synth-chars", lo, 1, 1000);
            s.max_chars = cli::parse_int("--synth-chars", hi, 1, 1000);
          }};
}
// "--synth-height 22:40" and the other LO:HI pairs of real numbers, each checked like a flag's.
cli::Flag real_pair(const char* name, const char* help, Range range, double& lo, double& hi) {
  return {name, "LO:HI", help, [name, range, &lo, &hi](const std::string& v) {
            const auto [a, b] = cli::split_pair(name, v, "LO:HI");
            lo = cli::parse_double(name, a, range);
            hi = cli::parse_double(name, b, range);
          }};
}
cli::Flag synth_height(SynthOptions& s) {
  return real_pair("--synth-height", "glyph height in pixels before the resize to 32 (22:40; 4 <= LO <= HI <= 512)",
                   {4, 512}, s.min_pixel_height, s.max_pixel_height);
}
// The type's spacing (SynthOptions): "--synth-spacing 0.5:1.6", "--synth-tracking -0.02:0.05".
cli::Flag synth_spacing(SynthOptions& s) {
  return real_pair("--synth-spacing",
                   "word space's width as a factor of the font's, drawn per line (1:1: the font's own;\n"
                   "0 <= LO <= HI <= 4)",
                   {0, 4}, s.min_word_spacing, s.max_word_spacing);
}
cli::Flag synth_tracking(SynthOptions& s) {
  return real_pair("--synth-tracking",
                   "extra space between letters in glyph heights, drawn per line (0:0;\n-0.5 <= LO <= HI <= 0.5)",
                   {-0.5, 0.5}, s.min_tracking, s.max_tracking);
}

// ocrt-train's flags: every one of them, with where its value goes in `c` and its range.
cli::Parser train_flags(TrainConfig& c) {
  cli::Parser p("ocrt-train", "usage: ocrt-train --train SOURCES [options]");
  p.note("\nData");
  p.add(cli::list("--train", "SOURCES", c.train,
                  "comma-separated label files (path<TAB>text) and folders of\n"
                  "name.png + name.gt.txt pairs, or 'synth' for lines rendered on the fly"));
  p.add(cli::list("--val", "SOURCES", c.val, "the same for validation ('synth': rendered with --val-fonts)"));
  p.add(cli::text("--charset", "FILE", c.charset_path,
                  "one character per line (default: the 95 printable ASCII characters)"));
  p.add(cli::choice("--on-bad-sample", "skip|fail", c.on_bad_sample, parse_on_bad_sample,
                    "what to do with samples that fail the start-up check (skip)"));
  p.add(cli::list("--fonts", "PATHS", c.fonts, "fonts (files or folders) for synthetic training lines (default: Debian's)"));
  p.add(cli::list("--val-fonts", "PATHS", c.val_fonts, "fonts for synthetic validation lines (default: as --fonts)"));
  p.add(cli::text("--words", "FILE", c.words, "word list for synthetic text (/usr/share/dict/words)"));
  p.add(cli::integer("--val-size", "N", c.val_size, 1, kMaxLines, "synthetic validation lines (512)"));
  p.add(cli::list("--prose", "FILES", c.prose,
                  "text files (commas between) whose consecutive words make most synthetic\n"
                  "lines (60%; 20% structured items: dates, prices, e-mail, URLs, ...)"));
  p.add(cli::text("--scan", "PRESET", c.scan,
                  "scan simulation of synthetic lines before the resize: none (default),\n"
                  "scan (the training mix), or one effect: binarized, lowres, blur-noise,\n"
                  "jpeg, speckle, warped, paper, ink, crop"));
  p.add(synth_chars(c.synth));
  p.add(synth_height(c.synth));
  p.add(synth_spacing(c.synth));
  p.add(synth_tracking(c.synth));
  p.add(cli::real("--synth-small-caps", "P", c.synth.small_caps, Range{0, 1},
                  "share of synthetic lines set in small capitals, their text kept lower case (0)"));
  p.add(cli::integer("--synth-epoch", "N", c.synth.size, 1, kMaxLines, "synthetic lines per epoch (100000)"));
  p.add(cli::text("--render-cache", "DIR", c.render_cache,
                  "render the --synth-epoch training lines once into shards in DIR (kept for\n"
                  "later runs of the same settings; a stopped build resumes) and read them\n"
                  "from there every epoch with fresh augmentation (default: render on the fly)"));
  p.add(cli::toggle("--augment", c.augment, true,
                    "blur, noise, contrast, rotation, morphology, padding (on; --no-augment: off)"));
  p.add(cli::toggle("--no-augment", c.augment, false, "no augmentation"));
  p.add(cli::toggle("--no-shuffle", c.shuffle, false, "keep the file order"));

  p.note("\nModel and optimisation");
  p.add(cli::text("--arch", "A", c.arch, "crnn, crnn-s or svtr-lite (crnn-s; docs/models.md), or the text detector dbnet (docs/pages.md)"));
  p.add(cli::integer("--crop", "N", c.crop, 64, 4096, "dbnet: training crops of N x N pixels, a multiple of 32 (640)"));
  p.add(cli::integer("--val-pages", "N", c.val_pages, 1, 100000, "dbnet: validation pages read at each evaluation (16)"));
  p.add(cli::text("--init", "FILE", c.init, "start from these weights (a model file)"));
  p.add(cli::integer("--batch", "N", c.batch, 1, kMaxBatch, "lines per step (32)"));
  p.add(cli::integer("--steps", "N", c.steps, 1, kMaxSteps, "optimizer steps (1000)"));
  p.add(cli::real("--epochs", "E", c.epochs, Range{0, kMaxEpochs, true}, "passes over the training data (instead of --steps)"));
  p.add(cli::real("--lr", "LR", c.lr, Range{0, kInf, true, true}, "learning rate (1e-3)"));
  p.add(cli::choice("--optimizer", "sgd|adam|adamw", c.optimizer, parse_optimizer_kind, "the optimizer (adamw)"));
  p.add(cli::real("--weight-decay", "W", c.weight_decay, Range{0, kInf, false, true}, "weight decay (1e-4)"));
  p.add(cli::real("--momentum", "M", c.momentum, Range{0, 1, false, true}, "momentum of sgd (0.9)"));
  p.add(cli::choice("--schedule", "constant|step|cosine|onecycle", c.schedule, parse_schedule_kind,
                    "the learning rate by step (cosine)"));
  p.add(cli::integer("--warmup", "N", c.warmup, 0, kMaxSteps, "warm-up steps of the cosine schedule (200)"));
  p.add(cli::real("--clip-grad", "NORM", c.clip_grad, Range{0, kInf, false, true},
                  "clip the global gradient norm (5; 0: off)"));
  p.add(cli::u64("--seed", "S", c.seed, "data order, augmentation and initial weights (1)"));

  p.note("\nRun");
  p.add({"--device", "cpu|cuda:N", "where the model trains (cpu)", [&c](const std::string& v) {
           c.device_from_local_rank = v == "cuda";
           c.device = c.device_from_local_rank ? Device::cuda(0) : Device::parse(v);
         }});
  p.add(cli::integer("--threads", "N", c.threads, 0, kMaxThreads, "CPU threads (0: all)"));
  p.add(cli::integer("--workers", "N", c.workers, 1, 256, "loader threads (2)"));
  p.add(cli::choice("--conv", "fast|exact", c.conv, parse_conv_mode,
                    "CPU 3x3 convolutions through Winograd (fast: about 1e-5 relative\n"
                    "rounding) or im2col (exact: about 1e-7); docs/ops/conv.md"));
  p.add(cli::choice("--precision", "fp32|tf32|bf16", c.precision, parse_precision,
                    "matrix products and convolutions, forward and backward, in float32,\n"
                    "bf16 (float32 sums, weights and optimizer state; CPUs and GPUs) or tf32\n"
                    "(GPU tensor cores only); docs/ops/gemm.md, docs/cuda.md.\n"
                    "The CPU path taken (OCRT_CPU_ISA forces one) is in the summary"));
  p.add(cli::text("--out", "DIR", c.out, "checkpoints, metrics.jsonl, best.safetensors, worst/, report.html (run)"));
  p.add(cli::integer("--save-every", "N", c.save_every, 1, kMaxSteps, "steps between checkpoints (1000)"));
  p.add(cli::integer("--eval-every", "N", c.eval_every, 1, kMaxSteps, "steps between evaluations (1000)"));
  p.add(cli::integer("--log-every", "N", c.log_every, 1, kMaxSteps, "steps between progress lines (50)"));
  p.add(cli::integer("--keep", "K", c.keep, 1, 1000000, "checkpoints kept (3)"));
  p.add(cli::integer("--worst", "N", c.worst_lines, 0, 1000,
                     "keep the N validation lines read worst at each evaluation in\n"
                     "DIR/worst/, for DIR/report.html (16; 0: none)"));
  p.add(cli::toggle("--resume", c.resume, true,
                    "continue from the newest checkpoint in --out (same --seed); an error\n"
                    "when --out holds none"));
  p.add(cli::toggle("--resume-if-present", c.resume_if_present, true,
                    "the same, but start afresh when --out holds no checkpoint"));
  p.add(cli::toggle("--allow-changes", c.allow_changes, true,
                    "resume although settings the run depends on (--batch, --lr, --optimizer,\n"
                    "data, ...) differ from the checkpoint's; each change is printed\n"
                    "(without it they are refused; docs/cli.md lists what may change freely)"));
  p.add(cli::integer("--stop-at", "N", c.stop_at, 0, kMaxSteps, "save a checkpoint and stop once step N is done (to split a run)"));
  p.add(cli::real("--max-minutes", "M", c.max_minutes, Range{0, kInf, false, true},
                  "evaluate, save and stop after M minutes of wall time (0: no limit)"));
  p.add(cli::integer("--bucket-window", "N", c.bucket_window, 0, 1000000,
                     "batch lines of similar width: sort within N batches (8; 0: off)"));
  p.add(cli::integer("--max-bad-steps", "N", c.max_bad_steps, 1, kMaxSteps,
                     "stop after N steps in a row with a non-finite loss or gradient (20)"));

  p.note("\nData parallel (docs/distributed.md)");
  p.add({"--devices", "LIST",
         "one replica per device in this process, e.g. cuda:0,cuda:1 (NCCL)\n"
         "or cpu,cpu (shared memory); the global --batch is split between them",
         [&c](const std::string& v) {
           c.devices.clear();
           for (const auto& d : cli::split_list(v)) c.devices.push_back(Device::parse(d));
           OCRT_CHECK(!c.devices.empty(), "--devices: give at least one device");
         }});
  p.note("  mpirun -np N ocrt-train ...   one replica per process (MPI; NCCL between GPUs); there\n"
         "                         --device cuda picks cuda:<local rank mod GPUs>");
  p.add(cli::real("--comm-timeout", "S", c.comm_timeout, Range{0, kInf, true, true},
                  "a collective waiting longer than S seconds for the slowest replica\n"
                  "ends the run with an error naming the rank (300)"));
  p.add(cli::choice("--overlap", "auto|on|off", c.overlap, parse_overlap,
                    "sum gradient buckets during the backward pass (on) or after it (off);\n"
                    "auto: on for GPUs (NCCL), off for CPUs (the same result either way)"));
  p.add(cli::toggle("--sync-batch-norm", c.sync_batch_norm, true,
                    "BatchNorm statistics of the whole global batch, summed over replicas\n"
                    "(default: each replica its own shard's)"));
  p.add(cli::toggle("--no-batch-norm", c.batch_norm, false,
                    "crnn/crnn-s without BatchNorm: a replica's lines never affect another's"));
  // Not a setting of the run: a test hook that lives outside TrainConfig (trainer.h).
  p.add({"--fault", "R:S:WHAT", "testing only: replica R hangs|exit|kill|throw at the start of step S",
         [](const std::string& v) { set_fault_injection(v); }});
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    TrainConfig cfg;
    const std::vector<std::string> others = train_flags(cfg).parse(argc, argv);
    OCRT_CHECK(others.empty(), "unexpected argument '", others.empty() ? "" : others[0],
               "': ocrt-train takes only flags (see ocrt-train --help)");
    cfg.validate();
    TrainResult r = run_training(cfg);
    if (r.rank == 0) std::printf("%s\n", r.to_json().dump().c_str());  // one summary per job
    return r.interrupted ? 128 + (interrupt_signal() != 0 ? interrupt_signal() : SIGINT) : 0;
  } catch (const Interrupted& e) {  // during start-up, before anything was written
    std::fprintf(stderr, "\nocrt-train: %s; stopped before the first step, nothing saved\n", e.what());
    return 128 + e.signal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt-train: %s\n", e.what());
    return 1;
  }
}
