// Where a device picks its tensor kernel table (runtime/backend.h).
#include "runtime/backend.h"

namespace ocrt {

namespace {
TensorBackend make_cpu_tensor_backend() {
  TensorBackend b{};
  b.name = "cpu";
  register_cpu_copy(b);
  register_cpu_elementwise(b);
  register_cpu_reduce(b);
  register_cpu_linalg(b);
  register_cpu_index(b);
  register_cpu_random(b);
  return b;
}
}  // namespace

const TensorBackend& tensor_backend(Device device) {
  if (device.is_cpu()) {
    static const TensorBackend cpu = make_cpu_tensor_backend();
    return cpu;
  }
  validate(device);  // throws in builds without CUDA, or for a GPU that does not exist
#ifdef OCRT_HAVE_CUDA
  return cuda_tensor_backend();
#else
  fail("unreachable: ", device.str(), " validated in a build without CUDA");
#endif
}

}  // namespace ocrt
