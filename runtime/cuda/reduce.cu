// CUDA reductions; the counterpart of runtime/cpu/reduce.cpp (softmax: ops/cuda/softmax.cu).
//
// reduce: x (any shape and strides) -> out (x's rank, size 1 in reduced dims, contiguous). An
// output's inputs are found through two index spaces, kept dims and reduced dims, each a list
// of (size, stride into x). Three launch shapes, picked by the sizes:
//   - few inputs per output (<= 64): one thread per output, which for reductions over a
//     leading dim (a bias gradient: sum over rows) reads neighbouring outputs' inputs side by
//     side, so the loads coalesce;
//   - otherwise one block per output, its threads striding over the inputs, then a block-wide
//     combine;
//   - and when there are few outputs but many inputs each (the sum of a whole tensor), every
//     output is split into chunks, one block per chunk, and a second tiny kernel combines the
//     chunks' partial results, so the whole GPU works on it.
// Float sums accumulate in double (as on the CPU); max/min propagate NaN (as PyTorch).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "runtime/cuda/common.cuh"

namespace ocrt {

namespace {

struct Dims {
  int n = 0;
  int64_t sizes[cuda::kMaxDims];
  int64_t strides[cuda::kMaxDims];

  __device__ __forceinline__ int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; --d) {
      const int64_t q = i / sizes[d];
      off += (i - q * sizes[d]) * strides[d];
      i = q;
    }
    return off;
  }
};

void push(Dims& d, int64_t size, int64_t stride, const char* op) {
  OCRT_CHECK(d.n < cuda::kMaxDims, op, ": more than ", cuda::kMaxDims, " dims on CUDA");
  d.sizes[d.n] = size;
  d.strides[d.n] = stride;
  d.n++;
}

// The identities of max and min: -inf/+inf for floats (so a row of -inf reduces to -inf), the
// type's extremes for integers.
template <class T>
__host__ __device__ T lowest_of() {
  if constexpr (std::is_floating_point_v<T>) return -INFINITY;
  else if constexpr (std::is_same_v<T, uint8_t>) return 0;
  else if constexpr (std::is_same_v<T, int32_t>) return INT32_MIN;
  else return INT64_MIN;
}
template <class T>
__host__ __device__ T highest_of() {
  if constexpr (std::is_floating_point_v<T>) return INFINITY;
  else if constexpr (std::is_same_v<T, uint8_t>) return 255;
  else if constexpr (std::is_same_v<T, int32_t>) return INT32_MAX;
  else return INT64_MAX;
}

// How values combine, for one ReduceKind and element type.
template <class T, ReduceKind op>
struct Combine {
  static constexpr bool is_sum = op == ReduceKind::sum || op == ReduceKind::mean;
  using A = std::conditional_t<is_sum, typename cuda::AccOf<T>::type, T>;

  __host__ __device__ static A identity() {
    if constexpr (is_sum) return A(0);
    else if constexpr (op == ReduceKind::max) return lowest_of<T>();
    else return highest_of<T>();
  }
  __device__ static A apply(A a, A b) {
    if constexpr (is_sum) return a + b;
    else {
      if (a != a) return a;  // NaN wins
      if (b != b) return b;
      if constexpr (op == ReduceKind::max) return b > a ? b : a;
      else return b < a ? b : a;
    }
  }
  __device__ static T finish(A a, int64_t count) {
    if constexpr (op == ReduceKind::mean) return (T)(a / (A)count);
    else return (T)a;
  }
};

template <class A, class C>
__device__ A block_combine(A v, A* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = C::apply(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : C::identity();
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = C::apply(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;  // valid in thread 0
}

// One thread per output.
template <class T, ReduceKind op>
__global__ void reduce_thread_kernel(const T* x, Dims outd, Dims redd, int64_t num_out, int64_t R, T* out) {
  using C = Combine<T, op>;
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < num_out; o += (int64_t)gridDim.x * blockDim.x) {
    const T* base = x + outd.offset(o);
    typename C::A acc = C::identity();
    for (int64_t k = 0; k < R; ++k) acc = C::apply(acc, (typename C::A)base[redd.offset(k)]);
    out[o] = C::finish(acc, R);
  }
}

// One block per (output, chunk). With one chunk the block writes the output; otherwise its
// partial result, which reduce_chunks_kernel combines.
template <class T, ReduceKind op>
__global__ void reduce_block_kernel(const T* x, Dims outd, Dims redd, int64_t R, int chunks,
                                    typename Combine<T, op>::A* partial, T* out) {
  using C = Combine<T, op>;
  using A = typename C::A;
  __shared__ A scratch[32];
  const int64_t o = blockIdx.x / chunks;
  const int j = blockIdx.x % chunks;
  const int64_t per = (R + chunks - 1) / chunks;
  const int64_t k0 = j * per, k1 = min(R, k0 + per);
  const T* base = x + outd.offset(o);
  A acc = C::identity();
  for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) acc = C::apply(acc, (A)base[redd.offset(k)]);
  acc = block_combine<A, C>(acc, scratch);
  if (threadIdx.x == 0) {
    if (chunks == 1) out[o] = C::finish(acc, R);
    else partial[blockIdx.x] = acc;
  }
}

