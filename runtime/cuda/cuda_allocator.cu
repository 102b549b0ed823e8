// The caching allocator for GPU memory, one per device.
//
// cudaMalloc and cudaFree are slow (cudaFree also synchronises the whole device), and a training
// step frees and asks again for the same sizes every time. So freed blocks are kept in
// size-ordered free lists and handed out again: after the first step, a steady loop makes no
// cudaMalloc call at all (stats().num_mallocs stops growing).
//
// Sizes are rounded up (512 bytes below 1 MiB, 1 MiB steps up to 64 MiB, 8 MiB steps above),
// so a request reuses any cached block of its rounded size or a little larger (never more
// than an eighth larger, or 1 MiB, so small requests do not pin large blocks).
//
// Stream-aware reuse: a block remembers the stream it was allocated for and returns to that
// stream's list. All work for a GPU is queued on its one stream (cuda_context.cuh), so a block
// freed on the host while kernels that use it are still queued can be handed out at once: the
// next user's kernels are queued behind them on the same stream.
//
// Out of memory: the cache is emptied and cudaMalloc tried once more; if it still fails, the
// error says how much was asked for, how much is in use and cached, and on which GPU.
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>

#include "runtime/cuda/cuda_context.cuh"
#include "runtime/cuda/cuda_glue.h"

namespace ocrt {

namespace {

struct Block {
  size_t size;
  cudaStream_t stream;
};

struct DeviceAllocator {
  std::mutex mu;
  std::multimap<std::pair<cudaStream_t, size_t>, void*> free_blocks;  // (stream, size) -> ptr
  std::unordered_map<void*, Block> blocks;                             // every block we own
  CudaMemoryStats stats;
};

DeviceAllocator& allocator(int device) {
  static std::array<DeviceAllocator, 64> all;
  OCRT_CHECK(device >= 0 && device < 64, "cuda:", device, ": GPU index out of range");
  return all[(size_t)device];
}

size_t round_size(size_t bytes) {
  const size_t KiB = 1024, MiB = 1024 * KiB;
  auto up = [](size_t x, size_t q) { return (x + q - 1) / q * q; };
  if (bytes < MiB) return up(bytes, 512);
  if (bytes < 64 * MiB) return up(bytes, MiB);
  return up(bytes, 8 * MiB);
}

// Frees every cached block (caller holds the lock).
void release_cached(int device, DeviceAllocator& a) {
  if (a.free_blocks.empty()) return;
  cuda::set_device(device);
  for (auto& [key, ptr] : a.free_blocks) {
    cudaFree(ptr);
    a.stats.reserved -= key.second;
    a.blocks.erase(ptr);
  }
  a.free_blocks.clear();
}

std::atomic<bool> g_poison{false};

void poison(void* p, size_t size, cudaStream_t s, int device) {
  if (g_poison.load(std::memory_order_relaxed))
    cuda::check(cudaMemsetAsync(p, 0xFF, size, s), "cudaMemsetAsync (poison)", device);
}

}  // namespace

void cuda_set_poison(bool on) { g_poison = on; }

void* cuda_malloc(int device, size_t bytes) {
  cudaStream_t s = cuda::stream(device);  // also makes the device current
  DeviceAllocator& a = allocator(device);
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(a.mu);

  auto it = a.free_blocks.lower_bound({s, size});
  const size_t slack = std::max(size / 8, size_t(1) << 20);
  if (it != a.free_blocks.end() && it->first.first == s && it->first.second <= size + slack) {
    void* p = it->second;
    a.free_blocks.erase(it);
    a.stats.allocated += a.blocks[p].size;
    a.stats.peak_allocated = std::max(a.stats.peak_allocated, a.stats.allocated);
    a.stats.cache_hits++;
    poison(p, a.blocks[p].size, s, device);
    return p;
  }

  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  if (err != cudaSuccess) {
    cudaGetLastError();
    release_cached(device, a);
    err = cudaMalloc(&p, size);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaGetLastError();
    const double MiB = 1024.0 * 1024.0;
    fail("out of memory on cuda:", device, ": asked for ", bytes / MiB, " MiB; ocrt's tensors hold ",
         a.stats.allocated / MiB, " MiB (", a.stats.reserved / MiB, " MiB reserved), the GPU has ", free_b / MiB,
         " of ", total_b / MiB, " MiB free (", cudaGetErrorString(err),
         "). Try a smaller --batch, or free other processes' memory on this GPU");
  }
  a.blocks[p] = Block{size, s};
  a.stats.reserved += size;
  a.stats.allocated += size;
  a.stats.peak_allocated = std::max(a.stats.peak_allocated, a.stats.allocated);
  a.stats.num_mallocs++;
  poison(p, size, s, device);
  return p;
}

void cuda_free(int device, void* ptr) {
  if (!ptr) return;
  DeviceAllocator& a = allocator(device);
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.blocks.find(ptr);
  if (it == a.blocks.end()) return;  // not ours (cannot happen through Storage)
  a.stats.allocated -= it->second.size;
  a.free_blocks.insert({{it->second.stream, it->second.size}, ptr});
}

CudaMemoryStats cuda_memory_stats(int device) {
  DeviceAllocator& a = allocator(device);
  std::lock_guard<std::mutex> lock(a.mu);
  return a.stats;
}

void cuda_reset_peak(int device) {
  DeviceAllocator& a = allocator(device);
  std::lock_guard<std::mutex> lock(a.mu);
  a.stats.peak_allocated = a.stats.allocated;
}

void cuda_empty_cache(int device) {
  DeviceAllocator& a = allocator(device);
  std::lock_guard<std::mutex> lock(a.mu);
  // Blocks in the free lists may still be read by queued kernels of an earlier user only if
  // the stream has not run them yet; cudaFree waits for the device, so this is safe.
  release_cached(device, a);
}

}  // namespace ocrt
