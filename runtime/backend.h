// The tensor kernel table: the computations every tensor needs, whatever model it serves, as one
// function pointer each (copy, fill, elementwise, reductions, matrix products, indexing, random
// numbers). This is the first of ocrt's two dispatch tables and the lower one: the runtime itself
// uses it (Tensor::full fills through it, the autograd engine adds gradients through it), and it
// uses nothing above runtime/. The layers' kernels (convolution, pooling, normalisation, LSTM,
// softmax, CTC) are the second table, in ops/backend.h.
//
// An op front-end (ops/*.cpp) checks its arguments, allocates outputs on the inputs' device,
// and calls kernel(device, &TensorBackend::x, "op"). The CPU table is filled in runtime/cpu/,
// the CUDA table in runtime/cuda/; an entry a backend lacks is null and calling it throws an
// error naming the op and the device.
//
// Kernel contract (both tables): inputs and outputs are already allocated, on the same device,
// with the right shapes and dtypes; outputs may be written in any order; inputs may have any
// strides (including 0 for broadcast) unless a comment says otherwise. Kernels do no autograd.
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

enum class ReduceKind { sum, mean, max, min };

struct TensorBackend {
  const char* name;

  // ---- memory (runtime/tensor_copy.cpp)
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

  // ---- reductions (ops/reduce.cpp)
  // out has x's rank with size 1 in every reduced dim (keepdim layout), contiguous.
  void (*reduce)(ReduceKind op, const Tensor& x, const Tensor& out);
  // max/min along one dim: values (x's dtype) and indices (i64), both keepdim, contiguous. The
  // first index wins a tie; a NaN wins over everything (as PyTorch).
  void (*arg_reduce)(bool is_max, const Tensor& x, int64_t dim, const Tensor& values, const Tensor& indices);
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
};

// The tensor table for a device's kind (validating the device); throws when the build lacks it.
const TensorBackend& tensor_backend(Device device);
#ifdef OCRT_HAVE_CUDA
// The CUDA table itself, without a GPU (building it only fills in function pointers): for the
// test that checks that every CPU entry has a CUDA counterpart.
const TensorBackend& cuda_tensor_backend();
#endif

// Looks up entry `field` of a table for `device`; throws "<op>: not implemented on <device>" if
// the backend lacks it. Shared by both tables (ops/backend.h adds the layer table's overload).
template <class Table, class F>
F checked_kernel(const Table& table, F Table::*field, const char* op, Device device) {
  F f = table.*field;
  if (!f) fail(op, ": not implemented on ", device.str(), " (the ", table.name, " backend has no kernel for it yet)");
  return f;
}

// The kernel `field` of `device`'s tensor table.
template <class F>
F kernel(Device device, F TensorBackend::*field, const char* op) {
  return checked_kernel(tensor_backend(device), field, op, device);
}

// Filled by each family's file in runtime/cpu/ (and runtime/cuda/ for the CUDA table).
void register_cpu_copy(TensorBackend& b);
void register_cpu_elementwise(TensorBackend& b);
void register_cpu_reduce(TensorBackend& b);
void register_cpu_linalg(TensorBackend& b);
void register_cpu_index(TensorBackend& b);
void register_cpu_random(TensorBackend& b);

void register_cuda_copy(TensorBackend& b);
void register_cuda_elementwise(TensorBackend& b);
void register_cuda_reduce(TensorBackend& b);
void register_cuda_linalg(TensorBackend& b);
void register_cuda_index(TensorBackend& b);
void register_cuda_random(TensorBackend& b);

}  // namespace ocrt
