// CUDA matrix product through cuBLAS: out[i] = a[i] @ b[i] for a (B,M,K), b (B,K,N), out
// (B,M,N) contiguous; the counterpart of runtime/cpu/linalg.cpp, and read the same way.
//
// cuBLAS is column-major. A row-major matrix with row stride ld is, byte for byte, the
// column-major matrix of its transpose with the same ld; so the row-major product
// C = A B is computed as the column-major product C^T = B^T A^T, with no copy. The operands
// are laid out by matrix_operand (runtime/strided.h, shared with the CPU):
//   - an operand whose rows are contiguous (column stride 1) is passed as is (op N);
//   - an operand whose columns are contiguous (row stride 1), such as w.t() of a contiguous
//     w, is passed as the transposed view of its column-major storage (op T);
//   - anything else is copied to a contiguous buffer first, once for the whole operand.
// Every product of the batch is one call of the strided-batched GEMM; a broadcast operand
// has batch stride 0. float32 runs in the GPUs' precision (runtime/precision.h; by default
// fp32, whose results match the CPU to float32 rounding; tf32 and bf16 on tensor cores);
// float64 uses DGEMM.
#include "runtime/cuda/common.cuh"
#include "runtime/strided.h"

namespace ocrt {

namespace {

void cuda_matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int device = out.device().index;
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  if (B == 0 || M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: zeros
    kernel(out.device(), &TensorBackend::fill, "matmul")(out, 0.0);
    return;
  }
  OCRT_CHECK(M < INT32_MAX && N < INT32_MAX && K < INT32_MAX && B < INT32_MAX, "matmul: sizes too large for cuBLAS");
  const MatrixOperand A = matrix_operand(a), Bm = matrix_operand(b);  // runtime/strided.h
  cublasHandle_t h = cuda::cublas(device);
  // Column-major view: C^T (N x M) = B^T (N x K) * A^T (K x M).
  // A row-major operand is its transpose in column-major (op N); a column-major one is op T.
  const cublasOperation_t opB = Bm.col_major ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = A.col_major ? CUBLAS_OP_T : CUBLAS_OP_N;
  const long long strideC = (long long)(M * N);
  if (out.dtype() == DType::f32) {
    const float one = 1, zero = 0;
    cuda::check_cublas(cuda::sgemm_strided_batched(h, opB, opA, (int)N, (int)M, (int)K, &one,
                                                 static_cast<const float*>(Bm.data), (int)Bm.ld, (long long)Bm.batch_stride,
                                                 static_cast<const float*>(A.data), (int)A.ld, (long long)A.batch_stride, &zero,
                                                 out.data<float>(), (int)N, strideC, (int)B),
                       "matmul (float32 GEMM)", device);
  } else if (out.dtype() == DType::f64) {
    const double one = 1, zero = 0;
    cuda::check_cublas(cuda::cublas_api().dgemm_strided_batched(h, opB, opA, (int)N, (int)M, (int)K, &one,
                                                 static_cast<const double*>(Bm.data), (int)Bm.ld, (long long)Bm.batch_stride,
                                                 static_cast<const double*>(A.data), (int)A.ld, (long long)A.batch_stride, &zero,
                                                 out.data<double>(), (int)N, strideC, (int)B),
                       "matmul (cublasDgemmStridedBatched)", device);
  } else {
    fail("matmul: expected float32 or float64 on ", out.device().str(), ", got ", dtype_name(out.dtype()));
  }
}

}  // namespace

void register_cuda_linalg(TensorBackend& b) { b.matmul = cuda_matmul; }

}  // namespace ocrt
