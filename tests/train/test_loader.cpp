// The threaded loader and its datasets: batches are a pure function of (seed, step) whatever
// the number of workers or the step a run resumes at; epochs visit every sample once; bucketing
// groups similar widths without losing or repeating samples; synthetic labels always fit CTC;
// a failing sample surfaces in next() with its step; and a loader can be dropped at any time.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include "runtime/image.h"
#include "train/data.h"
#include "train/loader.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::train;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kFiles = 13;  // prime: batches of 4 straddle epoch boundaries

// 13 line images of different widths (and two heights, so resizing is exercised), each with
// its own pixel pattern, checked like ocrt-train does.
std::shared_ptr<FileDataset> file_dataset(std::vector<std::string>* paths = nullptr) {
  const fs::path d = ocrt::testing::process_temp_dir("loader-files");
  std::vector<Sample> samples;
  for (int64_t i = 0; i < kFiles; ++i) {
    GrayImage img;
    img.height = i % 3 == 0 ? 48 : 32;
    img.width = 12 + 9 * ((i * 5) % kFiles);
    for (int64_t y = 0; y < img.height; ++y)
      for (int64_t x = 0; x < img.width; ++x) img.pixels.push_back((uint8_t)((x * 7 + y * 3 + i * 29) % 256));
    char name[32];
    std::snprintf(name, sizeof name, "line%02d.png", (int)i);
    save_gray_png((d / name).string(), img);
    samples.push_back({(d / name).string(), std::string("ab") + (char)('a' + i)});
  }
  ValidationReport r = validate_samples(samples, nn::Charset::ascii());
  REQUIRE(r.good.size() == (size_t)kFiles);
  if (paths)
    for (const auto& s : samples) paths->push_back(s.path);
  return std::make_shared<FileDataset>(r.good);
}

// Synthetic lines from the Debian fonts, or null (with a warning) where none is installed.
std::shared_ptr<SynthDataset> synth_dataset(int64_t height = 32, SynthOptions opt = {}) {
  const auto dirs = default_font_dirs();
  if (dirs.empty()) {
    WARN("no Debian font installed (fonts-dejavu-core, fonts-liberation, ...): synthetic checks skipped");
    return nullptr;
  }
  std::vector<std::string> words = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Illinois",
                                    "millimetre", "a", "I"};
  if (fs::exists("/usr/share/dict/words")) words = TextSource::read_words("/usr/share/dict/words");
  const nn::Charset charset = nn::Charset::ascii();
  auto text = std::make_shared<const TextSource>(words, charset);
  return std::make_shared<SynthDataset>(load_fonts(dirs), text, charset, opt, height);
}

LoaderOptions options(int workers, int64_t batch = 4) {
  LoaderOptions o;
  o.batch = batch;
  o.workers = workers;
  o.prefetch = 3;
  o.seed = 7;
  return o;
}

void check_same(const Batch& a, const Batch& b) {
  INFO("step " << a.step);
  CHECK(a.step == b.step);
  CHECK(a.widths == b.widths);
  CHECK(a.targets == b.targets);
  CHECK(a.texts == b.texts);
  CHECK(a.ids == b.ids);
  REQUIRE(a.images.shape() == b.images.shape());
  CHECK(a.images.to_vector<float>() == b.images.to_vector<float>());
}

// The ids of steps [0, steps), in order.
std::vector<std::string> ids_of(Loader& loader, int64_t steps) {
  std::vector<std::string> ids;
  for (int64_t s = 0; s < steps; ++s) {
    Batch b = loader.next();
    ids.insert(ids.end(), b.ids.begin(), b.ids.end());
  }
  return ids;
}

// Runs f on its own thread; if it has not returned within the time, the test program ends
// with a message instead of hanging the whole suite.
template <class F>
void must_return_within(std::chrono::seconds limit, F f) {
  auto done = std::async(std::launch::async, f);
  if (done.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: a loader did not stop within %lld s\n", (long long)limit.count());
    std::abort();
  }
  done.get();
}

// A dataset of tiny lines that can count its calls, sleep, or fail at one index.
class TestDataset : public Dataset {
 public:
  explicit TestDataset(int64_t size, int64_t broken = -1, int sleep_ms = 0)
      : size_(size), broken_(broken), sleep_ms_(sleep_ms) {}
  int64_t size() const override { return size_; }
  LineSample get(int64_t index, uint64_t) const override {
    ++calls;
    if (sleep_ms_) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
    if (index == broken_) fail("sample ", index, " is broken on purpose");
    LineSample s;
    s.image.width = 8 + index % 5, s.image.height = 32, s.image.pixels.assign((size_t)(s.image.width * 32), 200);
    s.text = "a";
    s.classes = {1};
    s.id = std::to_string(index);
    return s;
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t size_, broken_;
  int sleep_ms_;
};

}  // namespace

