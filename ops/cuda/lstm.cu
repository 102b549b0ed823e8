// The LSTM's pointwise time-step kernels on CUDA, mirroring ops/cpu/lstm.cpp (the reference,
// whose header lists the forward and backward formulas). The time loop and the GEMMs around
// these kernels live in the device-agnostic front-end ops/lstm.cpp (through matmul / cuBLAS);
// what is left per step is one fused elementwise pass, so each kernel is a grid-stride loop
// with one thread per (sample n, hidden unit j): it reads the four gates of unit j and writes
// everything that unit owns. Consecutive threads take consecutive j, so every access to a
// (N,H) or (N,4H) row is coalesced.
//
// Arithmetic is in T, as on the CPU, with the same sigmoid 1 / (1 + exp(-x)): stable at both
// ends (exp overflows to inf for very negative x and the quotient goes to 0, never NaN).
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/backend.h"
#include "runtime/cuda/common.cuh"

namespace ocrt {

namespace {

// Precise (not fast-math) exp and tanh for each type.
__device__ __forceinline__ float dev_exp(float v) { return expf(v); }
__device__ __forceinline__ double dev_exp(double v) { return exp(v); }
__device__ __forceinline__ float dev_tanh(float v) { return tanhf(v); }
__device__ __forceinline__ double dev_tanh(double v) { return tanh(v); }

template <class T>
__device__ __forceinline__ T sigmoid(T v) {
  return T(1) / (T(1) + dev_exp(-v));
}

// A (rows, cols) operand that may be strided in both dims (the contract promises contiguity
// for most of them; the gate inputs and the output column are views of larger tensors).
template <class T>
struct Strided {
  T* p;
  int64_t rs, cs;
  __device__ __forceinline__ T& at(int64_t n, int64_t j) const { return p[n * rs + j * cs]; }
};

template <class T>
Strided<T> strided(const Tensor& t) {
  return {t.data<T>(), t.stride(0), t.stride(1)};
}
template <class T>
Strided<const T> strided_in(const Tensor& t) {
  return {t.data<T>(), t.stride(0), t.stride(1)};
}

// One step forward. gx, gh (N,4H) pre-activations; h_prev, c_prev, act, h, c contiguous; out
// (N,H) any strides; active[n * active_stride] != 0 for rows still inside their sequence.
template <class T>
__global__ void lstm_cell_kernel(Strided<const T> gx, Strided<const T> gh, const T* __restrict__ h_prev,
                                 const T* __restrict__ c_prev, const uint8_t* __restrict__ active,
                                 int64_t active_stride, int64_t N, int64_t H, T* __restrict__ act, T* __restrict__ h,
                                 T* __restrict__ c, Strided<T> out) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < N * H; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = e / H, j = e - n * H;  // e = n * H + j indexes the contiguous (N,H) tensors
    T* a = act + n * 4 * H;
    if (!active[n * active_stride]) {  // past this sample's end: the state passes through, the output is 0
      a[j] = a[H + j] = a[2 * H + j] = a[3 * H + j] = T(0);
      h[e] = h_prev[e];
      c[e] = c_prev[e];
      out.at(n, j) = T(0);
      continue;
    }
    const T i = sigmoid(gx.at(n, j) + gh.at(n, j));
    const T f = sigmoid(gx.at(n, H + j) + gh.at(n, H + j));
    const T g = dev_tanh(gx.at(n, 2 * H + j) + gh.at(n, 2 * H + j));
    const T o = sigmoid(gx.at(n, 3 * H + j) + gh.at(n, 3 * H + j));
    const T cj = f * c_prev[e] + i * g;
    const T hj = o * dev_tanh(cj);
    a[j] = i, a[H + j] = f, a[2 * H + j] = g, a[3 * H + j] = o;
    c[e] = cj;
    h[e] = hj;
    out.at(n, j) = hj;
  }
}

