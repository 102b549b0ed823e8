// NCCL communicators (see runtime/nccl_comm.h).
//
// Every communicator is made non-blocking (ncclConfig_t::blocking = 0): NCCL calls then return
// at once, possibly with ncclInProgress, and this file waits for them itself by polling
// ncclCommGetAsyncError and the stream, with a timeout. A blocking communicator would leave a
// rank stuck inside NCCL for ever when a peer dies during initialisation or a collective.
#include "runtime/nccl_comm.h"

#if defined(OCRT_HAVE_NCCL)

#include <chrono>
#include <cstring>
#include <thread>

#include "runtime/cuda/cuda_context.cuh"
#include "runtime/error.h"

#include <nccl.h>

namespace ocrt {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string nccl_reason(ncclResult_t r, ncclComm_t comm) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += std::string(" (") + last + ")";
  return s;
}

ncclDataType_t nccl_type(DType d) { return d == DType::f64 ? ncclDouble : ncclFloat; }

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::mean: return ncclAvg;
    case ReduceOp::max: return ncclMax;
  }
  return ncclSum;
}

// Waits until comm has no operation in progress (non-blocking mode); throws on an error or
// after timeout_s, aborting the communicator first so that no NCCL thread is left waiting.
void settle(ncclComm_t comm, ncclResult_t first, const char* what, int rank, int device, double timeout_s) {
  ncclResult_t st = first;
  const auto t0 = Clock::now();
  while (st == ncclInProgress) {
    if (seconds_since(t0) > timeout_s) {
      ncclCommAbort(comm);
      fail("rank ", rank, " (cuda:", device, "): ", what, " did not complete within ", timeout_s,
           " s (another rank died or hung?)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    ncclCommGetAsyncError(comm, &st);
  }
  if (st != ncclSuccess) {
    const std::string reason = nccl_reason(st, comm);
    ncclCommAbort(comm);
    fail("rank ", rank, " (cuda:", device, "): ", what, " failed: ", reason);
  }
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int device, int rank, int size, double timeout_s)
      : comm_(comm), device_(device), rank_(rank), size_(size), timeout_s_(timeout_s) {
    cuda::set_device(device_);
    cuda::check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate", device_);
    cuda::check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate", device_);
    cuda::check(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreate", device_);
  }
  ~NcclCommunicator() override {
    cuda::set_device(device_);
    if (comm_) {
      // Finalise flushes outstanding work; an error here is ignored (destructors must not throw).
      ncclResult_t st = ncclCommFinalize(comm_);
      const auto t0 = Clock::now();
      while (st == ncclInProgress && seconds_since(t0) < timeout_s_) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        ncclCommGetAsyncError(comm_, &st);
      }
      if (st == ncclSuccess) ncclCommDestroy(comm_);
      else ncclCommAbort(comm_);
    }
    cudaEventDestroy(done_);
    cudaEventDestroy(ready_);
    cudaStreamDestroy(side_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "nccl"; }

  // Every collective runs on one side stream, in the order issued: NCCL needs the operations of
  // a communicator in the same order on every rank, which two streams could not promise once
  // started (overlapped) all-reduces and blocking ones (synchronised BatchNorm) interleave. The
  // side stream first waits for the compute stream's work so far (the kernels that produced the
  // tensors); the compute stream waits for the collective in turn.
  void all_reduce(const std::vector<Tensor>& tensors, ReduceOp op) override {
    check(tensors, "all_reduce");
    follow_compute();
    issue("ncclGroupStart", ncclGroupStart());
    for (const Tensor& t : tensors)
      issue("ncclAllReduce", ncclAllReduce(t.raw_data(), t.raw_data(), (size_t)t.numel(), nccl_type(t.dtype()),
                                           nccl_op(op), comm_, side_));
    enqueue("ncclGroupEnd", ncclGroupEnd());
    wait("all_reduce");
  }

  // Overlap: returns as soon as the collective is queued, so the compute stream goes on with the
  // rest of the backward pass meanwhile; wait() makes the compute stream wait for it.
  std::unique_ptr<PendingCollective> start_all_reduce(const Tensor& t, ReduceOp op) override {
    check({t}, "all_reduce");
    follow_compute();
    enqueue("ncclAllReduce", ncclAllReduce(t.raw_data(), t.raw_data(), (size_t)t.numel(), nccl_type(t.dtype()),
                                           nccl_op(op), comm_, side_));
    cudaEvent_t done = nullptr;
    cuda::check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate", device_);
    cuda::check(cudaEventRecord(done, side_), "cudaEventRecord", device_);
    return std::make_unique<Pending>(*this, done);
  }

  void broadcast(const std::vector<Tensor>& tensors, int root) override {
    OCRT_CHECK(root >= 0 && root < size_, "broadcast: root ", root, " out of range for ", size_, " ranks");
    check(tensors, "broadcast");
    follow_compute();
    issue("ncclGroupStart", ncclGroupStart());
    for (const Tensor& t : tensors)
      issue("ncclBroadcast", ncclBroadcast(t.raw_data(), t.raw_data(), (size_t)t.numel(), nccl_type(t.dtype()), root,
                                           comm_, side_));
    enqueue("ncclGroupEnd", ncclGroupEnd());
    wait("broadcast");
  }

  void barrier() override {
    Tensor one = Tensor::zeros({1}, DType::f32, Device::cuda(device_));
    all_reduce({one}, ReduceOp::sum);
  }

  void abort() override {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

 private:
  void check(const std::vector<Tensor>& tensors, const char* op) {
    OCRT_CHECK(comm_, "rank ", rank_, " (cuda:", device_, "): ", op, ": the communicator was aborted");
    check_collective_tensors(tensors, op, false);
    for (const Tensor& t : tensors)
      OCRT_CHECK(t.device() == Device::cuda(device_), op, ": this NCCL communicator serves cuda:", device_,
                 ", got a tensor on ", t.device().str());
    cuda::set_device(device_);
  }

  // A call of a non-blocking communicator: ncclInProgress is fine, anything else fails.
  void issue(const char* what, ncclResult_t r) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    const std::string reason = nccl_reason(r, comm_);
    abort();
    fail("rank ", rank_, " (cuda:", device_, "): ", what, " failed: ", reason);
  }

  // A collective of the non-blocking communicator returns ncclInProgress while NCCL is still
  // enqueueing it; the next NCCL call on this communicator must wait until that is over.
  void enqueue(const char* what, ncclResult_t r) {
    issue(what, r);
    const auto t0 = Clock::now();
    while (r == ncclInProgress) {
      if (seconds_since(t0) > timeout_s_) {
        abort();
        fail("rank ", rank_, " (cuda:", device_, "): ", what, " was not enqueued within ", timeout_s_, " s");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(10));
      ncclCommGetAsyncError(comm_, &r);
      if (r != ncclInProgress) issue(what, r);
    }
  }

  class Pending : public PendingCollective {
   public:
    Pending(NcclCommunicator& c, cudaEvent_t done) : c_(c), done_(done) {}
    ~Pending() override { cudaEventDestroy(done_); }
    bool poll() override { return cudaEventQuery(done_) == cudaSuccess; }
    void wait() override {
      if (waited_) return;
      c_.wait_event(done_, "all_reduce");
      waited_ = true;
    }

   private:
    NcclCommunicator& c_;
    cudaEvent_t done_;
    bool waited_ = false;
  };

  // The side stream waits for everything queued on the compute stream so far.
  void follow_compute() {
    cuda::check(cudaEventRecord(ready_, cuda::stream(device_)), "cudaEventRecord", device_);
    cuda::check(cudaStreamWaitEvent(side_, ready_, 0), "cudaStreamWaitEvent", device_);
  }

  // Waits for what the side stream has queued so far.
  void wait(const char* op) {
    cuda::check(cudaEventRecord(done_, side_), "cudaEventRecord", device_);
    wait_event(done_, op);
  }

  // Waits for a side-stream event (NCCL's error state meanwhile); then the compute stream waits
  // for it too.
  void wait_event(cudaEvent_t event, const char* op) {
    cuda::set_device(device_);
    const auto t0 = Clock::now();
    int spins = 0;
    for (;;) {
      const cudaError_t q = cudaEventQuery(event);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) cuda::check(q, op, device_);
      OCRT_CHECK(comm_, "rank ", rank_, " (cuda:", device_, "): ", op, ": the communicator was aborted");
      ncclResult_t st = ncclSuccess;
      ncclCommGetAsyncError(comm_, &st);
      if (st != ncclSuccess && st != ncclInProgress) {
        const std::string reason = nccl_reason(st, comm_);
        abort();
        fail("rank ", rank_, " (cuda:", device_, "): NCCL ", op, " failed: ", reason);
      }
      if (seconds_since(t0) > timeout_s_) {
        abort();
        fail("rank ", rank_, " (cuda:", device_, "): NCCL ", op, " did not complete within ", timeout_s_,
             " s: another rank has died, hung or lost its connection (--comm-timeout sets the limit)");
      }
      if (++spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    cuda::check(cudaStreamWaitEvent(cuda::stream(device_), event, 0), "cudaStreamWaitEvent", device_);
  }

  ncclComm_t comm_;
  int device_, rank_, size_;
  double timeout_s_;
  cudaEvent_t done_ = nullptr, ready_ = nullptr;
  cudaStream_t side_ = nullptr;  // where every collective runs, in the order issued
};

ncclConfig_t nonblocking_config() {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  c.blocking = 0;
  return c;
}

}  // namespace

bool nccl_built() { return true; }

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string nccl_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  OCRT_CHECK(r == ncclSuccess, "ncclGetUniqueId failed: ", ncclGetErrorString(r));
  return std::string(id.internal, sizeof(id.internal));
}

std::unique_ptr<Communicator> make_nccl_communicator(int device, int rank, int size, const std::string& unique_id,
                                                     double timeout_s) {
  ncclUniqueId id;
  OCRT_CHECK(unique_id.size() == sizeof(id.internal), "make_nccl_communicator: the unique id has ", unique_id.size(),
             " bytes, expected ", sizeof(id.internal));
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  cuda::set_device(device);
  ncclConfig_t cfg = nonblocking_config();
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress)
    fail("rank ", rank, " (cuda:", device, "): ncclCommInitRank failed: ", nccl_reason(r, comm));
  settle(comm, r, "ncclCommInitRank", rank, device, timeout_s);
  return std::make_unique<NcclCommunicator>(comm, device, rank, size, timeout_s);
}

