// Plain references for the elementwise kernels of runtime/cpu/elementwise.cpp, in float64: each
// unary op from its textbook formula (written apart from the kernels' own scalar functions, which
// take care of overflow and speed), each binary op on two numbers, and a binary op over two
// row-major arrays broadcast against each other the way PyTorch does, with explicit coordinates.
// tests/ops/test_elementwise.cpp checks the kernels (their strided, broadcast and vectorisable
// loops, and the OpenMP path) against these.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/backend.h"
#include "runtime/tensor.h"

namespace ocrt::reference {

// f(x) for a unary op (params as in UnaryParams: leaky_relu's slope a, pow_scalar's exponent a,
// clamp's [a, b]).
inline double unary(UnaryOp op, UnaryParams p, double x) {
  const double pi = 3.14159265358979323846;
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::exp: return std::exp(x);
    case UnaryOp::log: return std::log(x);
    case UnaryOp::sqrt: return std::sqrt(x);
    case UnaryOp::abs: return std::abs(x);
    case UnaryOp::sign: return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
    case UnaryOp::relu: return x > 0 ? x : 0.0;
    case UnaryOp::sigmoid: return 1 / (1 + std::exp(-x));
    case UnaryOp::tanh: return std::tanh(x);
    case UnaryOp::gelu_erf: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case UnaryOp::gelu_tanh: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x)));
    case UnaryOp::hardswish: return x * std::min(6.0, std::max(0.0, x + 3)) / 6;
    case UnaryOp::leaky_relu: return x > 0 ? x : p.a * x;
    case UnaryOp::pow_scalar: return std::pow(x, p.a);
    case UnaryOp::clamp: return std::isnan(x) ? x : std::min(p.b, std::max(p.a, x));
  }
  return x;
}

// x op y; comparisons give 1 or 0. maximum and minimum give NaN when either side is NaN, as
// torch.maximum and torch.minimum do.
inline double binary(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::add: return x + y;
    case BinaryOp::sub: return x - y;
    case BinaryOp::mul: return x * y;
    case BinaryOp::div: return x / y;
    case BinaryOp::pow: return std::pow(x, y);
    case BinaryOp::maximum: return std::isnan(x) || std::isnan(y) ? (std::isnan(x) ? x : y) : std::max(x, y);
    case BinaryOp::minimum: return std::isnan(x) || std::isnan(y) ? (std::isnan(x) ? x : y) : std::min(x, y);
    case BinaryOp::eq: return x == y;
    case BinaryOp::ne: return x != y;
    case BinaryOp::lt: return x < y;
    case BinaryOp::le: return x <= y;
    case BinaryOp::gt: return x > y;
    case BinaryOp::ge: return x >= y;
  }
  return 0;
}

// The shape two shapes broadcast to: aligned at the right, each dim equal or 1 on one side.
inline Shape broadcast_shape(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1, db = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

// a op b over the broadcast shape, row-major: every output coordinate read back into a and b
// (a size-1 or missing dim reads index 0).
inline std::vector<double> broadcast_binary(BinaryOp op, const std::vector<double>& a, const Shape& as,
                                            const std::vector<double>& b, const Shape& bs) {
  const Shape os = broadcast_shape(as, bs);
  int64_t n = 1;
  for (int64_t d : os) n *= d;
  std::vector<double> out((size_t)n);
  std::vector<int64_t> at(os.size());
  auto offset = [&](const Shape& s) {  // row-major offset of `at` in an operand of shape s
    int64_t off = 0;
    for (size_t d = 0; d < s.size(); ++d) {
      const int64_t c = at[os.size() - s.size() + d];
      off = off * s[d] + (s[d] == 1 ? 0 : c);
    }
    return off;
  };
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = i;
    for (size_t d = os.size(); d-- > 0;) {
      at[d] = r % os[d];
      r /= os[d];
    }
    out[(size_t)i] = binary(op, a[(size_t)offset(as)], b[(size_t)offset(bs)]);
  }
  return out;
}

}  // namespace ocrt::reference
