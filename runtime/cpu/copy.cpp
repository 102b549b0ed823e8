// CPU copy (with dtype conversion, any strides) and fill.
#include <type_traits>

#include "runtime/backend.h"
#include "runtime/cpu/loops.h"

namespace ocrt {

namespace {

// Float to integer goes through int64, so that out-of-range values wrap (-12.0 -> uint8 244)
// instead of being undefined behaviour, which compilers and GPUs resolve differently.
// runtime/cuda/copy.cu converts the same way.
template <class D, class S>
inline D convert(S x) {
  if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>)
    return static_cast<D>(static_cast<int64_t>(x));
  else
    return static_cast<D>(x);
}

template <class S, class D>
void copy_typed(const Tensor& src, const Tensor& dst) {
  cpu::for_each_run<2>({dst, src}, [](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
    D* d = reinterpret_cast<D*>(p[0]);
    const S* x = reinterpret_cast<const S*>(p[1]);
    if (cpu::all_unit(s)) {
      for (int64_t i = 0; i < n; ++i) d[i] = convert<D>(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * s[0]] = convert<D>(x[i * s[1]]);
    }
  });
}

void cpu_copy(const Tensor& src, const Tensor& dst) {
  dispatch_all(src.dtype(), "copy", [&](auto src_zero) {
    dispatch_all(dst.dtype(), "copy",
                 [&](auto dst_zero) { copy_typed<decltype(src_zero), decltype(dst_zero)>(src, dst); });
  });
}

void cpu_fill(const Tensor& dst, double value) {
  dispatch_all(dst.dtype(), "fill", [&](auto zero) {
    using T = decltype(zero);
    const T v = static_cast<T>(value);
    cpu::for_each_run<1>({dst}, [v](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
      T* d = reinterpret_cast<T*>(p[0]);
      for (int64_t i = 0; i < n; ++i) d[i * s[0]] = v;
    });
  });
}

}  // namespace

void register_cpu_copy(TensorBackend& b) {
  b.copy = cpu_copy;
  b.fill = cpu_fill;
}

}  // namespace ocrt
