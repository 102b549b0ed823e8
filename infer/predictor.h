// The predictor: text-line recognition with a model file, on one or several devices.
//
//   Predictor p("weights/crnn-en.safetensors", options);   // loads and checks the model once
//   std::vector<LineResult> r = p.recognize({"a.png", "b.png"});
//
// What happens to the lines (docs/cli.md describes the same from the command line):
//  1. Lines are read in chunks (a few thousand at a time, so a list of millions never sits in
//     memory at once). Each image is decoded to gray and resized to the model's height keeping
//     its aspect ratio, exactly as training does (runtime/image.h), on the CPU threads. Then
//     normalize_line (runtime/image.h) makes odd lines look like what the model learnt from:
//     a line with no ink is blank and reads as "" without running the model (confidence 1,
//     width 0, worker -1, no logits), light text on a dark background is inverted, and faint
//     print is stretched to full contrast; ordinary print passes unchanged. A line that cannot
//     be used gets an error of its own and the others go on (limits below).
//  2. The chunk's lines are sorted by width and cut into batches of at most `batch` lines, so
//     a batch holds lines of similar width and little compute goes to padding.
//  3. Batches go to a shared queue. One worker thread per device takes them one at a time: it
//     packs the batch (white padding, p * scale + offset from the model's input spec), runs
//     the forward pass under no-grad on its device and decodes (greedy or prefix beam).
//     A worker much slower than the fastest takes only the first lines of a batch and leaves
//     the rest queued (lines_to_take below), so that it never holds the end of a run long
//     after the fast workers are done (a CPU beside a GPU would otherwise take a whole GPU-sized
//     batch at the end and the run would wait for it).
//  4. Results come back in input order, chunk after chunk; the next chunk is decoded while the
//     workers run the current one.
//
// Devices and threads. Each worker owns its own copy of the model. A GPU worker builds its
// copy and moves it to its GPU inside its own thread, so CUDA is touched only by the thread
// that owns that GPU (docs/cuda.md: one thread drives a GPU; CUDA starts lazily in that
// thread). A GPU may be listed once; "cpu" may be listed several times, and the CPU workers
// then share the CPU threads between them (each gets threads / number of CPU workers; they
// set OpenMP's count for their own thread and Eigen's process-wide count to that share, and
// the Predictor gives Eigen its previous count back when it is destroyed). cpu_workers makes
// the CPU, listed alone, several such workers (ocrt-infer's default on the AMX paths).
//
// Padding does not change a line's result. A recogniser takes each line's own width (CRNN's
// LSTM stops at the line's last frame; SVTR-lite never attends to padding); and every batch gets
// white columns past its widest line, as many as the model's right_context() (models/
// recognizer.h) rounded up to the width multiple, so every line, the widest included, sees the
// same white (never the convolutions' zero padding) within the model's reach. A line's logits are then the same in
// any batch, of any size, on any number of workers (up to float rounding in the GEMMs).
//
// Limits (a line outside them gets an error; PredictorOptions can change them):
//   an image file of at most max_image_pixels pixels (16 Mpixels), read from its header before
//   anything is decoded (runtime/image.h, which also bounds the pixels being decoded at once);
//   source image at least min_source_height (8) pixels high and 1 pixel wide;
//   after resizing to the model height (32): at least min_width (8) and at most max_width
//   (8192) pixels wide, i.e. a line is at most 256 times as wide as it is high.
// A 1x1 image is too small, 32 wide by 100000 high too narrow, 100000 wide by 32 high too wide;
// but an image of one flat tone (all pixels within normalize.ink_threshold) is blank at any
// size, 1x1 included, and reads as "".
// Batches also hold at most max_batch_columns columns in all (lines x padded width), so a batch
// of wide lines is cut smaller instead of growing its memory with the lines' width. Default:
// cpu_batch_columns(the model's first_channels()) when every worker is a CPU, batch x 2048 when
// a GPU is among them. On CPUs smaller batches cost no speed, or gain some, down to a point
// (bench/results/infer-cpu.md): crnn-en (64 channels) reads fastest at 4096 columns (about 10
// lines), crnn-s (32) at 8192; crnn-s at 4096 lost 18%.
//
// Memory: batches of other widths reuse the CPU allocator's cached blocks only in part. A
// program that mostly recognises lines should call cpu_set_cache_trim(true) (runtime/
// cpu_allocator.h), as ocrt-infer does: peak RSS then stays near one batch's working set
// instead of twice it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/char_lm.h"
#include "models/charset.h"
#include "models/recognizer.h"
#include "models/model_file.h"
#include "runtime/cpu_isa.h"
#include "runtime/device.h"
#include "runtime/image.h"

