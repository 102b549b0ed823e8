// The single-replica and in-process (threads) communicators; see comm.h.
#include "runtime/comm.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "runtime/error.h"

namespace ocrt {

std::vector<double> Communicator::all_reduce_values(const std::vector<double>& values, ReduceOp op, Device device) {
  if (size() == 1 || values.empty()) return values;
  Tensor t = Tensor::from_vector(values).to(device);
  all_reduce({t}, op);
  return t.to_vector<double>();
}

std::unique_ptr<PendingCollective> Communicator::start_all_reduce(const Tensor& t, ReduceOp op) {
  all_reduce({t}, op);
  return std::make_unique<PendingCollective>();  // already complete
}

void check_collective_tensors(const std::vector<Tensor>& tensors, const char* op, bool cpu_only) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    OCRT_CHECK(t.defined(), op, ": tensor ", i, " is undefined");
    OCRT_CHECK(t.is_contiguous(), op, ": tensor ", i, " must be contiguous");
    OCRT_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, op, ": tensor ", i, " must be float32 or float64, got ",
               dtype_name(t.dtype()));
    OCRT_CHECK(t.device() == tensors[0].device(), op, ": all tensors must be on one device (", tensors[0].device().str(),
               " and ", t.device().str(), ")");
    OCRT_CHECK(!cpu_only || t.device().is_cpu(), op, ": this communicator takes CPU tensors, got one on ",
               t.device().str());
  }
}

namespace {

class SingleCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string kind() const override { return "single"; }
  void all_reduce(const std::vector<Tensor>& tensors, ReduceOp) override {
    check_collective_tensors(tensors, "all_reduce", false);
  }
  void broadcast(const std::vector<Tensor>& tensors, int root) override {
    OCRT_CHECK(root == 0, "broadcast: root ", root, " out of range for 1 rank");
  }
  void barrier() override {}
};

// ---------------------------------------------------------------- threads

// What the ranks of one process share. Every collective is a few rounds of "post, wait for
// everyone": a generation-counting barrier whose waits time out, and that abort() breaks.
struct ThreadGroup {
  int size = 0;
  double timeout_s = 0;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  int64_t generation = 0;
  bool aborted = false;
  std::string abort_reason;
  std::vector<const Tensor*> posted;  // each rank's tensor for the current round
  std::vector<char> scratch;          // the reduced values, before every rank copies them

  void wait_all(int rank, const char* op) {
    std::unique_lock<std::mutex> lock(mu);
    OCRT_CHECK(!aborted, "rank ", rank, ": ", op, ": the communicator was aborted (", abort_reason, ")");
    const int64_t gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    const bool done = cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                                  [&] { return generation != gen || aborted; });
    OCRT_CHECK(!aborted, "rank ", rank, ": ", op, ": the communicator was aborted (", abort_reason, ")");
    if (!done) {
      aborted = true;  // the round can never complete now: make every other rank fail too
      abort_reason = "rank " + std::to_string(rank) + " timed out in " + op;
      cv.notify_all();
      fail("rank ", rank, ": ", op, " did not complete within ", timeout_s, " s: ", size - arrived,
           " replica(s) never joined it (failed or hung)");
    }
  }
};

template <class T>
void reduce_slice(const std::vector<const Tensor*>& src, T* out, int64_t begin, int64_t end, ReduceOp op) {
  const int n = (int)src.size();
  std::vector<const T*> in;
  for (const Tensor* t : src) in.push_back(t->data<T>());
  // Rank order, element by element: the same sums on every run, whatever the timing.
  std::copy(in[0] + begin, in[0] + end, out + begin);
  for (int r = 1; r < n; ++r) {
    const T* x = in[(size_t)r];
    if (op == ReduceOp::max)
      for (int64_t i = begin; i < end; ++i) out[i] = std::max(out[i], x[i]);
    else
      for (int64_t i = begin; i < end; ++i) out[i] += x[i];
  }
  if (op == ReduceOp::mean)
    for (int64_t i = begin; i < end; ++i) out[i] /= (T)n;
}

