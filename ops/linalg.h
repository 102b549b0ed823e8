// Matrix products. matmul follows torch.matmul: 1-D operands are promoted to matrices and
// the added dim removed again, and leading (batch) dims broadcast. Transposed operands
// (e.g. x.matmul(w.t())) are read through their strides, not copied.
#pragma once
#include <memory>

#include "runtime/tensor.h"

namespace ocrt {

Tensor matmul(const Tensor& a, const Tensor& b);
// y = x @ weight^T + bias, weight (out_features, in_features), bias (out_features) or undefined;
// x (..., in_features) -> (..., out_features). Same as torch.nn.functional.linear.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// out (M, N) = a (M, K) @ b (K, N), written into out (contiguous, same dtype and device): the
// product of matmul for 2-D operands without a new tensor and without autograd (neither operand
// may require a gradient). For loops that make the same product shape many times, such as the
// LSTM's recurrent step in inference, where a fresh (N, 4H) tensor a step cost allocations.
void matmul_into(const Tensor& a, const Tensor& b, const Tensor& out);

// A right operand that many products on this thread will use, unchanged: the LSTM's recurrent
// weight at every time step, with `rows` rows of a each. While this lives, matmul(a, b) on this
// thread reads the 2-D float32 CPU matrix b packed once for ocrt's GEMM (runtime/cpu/gemm.h
// SgemmReusedB), which otherwise packs b at every call; the results are the same bits. Nothing
// where the GEMM would not pack b anyway (products of a few rows in float32 read it straight,
// unless a packing is kept: below), nor for other devices, dtypes or shapes (cuBLAS keeps no
// packing). Not a kernel. b must not change while this lives.
//
// With `keep` (outside autograd: inference), the packing is also kept between scopes, for b's
// memory, shape, strides and the precision, and matched by a fingerprint of b's values as the
// convolutions' kept weight forms are (ops/cpu/fingerprint.h): the next batch's scope on any
// thread finds it instead of packing b again. At most kMatmulKeptBytes of them in the process.
class MatmulRhsReuse {
 public:
  MatmulRhsReuse(const Tensor& b, int64_t rows, bool keep = false);
  // Whether a kept packing of b (`keep`) serves its products on this device and dtype, of any
  // number of rows. (Without `keep`, float32 products of 1-4 rows read b straight and nothing is
  // packed: b is then best contiguous.)
  static bool packs(const Tensor& b);
  ~MatmulRhsReuse();
  MatmulRhsReuse(const MatmulRhsReuse&) = delete;
  MatmulRhsReuse& operator=(const MatmulRhsReuse&) = delete;

 private:
  struct Packed;
  std::unique_ptr<Packed> packed_;
};
constexpr size_t kMatmulKeptBytes = size_t(64) << 20;

}  // namespace ocrt
