// A block of memory on one device, shared by every tensor that views it (refcounted through
// std::shared_ptr). CPU blocks are 64-byte aligned so that Eigen and the compiler's vector
// loads never straddle a cache line at the start of a tensor.
#pragma once
#include <cstddef>
#include <memory>

#include "runtime/device.h"

namespace ocrt {

constexpr size_t kCpuAlignment = 64;

class Storage {
 public:
  // Allocates nbytes on device (uninitialised). A zero-byte storage is valid and has data()
  // == nullptr.
  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
  // Wraps memory owned elsewhere (e.g. a memory-mapped file); deleter may be empty.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, Device device, void (*deleter)(void*));
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  Storage(void* data, size_t nbytes, Device device, void (*deleter)(void*))
      : data_(data), nbytes_(nbytes), device_(device), deleter_(deleter) {}
  void* data_;
  size_t nbytes_;
  Device device_;
  void (*deleter_)(void*);  // null: free with the device's own allocator
  bool owned_ = true;
};

// Bytes currently held by CPU storages (for tests and memory reports).
size_t cpu_bytes_allocated();

}  // namespace ocrt
