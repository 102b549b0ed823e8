// The plain-loop reference for the CPU matrix product (runtime/cpu/linalg.cpp). It is what the
// fast Eigen path and the CUDA path are tested against, so it stays simple: three loops,
// strided reads, a float64 accumulator.
#pragma once
#include "runtime/tensor.h"

namespace ocrt::cpu {

// out[i] = a[i] @ b[i] for every batch index i.
//   a is (B,M,K), b is (B,K,N): any strides (batch stride 0 for a broadcast operand,
//   transposed inner strides); out is (B,M,N), contiguous. float32 or float64, all the same.
void matmul_reference(const Tensor& a, const Tensor& b, const Tensor& out);

}  // namespace ocrt::cpu
