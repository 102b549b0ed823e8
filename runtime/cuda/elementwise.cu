// CUDA elementwise kernels: unary math and activations (forward and derivative), binary
// arithmetic and comparisons, where; the counterpart of runtime/cpu/elementwise.cpp, whose scalar
// functions are the reference that the device functions below follow formula for formula.
// The op is a template parameter, so each op compiles to its own branch-free kernel; operands
// are walked through an OffsetCalc (any strides, broadcast by stride 0).
#include <cstdint>

#include "runtime/cuda/common.cuh"

namespace ocrt {

namespace {

constexpr double kSqrt2 = 1.4142135623730950488;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2Pi = 0.3989422804014327;
constexpr double kGeluCubic = 0.044715;

template <class T>
__device__ __forceinline__ T sigmoid_of(T x) {
  if (x >= 0) return T(1) / (T(1) + exp(-x));
  T e = exp(x);
  return e / (T(1) + e);
}

template <UnaryOp op, class T>
__device__ __forceinline__ T unary_f(UnaryParams p, T x) {
  if constexpr (op == UnaryOp::neg) return -x;
  if constexpr (op == UnaryOp::exp) return exp(x);
  if constexpr (op == UnaryOp::log) return log(x);
  if constexpr (op == UnaryOp::sqrt) return sqrt(x);
  if constexpr (op == UnaryOp::abs) return fabs(x);
  if constexpr (op == UnaryOp::sign) return T((x > 0) - (x < 0));
  if constexpr (op == UnaryOp::relu) return x > 0 ? x : T(0);
  if constexpr (op == UnaryOp::sigmoid) return sigmoid_of(x);
  if constexpr (op == UnaryOp::tanh) return tanh(x);
  if constexpr (op == UnaryOp::gelu_erf) return T(0.5) * x * (T(1) + erf(x / T(kSqrt2)));
  if constexpr (op == UnaryOp::gelu_tanh)
    return T(0.5) * x * (T(1) + tanh(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x)));
  if constexpr (op == UnaryOp::hardswish) return x <= T(-3) ? T(0) : x >= T(3) ? x : x * (x + T(3)) / T(6);
  if constexpr (op == UnaryOp::leaky_relu) return x > 0 ? x : T(p.a) * x;
  if constexpr (op == UnaryOp::pow_scalar) return pow(x, T(p.a));
  if constexpr (op == UnaryOp::clamp) return x < T(p.a) ? T(p.a) : x > T(p.b) ? T(p.b) : x;
  return x;
}

template <UnaryOp op, class T>
__device__ __forceinline__ T unary_df(UnaryParams p, T x, T y) {
  if constexpr (op == UnaryOp::neg) return T(-1);
  if constexpr (op == UnaryOp::exp) return y;
  if constexpr (op == UnaryOp::log) return T(1) / x;
  if constexpr (op == UnaryOp::sqrt) return T(0.5) / y;
  if constexpr (op == UnaryOp::abs) return T((x > 0) - (x < 0));
  if constexpr (op == UnaryOp::sign) return T(0);
  if constexpr (op == UnaryOp::relu) return x > 0 ? T(1) : T(0);
  if constexpr (op == UnaryOp::sigmoid) return y * (T(1) - y);
  if constexpr (op == UnaryOp::tanh) return T(1) - y * y;
  if constexpr (op == UnaryOp::gelu_erf)
    return T(0.5) * (T(1) + erf(x / T(kSqrt2))) + x * T(kInvSqrt2Pi) * exp(T(-0.5) * x * x);
  if constexpr (op == UnaryOp::gelu_tanh) {
    T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
    T t = tanh(inner);
    T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner;
  }
  if constexpr (op == UnaryOp::hardswish) return x < T(-3) ? T(0) : x <= T(3) ? x / T(3) + T(0.5) : T(1);
  if constexpr (op == UnaryOp::leaky_relu) return x > 0 ? T(1) : T(p.a);
  if constexpr (op == UnaryOp::pow_scalar) return p.a == 0 ? T(0) : T(p.a) * pow(x, T(p.a - 1));
  if constexpr (op == UnaryOp::clamp) return (x >= T(p.a) && x <= T(p.b)) ? T(1) : T(0);
  return T(0);
}

#define OCRT_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

template <UnaryOp op, class T>
__global__ void unary_kernel(UnaryParams p, const T* x, T* out, int64_t n, cuda::OffsetCalc<2> calc) {
  OCRT_GRID_LOOP(i, n) {
    int64_t off[2];
    calc.get(i, off);
    out[off[0]] = unary_f<op>(p, x[off[1]]);
  }
}

template <UnaryOp op, class T>
__global__ void unary_backward_kernel(UnaryParams p, const T* x, const T* y, const T* dy, T* dx, int64_t n,
                                      cuda::OffsetCalc<4> calc) {
  OCRT_GRID_LOOP(i, n) {
    int64_t off[4];
    calc.get(i, off);
    dx[off[0]] = dy[off[3]] * unary_df<op>(p, x[off[1]], y[off[2]]);
  }
}

// Calls f with the op as a compile-time constant (the CUDA twin of the CPU's with_unary_op).
template <class F>
void with_unary_op(UnaryOp op, F&& f) {
  using U = UnaryOp;
#define OCRT_CASE(name) case U::name: return f(std::integral_constant<U, U::name>{});
  switch (op) {
    OCRT_CASE(neg) OCRT_CASE(exp) OCRT_CASE(log) OCRT_CASE(sqrt) OCRT_CASE(abs) OCRT_CASE(sign)
    OCRT_CASE(relu) OCRT_CASE(sigmoid) OCRT_CASE(tanh) OCRT_CASE(gelu_tanh) OCRT_CASE(gelu_erf)
    OCRT_CASE(hardswish) OCRT_CASE(leaky_relu) OCRT_CASE(pow_scalar) OCRT_CASE(clamp)
  }
#undef OCRT_CASE
}

void cuda_unary(UnaryOp op, UnaryParams p, const Tensor& x, const Tensor& out) {
  cuda::DeviceScope ds(out);
  const int64_t n = out.numel();
  auto calc = cuda::make_offset_calc<2>({out, x}, "unary");
  dispatch_float(x.dtype(), "unary", [&](auto zero) {
    using T = decltype(zero);
    with_unary_op(op, [&](auto tag) {
      unary_kernel<decltype(tag)::value, T>
          <<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(p, x.data<T>(), out.data<T>(), n, calc);
    });
  });
  OCRT_CUDA_LAUNCH_CHECK("unary", ds.device);
}

void cuda_unary_backward(UnaryOp op, UnaryParams p, const Tensor& x, const Tensor& y, const Tensor& dy,
                         const Tensor& dx) {
  cuda::DeviceScope ds(dx);
  const int64_t n = dx.numel();
  auto calc = cuda::make_offset_calc<4>({dx, x, y, dy}, "unary_backward");
  dispatch_float(x.dtype(), "unary_backward", [&](auto zero) {
    using T = decltype(zero);
    with_unary_op(op, [&](auto tag) {
      unary_backward_kernel<decltype(tag)::value, T><<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(
          p, x.data<T>(), y.data<T>(), dy.data<T>(), dx.data<T>(), n, calc);
    });
  });
  OCRT_CUDA_LAUNCH_CHECK("unary_backward", ds.device);
}

// ---- binary

template <BinaryOp op, class T>
__device__ __forceinline__ auto binary_f(T x, T y) {
  if constexpr (op == BinaryOp::add) return T(x + y);
  else if constexpr (op == BinaryOp::sub) return T(x - y);
  else if constexpr (op == BinaryOp::mul) return T(x * y);
  else if constexpr (op == BinaryOp::div) return T(x / y);
  else if constexpr (op == BinaryOp::pow) {
    if constexpr (std::is_floating_point_v<T>) return T(pow(x, y));
    else return T(pow((double)x, (double)y));  // as std::pow on integers: computed in double
  }
  // NaN propagates, as in torch.maximum/minimum
  else if constexpr (op == BinaryOp::maximum) return (x != x || x > y) ? x : y;
  else if constexpr (op == BinaryOp::minimum) return (x != x || x < y) ? x : y;
  else if constexpr (op == BinaryOp::eq) return uint8_t(x == y);
  else if constexpr (op == BinaryOp::ne) return uint8_t(x != y);
  else if constexpr (op == BinaryOp::lt) return uint8_t(x < y);
  else if constexpr (op == BinaryOp::le) return uint8_t(x <= y);
  else if constexpr (op == BinaryOp::gt) return uint8_t(x > y);
  else return uint8_t(x >= y);
}

template <BinaryOp op, class T, class R>
__global__ void binary_kernel(const T* a, const T* b, R* out, int64_t n, cuda::OffsetCalc<3> calc) {
  OCRT_GRID_LOOP(i, n) {
    int64_t off[3];
    calc.get(i, off);
    out[off[0]] = binary_f<op>(a[off[1]], b[off[2]]);
  }
}

template <class F>
void with_binary_op(BinaryOp op, F&& f) {
  using B = BinaryOp;
#define OCRT_CASE(name) case B::name: return f(std::integral_constant<B, B::name>{});
  switch (op) {
    OCRT_CASE(add) OCRT_CASE(sub) OCRT_CASE(mul) OCRT_CASE(div) OCRT_CASE(pow) OCRT_CASE(maximum)
    OCRT_CASE(minimum) OCRT_CASE(eq) OCRT_CASE(ne) OCRT_CASE(lt) OCRT_CASE(le) OCRT_CASE(gt) OCRT_CASE(ge)
  }
#undef OCRT_CASE
}

void cuda_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  cuda::DeviceScope ds(out);
  const int64_t n = out.numel();
  auto calc = cuda::make_offset_calc<3>({out, a, b}, "binary");
  dispatch_all(a.dtype(), "binary", [&](auto zero) {
    using T = decltype(zero);
    with_binary_op(op, [&](auto tag) {
      constexpr BinaryOp kOp = decltype(tag)::value;
      using R = std::conditional_t<(kOp >= BinaryOp::eq), uint8_t, T>;
      binary_kernel<kOp, T, R>
          <<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(a.data<T>(), b.data<T>(), out.data<R>(), n, calc);
    });
  });
  OCRT_CUDA_LAUNCH_CHECK("binary", ds.device);
}

template <class T>
__global__ void where_kernel(const uint8_t* cond, const T* a, const T* b, T* out, int64_t n,
                             cuda::OffsetCalc<4> calc) {
  OCRT_GRID_LOOP(i, n) {
    int64_t off[4];
    calc.get(i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

void cuda_where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  cuda::DeviceScope ds(out);
  const int64_t n = out.numel();
  auto calc = cuda::make_offset_calc<4>({out, cond, a, b}, "where");
  dispatch_all(a.dtype(), "where", [&](auto zero) {
    using T = decltype(zero);
    where_kernel<T><<<cuda::grid_for(n), cuda::kThreads, 0, ds.stream>>>(cond.data<uint8_t>(), a.data<T>(),
                                                                         b.data<T>(), out.data<T>(), n, calc);
  });
  OCRT_CUDA_LAUNCH_CHECK("where", ds.device);
}

}  // namespace

void register_cuda_elementwise(TensorBackend& b) {
  b.unary = cuda_unary;
  b.unary_backward = cuda_unary_backward;
  b.binary = cuda_binary;
  b.where = cuda_where;
}

}  // namespace ocrt