TEST_CASE("loader: 1 worker and 4 workers make identical batches (files)", "[loader]") {
  auto data = file_dataset();
  std::vector<float> plain_pixels;  // step 0 without augmentation
  for (bool augment : {false, true})
    for (int64_t window : {0, 3}) {
      INFO("augment " << augment << ", bucket window " << window);
      LoaderOptions o1 = options(1), o4 = options(4);
      o1.augment = o4.augment = augment;
      o1.bucket_window = o4.bucket_window = window;
      Loader one(data, o1), four(data, o4);
      for (int64_t step = 0; step < 12; ++step) {
        Batch a = one.next(), b = four.next();
        check_same(a, b);
        if (step % 5 == 0) check_same(a, one.make_batch(step));  // the calling thread, too
        if (step == 0 && window == 0) {
          if (!augment) plain_pixels = a.images.to_vector<float>();
          else CHECK(a.images.to_vector<float>() != plain_pixels);  // augmentation did something
        }
      }
    }
}

TEST_CASE("loader: 1 worker and 4 workers make identical batches (synthetic lines)", "[loader]") {
  auto data = synth_dataset();
  if (!data) return;
  for (bool augment : {false, true}) {
    INFO("augment " << augment);
    LoaderOptions o1 = options(1, 6), o4 = options(4, 6);
    o1.augment = o4.augment = augment;
    o1.bucket_window = o4.bucket_window = 2;
    Loader one(data, o1), four(data, o4);
    for (int64_t step = 0; step < 6; ++step) check_same(one.next(), four.next());
  }
}

TEST_CASE("loader: a loader started at step k returns what a loader from 0 returned at k", "[loader]") {
  auto data = file_dataset();
  for (int64_t window : {0, 3}) {
    INFO("bucket window " << window);
    LoaderOptions o = options(2);
    o.augment = true;
    o.bucket_window = window;
    Loader from_start(data, o);
    std::vector<Batch> batches;
    for (int64_t s = 0; s < 10; ++s) batches.push_back(from_start.next());
    for (int64_t k : {1, 4, 7}) {  // 4 and 7 resume in the middle of a bucketing window
      Loader resumed(data, o, k);
      for (int64_t s = k; s < 10; ++s) check_same(resumed.next(), batches[(size_t)s]);
    }
  }
}

TEST_CASE("loader: shuffled epochs visit every sample once, each in a new order", "[loader]") {
  std::vector<std::string> paths;
  auto data = file_dataset(&paths);
  std::vector<std::string> sorted = paths;
  std::sort(sorted.begin(), sorted.end());
  Loader loader(data, options(3));
  const auto ids = ids_of(loader, kFiles);  // 13 batches of 4: exactly 4 epochs
  std::vector<std::vector<std::string>> epochs;
  for (int64_t e = 0; e < 4; ++e) {
    std::vector<std::string> epoch(ids.begin() + e * kFiles, ids.begin() + (e + 1) * kFiles);
    std::vector<std::string> as_set = epoch;
    std::sort(as_set.begin(), as_set.end());
    CHECK(as_set == sorted);
    epochs.push_back(epoch);
  }
  CHECK(epochs[0] != paths);
  CHECK(epochs[0] != epochs[1]);
  CHECK(epochs[1] != epochs[2]);
  CHECK(epochs[2] != epochs[3]);
  // Another seed, another order.
  LoaderOptions o = options(3);
  o.seed = 8;
  Loader other(data, o);
  CHECK(ids_of(other, 4) != std::vector<std::string>(ids.begin(), ids.begin() + 16));
}

TEST_CASE("loader: without shuffling, samples come in file order, epoch after epoch", "[loader]") {
  std::vector<std::string> paths;
  auto data = file_dataset(&paths);
  LoaderOptions o = options(3);
  o.shuffle = false;
  Loader loader(data, o);
  const auto ids = ids_of(loader, 10);
  for (size_t k = 0; k < ids.size(); ++k) CHECK(ids[k] == paths[k % kFiles]);
}

