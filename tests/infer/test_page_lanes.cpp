// Pages read side by side (infer/page_lanes.h, ocrt-infer --page-jobs). The lanes must each
// get their share of the threads and their own detector and predictor, run every job posted
// (the ones still queued when they are destroyed too) and hand on an exception that escapes a
// job; the default count must follow the rule page_lanes_for states. ocrt-infer must write the
// same documents, in input order, with lanes as without: the sample page read four times among
// a blank page, a broken page and a line, in text, jsonl and --eval.
#include <catch2/catch.hpp>

#include <omp.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "infer/page_lanes.h"
#include "run_command.h"
#include "runtime/image.h"
#include "runtime/threading.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::infer;
using ocrt::testing::program;
using ocrt::testing::run_command;
using ocrt::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kSource = OCRT_SOURCE_DIR;
const std::string kSmallModel = kSource + "/weights/crnn-s-en.safetensors";
const std::string kDetector = kSource + "/weights/det-en.safetensors";

PageLaneSetup small_setup() {
  PageLaneSetup s;
  s.model_path = kSmallModel;
  s.detector_path = kDetector;
  return s;
}

std::string quiet(const std::string& command) { return "(" + command + " 2>/dev/null)"; }

}  // namespace

TEST_CASE("page lanes: how many by default, and what is refused", "[page_lanes]") {
  const std::vector<Device> cpu{Device::cpu()}, cpus{Device::cpu(), Device::cpu()};
  const std::vector<Device> gpu{Device::cuda(0)}, mixed{Device::cuda(0), Device::cpu()};
  const std::vector<Device> gpus{Device::cuda(0), Device::cuda(1)};
  CHECK(page_lanes_for(0, cpu, 2, 8'800'000) == 2);  // crnn-s in float32
  CHECK(page_lanes_for(0, cpu, 2, 8'900'000) == 2);  // crnn-en in int8
  CHECK(page_lanes_for(0, cpu, 16, kSmallRecogniserBytes) == 2);
  CHECK(page_lanes_for(0, cpu, 2, kSmallRecogniserBytes + 1) == 1);
  CHECK(page_lanes_for(0, cpu, 2, 35'000'000) == 1);  // crnn-en in float32
  CHECK(page_lanes_for(0, cpu, 1, 8'800'000) == 1);   // one thread: nothing to share
  CHECK(page_lanes_for(0, cpus, 4, 8'800'000) == 2);
  // GPUs alone: kLanesPerGpu a GPU, whatever the model, while each lane keeps 2 threads.
  CHECK(page_lanes_for(0, gpu, 16, 9'000'000) == kLanesPerGpu);
  CHECK(page_lanes_for(0, gpus, 64, 9'000'000) == 2 * kLanesPerGpu);
  CHECK(page_lanes_for(0, gpus, 4, 9'000'000) == 2);
  CHECK(page_lanes_for(0, gpu, 1, 9'000'000) == 1);
  CHECK(page_lanes_for(0, mixed, 16, 2'200'000) == 1);
  CHECK(page_lanes_for(3, cpu, 2, 9'000'000) == 3);  // asked: as asked, whatever the model
  CHECK(page_lanes_for(1, gpu, 16, 2'200'000) == 1);
  CHECK(page_lanes_for(6, gpus, 16, 2'200'000) == 6);
  CHECK(page_lanes_for(1, mixed, 16, 2'200'000) == 1);
  CHECK_THROWS_WITH(page_lanes_for(2, mixed, 16, 2'200'000),
                    Catch::Contains("--page-jobs 2: the lanes run on the CPU alone or on GPUs alone"));
  PageLaneSetup mixed_setup = small_setup();
  mixed_setup.devices = mixed;
  CHECK_THROWS_WITH(PageLanes(2, 2, mixed_setup), Catch::Contains("the CPU alone or GPUs alone"));
}

TEST_CASE("page lanes: each lane its own detector, predictor and share of the threads", "[page_lanes]") {
  REQUIRE(fs::exists(kSmallModel));
  REQUIRE(fs::exists(kDetector));
  CHECK_THROWS_WITH(PageLanes(0, 2, small_setup()), Catch::Contains("at least one lane, got 0"));
  CHECK_THROWS_WITH(PageLanes(2, 0, small_setup()), Catch::Contains("at least one thread, got 0"));
  PageLaneSetup bad = small_setup();
  bad.model_path = kSource + "/weights/none.safetensors";
  CHECK_THROWS(PageLanes(2, 2, bad));  // a Predictor's own error, at construction

  std::mutex mu;
  std::set<const Predictor*> predictors;
  std::set<const TextDetector*> detectors;
  std::set<std::thread::id> threads;
  std::vector<int> shares;
  std::atomic<int> running{0}, most{0}, done{0};
  {
    PageLanes lanes(3, 6, small_setup());
    CHECK(lanes.lanes() == 3);
    CHECK(lanes.threads_per_lane() == 2);
    for (int i = 0; i < 9; ++i)
      lanes.post([&](PageLanes::Lane& lane) {
        const int now = ++running;
        for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(30));  // long enough for the lanes to overlap
        {
          std::lock_guard<std::mutex> lock(mu);
          predictors.insert(&lane.predictor);
          detectors.insert(&lane.detector);
          threads.insert(std::this_thread::get_id());
          shares.push_back(num_threads());
          CHECK(lane.threads == 2);
          CHECK(lane.device == Device::cpu());
        }
        --running;
        ++done;
      });
    lanes.wait_idle();
    CHECK(done == 9);
    // An exception that escapes a job comes back from the next wait_idle (and only once).
    lanes.post([](PageLanes::Lane&) { throw std::runtime_error("a job failed"); });
    CHECK_THROWS_WITH(lanes.wait_idle(), "a job failed");
    CHECK_NOTHROW(lanes.wait_idle());
    // Jobs still queued when the lanes go are run first.
    for (int i = 0; i < 6; ++i)
      lanes.post([&](PageLanes::Lane&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ++done;
      });
  }
  CHECK(done == 15);
  CHECK(most == 3);  // the three lanes ran at once
  CHECK(predictors.size() == 3);
  CHECK(detectors.size() == 3);
  CHECK(threads.size() == 3);
  CHECK(std::all_of(shares.begin(), shares.end(), [](int n) { return n == 2; }));
  CHECK(std::this_thread::get_id() != *threads.begin());
}

