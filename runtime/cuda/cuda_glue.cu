// The CUDA runtime behind cuda_glue.h and cuda_context.cuh: device discovery, the per-device
// stream and cuBLAS handle, and copies. Every call is checked; an error names the call, the GPU
// and CUDA's own message. CUDA is initialised lazily, by the first thread that touches a GPU
// (nothing here runs at load time), so a process may still fork before that.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>

#include "runtime/cuda/cuda_context.cuh"
#include "runtime/cuda/cuda_glue.h"

namespace ocrt {

namespace cuda {

void check(cudaError_t err, const char* what, int device) {
  if (err != cudaSuccess) fail(what, " on cuda:", device, " failed: ", cudaGetErrorString(err));
}

void check_cublas(cublasStatus_t st, const char* what, int device) {
  if (st != CUBLAS_STATUS_SUCCESS) fail(what, " on cuda:", device, " failed: cuBLAS status ", (int)st);
}

void check_launch(const char* op, int device) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) fail(op, ": kernel launch on cuda:", device, " failed: ", cudaGetErrorString(err));
}

void set_device(int device) {
  thread_local int current = -1;
  if (current == device) return;
  check(cudaSetDevice(device), "cudaSetDevice", device);
  current = device;
}

namespace {

constexpr int kMaxDevices = 64;

struct DeviceContext {
  std::once_flag once;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
};

DeviceContext& context(int device) {
  static std::array<DeviceContext, kMaxDevices> contexts;
  OCRT_CHECK(device >= 0 && device < kMaxDevices, "cuda:", device, ": GPU index out of range");
  DeviceContext& ctx = contexts[(size_t)device];
  std::call_once(ctx.once, [&] {
    set_device(device);
    // Non-blocking: the stream never waits for the legacy default stream, which ocrt never uses.
    check(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking), "cudaStreamCreate", device);
    const CublasApi& api = cublas_api();  // opens cuBLAS on the first GPU context (cublas_loader.h)
    check_cublas(api.create(&ctx.cublas), "cublasCreate", device);
    check_cublas(api.set_stream(ctx.cublas, ctx.stream), "cublasSetStream", device);
    // Full float32 SGEMMs: TF32 would change results at the 1e-3 level (docs/cuda.md). tf32 and
    // bf16 (runtime/precision.h) ask for tensor cores per call, through the compute type.
    check_cublas(api.set_math_mode(ctx.cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode", device);
  });
  return ctx;
}

}  // namespace

cudaStream_t stream(int device) {
  cudaStream_t s = context(device).stream;
  set_device(device);
  return s;
}

cublasHandle_t cublas(int device) {
  cublasHandle_t h = context(device).cublas;
  set_device(device);
  return h;
}

}  // namespace cuda

namespace {

struct DeviceCount {
  int count = 0;
  std::string note;
};

const DeviceCount& device_count_once() {
  static DeviceCount dc;
  static std::once_flag once;
  std::call_once(once, [] {
    cudaError_t err = cudaGetDeviceCount(&dc.count);
    if (err != cudaSuccess) {
      dc.count = 0;
      dc.note = std::string(": ") + cudaGetErrorString(err);
      cudaGetLastError();  // clear the error so later calls start clean
    }
  });
  return dc;
}

// Host -> device copies of at least this size go through pinned staging buffers.
constexpr size_t kStageChunk = size_t(8) << 20;
constexpr size_t kStageMin = size_t(256) << 10;

// Two pinned chunks per GPU used in turn: while one is being transferred the host fills the
// other. An event per chunk says when its last transfer has finished.
struct Staging {
  std::mutex mu;
  void* buf[2] = {nullptr, nullptr};
  cudaEvent_t done[2] = {nullptr, nullptr};
  int next = 0;
};

Staging& staging(int device) {
  static std::array<Staging, 64> all;
  return all[(size_t)device];
}

}  // namespace

bool cuda_built() { return true; }
int cuda_device_count() { return device_count_once().count; }
std::string cuda_status_note() { return device_count_once().note; }

std::string cuda_device_name(int device) {
  cudaDeviceProp prop;
  cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", device);
  return prop.name;
}

void cuda_copy_to_device(int device, void* dst, const void* src, size_t bytes) {
  cudaStream_t s = cuda::stream(device);
  if (bytes < kStageMin) {
    // Small: CUDA stages pageable memory itself; the call returns once src may be reused.
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync host->device", device);
    return;
  }
  Staging& st = staging(device);
  std::lock_guard<std::mutex> lock(st.mu);
  if (!st.buf[0]) {
    for (int i = 0; i < 2; ++i) {
      cuda::check(cudaMallocHost(&st.buf[i], kStageChunk), "cudaMallocHost (staging)", device);
      cuda::check(cudaEventCreateWithFlags(&st.done[i], cudaEventDisableTiming), "cudaEventCreate", device);
    }
  }
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  for (size_t pos = 0; pos < bytes; pos += kStageChunk) {
    const size_t n = std::min(kStageChunk, bytes - pos);
    const int k = st.next;
    st.next ^= 1;
    cuda::check(cudaEventSynchronize(st.done[k]), "staging wait", device);  // chunk k is free again
    std::memcpy(st.buf[k], from + pos, n);
    cuda::check(cudaMemcpyAsync(to + pos, st.buf[k], n, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync host->device",
                device);
    cuda::check(cudaEventRecord(st.done[k], s), "cudaEventRecord", device);
  }
}

void cuda_copy_to_host(int device, void* dst, const void* src, size_t bytes) {
  cudaStream_t s = cuda::stream(device);
  cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync device->host", device);
  cuda::check(cudaStreamSynchronize(s), "cudaStreamSynchronize after device->host copy", device);
}

void cuda_copy_device_to_device(int dst_device, void* dst, int src_device, const void* src, size_t bytes) {
  if (dst_device == src_device) {
    cudaStream_t s = cuda::stream(dst_device);
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync device->device",
                dst_device);
    return;
  }
  // Between GPUs: the source's pending work must be done before the copy reads it, and the
  // copy must be done before the destination's later work reads dst.
  cuda::check(cudaStreamSynchronize(cuda::stream(src_device)), "cudaStreamSynchronize", src_device);
  cudaStream_t s = cuda::stream(dst_device);
  cuda::check(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, s), "cudaMemcpyPeerAsync", dst_device);
}

void cuda_synchronize(int device) {
  cuda::check(cudaStreamSynchronize(cuda::stream(device)), "cudaStreamSynchronize", device);
}

}  // namespace ocrt
