// CUDA copy (with dtype conversion, any strides, stride-0 broadcast sources) and fill; the
// counterpart of runtime/cpu/copy.cpp. One thread per element of dst, walking both tensors through
// an OffsetCalc; contiguous tensors take the plain indexed path inside it.
#include <type_traits>

#include "runtime/cuda/common.cuh"

namespace ocrt {

namespace {

// Float to integer goes through int64, so out-of-range values wrap exactly as on the CPU
// (runtime/cpu/copy.cpp); a direct conversion is undefined and the GPU would saturate instead.
template <class D, class S>
__device__ __forceinline__ D convert(S x) {
  if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>)
    return static_cast<D>(static_cast<int64_t>(x));
  else
    return static_cast<D>(x);
}

template <class S, class D>
__global__ void copy_kernel(const S* src, D* dst, int64_t n, cuda::OffsetCalc<2> calc) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    calc.get(i, off);
    dst[off[0]] = convert<D>(src[off[1]]);
  }
}

template <class T>
__global__ void fill_kernel(T* dst, T value, int64_t n, cuda::OffsetCalc<1> calc) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[1];
    calc.get(i, off);
    dst[off[0]] = value;
  }
}

void cuda_copy(const Tensor& src, const Tensor& dst) {
  cuda::DeviceScope ds(dst);
  const int64_t n = dst.numel();
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    // A plain byte copy: the copy engine's cudaMemcpy beats a kernel (bench_gpu_ops ceiling.copy).
    cuda::check(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), (size_t)n * dst.itemsize(), cudaMemcpyDeviceToDevice,
                                ds.stream),
                "copy (cudaMemcpyAsync device->device)", ds.device);
    return;
  }
  auto calc = cuda::make_offset_calc<2>({dst, src}, "copy");
  dispatch_all(src.dtype(), "copy", [&](auto src_zero) {
    using S = decltype(src_zero);
    dispatch_all(dst.dtype(), "copy", [&](auto dst_zero) {
      using D = decltype(dst_zero);
      copy_kernel<S, D><<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(src.data<S>(), dst.data<D>(), n, calc);
    });
  });
  OCRT_CUDA_LAUNCH_CHECK("copy", ds.device);
}

void cuda_fill(const Tensor& dst, double value) {
  cuda::DeviceScope ds(dst);
  const int64_t n = dst.numel();
  auto calc = cuda::make_offset_calc<1>({dst}, "fill");
  dispatch_all(dst.dtype(), "fill", [&](auto zero) {
    using T = decltype(zero);
    fill_kernel<T><<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(dst.data<T>(), static_cast<T>(value), n,
                                                                        calc);
  });
  OCRT_CUDA_LAUNCH_CHECK("fill", ds.device);
}

}  // namespace

void register_cuda_copy(TensorBackend& b) {
  b.copy = cuda_copy;
  b.fill = cuda_fill;
}

}  // namespace ocrt
