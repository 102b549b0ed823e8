// The softmax kernels (ops/cpu/softmax.cpp) against their plain-loop reference
// (ops/cpu/softmax_reference.h): softmax and log_softmax along each dim, forward and backward.
// The op-level properties (stability, -inf rows, gradients) are in test_reduce.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

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

TEST_CASE("float32 softmax over the last dim (the 8-lane rows) against the reference, masked entries exactly 0", "[softmax]") {
  // ops/cpu/softmax.cpp: rows of at least 8 contiguous float32 values go through exp8 once per
  // value and a float32 lane sum. Bound, u = 2^-24: x - max rounded (|x - max| u, which exp
  // turns into a relative error), exp8's 3 u, the lane sums' (n/8 + 2) u, the scale's u,
  // relative to each output; log_softmax: u of |max + lse| (x - y) and of the output, plus
  // the sum's relative error as an absolute one.
  const LayerBackend& cpu = layer_backend(Device::cpu());
  const double u = std::ldexp(1.0, -24);
  for (int64_t n : {8, 13, 32, 67, 300}) {
    const int64_t rows = 5;
    Tensor x = det_uniform({rows, n}, 9, -20, 20, DType::f32);
    std::vector<float> xv = x.to_vector<float>();
    for (int64_t r = 0; r < rows; ++r) xv[(size_t)(r * n + (r * 3) % n)] = -std::numeric_limits<float>::infinity();
    x = Tensor::from_vector(xv, {rows, n});
    const std::vector<double> xd(xv.begin(), xv.end());
    for (bool log : {false, true}) {
      INFO((log ? "log_softmax" : "softmax") << ", rows of " << n);
      Tensor y = Tensor::empty({rows, n}, DType::f32);
      cpu.softmax(log, x, 1, y);
      std::vector<double> ref(xd.size());
      reference::softmax(log, xd.data(), ref.data(), rows, n, 1);
      const std::vector<float> got = y.to_vector<float>();
      const double sum_err = ((double)n / 8 + 2 + 40) * u;  // + the terms' own x - max roundings (spread 40)
      for (int64_t r = 0; r < rows; ++r) {
        double m = -INFINITY;
        for (int64_t k = 0; k < n; ++k) m = std::max(m, xd[(size_t)(r * n + k)]);
        for (int64_t k = 0; k < n; ++k) {
          const size_t i = (size_t)(r * n + k);
          if (std::isinf(xd[i])) {
            REQUIRE(got[i] == (log ? -INFINITY : 0.0f));
            continue;
          }
          if (log)
            REQUIRE(std::fabs(got[i] - ref[i]) <= u * (std::fabs(xd[i] - ref[i]) + std::fabs(ref[i])) + sum_err + 1e-30);
          else
            REQUIRE(std::fabs(got[i] - ref[i]) <= ref[i] * ((4 + (m - xd[i])) * u + sum_err) + 1e-30);
        }
      }
    }
  }
}
