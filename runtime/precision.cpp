#include "runtime/precision.h"

#include <atomic>

#include "runtime/error.h"

namespace ocrt {

namespace {
std::atomic<Precision> g_gpu_precision{Precision::fp32};
}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
  }
  return "?";
}

Precision parse_precision(const std::string& name) {
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::bf16})
    if (name == precision_name(p)) return p;
  throw Error("unknown precision '" + name + "' (expected fp32, tf32 or bf16)");
}

void set_gpu_precision(Precision p) { g_gpu_precision.store(p, std::memory_order_relaxed); }
Precision gpu_precision() { return g_gpu_precision.load(std::memory_order_relaxed); }

cpu::MatmulPrecision cpu_precision_for(Precision p) {
  return p == Precision::bf16 ? cpu::MatmulPrecision::bf16 : cpu::MatmulPrecision::f32;
}

PrecisionScope::PrecisionScope(Precision p) : cpu_before_(cpu::matmul_precision()), gpu_before_(gpu_precision()) {
  cpu::set_matmul_precision(cpu_precision_for(p));
  set_gpu_precision(p);
}

PrecisionScope::~PrecisionScope() {
  set_gpu_precision(gpu_before_);
  cpu::set_matmul_precision(cpu_before_);
}

}  // namespace ocrt
