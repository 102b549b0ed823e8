// The CUDA kernel table: each family's file in ops/cuda/ fills its entries, mirroring
// ops/cpu/. An entry left null makes the op fail with "<op>: not implemented on cuda:N" rather
// than run anywhere else.
#include "ops/backend.h"

namespace ocrt {

namespace {
Backend make_cuda_backend() {
  Backend b{};
  b.name = "cuda";
  register_cuda_copy(b);
  register_cuda_elementwise(b);
  register_cuda_reduce(b);
  register_cuda_linalg(b);
  register_cuda_index(b);
  register_cuda_random(b);
  register_cuda_conv(b);
  register_cuda_pool(b);
  register_cuda_norm(b);
  register_cuda_rnn(b);
  register_cuda_ctc(b);
  return b;
}
}  // namespace

const Backend& cuda_backend() {
  static const Backend cuda = make_cuda_backend();
  return cuda;
}

}  // namespace ocrt
