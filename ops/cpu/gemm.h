// ocrt's own float32 matrix product for CPUs with AVX-512 or with AVX2 + FMA (ops/cpu/gemm.cpp
// explains how it works; the instruction set is the compiler's target, -march=native in Release
// builds). ops/cpu/linalg.cpp and ops/cpu/conv.cpp use it for float32 when OCRT_CPU_SGEMM is
// defined, and Eigen otherwise (float64, or a build for an older CPU).
#pragma once

#include <cstdint>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define OCRT_CPU_SGEMM 1

namespace ocrt::cpu {

// The register tile (mr x nr) and cache blocks (kc, mc, nc) this build's GEMM uses, so that tests
// can pick sizes on and around every edge whichever instruction set was compiled.
struct SgemmBlocking {
  int64_t mr, nr, kc, mc, nc;
};
SgemmBlocking sgemm_blocking();

// C = A @ B (or C += A @ B with accumulate) for A (M,K), B (K,N), C (M,N), float32.
// A's element (i,k) is A[i * lda_row + k * lda_col], B's element (k,j) is B[k * ldb_row +
// j * ldb_col]: any strides work (a transposed operand is just swapped strides, a broadcast one
// has stride 0), and nothing is copied beyond the packing below. C has contiguous rows, row
// stride ldc, and is overwritten (K == 0 gives zeros) unless accumulate is set.
//
// Threads: called outside an OpenMP parallel region, a large enough product is shared by
// omp_get_max_threads() threads; called inside one it runs on the calling thread. The result
// does not depend on the thread count: every element is summed in the same order.
void sgemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda_row, int64_t lda_col, const float* B,
           int64_t ldb_row, int64_t ldb_col, float* C, int64_t ldc, bool accumulate = false);

}  // namespace ocrt::cpu

#endif
