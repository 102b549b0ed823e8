// The training data loader: worker threads (never processes: nothing forks, so CUDA in the
// training thread is safe) turn samples into ready batches ahead of the training loop, through
// a bounded prefetch queue.
//
// Determinism: batch s (the global step) holds the samples at positions s*B .. s*B+B-1 of an
// endless sequence of epochs; epoch e visits the dataset in a permutation drawn from (seed, e)
// (or in order without shuffling), and each sample's image and augmentation are drawn from a
// seed that depends only on (seed, e, position). So the batches are the same for any number of
// workers and any training device, and a resumed run that restarts at step s sees exactly the
// batches an uninterrupted run would have seen.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "models/charset.h"
#include "runtime/image.h"
#include "runtime/tensor.h"
#include "train/augment.h"
#include "train/scan.h"
#include "train/data.h"
#include "train/synth.h"

namespace ocrt::train {

// One line ready for batching: its image at the model height (not yet padded) and label.
struct LineSample {
  GrayImage image;
  std::string text;
  std::vector<int64_t> classes;  // CTC classes (1-based)
  std::string id;                // the image path, or "synth:<index>"
};

// Where samples come from. get(i, seed) must be a pure function of its arguments and safe to
// call from several threads at once.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual LineSample get(int64_t index, uint64_t seed) const = 0;
};

// Files checked by validate_samples(): loads, converts and resizes on demand (seed unused).
class FileDataset : public Dataset {
 public:
  FileDataset(std::vector<CheckedSample> samples, int64_t height = 32);
  int64_t size() const override { return (int64_t)samples_.size(); }
  LineSample get(int64_t index, uint64_t seed) const override;

 private:
  std::vector<CheckedSample> samples_;
  int64_t height_;
};

struct SynthOptions {
  int64_t min_chars = 3, max_chars = 28;
  double min_pixel_height = 22, max_pixel_height = 40;  // glyph height before resizing to 32
  // Scan simulation (train/scan.h) at the rendered size, before the resize: off by default.
  bool scan = false;
  ScanOptions scan_options;
  // Spacing of the type (Font::Spacing), drawn per line uniformly from each range: the word
  // space's width as a factor of the font's, and tracking in glyph heights between letters.
  // Print set tight (many PDFs: word spaces half the font's) is read as one word by a model
  // that only saw the fonts' own spacing. Equal ends: that value, no draw (the default: 1 and 0,
  // the font's own).
  double min_word_spacing = 1, max_word_spacing = 1;
  double min_tracking = 0, max_tracking = 0;
  // The share of lines set in small capitals (TypeSetting::small_caps, at a size drawn per line):
  // print sets names, headings and table heads so, and a model that never saw them reads
  // "DAVENPORT" where a reader writes "Davenport". 0 (the default): none, and no draw.
  double small_caps = 0;
  int64_t size = 100000;  // samples per "epoch" (the sequence is endless; this sets epoch length)
  FrameRule frames;       // the model's frames for a width, for the CTC check (empty: CRNN's)
};

// Lines rendered on the fly: sample i draws its text, font, size and colours from the seed.
// Labels always fit the rendered width (a line too long for CTC is re-drawn shorter).
class SynthDataset : public Dataset {
 public:
  SynthDataset(std::vector<std::shared_ptr<Font>> fonts, std::shared_ptr<const TextSource> text,
               const nn::Charset& charset, SynthOptions opt, int64_t height = 32);
  int64_t size() const override { return opt_.size; }
  LineSample get(int64_t index, uint64_t seed) const override;

 private:
  std::vector<std::shared_ptr<Font>> fonts_;
  std::shared_ptr<const TextSource> text_;
  nn::Charset charset_;
  SynthOptions opt_;
  int64_t height_;
};

struct Batch {
  int64_t step = 0;
  Tensor images;                               // (N, 1, H, W) float32 on the CPU, normalised
  std::vector<int64_t> widths;                 // each line's padded width (CTC input lengths follow)
  std::vector<std::vector<int64_t>> targets;   // CTC classes per line
  std::vector<std::string> texts, ids;
};

struct LoaderOptions {
  int64_t batch = 32;
  int workers = 2;        // threads producing batches
  int prefetch = 4;       // batches made ahead of the one next() returns next, at most
  uint64_t seed = 0;
  bool shuffle = true;
  bool augment = false;
  AugmentOptions augment_options;
  // Bucketing by width: the samples of `bucket_window` consecutive batches are sorted by width
  // and cut into batches again, so a batch holds lines of similar width and padding wastes
  // less; 0 turns it off. Deterministic like everything else here.
  int64_t bucket_window = 0;
  BatchSpec spec;
  // The model's frames for a width (empty: CRNN's): an augmented line too narrow for its label
  // under this rule keeps its unaugmented image.
  FrameRule frames;
  // Data-parallel training: replica shard_index of shard_count gets lines
  // [B * i / n, B * (i + 1) / n) of every global batch of B lines, padded to the width of the
  // whole batch, so each line's input is exactly what a single replica would see. The batch
  // composition (order, bucketing, augmentation) does not depend on the shard.
  int shard_index = 0, shard_count = 1;
  // A signal (runtime/interrupt.h) stops the making of samples at once (the batch fails) and
  // next_or_interrupted() gives up waiting. For one replica only: replicas must agree on the
  // step they stop at, so theirs stop at a step boundary (decide_stop).
  bool interruptible = false;
};

class Loader {
 public:
  // Starts the workers; the first batch returned is batch `first_step`.
  Loader(std::shared_ptr<const Dataset> data, LoaderOptions opt, int64_t first_step = 0);
  ~Loader();  // stops and joins the workers
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch in step order; blocks until it is ready. Rethrows a worker's error.
  Batch next();
  // As next(), but nothing when a signal arrives while it waits (checked every 50 ms).
  std::optional<Batch> next_or_interrupted();
  // Builds batch `step` directly on the calling thread (what the workers do; also for tests).
  Batch make_batch(int64_t step) const;

 private:
  struct Window;  // the samples of one bucketing window, built together (loader.cpp)
  void work();
  LineSample make_sample(int64_t position) const;  // the sample at a global position
  std::vector<LineSample> bucketed_samples(int64_t step) const;
  std::shared_ptr<const std::vector<int64_t>> permutation(int64_t epoch) const;
  std::shared_ptr<Window> window(int64_t index) const;
  void forget_window(int64_t index, const std::shared_ptr<Window>& w) const;

  std::shared_ptr<const Dataset> data_;
  LoaderOptions opt_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Batch> ready_;
  int64_t next_to_claim_, next_to_return_;
  bool stop_ = false;
  std::string error_;
  int64_t error_step_ = -1;  // the lowest step that failed, -1 while none has
  // Caches shared by make_batch() callers (the workers): only a speed-up, never a change of
  // result, so an evicted entry is simply rebuilt.
  mutable std::mutex cache_mu_;
  mutable std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> permutations_;  // by epoch
  mutable std::map<int64_t, std::shared_ptr<Window>> windows_;                          // by window
};

}  // namespace ocrt::train
