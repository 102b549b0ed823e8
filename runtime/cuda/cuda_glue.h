// The only door from plain C++ into the CUDA runtime. Nothing here mentions a CUDA type, so
// every file outside *.cu compiles without nvcc; in builds without CUDA the functions come from
// cuda_glue_nocuda.cpp and report "no GPU" (or throw, for the ones that need one).
//
// Each GPU has one compute stream and one cuBLAS handle (runtime/cuda/cuda_context.cuh), made
// lazily by the first thread that uses that GPU. Every kernel, copy and cuBLAS call for a GPU is
// queued on its stream, so work on one GPU runs in the order it was asked for and memory freed
// to the caching allocator can be reused at once by later work on the same stream. A GPU is
// meant to be driven by one thread at a time (one worker per device in ocrt-infer and in
// multi-GPU training); two threads queueing work on the same GPU at once is not supported.
#pragma once
#include <cstddef>
#include <string>

namespace ocrt {

bool cuda_built();                 // was this build compiled with the CUDA backend?
int cuda_device_count();           // GPUs visible to this process (0 without CUDA or driver)
std::string cuda_status_note();    // why the count is 0, e.g. ": no CUDA driver found"
std::string cuda_device_name(int device);  // e.g. "NVIDIA H100 80GB HBM3"

// Device memory, from the per-device caching allocator (runtime/cuda/cuda_allocator.cu).
// The caller names the GPU; the glue makes it current on the calling thread.
void* cuda_malloc(int device, size_t bytes);
void cuda_free(int device, void* ptr);

struct CudaMemoryStats {
  size_t allocated = 0;       // bytes held by live tensors (rounded block sizes)
  size_t reserved = 0;        // bytes obtained from cudaMalloc (allocated + cached)
  size_t peak_allocated = 0;  // high-water mark of `allocated` since the last reset
  size_t num_mallocs = 0;     // cudaMalloc calls so far (a steady training loop adds none)
  size_t cache_hits = 0;      // allocations served from the cache
};
CudaMemoryStats cuda_memory_stats(int device);
void cuda_reset_peak(int device);
// Returns every cached (unused) block of the GPU to the driver.
void cuda_empty_cache(int device);
// Tests: when on, every block handed out is first filled with 0xFF bytes (NaN in float32 and
// float64, -1 in integers), so an output element a kernel forgets to write cannot pass as a
// stale value that happened to be right.
void cuda_set_poison(bool on);

// Copies, queued on the GPU's stream. Host -> device returns once the host buffer may be
// reused (large copies go through a pinned staging buffer, so the transfer itself overlaps
// with the caller's next work); device -> host returns when the data has arrived.
void cuda_copy_to_device(int device, void* dst, const void* src, size_t bytes);
void cuda_copy_to_host(int device, void* dst, const void* src, size_t bytes);
void cuda_copy_device_to_device(int dst_device, void* dst, int src_device, const void* src, size_t bytes);
// Waits until everything queued on the GPU's stream has run; reports any asynchronous error.
void cuda_synchronize(int device);

}  // namespace ocrt
