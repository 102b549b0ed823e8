// Plain-loop references for the indexing kernels of runtime/cpu/index.cpp, on row-major host
// vectors in float64: index_select, index_add (its gradient) and gather, each written from its
// definition with explicit coordinates. tests/ops/test_index.cpp checks the kernels against them
// on many shapes, dims, strided operands, repeated indices and both thread regimes.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace ocrt::reference {

// The product of shape[from..to).
inline int64_t dims_product(const Shape& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= s[i];
  return n;
}

// x (outer, D, inner) -> out (outer, n, inner)
inline std::vector<double> index_select(const std::vector<double>& x, const Shape& shape, int64_t dim,
                                     const std::vector<int64_t>& idx) {
  if (dim < 0) dim += (int64_t)shape.size();
  const int64_t outer = dims_product(shape, 0, (size_t)dim), D = shape[(size_t)dim];
  const int64_t inner = dims_product(shape, (size_t)dim + 1, shape.size()), n = (int64_t)idx.size();
  std::vector<double> out((size_t)(outer * n * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < inner; ++k) out[(size_t)((o * n + j) * inner + k)] = x[(size_t)((o * D + idx[(size_t)j]) * inner + k)];
  return out;
}

// dst (outer, D, inner) += src (outer, n, inner) at idx, serially in j.
inline std::vector<double> index_add(std::vector<double> dst, const Shape& shape, int64_t dim, const std::vector<int64_t>& idx,
                                  const std::vector<double>& src) {
  const int64_t outer = dims_product(shape, 0, (size_t)dim), D = shape[(size_t)dim];
  const int64_t inner = dims_product(shape, (size_t)dim + 1, shape.size()), n = (int64_t)idx.size();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < inner; ++k) dst[(size_t)((o * D + idx[(size_t)j]) * inner + k)] += src[(size_t)((o * n + j) * inner + k)];
  return dst;
}

// out[c] = x[c with c[dim] = idx[c]] for every coordinate c of the index.
inline std::vector<double> gather(const std::vector<double>& x, const Shape& xshape, int64_t dim, const std::vector<int64_t>& idx,
                               const Shape& ishape) {
  if (dim < 0) dim += (int64_t)xshape.size();
  std::vector<double> out(idx.size());
  for (size_t p = 0; p < idx.size(); ++p) {
    Shape c(ishape.size());
    int64_t r = (int64_t)p;
    for (int64_t d = (int64_t)ishape.size() - 1; d >= 0; --d) {
      c[(size_t)d] = r % ishape[(size_t)d];
      r /= ishape[(size_t)d];
    }
    c[(size_t)dim] = idx[p];
    int64_t off = 0;
    for (size_t d = 0; d < xshape.size(); ++d) off = off * xshape[d] + c[d];
    out[p] = x[(size_t)off];
  }
  return out;
}

}  // namespace ocrt::reference
