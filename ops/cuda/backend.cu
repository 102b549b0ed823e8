// The CUDA kernel table. Kernels arrive with the CUDA-backend issue; until then every entry is
// null, so a CUDA op fails with "<op>: not implemented on cuda:N" rather than running
// elsewhere. Tensors can already be allocated on and copied to and from a GPU (runtime/cuda/).
#include "ops/backend.h"

namespace ocrt {

namespace {
Backend make_cuda_backend() {
  Backend b{};
  b.name = "cuda";
  return b;
}
}  // namespace

const Backend& cuda_backend() {
  static const Backend cuda = make_cuda_backend();
  return cuda;
}

}  // namespace ocrt
