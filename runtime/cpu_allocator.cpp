// See cpu_allocator.h for why large blocks are cached.
#include "runtime/cpu_allocator.h"

#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdlib>
#include <map>
#include <unordered_map>
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
  std::map<size_t, std::vector<void*>> free_blocks;  // block size -> blocks
  // Blocks handed out for a smaller request (best fit): their real size, for cpu_free.
  std::unordered_map<void*, size_t> larger;
  size_t cached = 0, allocated = 0, peak = 0;
  // Bytes of the blocks (of the cached sizes) that live tensors hold, their real sizes: a block
  // is up to a quarter larger than its request (block_size) and, taken by best fit, up to twice
  // that. The cache's bound is the most of them in use at once (the working set in blocks).
  size_t in_blocks = 0, peak_blocks = 0;
  size_t limit = size_t(2) << 30;
  bool trim = false;  // cpu_set_cache_trim
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

// Blocks of the cached sizes come straight from the kernel (mmap) and go straight back
// (munmap), not through malloc. glibc raises its own mmap threshold each time such a block is
// freed (up to 32 MiB), after which it serves large blocks from its heaps and keeps them when
// they are freed: a page read with batches of other widths held 860 MiB RSS for 490 MiB of
// tensors at most; with its blocks mapped and unmapped here, 600 MiB (bench/results/pages.md).
// Reuse is this cache's job, not malloc's.
// Blocks this large ask for transparent huge pages (where the kernel is set to `madvise`, as
// Debian's is): a fresh block then faults in 2 MiB at a time instead of 4 KiB. From 2 MiB, the
// size of one huge page (4 MiB before): on 2 Zen 5 cores, 300 lines in bf16 took 36-39k minor
// faults instead of 53k, and 11 real scanned pages 170k instead of 203k, at the same peak RSS.
constexpr size_t kHugeBlockBytes = size_t(2) << 20;

void* map_block(size_t size) {
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
  if (size >= kHugeBlockBytes) ::madvise(p, size, MADV_HUGEPAGE);
#endif
  return p;  // page-aligned, so kCpuAlignment-aligned
}

void* block_alloc(size_t size) {
  return size >= kCacheMinBytes ? map_block(size) : std::aligned_alloc(kCpuAlignment, size);
}

// `size` as block_size gave it (or the larger block's real size).
void block_free(void* p, size_t size) {
  if (size >= kCacheMinBytes) ::munmap(p, size);
  else std::free(p);
}

// Linux can grow a mapping in place or move it (mremap): the pages it had keep what they hold,
// only the new ones fault in (zeroed).
#if defined(MREMAP_MAYMOVE)
constexpr bool kGrowBlocks = true;
void* grow_block(void* p, size_t from, size_t size) {
  void* q = ::mremap(p, from, size, MREMAP_MAYMOVE);
  if (q != MAP_FAILED) {
#ifdef MADV_HUGEPAGE
    if (size >= kHugeBlockBytes) ::madvise(q, size, MADV_HUGEPAGE);
#endif
    return q;
  }
  ::munmap(p, from);
  return nullptr;
}
#else
constexpr bool kGrowBlocks = false;
void* grow_block(void* p, size_t from, size_t) {
  ::munmap(p, from);
  return nullptr;
}
#endif

void* system_alloc(size_t size, size_t requested) {
  void* p = block_alloc(size);
  if (!p) {
    cpu_empty_cache();
    p = block_alloc(size);
  }
  if (!p) fail("out of memory on cpu: could not allocate ", requested, " bytes (", cpu_memory_stats().allocated,
               " bytes in use by tensors)");
  return p;
}

// The smallest cached block of at least `size` bytes and less than twice that, or null.
// Counts it as in use (in_blocks) when there is one.
void* take_best_fit(Cache& c, size_t size) {
  for (auto it = c.free_blocks.lower_bound(size); it != c.free_blocks.end() && it->first < 2 * size; ++it) {
    if (it->second.empty()) continue;
    void* p = it->second.back();
    it->second.pop_back();
    c.cached -= it->first;
    c.in_blocks += it->first;
    c.peak_blocks = std::max(c.peak_blocks, c.in_blocks);
    if (it->first != size) c.larger[p] = it->first;
    return p;
  }
  return nullptr;
}

