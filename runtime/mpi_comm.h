// MPI: one replica per process, started by `mpirun -np N ocrt-train ...` (OpenMPI from Debian),
// on one machine or several. It carries CPU gradients itself, and for GPU replicas it only
// bootstraps NCCL (sharing NCCL's unique id from rank 0) while NCCL carries the gradients.
//
// Nothing here needs MPI at compile time: a build without MPI (OCRT_HAVE_MPI unset) says so
// when an MPI run is asked for, and mpi_launched() still detects the launcher.
#pragma once
#include <memory>
#include <string>

#include "runtime/comm.h"

namespace ocrt {

// True when this process was started by an MPI launcher with more than one rank (mpirun sets
// OMPI_COMM_WORLD_SIZE; other launchers PMI_SIZE or PMIX_SIZE).
bool mpi_launched();
bool mpi_built();

// Initialises MPI once per process (MPI_Init_thread, funnelled: only the thread that made the
// session calls MPI) and finalises it when the last session ends. Throws without MPI support.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // rank among the processes on this machine
  std::string host() const { return host_; }
  // Rank root's bytes, on every rank (for NCCL's unique id and small settings).
  std::string broadcast_bytes(const std::string& bytes, int root);
  // Aborts the whole job (every rank), with a non-zero exit code.
  [[noreturn]] void abort_job(int code);

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  std::string host_;
};

// The world communicator of a session, for CPU tensors (a GPU tensor is staged through the
// host). A collective that does not finish within timeout_s prints which rank waited on what
// and aborts the whole job: a dead or hung rank never leaves the others waiting forever.
std::unique_ptr<Communicator> make_mpi_communicator(MpiSession& session, double timeout_s);

}  // namespace ocrt
