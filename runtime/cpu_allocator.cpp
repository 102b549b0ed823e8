// See cpu_allocator.h for why large blocks are cached.
#include "runtime/cpu_allocator.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "runtime/error.h"
#include "runtime/storage.h"

namespace ocrt {

namespace {

constexpr size_t kCacheMinBytes = 128 * 1024;  // below this, malloc recycles well by itself
constexpr size_t kCacheMinBound = 64 << 20;     // the cache may always hold this much

struct Cache {
  std::mutex mu;
  std::map<size_t, std::vector<void*>> free_blocks;  // rounded size -> blocks
  size_t cached = 0, allocated = 0, peak = 0;
  size_t limit = size_t(2) << 30;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: tensors may be freed during static destruction
  return *c;
}

// The block size a request is served from: aligned, and for cached sizes rounded up to one
// of four steps per power of two.
size_t block_size(size_t nbytes) {
  size_t n = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  if (n < kCacheMinBytes) return n;
  size_t top = size_t(1) << (63 - __builtin_clzll(n));  // highest power of two <= n
  size_t step = top / 4;
  return (n + step - 1) / step * step;
}

void* system_alloc(size_t size, size_t requested) {
  void* p = std::aligned_alloc(kCpuAlignment, size);
  if (!p) {
    cpu_empty_cache();
    p = std::aligned_alloc(kCpuAlignment, size);
  }
  if (!p) fail("out of memory on cpu: could not allocate ", requested, " bytes (", cpu_memory_stats().allocated,
               " bytes in use by tensors)");
  return p;
}

}  // namespace

void* cpu_alloc(size_t nbytes) {
  size_t size = block_size(nbytes);
  Cache& c = cache();
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.allocated += nbytes;
    c.peak = std::max(c.peak, c.allocated);
    if (size >= kCacheMinBytes) {
      auto it = c.free_blocks.find(size);
      if (it != c.free_blocks.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        c.cached -= size;
      }
    }
  }
  if (!p) {
    try {
      p = system_alloc(size, nbytes);
    } catch (...) {
      std::lock_guard<std::mutex> lock(c.mu);
      c.allocated -= nbytes;
      throw;
    }
  }
  return p;
}

void cpu_free(void* ptr, size_t nbytes) {
  if (!ptr) return;
  size_t size = block_size(nbytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.allocated -= nbytes;
    // The cache never holds more than the largest working set seen (`peak`): that is what a
    // training step or a batch needs back, and without this bound, lines of ever-new widths
    // would fill it with blocks of sizes that never come again (RSS = live + the whole limit).
    const size_t bound = std::min(c.limit, std::max(kCacheMinBound, c.peak));
    if (size >= kCacheMinBytes && c.cached + size <= bound) {
      c.free_blocks[size].push_back(ptr);
      c.cached += size;
      return;
    }
  }
  std::free(ptr);
}

CpuMemoryStats cpu_memory_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {c.allocated, c.cached, c.peak};
}

void cpu_empty_cache() {
  Cache& c = cache();
  std::map<size_t, std::vector<void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    blocks.swap(c.free_blocks);
    c.cached = 0;
  }
  for (auto& [size, list] : blocks)
    for (void* p : list) std::free(p);
}

void cpu_set_cache_limit(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(cache().mu);
    cache().limit = bytes;
  }
  if (bytes < cpu_memory_stats().cached) cpu_empty_cache();
}

}  // namespace ocrt
