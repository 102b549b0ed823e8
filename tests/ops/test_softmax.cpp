// The softmax kernels (ops/cpu/softmax.cpp) against their plain-loop reference
// (ops/cpu/softmax_reference.h): softmax and log_softmax along each dim, forward and backward.
// The op-level properties (stability, -inf rows, gradients) are in test_reduce.cpp.
#include <catch2/catch.hpp>

#include "gradcheck.h"
#include "ops/backend.h"
#include "ops/cpu/softmax_reference.h"

using namespace ocrt;
using namespace ocrt::testing;

TEST_CASE("the softmax kernels equal the plain-loop reference along every dim", "[softmax]") {
  const LayerBackend& cpu = layer_backend(Device::cpu());
  const Shape shape = {3, 5, 4};
  const Tensor x = det_uniform(shape, 7, -3, 3), dy = det_uniform(shape, 8);
  const auto xv = x.to_vector<double>(), dyv = dy.to_vector<double>();
  for (int64_t dim = 0; dim < 3; ++dim)
    for (bool log : {false, true}) {
      INFO((log ? "log_softmax" : "softmax") << " along dim " << dim);
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < dim; ++d) outer *= shape[(size_t)d];
      for (int64_t d = dim + 1; d < 3; ++d) inner *= shape[(size_t)d];
      Tensor y = Tensor::empty(shape, DType::f64), dx = Tensor::empty(shape, DType::f64);
      std::vector<double> y_ref(xv.size()), dx_ref(xv.size());
      cpu.softmax(log, x, dim, y);
      reference::softmax(log, xv.data(), y_ref.data(), outer, shape[(size_t)dim], inner);
      require_close(y, Tensor::from_vector(y_ref, shape), 1e-13, 1e-15, "forward");
      cpu.softmax_backward(log, y, dy, dim, dx);
      reference::softmax_backward(log, y_ref.data(), dyv.data(), dx_ref.data(), outer, shape[(size_t)dim], inner);
      require_close(dx, Tensor::from_vector(dx_ref, shape), 1e-13, 1e-14, "backward");
    }
}
