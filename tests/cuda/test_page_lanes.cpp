// Pages read side by side on one GPU (infer/page_lanes.h): several lanes, each with its own
// detector and predictor on cuda:0, take the GPU's turn (DeviceTurn) for their forward passes
// and do their host work meanwhile. Every page must read exactly as one page read alone on
// cuda:0 does, however the lanes' turns interleave, and the lanes must overlap.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "infer/page_lanes.h"
#include "infer/page_reader.h"
#include "runtime/image.h"

using namespace ocrt;
using namespace ocrt::infer;
namespace fs = std::filesystem;

TEST_CASE("page lanes on one GPU read every page as one page read alone on it", "[cuda][page_lanes]") {
  const std::string source = OCRT_SOURCE_DIR;
  const std::string model = source + "/weights/crnn-s-en.safetensors", detector = source + "/weights/det-en.safetensors";
  const std::string article = source + "/samples/pages/article.png";
  REQUIRE(fs::exists(model));
  REQUIRE(fs::exists(detector));
  REQUIRE(fs::exists(article));
  const GrayImage page = load_gray_image(article);
  const Device gpu = Device::cuda(0);

  std::string alone;
  {
    DetectorOptions d;
    d.device = gpu;
    TextDetector det(detector, d);
    PredictorOptions p;
    p.devices = {gpu};
    p.threads = 2;
    Predictor pred(model, p);
    alone = page_text(read_page(page, "article.png", det, pred));
  }
  REQUIRE(alone.size() > 1000);  // the sample page is an article of several hundred words

  PageLaneSetup setup;
  setup.model_path = model;
  setup.detector_path = detector;
  setup.devices = {gpu};
  std::vector<std::string> texts(8);
  std::atomic<int> running{0}, most{0};
  {
    PageLanes lanes(3, 6, setup);
    REQUIRE(lanes.lanes() == 3);
    for (size_t i = 0; i < texts.size(); ++i)
      lanes.post([&, i](PageLanes::Lane& lane) {
        CHECK(lane.device == gpu);
        const int now = ++running;
        for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
        }
        texts[i] = page_text(read_page(page, "article.png", lane.detector, lane.predictor));
        --running;
      });
    lanes.wait_idle();
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO("page " << i);
    CHECK(texts[i] == alone);
  }
  CHECK(most >= 2);  // the lanes read pages at the same time (taking turns on the GPU)
}
