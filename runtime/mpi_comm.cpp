// MPI sessions and the MPI communicator (see mpi_comm.h).
#include "runtime/mpi_comm.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "runtime/error.h"

#if defined(OCRT_HAVE_MPI)
#include <mpi.h>
#endif

namespace ocrt {

bool mpi_launched() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* v = std::getenv(var);
    if (v && std::atoi(v) > 1) return true;
  }
  return false;
}

#if !defined(OCRT_HAVE_MPI)

bool mpi_built() { return false; }
MpiSession::MpiSession() {
  fail("this process was started by an MPI launcher, but ocrt was built without MPI (install Debian's "
       "libopenmpi-dev and rebuild; CMake's summary says whether MPI was found)");
}
MpiSession::~MpiSession() = default;
std::string MpiSession::broadcast_bytes(const std::string& bytes, int) { return bytes; }
void MpiSession::abort_job(int code) { std::exit(code); }
std::unique_ptr<Communicator> make_mpi_communicator(MpiSession&, double) { fail("ocrt was built without MPI"); }

#else

bool mpi_built() { return true; }

namespace {

int g_sessions = 0;  // live MpiSession objects; MPI is finalised when the last one ends

void check_mpi(int rc, int rank, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail("rank ", rank, ": ", what, " failed: ", std::string(msg, (size_t)len));
}

MPI_Datatype mpi_type(DType d) { return d == DType::f64 ? MPI_DOUBLE : MPI_FLOAT; }

}  // namespace

MpiSession::MpiSession() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), -1, "MPI_Init_thread");
    OCRT_CHECK(provided >= MPI_THREAD_FUNNELED, "MPI does not support MPI_THREAD_FUNNELED");
    // Errors come back as codes (and become exceptions naming the rank) instead of aborting
    // inside the library without a word about what ocrt was doing.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ++g_sessions;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm local;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local), rank_,
            "MPI_Comm_split_type");
  MPI_Comm_rank(local, &local_rank_);
  MPI_Comm_free(&local);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  host_.assign(name, (size_t)len);
}

MpiSession::~MpiSession() {
  if (--g_sessions == 0) {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (!finalised) MPI_Finalize();
  }
}

std::string MpiSession::broadcast_bytes(const std::string& bytes, int root) {
  long long n = (long long)bytes.size();
  check_mpi(MPI_Bcast(&n, 1, MPI_LONG_LONG, root, MPI_COMM_WORLD), rank_, "MPI_Bcast");
  std::string out = rank_ == root ? bytes : std::string((size_t)n, '\0');
  if (n > 0) check_mpi(MPI_Bcast(out.data(), (int)n, MPI_BYTE, root, MPI_COMM_WORLD), rank_, "MPI_Bcast");
  return out;
}

void MpiSession::abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // not reached: MPI_Abort ends the process
}

namespace {

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(MpiSession& s, double timeout_s) : s_(s), timeout_s_(timeout_s) {}
  int rank() const override { return s_.rank(); }
  int size() const override { return s_.size(); }
  std::string kind() const override { return "mpi"; }

  void all_reduce(const std::vector<Tensor>& tensors, ReduceOp op) override {
    check_collective_tensors(tensors, "all_reduce", false);
    for (const Tensor& t : tensors) {
      Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
      Pending(*this, host, op, start(host, op)).wait();
      if (!t.device().is_cpu()) const_cast<Tensor&>(t).copy_(host);
    }
  }

  // CPU tensors get a real non-blocking collective; a GPU tensor (an MPI communicator serving
  // GPU replicas is unusual: NCCL does that) goes through the blocking path.
  std::unique_ptr<PendingCollective> start_all_reduce(const Tensor& t, ReduceOp op) override {
    if (!t.device().is_cpu()) return Communicator::start_all_reduce(t, op);
    check_collective_tensors({t}, "all_reduce", true);
    return std::make_unique<Pending>(*this, t, op, start(t, op));
  }
  void broadcast(const std::vector<Tensor>& tensors, int root) override {
    OCRT_CHECK(root >= 0 && root < size(), "broadcast: root ", root, " out of range for ", size(), " ranks");
    check_collective_tensors(tensors, "broadcast", false);
    for (const Tensor& t : tensors) {
      Tensor host = t.device().is_cpu() ? t : t.to(Device::cpu());
      MPI_Request req;
      check_mpi(MPI_Ibcast(host.raw_data(), (int)host.numel(), mpi_type(host.dtype()), root, MPI_COMM_WORLD, &req),
                rank(), "MPI_Ibcast");
      wait(req, "broadcast");
      if (!t.device().is_cpu()) const_cast<Tensor&>(t).copy_(host);
    }
  }

  void barrier() override {
    MPI_Request req;
    check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, &req), rank(), "MPI_Ibarrier");
    wait(req, "barrier");
  }

 private:
  class Pending : public PendingCollective {
   public:
    Pending(MpiCommunicator& c, Tensor t, ReduceOp op, MPI_Request req) : c_(c), t_(std::move(t)), op_(op), req_(req) {}
    bool poll() override {
      if (!done_) {
        int flag = 0;
        check_mpi(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), c_.rank(), "all_reduce");
        done_ = flag != 0;
      }
      return done_;
    }
    void wait() override {
      if (waited_) return;
      if (!done_) c_.wait(req_, "all_reduce");
      done_ = waited_ = true;
      c_.finish(t_, op_);
    }

   private:
    MpiCommunicator& c_;
    Tensor t_;
    ReduceOp op_;
    MPI_Request req_;
    bool done_ = false, waited_ = false;
  };

  MPI_Request start(const Tensor& host, ReduceOp op) {
    MPI_Request req;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, host.raw_data(), (int)host.numel(), mpi_type(host.dtype()),
                             op == ReduceOp::max ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD, &req),
              rank(), "MPI_Iallreduce");
    return req;
  }

  // MPI has no mean: the sum divided by the number of ranks.
  void finish(const Tensor& host, ReduceOp op) {
    if (op != ReduceOp::mean) return;
    if (host.dtype() == DType::f32) {
      float* p = host.data<float>();
      for (int64_t i = 0; i < host.numel(); ++i) p[i] /= (float)size();
    } else {
      double* p = host.data<double>();
      for (int64_t i = 0; i < host.numel(); ++i) p[i] /= (double)size();
    }
  }

  // Polls a non-blocking collective. A blocking one would wait forever for a rank that hangs
  // (a dead rank is usually noticed by mpirun, which then ends the job; a hung one is not).
  void wait(MPI_Request& req, const char* op) {
    const auto t0 = std::chrono::steady_clock::now();
    int done = 0, spins = 0;
    for (;;) {
      check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), rank(), op);
      if (done) return;
      // Spin briefly (collectives of small gradients finish in microseconds), then back off.
      if (++spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(spins > 20000 ? 1000 : 50));
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (waited > timeout_s_) {
        std::fprintf(stderr,
                     "\nocrt-train: rank %d (of %d, on %s): %s did not complete within %g s: another rank has "
                     "died, hung or lost its connection; aborting the whole job (--comm-timeout sets the limit)\n",
                     rank(), size(), s_.host().c_str(), op, timeout_s_);
        s_.abort_job(3);
      }
    }
  }

  MpiSession& s_;
  double timeout_s_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MpiSession& session, double timeout_s) {
  OCRT_CHECK(timeout_s > 0, "make_mpi_communicator: the timeout must be > 0");
  return std::make_unique<MpiCommunicator>(session, timeout_s);
}

#endif

}  // namespace ocrt