TEST_CASE("page lanes: a lane with no page left lends its threads to the lanes still reading", "[page_lanes]") {
  REQUIRE(fs::exists(kSmallModel));
  REQUIRE(fs::exists(kDetector));
  PageLanes lanes(2, 2, small_setup());
  REQUIRE(lanes.threads_per_lane() == 1);
  std::atomic<bool> second_done{false};
  std::atomic<int> while_queued{-1}, while_both{-1}, after_other{-1}, team{-1};
  // Job 1 holds a lane until the others are done; job 2 runs on the other lane; job 3 is
  // queued behind them while job 1 looks.
  std::atomic<bool> release{false};
  lanes.post([&](PageLanes::Lane&) {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    while (!second_done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // Job 3 has run on the other lane, which now waits: its thread is spare.
    for (int i = 0; i < 2000 && lanes.spare_threads() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    after_other = lanes.spare_threads();
    const LentThreads lent(after_other);
    int seen = 0;
#pragma omp parallel
    {
#pragma omp single
      seen = omp_get_num_threads();
    }
    team = seen;
  });
  lanes.post([&](PageLanes::Lane&) {
    while_both = lanes.spare_threads();  // the other lane is busy: nothing to lend
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  lanes.post([&](PageLanes::Lane&) { second_done = true; });
  // While a job is queued, an idle lane is about to take it: nothing is lent.
  while_queued = lanes.spare_threads();
  release = true;
  lanes.wait_idle();
  CHECK(while_queued == 0);
  CHECK(while_both == 0);
  CHECK(after_other == 1);
  CHECK(team == 2);  // the lane's own thread and the one lent
  // Both lanes wait again soon after their last job (a lane counts as waiting once it is back
  // at the queue, a moment after wait_idle sees its job done): both threads are spare.
  int spare = 0;
  for (int i = 0; i < 2000 && (spare = lanes.spare_threads()) != 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(spare == 2);
}

TEST_CASE("ocrt-infer --page-jobs: the same documents in input order as one page at a time", "[page_lanes][cli]") {
  TempDir dir("page-lanes");
  const std::string article = kSource + "/samples/pages/article.png";
  REQUIRE(fs::exists(article));
  // Four copies of the sample page with their truth, a blank page, a broken one, and a line
  // (read as a line: it ends a stretch of pages, and the next page starts another).
  std::string inputs, articles;
  for (int i = 0; i < 4; ++i) {
    const fs::path p = dir.path / ("article" + std::to_string(i) + ".png");
    fs::copy_file(article, p);
    fs::copy_file(kSource + "/samples/pages/article.json", dir.path / ("article" + std::to_string(i) + ".json"));
    inputs += " " + p.string();
    articles += " " + p.string();
    if (i == 0) {
      const fs::path blank = dir.path / "blank.png";
      GrayImage white;
      white.width = 600, white.height = 800;
      white.pixels.assign(600 * 800, 255);
      save_gray_png(blank.string(), white);
      inputs += " " + blank.string();
    }
    if (i == 1) {
      const fs::path broken = dir.path / "broken.png";
      std::ifstream in(article, std::ios::binary);
      std::string head(60, '\0');
      in.read(head.data(), 60);
      std::ofstream(broken, std::ios::binary) << head;  // a header that says 1700 x 2200, then nothing
      inputs += " " + broken.string();
    }
    if (i == 2) inputs += " " + kSource + "/samples/lines/000000.png";
  }
  const std::string bin = program("ocrt-infer") + " --threads 2 --weights " + kSmallModel + " ";
  for (const std::string format : {"text", "jsonl"}) {
    std::string one, three, err;
    CHECK(run_command(quiet(bin + "--page-jobs 1 --format " + format + inputs), &one) == 1);  // the broken page
    CHECK(run_command(quiet(bin + "--page-jobs 3 --format " + format + inputs), &three) == 1);
    CHECK(one.size() > 4 * 1000);
    CHECK(three == one);
  }
  std::string one, two;
  CHECK(run_command(bin + "--page-jobs 1 --eval" + articles + " 2>&1", &one) == 0);
  CHECK(run_command(bin + "--eval" + articles + " 2>&1", &two) == 0);  // crnn-s: 2 lanes by default
  CHECK_THAT(two, Catch::Contains("pages' time in 2 lanes of 1 threads, added up"));
  CHECK_THAT(one, !Catch::Contains(" lanes of "));
  // The report (stdout and stderr together) differs only in its timings.
  const auto words = [](const std::string& s) {
    const size_t at = s.find("words: ");
    REQUIRE(at != std::string::npos);
    return s.substr(at, s.find('\n', at) - at);
  };
  CHECK(words(one) == words(two));
  CHECK_THAT(two, Catch::Contains("4 pages (0 failed)"));
}