// One step backward. act, dgates (N,4H) and c_prev, c, dh, dc, dc_prev, dh_carry (N,H)
// contiguous; dout (N,H) any strides, not read for inactive rows.
template <class T>
__global__ void lstm_cell_backward_kernel(const T* __restrict__ act, const T* __restrict__ c_prev,
                                          const T* __restrict__ c, const T* __restrict__ dh,
                                          const T* __restrict__ dh_more, Strided<const T> dout,
                                          const T* __restrict__ dc, const uint8_t* __restrict__ active,
                                          int64_t active_stride, int64_t N, int64_t H, T* __restrict__ dgates,
                                          T* __restrict__ dc_prev, T* __restrict__ dh_carry) {
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < N * H; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = e / H, j = e - n * H;
    T* d = dgates + n * 4 * H;
    const T dh_sum = dh_more ? dh[e] + dh_more[e] : dh[e];
    if (!active[n * active_stride]) {  // the state passed through this step untouched
      d[j] = d[H + j] = d[2 * H + j] = d[3 * H + j] = T(0);
      dc_prev[e] = dc[e];
      dh_carry[e] = dh_sum;
      continue;
    }
    const T* a = act + n * 4 * H;
    const T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
    const T tc = dev_tanh(c[e]);
    const T dh_total = dh_sum + dout.at(n, j);
    const T dct = dc[e] + dh_total * o * (T(1) - tc * tc);
    d[j] = dct * g * i * (T(1) - i);
    d[H + j] = dct * c_prev[e] * f * (T(1) - f);
    d[2 * H + j] = dct * i * (T(1) - g * g);
    d[3 * H + j] = dh_total * tc * o * (T(1) - o);
    dc_prev[e] = dct * f;
    dh_carry[e] = T(0);  // the caller adds dgates @ W_hh for active rows
  }
}

template <class T>
void cell_forward(const Tensor& gates_x, const Tensor& gates_h, const Tensor& h_prev, const Tensor& c_prev,
                  const Tensor& active, const Tensor& act, const Tensor& h, const Tensor& c, const Tensor& out) {
  const int64_t N = h.size(0), H = h.size(1);
  if (N * H == 0) return;
  cuda::DeviceScope scope(h);
  lstm_cell_kernel<T><<<cuda::grid_for(N * H), cuda::kThreads, 0, scope.stream>>>(
      strided_in<T>(gates_x), strided_in<T>(gates_h), h_prev.data<T>(), c_prev.data<T>(),
      active.data<uint8_t>(), active.stride(0), N, H, act.data<T>(), h.data<T>(), c.data<T>(), strided<T>(out));
  OCRT_CUDA_LAUNCH_CHECK("lstm", scope.device);
}

template <class T>
void cell_backward(const Tensor& act, const Tensor& c_prev, const Tensor& c, const Tensor& dh, const Tensor& dh_more,
                   const Tensor& dout, const Tensor& dc, const Tensor& active, const Tensor& dgates,
                   const Tensor& dc_prev, const Tensor& dh_carry) {
  const int64_t N = c.size(0), H = c.size(1);
  if (N * H == 0) return;
  cuda::DeviceScope scope(c);
  lstm_cell_backward_kernel<T><<<cuda::grid_for(N * H), cuda::kThreads, 0, scope.stream>>>(
      act.data<T>(), c_prev.data<T>(), c.data<T>(), dh.data<T>(), dh_more.defined() ? dh_more.data<T>() : nullptr,
      strided_in<T>(dout), dc.data<T>(),
      active.data<uint8_t>(), active.stride(0), N, H, dgates.data<T>(), dc_prev.data<T>(), dh_carry.data<T>());
  OCRT_CUDA_LAUNCH_CHECK("lstm backward", scope.device);
}

}  // namespace

void register_cuda_lstm(LayerBackend& b) {
  b.lstm_cell = [](const Tensor& gx, const Tensor& gh, const Tensor& hp, const Tensor& cp, const Tensor& active,
                   const Tensor& act, const Tensor& h, const Tensor& c, const Tensor& out) {
    dispatch_float(h.dtype(), "lstm",
        [&](auto zero) { cell_forward<decltype(zero)>(gx, gh, hp, cp, active, act, h, c, out); });
  };
  b.lstm_cell_backward = [](const Tensor& act, const Tensor& cp, const Tensor& c, const Tensor& dh, const Tensor& dhm,
                            const Tensor& dout, const Tensor& dc, const Tensor& active, const Tensor& dg,
                            const Tensor& dcp, const Tensor& carry) {
    dispatch_float(c.dtype(), "lstm backward",
        [&](auto zero) { cell_backward<decltype(zero)>(act, cp, c, dh, dhm, dout, dc, active, dg, dcp, carry); });
  };
}

}  // namespace ocrt
