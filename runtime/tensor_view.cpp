// Views of one tensor: view, reshape, flatten, permute, transpose, slice, narrow, select,
// expand, squeeze, unsqueeze (Tensor members, declared in runtime/tensor.h). A view shares
// storage with its input; its backward maps the gradient back onto the input's shape: reshape
// back, permute back, pad with zeros (narrow/select), or sum over the broadcast dims (expand).
#include <algorithm>
#include <numeric>
#include <optional>

#include "runtime/autograd.h"
#include "runtime/backend.h"

namespace ocrt {

namespace {

// Resolves one -1 entry and checks the element count.
Shape infer_shape(const Shape& requested, int64_t numel, const char* op, const Shape& from) {
  Shape out = requested;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      OCRT_CHECK(infer_at < 0, op, ": only one dim can be -1, got ", shape_str(requested));
      infer_at = (int64_t)i;
    } else {
      OCRT_CHECK(out[i] >= 0, op, ": invalid size ", out[i], " in ", shape_str(requested));
      known *= out[i];
    }
  }
  if (infer_at >= 0) {
    OCRT_CHECK(known > 0 && numel % known == 0, op, ": cannot infer -1 in ", shape_str(requested),
               " for a tensor of shape ", shape_str(from), " (", numel, " elements)");
    out[(size_t)infer_at] = numel / known;
  }
  OCRT_CHECK(numel_of(out) == numel, op, ": shape ", shape_str(requested), " is invalid for a tensor of shape ",
             shape_str(from), " (", numel, " elements)");
  return out;
}

// Strides that let `new_shape` view memory laid out as (old_shape, old_strides), if any:
// walk both shapes from the innermost dim, in chunks of old dims that are contiguous with
// each other, and lay the new dims over each chunk.
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& new_shape) {
  if (old_shape.empty() || numel_of(old_shape) == 0) return contiguous_strides(new_shape);
  Shape new_strides(new_shape.size(), 1);
  int64_t view_d = (int64_t)new_shape.size() - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = (int64_t)old_shape.size() - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    bool chunk_ends = d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
      new_strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= new_shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_base_stride = old_strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

// Records a view whose backward reshapes the gradient back to the input's shape.
Tensor reshaped_view(const Tensor& x, const Shape& shape, const Shape& strides, const char* name) {
  Tensor out = make_view(x, shape, strides, x.offset());
  if (any_requires_grad({x})) {
    Shape in_shape = x.shape();
    record(name, {x}, {out}, [in_shape](const TensorList& g) { return TensorList{g[0].reshape(in_shape)}; });
  }
  return out;
}

// Records a view that selects part of x (slice, narrow, select). Its backward makes a zero
// tensor of x's shape, applies the same selection to it and writes the gradient there.
template <class Reapply>
Tensor part_view(const Tensor& x, Shape shape, Shape strides, int64_t offset, const char* name, Reapply reapply) {
  Tensor out = make_view(x, std::move(shape), std::move(strides), offset);
  if (any_requires_grad({x})) {
    Shape in_shape = x.shape();
    record(name, {x}, {out}, [in_shape, reapply](const TensorList& g) {
      Tensor dx = Tensor::zeros(in_shape, g[0].dtype(), g[0].device());
      reapply(dx).copy_(g[0]);
      return TensorList{dx};
    });
  }
  return out;
}

// The gradient of expand: g summed over the dims that expand broadcast, in `shape`. It calls
// the reduce kernel itself: the runtime does not use the differentiable sum() of ops/reduce.h.
Tensor sum_to_shape(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const size_t lead = g.shape().size() - shape.size();
  Shape kept = g.shape();  // keepdim layout: size 1 in every summed dim
  for (size_t i = 0; i < kept.size(); ++i)
    if (i < lead || shape[i - lead] == 1) kept[i] = 1;
  Tensor out = Tensor::empty(kept, g.dtype(), g.device());
  if (out.numel() > 0) kernel(g.device(), &TensorBackend::reduce, "expand (backward)")(ReduceKind::sum, g, out);
  return out.reshape(shape);
}

}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  Shape shape_ = infer_shape(requested, numel(), "view", shape());
  auto strides_ = view_strides(shape(), strides(), shape_);
  OCRT_CHECK(strides_.has_value(), "view: cannot view a tensor of shape ", shape_str(shape()), " and strides ",
             shape_str(strides()), " as ", shape_str(shape_), " without a copy; use reshape()");
  return reshaped_view(*this, shape_, *strides_, "view");
}

