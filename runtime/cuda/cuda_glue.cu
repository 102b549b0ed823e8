// The CUDA runtime behind cuda_glue.h. Every call is checked; an error names the call, the GPU
// and CUDA's own message. CUDA is initialised lazily, by the first thread that touches a GPU
// (nothing here runs at load time), so a process can still fork worker-free before that.
// The caching allocator and streams are the CUDA-backend issue's work; this is the plumbing.
#include <cuda_runtime.h>

#include <mutex>

#include "runtime/cuda/cuda_glue.h"
#include "runtime/error.h"

namespace ocrt {

namespace {

void check(cudaError_t err, const char* call, int device) {
  if (err != cudaSuccess)
    fail(call, " on cuda:", device, " failed: ", cudaGetErrorString(err));
}

struct DeviceCount {
  int count = 0;
  std::string note;
};

const DeviceCount& device_count_once() {
  static DeviceCount dc;
  static std::once_flag once;
  std::call_once(once, [] {
    cudaError_t err = cudaGetDeviceCount(&dc.count);
    if (err != cudaSuccess) {
      dc.count = 0;
      dc.note = std::string(": ") + cudaGetErrorString(err);
      cudaGetLastError();  // clear the sticky-free error so later calls start clean
    }
  });
  return dc;
}

void use(int device) { check(cudaSetDevice(device), "cudaSetDevice", device); }

}  // namespace

bool cuda_built() { return true; }
int cuda_device_count() { return device_count_once().count; }
std::string cuda_status_note() { return device_count_once().note; }

void* cuda_malloc(int device, size_t bytes) {
  use(device);
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaGetLastError();
    fail("out of memory on cuda:", device, ": asked for ", bytes, " bytes, ", free_b, " of ", total_b,
         " bytes free (", cudaGetErrorString(err), ")");
  }
  return p;
}

void cuda_free(int device, void* ptr) {
  if (!ptr) return;
  cudaSetDevice(device);
  cudaFree(ptr);  // errors here are ignored: this runs in destructors
}

void cuda_copy_to_device(int device, void* dst, const void* src, size_t bytes) {
  use(device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host->device", device);
}

void cuda_copy_to_host(int device, void* dst, const void* src, size_t bytes) {
  use(device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device->host", device);
}

void cuda_copy_device_to_device(int dst_device, void* dst, int src_device, const void* src, size_t bytes) {
  use(dst_device);
  if (dst_device == src_device)
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy device->device", dst_device);
  else
    check(cudaMemcpyPeer(dst, dst_device, src, src_device, bytes), "cudaMemcpyPeer", dst_device);
}

void cuda_synchronize(int device) {
  use(device);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", device);
}

}  // namespace ocrt
