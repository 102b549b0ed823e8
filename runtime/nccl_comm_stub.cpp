// Stand-in for runtime/cuda/nccl_comm.cu in builds without NCCL (with or without CUDA): every
// entry point says why multi-GPU training is not available.
#include "runtime/nccl_comm.h"

#include "runtime/error.h"

#if !defined(OCRT_HAVE_NCCL)

namespace ocrt {

namespace {
[[noreturn]] void no_nccl() {
  fail("multi-GPU training needs NCCL, and this ocrt was built without it (it needs the CUDA backend and NCCL; "
       "CMake's summary says what was found, and OCRT_NCCL=ON makes a missing NCCL an error)");
}
}  // namespace

bool nccl_built() { return false; }
std::string nccl_version() { return ""; }
std::vector<std::unique_ptr<Communicator>> make_nccl_communicators(const std::vector<int>&, double) { no_nccl(); }
std::string nccl_unique_id() { no_nccl(); }
std::unique_ptr<Communicator> make_nccl_communicator(int, int, int, const std::string&, double) { no_nccl(); }

}  // namespace ocrt

#endif
