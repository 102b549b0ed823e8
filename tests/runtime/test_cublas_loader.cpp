// cuBLAS is opened when the first GPU context is made, not when a program starts
// (runtime/cuda/cublas_loader.h): in builds with CUDA, the library is not in the process
// until cublas_api() is called, and then every function ocrt calls resolves. Checked without a
// GPU (opening the library and looking up functions needs none). Builds without CUDA have no
// cuBLAS to open: the test says so and passes.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#ifdef OCRT_HAVE_CUDA
#include "runtime/cuda/cublas_loader.h"
#endif

TEST_CASE("cuBLAS is opened on first use, not at start-up, and every function ocrt calls resolves", "[cublas]") {
#ifdef OCRT_HAVE_CUDA
  using namespace ocrt::cuda;
  const std::string name = cublas_library_name();
  CHECK(name.rfind("libcublas.so", 0) == 0);
  // ctest runs each test case in a process of its own: nothing has made a GPU context here.
  CHECK(dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD) == nullptr);
  const CublasApi& api = cublas_api();
  CHECK(api.create != nullptr);
  CHECK(api.set_stream != nullptr);
  CHECK(api.set_math_mode != nullptr);
  CHECK(api.sgemm_strided_batched != nullptr);
  CHECK(api.dgemm_strided_batched != nullptr);
  CHECK(api.gemm_strided_batched_ex != nullptr);
  CHECK(&cublas_api() == &api);  // opened once
  void* loaded = dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD);
  CHECK(loaded != nullptr);
  if (loaded) dlclose(loaded);  // drops the reference NOLOAD took
#else
  WARN("built without CUDA: no cuBLAS to open");
#endif
}
