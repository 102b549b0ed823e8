// The CUDA tensor kernel table: each family's file in runtime/cuda/ fills its entries, mirroring
// runtime/cpu/. An entry left null makes the op fail with "<op>: not implemented on cuda:N"
// rather than run anywhere else.
#include "runtime/backend.h"

namespace ocrt {

namespace {
TensorBackend make_cuda_tensor_backend() {
  TensorBackend b{};
  b.name = "cuda";
  register_cuda_copy(b);
  register_cuda_elementwise(b);
  register_cuda_reduce(b);
  register_cuda_linalg(b);
  register_cuda_index(b);
  register_cuda_random(b);
  return b;
}
}  // namespace

const TensorBackend& cuda_tensor_backend() {
  static const TensorBackend cuda = make_cuda_tensor_backend();
  return cuda;
}

}  // namespace ocrt
