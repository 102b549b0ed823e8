// The datasets (files, synthetic lines) and the threaded loader that turns their samples into
// batches ahead of the training loop (see loader.h).
//
// How a batch is found from its step, with no state but the options:
//   global position k = step * batch + j;  epoch e = k / size;  position p = k % size
//   dataset index      = permutation_e[p]   (or p without shuffling)
//   sample seed        = Philox(seed; p, e) (drives the synthetic line and its augmentation)
// Every random choice is a pure function of (seed, e, p), so any worker may make any batch, in
// any order, and the result is the same; the workers only decide how fast.
#include "train/loader.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <numeric>

#include "runtime/interrupt.h"
#include "runtime/error.h"
#include "runtime/rng.h"

namespace ocrt::train {

namespace {

// 64 bits of Philox4x32-10 for (key; a, b): a keyed hash that is the same on every machine.
uint64_t hash64(uint64_t key, uint64_t a, uint64_t b) {
  const Philox4x32 r = philox4x32_10(key, a, b);
  return ((uint64_t)r.v[0] << 32) | r.v[1];
}

// Counter values that are never a sample's position, so the streams below never collide with
// a sample seed hash64(seed, p, e).
constexpr uint64_t kShuffleStream = ~0ull;       // hash64(seed, kShuffleStream, epoch)
constexpr uint64_t kWindowStream = ~0ull - 1;    // hash64(seed, kWindowStream, window)
constexpr uint64_t kAugmentStream = ~0ull - 2;   // hash64(sample seed, kAugmentStream, 0)

// The message of the exception being handled, never empty (an empty one would read as
// "no error" where errors are kept as strings).
std::string current_error() {
  try {
    throw;
  } catch (const std::exception& e) {
    return *e.what() ? e.what() : "an exception with an empty message";
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// True when CTC can align the label to the frames the model gives for the padded width.
bool ctc_feasible(const GrayImage& image, const std::vector<int64_t>& classes, const FrameRule& rule) {
  return frames_for_width(rule, padded_width(image.width)) >= frames_needed(classes);
}

}  // namespace

// ---------------------------------------------------------------- FileDataset

FileDataset::FileDataset(std::vector<CheckedSample> samples, int64_t height)
    : samples_(std::move(samples)), height_(height) {
  OCRT_CHECK(height_ >= 1, "FileDataset: height must be >= 1, got ", height_);
}

LineSample FileDataset::get(int64_t index, uint64_t /*seed*/) const {
  OCRT_CHECK(index >= 0 && index < size(), "FileDataset: index ", index, " outside [0, ", size(), ")");
  const CheckedSample& s = samples_[(size_t)index];
  return {resize_to_height(load_gray_image(s.sample.path), height_), s.sample.text, s.classes, s.sample.path};
}

// ---------------------------------------------------------------- SynthDataset

SynthDataset::SynthDataset(std::vector<std::shared_ptr<Font>> fonts, std::shared_ptr<const TextSource> text,
                           const nn::Charset& charset, SynthOptions opt, int64_t height)
    : fonts_(std::move(fonts)), text_(std::move(text)), charset_(charset), opt_(opt), height_(height) {
  OCRT_CHECK(!fonts_.empty(), "SynthDataset: no font");
  for (const auto& f : fonts_) OCRT_CHECK(f != nullptr, "SynthDataset: a null font");
  OCRT_CHECK(text_ != nullptr, "SynthDataset: no text source");
  OCRT_CHECK(opt_.min_chars >= 1 && opt_.max_chars >= opt_.min_chars,
             "SynthDataset: need 1 <= min_chars <= max_chars, got ", opt_.min_chars, " and ", opt_.max_chars);
  OCRT_CHECK(opt_.min_pixel_height >= 4 && opt_.max_pixel_height <= 512 &&
                 opt_.min_pixel_height <= opt_.max_pixel_height,
             "SynthDataset: need 4 <= min_pixel_height <= max_pixel_height <= 512, got ", opt_.min_pixel_height,
             " and ", opt_.max_pixel_height);
  OCRT_CHECK(opt_.size >= 1, "SynthDataset: size must be >= 1, got ", opt_.size);
  OCRT_CHECK(opt_.small_caps >= 0 && opt_.small_caps <= 1, "SynthDataset: small_caps must be a share in [0, 1], got ",
             opt_.small_caps);
  OCRT_CHECK(opt_.min_word_spacing >= 0 && opt_.min_word_spacing <= opt_.max_word_spacing && opt_.max_word_spacing <= 4,
             "SynthDataset: need 0 <= min_word_spacing <= max_word_spacing <= 4, got ", opt_.min_word_spacing, " and ",
             opt_.max_word_spacing);
  OCRT_CHECK(opt_.min_tracking >= -0.5 && opt_.min_tracking <= opt_.max_tracking && opt_.max_tracking <= 0.5,
             "SynthDataset: need -0.5 <= min_tracking <= max_tracking <= 0.5, got ", opt_.min_tracking, " and ",
             opt_.max_tracking);
  if (opt_.scan) opt_.scan_options.validate();
  OCRT_CHECK(height_ >= 1, "SynthDataset: height must be >= 1, got ", height_);
}

LineSample SynthDataset::get(int64_t index, uint64_t seed) const {
  // All draws come from one stream in a fixed order, so the line depends on the seed alone.
  // Two things can make a draw unusable: no font among a few tried has every character (rare
  // with Latin fonts, common with a wide charset), or the line renders too narrow for CTC to
  // align its label (many narrow or repeated characters, a small model height). The first
  // draws the text again; the second draws a shorter one. After a bounded number of draws the
  // sample fails with what went wrong, rather than looping.
  constexpr int kTextAttempts = 32, kFontAttempts = 8;
  SampleRng rng(seed);
  int64_t max_chars = opt_.max_chars;
  std::string last_text, last_reason;
  for (int attempt = 0; attempt < kTextAttempts; ++attempt) {
    const int64_t min_chars = std::min(opt_.min_chars, max_chars);
    std::string text = text_->sample(rng.next(), min_chars, max_chars);
    last_text = text;
    std::vector<int64_t> classes;
    if (!charset_.encode(text, classes)) {  // the text source keeps to the charset; be safe
      last_reason = "characters outside the charset";
      continue;
    }
    const Font* font = nullptr;
    for (int f = 0; f < kFontAttempts && !font; ++f) {
      const Font* candidate = fonts_[(size_t)rng.integer(0, (int64_t)fonts_.size() - 1)].get();
      if (candidate->covers(text)) font = candidate;
    }
    if (!font) {
      last_reason = "no font tried has every character";
      continue;
    }
    const double pixel_height = rng.uniform(opt_.min_pixel_height, opt_.max_pixel_height);
    const int64_t margin = rng.integer(1, 4);
    const uint8_t ink = (uint8_t)rng.integer(0, 90), paper = (uint8_t)rng.integer(165, 255);
    TypeSetting setting =
        draw_spacing(rng, opt_.min_word_spacing, opt_.max_word_spacing, opt_.min_tracking, opt_.max_tracking);
    setting.small_caps = draw_small_caps(rng, opt_.small_caps, text);
    GrayImage image = font->render(text, pixel_height, margin, ink, paper, setting);
    if (opt_.scan) image = degrade(image, opt_.scan_options, rng);
    image = resize_to_height(image, height_);
    if (!ctc_feasible(image, classes, opt_.frames)) {
      // A label needs at least one frame per character: this width's frames bound the next try.
      const int64_t frames = frames_for_width(opt_.frames, padded_width(image.width));
      last_reason = "too narrow for CTC (" + std::to_string(frames) + " frames)";
      max_chars = std::max<int64_t>(1, std::min<int64_t>((int64_t)nn::utf8_chars(text).size() - 1, frames));
      continue;
    }
    return {std::move(image), std::move(text), std::move(classes), "synth:" + std::to_string(index)};
  }
  fail("SynthDataset: sample ", index, ": no usable line after ", kTextAttempts, " draws (last text '", last_text,
       "': ", last_reason, "; ", fonts_.size(), " fonts, height ", height_, ")");
}

// ---------------------------------------------------------------- Loader

// The samples of `bucket_window` consecutive batches. Every make_batch() that needs the window
// helps build it, one sample at a time, so all workers stay busy; the last sample built sorts
// the window. A failure is kept and wakes everyone waiting.
struct Loader::Window {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<LineSample> samples;  // by position within the window
  int64_t claimed = 0, built = 0, handed = 0;
  std::vector<int64_t> order;         // sample indices by width (ties by position)
  std::vector<int64_t> cut_of_batch;  // batch j of the window gets cut cut_of_batch[j]
  std::string error;
};

Loader::Loader(std::shared_ptr<const Dataset> data, LoaderOptions opt, int64_t first_step)
    : data_(std::move(data)), opt_(std::move(opt)), next_to_claim_(first_step), next_to_return_(first_step) {
  OCRT_CHECK(data_ != nullptr, "Loader: no dataset");
  OCRT_CHECK(data_->size() >= 1, "Loader: the dataset is empty");
  OCRT_CHECK(opt_.batch >= 1, "Loader: batch must be >= 1, got ", opt_.batch);
  OCRT_CHECK(opt_.workers >= 1, "Loader: workers must be >= 1, got ", opt_.workers);
  OCRT_CHECK(opt_.prefetch >= 0, "Loader: prefetch must be >= 0, got ", opt_.prefetch);
  OCRT_CHECK(opt_.bucket_window >= 0, "Loader: bucket_window must be >= 0, got ", opt_.bucket_window);
  OCRT_CHECK(first_step >= 0, "Loader: first step must be >= 0, got ", first_step);
  OCRT_CHECK(opt_.shard_count >= 1 && opt_.shard_index >= 0 && opt_.shard_index < opt_.shard_count,
             "Loader: shard ", opt_.shard_index, " of ", opt_.shard_count, " is out of range");
  OCRT_CHECK(opt_.batch >= opt_.shard_count, "Loader: a batch of ", opt_.batch, " lines cannot be shared by ",
             opt_.shard_count, " replicas (each needs at least one line)");
  if (opt_.augment) opt_.augment_options.validate();
  try {
    for (int i = 0; i < opt_.workers; ++i) threads_.emplace_back([this] { work(); });
  } catch (...) {  // a thread could not start: stop the ones that did
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    throw;
  }
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // A worker in the middle of a batch finishes it (bounded work), sees stop_ and returns.
  for (auto& t : threads_) t.join();
}

void Loader::work() {
  for (;;) {
    int64_t step;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Claim steps in order, at most `prefetch` beyond the one next() returns next. After a
      // failure nothing new is claimed: the steps before it were all claimed already.
      cv_.wait(lock, [&] {
        return stop_ || error_step_ >= 0 || next_to_claim_ <= next_to_return_ + opt_.prefetch;
      });
      if (stop_ || error_step_ >= 0) return;
      step = next_to_claim_++;
    }
    Batch batch;
    std::string error;
    try {
      batch = make_batch(step);
    } catch (...) {
      error = current_error();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error.empty()) {
        ready_.emplace(step, std::move(batch));
      } else if (error_step_ < 0 || step < error_step_) {
        error_step_ = step;  // the lowest failing step, so the error next() reports is deterministic
        error_ = error;
      }
    }
    cv_.notify_all();
  }
}

Batch Loader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  // Every step before a failed one was claimed before it, so it will arrive (or fail lower).
  cv_.wait(lock, [&] {
    return ready_.count(next_to_return_) > 0 || (error_step_ >= 0 && next_to_return_ >= error_step_);
  });
  auto it = ready_.find(next_to_return_);
  if (it == ready_.end()) fail("loader: batch ", error_step_, " failed: ", error_);
  Batch batch = std::move(it->second);
  ready_.erase(it);
  ++next_to_return_;
  lock.unlock();
  cv_.notify_all();  // a worker may claim one more step
  return batch;
}

