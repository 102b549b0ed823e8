// The kernel table: every computation a device backend provides, as one function pointer
// each. This is the single dispatch point of ocrt: an op front-end (ops/*.cpp) checks its
// arguments, allocates outputs on the inputs' device, and calls kernel(device, &Backend::x).
// The CPU table is filled in ops/cpu/, the CUDA table in ops/cuda/; an entry a backend lacks
// is null and calling it throws an error naming the op and the device.
//
// Kernel contract: inputs and outputs are already allocated, on the same device, with the
// right shapes and dtypes; outputs may be written in any order; inputs may have any strides
// (including 0 for broadcast) unless a comment says otherwise. Kernels do no autograd.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace ocrt {

enum class UnaryOp {
  neg, exp, log, sqrt, abs, sign,
  relu, sigmoid, tanh, gelu_tanh, gelu_erf, hardswish,
  leaky_relu,   // a = negative slope
  pow_scalar,   // x^a
  clamp,        // clamp to [a, b]
};
// Parameters of the unary ops that take them (see UnaryOp).
struct UnaryParams {
  double a = 0, b = 0;
};

enum class BinaryOp { add, sub, mul, div, pow, maximum, minimum, eq, ne, lt, le, gt, ge };
inline bool is_comparison(BinaryOp op) { return op >= BinaryOp::eq; }

enum class ReduceOp { sum, mean, max, min };

struct Backend {
  const char* name;

  // ---- memory (ops/copy.cpp)
  // dst[i] = src[i] with dtype conversion; src has dst's shape (maybe via stride-0 dims).
  void (*copy)(const Tensor& src, const Tensor& dst);
  void (*fill)(const Tensor& dst, double value);

  // ---- elementwise (ops/elementwise.cpp). a, b, cond are already broadcast to out's shape.
  void (*unary)(UnaryOp op, UnaryParams p, const Tensor& x, const Tensor& out);
  // dx = dy * f'(x); y = f(x) is passed because some derivatives are cheaper from it.
  void (*unary_backward)(UnaryOp op, UnaryParams p, const Tensor& x, const Tensor& y, const Tensor& dy,
                         const Tensor& dx);
  void (*binary)(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);  // comparisons: out u8
  void (*where)(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);  // cond u8

  // ---- reductions and softmax (ops/reduce.cpp)
  // out has x's rank with size 1 in every reduced dim (keepdim layout), contiguous.
  void (*reduce)(ReduceOp op, const Tensor& x, const Tensor& out);
  // max/min along one dim: values (x's dtype) and indices (i64), both keepdim, contiguous.
  void (*arg_reduce)(bool is_max, const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices);
  // y = softmax(x) or log_softmax(x) along dim; x, y contiguous.
  void (*softmax)(bool log, const Tensor& x, int64_t dim, const Tensor& y);
  void (*softmax_backward)(bool log, const Tensor& y, const Tensor& dy, int64_t dim, const Tensor& dx);

  // ---- linear algebra (ops/linalg.cpp)
  // out[b] = a[b] @ b[b]: a (B,M,K), b (B,K,N), out (B,M,N) contiguous. a and b may have any
  // strides, including batch stride 0 for a broadcast operand and transposed inner strides.
  void (*matmul)(const Tensor& a, const Tensor& b, const Tensor& out);

  // ---- indexing (ops/index.cpp). index is i64, contiguous.
  // out = x.index_select(dim, index); index_add: dst.narrow(dim, index[i], 1) += src.narrow(dim, i, 1)
  void (*index_select)(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
  void (*index_add)(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src);
  // out[..i..] = x[..index[..i..]..] along dim; scatter_add is its adjoint (dst += at index).
  void (*gather)(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
  void (*scatter_add)(const Tensor& dst, int64_t dim, const Tensor& index, const Tensor& src);

  // ---- random numbers (ops/random.cpp): element i (row-major) of `out` is a pure function
  // of (seed, offset, i) through Philox, identical on every backend. out contiguous.
  void (*uniform)(const Tensor& out, uint64_t seed, uint64_t offset, double lo, double hi);
  void (*normal)(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double stddev);

  // ---- convolution and pooling (ops/conv.cpp, ops/pool.cpp)
  // [conv: begin]
  // [conv: end]

  // ---- normalisation (ops/norm.cpp)
  // [norm: begin]
  // [norm: end]

  // ---- recurrent layers (ops/rnn.cpp)
  // [rnn: begin]
  // [rnn: end]

  // ---- attention (ops/attention.cpp)
  // [attention: begin]
  // [attention: end]

  // ---- CTC loss (ops/ctc.cpp)
  // [ctc: begin]
  // [ctc: end]
};

// The table for a device's kind (validating the device); throws when the build lacks it.
const Backend& backend_for(Device device);

// The kernel `field` of `device`'s backend; throws "<op>: not implemented on <device>" if the
// backend lacks it.
template <class F>
F kernel(Device device, F Backend::*field, const char* op) {
  const Backend& b = backend_for(device);
  F f = b.*field;
  if (!f) fail(op, ": not implemented on ", device.str(), " (the ", b.name, " backend has no kernel for it yet)");
  return f;
}

// Filled by each family's file in ops/cpu/ (and ops/cuda/ for the CUDA table).
void register_cpu_copy(Backend& b);
void register_cpu_elementwise(Backend& b);
void register_cpu_reduce(Backend& b);
void register_cpu_linalg(Backend& b);
void register_cpu_index(Backend& b);
void register_cpu_random(Backend& b);
// [conv: register begin]
// [conv: register end]
// [norm: register begin]
// [norm: register end]
// [rnn: register begin]
// [rnn: register end]
// [attention: register begin]
// [attention: register end]
// [ctc: register begin]
// [ctc: register end]

}  // namespace ocrt
