// Element types a tensor can hold. float32 is the working type for training and inference,
// float64 exists for gradient checks, the integer types hold indices, lengths and labels, and
// u8 holds bytes (images) and booleans (masks, comparison results). i8 holds the codes of an int8
// model file's quantized weights (models/int8.h) and nothing else: ops do not take it (they throw).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/error.h"

namespace ocrt {

enum class DType : uint8_t { f32, f64, i32, i64, u8, i8 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::i8: return 1;
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
    case DType::i8: return "int8";
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
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::i8; };

// Calls fn with a zero of the C++ type that `dtype` names (float for f32, double for f64, ...),
// so that a generic lambda can name that type as decltype of its argument:
//
//   dispatch_float(x.dtype(), "softmax", [&](auto zero) { softmax_typed<decltype(zero)>(x, y); });
//
// This is the one place where a runtime dtype becomes a compile-time type. dispatch_float
// accepts only float32/float64 and throws for anything else, naming `op`; dispatch_all accepts
// every dtype but i8, which only model files and models/int8.h read, as raw codes.
template <class Fn>
decltype(auto) dispatch_float(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    default: break;
  }
  throw Error(std::string(op) + ": expected a float32 or float64 tensor, got " + dtype_name(dtype));
}

template <class Fn>
decltype(auto) dispatch_all(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    case DType::i32: return fn(int32_t{});
    case DType::i64: return fn(int64_t{});
    case DType::u8: return fn(uint8_t{});
    case DType::i8: break;
  }
  throw Error(std::string(op) + ": " + dtype_name(dtype) + " tensors hold quantized weight codes only; this op does not take them");
}

}  // namespace ocrt