std::optional<Batch> Loader::next_or_interrupted() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (ready_.count(next_to_return_) > 0 || (error_step_ >= 0 && next_to_return_ >= error_step_)) break;
    if (interrupt_signal() != 0) return std::nullopt;
    cv_.wait_for(lock, std::chrono::milliseconds(50));
  }
  if (interrupt_signal() != 0) return std::nullopt;  // the failure may be the signal's
  lock.unlock();
  return next();
}

std::shared_ptr<const std::vector<int64_t>> Loader::permutation(int64_t epoch) const {
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = permutations_.find(epoch);
    if (it != permutations_.end()) return it->second;
  }
  // Fisher-Yates outside the lock; two workers may both compute it, with the same result.
  const int64_t n = data_->size();
  auto perm = std::make_shared<std::vector<int64_t>>((size_t)n);
  std::iota(perm->begin(), perm->end(), int64_t{0});
  SampleRng rng(hash64(opt_.seed, kShuffleStream, (uint64_t)epoch));
  for (int64_t i = n - 1; i > 0; --i) std::swap((*perm)[(size_t)i], (*perm)[(size_t)rng.integer(0, i)]);
  std::lock_guard<std::mutex> lock(cache_mu_);
  auto [it, inserted] = permutations_.emplace(epoch, std::move(perm));
  // Workers span at most a few epochs at a time; keep those, dropping the oldest others.
  while (permutations_.size() > 4) {
    auto victim = permutations_.begin()->first == epoch ? std::prev(permutations_.end()) : permutations_.begin();
    permutations_.erase(victim);
  }
  return it->second;
}

