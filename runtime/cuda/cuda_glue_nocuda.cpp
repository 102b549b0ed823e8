// Stand-in for cuda_glue.cu in builds without CUDA: no GPU exists, and anything that would
// need one throws a message that says why.
#include "runtime/cuda/cuda_glue.h"

#include "runtime/error.h"

namespace ocrt {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  fail(what, ": this ocrt was built without CUDA (configure with -DOCRT_CUDA=ON on a machine with the CUDA toolkit)");
}
}  // namespace

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_status_note() { return ": built without CUDA"; }
std::string cuda_device_name(int) { no_cuda("cuda_device_name"); }
void* cuda_malloc(int, size_t) { no_cuda("cuda_malloc"); }
void cuda_free(int, void*) {}
CudaMemoryStats cuda_memory_stats(int) { no_cuda("cuda_memory_stats"); }
void cuda_reset_peak(int) {}
void cuda_empty_cache(int) {}
void cuda_set_poison(bool) {}
void cuda_copy_to_device(int, void*, const void*, size_t) { no_cuda("copy to GPU"); }
void cuda_copy_to_host(int, void*, const void*, size_t) { no_cuda("copy from GPU"); }
void cuda_copy_device_to_device(int, void*, int, const void*, size_t) { no_cuda("GPU-to-GPU copy"); }
void cuda_synchronize(int) { no_cuda("cuda_synchronize"); }

}  // namespace ocrt
