// Where a device picks its layer kernel table (ops/backend.h); the tensor table's counterpart
// is runtime/backend.cpp.
#include "ops/backend.h"

namespace ocrt {

namespace {
LayerBackend make_cpu_layer_backend() {
  LayerBackend b{};
  b.name = "cpu";
  register_cpu_softmax(b);
  register_cpu_conv(b);
  register_cpu_pool(b);
  register_cpu_norm(b);
  register_cpu_lstm(b);
  register_cpu_ctc(b);
  register_cpu_optim(b);
  register_cpu_attention(b);
  return b;
}
}  // namespace

const LayerBackend& layer_backend(Device device) {
  if (device.is_cpu()) {
    static const LayerBackend cpu = make_cpu_layer_backend();
    return cpu;
  }
  validate(device);  // throws in builds without CUDA, or for a GPU that does not exist
#ifdef OCRT_HAVE_CUDA
  return cuda_layer_backend();
#else
  fail("unreachable: ", device.str(), " validated in a build without CUDA");
#endif
}

}  // namespace ocrt
