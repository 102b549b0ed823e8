// CUDA-typed internals of the runtime, for .cu files only: the per-device stream and cuBLAS
// handle, the device switch, and the checks every CUDA and cuBLAS call goes through.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "runtime/cuda/cublas_loader.h"
#include "runtime/error.h"

namespace ocrt::cuda {

// Throws "<what> on cuda:<device> failed: <CUDA's message>" unless err is cudaSuccess.
void check(cudaError_t err, const char* what, int device);
void check_cublas(cublasStatus_t st, const char* what, int device);
// After a kernel launch: reports a bad launch (too many threads, too much shared memory, a
// sticky error from earlier work) with the op's name. Asynchronous faults surface at the next
// synchronisation, which also names the call that found them.
void check_launch(const char* op, int device);

// Makes `device` current on this thread (a no-op when it already is).
void set_device(int device);

// The GPU's compute stream and cuBLAS handle (bound to that stream, TF32 off), created on first
// use. Both make the device current.
cudaStream_t stream(int device);
cublasHandle_t cublas(int device);

}  // namespace ocrt::cuda
