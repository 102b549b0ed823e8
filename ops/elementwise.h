// Elementwise operators with NumPy/PyTorch broadcasting, and activations.
//
// Binary ops broadcast their inputs (trailing dims aligned; a size-1 dim stretches) and need
// both inputs on the same device with the same dtype: ocrt does not promote types silently,
// so add(float32, float64) is an error; convert with .to(dtype) first. The scalar overloads
// take the tensor's dtype. Comparisons return uint8 (0/1) masks and have no gradient.
#pragma once
#include "runtime/tensor.h"

namespace ocrt {

// Shape that a and b broadcast to; throws naming op and both shapes if they do not.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// ---- arithmetic (differentiable)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);  // a^b; a must be > 0 where b's gradient is needed
Tensor maximum(const Tensor& a, const Tensor& b);  // gradient goes to the larger (split on ties)
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);
Tensor rsub(double a, const Tensor& b);  // a - b
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);    // gradient sign(x), 0 at 0 (as PyTorch)
Tensor sign(const Tensor& x);   // no gradient (zero)
Tensor clamp(const Tensor& x, double lo, double hi);  // gradient 1 inside [lo, hi], 0 outside
Tensor clamp_min(const Tensor& x, double lo);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return rsub(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator-(const Tensor& x) { return neg(x); }

// ---- selection
// where(cond, a, b): a where cond != 0, else b; cond is uint8; all three broadcast.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);  // x where mask == 0

// ---- comparisons -> uint8
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

// ---- activations
enum class GeluApprox { none, tanh };  // none = exact erf form (PyTorch's default)
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x, GeluApprox approximate = GeluApprox::none);
Tensor hardswish(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);

// ---- in place, not recorded by autograd (for optimizers and gradient bookkeeping).
// Refused on a tensor that requires grad while grad mode is on. `other` broadcasts to self.
void add_(const Tensor& self, const Tensor& other, double alpha = 1.0);  // self += alpha * other
void mul_(const Tensor& self, const Tensor& other);
void mul_(const Tensor& self, double value);
// self = max(self, 0) in place, for inference: no autograd (refused where self requires grad
// and grad mode is on). nn::Sequential uses it on its own intermediates when grad is off.
void relu_(const Tensor& self);

}  // namespace ocrt
