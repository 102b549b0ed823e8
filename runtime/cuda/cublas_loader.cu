// Opening cuBLAS on first use (see cublas_loader.h).
#include "runtime/cuda/cublas_loader.h"

#include <dlfcn.h>

#include <mutex>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/precision.h"

// The real names of the functions cublas_v2.h maps its names to (cublasCreate is
// cublasCreate_v2, and so on): the names dlsym must look up.
#define OCRT_CUBLAS_NAME2(x) #x
#define OCRT_CUBLAS_NAME(x) OCRT_CUBLAS_NAME2(x)

namespace ocrt::cuda {

namespace {

template <class F>
void resolve(void* lib, const char* name, F& to, const std::string& path) {
  dlerror();
  void* sym = dlsym(lib, name);
  OCRT_CHECK(sym != nullptr, path, ": no function ", name, " in it (", dlerror() ? "not exported" : "null", ")");
  to = reinterpret_cast<F>(sym);
}

CublasApi load() {
  // The soname first (found through the program's run path, LD_LIBRARY_PATH and the loader's
  // cache), then the toolkit's library folder this build was configured with.
  const std::string name = cublas_library_name();
  std::string tried = name;
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = lib ? "" : dlerror();
#ifdef OCRT_CUBLAS_DIR
  if (!lib) {
    const std::string full = std::string(OCRT_CUBLAS_DIR) + "/" + name;
    tried += ", " + full;
    lib = dlopen(full.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) why += std::string("; ") + dlerror();
  }
#endif
  OCRT_CHECK(lib != nullptr, "cannot load cuBLAS, which ocrt opens when a GPU is first used (looked for ", tried,
             "): ", why, ". Put the CUDA toolkit's library folder on LD_LIBRARY_PATH");
  CublasApi api;
  resolve(lib, OCRT_CUBLAS_NAME(cublasCreate), api.create, name);
  resolve(lib, OCRT_CUBLAS_NAME(cublasSetStream), api.set_stream, name);
  resolve(lib, OCRT_CUBLAS_NAME(cublasSetMathMode), api.set_math_mode, name);
  resolve(lib, OCRT_CUBLAS_NAME(cublasSgemmStridedBatched), api.sgemm_strided_batched, name);
  resolve(lib, OCRT_CUBLAS_NAME(cublasDgemmStridedBatched), api.dgemm_strided_batched, name);
  resolve(lib, OCRT_CUBLAS_NAME(cublasGemmStridedBatchedEx), api.gemm_strided_batched_ex, name);
  return api;  // the library stays open for the process's life
}

}  // namespace

std::string cublas_library_name() {
#ifdef OCRT_CUBLAS_SONAME
  return OCRT_CUBLAS_SONAME;
#else
  return "libcublas.so";
#endif
}

const CublasApi& cublas_api() {
  static std::once_flag once;
  static CublasApi api;
  std::call_once(once, [] { api = load(); });  // a throw leaves the flag unset: the next call tries again
  return api;
}

// The typed pointer above names the declaration with a cublasComputeType_t (an unevaluated
// check: taking the address for real would link cuBLAS).
static_assert(std::is_same_v<decltype(static_cast<decltype(CublasApi::gemm_strided_batched_ex)>(
                                 &::cublasGemmStridedBatchedEx)),
                             decltype(CublasApi::gemm_strided_batched_ex)>);

cublasStatus_t sgemm_strided_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                     const float* alpha, const float* A, int lda, long long sa, const float* B,
                                     int ldb, long long sb, const float* beta, float* C, int ldc, long long sc,
                                     int batch) {
  const CublasApi& api = cublas_api();
  const Precision p = gpu_precision();
  if (p == Precision::fp32)
    return api.sgemm_strided_batched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
  const cublasComputeType_t compute = p == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_FAST_16BF;
  return api.gemm_strided_batched_ex(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb, sb, beta,
                                     C, CUDA_R_32F, ldc, sc, batch, compute, CUBLAS_GEMM_DEFAULT);
}

}  // namespace ocrt::cuda
