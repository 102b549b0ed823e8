// Elementwise front-ends: argument checks, broadcasting, output allocation, dispatch to the
// device's kernels, and the gradient rules. Gradients of binary ops are written with other
// ops (so they run on any device that has the forward kernels); activations use a fused
// unary_backward kernel because their derivatives are long formulas evaluated per element.
#include "ops/elementwise.h"

#include <cmath>

#include "runtime/backend.h"
#include "ops/reduce.h"
#include "runtime/autograd.h"

namespace ocrt {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    OCRT_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
               " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  OCRT_CHECK(a.device() == b.device(), op, ": inputs are on different devices (", a.device().str(), " and ",
             b.device().str(), "); move one with .to(device)");
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  OCRT_CHECK(a.dtype() == b.dtype(), op, ": inputs have different dtypes (", dtype_name(a.dtype()), " and ",
             dtype_name(b.dtype()), "); convert one with .to(dtype)");
}

void check_defined(const Tensor& t, const char* op, const char* what) {
  OCRT_CHECK(t.defined(), op, ": ", what, " is an undefined tensor");
}

// Forward of a binary op on broadcast views; no autograd.
Tensor binary_raw(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  check_defined(a, name, "first input");
  check_defined(b, name, "second input");
  check_same_device(a, b, name);
  check_same_dtype(a, b, name);
  if (op == BinaryOp::div || op == BinaryOp::pow)
    OCRT_CHECK(is_floating(a.dtype()), name, ": expected float tensors, got ", dtype_name(a.dtype()));
  Shape s = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(s, is_comparison(op) ? DType::u8 : a.dtype(), a.device());
  if (out.numel() > 0) kernel(a.device(), &TensorBackend::binary, name)(op, a.detach().expand(s), b.detach().expand(s), out);
  return out;
}

Tensor unary_raw(UnaryOp op, UnaryParams p, const Tensor& x, const char* name) {
  check_defined(x, name, "input");
  OCRT_CHECK(is_floating(x.dtype()), name, ": expected a float tensor, got ", dtype_name(x.dtype()));
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() > 0) kernel(x.device(), &TensorBackend::unary, name)(op, p, x, out);
  return out;
}

// y = f(x) with the fused derivative kernel as backward.
Tensor unary_op(UnaryOp op, UnaryParams p, const Tensor& x, const char* name) {
  Tensor y = unary_raw(op, p, x, name);
  if (any_requires_grad({x})) {
    Tensor xs = x.detach(), ys = y.detach();
    record(name, {x}, {y}, [op, p, xs, ys, name](const TensorList& g) {
      Tensor dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
      if (dx.numel() > 0) kernel(xs.device(), &TensorBackend::unary_backward, name)(op, p, xs, ys, g[0], dx);
      return TensorList{dx};
    });
  }
  return y;
}

// Records a broadcasting binary op whose input gradients are given by `rule`, which returns
// them at the output's shape; sum_to folds them back onto each input's shape.
template <class Rule>
void record_binary(const char* name, const Tensor& a, const Tensor& b, const Tensor& out, Rule rule) {
  if (!any_requires_grad({a, b})) return;
  Shape sa = a.shape(), sb = b.shape();
  bool need_a = a.requires_grad(), need_b = b.requires_grad();
  Tensor as = a.detach(), bs = b.detach(), os = out.detach();
  record(name, {a, b}, {out}, [=](const TensorList& g) {
    auto [ga, gb] = rule(g[0], as, bs, os, need_a, need_b);
    return TensorList{need_a ? sum_to(ga, sa) : Tensor(), need_b ? sum_to(gb, sb) : Tensor()};
  });
}

Tensor scalar_like(double v, const Tensor& t) { return Tensor::scalar(v, t.dtype(), t.device()); }

}  // namespace

