// Allocation for Storage: aligned host memory on the CPU, the CUDA glue on GPUs.
#include "runtime/storage.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "runtime/cuda/cuda_glue.h"
#include "runtime/error.h"

namespace ocrt {

namespace {
std::atomic<size_t> g_cpu_bytes{0};
}

size_t cpu_bytes_allocated() { return g_cpu_bytes.load(); }

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  void* p = nullptr;
  if (nbytes > 0) {
    if (device.is_cpu()) {
      size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
      p = std::aligned_alloc(kCpuAlignment, rounded);
      if (!p) fail("out of memory on cpu: could not allocate ", nbytes, " bytes");
      g_cpu_bytes += nbytes;
    } else {
      validate(device);
      p = cuda_malloc(device.index, nbytes);
    }
  }
  return std::shared_ptr<Storage>(new Storage(p, nbytes, device, nullptr));
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, Device device, void (*deleter)(void*)) {
  auto s = std::shared_ptr<Storage>(new Storage(data, nbytes, device, deleter));
  s->owned_ = false;
  return s;
}

Storage::~Storage() {
  if (!owned_) {
    if (deleter_) deleter_(data_);
    return;
  }
  if (!data_) return;
  if (device_.is_cpu()) {
    std::free(data_);
    g_cpu_bytes -= nbytes_;
  } else {
    cuda_free(device_.index, data_);
  }
}

}  // namespace ocrt
