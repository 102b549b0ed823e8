// The number format in which float32 matrix products multiply: matmul, the GEMMs of the
// convolutions (forward and both gradients), the LSTM's input and recurrent gate products and
// attention's products, on the CPU and on GPUs. Everything else (elementwise ops, softmax,
// log-softmax, CTC, norms' statistics, the LSTM's cell state, the loss, optimizer state and the
// master weights) stays float32 whatever is chosen, and tensors stay float32 in memory.
//
//   fp32  full float32 products (the default; results match the CPU reference to float32
//         rounding)
//   tf32  GPUs: tensor cores round each operand to TF32 (10-bit mantissa) and accumulate in
//         float32 (cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32). CPUs have no TF32: their products
//         stay float32
//   bf16  GPUs: tensor cores multiply bfloat16 operands (7-bit mantissa) and accumulate in
//         float32: the convolutions write their operands in bf16 (ops/cuda/conv.cu), other
//         GEMMs ask cuBLAS for CUBLAS_COMPUTE_32F_FAST_16BF on float32 operands (which cuBLAS
//         may run as TF32). CPUs: the bf16 GEMM of runtime/cpu/gemm.h (operands rounded to
//         nearest even, float32 accumulation)
//
// The CPU's and the GPUs' settings are separate, process-wide and default to fp32; set them
// before ops run, from one thread (ocrt-train's and ocrt-infer's --precision do).
#pragma once
#include <string>

#include "runtime/cpu/gemm.h"

namespace ocrt {

enum class Precision { fp32, tf32, bf16 };

// "fp32", "tf32" or "bf16"; parse_precision throws on anything else.
const char* precision_name(Precision p);
Precision parse_precision(const std::string& name);

// The precision of every float32 product on a GPU from now on.
void set_gpu_precision(Precision p);
Precision gpu_precision();

// What a CPU does for `p`: bf16 products for bf16, float32 for fp32 and tf32.
cpu::MatmulPrecision cpu_precision_for(Precision p);

// Sets the GPUs' precision to `p` and the CPU's to cpu_precision_for(p) for its lifetime, and
// restores both after (training runs, tests, benchmarks). Throws as cpu::set_matmul_precision
// does for bf16 on a CPU without AVX2 and FMA.
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  cpu::MatmulPrecision cpu_before_;
  Precision gpu_before_;
};

}  // namespace ocrt