LineSample Loader::make_sample(int64_t position) const {
  if (opt_.interruptible) throw_if_interrupted("making a batch");
  const int64_t n = data_->size();
  const int64_t epoch = position / n, p = position % n;
  const int64_t index = opt_.shuffle ? (*permutation(epoch))[(size_t)p] : p;
  const uint64_t seed = hash64(opt_.seed, (uint64_t)p, (uint64_t)epoch);
  try {
    LineSample s = data_->get(index, seed);
    if (opt_.augment) {
      SampleRng rng(hash64(seed, kAugmentStream, 0));
      // Augmentation may change the height (rotation, padding): back to the model height. The
      // copy is used only if its label still fits for CTC (shrinking a taller copy narrows it).
      GrayImage image = resize_to_height(augment(s.image, opt_.augment_options, rng), s.image.height);
      if (ctc_feasible(image, s.classes, opt_.frames)) s.image = std::move(image);
    }
    return s;
  } catch (...) {
    fail("sample ", index, " (epoch ", epoch, ", position ", p, "): ", current_error());
  }
}

std::shared_ptr<Loader::Window> Loader::window(int64_t index) const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  std::shared_ptr<Window>& w = windows_[index];
  if (!w) {
    w = std::make_shared<Window>();
    w->samples.resize((size_t)(opt_.bucket_window * opt_.batch));
  }
  std::shared_ptr<Window> out = w;
  // Windows leave the cache once all their batches are taken; this bound only catches windows
  // left half-used (a loader resumed mid-window, direct make_batch calls).
  while (windows_.size() > 8) {
    auto victim = windows_.begin()->first == index ? std::prev(windows_.end()) : windows_.begin();
    windows_.erase(victim);
  }
  return out;
}