namespace ocrt::infer {

// Sharing batches between workers of different speeds. Each worker measures its speed on its
// latest batch (columns a second: lines x (padded width + right margin)). A worker expected to
// need `mine` seconds for a whole queued batch of `lines` lines, where the fastest worker would
// need `fastest`, takes all of it when mine <= 2 * max(fastest, kMinPieceSeconds); otherwise it
// takes the batch's first (narrowest) floor(lines * max(fastest, kMinPieceSeconds) / mine)
// lines, at least one, and the rest stays at the front of the queue. Workers of about the same
// speed (within 2x), or batches that take any worker less than half a second, are never split.
// Until a worker has finished a batch its speed is unknown: it takes whole batches, except that
// in a run that mixes GPU and CPU workers a CPU worker starts with pieces of batch / 8 lines
// until it and a GPU worker have each finished one (a GPU is usually many times faster).
constexpr double kMinPieceSeconds = 0.25;
// The default cap on a batch's columns when every worker is a CPU (see the top of this file):
// kCpuBatchChannelColumns / first_channels, within [kCpuBatchColumnsMin, kCpuBatchColumnsMax].
constexpr int64_t kCpuBatchChannelColumns = 64 * 4096;
constexpr int64_t kCpuBatchColumnsMin = 2048, kCpuBatchColumnsMax = 12288;
int64_t cpu_batch_columns(int64_t first_channels);
int64_t lines_to_take(int64_t lines, double mine, double fastest);

// Cutting a chunk's lines into batches. Each batch is padded to its widest line (plus the
// model's right margin), so a batch of lines of 80 to 176 pixels costs 176 columns for each of
// them. `widths` are the lines' padded widths, narrowest first; both functions return the
// sizes of consecutive batches (summing to widths.size()), each at most max_lines lines and at
// most max_columns columns (lines x (widest + margin)), except that a single line wider than
// that still makes a batch of one.
// fill_batches: each batch takes lines until the next would break a limit (fewest batches).
std::vector<int64_t> fill_batches(const std::vector<int64_t>& widths, int64_t margin, int64_t max_lines,
                                  int64_t max_columns);
// plan_batches: the cut of least cost, a batch of n lines of widest w costing (n + overhead) x
// (w + margin) columns, by dynamic programming over the cut points (widths.size() x max_lines
// steps). `overhead` is what a batch costs beyond its lines, in lines of its width: a smaller
// batch reads less padding but runs each layer once more, and each of its GEMMs has fewer rows
// to share among threads. Measured (bench_layers, crnn-s and crnn-en, 400-pixel lines): a
// lone line costs 1.15-1.3 lines' time of a large batch on one thread, 1.7-2 on two. On CPUs
// alone the predictor gives kCpuBatchOverhead whatever the thread count, so that the cut, and
// with it the order in which a GEMM sums each line's values, is the same for any number of
// threads or page lanes (with overheads of 0.25 to 1, the 12 scanned pages of
// bench/results/pages.md read within 4% of one another's time, on lanes of one thread). Where a GPU is among the workers,
// fill_batches (a GPU wants its batches full).
std::vector<int64_t> plan_batches(const std::vector<int64_t>& widths, int64_t margin, int64_t max_lines,
                                  int64_t max_columns, double overhead);
constexpr double kCpuBatchOverhead = 0.5;

// --precision auto takes a reduced precision only where the model file says it was checked: its
// training record's "precision_cer" holds the CER of a set of validation lines read in each
// precision it was measured in, e.g. {"fp32": 0.0127, "bf16": 0.0127, "lines": "..."}
// (bench/precision_cer.sh measures and writes it; the shipped files have it). A precision is
// validated when its CER is at most kAutoCerMargin above fp32's on those lines.
constexpr double kAutoCerMargin = 0.0005;  // 0.05 CER points
// Whether `training` validates `precision` ("bf16", "int8"); `why` (optional) gets the reason in
// a few words either way ("CER 1.27% against fp32's 1.26%", "no precision_cer record", ...).
bool precision_validated(const Json& training, const std::string& precision, std::string* why = nullptr);
// What auto computes in on CPU workers of a float model file: bf16 where the path multiplies bf16
// natively (avx512bf16, amx: runtime/cpu/gemm.h) and the file validates it, else fp32.
std::string auto_cpu_precision(CpuIsa path, const Json& training, std::string* why = nullptr);

enum class Decoder { greedy, beam };
Decoder parse_decoder(const std::string& name);  // "greedy" or "beam"; throws otherwise

struct PredictorOptions;
// The default decoding of ocrt-infer (--decoder auto) and of the C API: every line greedily,
// and the lines in doubt (beam_doubt kAutoBeamDoubt) through the beam with the language model
// at lm_path; with only_if_known (lm_if_known), greedy instead for a model whose characters the
// LM does not all know. An empty lm_path leaves o greedy. On the 3000 validation lines of
// bench/results/accuracy.md: CER 0.80% against greedy's 1.39%, at 95% of its lines/s.
constexpr double kAutoBeamDoubt = 0.2;
void use_auto_decoding(PredictorOptions& o, const std::string& lm_path, bool only_if_known);

struct PredictorOptions {
  std::vector<Device> devices{Device::cpu()};  // one worker each
  int threads = 0;          // CPU threads for preprocessing and CPU workers (0: default_num_threads())
  // Where `devices` is the CPU alone, listed once: how many CPU workers it becomes, each with
  // threads / N of the threads (what "cpu,cpu,..." gives). 1: one worker on every thread. 0 (the
  // default, for ocrt-infer and the C API alike): auto_cpu_workers. Lines come in batches anyway, and two batches side by side on one thread
  // each keep both cores busier than one batch whose ops share two threads, where the LSTM's
  // steps and the small ops between the convolutions leave one thread waiting. Each worker holds
  // its own batch; a batch with no other beside it or waiting (a lone line) gets every thread.
  int cpu_workers = 0;
  int64_t batch = 32;       // lines per batch
  // The precision of the workers' matrix products and convolutions (runtime/precision.h):
  // "fp32"; "bf16" (operands rounded to bf16, float32 sums; LSTM gates, softmax and decoding
  // stay float32; on CPU workers runtime/cpu/gemm.h's bf16 GEMM, on GPU workers tensor cores);
  // "tf32" (GPU workers' tensor cores; CPU workers beside them compute in fp32); or "auto":
  // on CPU workers auto_cpu_precision (bf16 where the CPU has bf16 instructions and the model
  // file validates bf16, else fp32), fp32 on GPU workers; an int8 model file computes in int8;
  // "int8" asks for that (a float model file is then refused, naming ocrt-quantize).
  // Process-wide: it applies to every op of the process from the constructor on.
  std::string precision = "fp32";
  Decoder decoder = Decoder::greedy;
  int64_t beam_width = 10;  // for Decoder::beam
  // An optional character language model for Decoder::beam (models/char_lm.h, built by
  // ocrt-lm): each emitted character adds lm_weight * log P_LM + lm_bonus to a prefix's score.
  std::string lm_path;
  double lm_weight = 0.3;  // tuned for the shipped crnn-en on held-out lines: bench/results/accuracy.md
  double lm_bonus = 1.0;
  // BeamOptions::lm_uniform (models/ctc_decode.h). 0.01 keeps the LM from rewriting rare
  // symbols the model is sure of (a "{" read at 0.97 became "(" in samples/lines/000011) at
  // +0.02 CER points on the validation lines (bench/results/decode.md).
  double lm_uniform = 0.01;
  // Decoder::beam only: every line is read greedily first, and only the lines with a frame
  // where the second most likely class has at least this probability go through the beam (with
  // the LM); where one class dominates every frame, the beam would take the greedy path anyway.
  // 0: the beam reads every line.
  double beam_doubt = 0;
  // With lm_path: when the model's charset holds a character that the LM does not know (its
  // "other" symbol), read greedily without the LM instead of scoring such characters as
  // "other". ocrt-infer's default decoder takes the shipped English LM this way: for the models
  // whose charset it covers, and greedy decoding for the others (a digits-only or a Cyrillic
  // model). Predictor::decoding() says which it became.
  bool lm_if_known = false;
  bool keep_logits = false; // return each line's (T, C) logits in LineResult::logits
  // Blank, inverted and faint lines (runtime/image.h normalize_line); enabled = false feeds the
  // model exactly what training's preprocessing gives (ocrt-infer --plain-preprocess).
  LineNormalizeOptions normalize;

