// See page_lanes.h.
#include "infer/page_lanes.h"

#include <algorithm>
#include <utility>

#include "runtime/error.h"
#include "runtime/threading.h"

namespace ocrt::infer {

PageLanes::PageLanes(int lanes, int threads, const PageLaneSetup& setup) {
  OCRT_CHECK(lanes >= 1, "page lanes: at least one lane, got ", lanes);
  OCRT_CHECK(threads >= 1, "page lanes: at least one thread, got ", threads);
  OCRT_CHECK(!setup.devices.empty(), "page lanes: no device");
  const bool cpu = setup.devices[0].is_cpu();
  for (const Device& d : setup.devices)
    OCRT_CHECK(d.is_cpu() == cpu, "page lanes: the devices must be the CPU alone or GPUs alone");
  share_ = std::max(1, threads / lanes);
  cpu_ = cpu;
  for (int i = 0; i < lanes; ++i) {
    auto s = std::make_unique<LaneState>();
    s->device = setup.devices[(size_t)i % setup.devices.size()];
    DetectorOptions detector = setup.detector;
    detector.device = s->device;
    PredictorOptions options = setup.predictor;
    options.devices = {s->device};
    options.threads = share_;
    if (cpu && lanes > 1) detector.borrow_threads = options.borrow_threads = [this] { return spare_threads(); };
    s->detector = std::make_unique<TextDetector>(setup.detector_path, detector);
    s->predictor = std::make_unique<Predictor>(setup.model_path, options);
    lanes_.push_back(std::move(s));
  }
  // Started only once every lane is built: a constructor that throws has no thread to join.
  for (auto& s : lanes_) s->thread = std::thread([this, lane = s.get()] { lane_main(*lane); });
}

PageLanes::~PageLanes() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (auto& s : lanes_)
    if (s->thread.joinable()) s->thread.join();
  // Predictors are destroyed in reverse order: each gives Eigen back the count it found.
  while (!lanes_.empty()) lanes_.pop_back();
}

void PageLanes::rethrow_escaped() {
  if (escaped_) std::rethrow_exception(std::exchange(escaped_, nullptr));
}

void PageLanes::post(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    rethrow_escaped();
    jobs_.push_back(std::move(job));
  }
  work_cv_.notify_one();
}

void PageLanes::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return jobs_.empty() && running_ == 0; });
  rethrow_escaped();
}

int PageLanes::spare_threads() {
  std::lock_guard<std::mutex> lock(mu_);
  return cpu_ && jobs_.empty() && !stopping_ ? waiting_ * share_ : 0;
}

void PageLanes::lane_main(LaneState& s) {
  limit_this_thread(share_);
  Lane lane{*s.detector, *s.predictor, share_, s.device};
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++waiting_;
      work_cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      --waiting_;
      if (jobs_.empty()) return;  // stopping, and nothing left to run
      job = std::move(jobs_.front());
      jobs_.pop_front();
      ++running_;
    }
    std::exception_ptr error;
    try {
      job(lane);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      if (error && !escaped_) escaped_ = error;
    }
    idle_cv_.notify_all();
  }
}

int page_lanes_for(int asked, const std::vector<Device>& devices, int threads, int64_t recogniser_bytes) {
  const bool cpu_only = std::all_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cpu(); });
  const bool gpu_only = std::all_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cuda(); });
  if (asked > 0) {
    OCRT_CHECK(asked == 1 || cpu_only || gpu_only, "--page-jobs ", asked,
               ": the lanes run on the CPU alone or on GPUs alone, not on a list that mixes them (",
               devices.size(), " devices given)");
    return asked;
  }
  if (gpu_only && !devices.empty())
    return std::max(1, std::min(kLanesPerGpu * (int)devices.size(), threads / 2));
  return cpu_only && threads >= 2 && recogniser_bytes <= kSmallRecogniserBytes ? 2 : 1;
}

}  // namespace ocrt::infer