Tensor Tensor::reshape(const Shape& requested) const {
  Shape shape_ = infer_shape(requested, numel(), "reshape", shape());
  auto strides_ = view_strides(shape(), strides(), shape_);
  if (strides_) return reshaped_view(*this, shape_, *strides_, "reshape");
  return contiguous().view(shape_);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  OCRT_CHECK(s <= e, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape out;
  for (int64_t i = 0; i < s; ++i) out.push_back(shape()[i]);
  int64_t n = 1;
  for (int64_t i = s; i <= e; ++i) n *= shape()[i];
  out.push_back(n);
  for (int64_t i = e + 1; i < dim(); ++i) out.push_back(shape()[i]);
  return reshape(out);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  OCRT_CHECK((int64_t)dims.size() == dim(), "permute: got ", dims.size(), " dims for a tensor of shape ",
             shape_str(shape()));
  std::vector<int64_t> perm(dims.size());
  std::vector<bool> used(dims.size(), false);
  Shape s(dims.size()), st(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    OCRT_CHECK(!used[d], "permute: dim ", d, " appears twice in ", shape_str(dims));
    used[d] = true;
    perm[i] = d;
    s[i] = shape()[d];
    st[i] = strides()[d];
  }
  Tensor out = make_view(*this, s, st, offset());
  if (any_requires_grad({*this})) {
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = (int64_t)i;
    record("permute", {*this}, {out}, [inverse](const TensorList& g) { return TensorList{g[0].permute(inverse)}; });
  }
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  std::vector<int64_t> p(dim());
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[wrap_dim(d0, dim(), "transpose")], p[wrap_dim(d1, dim(), "transpose")]);
  return permute(p);
}

Tensor Tensor::t() const {
  OCRT_CHECK(dim() == 2, "t: expected a 2-D tensor, got shape ", shape_str(shape()));
  return transpose(0, 1);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  OCRT_CHECK(step >= 1, "slice: step must be >= 1, got ", step);
  int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape(), st = strides();
  s[d] = (end - start + step - 1) / step;
  st[d] *= step;
  return part_view(*this, s, st, offset() + start * strides()[d], "slice",
                   [=](const Tensor& t) { return t.slice(d, start, end, step); });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  OCRT_CHECK(start >= 0 && length >= 0 && start + length <= shape()[d], "narrow: range [", start, ", ",
             start + length, ") is outside dim ", d, " of size ", shape()[d], " (shape ", shape_str(shape()), ")");
  Shape s = shape();
  s[d] = length;
  return part_view(*this, s, strides(), offset() + start * strides()[d], "narrow",
                   [=](const Tensor& t) { return t.narrow(d, start, length); });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  int64_t n = shape()[d];
  OCRT_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dim ", d, " of size ", n);
  if (index < 0) index += n;
  Shape s = shape(), st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return part_view(*this, s, st, offset() + index * strides()[d], "select",
                   [=](const Tensor& t) { return t.select(d, index); });
}

Tensor Tensor::expand(const Shape& target) const {
  OCRT_CHECK((int64_t)target.size() >= dim(), "expand: cannot expand shape ", shape_str(shape()), " to ",
             shape_str(target), " (fewer dims)");
  size_t lead = target.size() - (size_t)dim();
  Shape s(target.size()), st(target.size());
  for (size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      OCRT_CHECK(target[i] >= 0, "expand: size -1 not allowed for a new leading dim in ", shape_str(target));
      s[i] = target[i];
      st[i] = 0;
      continue;
    }
    int64_t have = shape()[i - lead];
    int64_t want = target[i] == -1 ? have : target[i];
    if (have == want) {
      s[i] = have;
      st[i] = strides()[i - lead];
    } else {
      OCRT_CHECK(have == 1, "expand: cannot expand shape ", shape_str(shape()), " to ", shape_str(target),
                 " (dim ", i, " has size ", have, ", only size-1 dims can be expanded)");
      s[i] = want;
      st[i] = 0;
    }
  }
  Tensor out = make_view(*this, s, st, offset());
  if (any_requires_grad({*this})) {
    Shape in_shape = shape();
    record("expand", {*this}, {out}, [in_shape](const TensorList& g) { return TensorList{sum_to_shape(g[0], in_shape)}; });
  }
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return *this;
  d = wrap_dim(d, dim(), "squeeze");
  if (shape()[d] != 1) return *this;
  Shape s = shape(), st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return reshaped_view(*this, s, st, "squeeze");
}

Tensor Tensor::squeeze() const {
  Shape s, st;
  for (int64_t i = 0; i < dim(); ++i)
    if (shape()[i] != 1) {
      s.push_back(shape()[i]);
      st.push_back(strides()[i]);
    }
  return reshaped_view(*this, s, st, "squeeze");
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape(), st = strides();
  int64_t stride_here = d < dim() ? strides()[d] * shape()[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride_here);
  return reshaped_view(*this, s, st, "unsqueeze");
}

}  // namespace ocrt
