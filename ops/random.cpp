// Random tensors and dropout. Each random tensor is one draw: it takes the Generator's
// current offset once (gen.next_offset()) and the backend fills element i from
// Philox(seed, i, offset) (see runtime/rng.h and runtime/cpu/random.cpp for how words become
// values). Nothing here depends on the thread count or the device.
#include "ops/random.h"

#include <cmath>

#include "runtime/backend.h"
#include "ops/elementwise.h"
#include "runtime/autograd.h"

namespace ocrt {

namespace {

Tensor empty_float(const Shape& shape, DType dtype, Device device, const char* op) {
  OCRT_CHECK(is_floating(dtype), op, ": expected float32 or float64, got ", dtype_name(dtype));
  for (int64_t s : shape) OCRT_CHECK(s >= 0, op, ": negative size in shape ", shape_str(shape));
  return Tensor::empty(shape, dtype, device);
}

}  // namespace

Tensor uniform(const Shape& shape, double lo, double hi, Generator& gen, DType dtype, Device device) {
  OCRT_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, "uniform: expected finite lo <= hi, got [", lo,
             ", ", hi, ")");
  Tensor out = empty_float(shape, dtype, device, "uniform");
  auto fill = kernel(device, &TensorBackend::uniform, "uniform");  // look it up before taking an offset
  uint64_t offset = gen.next_offset();
  if (out.numel() > 0) fill(out, gen.seed(), offset, lo, hi);
  return out;
}

Tensor rand(const Shape& shape, Generator& gen, DType dtype, Device device) {
  return uniform(shape, 0.0, 1.0, gen, dtype, device);
}

Tensor randn(const Shape& shape, Generator& gen, DType dtype, Device device) {
  Tensor out = empty_float(shape, dtype, device, "randn");
  auto fill = kernel(device, &TensorBackend::normal, "randn");
  uint64_t offset = gen.next_offset();
  if (out.numel() > 0) fill(out, gen.seed(), offset, 0.0, 1.0);
  return out;
}

// y = x * mask / (1 - p) with mask = (u >= p), u one float32 uniform draw over x's shape.
// The mask is drawn in float32 whatever x's dtype, so a float64 run (gradient checks) drops
// the same elements as a float32 one. Its backward is mul's: g * mask / (1 - p).
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
  OCRT_CHECK(x.defined(), "dropout: input is an undefined tensor");
  OCRT_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability p must be in [0, 1], got ", p);  // also refuses NaN
  OCRT_CHECK(is_floating(x.dtype()), "dropout: expected a float tensor, got ", dtype_name(x.dtype()));
  if (!training || p == 0.0) return x;
  // Everything dropped: zeros (NaN * 0 stays NaN, as PyTorch), with a zero gradient. No draw.
  if (p == 1.0) return mul(x, 0.0);

  Tensor keep_scaled;
  {
    NoGradGuard no_grad;
    Tensor u = rand(x.shape(), gen, DType::f32, x.device());
    keep_scaled = mul(ge(u, p).to(x.dtype()), 1.0 / (1.0 - p));
  }
  return mul(x, keep_scaled);
}

}  // namespace ocrt