TEST_CASE("loader: bucketing groups similar widths and keeps every sample of the window", "[loader]") {
  auto data = file_dataset();
  const int64_t window = 3, windows = 4;
  LoaderOptions plain = options(2), bucketed = options(2);
  bucketed.bucket_window = window;
  for (bool shuffle : {true, false}) {
    INFO("shuffle " << shuffle);
    plain.shuffle = bucketed.shuffle = shuffle;
    Loader a(data, plain), b(data, bucketed);
    int64_t spread_plain = 0, spread_bucketed = 0;
    for (int64_t w = 0; w < windows; ++w) {
      std::vector<std::string> ids_plain, ids_bucketed;
      std::vector<std::pair<int64_t, int64_t>> ranges;  // (min, max) padded width per batch
      for (int64_t j = 0; j < window; ++j) {
        Batch x = a.next(), y = b.next();
        ids_plain.insert(ids_plain.end(), x.ids.begin(), x.ids.end());
        ids_bucketed.insert(ids_bucketed.end(), y.ids.begin(), y.ids.end());
        const auto [xmin, xmax] = std::minmax_element(x.widths.begin(), x.widths.end());
        const auto [ymin, ymax] = std::minmax_element(y.widths.begin(), y.widths.end());
        spread_plain += *xmax - *xmin;
        spread_bucketed += *ymax - *ymin;
        ranges.push_back({*ymin, *ymax});
      }
      // The same samples (positions w*12 .. w*12+11), only regrouped.
      std::sort(ids_plain.begin(), ids_plain.end());
      std::sort(ids_bucketed.begin(), ids_bucketed.end());
      CHECK(ids_plain == ids_bucketed);
      // Sorted by width, then cut: the batches' width ranges do not interleave.
      std::sort(ranges.begin(), ranges.end());
      for (size_t j = 1; j < ranges.size(); ++j) CHECK(ranges[j - 1].second <= ranges[j].first);
    }
    CHECK(spread_bucketed < spread_plain);
  }
}

TEST_CASE("loader: every synthetic label fits its padded width for CTC", "[loader]") {
  // At model heights 12 and 8 lines come out narrow, and many long ones must be re-drawn
  // shorter (at 32 that almost never happens): the labels get shorter on average.
  std::map<int64_t, int64_t> chars;
  for (int64_t height : {32, 12, 8}) {
    INFO("height " << height);
    auto data = synth_dataset(height);
    if (!data) return;
    LoaderOptions o = options(2, 16);
    o.augment = height == 32;
    Loader loader(data, o);
    const nn::Charset charset = nn::Charset::ascii();
    for (int64_t step = 0; step < 8; ++step) {
      Batch b = loader.next();
      CHECK(b.images.size(2) == height);
      for (size_t i = 0; i < b.widths.size(); ++i) {
        INFO(b.ids[i] << " '" << b.texts[i] << "' width " << b.widths[i]);
        CHECK(frames_for_width(b.widths[i]) >= frames_needed(b.targets[i]));
        CHECK(charset.decode(b.targets[i]) == b.texts[i]);
        CHECK(b.ids[i].rfind("synth:", 0) == 0);
        chars[height] += (int64_t)b.targets[i].size();
      }
    }
  }
  CHECK(chars[8] < chars[32]);
}

TEST_CASE("synth: the type's spacing comes from its ranges, and the default draws nothing", "[loader]") {
  auto plain = synth_dataset();
  if (!plain) return;
  SynthOptions tight_opt, tracked_opt, drawn_opt;
  tight_opt.min_word_spacing = tight_opt.max_word_spacing = 0.3;  // equal ends: that value, no draw
  tracked_opt.min_tracking = tracked_opt.max_tracking = 0.08;
  drawn_opt.min_word_spacing = 0.5, drawn_opt.max_word_spacing = 1.6;
  auto tight = synth_dataset(32, tight_opt), tracked = synth_dataset(32, tracked_opt), drawn = synth_dataset(32, drawn_opt);
  int64_t with_space = 0, narrower = 0, wider = 0, drawn_differs = 0;
  for (int64_t i = 0; i < 24; ++i) {
    const LineSample a = plain->get(i, 1000 + (uint64_t)i), b = tight->get(i, 1000 + (uint64_t)i);
    const LineSample c = tracked->get(i, 1000 + (uint64_t)i), d = drawn->get(i, 1000 + (uint64_t)i);
    // Fixed spacing draws nothing: the same text, font and size as the default.
    REQUIRE(b.text == a.text);
    REQUIRE(c.text == a.text);
    if (a.text.find(' ') != std::string::npos) {
      ++with_space;
      narrower += b.image.width < a.image.width;
    }
    wider += a.text.size() > 1 && c.image.width > a.image.width;
    drawn_differs += d.text != a.text || d.image.width != a.image.width;
  }
  REQUIRE(with_space > 0);
  CHECK(narrower == with_space);  // every line with a space is narrower with spaces at 0.3
  CHECK(wider >= 20);             // tracked letters widen (nearly) every line of two or more
  CHECK(drawn_differs > 0);       // a drawn range changes lines
  SynthOptions bad;
  bad.min_word_spacing = 1.2, bad.max_word_spacing = 0.8;
  CHECK_THROWS_WITH(synth_dataset(32, bad), Catch::Contains("min_word_spacing"));
  bad = SynthOptions{};
  bad.min_tracking = -0.1, bad.max_tracking = 0.9;
  CHECK_THROWS_WITH(synth_dataset(32, bad), Catch::Contains("tracking"));
}