// ---- arithmetic

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::add, a, b, "add");
  record_binary("add", a, b, out, [](const Tensor& g, const Tensor&, const Tensor&, const Tensor&, bool, bool) {
    return std::pair{g, g};
  });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::sub, a, b, "sub");
  record_binary("sub", a, b, out, [](const Tensor& g, const Tensor&, const Tensor&, const Tensor&, bool, bool nb) {
    return std::pair{g, nb ? neg(g) : Tensor()};
  });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::mul, a, b, "mul");
  record_binary("mul", a, b, out, [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&, bool na, bool nb) {
    return std::pair{na ? mul(g, b) : Tensor(), nb ? mul(g, a) : Tensor()};
  });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::div, a, b, "div");
  // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2 = -out/b
  record_binary("div", a, b, out, [](const Tensor& g, const Tensor&, const Tensor& b, const Tensor& out, bool na, bool nb) {
    return std::pair{na ? div(g, b) : Tensor(), nb ? neg(div(mul(g, out), b)) : Tensor()};
  });
  return out;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::pow, a, b, "pow");
  // d(a^b)/da = b a^(b-1), d(a^b)/db = a^b log a
  record_binary("pow", a, b, out, [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& out, bool na, bool nb) {
    Tensor ga = na ? mul(g, mul(b, pow(a, sub(b, scalar_like(1, b))))) : Tensor();
    Tensor gb = nb ? mul(g, mul(out, log(a))) : Tensor();
    return std::pair{ga, gb};
  });
  return out;
}

// Gradient of maximum/minimum: to the winner, split evenly on ties (as PyTorch).
static std::pair<Tensor, Tensor> extremum_grads(const Tensor& g, const Tensor& a, const Tensor& b, bool a_wins_when_gt) {
  Tensor zero = scalar_like(0, g), half = mul(g, 0.5);
  Tensor a_wins = a_wins_when_gt ? gt(a, b) : lt(a, b);
  Tensor tie = eq(a, b);
  Tensor ga = where(a_wins, g, where(tie, half, zero));
  Tensor gb = where(a_wins, zero, where(tie, half, g));
  return {ga, gb};
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::maximum, a, b, "maximum");
  record_binary("maximum", a, b, out, [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&, bool, bool) {
    return extremum_grads(g, a, b, true);
  });
  return out;
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::minimum, a, b, "minimum");
  record_binary("minimum", a, b, out, [](const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&, bool, bool) {
    return extremum_grads(g, a, b, false);
  });
  return out;
}

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
Tensor rsub(double a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor pow(const Tensor& a, double exponent) { return unary_op(UnaryOp::pow_scalar, {exponent, 0}, a, "pow"); }

Tensor neg(const Tensor& x) { return unary_op(UnaryOp::neg, {}, x, "neg"); }
Tensor exp(const Tensor& x) { return unary_op(UnaryOp::exp, {}, x, "exp"); }
Tensor log(const Tensor& x) { return unary_op(UnaryOp::log, {}, x, "log"); }
Tensor sqrt(const Tensor& x) { return unary_op(UnaryOp::sqrt, {}, x, "sqrt"); }
Tensor abs(const Tensor& x) { return unary_op(UnaryOp::abs, {}, x, "abs"); }
Tensor sign(const Tensor& x) { return unary_raw(UnaryOp::sign, {}, x, "sign"); }

Tensor clamp(const Tensor& x, double lo, double hi) {
  OCRT_CHECK(lo <= hi, "clamp: min ", lo, " is greater than max ", hi);
  return unary_op(UnaryOp::clamp, {lo, hi}, x, "clamp");
}
Tensor clamp_min(const Tensor& x, double lo) { return clamp(x, lo, HUGE_VAL); }

// ---- selection

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined(cond, "where", "condition");
  check_defined(a, "where", "first value");
  check_defined(b, "where", "second value");
  OCRT_CHECK(cond.dtype() == DType::u8, "where: condition must be uint8 (a mask), got ", dtype_name(cond.dtype()));
  check_same_device(cond, a, "where");
  check_same_device(a, b, "where");
  check_same_dtype(a, b, "where");
  Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = Tensor::empty(s, a.dtype(), a.device());
  if (out.numel() > 0)
    kernel(a.device(), &TensorBackend::where, "where")(cond.detach().expand(s), a.detach().expand(s), b.detach().expand(s), out);
  if (any_requires_grad({a, b})) {
    Tensor c = cond.detach();
    Shape sa = a.shape(), sb = b.shape();
    bool na = a.requires_grad(), nb = b.requires_grad();
    record("where", {a, b}, {out}, [=](const TensorList& g) {
      Tensor zero = scalar_like(0, g[0]);
      return TensorList{na ? sum_to(where(c, g[0], zero), sa) : Tensor(), nb ? sum_to(where(c, zero, g[0]), sb) : Tensor()};
    });
  }
  return out;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined(mask, "masked_fill", "mask");
  OCRT_CHECK(broadcast_shapes(mask.shape(), x.shape(), "masked_fill") == x.shape(), "masked_fill: mask of shape ",
             shape_str(mask.shape()), " does not broadcast to the input's shape ", shape_str(x.shape()));
  return where(mask, scalar_like(value, x), x);
}

