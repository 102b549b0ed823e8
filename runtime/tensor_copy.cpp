// Copies: contiguous(), clone(), to(device), to(dtype), copy_(), fill_(). Moving data between
// devices goes through the CUDA glue on contiguous buffers; everything else is the backend's
// copy kernel (which also converts dtypes).
#include "runtime/backend.h"
#include "runtime/autograd.h"
#include "runtime/cuda/cuda_glue.h"

namespace ocrt {

namespace {

void check_inplace_allowed(const Tensor& t, const char* op) {
  OCRT_CHECK(!(grad_enabled() && t.requires_grad()), op,
             ": in-place change of a tensor that requires grad (shape ", shape_str(t.shape()),
             ") would corrupt autograd; do it under NoGradGuard, or use the out-of-place op");
}

// A contiguous copy on the same device and with `dtype`, without autograd.
Tensor copy_as(const Tensor& x, DType dtype) {
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  if (out.numel() > 0) kernel(x.device(), &TensorBackend::copy, "copy")(x, out);
  return out;
}

}  // namespace

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out = copy_as(*this, dtype());
  if (any_requires_grad({*this}))
    record("contiguous", {*this}, {out}, [](const TensorList& g) { return TensorList{g[0]}; });
  return out;
}

Tensor Tensor::clone() const {
  Tensor out = copy_as(*this, dtype());
  if (any_requires_grad({*this}))
    record("clone", {*this}, {out}, [](const TensorList& g) { return TensorList{g[0]}; });
  return out;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = copy_as(*this, target);
  if (is_floating(target) && any_requires_grad({*this})) {
    DType from = dtype();
    record("to_dtype", {*this}, {out}, [from](const TensorList& g) { return TensorList{g[0].to(from)}; });
  }
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  validate(target);
  Tensor src = contiguous();
  Tensor out = Tensor::empty(shape(), dtype(), target);
  size_t nbytes = (size_t)numel() * itemsize();
  if (nbytes > 0) {
    if (src.device().is_cpu())
      cuda_copy_to_device(target.index, out.raw_data(), src.raw_data(), nbytes);
    else if (target.is_cpu())
      cuda_copy_to_host(src.device().index, out.raw_data(), src.raw_data(), nbytes);
    else
      cuda_copy_device_to_device(target.index, out.raw_data(), src.device().index, src.raw_data(), nbytes);
  }
  if (any_requires_grad({*this})) {
    Device from = device();
    record("to_device", {*this}, {out}, [from](const TensorList& g) { return TensorList{g[0].to(from)}; });
  }
  return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace_allowed(*this, "copy_");
  OCRT_CHECK(src.device() == device(), "copy_: source is on ", src.device().str(), " but destination is on ",
             device().str(), "; move it with .to(device) first");
  if (numel() == 0) return *this;
  Tensor s = src;
  if (s.shape() != shape()) s = src.detach().expand(shape());
  kernel(device(), &TensorBackend::copy, "copy_")(s, *this);
  return *this;
}

Tensor& Tensor::fill_(double value) {
  check_inplace_allowed(*this, "fill_");
  if (numel() > 0) kernel(device(), &TensorBackend::fill, "fill_")(*this, value);
  return *this;
}

}  // namespace ocrt