void Loader::forget_window(int64_t index, const std::shared_ptr<Window>& w) const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  auto it = windows_.find(index);
  if (it != windows_.end() && it->second == w) windows_.erase(it);
}

std::vector<LineSample> Loader::bucketed_samples(int64_t step) const {
  const int64_t B = opt_.batch, per_window = opt_.bucket_window, n = per_window * B;
  const int64_t index = step / per_window, first = index * n;
  std::shared_ptr<Window> w = window(index);
  // Help build the window until every sample is claimed.
  for (;;) {
    int64_t i;
    {
      std::lock_guard<std::mutex> lock(w->mu);
      if (!w->error.empty() || w->claimed == n) break;
      i = w->claimed++;
    }
    LineSample s;
    std::string error;
    try {
      s = make_sample(first + i);
    } catch (...) {
      error = current_error();  // whatever it is, the others wait for this sample: record it
    }
    std::lock_guard<std::mutex> lock(w->mu);
    if (!error.empty()) {
      if (w->error.empty()) w->error = error;
      w->cv.notify_all();
      break;
    }
    w->samples[(size_t)i] = std::move(s);
    if (++w->built == n) {
      // Sort by width (stable: ties keep position order), cut into batches, and when
      // shuffling hand the cuts out in a random order, so steps do not sweep from narrow to
      // wide lines within every window.
      w->order.resize((size_t)n);
      std::iota(w->order.begin(), w->order.end(), int64_t{0});
      std::stable_sort(w->order.begin(), w->order.end(), [&](int64_t a, int64_t b) {
        return w->samples[(size_t)a].image.width < w->samples[(size_t)b].image.width;
      });
      w->cut_of_batch.resize((size_t)per_window);
      std::iota(w->cut_of_batch.begin(), w->cut_of_batch.end(), int64_t{0});
      if (opt_.shuffle) {
        SampleRng rng(hash64(opt_.seed, kWindowStream, (uint64_t)index));
        for (int64_t j = per_window - 1; j > 0; --j)
          std::swap(w->cut_of_batch[(size_t)j], w->cut_of_batch[(size_t)rng.integer(0, j)]);
      }
      w->cv.notify_all();
    }
  }
  std::unique_lock<std::mutex> lock(w->mu);
  w->cv.wait(lock, [&] { return w->built == n || !w->error.empty(); });
  if (!w->error.empty()) {
    const std::string error = w->error;
    lock.unlock();
    forget_window(index, w);  // a later call tries again rather than repeating a stale error
    fail(error);
  }
  const int64_t cut = w->cut_of_batch[(size_t)(step % per_window)];
  std::vector<LineSample> out;
  for (int64_t j = 0; j < B; ++j) out.push_back(w->samples[(size_t)w->order[(size_t)(cut * B + j)]]);
  const bool all_taken = ++w->handed >= per_window;
  lock.unlock();
  if (all_taken) forget_window(index, w);
  return out;
}