// ---- comparisons

Tensor eq(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::eq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::ne, a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::lt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::le, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::gt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::ge, a, b, "ge"); }
Tensor eq(const Tensor& a, double b) { return eq(a, scalar_like(b, a)); }
Tensor ne(const Tensor& a, double b) { return ne(a, scalar_like(b, a)); }
Tensor lt(const Tensor& a, double b) { return lt(a, scalar_like(b, a)); }
Tensor le(const Tensor& a, double b) { return le(a, scalar_like(b, a)); }
Tensor gt(const Tensor& a, double b) { return gt(a, scalar_like(b, a)); }
Tensor ge(const Tensor& a, double b) { return ge(a, scalar_like(b, a)); }

// ---- activations

Tensor relu(const Tensor& x) { return unary_op(UnaryOp::relu, {}, x, "relu"); }
Tensor sigmoid(const Tensor& x) { return unary_op(UnaryOp::sigmoid, {}, x, "sigmoid"); }
Tensor tanh(const Tensor& x) { return unary_op(UnaryOp::tanh, {}, x, "tanh"); }
Tensor gelu(const Tensor& x, GeluApprox approximate) {
  return approximate == GeluApprox::tanh ? unary_op(UnaryOp::gelu_tanh, {}, x, "gelu")
                                         : unary_op(UnaryOp::gelu_erf, {}, x, "gelu");
}
Tensor hardswish(const Tensor& x) { return unary_op(UnaryOp::hardswish, {}, x, "hardswish"); }
Tensor leaky_relu(const Tensor& x, double negative_slope) {
  return unary_op(UnaryOp::leaky_relu, {negative_slope, 0}, x, "leaky_relu");
}

// ---- in place

static void inplace_binary(BinaryOp op, const Tensor& self, const Tensor& other, const char* name) {
  OCRT_CHECK(!(grad_enabled() && self.requires_grad()), name,
             ": in-place change of a tensor that requires grad would corrupt autograd; do it under NoGradGuard");
  check_same_device(self, other, name);
  check_same_dtype(self, other, name);
  OCRT_CHECK(broadcast_shapes(self.shape(), other.shape(), name) == self.shape(), name, ": ", shape_str(other.shape()),
             " does not broadcast to ", shape_str(self.shape()));
  if (self.numel() > 0)
    kernel(self.device(), &TensorBackend::binary, name)(op, self.detach(), other.detach().expand(self.shape()), self);
}

void add_(const Tensor& self, const Tensor& other, double alpha) {
  if (alpha == 1.0) return inplace_binary(BinaryOp::add, self, other, "add_");
  Tensor scaled;
  {
    NoGradGuard no_grad;
    scaled = mul(other, alpha);
  }
  inplace_binary(BinaryOp::add, self, scaled, "add_");
}
void mul_(const Tensor& self, const Tensor& other) { inplace_binary(BinaryOp::mul, self, other, "mul_"); }
void mul_(const Tensor& self, double value) { inplace_binary(BinaryOp::mul, self, scalar_like(value, self), "mul_"); }

void relu_(const Tensor& self) {
  check_defined(self, "relu_", "input");
  OCRT_CHECK(!(grad_enabled() && self.requires_grad()), "relu_",
             ": in-place change of a tensor that requires grad would corrupt autograd; do it under NoGradGuard");
  OCRT_CHECK(is_floating(self.dtype()), "relu_: expected a float tensor, got ", dtype_name(self.dtype()));
  // The unary kernels read element i and write element i: reading and writing one tensor is safe.
  if (self.numel() > 0) kernel(self.device(), &TensorBackend::unary, "relu_")(UnaryOp::relu, {}, self.detach(), self);
}

}  // namespace ocrt
