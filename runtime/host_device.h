// OCRT_HOST_DEVICE marks a small inline function that both the CPU and CUDA kernels call, so that
// both backends compute it with the same code (runtime/rng.h's Philox, ops/log_space.h's
// log-sum-exp). Under nvcc it is __host__ __device__; for every other compiler it is nothing, so
// no CUDA type or keyword reaches a CPU-only build.
#pragma once

#if defined(__CUDACC__)
#define OCRT_HOST_DEVICE __host__ __device__
#else
#define OCRT_HOST_DEVICE
#endif