// The largest cached block smaller than `size`, taken out of the cache (its size in *from), or
// null: a miss grows it (mremap) rather than mapping a block afresh.
void* take_largest_below(Cache& c, size_t size, size_t* from) {
  for (auto it = c.free_blocks.lower_bound(size); it != c.free_blocks.begin();) {
    --it;
    if (it->second.empty()) continue;
    void* p = it->second.back();
    it->second.pop_back();
    c.cached -= it->first;
    *from = it->first;
    return p;
  }
  return nullptr;
}

// The cache's bound: the blocks the largest working set so far held (at least 64 MiB).
size_t cache_bound(const Cache& c) { return std::min(c.limit, std::max(kCacheMinBound, c.peak_blocks)); }

thread_local CpuAllocationCap* t_cap = nullptr;

}  // namespace

CpuAllocationCap::CpuAllocationCap(size_t bytes, std::string what)
    : cap_(bytes), what_(std::move(what)), outer_(t_cap) {
  t_cap = this;
}

CpuAllocationCap::~CpuAllocationCap() { t_cap = outer_; }

void* cpu_alloc(size_t nbytes) {
  if (CpuAllocationCap* cap = t_cap) {
    OCRT_CHECK(nbytes <= cap->cap_ - cap->used_, cap->what_, ": needs more than ", cap->cap_ >> 20, " MiB (",
               cap->used_ >> 20, " MiB so far, then ", nbytes >> 20, " MiB more)");
    cap->used_ += nbytes;
  }
  size_t size = block_size(nbytes);
  Cache& c = cache();
  void* p = nullptr;
  void* grow = nullptr;  // a smaller cached block to grow into this one
  size_t grow_from = 0;
  std::vector<std::pair<void*, size_t>> release;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.allocated += nbytes;
    c.peak = std::max(c.peak, c.allocated);
    if (size >= kCacheMinBytes) {
      p = take_best_fit(c, size);
      if (!p) {  // a block of `size` will be mapped (or grown) for it
        if (kGrowBlocks) grow = take_largest_below(c, size, &grow_from);
        c.in_blocks += size;
        c.peak_blocks = std::max(c.peak_blocks, c.in_blocks);
      }
      // With trimming on, a miss first gives back cached blocks (which could not serve it),
      // largest first, while live and cached bytes together pass the bound.
      // (in_blocks counts this request.)
      while (c.trim && !p && c.cached > 0 && c.in_blocks + c.cached > cache_bound(c)) {
        auto it = std::prev(c.free_blocks.end());
        if (it->second.empty()) {
          c.free_blocks.erase(it);
          continue;
        }
        release.emplace_back(it->second.back(), it->first);
        it->second.pop_back();
        c.cached -= it->first;
      }
    }
  }
  for (auto [block, bytes] : release) block_free(block, bytes);
  if (grow) p = grow_block(grow, grow_from, size);
  if (!p) {
    try {
      p = system_alloc(size, nbytes);
    } catch (...) {
      std::lock_guard<std::mutex> lock(c.mu);
      c.allocated -= nbytes;
      if (size >= kCacheMinBytes) c.in_blocks -= size;
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
    if (size >= kCacheMinBytes) {
      auto it = c.larger.find(ptr);
      if (it != c.larger.end()) {
        size = it->second;
        c.larger.erase(it);
      }
      c.in_blocks -= size;
    }
    // The cache never holds more than the largest working set seen (`peak_blocks`): that is what a
    // training step or a batch needs back, and without this bound, lines of ever-new widths
    // would fill it with blocks of sizes that never come again (RSS = live + the whole limit).
    if (size >= kCacheMinBytes && c.cached + size <= cache_bound(c)) {
      c.free_blocks[size].push_back(ptr);
      c.cached += size;
      return;
    }
  }
  block_free(ptr, size);
}

CpuMemoryStats cpu_memory_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {c.allocated, c.cached, c.peak, c.in_blocks, c.peak_blocks};
}

void cpu_reset_peak() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.peak = c.allocated;
  c.peak_blocks = c.in_blocks;
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
    for (void* p : list) block_free(p, size);
}

void cpu_set_cache_trim(bool on) {
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().trim = on;
}

void cpu_fix_malloc_mmap_threshold() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

void cpu_set_cache_limit(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(cache().mu);
    cache().limit = bytes;
  }
  if (bytes < cpu_memory_stats().cached) cpu_empty_cache();
}

}  // namespace ocrt
