// cuBLAS, loaded when the first GPU needs it rather than when the program starts.
//
// Linking libcublas makes every process pay for it at start-up, GPU or not: its and cuBLASLt's
// initialisers take about 214 MB of RSS before main() (a program that only prints "hi", linked
// with them, peaks at 217 MB; with cudart alone at 3 MB). A CPU user of a CUDA build of ocrt
// should not pay that, so the library is opened with dlopen the first time a GPU context is
// made (runtime/cuda/cuda_glue.cu), and ocrt calls it through the typed pointers below: each
// has the exact type of the cuBLAS function it stands for (decltype of the declaration in
// cublas_v2.h), so a call compiles to what a direct call would pass.
#pragma once
#include <cublas_v2.h>

#include <string>

namespace ocrt::cuda {

struct CublasApi {
  decltype(&::cublasCreate) create = nullptr;
  decltype(&::cublasSetStream) set_stream = nullptr;
  decltype(&::cublasSetMathMode) set_math_mode = nullptr;
  decltype(&::cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  decltype(&::cublasDgemmStridedBatched) dgemm_strided_batched = nullptr;
  // The typed form (C++ also declares an overload taking a cudaDataType compute type).
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long, const void*,
                                            cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

// The functions, from the library opened on the first call (thread-safe). Throws, naming the
// library and the places it was looked for, when it cannot be opened or lacks a function.
const CublasApi& cublas_api();

// Every float32 GEMM ocrt runs on a GPU: cublasSgemmStridedBatched's arguments, computed in
// the precision of gpu_precision() (runtime/precision.h): fp32 by SGEMM itself, tf32 and bf16
// by cublasGemmStridedBatchedEx with float32 operands and result and the compute type
// CUBLAS_COMPUTE_32F_FAST_TF32 or CUBLAS_COMPUTE_32F_FAST_16BF (tensor cores, operands rounded
// down to that format inside cuBLAS, float32 accumulation).
cublasStatus_t sgemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                     const float* alpha, const float* A, int lda, long long sa, const float* B,
                                     int ldb, long long sb, const float* beta, float* C, int ldc, long long sc,
                                     int batch);

// The library's file name as looked for first (its soname, e.g. libcublas.so.13).
std::string cublas_library_name();

}  // namespace ocrt::cuda
