// How kernels read strided tensors. These host-side decisions are the same on every backend, so
// they live here once: the CPU's loop driver (runtime/cpu/loops.h) and the CUDA kernels'
// offset calculator (runtime/cuda/common.cuh) both walk merge_dims' result, and the CPU's and
// the CUDA matrix products (runtime/cpu/linalg.cpp, runtime/cuda/linalg.cu) both read their
// operands as matrix_operand lays them out; softmax on both splits its input with around_dim.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace ocrt {

// The dims of N tensors of one shape (ts[0]'s), with dims of size 1 dropped and each dim merged
// into the one before it when every tensor steps over it exactly as far as one step of the dim
// before. A contiguous tensor becomes one dim of stride 1; a transposed one keeps two dims.
template <size_t N>
struct MergedDims {
  std::vector<int64_t> sizes;                   // empty: a single element
  std::vector<std::array<int64_t, N>> strides;  // strides[d][k]: tensor k's stride along dim d
};

template <size_t N>
MergedDims<N> merge_dims(const std::array<Tensor, N>& ts) {
  const Shape& shape = ts[0].shape();
  MergedDims<N> m;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    std::array<int64_t, N> st;
    for (size_t k = 0; k < N; ++k) st[k] = ts[k].strides()[d];
    if (!m.sizes.empty()) {
      bool merge = true;
      for (size_t k = 0; k < N; ++k) merge &= m.strides.back()[k] == st[k] * shape[d];
      if (merge) {
        m.sizes.back() *= shape[d];
        m.strides.back() = st;
        continue;
      }
    }
    m.sizes.push_back(shape[d]);
    m.strides.push_back(st);
  }
  return m;
}

// A contiguous x viewed as (outer, n, inner) around `dim`, for an op along that one dim (softmax
// on the CPU and CUDA): n = x's size along dim (1 for a 0-d x), inner = the product of the sizes
// after it, outer = the rest (0 when x is empty).
struct AroundDim {
  int64_t outer, n, inner;
};

inline AroundDim around_dim(const Tensor& x, int64_t dim) {
  AroundDim s;
  s.n = x.dim() == 0 ? 1 : x.shape()[(size_t)dim];
  s.inner = 1;
  for (int64_t d = dim + 1; d < x.dim(); ++d) s.inner *= x.shape()[(size_t)d];
  s.outer = s.n == 0 ? 0 : x.numel() / (s.n * s.inner);
  return s;
}

// How one operand x (B,R,C) of a batched matrix product is read, all of its matrices sharing
// the same inner strides:
//   - rows contiguous (column stride 1): a row-major matrix with leading dimension ld = the row
//     stride;
//   - columns contiguous (row stride 1), such as w.t() of a contiguous w: a column-major matrix
//     with ld = the column stride, so a transposed operand costs nothing;
//   - anything else is copied to a contiguous buffer first (keep_alive), once for the whole
//     operand; a broadcast operand (batch stride 0) is copied once, not once per batch index.
// The stride of a size-1 dim is never followed, so it does not disqualify a layout.
struct MatrixOperand {
  bool col_major = false;
  const void* data = nullptr;  // first element of matrix 0
  int64_t batch_stride = 0;    // in elements; 0 when every batch index reads the same matrix
  int64_t ld = 1;              // the outer stride in elements, at least 1
  Tensor keep_alive;           // the contiguous copy, when one was needed
};

inline MatrixOperand matrix_operand(const Tensor& x) {
  const int64_t R = x.size(1), C = x.size(2);
  const int64_t rs = x.stride(1), cs = x.stride(2);
  const bool rows_contiguous = (cs == 1 || C == 1) && (R == 1 || rs >= C);
  const bool cols_contiguous = (rs == 1 || R == 1) && (C == 1 || cs >= R);
  MatrixOperand op;
  if (rows_contiguous || cols_contiguous) {
    op.data = x.raw_data();
    op.batch_stride = x.size(0) == 1 ? 0 : x.stride(0);
    op.col_major = !rows_contiguous;
    op.ld = rows_contiguous ? (R == 1 ? std::max<int64_t>(C, 1) : rs) : (C == 1 ? std::max<int64_t>(R, 1) : cs);
    return op;
  }
  NoGradGuard no_grad;  // a kernel's copy, never part of a graph
  const bool broadcast = x.size(0) > 1 && x.stride(0) == 0;
  op.keep_alive = (broadcast ? x.narrow(0, 0, 1) : x).contiguous();
  op.data = op.keep_alive.raw_data();
  op.batch_stride = broadcast ? 0 : R * C;
  op.ld = std::max<int64_t>(C, 1);
  return op;
}

}  // namespace ocrt