TEST_CASE("synth: a share of lines in small capitals keeps its text, and a share of 0 draws nothing", "[loader]") {
  auto plain = synth_dataset();
  if (!plain) return;
  SynthOptions none_opt, all_opt;
  none_opt.small_caps = 0;
  all_opt.small_caps = 1;
  auto none = synth_dataset(32, none_opt), all = synth_dataset(32, all_opt);
  int64_t lower = 0, changed = 0;
  for (int64_t i = 0; i < 24; ++i) {
    const LineSample a = plain->get(i, 2000 + (uint64_t)i), b = none->get(i, 2000 + (uint64_t)i);
    REQUIRE(b.text == a.text);  // no draw: the same line, pixel for pixel
    REQUIRE(b.image.pixels == a.image.pixels);
    const LineSample c = all->get(i, 2000 + (uint64_t)i);
    REQUIRE(c.text == a.text);  // the small capitals' draws come after the text's and the font's
    const auto has = [&](auto test) { return std::any_of(a.text.begin(), a.text.end(), test); };
    if (has([](char ch) { return ch >= 'a' && ch <= 'z'; }) &&
        has([](char ch) { return (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'); })) {
      ++lower;
      changed += c.image.width != a.image.width || c.image.pixels != a.image.pixels;
    }
  }
  REQUIRE(lower > 0);
  CHECK(changed == lower);  // every line that can be set in small capitals looks different
  SynthOptions bad;
  bad.small_caps = 1.5;
  CHECK_THROWS_WITH(synth_dataset(32, bad), Catch::Contains("small_caps"));
}

TEST_CASE("synth: a charset no font covers fails with a clear message", "[loader]") {
  if (default_font_dirs().empty()) {
    WARN("no Debian font installed: synthetic checks skipped");
    return;
  }
  const nn::Charset charset = nn::Charset::from_chars({"\xe4\xb8\xad"});  // a CJK character
  auto text = std::make_shared<const TextSource>(std::vector<std::string>{"\xe4\xb8\xad"}, charset);
  SynthDataset data(load_fonts(default_font_dirs()), text, charset, SynthOptions{});
  CHECK_THROWS_WITH(data.get(3, 1), Catch::Contains("sample 3: no usable line") &&
                                        Catch::Contains("no font tried has every character"));
}

TEST_CASE("loader: a failing sample makes next() throw naming the step, after the batches before it", "[loader]") {
  auto data = std::make_shared<TestDataset>(10, /*broken=*/5);
  for (int64_t window : {0, 2}) {
    INFO("bucket window " << window);
    LoaderOptions o = options(3, 2);
    o.shuffle = false;  // index 5 is in step 2
    o.bucket_window = window;
    Loader loader(data, o);
    CHECK(loader.next().step == 0);
    CHECK(loader.next().step == 1);
    CHECK_THROWS_WITH(loader.next(), Catch::Contains("batch 2") && Catch::Contains("broken on purpose"));
    CHECK_THROWS_WITH(loader.next(), Catch::Contains("batch 2"));  // and stays failed
  }
}

TEST_CASE("loader: workers make at most `prefetch` batches ahead", "[loader]") {
  auto data = std::make_shared<TestDataset>(100);
  LoaderOptions o = options(4, 1);
  o.prefetch = 2;
  Loader loader(data, o);
  // Steps 0 (the one next() returns) to 2 may be made; wait for them, then a little longer.
  for (int i = 0; i < 200 && data->calls < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(data->calls == 3);
  loader.next();
  for (int i = 0; i < 200 && data->calls < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(data->calls == 4);
}

TEST_CASE("loader: destroying a loader mid-stream returns promptly", "[loader]") {
  auto slow = std::make_shared<TestDataset>(50, -1, /*sleep_ms=*/3);
  for (int64_t window : {0, 4}) {
    INFO("bucket window " << window);
    LoaderOptions o = options(4, 4);
    o.prefetch = 6;
    o.bucket_window = window;
    must_return_within(std::chrono::seconds(60), [&] { Loader never_read(slow, o); });
    must_return_within(std::chrono::seconds(60), [&] {
      Loader loader(slow, o);
      loader.next();
      loader.next();
    });
    // A failed loader, too: its workers have stopped claiming. (Catch's assertions belong to
    // the test's thread, so the outcome is checked after the call.)
    bool threw = false;
    must_return_within(std::chrono::seconds(60), [&] {
      Loader loader(std::make_shared<TestDataset>(50, 1), o);
      try {
        for (int64_t step = 0; step < 13; ++step) loader.next();  // sample 1 is in the first epoch
      } catch (const Error&) {
        threw = true;
      }
    });
    CHECK(threw);
  }
  SUCCEED("every loader was destroyed");
}