  // For a weights-only file (no ocrt metadata): the architecture (e.g. "crnn") and a
  // charset file, both required. For a file with metadata, arch (when given) must match the
  // file's and charset_path (when given) must hold the file's charset.
  std::string arch;
  std::string charset_path;

  // Limits on a line (see the top of this file).
  int64_t max_image_pixels = kDefaultMaxImagePixels;  // checked from the header before decoding (runtime/image.h)
  int64_t min_source_height = kMinLineHeight;
  int64_t min_width = 8;
  int64_t max_width = 8192;
  int64_t max_batch_columns = 0;  // 0: cpu_batch_columns on CPUs alone, else batch * 2048
  int64_t chunk_lines = 0;        // lines decoded per chunk; 0: max(1024, 8 * batch * devices)
  // Threads lent to a CPU worker's batch besides its own (asked before each batch;
  // runtime/threading.h LentThreads): ocrt-infer's page lanes lend an idle lane's threads to the
  // lanes still reading (page_lanes.h). Results do not depend on it.
  std::function<int()> borrow_threads;
};

// PredictorOptions::cpu_workers = 0: one CPU worker a thread, at most kAutoCpuWorkers. The
// workers share one model (its weights, and the packed forms of them that the convolutions
// keep: ops/cpu/fingerprint.h), so a worker more costs its batch and scratch alone, and a batch
// that one worker takes while the others are idle and none waits runs on every thread (a lone
// line keeps its latency). Measured on 2 Zen 4 cores (bench/results/cpu-bf16.md, 300 lines,
// batch 32, 3 alternating rounds): two workers of one thread against one of two, 1.09-1.20x
// lines/s for crnn-en and crnn-s in fp32, bf16 and int8, in 6-28 MiB more; on a 2-core Xeon with
// AMX, int8 1.20x and bf16 1.37x (medians), fp32 1.05x. More than two were not measured.
constexpr int kAutoCpuWorkers = 4;
int auto_cpu_workers(int threads);

// The names PredictorOptions::precision takes ("fp32, tf32, bf16, int8 or auto", for messages),
// and whether `name` is one of them: the predictor and ocrt-infer's --precision check by these.
inline constexpr const char* kPredictorPrecisions = "fp32, tf32, bf16, int8 or auto";
bool is_predictor_precision(const std::string& name);

// One input line: a path to read, or an image already in memory (then `name` only labels it).
struct LineInput {
  std::string name;
  std::optional<GrayImage> image;
};

// One recognised character: where the CTC alignment put it.
struct CharPosition {
  std::string ch;    // UTF-8
  int64_t frame;     // the model's output frame where it was emitted
  double x;          // that frame's centre in the source image, in pixels (approximate)
  double confidence = 0;  // the model's probability of the character at that frame
};

struct LineResult {
  std::string name;     // the input path (or the in-memory image's name)
  std::string error;    // empty when the line was recognised
  std::string text;
  double confidence = 0;             // see models/ctc_decode.h
  std::vector<CharPosition> chars;   // one per character of text
  int64_t width = 0;                 // width fed to the model (resized, padded to 4); 0 for a blank line
  int worker = -1;                   // index into PredictorOptions::devices of the worker that ran it (-1: none)
  Tensor logits;                     // (T, C) float32 on the CPU, with keep_logits
  bool ok() const { return error.empty(); }
};

struct WorkerStats {
  Device device;
  int64_t lines = 0, batches = 0;  // batches: what it ran, split pieces included
  // Of those, the batches a CPU worker of several ran on every thread of the CPU (none beside
  // them, none waiting: PredictorOptions::cpu_workers).
  int64_t batches_on_all_threads = 0;
  double busy_seconds = 0;  // time spent packing, running and decoding batches
};

struct RunStats {
  int64_t lines = 0, failed = 0;
  double seconds = 0;
  std::string cpu_path;   // the CPU kernels' instruction-set path (runtime/cpu_isa.h), e.g. "avx512bf16"
  // What the workers computed in: "fp32", "tf32", "bf16", "cpu X, gpu Y", or for an int8 model
  // file "int8 (K kernel)", K the int8 kernel (runtime/cpu/int8_gemm.h), e.g. "avx2 vpmaddubsw",
  // followed on CPUs that take it by ", 3x3 layers by integer Winograd F(4x4)" (int8_winograd.h).
  std::string precision;
  std::string decoding;  // Predictor::decoding()
  std::vector<WorkerStats> workers;  // in the order of PredictorOptions::devices
  double lines_per_second() const { return seconds > 0 ? (double)lines / seconds : 0; }
  // "120 lines (1 failed) in 0.8 s, 150.0 lines/s; cpu path avx512bf16, bf16; worker 0 (cpu): ...;
  // decoding greedy"
  std::string summary() const;
};

class Predictor {
 public:
  // Loads the model file and checks it (a corrupt file, an unsupported or mismatched arch,
  // weights that do not fit the arch, a bad charset or input spec all throw here, naming the
  // file), then starts one worker per device and waits until each has its model ready (a
  // worker that fails, e.g. a GPU out of memory, makes the constructor throw too).
  Predictor(const std::string& model_path, PredictorOptions options = {});
  ~Predictor();  // stops and joins the workers
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  // Recognises every line; results in input order. Never throws for a bad line.
  std::vector<LineResult> recognize(const std::vector<std::string>& paths);
  std::vector<LineResult> recognize(const std::vector<LineInput>& lines);

