// Random tensors and dropout, drawn from a Generator (runtime/rng.h): the same seed gives the
// same numbers on every device and thread count.
#pragma once
#include "runtime/rng.h"
#include "runtime/tensor.h"

namespace ocrt {

Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::f32, Device device = Device::cpu());   // U[0,1)
Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::f32, Device device = Device::cpu());  // N(0,1)
Tensor uniform(const Shape& shape, double lo, double hi, Generator& gen, DType dtype = DType::f32,
               Device device = Device::cpu());

// Training: zeroes each element with probability p and scales the rest by 1/(1-p), one
// Philox draw per element (element kept when u >= p). Eval (training=false) or p == 0:
// returns x unchanged. p must be in [0, 1].
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);

}  // namespace ocrt
