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
};

// The functions, from the library opened on the first call (thread-safe). Throws, naming the
// library and the places it was looked for, when it cannot be opened or lacks a function.
const CublasApi& cublas_api();

// The library's file name as looked for first (its soname, e.g. libcublas.so.13).
std::string cublas_library_name();

}  // namespace ocrt::cuda
