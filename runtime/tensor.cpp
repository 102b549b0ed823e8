// Tensor metadata, allocation-only factories, host transfers and printing. The members that
// compute are defined in ops/ (see the note at the top of tensor.h).
#include "runtime/tensor.h"

#include <cmath>
#include <cstring>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "runtime/autograd.h"
#include "runtime/cuda/cuda_glue.h"

namespace ocrt {

// ---- grad mode (declared in tensor.h, beside NoGradGuard; the engine reads it in autograd.cpp)
namespace {
thread_local bool t_grad_enabled = true;
}

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool on) { t_grad_enabled = on; }

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  OCRT_CHECK(dim >= lo && dim <= hi, op, ": dim ", dim, " is out of range for a tensor with ", ndim,
             " dims (expected ", lo, "..", hi, ")");
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

TensorImpl* Tensor::impl() const {
  OCRT_CHECK(impl_ != nullptr, "use of an undefined (empty) Tensor");
  return impl_.get();
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // nothing to lay out (as PyTorch)
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl()->storage->data()) + impl()->offset * (int64_t)itemsize();
}

Tensor make_view(const Tensor& t, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t s : shape)
    OCRT_CHECK(s >= 0, "empty: negative size in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate((size_t)numel_of(shape) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (t.numel() > 0) t.fill_(value);
  return t;
}
Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor Tensor::scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor Tensor::arange(int64_t n, DType dtype, Device device) { return arange(0, (double)n, 1, dtype, device); }

Tensor Tensor::arange(double start, double end, double step, DType dtype, Device device) {
  OCRT_CHECK(step != 0, "arange: step must be non-zero");
  int64_t n = std::max<int64_t>(0, (int64_t)std::ceil((end - start) / step));
  std::vector<double> v((size_t)n);
  for (int64_t i = 0; i < n; ++i) v[(size_t)i] = start + (double)i * step;
  return from_vector(v, {n}).to(dtype).to(device);
}

void copy_host_to_tensor(const void* src, size_t nbytes, const Tensor& dst) {
  OCRT_CHECK(dst.is_contiguous() && nbytes == (size_t)dst.numel() * dst.itemsize(),
             "copy_host_to_tensor: destination must be contiguous and hold exactly ", nbytes, " bytes");
  if (nbytes == 0) return;
  if (dst.device().is_cpu())
    std::memcpy(dst.raw_data(), src, nbytes);
  else
    cuda_copy_to_device(dst.device().index, dst.raw_data(), src, nbytes);
}

void copy_tensor_to_host(const Tensor& src, void* dst, size_t nbytes) {
  OCRT_CHECK(src.is_contiguous() && nbytes == (size_t)src.numel() * src.itemsize(),
             "copy_tensor_to_host: source must be contiguous and hold exactly ", nbytes, " bytes");
  if (nbytes == 0) return;
  if (src.device().is_cpu())
    std::memcpy(dst, src.raw_data(), nbytes);
  else
    cuda_copy_to_host(src.device().index, dst, src.raw_data(), nbytes);
}

double Tensor::item() const {
  OCRT_CHECK(numel() == 1, "item: expected a one-element tensor, got shape ", shape_str(shape()));
  return to_vector<double>()[0];
}

Tensor& Tensor::set_requires_grad(bool on) {
  OCRT_CHECK(is_leaf(), "set_requires_grad: only leaf tensors can change requires_grad (this one was made by '",
             grad_fn()->name, "'); use detach() for a new leaf");
  OCRT_CHECK(!on || is_floating(dtype()), "set_requires_grad: only float tensors can require grad, this one is ",
             dtype_name(dtype()));
  impl()->requires_grad = on;
  return *this;
}

Tensor Tensor::detach() const { return make_view(*this, shape(), strides(), offset()); }

// ---- printing
namespace {

void print_values(std::ostringstream& os, const std::vector<double>& v, const Shape& shape, DType dt,
                  size_t dim, int64_t base, int64_t max_per_dim, int indent) {
  const int64_t n = shape[dim];
  int64_t inner = 1;
  for (size_t k = dim + 1; k < shape.size(); ++k) inner *= shape[k];
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (n > max_per_dim && i == max_per_dim / 2) {
      os << "...";
      i = n - max_per_dim / 2 - 1;
      if (dim + 1 < shape.size()) os << ",\n" << std::string(indent + 1, ' ');
      else os << ", ";
      continue;
    }
    if (dim + 1 == shape.size()) {
      double x = v[(size_t)(base + i)];
      if (is_floating(dt)) os << std::setprecision(6) << x;
      else os << (int64_t)x;
    } else {
      print_values(os, v, shape, dt, dim + 1, base + i * inner, max_per_dim, indent + 1);
    }
    if (i + 1 < n) {
      if (dim + 1 < shape.size()) os << ",\n" << std::string(indent + 1, ' ');
      else os << ", ";
    }
  }
  os << ']';
}

}  // namespace

std::string Tensor::str(int64_t max_per_dim) const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype()) << ", device=" << device().str();
  if (requires_grad()) os << ", requires_grad";
  if (grad_fn()) os << ", grad_fn=" << grad_fn()->name;
  os << ")\n";
  std::vector<double> v = to_vector<double>();
  if (dim() == 0) os << v[0];
  else if (numel() == 0) os << "[]";
  else print_values(os, v, shape(), dtype(), 0, 0, std::max<int64_t>(max_per_dim, 2), 0);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace ocrt
