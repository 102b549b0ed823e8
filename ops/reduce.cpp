// Reduction and softmax front-ends with their gradient rules.
//   sum:      dx = g broadcast back over the reduced dims
//   mean:     dx = g / count, broadcast back
//   amax/amin: g shared evenly by the elements equal to the result
//   max/min(dim): g goes to the index that won (the first one on ties, as PyTorch)
//   softmax:  dx = y * (g - sum(g * y))        log_softmax: dx = g - exp(y) * sum(g)
#include "ops/reduce.h"

#include <algorithm>

#include "ops/backend.h"
#include "ops/elementwise.h"
#include "runtime/autograd.h"

namespace ocrt {

namespace {

// Sorted, unique, wrapped dims; empty input means every dim.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim, op));
  std::sort(out.begin(), out.end());
  OCRT_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op, ": dim listed twice in ", shape_str(dims));
  return out;
}

Shape keepdim_shape(const Shape& shape, const std::vector<int64_t>& dims) {
  Shape s = shape;
  for (int64_t d : dims) s[d] = 1;
  return s;
}

Shape squeezed_shape(const Shape& shape, const std::vector<int64_t>& dims) {
  Shape s;
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), d)) s.push_back(shape[d]);
  return s;
}

// Runs the reduce kernel; returns the keepdim-shaped result (no autograd).
Tensor reduce_raw(ReduceKind op, const Tensor& x, const std::vector<int64_t>& dims, const char* name) {
  OCRT_CHECK(x.defined(), name, ": input is an undefined tensor");
  if (op == ReduceKind::mean) OCRT_CHECK(is_floating(x.dtype()), name, ": expected a float tensor, got ", dtype_name(x.dtype()));
  if (op == ReduceKind::max || op == ReduceKind::min)
    for (int64_t d : dims)
      OCRT_CHECK(x.shape()[d] > 0, name, ": cannot reduce over dim ", d, " of size 0 (shape ", shape_str(x.shape()), ")");
  Tensor out = Tensor::empty(keepdim_shape(x.shape(), dims), x.dtype(), x.device());
  if (out.numel() > 0) kernel(x.device(), &TensorBackend::reduce, name)(op, x, out);
  return out;
}

int64_t reduced_count(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[d];
  return n;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  auto dims = normalize_dims(dims_in, x.dim(), "sum");
  Tensor out = reduce_raw(ReduceKind::sum, x, dims, "sum");
  Shape keep = out.shape();
  if (!keepdim) out = out.detach().view(squeezed_shape(x.shape(), dims));
  if (any_requires_grad({x})) {
    Shape in_shape = x.shape();
    record("sum", {x}, {out}, [keep, in_shape](const TensorList& g) {
      return TensorList{g[0].reshape(keep).expand(in_shape)};
    });
  }
  return out;
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  auto dims = normalize_dims(dims_in, x.dim(), "mean");
  Tensor out = reduce_raw(ReduceKind::mean, x, dims, "mean");
  Shape keep = out.shape();
  if (!keepdim) out = out.detach().view(squeezed_shape(x.shape(), dims));
  if (any_requires_grad({x})) {
    Shape in_shape = x.shape();
    double count = (double)reduced_count(in_shape, dims);
    record("mean", {x}, {out}, [keep, in_shape, count](const TensorList& g) {
      return TensorList{div(g[0].reshape(keep), count).expand(in_shape)};
    });
  }
  return out;
}

Tensor sum(const Tensor& x) { return sum(x, {}, false); }
Tensor mean(const Tensor& x) { return mean(x, {}, false); }

