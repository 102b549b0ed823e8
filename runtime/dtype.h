// Element types a tensor can hold. float32 is the working type for training and inference,
// float64 exists for gradient checks, the integer types hold indices, lengths and labels, and
// u8 holds bytes (images) and booleans (masks, comparison results).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/error.h"

namespace ocrt {

enum class DType : uint8_t { f32, f64, i32, i64, u8 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
  }
  return "?";
}

inline bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }

// C++ type -> DType, for templates that read and write raw data.
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };

}  // namespace ocrt

// Runs BODY with `scalar_t` bound to the C++ type of DTYPE. The _FLOAT form accepts only
// float32/float64 and throws for anything else, naming OPNAME.
#define OCRT_DISPATCH_FLOAT(DTYPE, OPNAME, ...)                                        \
  [&] {                                                                                \
    switch (DTYPE) {                                                                   \
      case ::ocrt::DType::f32: { using scalar_t = float; return __VA_ARGS__(); }       \
      case ::ocrt::DType::f64: { using scalar_t = double; return __VA_ARGS__(); }      \
      default:                                                                         \
        throw ::ocrt::Error(std::string(OPNAME) + ": expected a float32 or float64 tensor, got " + \
                            ::ocrt::dtype_name(DTYPE));                                \
    }                                                                                  \
  }()

#define OCRT_DISPATCH_ALL(DTYPE, OPNAME, ...)                                          \
  [&] {                                                                                \
    switch (DTYPE) {                                                                   \
      case ::ocrt::DType::f32: { using scalar_t = float; return __VA_ARGS__(); }       \
      case ::ocrt::DType::f64: { using scalar_t = double; return __VA_ARGS__(); }      \
      case ::ocrt::DType::i32: { using scalar_t = int32_t; return __VA_ARGS__(); }     \
      case ::ocrt::DType::i64: { using scalar_t = int64_t; return __VA_ARGS__(); }     \
      case ::ocrt::DType::u8: { using scalar_t = uint8_t; return __VA_ARGS__(); }      \
    }                                                                                  \
    throw ::ocrt::Error(std::string(OPNAME) + ": unknown dtype");                     \
  }()
