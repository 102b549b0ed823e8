// CPU elementwise kernels: unary math and activations (forward and derivative), binary
// arithmetic and comparisons, where. Each op is a small scalar function; the loop driver
// (loops.h) walks strided tensors and takes a vectorisable path when they are contiguous.
// The scalar functions are also the plain reference for the CUDA kernels.
#include <cmath>
#include <type_traits>

#include "runtime/backend.h"
#include "runtime/cpu/loops.h"
#include "runtime/cpu/simd_math.h"
#include "runtime/cpu_isa.h"

namespace ocrt {

namespace {

// ---- the math, one scalar at a time

template <class T>
inline T sigmoid_of(T x) {
  // Never exp of a large positive number: stable for any x.
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

constexpr double kSqrt2 = 1.4142135623730950488;
constexpr double kSqrt2OverPi = 0.7978845608028654;   // sqrt(2/pi)
constexpr double kInvSqrt2Pi = 0.3989422804014327;    // 1/sqrt(2 pi)
constexpr double kGeluCubic = 0.044715;

template <class T>
inline T unary_f(UnaryOp op, UnaryParams p, T x) {
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::exp: return std::exp(x);
    case UnaryOp::log: return std::log(x);
    case UnaryOp::sqrt: return std::sqrt(x);
    case UnaryOp::abs: return std::abs(x);
    case UnaryOp::sign: return T((x > 0) - (x < 0));
    case UnaryOp::relu: return x > 0 ? x : T(0);
    case UnaryOp::sigmoid: return sigmoid_of(x);
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::gelu_erf:
      if constexpr (std::is_same_v<T, float>) return simd::gelu_erf(x);  // as the 8-lane path
      else return T(0.5) * x * (T(1) + std::erf(x / T(kSqrt2)));
    case UnaryOp::gelu_tanh: return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x)));
    case UnaryOp::hardswish: return x <= T(-3) ? T(0) : x >= T(3) ? x : x * (x + T(3)) / T(6);
    case UnaryOp::leaky_relu: return x > 0 ? x : T(p.a) * x;
    case UnaryOp::pow_scalar: return std::pow(x, T(p.a));
    case UnaryOp::clamp: return x < T(p.a) ? T(p.a) : x > T(p.b) ? T(p.b) : x;  // NaN passes through
  }
  return x;
}

// f'(x), given x and y = f(x).
template <class T>
inline T unary_df(UnaryOp op, UnaryParams p, T x, T y) {
  switch (op) {
    case UnaryOp::neg: return T(-1);
    case UnaryOp::exp: return y;
    case UnaryOp::log: return T(1) / x;
    case UnaryOp::sqrt: return T(0.5) / y;
    case UnaryOp::abs: return T((x > 0) - (x < 0));
    case UnaryOp::sign: return T(0);
    case UnaryOp::relu: return x > 0 ? T(1) : T(0);
    case UnaryOp::sigmoid: return y * (T(1) - y);
    case UnaryOp::tanh: return T(1) - y * y;
    case UnaryOp::gelu_erf:
      if constexpr (std::is_same_v<T, float>) return simd::gelu_erf_derivative(x);
      else return T(0.5) * (T(1) + std::erf(x / T(kSqrt2))) + x * T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
    case UnaryOp::gelu_tanh: {
      T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
      T t = std::tanh(inner);
      T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
      return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner;
    }
    case UnaryOp::hardswish: return x < T(-3) ? T(0) : x <= T(3) ? x / T(3) + T(0.5) : T(1);
    case UnaryOp::leaky_relu: return x > 0 ? T(1) : T(p.a);
    case UnaryOp::pow_scalar: return p.a == 0 ? T(0) : T(p.a) * std::pow(x, T(p.a - 1));
    case UnaryOp::clamp: return (x >= T(p.a) && x <= T(p.b)) ? T(1) : T(0);
  }
  return T(0);
}

// Calls f with the op as a compile-time constant, so that the switch inside unary_f folds
// away and each op gets its own vectorisable loop.
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

// ---- 8-lane paths for float32 GELU, whose scalar erf and exp took a fifth of svtr-lite's
// training step (bench/results/train-cpu.md). Same results as the scalar float functions up to
// exp8's rounding (simd_math.h).

#if defined(OCRT_SIMD_MATH)
OCRT_TARGET_AVX2 void gelu_erf_lanes(float* o, const float* a, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, simd::gelu_erf8(_mm256_loadu_ps(a + i)));
  for (; i < n; ++i) o[i] = simd::gelu_erf(a[i]);
}

OCRT_TARGET_AVX2 void gelu_erf_backward_lanes(float* d, const float* a, const float* g, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_mul_ps(_mm256_loadu_ps(g + i), simd::gelu_erf_derivative8(_mm256_loadu_ps(a + i))));
  for (; i < n; ++i) d[i] = g[i] * simd::gelu_erf_derivative(a[i]);
}
#endif

// Whether this CPU takes the 8-lane paths (which ops and types have one, the kernels say).
bool simd_lanes() {
#if defined(OCRT_SIMD_MATH)
  return cpu_isa() >= CpuIsa::avx2;
#else
  return false;
#endif
}

// ---- kernels

