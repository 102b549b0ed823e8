// Allocation for Storage: the CPU allocator (runtime/cpu_allocator.h) on the CPU, the CUDA
// glue on GPUs.
#include "runtime/storage.h"

#include "runtime/cpu_allocator.h"
#include "runtime/cuda/cuda_glue.h"
#include "runtime/error.h"

namespace ocrt {

size_t cpu_bytes_allocated() { return cpu_memory_stats().allocated; }

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  void* p = nullptr;
  if (nbytes > 0) {
    if (device.is_cpu()) {
      p = cpu_alloc(nbytes);
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
    cpu_free(data_, nbytes_);
  } else {
    cuda_free(device_.index, data_);
  }
}

}  // namespace ocrt