class ThreadCommunicator : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> g, int rank) : g_(std::move(g)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size; }
  std::string kind() const override { return "threads"; }

  void all_reduce(const std::vector<Tensor>& tensors, ReduceOp op) override {
    check_collective_tensors(tensors, "all_reduce", true);
    for (const Tensor& t : tensors) {
      post(t, "all_reduce");
      // Rank r reduces its share of the elements into the shared scratch buffer ...
      const int64_t n = t.numel();
      const int64_t begin = n * rank_ / g_->size, end = n * (rank_ + 1) / g_->size;
      if (t.dtype() == DType::f32)
        reduce_slice(g_->posted, reinterpret_cast<float*>(g_->scratch.data()), begin, end, op);
      else
        reduce_slice(g_->posted, reinterpret_cast<double*>(g_->scratch.data()), begin, end, op);
      g_->wait_all(rank_, "all_reduce");
      // ... and, once every share is there, every rank copies the whole result.
      std::memcpy(t.raw_data(), g_->scratch.data(), (size_t)n * t.itemsize());
      g_->wait_all(rank_, "all_reduce");  // nobody reuses the scratch until all have copied
    }
  }

  void broadcast(const std::vector<Tensor>& tensors, int root) override {
    OCRT_CHECK(root >= 0 && root < g_->size, "broadcast: root ", root, " out of range for ", g_->size, " ranks");
    check_collective_tensors(tensors, "broadcast", true);
    for (const Tensor& t : tensors) {
      post(t, "broadcast");
      const Tensor* src = g_->posted[(size_t)root];
      OCRT_CHECK(src->numel() == t.numel() && src->dtype() == t.dtype(), "rank ", rank_,
                 ": broadcast: tensor shapes or dtypes differ between ranks");
      if (rank_ != root) std::memcpy(t.raw_data(), src->raw_data(), (size_t)t.numel() * t.itemsize());
      g_->wait_all(rank_, "broadcast");
    }
  }

  void barrier() override { g_->wait_all(rank_, "barrier"); }

  void abort() override {
    std::lock_guard<std::mutex> lock(g_->mu);
    if (!g_->aborted) g_->abort_reason = "rank " + std::to_string(rank_) + " aborted";
    g_->aborted = true;
    g_->cv.notify_all();
  }

 private:
  // Publishes this rank's tensor and waits until every rank has (rank 0 sizes the scratch).
  void post(const Tensor& t, const char* op) {
    {
      std::lock_guard<std::mutex> lock(g_->mu);
      g_->posted[(size_t)rank_] = &t;
      if (rank_ == 0) g_->scratch.resize((size_t)t.numel() * t.itemsize());
    }
    g_->wait_all(rank_, op);
    // Every rank reads every posted tensor here, so none may leave (and free its tensor) before
    // all have looked: a second round first, then the verdict, which is the same on every rank
    // (each finds a mismatch exactly when the posted tensors are not all alike).
    int64_t other = -1;
    for (const Tensor* p : g_->posted)
      if (p->numel() != t.numel() || p->dtype() != t.dtype()) {
        other = p->numel();
        break;
      }
    g_->wait_all(rank_, op);
    OCRT_CHECK(other < 0, "rank ", rank_, ": ", op, ": tensor shapes or dtypes differ between ranks (", other, " vs ",
               t.numel(), " elements)");
  }

  std::shared_ptr<ThreadGroup> g_;
  int rank_;
};

}  // namespace

std::unique_ptr<Communicator> make_single_communicator() { return std::make_unique<SingleCommunicator>(); }

std::vector<std::unique_ptr<Communicator>> make_thread_communicators(int size, double timeout_s) {
  OCRT_CHECK(size >= 1, "make_thread_communicators: size must be >= 1, got ", size);
  OCRT_CHECK(timeout_s > 0, "make_thread_communicators: the timeout must be > 0");
  auto g = std::make_shared<ThreadGroup>();
  g->size = size;
  g->timeout_s = timeout_s;
  g->posted.resize((size_t)size, nullptr);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<ThreadCommunicator>(g, r));
  return out;
}

}  // namespace ocrt