template <class T, ReduceKind op>
__global__ void reduce_chunks_kernel(const typename Combine<T, op>::A* partial, int64_t num_out, int chunks,
                                     int64_t R, T* out) {
  using C = Combine<T, op>;
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < num_out; o += (int64_t)gridDim.x * blockDim.x) {
    typename C::A acc = C::identity();
    for (int j = 0; j < chunks; ++j) acc = C::apply(acc, partial[o * chunks + j]);
    out[o] = C::finish(acc, R);
  }
}

template <class T, ReduceKind op>
void reduce_typed(const Tensor& x, const Tensor& out, cudaStream_t stream, int device) {
  using A = typename Combine<T, op>::A;
  Dims outd, redd;
  int64_t num_out = 1, R = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (out.shape()[d] == 1 && x.shape()[d] != 1) {
      push(redd, x.shape()[d], x.strides()[d], "reduce");
      R *= x.shape()[d];
    } else {
      push(outd, x.shape()[d], x.strides()[d], "reduce");
      num_out *= x.shape()[d];
    }
  }
  if (num_out == 0) return;
  if (R == 0) {  // as on the CPU: an empty reduction gives 0
    kernel(out.device(), &TensorBackend::fill, "reduce")(out, 0.0);
    return;
  }
  const T* xd = x.data<T>();
  T* od = out.data<T>();
  if (R <= 64) {
    reduce_thread_kernel<T, op><<<cuda::grid_for(num_out), cuda::kThreads, 0, stream>>>(xd, outd, redd, num_out, R, od);
    return;
  }
  int threads = 32;
  while (threads < 256 && threads < R) threads *= 2;
  // Split each output into chunks when there are too few outputs to fill the GPU.
  int chunks = 1;
  if (num_out < 256) chunks = (int)std::min<int64_t>(std::max<int64_t>(R / 16384, 1), 512 / num_out + 1);
  Tensor partial;
  A* pd = nullptr;
  if (chunks > 1) {
    partial = Tensor::empty({num_out * chunks * (int64_t)sizeof(A)}, DType::u8, x.device());
    pd = reinterpret_cast<A*>(partial.raw_data());
  }
  OCRT_CHECK(num_out * chunks < (int64_t)INT32_MAX, "reduce: too many outputs for one CUDA launch");
  reduce_block_kernel<T, op><<<(unsigned)(num_out * chunks), threads, 0, stream>>>(xd, outd, redd, R, chunks, pd, od);
  if (chunks > 1) {
    OCRT_CUDA_LAUNCH_CHECK("reduce", device);
    reduce_chunks_kernel<T, op><<<cuda::grid_for(num_out), cuda::kThreads, 0, stream>>>(pd, num_out, chunks, R, od);
  }
}

void cuda_reduce(ReduceKind op, const Tensor& x, const Tensor& out) {
  cuda::DeviceScope ds(out);
  dispatch_all(x.dtype(), "reduce", [&](auto zero) {
    using T = decltype(zero);
    switch (op) {
      case ReduceKind::sum: return reduce_typed<T, ReduceKind::sum>(x, out, ds.stream, ds.device);
      case ReduceKind::mean: return reduce_typed<T, ReduceKind::mean>(x, out, ds.stream, ds.device);
      case ReduceKind::max: return reduce_typed<T, ReduceKind::max>(x, out, ds.stream, ds.device);
      case ReduceKind::min: return reduce_typed<T, ReduceKind::min>(x, out, ds.stream, ds.device);
    }
  });
  OCRT_CUDA_LAUNCH_CHECK("reduce", ds.device);
}

// ---- max/min with indices along one dim: one thread per output; first index wins ties, a
// NaN wins over everything (as PyTorch and the CPU kernel).
template <class T>
__global__ void arg_reduce_kernel(bool is_max, const T* x, Dims outd, int64_t n, int64_t step, int64_t num_out,
                                  T* values, int64_t* indices) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < num_out; o += (int64_t)gridDim.x * blockDim.x) {
    const T* p = x + outd.offset(o);
    T best = p[0];
    int64_t best_i = 0;
    for (int64_t i = 1; i < n && best == best; ++i) {
      T v = p[i * step];
      if (v != v || (is_max ? v > best : v < best)) {
        best = v;
        best_i = i;
      }
    }
    values[o] = best;
    indices[o] = best_i;
  }
}

void cuda_arg_reduce(bool is_max, const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices) {
  cuda::DeviceScope ds(values);
  const int64_t n = x.dim() == 0 ? 1 : x.shape()[dim];
  const int64_t step = x.dim() == 0 ? 0 : x.strides()[dim];
  Dims outd;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) push(outd, x.shape()[d], x.strides()[d], "max/min");
  const int64_t num_out = values.numel();
  if (num_out == 0) return;
  dispatch_all(x.dtype(), "max/min", [&](auto zero) {
    using T = decltype(zero);
    arg_reduce_kernel<T><<<cuda::grid_for(num_out), cuda::kThreads, 0, ds.stream>>>(
        is_max, x.data<T>(), outd, n, step, num_out, values.data<T>(), indices.data<int64_t>());
  });
  OCRT_CUDA_LAUNCH_CHECK("max/min", ds.device);
}

}  // namespace

void register_cuda_reduce(TensorBackend& b) {
  b.reduce = cuda_reduce;
  b.arg_reduce = cuda_arg_reduce;
}

}  // namespace ocrt
