// Indexing front-ends: argument checks, index preparation (int32 -> int64, contiguous, range
// check), output allocation, dispatch, and the gradient rules:
//   index_select(x, dim, index):  dx = zeros, then dx.index_add(dim, index, g)
//   gather(x, dim, index):        dx = zeros, then dx.scatter_add(dim, index, g)
//   embedding(w, indices, pad):   dw = zeros, then dw.index_add(0, indices, g rows); row pad zeroed
// Repeated indices are allowed everywhere: their gradients add up.
#include "ops/index.h"

#include <string>

#include "runtime/backend.h"
#include "runtime/autograd.h"

namespace ocrt {

namespace {

// Checks an index tensor and returns it as contiguous int64 on x's device, without autograd.
Tensor prepare_index(const Tensor& index, const Tensor& x, const char* op) {
  OCRT_CHECK(index.defined(), op, ": index is an undefined tensor");
  OCRT_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op,
             ": index must be an int64 or int32 tensor, got ", dtype_name(index.dtype()));
  OCRT_CHECK(index.device() == x.device(), op, ": index is on ", index.device().str(), " but the input is on ",
             x.device().str(), "; move one with .to(device)");
  return index.detach().to(DType::i64).contiguous();
}

// Position of flat element i of a tensor of `shape`: "3" for a 1-D tensor, "[1, 2]" otherwise.
std::string position_str(int64_t i, const Shape& shape) {
  if (shape.size() <= 1) return std::to_string(i);
  Shape coord(shape.size());
  for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
    coord[d] = i % shape[d];
    i /= shape[d];
  }
  return shape_str(coord);
}

// Every index must lie in [0, size). The first one that does not is reported with its
// position and value. CPU indices are read in place; on another device this copies the
// index to the host (a synchronisation, the price of a clear error).
void check_range(const Tensor& index, int64_t size, int64_t dim, const char* op) {
  std::vector<int64_t> host;
  const int64_t* p;
  if (index.device().is_cpu()) {
    p = index.data<int64_t>();
  } else {
    host = index.to_vector<int64_t>();
    p = host.data();
  }
  const int64_t n = index.numel();
  for (int64_t i = 0; i < n; ++i)
    if (p[i] < 0 || p[i] >= size)
      fail(op, ": index ", p[i], " at position ", position_str(i, index.shape()), " is out of range for dim ", dim,
           " of size ", size);
}

// index_select without autograd: x (.., D, ..), idx int64 (n) -> out (.., n, ..).
Tensor index_select_raw(const Tensor& x, int64_t dim, const Tensor& idx, const char* op) {
  Shape s = x.shape();
  s[dim] = idx.numel();
  Tensor out = Tensor::empty(s, x.dtype(), x.device());
  if (out.numel() > 0) kernel(x.device(), &TensorBackend::index_select, op)(x.detach(), dim, idx, out);
  return out;
}

// The adjoint of index_select: zeros of `shape` with g's slices added at idx along dim.
Tensor index_add_into_zeros(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& g, const char* op) {
  Tensor dx = Tensor::zeros(shape, g.dtype(), g.device());
  if (g.numel() > 0) kernel(g.device(), &TensorBackend::index_add, op)(dx, dim, idx, g);
  return dx;
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  OCRT_CHECK(x.defined(), "index_select: input is an undefined tensor");
  OCRT_CHECK(x.dim() >= 1, "index_select: expected an input with at least one dim, got a scalar");
  dim = wrap_dim(dim, x.dim(), "index_select");
  Tensor idx = prepare_index(index, x, "index_select");
  OCRT_CHECK(idx.dim() == 1, "index_select: index must be 1-D, got shape ", shape_str(idx.shape()));
  check_range(idx, x.shape()[dim], dim, "index_select");

  Tensor out = index_select_raw(x, dim, idx, "index_select");
  if (any_requires_grad({x})) {
    Shape in_shape = x.shape();
    record("index_select", {x}, {out}, [in_shape, dim, idx](const TensorList& g) {
      return TensorList{index_add_into_zeros(in_shape, dim, idx, g[0], "index_select backward")};
    });
  }
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  OCRT_CHECK(x.defined(), "gather: input is an undefined tensor");
  OCRT_CHECK(x.dim() >= 1, "gather: expected an input with at least one dim, got a scalar");
  dim = wrap_dim(dim, x.dim(), "gather");
  Tensor idx = prepare_index(index, x, "gather");
  OCRT_CHECK(idx.dim() == x.dim(), "gather: index must have the input's rank (", x.dim(), "), got shape ",
             shape_str(idx.shape()), " for an input of shape ", shape_str(x.shape()));
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim)
      OCRT_CHECK(idx.shape()[d] <= x.shape()[d], "gather: index of shape ", shape_str(idx.shape()),
                 " is larger than the input's shape ", shape_str(x.shape()), " in dim ", d,
                 " (only dim ", dim, ", the gathered one, may differ)");
  check_range(idx, x.shape()[dim], dim, "gather");

  Tensor out = Tensor::empty(idx.shape(), x.dtype(), x.device());
  if (out.numel() > 0) kernel(x.device(), &TensorBackend::gather, "gather")(x.detach(), dim, idx, out);
  if (any_requires_grad({x})) {
    Shape in_shape = x.shape();
    record("gather", {x}, {out}, [in_shape, dim, idx](const TensorList& g) {
      Tensor dx = Tensor::zeros(in_shape, g[0].dtype(), g[0].device());
      if (g[0].numel() > 0) kernel(dx.device(), &TensorBackend::scatter_add, "gather backward")(dx, dim, idx, g[0]);
      return TensorList{dx};
    });
  }
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  OCRT_CHECK(weight.defined(), "embedding: weight is an undefined tensor");
  OCRT_CHECK(weight.dim() == 2, "embedding: weight must be 2-D (num_embeddings, dim), got shape ",
             shape_str(weight.shape()));
  const int64_t num = weight.shape()[0], width = weight.shape()[1];
  OCRT_CHECK(padding_idx < num, "embedding: padding_idx ", padding_idx, " is out of range for ", num, " embeddings");
  Tensor idx = prepare_index(indices, weight, "embedding");
  check_range(idx, num, 0, "embedding");

  Tensor flat = idx.view({idx.numel()});
  Shape out_shape = idx.shape();
  out_shape.push_back(width);
  Tensor out = index_select_raw(weight, 0, flat, "embedding").view(out_shape);
  if (any_requires_grad({weight})) {
    Shape w_shape = weight.shape();
    record("embedding", {weight}, {out}, [w_shape, flat, padding_idx](const TensorList& g) {
      Tensor rows = g[0].reshape({flat.numel(), w_shape[1]});
      Tensor dw = index_add_into_zeros(w_shape, 0, flat, rows, "embedding backward");
      if (padding_idx >= 0) dw.select(0, padding_idx).zero_();  // the padding row learns nothing
      return TensorList{dw};
    });
  }
  return out;
}

}  // namespace ocrt