  // Streaming form: `next` fills in the next line and returns false when there are no more;
  // `sink` gets every result in input order with its 0-based index, chunk by chunk, as soon as
  // a chunk is done. One run at a time per Predictor (calls from several threads queue up).
  // `max_batch_columns` > 0 caps this run's batches below the predictor's own cap when the
  // predictor has a CPU worker (the page reader's long lines: a batch's host memory grows with
  // its columns); GPU workers alone keep the predictor's cap.
  RunStats run(const std::function<bool(LineInput&)>& next,
               const std::function<void(int64_t, LineResult&&)>& sink, int64_t max_batch_columns = 0);

  const std::string& arch() const { return arch_; }
  const Json& config() const { return config_; }  // the architecture config (model file "config")
  const nn::Charset& charset() const { return charset_; }
  // The language model decoding uses (null without lm_path): one copy per file in the process.
  const nn::CharLM* language_model() const { return lm_.get(); }
  const std::string& model_path() const { return model_path_; }
  const PredictorOptions& options() const { return opt_; }
  const std::string& precision() const { return precision_; }  // as RunStats::precision, auto resolved
  // How lines are decoded: "greedy", "beam 10", "beam 10 + LM FILE" and, with beam_doubt,
  // " (lines in doubt 0.2)"; greedy where lm_if_known dropped the LM.
  std::string decoding() const;
  // The bytes of the tensors the model file holds (weights and statistics: an int8 file's codes
  // a byte each): the size of the model each worker keeps a copy of.
  int64_t model_bytes() const { return model_bytes_; }

 private:
  struct Impl;  // the workers, the queue of batches and the chunks in flight (predictor.cpp)

  PredictorOptions opt_;
  std::string model_path_, arch_;
  CpuIsa cpu_path_ = CpuIsa::generic;  // cpu_isa() at construction
  std::string precision_;              // as RunStats::precision (auto resolved)
  int64_t model_bytes_ = 0;
  Json config_;
  nn::Charset charset_;
  // With lm_path; read-only, shared by the workers, and by every predictor of the process that
  // loaded the same file (ocrt-infer's page lanes each have a predictor: 12 MiB a copy).
  std::shared_ptr<const nn::CharLM> lm_;
  std::vector<int32_t> lm_ids_;           // class -> the LM's symbol
  std::unique_ptr<Impl> impl_;
};

}  // namespace ocrt::infer
