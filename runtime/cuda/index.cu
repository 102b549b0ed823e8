// CUDA indexing kernels: index_select / index_add and gather / scatter_add; the counterpart
// of runtime/cpu/index.cpp (same contract: index int64 and contiguous, every index already checked
// by the front-end, data tensors with any strides).
//
// Each kernel walks one tensor's elements with an OffsetCalc. The tensor addressed through the
// index gets a view of the walked shape whose stride along `dim` is 0, so the calculator yields
// its offset without the `dim` coordinate, and the kernel adds index * stride itself.
// The accumulating kernels (index_add, scatter_add) use atomicAdd: repeated indices add up
// correctly, but the order of float additions, and so the last bits, may vary between runs
// (the CPU kernels are deterministic). uint8 has no atomic add and is refused.
#include "runtime/cuda/common.cuh"

namespace ocrt {

namespace {

#define OCRT_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

// t seen with `shape`, its strides kept except along dim (0): the offset of everything but dim.
Tensor without_dim(const Tensor& t, const Shape& shape, int64_t dim) {
  Shape strides = t.strides();
  strides[(size_t)dim] = 0;
  return make_view(t, shape, strides, t.offset());
}

int64_t inner_size(const Shape& shape, int64_t dim) {
  int64_t inner = 1;
  for (size_t d = (size_t)dim + 1; d < shape.size(); ++d) inner *= shape[d];
  return inner;
}

template <class T>
__device__ __forceinline__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, int64_t>)
    atomicAdd(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);  // two's complement
  else
    atomicAdd(p, v);
}

// out[o][j][k] = x[o][index[j]][k]; j = the element's coordinate along dim.
template <class T>
__global__ void index_select_kernel(const T* x, const int64_t* index, T* out, int64_t n, int64_t len, int64_t inner,
                                    int64_t x_step, cuda::OffsetCalc<2> calc) {
  OCRT_GRID_LOOP(i, n) {
    int64_t off[2];
    calc.get(i, off);
    const int64_t j = (i / inner) % len;
    out[off[0]] = x[off[1] + index[j] * x_step];
  }
}

// dst[o][index[j]][k] += src[o][j][k]
template <class T>
__global__ void index_add_kernel(T* dst, const int64_t* index, const T* src, int64_t n, int64_t len, int64_t inner,
                                 int64_t d_step, cuda::OffsetCalc<2> calc) {
  OCRT_GRID_LOOP(i, n) {
    int64_t off[2];
    calc.get(i, off);
    const int64_t j = (i / inner) % len;
    atomic_add(dst + off[1] + index[j] * d_step, src[off[0]]);
  }
}

// out[p] = x[p with its dim coordinate replaced by index[p]]
template <class T>
__global__ void gather_kernel(const T* x, const int64_t* index, T* out, int64_t n, int64_t x_step,
                              cuda::OffsetCalc<3> calc) {
  OCRT_GRID_LOOP(i, n) {
    int64_t off[3];
    calc.get(i, off);
    out[off[0]] = x[off[1] + index[off[2]] * x_step];
  }
}

template <class T>
__global__ void scatter_add_kernel(T* dst, const int64_t* index, const T* src, int64_t n, int64_t d_step,
                                   cuda::OffsetCalc<3> calc) {
  OCRT_GRID_LOOP(i, n) {
    int64_t off[3];
    calc.get(i, off);
    atomic_add(dst + off[1] + index[off[2]] * d_step, src[off[0]]);
  }
}

void cuda_index_select(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  cuda::DeviceScope ds(out);
  const int64_t n = out.numel();
  if (n == 0) return;
  auto calc = cuda::make_offset_calc<2>({out, without_dim(x, out.shape(), dim)}, "index_select");
  const int64_t len = out.shape()[(size_t)dim], inner = inner_size(out.shape(), dim);
  dispatch_all(x.dtype(), "index_select", [&](auto zero) {
    using T = decltype(zero);
    index_select_kernel<T><<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(
        x.data<T>(), index.data<int64_t>(), out.data<T>(), n, len, inner, x.strides()[(size_t)dim],
        calc);
  });
  OCRT_CUDA_LAUNCH_CHECK("index_select", ds.device);
}

void cuda_index_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  cuda::DeviceScope ds(dst);
  const int64_t n = src.numel();
  if (n == 0) return;
  auto calc = cuda::make_offset_calc<2>({src, without_dim(dst, src.shape(), dim)}, "index_add");
  const int64_t len = src.shape()[(size_t)dim], inner = inner_size(src.shape(), dim);
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    index_add_kernel<T><<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(
        dst.data<T>(), index.data<int64_t>(), src.data<T>(), n, len, inner, dst.strides()[(size_t)dim], calc);
  };
  switch (dst.dtype()) {
    case DType::f32: launch(float{}); break;
    case DType::f64: launch(double{}); break;
    case DType::i32: launch(int32_t{}); break;
    case DType::i64: launch(int64_t{}); break;
    default: fail("index_add: ", dtype_name(dst.dtype()), " is not supported on CUDA (no atomic add)");
  }
  OCRT_CUDA_LAUNCH_CHECK("index_add", ds.device);
}

void cuda_gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  cuda::DeviceScope ds(out);
  const int64_t n = index.numel();
  if (n == 0) return;
  auto calc = cuda::make_offset_calc<3>({out, without_dim(x, index.shape(), dim), index}, "gather");
  dispatch_all(x.dtype(), "gather", [&](auto zero) {
    using T = decltype(zero);
    gather_kernel<T><<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(
        x.data<T>(), index.data<int64_t>(), out.data<T>(), n, x.strides()[(size_t)dim], calc);
  });
  OCRT_CUDA_LAUNCH_CHECK("gather", ds.device);
}

void cuda_scatter_add(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src) {
  cuda::DeviceScope ds(dst);
  const int64_t n = index.numel();
  if (n == 0) return;
  auto calc = cuda::make_offset_calc<3>({src, without_dim(dst, index.shape(), dim), index}, "scatter_add");
  auto launch = [&](auto tag) {
    using T = decltype(tag);
    scatter_add_kernel<T><<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(
        dst.data<T>(), index.data<int64_t>(), src.data<T>(), n, dst.strides()[(size_t)dim], calc);
  };
  switch (dst.dtype()) {
    case DType::f32: launch(float{}); break;
    case DType::f64: launch(double{}); break;
    case DType::i32: launch(int32_t{}); break;
    case DType::i64: launch(int64_t{}); break;
    default: fail("scatter_add: ", dtype_name(dst.dtype()), " is not supported on CUDA (no atomic add)");
  }
  OCRT_CUDA_LAUNCH_CHECK("scatter_add", ds.device);
}

}  // namespace

void register_cuda_index(TensorBackend& b) {
  b.index_select = cuda_index_select;
  b.index_add = cuda_index_add;
  b.gather = cuda_gather;
  b.scatter_add = cuda_scatter_add;
}

}  // namespace ocrt