std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<int>& devices, double timeout_s) {
  OCRT_CHECK(!devices.empty(), "make_nccl_communicators: no devices");
  const int n = (int)devices.size();
  ncclUniqueId id;
  OCRT_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId failed");
  std::vector<ncclComm_t> comms((size_t)n, nullptr);
  ncclConfig_t cfg = nonblocking_config();
  // One thread initialising several ranks: the calls must sit inside one group.
  ncclResult_t r = ncclGroupStart();
  for (int i = 0; i < n && (r == ncclSuccess || r == ncclInProgress); ++i) {
    cuda::set_device(devices[(size_t)i]);
    r = ncclCommInitRankConfig(&comms[(size_t)i], n, id, i, &cfg);
  }
  const ncclResult_t end = ncclGroupEnd();
  if (r == ncclSuccess || r == ncclInProgress) r = end;
  if (r != ncclSuccess && r != ncclInProgress) {
    for (ncclComm_t c : comms)
      if (c) ncclCommAbort(c);
    fail("ncclCommInitRank for ", n, " GPUs failed: ", nccl_reason(r, nullptr));
  }
  std::vector<std::unique_ptr<Communicator>> out;
  for (int i = 0; i < n; ++i) {
    settle(comms[(size_t)i], ncclInProgress, "ncclCommInitRank", i, devices[(size_t)i], timeout_s);
    out.push_back(std::make_unique<NcclCommunicator>(comms[(size_t)i], devices[(size_t)i], i, n, timeout_s));
  }
  return out;
}

}  // namespace ocrt

#endif  // OCRT_HAVE_NCCL (without it, runtime/nccl_comm_stub.cpp stands in)
