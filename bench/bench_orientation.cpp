// How often the page reader finds which way up a page is: every page given (pages standing
// upright, e.g. bench/real_pages.sh's layout of scribeocr/ocr-benchmark) is turned clockwise by
// 0, 90, 180 and 270 degrees in memory and read (infer/page_reader.h, read_page with its default
// options: the orientation probe, the sideways check); the rotation found must be the one made.
// Prints a row per page and turn (found, the probe's lines, votes and mean confidences, whether
// the sideways check ran, seconds), then the count right per turn.
//
//   bench_orientation [--det FILE] [--model FILE] [--threads N] PAGE_OR_FOLDER...
//
// A folder gives its images and those of its subfolders, in path order (as ocrt-infer reads one).
//
// The models default to what ocrt-infer takes on a CPU with an int8 kernel (the int8 detector
// and recogniser) with its default decoding (greedy, the beam and the shipped language model on
// lines in doubt). bench/results/pages.md records runs.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "infer/detector.h"
#include "infer/inputs.h"
#include "infer/page_reader.h"
#include "infer/predictor.h"
#include "runtime/cli.h"
#include "runtime/error.h"
#include "runtime/image.h"

using namespace ocrt;
using namespace ocrt::infer;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  try {
    std::string det = "weights/det-en-int8.safetensors", model = "weights/crnn-en-int8.safetensors";
    int64_t threads = 0;
    cli::Parser p("bench_orientation", "usage: bench_orientation [options] PAGE_OR_FOLDER...\n");
    p.add(cli::text("--det", "FILE", det, "the text detector (weights/det-en-int8.safetensors)"));
    p.add(cli::text("--model", "FILE", model, "the recogniser (weights/crnn-en-int8.safetensors)"));
    p.add(cli::integer("--threads", "N", threads, 0, 4096, "CPU threads (0: all)"));
    const std::vector<std::string> rest = p.parse(argc, argv);
    OCRT_CHECK(!rest.empty(), "give pages or folders of pages");
    std::vector<std::string> pages;
    for (const std::string& a : rest) {
      if (!fs::is_directory(a)) {
        pages.push_back(a);
        continue;
      }
      const std::vector<std::string> in_dir = folder_image_files(a);
      pages.insert(pages.end(), in_dir.begin(), in_dir.end());
    }
    PredictorOptions po;
    po.threads = (int)threads;
    po.precision = "auto";
    use_auto_decoding(po, "weights/lm-en.clm", true);
    Predictor predictor(model, po);
    TextDetector detector(det);
    int right[4] = {0, 0, 0, 0}, total[4] = {0, 0, 0, 0};
    std::printf("| page | turned | found | probe lines | votes (sure) | confidence | sideways | s |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (const std::string& path : pages) {
      const GrayImage page = load_gray_image(path);
      for (int k = 0; k < 4; ++k) {
        const int rotation = 90 * k;
        const GrayImage shown = turn_clockwise(page, rotation);
        PageReadInfo info;
        const auto t0 = std::chrono::steady_clock::now();
        read_page(shown, path, detector, predictor, {}, &info);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++total[k];
        right[k] += info.rotation == rotation;
        std::printf("| %s | %d | %d%s | %lld | %lld-%lld (%lld-%lld) | %.3f / %.3f | %s | %.2f |\n",
                    fs::path(path).filename().string().c_str(), rotation, info.rotation,
                    info.rotation == rotation ? "" : " **wrong**", (long long)info.probe_lines,
                    (long long)info.probe_votes[0], (long long)info.probe_votes[1],
                    (long long)info.probe_sure_votes[0], (long long)info.probe_sure_votes[1], info.probe_confidence[0],
                    info.probe_confidence[1], info.sideways_tried ? "tried" : "", s);
        std::fflush(stdout);
      }
    }
    int all = 0, all_total = 0;
    for (int k = 0; k < 4; ++k) {
      std::printf("turned by %d: %d of %d the right way up\n", 90 * k, right[k], total[k]);
      all += right[k], all_total += total[k];
    }
    std::printf("all: %d of %d (recogniser %s, detector %s)\n", all, all_total, model.c_str(), det.c_str());
    return all == all_total ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_orientation: %s\n", e.what());
    return 2;
  }
}