void cpu_unary(UnaryOp op, UnaryParams p, const Tensor& x, const Tensor& out) {
  dispatch_float(x.dtype(), "unary", [&](auto zero) {
    using T = decltype(zero);
    with_unary_op(op, [&](auto op_tag) {
      using OpT = decltype(op_tag);
      const bool lanes = simd_lanes();
      cpu::for_each_run<2>({out, x}, [p, lanes](std::array<char*, 2> ptr, std::array<int64_t, 2> s, int64_t n) {
        T* o = reinterpret_cast<T*>(ptr[0]);
        const T* a = reinterpret_cast<const T*>(ptr[1]);
        (void)lanes;
#if defined(OCRT_SIMD_MATH)
        // The casts only restate T (float here): clang checks this call for every T, the
        // lambda it sits in being no template of its own.
        if constexpr (std::is_same_v<T, float> && OpT::value == UnaryOp::gelu_erf)
          if (lanes && cpu::all_unit(s))
            return gelu_erf_lanes(reinterpret_cast<float*>(o), reinterpret_cast<const float*>(a), n);
#endif
        if (cpu::all_unit(s)) {
          for (int64_t i = 0; i < n; ++i) o[i] = unary_f(OpT::value, p, a[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * s[0]] = unary_f(OpT::value, p, a[i * s[1]]);
        }
      });
    });
  });
}

void cpu_unary_backward(UnaryOp op, UnaryParams p, const Tensor& x, const Tensor& y, const Tensor& dy,
                        const Tensor& dx) {
  dispatch_float(x.dtype(), "unary_backward", [&](auto zero) {
    using T = decltype(zero);
    with_unary_op(op, [&](auto op_tag) {
      using OpT = decltype(op_tag);
      const bool lanes = simd_lanes();
      cpu::for_each_run<4>({dx, x, y, dy}, [p, lanes](std::array<char*, 4> ptr, std::array<int64_t, 4> s, int64_t n) {
        T* d = reinterpret_cast<T*>(ptr[0]);
        const T* a = reinterpret_cast<const T*>(ptr[1]);
        const T* b = reinterpret_cast<const T*>(ptr[2]);
        const T* g = reinterpret_cast<const T*>(ptr[3]);
        (void)lanes;
#if defined(OCRT_SIMD_MATH)
        if constexpr (std::is_same_v<T, float> && OpT::value == UnaryOp::gelu_erf)  // casts: as cpu_unary's
          if (lanes && cpu::all_unit(s))
            return gelu_erf_backward_lanes(reinterpret_cast<float*>(d), reinterpret_cast<const float*>(a),
                                           reinterpret_cast<const float*>(g), n);
#endif
        if (cpu::all_unit(s)) {
          for (int64_t i = 0; i < n; ++i) d[i] = g[i] * unary_df(OpT::value, p, a[i], b[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) d[i * s[0]] = g[i * s[3]] * unary_df(OpT::value, p, a[i * s[1]], b[i * s[2]]);
        }
      });
    });
  });
}

template <class T, class R, class F>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  cpu::for_each_run<3>({out, a, b}, [f](std::array<char*, 3> ptr, std::array<int64_t, 3> s, int64_t n) {
    R* o = reinterpret_cast<R*>(ptr[0]);
    const T* x = reinterpret_cast<const T*>(ptr[1]);
    const T* y = reinterpret_cast<const T*>(ptr[2]);
    if (cpu::all_unit(s)) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {  // tensor op scalar, the next most common
      const T yv = y[0];
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = f(x[i * s[1]], y[i * s[2]]);
    }
  });
}

void cpu_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_all(a.dtype(), "binary", [&](auto zero) {
    using T = decltype(zero);
    switch (op) {
      case BinaryOp::add: return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(x + y); });
      case BinaryOp::sub: return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(x - y); });
      case BinaryOp::mul: return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(x * y); });
      case BinaryOp::div: return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(x / y); });
      case BinaryOp::pow: return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(std::pow(x, y)); });
      // NaN propagates, as in torch.maximum/minimum
      case BinaryOp::maximum:
        return binary_loop<T, T>(a, b, out, [](T x, T y) { return (x != x || x > y) ? x : y; });
      case BinaryOp::minimum:
        return binary_loop<T, T>(a, b, out, [](T x, T y) { return (x != x || x < y) ? x : y; });
      case BinaryOp::eq: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x == y); });
      case BinaryOp::ne: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x != y); });
      case BinaryOp::lt: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x < y); });
      case BinaryOp::le: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x <= y); });
      case BinaryOp::gt: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x > y); });
      case BinaryOp::ge: return binary_loop<T, uint8_t>(a, b, out, [](T x, T y) { return uint8_t(x >= y); });
    }
  });
}

void cpu_where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch_all(a.dtype(), "where", [&](auto zero) {
    using T = decltype(zero);
    cpu::for_each_run<4>({out, cond, a, b}, [](std::array<char*, 4> ptr, std::array<int64_t, 4> s, int64_t n) {
      T* o = reinterpret_cast<T*>(ptr[0]);
      const uint8_t* c = reinterpret_cast<const uint8_t*>(ptr[1]);
      const T* x = reinterpret_cast<const T*>(ptr[2]);
      const T* y = reinterpret_cast<const T*>(ptr[3]);
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = c[i * s[1]] ? x[i * s[2]] : y[i * s[3]];
    });
  });
}

}  // namespace

void register_cpu_elementwise(TensorBackend& b) {
  b.unary = cpu_unary;
  b.unary_backward = cpu_unary_backward;
  b.binary = cpu_binary;
  b.where = cpu_where;
}

}  // namespace ocrt
