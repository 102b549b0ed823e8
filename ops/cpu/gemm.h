// ocrt's own float32 matrix product for CPUs with AVX-512 (ops/cpu/gemm.cpp explains how it
// works). ops/cpu/linalg.cpp uses it for float32 matmul when OCRT_CPU_SGEMM is defined, and
// Eigen otherwise (float64, or a build without AVX-512).
#pragma once

#include <cstdint>

#if defined(__AVX512F__)
#define OCRT_CPU_SGEMM 1

namespace ocrt::cpu {

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
