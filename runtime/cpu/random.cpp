// CPU random-number kernels. Element i (row-major) of `out` is a pure function of
// (seed, offset, i): its four Philox words are philox4x32_10(key = seed, counter_lo = i,
// counter_hi = offset), as runtime/rng.h prescribes, so any thread (or GPU lane) can compute
// any element and the result does not depend on the thread count. The CUDA kernels must turn
// the words into values exactly as below:
//
//   uniform, float32:  u = uint_to_unit_float(w0)                        24 bits, in [0, 1)
//   uniform, float64:  u = uints_to_unit_double_open0(w0, w1) - 2^-53    53 bits, in [0, 1)
//                      out = fma(hi - lo, u, lo), in out's type (fma: one rounding, everywhere)
//   normal (both dtypes, computed in double, then rounded to out's type):
//                      u1 = uints_to_unit_double_open0(w0, w1)           in (0, 1], so log is finite
//                      u2 = uints_to_unit_double_open0(w2, w3) - 2^-53   in [0, 1)
//                      z  = sqrt(-2 log u1) * cos(2 pi u2)               (Box-Muller, cosine branch)
//                      out = fma(stddev, z, mean)
// Box-Muller's second value (the sine branch) is dropped: one counter per element is what
// keeps element i independent of its neighbours.
#include <omp.h>

#include <cmath>

#include "runtime/backend.h"
#include "runtime/cpu/loops.h"
#include "runtime/rng.h"

namespace ocrt {

namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;  // 2^-53

// The values of element i, one function per distribution and dtype (the plain reference).
inline float uniform_value(const Philox4x32& r, float lo, float span) {
  return std::fma(span, uint_to_unit_float(r.v[0]), lo);
}
inline double uniform_value(const Philox4x32& r, double lo, double span) {
  return std::fma(span, uints_to_unit_double_open0(r.v[0], r.v[1]) - kTwoToMinus53, lo);
}
inline double standard_normal(const Philox4x32& r) {
  double u1 = uints_to_unit_double_open0(r.v[0], r.v[1]);
  double u2 = uints_to_unit_double_open0(r.v[2], r.v[3]) - kTwoToMinus53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

bool run_parallel(int64_t n) { return n >= cpu::kParallelGrain / 8 && omp_get_max_threads() > 1 && !omp_in_parallel(); }

template <class T>
void uniform_typed(const Tensor& out, uint64_t seed, uint64_t offset, double lo, double hi) {
  T* o = out.data<T>();
  const int64_t n = out.numel();
  const T lo_t = (T)lo, span = (T)(hi - lo);
#pragma omp parallel for schedule(static) if (run_parallel(n))
  for (int64_t i = 0; i < n; ++i) o[i] = uniform_value(philox4x32_10(seed, (uint64_t)i, offset), lo_t, span);
}

template <class T>
void normal_typed(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double stddev) {
  T* o = out.data<T>();
  const int64_t n = out.numel();
#pragma omp parallel for schedule(static) if (run_parallel(n))
  for (int64_t i = 0; i < n; ++i)
    o[i] = (T)std::fma(stddev, standard_normal(philox4x32_10(seed, (uint64_t)i, offset)), mean);
}

void cpu_uniform(const Tensor& out, uint64_t seed, uint64_t offset, double lo, double hi) {
  dispatch_float(out.dtype(), "uniform", [&](auto zero) { uniform_typed<decltype(zero)>(out, seed, offset, lo, hi); });
}

void cpu_normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double stddev) {
  dispatch_float(out.dtype(), "normal",
      [&](auto zero) { normal_typed<decltype(zero)>(out, seed, offset, mean, stddev); });
}

}  // namespace

void register_cpu_random(TensorBackend& b) {
  b.uniform = cpu_uniform;
  b.normal = cpu_normal;
}

}  // namespace ocrt
