// The only door from plain C++ into the CUDA runtime. Nothing here mentions a CUDA type, so
// every file outside *.cu compiles without nvcc; in builds without CUDA the functions come from
// cuda_glue_nocuda.cpp and report "no GPU" (or throw, for the ones that need one).
#pragma once
#include <cstddef>
#include <string>

namespace ocrt {

bool cuda_built();                 // was this build compiled with the CUDA backend?
int cuda_device_count();           // GPUs visible to this process (0 without CUDA or driver)
std::string cuda_status_note();    // why the count is 0, e.g. ": no CUDA driver found"

// Device memory. The caller names the GPU; the glue makes it current on the calling thread.
void* cuda_malloc(int device, size_t bytes);
void cuda_free(int device, void* ptr);
void cuda_copy_to_device(int device, void* dst, const void* src, size_t bytes);
void cuda_copy_to_host(int device, void* dst, const void* src, size_t bytes);
void cuda_copy_device_to_device(int dst_device, void* dst, int src_device, const void* src, size_t bytes);
void cuda_synchronize(int device);

}  // namespace ocrt
