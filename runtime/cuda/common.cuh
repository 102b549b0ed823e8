// Shared helpers for the CUDA kernels in ops/cuda/ (included by .cu files only).
//
//   - OffsetCalc<N>: walks N same-shaped tensors with any strides (stride 0 for broadcast). The
//     host side merges dims laid out back to back (merge_dims, runtime/strided.h, as the CPU
//     loop driver does), so the common
//     contiguous case becomes one dim of stride 1 and a kernel takes a plain indexed path.
//   - grid_for(): a launch size for grid-stride loops.
//   - warp_sum / block_sum: reductions of one value per thread.
//   - DeviceScope: makes the kernel's device current and hands out its stream.
//   - OCRT_CUDA_LAUNCH_CHECK(op): checks the launch and names the op on failure.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "runtime/backend.h"
#include "runtime/strided.h"
#include "runtime/cuda/cuda_context.cuh"

namespace ocrt::cuda {

constexpr int kMaxDims = 8;
constexpr int kThreads = 256;

// Launch size for a grid-stride loop over n items with kThreads per block.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > 65536) blocks = 65536;  // the loop covers the rest
  return (unsigned)blocks;
}

// The device of a kernel's tensors, current on this thread, with its stream.
struct DeviceScope {
  int device;
  cudaStream_t stream;
  explicit DeviceScope(const Tensor& t) : device(t.device().index), stream(cuda::stream(t.device().index)) {}
};

#define OCRT_CUDA_LAUNCH_CHECK(op, device) ::ocrt::cuda::check_launch(op, device)

// Offsets of element i (row-major over the shared shape) in N tensors.
template <int N>
struct OffsetCalc {
  int ndim = 0;
  bool contiguous = false;  // one dim, every stride 1: offset == i
  int64_t sizes[kMaxDims];
  int64_t strides[N][kMaxDims];

  __device__ __forceinline__ void get(int64_t i, int64_t (&off)[N]) const {
    if (contiguous) {
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] = i;
      return;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t q = i / sizes[d];
      const int64_t r = i - q * sizes[d];
      i = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * strides[k][d];
    }
  }
};

// Builds the calculator for tensors of one shape (ts[0]'s), merging adjacent dims where every
// tensor allows it. More than kMaxDims dims left after merging is refused with a clear error.
template <int N>
OffsetCalc<N> make_offset_calc(const std::array<Tensor, N>& ts, const char* op) {
  const Shape& shape = ts[0].shape();
  OffsetCalc<N> c;
  const MergedDims<(size_t)N> merged = merge_dims<(size_t)N>(ts);  // runtime/strided.h
  const std::vector<int64_t>& sizes = merged.sizes;
  const auto& strides = merged.strides;
  OCRT_CHECK(sizes.size() <= (size_t)kMaxDims, op, ": more than ", kMaxDims,
             " non-mergeable dims on CUDA; make the tensor contiguous first (shape ", shape_str(shape), ")");
  c.ndim = (int)sizes.size();
  for (int d = 0; d < c.ndim; ++d) {
    c.sizes[d] = sizes[(size_t)d];
    for (int k = 0; k < N; ++k) c.strides[k][d] = strides[(size_t)d][(size_t)k];
  }
  c.contiguous = c.ndim <= 1;
  for (int k = 0; k < N && c.ndim == 1; ++k) c.contiguous &= c.strides[k][0] == 1;
  if (c.ndim == 0) {  // a single element
    c.ndim = 1;
    c.sizes[0] = 1;
    for (int k = 0; k < N; ++k) c.strides[k][0] = 0;
  }
  return c;
}

// Sum of v over the 32 lanes of a warp (every lane gets it).
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    T w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}

// Sum of v over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets
// it. `scratch` is shared memory of at least 32 elements; the block must reach this call
// together.
template <class T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by an earlier call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : T(0);
  return warp_sum(v);
}

// Accumulator type of sums: double for floating types (as on the CPU), int64 for integers.
template <class T>
struct AccOf {
  using type = int64_t;
};
template <>
struct AccOf<float> {
  using type = double;
};
template <>
struct AccOf<double> {
  using type = double;
};

}  // namespace ocrt::cuda
