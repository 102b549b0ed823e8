// Communicators: how data-parallel replicas of a model talk to each other.
//
// A communicator joins `size` replicas, numbered 0 .. size-1 (the rank). Every replica must make
// the same calls in the same order with tensors of the same shapes: a collective completes only
// when all ranks have entered it. Implementations:
//
//   single   one replica; every call is a no-op (the default: training without data parallelism)
//   threads  several replicas in one process, one thread each, on the CPU (--devices cpu,cpu):
//            sums in rank order through shared memory, so results do not depend on timing
//   mpi      one replica per process, on the CPU, through MPI (runtime/mpi_comm.h)
//   nccl     one replica per GPU, through NCCL, in one process or across processes
//            (runtime/nccl_comm.h)
//
// A collective that does not complete within the communicator's timeout (a rank died, hung, or
// lost its network) throws an Error that names this rank and the operation, and the other ranks
// see theirs time out or fail too: nothing waits forever. abort() makes every pending and future
// call on this replica fail at once (used when one thread of a multi-GPU run fails).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace ocrt {

enum class ReduceOp { sum, mean, max };

// A collective in flight (Communicator::start_all_reduce). poll() lets the transport make
// progress and says whether it has completed; wait() returns once it has, or fails the way the
// blocking call would (timeout, a dead rank). Until wait() returns, the tensor must not be read
// or written.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual bool poll() { return true; }
  virtual void wait() {}
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string kind() const = 0;  // "single", "threads", "mpi", "nccl"

  // In place on every rank: each tensor becomes the element-wise sum (or mean, or max) of that
  // tensor over all ranks. Tensors must be contiguous, float32 or float64, on a device this
  // communicator serves, and in the same order with the same shapes on every rank.
  virtual void all_reduce(const std::vector<Tensor>& tensors, ReduceOp op) = 0;
  // Starts an all-reduce of one tensor and returns while it runs, so that work can go on
  // meanwhile (the backward pass, for gradient buckets). Collectives started this way must be
  // started in the same order on every rank, and each must be waited for before the tensor is
  // used. The default runs the blocking all_reduce at once (threads, single); MPI and NCCL
  // override it with non-blocking collectives.
  virtual std::unique_ptr<PendingCollective> start_all_reduce(const Tensor& t, ReduceOp op);
  // In place: every rank's tensors get root's values.
  virtual void broadcast(const std::vector<Tensor>& tensors, int root) = 0;
  virtual void barrier() = 0;
  virtual void abort() {}

  // Convenience: all-reduce a few host numbers (float64), e.g. counts for validation.
  std::vector<double> all_reduce_values(const std::vector<double>& values, ReduceOp op, Device device);
};

std::unique_ptr<Communicator> make_single_communicator();

// size communicators for size threads of this process, CPU tensors only. Each must be used by
// one thread. timeout_s: how long a collective waits for the slowest rank before failing.
std::vector<std::unique_ptr<Communicator>> make_thread_communicators(int size, double timeout_s);

// Checks a tensor list for a collective (contiguous, float, one device); throws naming `op`.
void check_collective_tensors(const std::vector<Tensor>& tensors, const char* op, bool cpu_only);

}  // namespace ocrt
