// NCCL: one replica per GPU. Gradients stay on the GPU. A blocking all_reduce runs on the GPU's
// compute stream (runtime/cuda/cuda_context.cuh), so it is ordered after the kernels that
// produced its tensors without any extra synchronisation; a started one (start_all_reduce, the
// gradient buckets during the backward pass) runs on a side stream that first waits for the
// compute stream's work so far, and the compute stream waits for it in turn in wait().
//
// Two ways to make the communicators:
//   - one process, several GPUs (ocrt-train --devices cuda:0,cuda:1): all at once, here;
//   - one process per GPU (mpirun): rank 0 makes a unique id, MPI hands it to every rank
//     (MpiSession::broadcast_bytes), and each rank joins with it.
// Waiting: a collective is waited for by polling the stream and NCCL's asynchronous error state
// (a peer that died, a network error); on an error or after the timeout the communicator is
// aborted (ncclCommAbort) and an Error names the rank, the GPU and NCCL's reason, instead of the
// process hanging in the driver. NCCL's own environment variables (NCCL_DEBUG, NCCL_P2P_DISABLE,
// NCCL_IB_DISABLE, NCCL_SOCKET_IFNAME, ...) pass through untouched: docs/distributed.md.
// No CUDA or NCCL type appears here; a build without NCCL throws saying so.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm.h"

namespace ocrt {

bool nccl_built();
std::string nccl_version();  // e.g. "2.27.3"; empty without NCCL

// One communicator per device, ranks in the order given; each then belongs to one thread.
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<int>& devices, double timeout_s);

// Rank 0's side of the bootstrap: NCCL's unique id, as bytes to hand to every rank.
std::string nccl_unique_id();
// Joins the communicator `unique_id` names as `rank` of `size`, on GPU `device`.
std::unique_ptr<Communicator> make_nccl_communicator(int device, int rank, int size, const std::string& unique_id,
                                                     double timeout_s);

}  // namespace ocrt