Batch Loader::make_batch(int64_t step) const {
  OCRT_CHECK(step >= 0, "Loader::make_batch: step must be >= 0, got ", step);
  std::vector<LineSample> samples;
  if (opt_.bucket_window > 0) {
    samples = bucketed_samples(step);
  } else {
    for (int64_t j = 0; j < opt_.batch; ++j) samples.push_back(make_sample(step * opt_.batch + j));
  }
  Batch b;
  b.step = step;
  std::vector<GrayImage> images;
  const int64_t n = (int64_t)samples.size();
  const int64_t lo = n * opt_.shard_index / opt_.shard_count, hi = n * (opt_.shard_index + 1) / opt_.shard_count;
  int64_t batch_width = 0;
  for (int64_t i = 0; i < n; ++i) {
    LineSample& s = samples[(size_t)i];
    batch_width = std::max(batch_width, padded_width(s.image.width, opt_.spec.width_multiple));
    if (i < lo || i >= hi) continue;
    images.push_back(std::move(s.image));
    b.targets.push_back(std::move(s.classes));
    b.texts.push_back(std::move(s.text));
    b.ids.push_back(std::move(s.id));
  }
  b.images = pack_batch(images, opt_.spec, &b.widths, batch_width);
  return b;
}

}  // namespace ocrt::train
