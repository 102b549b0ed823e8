// Pages read several at a time (ocrt-infer --page-jobs; docs/pages.md, "Several pages at
// once"), on the CPU or on GPUs.
//
//   PageLanes lanes(2, 2, {model_path, predictor_options, detector_path, detector_options, {Device::cpu()}});
//   lanes.post([&](PageLanes::Lane& lane) { read_page(image, name, lane.detector, lane.predictor); });
//
// Why, on the CPU: one page read with all the threads leaves cores idle. Its steps take turns
// (detect, cut the lines out, recognise them, place the words), and the small ones (the
// detector's outlines, LSTM steps of a short batch, placing words) use one thread, while
// OpenMP's teams wait at each barrier for their slowest thread. Two pages read side by side on
// one thread each keep both cores busy: 11 real scanned pages on 2 cores took 2.65 s as two
// processes of one thread against 3.1-3.3 s as one process of two (docs/pages.md, "Several
// pages at once"). Tesseract is benchmarked the same way, one process per core.
//
// Why, on a GPU: a page read alone keeps its GPU waiting through every step that runs on the
// host (decoding the image, scaling it for the detector, the detector's outlines, cutting the
// lines, placing the words: more than half of a page's time on an H100, docs/gpu-status.md).
// With several lanes on one GPU, one lane's host steps run while another lane's detector or
// recogniser has the GPU. A GPU is still driven by one thread at a time: each lane takes the
// GPU's turn (DeviceTurn, runtime/device.h) for its forward passes, and the predictor's and the
// detector's GPU work is queued under it. With several GPUs, lane i uses the i-th of them
// (round robin), so that pages spread over every GPU of --devices.
//
// Each lane is a thread with its own text detector and its own predictor (one worker, on the
// lane's device, with the lane's share of the threads: threads / lanes, at least 1), so
// nothing is shared between pages but the allocator, the GPU's turn and the model file on disk;
// each predictor keeps its own copy of the recogniser (for crnn-en in float32 about 110 MB with
// its kept Winograd weights on the CPU; what a lane costs is measured in docs/pages.md,
// "Several pages at once"). A lane's thread limits its own OpenMP regions to its share
// (limit_this_thread), so the detector and the line cutting of a page run on the lane's
// threads only.
//
// On the CPU, a lane with nothing to run lends its threads to the lanes still reading
// (spare_threads): at the end of a run, when no page is left for it, the last pages' detector
// and recogniser batches take the idle lane's threads too (DetectorOptions and
// PredictorOptions::borrow_threads; runtime/threading.h LentThreads) instead of leaving a core
// idle for the rest of the last page. No op's result depends on its thread count, so a page
// reads the same whether threads were lent or not.
//
// Jobs run in the order they are posted, each on the first lane that is free; a job reports
// its own result (a promise, a packaged_task) and must not throw (an exception that escapes a
// job is kept and rethrown by the next post() or by wait_idle(), never lost).
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "infer/detector.h"
#include "infer/predictor.h"
#include "runtime/device.h"

namespace ocrt::infer {

struct PageLaneSetup {
  std::string model_path;         // the recogniser's model file
  PredictorOptions predictor;     // its devices and threads are set per lane (one worker)
  std::string detector_path;      // the text detector's model file
  DetectorOptions detector;       // its device is set per lane
  // The lanes' devices: lane i runs on devices[i % size]. Either the CPU alone, or GPUs
  // alone (a list mixing them is refused: page_lanes_for).
  std::vector<Device> devices{Device::cpu()};
};

class PageLanes {
 public:
  struct Lane {
    TextDetector& detector;
    Predictor& predictor;
    int threads;  // this lane's share of the CPU threads
    Device device;  // where its detector and recogniser run
  };
  using Job = std::function<void(Lane&)>;

  // Builds `lanes` lanes (>= 1) sharing `threads` CPU threads (>= 1), loading the detector and
  // the recogniser once per lane; throws what a Predictor or TextDetector would (a bad file).
  PageLanes(int lanes, int threads, const PageLaneSetup& setup);
  ~PageLanes();  // runs the jobs already posted, then joins the lanes
  PageLanes(const PageLanes&) = delete;
  PageLanes& operator=(const PageLanes&) = delete;

  void post(Job job);
  // Blocks until every posted job has finished.
  void wait_idle();
  int lanes() const { return (int)lanes_.size(); }
  int threads_per_lane() const { return share_; }
  // The threads of CPU lanes that wait for work while no job is queued (0 on GPUs, and while
  // jobs wait: an idle lane is about to take one).
  int spare_threads();

 private:
  struct LaneState {
    Device device;
    std::unique_ptr<TextDetector> detector;
    std::unique_ptr<Predictor> predictor;
    std::thread thread;
  };
  void lane_main(LaneState& s);
  void rethrow_escaped();  // with mu_ held

  int share_ = 1;
  std::vector<std::unique_ptr<LaneState>> lanes_;
  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<Job> jobs_;
  size_t running_ = 0;
  int waiting_ = 0;  // lanes waiting for a job
  bool cpu_ = true;
  bool stopping_ = false;
  std::exception_ptr escaped_;
};

// How many pages ocrt-infer reads at once: `asked` when it is positive; otherwise (auto), where
// every device is a CPU, 2 when there are at least 2 threads and the recogniser is small (at
// most kSmallRecogniserBytes bytes of tensors in its file, Predictor::model_bytes), else 1; where
// every device is a GPU, kLanesPerGpu lanes a GPU, as long as each lane keeps at least 2 threads.
// Asking for more than 1 with a list that mixes the CPU and GPUs is refused (the lanes' devices
// are either the CPU alone or GPUs alone).
//
// Why only small recognisers on the CPU: a lane costs a copy of the recogniser and a second page's
// working set, and pays where the steps that use threads badly (the detector, the outlines,
// cutting the lines) are a large share of a page. Bytes, not values: an int8 file's copy is a
// quarter of its float one's, and int8 is also where the recogniser is fastest, so the detector's
// share of a page is largest. On 2 cores (docs/pages.md, real scans): crnn-s (2.2M values, 8.8
// MB) in int8 read 12-16% faster with 2 lanes (peak RSS 216 -> 303 MiB), in float32 9% (244 ->
// 350 MiB); crnn-en in float32 (35 MB) no faster (326 -> 525 MiB); crnn-en in int8 (8.9 MB) 3%
// faster on a Zen 5 (251 -> 392 MiB), and on a Xeon with AMX, whose tiles read its convolutions
// (bench/results/pages.md, twentieth session), 12% on the scans and 35% on the digital pages
// (206 -> 270 and 217 -> 278-321 MiB).
constexpr int64_t kSmallRecogniserBytes = int64_t(16) << 20;
// On an H100 with 16 cores (scripts/gpu-pages.sh, 32 rendered 300 dpi pages, crnn-en and the
// float detector in fp32), ocrt-infer's own count: 1 lane 5.08 s, 2 lanes 4.92 s, 4 lanes
// 3.28 s, 8 lanes 2.82 s (1.8x), the same words read on every page.
constexpr int kLanesPerGpu = 8;
int page_lanes_for(int asked, const std::vector<Device>& devices, int threads, int64_t recogniser_bytes);

}  // namespace ocrt::infer
