// Tensor: a strided view of a Storage, plus what autograd needs (requires_grad, grad, the
// node that produced it). A Tensor is a cheap handle: copying it shares the same TensorImpl,
// as in PyTorch (a = b makes a alias b; use clone() for a copy of the data).
//
// Layout conventions: row-major, contiguous by default; element (i0, i1, ...) sits at
// data + (offset + sum_k i_k * stride_k) * itemsize. Views (reshape, permute, narrow, expand...)
// make new TensorImpls over the same storage and never copy.
//
// Where things are defined: the metadata, factories that only allocate, printing and the
// autograd accessors live in runtime/tensor.cpp; the members that compute are in runtime/ too:
// contiguous, clone, to, copy_, fill_ in runtime/tensor_copy.cpp, the differentiable views in
// runtime/tensor_view.cpp, backward in runtime/autograd.cpp. They reach kernels only through
// the tensor kernel table (runtime/backend.h), never through ops/.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/storage.h"

namespace ocrt {

using Shape = std::vector<int64_t>;

struct Node;  // runtime/autograd.h
class Tensor;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  // in elements, not bytes
  int64_t offset = 0;
  DType dtype = DType::f32;

  // Autograd state. A tensor with requires_grad and no grad_fn is a leaf: backward() fills
  // its grad. A tensor made by an op from inputs that require grad gets grad_fn (the node
  // that computes its inputs' gradients) and output_nr (which output of that node it is).
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<Node> grad_fn;
  int output_nr = 0;
};

int64_t numel_of(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories (each takes an explicit device; there is no default GPU)
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::f32, Device device = Device::cpu());
  // 0, 1, ..., n-1 (or start, start+step, ... < end)
  static Tensor arange(int64_t n, DType dtype = DType::i64, Device device = Device::cpu());
  static Tensor arange(double start, double end, double step, DType dtype, Device device = Device::cpu());
  // Copies host values into a new tensor of the given shape (numel must match).
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu());
  template <class T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{(int64_t)values.size()});
  }

  // ---- metadata
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl()->shape; }
  const Shape& strides() const { return impl()->strides; }
  int64_t size(int64_t dim) const;    // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return (int64_t)impl()->shape.size(); }
  int64_t numel() const { return numel_of(impl()->shape); }
  int64_t offset() const { return impl()->offset; }
  DType dtype() const { return impl()->dtype; }
  Device device() const { return impl()->storage->device(); }
  size_t itemsize() const { return dtype_size(dtype()); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl()->storage; }
  TensorImpl* impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

  // Raw pointer to the first element (storage + offset). data<T>() checks the dtype; on a
  // CUDA tensor it is a device pointer, only for kernels.
  void* raw_data() const;
  template <class T> T* data() const;
  // The single value of a one-element tensor, read on the host (copies from a GPU).
  double item() const;
  // All values as a host vector in row-major order (any layout, any device).
  template <class T> std::vector<T> to_vector() const;

  // ---- views: share storage; differentiable (autograd flows through them)
  Tensor view(const Shape& shape) const;      // needs compatible strides; one dim may be -1
  Tensor reshape(const Shape& shape) const;   // view when possible, else a contiguous copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // 2-D transpose
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // drops dim
  Tensor expand(const Shape& shape) const;           // size-1 dims broadcast (stride 0); -1 keeps
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor unsqueeze(int64_t dim) const;

  // ---- copies
  Tensor contiguous() const;  // self if already contiguous
  Tensor clone() const;       // always a fresh contiguous copy, differentiable
  Tensor to(Device device) const;  // self if already there
  Tensor to(DType dtype) const;    // self if already that dtype
  // In-place: copy src (broadcast to this shape, any dtype/layout) into this tensor's elements.
  // Not recorded by autograd; refused on a tensor that requires grad while grad mode is on.
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }

  // ---- autograd
  bool requires_grad() const { return impl()->requires_grad; }
  Tensor& set_requires_grad(bool on = true);  // leaves only
  bool is_leaf() const { return impl()->grad_fn == nullptr; }
  Tensor grad() const { return Tensor(impl()->grad); }
  void set_grad(const Tensor& g) { impl()->grad = g.impl_; }
  void zero_grad() { impl()->grad.reset(); }  // like PyTorch's set_to_none=True
  const std::shared_ptr<Node>& grad_fn() const { return impl()->grad_fn; }
  // Same data, no history: the result is a leaf that does not require grad.
  Tensor detach() const;
  // Backpropagates from this tensor. For a non-scalar, `gradient` (same shape) is required.
  // Unless retain_graph, the graph's saved tensors are freed and a second backward through it
  // is an error.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;

  // ---- printing: shape, dtype, device, then values (elided in the middle when large)
  std::string str(int64_t max_per_dim = 6) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Wraps a dim index that may be negative (-1 = last) into [0, ndim); throws naming `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// A new TensorImpl viewing t's storage with the given geometry (no autograd; used by views).
Tensor make_view(const Tensor& t, Shape shape, Shape strides, int64_t offset);

// ---- grad mode: a thread-local switch, on by default. Inference runs under NoGradGuard.
bool grad_enabled();
void set_grad_enabled(bool on);
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// ---- template definitions
template <class T>
T* Tensor::data() const {
  OCRT_CHECK(dtype() == dtype_of<T>::value, "data<", dtype_name(dtype_of<T>::value), ">() called on a ",
             dtype_name(dtype()), " tensor");
  return static_cast<T*>(raw_data());
}

void copy_host_to_tensor(const void* src, size_t nbytes, const Tensor& dst);  // dst contiguous
void copy_tensor_to_host(const Tensor& src, void* dst, size_t nbytes);        // src contiguous

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  OCRT_CHECK((int64_t)values.size() == numel_of(shape), "from_vector: ", values.size(),
             " values do not fill shape ", shape_str(shape));
  Tensor t = empty(shape, dtype_of<T>::value, device);
  copy_host_to_tensor(values.data(), values.size() * sizeof(T), t);
  return t;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = to(dtype_of<T>::value).contiguous();
  std::vector<T> out((size_t)c.numel());
  copy_tensor_to_host(c, out.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace ocrt
