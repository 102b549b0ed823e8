// Joining and splitting: concat, stack, split, chunk. The single-tensor views are Tensor
// members (runtime/tensor_view.cpp).
#include "ops/shape.h"

#include "runtime/autograd.h"

namespace ocrt {

// ---- joining and splitting

Tensor concat(const std::vector<Tensor>& tensors, int64_t dim) {
  OCRT_CHECK(!tensors.empty(), "concat: expected at least one tensor");
  const Tensor& first = tensors[0];
  OCRT_CHECK(first.dim() > 0, "concat: zero-dim tensors cannot be concatenated (use stack)");
  dim = wrap_dim(dim, first.dim(), "concat");
  Shape out_shape = first.shape();
  out_shape[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    OCRT_CHECK(t.device() == first.device(), "concat: tensor ", i, " is on ", t.device().str(),
               " but tensor 0 is on ", first.device().str());
    OCRT_CHECK(t.dtype() == first.dtype(), "concat: tensor ", i, " is ", dtype_name(t.dtype()), " but tensor 0 is ",
               dtype_name(first.dtype()));
    bool ok = t.dim() == first.dim();
    for (int64_t d = 0; ok && d < t.dim(); ++d) ok = d == dim || t.shape()[d] == first.shape()[d];
    OCRT_CHECK(ok, "concat: tensor ", i, " has shape ", shape_str(t.shape()), ", which does not match tensor 0's ",
               shape_str(first.shape()), " outside dim ", dim);
    out_shape[dim] += t.shape()[dim];
  }
  Tensor out = Tensor::empty(out_shape, first.dtype(), first.device());
  {
    NoGradGuard no_grad;
    int64_t at = 0;
    for (const auto& t : tensors) {
      out.narrow(dim, at, t.shape()[dim]).copy_(t);
      at += t.shape()[dim];
    }
  }
  if (any_requires_grad(tensors)) {
    std::vector<int64_t> sizes;
    for (const auto& t : tensors) sizes.push_back(t.shape()[dim]);
    record("concat", tensors, {out}, [sizes, dim](const TensorList& g) {
      TensorList parts;
      int64_t at = 0;
      for (int64_t s : sizes) {
        parts.push_back(g[0].narrow(dim, at, s));
        at += s;
      }
      return parts;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  OCRT_CHECK(!tensors.empty(), "stack: expected at least one tensor");
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    OCRT_CHECK(tensors[i].shape() == tensors[0].shape(), "stack: tensor ", i, " has shape ",
               shape_str(tensors[i].shape()), " but tensor 0 has ", shape_str(tensors[0].shape()));
    parts.push_back(tensors[i].unsqueeze(dim));
  }
  return concat(parts, dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  dim = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    OCRT_CHECK(s >= 0, "split: negative size ", s);
    total += s;
  }
  OCRT_CHECK(total == x.shape()[dim], "split: sizes ", shape_str(sizes), " add up to ", total, ", but dim ", dim,
             " has size ", x.shape()[dim]);
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(dim, at, s));
    at += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  dim = wrap_dim(dim, x.dim(), "split");
  OCRT_CHECK(split_size >= 1, "split: split_size must be >= 1, got ", split_size);
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < x.shape()[dim]; at += split_size) sizes.push_back(std::min(split_size, x.shape()[dim] - at));
  if (sizes.empty()) sizes.push_back(0);
  return split(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  OCRT_CHECK(chunks >= 1, "chunk: chunks must be >= 1, got ", chunks);
  dim = wrap_dim(dim, x.dim(), "chunk");
  int64_t n = x.shape()[dim];
  return split(x, std::max<int64_t>(1, (n + chunks - 1) / chunks), dim);
}

}  // namespace ocrt
