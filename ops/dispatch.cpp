// The one place where a device picks its kernel table.
#include "ops/backend.h"

namespace ocrt {

#ifdef OCRT_HAVE_CUDA
const Backend& cuda_backend();  // ops/cuda/backend.cu
#endif

namespace {
Backend make_cpu_backend() {
  Backend b{};
  b.name = "cpu";
  register_cpu_copy(b);
  register_cpu_elementwise(b);
  register_cpu_reduce(b);
  register_cpu_linalg(b);
  register_cpu_index(b);
  register_cpu_random(b);
  // [conv: register begin]
  register_cpu_conv(b);
  register_cpu_pool(b);
  // [conv: register end]
  // [norm: register begin]
  register_cpu_norm(b);
  // [norm: register end]
  // [rnn: register begin]
  register_cpu_rnn(b);
  // [rnn: register end]
  // [attention: register begin]
  // [attention: register end]
  // [ctc: register begin]
  register_cpu_ctc(b);
  // [ctc: register end]
  return b;
}
}  // namespace

const Backend& backend_for(Device device) {
  if (device.is_cpu()) {
    static const Backend cpu = make_cpu_backend();
    return cpu;
  }
  validate(device);  // throws in builds without CUDA, or for a GPU that does not exist
#ifdef OCRT_HAVE_CUDA
  return cuda_backend();
#else
  fail("unreachable: ", device.str(), " validated in a build without CUDA");
#endif
}

}  // namespace ocrt
