// The CUDA layer kernel table: each family's file in ops/cuda/ fills its entries, mirroring
// ops/cpu/. An entry left null makes the op fail with "<op>: not implemented on cuda:N" rather
// than run anywhere else.
#include "ops/backend.h"

namespace ocrt {

namespace {
LayerBackend make_cuda_layer_backend() {
  LayerBackend b{};
  b.name = "cuda";
  register_cuda_softmax(b);
  register_cuda_conv(b);
  register_cuda_pool(b);
  register_cuda_norm(b);
  register_cuda_lstm(b);
  register_cuda_ctc(b);
  register_cuda_optim(b);
  register_cuda_attention(b);
  return b;
}
}  // namespace

const LayerBackend& cuda_layer_backend() {
  static const LayerBackend cuda = make_cuda_layer_backend();
  return cuda;
}

}  // namespace ocrt
