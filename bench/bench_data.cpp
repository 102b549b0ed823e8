// The data pipeline alone: synthetic lines rendered, degraded, resized, augmented and batched
// by the training loader's worker threads, with no model behind them. Its lines/s is what a
// GPU can be fed at most; compare it with the training lines/s (ocrt-train's summary) and the
// step-only rate (bench_train) to see which side limits a run.
//
//   bench_data [--workers N] [--batches 40] [--batch 128] [--fonts PATHS] [--prose FILES]
//              [--words FILE] [--scan PRESET] [--synth-chars 2:48] [--synth-height 16:80]
//              [--no-augment] [--render-cache DIR [--cache-lines N]]
//
// With --render-cache, the lines come from a render-once cache in DIR (train/line_cache.h;
// built first when missing, N lines, 20000 by default, the build timed apart) and only the
// reading, augmentation and batching are timed: what ocrt-train --render-cache feeds a GPU.
//
// The defaults are the English recipe's (scripts/train-en.sh) with the fonts and prose of
// scripts/fonts-en.sh in .fonts-en/. Prints lines/s over the timed batches (after 2 warm-up
// batches) and the mean padded width of a line.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cli.h"
#include "runtime/error.h"
#include "train/line_cache.h"
#include "train/loader.h"
#include "train/synth.h"

using namespace ocrt;
using namespace ocrt::train;

int main(int argc, char** argv) {
  try {
    int workers = (int)std::max(1u, std::thread::hardware_concurrency());
    int64_t batches = 40, batch = 128;
    std::vector<std::string> fonts = {".fonts-en/train"}, prose = {".fonts-en/prose.txt"};
    std::string words = ".fonts-en/words", scan = "scan";
    SynthOptions so;
    so.min_chars = 2, so.max_chars = 48, so.min_pixel_height = 16, so.max_pixel_height = 80;
    so.size = 1000000;
    bool augment = true;
    std::string cache_dir;
    int64_t cache_lines = 20000;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        OCRT_CHECK(i + 1 < argc, a, ": expects a value");
        return argv[++i];
      };
      auto range = [&](double& lo, double& hi) {
        const std::string v = value();
        const size_t colon = v.find(':');
        OCRT_CHECK(colon != std::string::npos, a, ": expected LO:HI, got '", v, "'");
        lo = cli::parse_double(a, v.substr(0, colon));
        hi = cli::parse_double(a, v.substr(colon + 1));
      };
      if (a == "--help" || a == "-h") {
        std::puts("bench_data [--workers N] [--batches 40] [--batch 128] [--fonts PATHS] [--prose FILES] [--words FILE]\n"
                  "           [--scan PRESET] [--synth-chars 2:48] [--synth-height 16:80] [--no-augment]\n"
                  "           [--render-cache DIR [--cache-lines 20000]]");
        return 0;
      } else if (a == "--workers") workers = (int)cli::parse_int(a, value());
      else if (a == "--batches") batches = cli::parse_int(a, value());
      else if (a == "--batch") batch = cli::parse_int(a, value());
      else if (a == "--fonts") fonts = cli::split_list(value());
      else if (a == "--prose") {
        const std::string v = value();
        prose = v == "none" ? std::vector<std::string>{} : cli::split_list(v);
      }
      else if (a == "--words") words = value();
      else if (a == "--scan") scan = value();
      else if (a == "--no-augment") augment = false;
      else if (a == "--render-cache") cache_dir = value();
      else if (a == "--cache-lines") cache_lines = cli::parse_int(a, value());
      else if (a == "--synth-chars") {
        double lo, hi;
        range(lo, hi);
        so.min_chars = (int64_t)lo, so.max_chars = (int64_t)hi;
      } else if (a == "--synth-height") range(so.min_pixel_height, so.max_pixel_height);
      else fail("unknown option '", a, "'");
    }
    OCRT_CHECK(workers >= 1 && batches >= 1 && batch >= 1, "--workers, --batches and --batch must be >= 1");
    so.scan = scan != "none";
    so.scan_options = ScanOptions::preset(scan);
    const nn::Charset charset = nn::Charset::ascii();
    auto text = std::make_shared<const TextSource>(TextSource::read_words(words), charset, TextSource::read_prose(prose));
    const auto loaded = load_fonts(fonts);
    std::shared_ptr<const Dataset> data = std::make_shared<SynthDataset>(loaded, text, charset, so);
    if (!cache_dir.empty()) {
      LineCacheSpec spec;
      spec.lines = cache_lines;
      spec.seed = 1;
      Json fonts_json = Json::array();
      for (const auto& f : loaded) fonts_json.push_back(f->path());
      spec.settings.set("bench_data", true);
      spec.settings.set("fonts", fonts_json);
      spec.settings.set("scan", scan);
      spec.settings.set("synth_chars", std::to_string(so.min_chars) + ":" + std::to_string(so.max_chars));
      spec.settings.set("synth_height", Json(so.min_pixel_height).dump() + ":" + Json(so.max_pixel_height).dump());
      const auto b0 = std::chrono::steady_clock::now();
      build_line_cache(cache_dir, *data, spec, workers, true);
      const double built = std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
      const auto o0 = std::chrono::steady_clock::now();
      auto cached = std::make_shared<CachedLineDataset>(cache_dir, spec, charset);
      const double opened = std::chrono::duration<double>(std::chrono::steady_clock::now() - o0).count();
      std::printf("bench_data: render cache %s: %lld lines, %.1f MB, built or checked in %.2f s, opened in %.2f s\n",
                  cache_dir.c_str(), (long long)cached->size(), (double)cached->bytes() / 1e6, built, opened);
      data = cached;
    }
    LoaderOptions lo;
    lo.batch = batch, lo.workers = workers, lo.prefetch = std::max(4, 2 * workers), lo.seed = 1;
    lo.augment = augment, lo.bucket_window = 8;
    Loader loader(data, lo);
    for (int i = 0; i < 2; ++i) loader.next();  // warm-up: the workers fill their queue
    const auto t0 = std::chrono::steady_clock::now();
    double width = 0;
    for (int64_t b = 0; b < batches; ++b) {
      const Batch x = loader.next();
      for (int64_t w : x.widths) width += (double)w;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double lines = (double)(batches * batch);
    std::printf("bench_data: %s, %d workers, scan '%s', chars %lld:%lld, glyphs %.0f-%.0f px, augment %s: %.1f lines/s "
                "(%lld batches of %lld in %.2f s), mean padded width %.0f px\n",
                cache_dir.empty() ? "rendered on the fly" : "from the render cache", workers, scan.c_str(), (long long)so.min_chars, (long long)so.max_chars, so.min_pixel_height,
                so.max_pixel_height, augment ? "on" : "off", lines / s, (long long)batches, (long long)batch, s,
                width / lines);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_data: %s\n", e.what());
    return 1;
  }
}