static Tensor extremum_all(ReduceKind op, const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim, const char* name) {
  auto dims = normalize_dims(dims_in, x.dim(), name);
  Tensor out = reduce_raw(op, x, dims, name);
  Tensor out_keep = out;
  if (!keepdim) out = out.detach().view(squeezed_shape(x.shape(), dims));
  if (any_requires_grad({x})) {
    Tensor xs = x.detach(), ks = out_keep.detach();
    std::vector<int64_t> d = dims;
    record(name, {x}, {out}, [xs, ks, d](const TensorList& g) {
      Tensor mask = eq(xs, ks).to(xs.dtype());
      Tensor count = sum(mask, d, true);
      return TensorList{div(mul(mask, g[0].reshape(ks.shape())), count)};
    });
  }
  return out;
}

Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extremum_all(ReduceKind::max, x, dims, keepdim, "amax");
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extremum_all(ReduceKind::min, x, dims, keepdim, "amin");
}

static std::pair<Tensor, Tensor> arg_extremum(bool is_max, const Tensor& x, int64_t dim, bool keepdim, const char* name) {
  OCRT_CHECK(x.defined(), name, ": input is an undefined tensor");
  dim = wrap_dim(dim, x.dim(), name);
  if (x.dim() > 0)
    OCRT_CHECK(x.shape()[dim] > 0, name, ": cannot reduce over dim ", dim, " of size 0 (shape ", shape_str(x.shape()), ")");
  Shape keep = x.dim() > 0 ? keepdim_shape(x.shape(), {dim}) : Shape{};
  Tensor values = Tensor::empty(keep, x.dtype(), x.device());
  Tensor indices = Tensor::empty(keep, DType::i64, x.device());
  if (values.numel() > 0) kernel(x.device(), &TensorBackend::arg_reduce, name)(is_max, x, x.dim() > 0 ? dim : 0, values, indices);
  Tensor idx_keep = indices;
  if (!keepdim && x.dim() > 0) {
    Shape sq = squeezed_shape(x.shape(), {dim});
    values = values.view(sq);
    indices = indices.view(sq);
  }
  if (any_requires_grad({x})) {
    Shape in_shape = x.shape();
    record(name, {x}, {values}, [in_shape, idx_keep, dim, name](const TensorList& g) {
      Tensor dx = Tensor::zeros(in_shape, g[0].dtype(), g[0].device());
      Tensor gk = g[0].reshape(idx_keep.shape());
      if (gk.numel() > 0) kernel(dx.device(), &TensorBackend::scatter_add, name)(dx, dim, idx_keep, gk);
      return TensorList{dx};
    });
  }
  return {values, indices};
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) { return arg_extremum(true, x, dim, keepdim, "max"); }
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) { return arg_extremum(false, x, dim, keepdim, "min"); }
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard no_grad;
  return max(x, dim, keepdim).second;
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard no_grad;
  return min(x, dim, keepdim).second;
}

static Tensor softmax_impl(bool log, const Tensor& x, int64_t dim, const char* name) {
  OCRT_CHECK(x.defined(), name, ": input is an undefined tensor");
  OCRT_CHECK(is_floating(x.dtype()), name, ": expected a float tensor, got ", dtype_name(x.dtype()));
  dim = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), name);
  Tensor xc = x.detach().contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0) kernel(x.device(), &LayerBackend::softmax, name)(log, xc, dim, y);
  if (any_requires_grad({x})) {
    Tensor ys = y.detach();
    record(name, {x}, {y}, [log, ys, dim, name](const TensorList& g) {
      Tensor gc = g[0].contiguous();
      Tensor dx = Tensor::empty(ys.shape(), ys.dtype(), ys.device());
      if (dx.numel() > 0) kernel(ys.device(), &LayerBackend::softmax_backward, name)(log, ys, gc, dim, dx);
      return TensorList{dx};
    });
  }
  return y;
}

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(false, x, dim, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(true, x, dim, "log_softmax"); }

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  OCRT_CHECK(broadcast_shapes(shape, g.shape(), "sum_to") == g.shape(), "sum_to: shape ", shape_str(shape),
             " does not broadcast to ", shape_str(g.shape()));
  size_t lead = g.shape().size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < g.shape().size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1)) dims.push_back((int64_t)i);
  if (dims.empty()) return g.reshape(shape);
  return sum(g, dims, true).reshape(shape);
}

}  // namespace ocrt
