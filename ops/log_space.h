// Arithmetic on log-probabilities, shared by the CPU and CUDA CTC kernels (ops/cpu/ctc.cpp,
// ops/cuda/ctc.cu) so that both add probabilities the same way. Plain C++ that nvcc also
// compiles for the device; no CUDA type appears here.
#pragma once
#include <math.h>

#include "runtime/host_device.h"

namespace ocrt {

// log(exp(a) + exp(b)) without overflow: the larger term factored out, so exp() only sees
// numbers <= 0. Exact for -inf operands (a probability of 0), which the recursions meet often.
OCRT_HOST_DEVICE inline double lse(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  const double m = a < b ? b : a;
  return m + ::log1p(::exp(-::fabs(a - b)));  // ::, not ocrt::exp(const Tensor&) of ops/elementwise.h
}

}  // namespace ocrt
