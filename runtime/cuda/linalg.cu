// CUDA matrix product through cuBLAS: out[i] = a[i] @ b[i] for a (B,M,K), b (B,K,N), out
// (B,M,N) contiguous; the counterpart of runtime/cpu/linalg.cpp, and read the same way.
//
// cuBLAS is column-major. A row-major matrix with row stride ld is, byte for byte, the
// column-major matrix of its transpose with the same ld; so the row-major product
// C = A B is computed as the column-major product C^T = B^T A^T, with no copy:
//   - an operand whose rows are contiguous (column stride 1) is passed as is (op N);
//   - an operand whose columns are contiguous (row stride 1), such as w.t() of a contiguous
//     w, is passed as the transposed view of its column-major storage (op T);
//   - anything else is copied to a contiguous buffer first, once for the whole operand.
// Every product of the batch is one call of the strided-batched GEMM; a broadcast operand
// has batch stride 0. float32 runs without TF32 (the handle's default math mode), so results
// match the CPU to float32 rounding; float64 uses DGEMM.
#include "runtime/cuda/common.cuh"

namespace ocrt {

namespace {

struct Operand {
  bool transposed;        // false: rows contiguous (op N for cuBLAS); true: columns contiguous (op T)
  const void* data;
  long long batch_stride;
  int ld;
  Tensor keep_alive;
};

Operand make_operand(const Tensor& x) {
  const int64_t R = x.size(1), C = x.size(2);
  const int64_t rs = x.stride(1), cs = x.stride(2);
  const bool rows_contiguous = (cs == 1 || C == 1) && (R == 1 || rs >= C);
  const bool cols_contiguous = (rs == 1 || R == 1) && (C == 1 || cs >= R);
  Operand op;
  if (rows_contiguous || cols_contiguous) {
    op.data = x.raw_data();
    op.batch_stride = x.size(0) == 1 ? 0 : x.stride(0);
    op.transposed = !rows_contiguous;
    op.ld = (int)(rows_contiguous ? (R == 1 ? std::max<int64_t>(C, 1) : rs) : (C == 1 ? std::max<int64_t>(R, 1) : cs));
    return op;
  }
  NoGradGuard no_grad;
  const bool broadcast = x.size(0) > 1 && x.stride(0) == 0;
  op.keep_alive = (broadcast ? x.narrow(0, 0, 1) : x).contiguous();
  op.data = op.keep_alive.raw_data();
  op.transposed = false;
  op.batch_stride = broadcast ? 0 : R * C;
  op.ld = (int)std::max<int64_t>(C, 1);
  return op;
}

void cuda_matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int device = out.device().index;
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  if (B == 0 || M == 0 || N == 0) return;
  if (K == 0) {  // an empty sum: zeros
    kernel(out.device(), &TensorBackend::fill, "matmul")(out, 0.0);
    return;
  }
  OCRT_CHECK(M < INT32_MAX && N < INT32_MAX && K < INT32_MAX && B < INT32_MAX, "matmul: sizes too large for cuBLAS");
  Operand A = make_operand(a), Bm = make_operand(b);
  cublasHandle_t h = cuda::cublas(device);
  // Column-major view: C^T (N x M) = B^T (N x K) * A^T (K x M).
  const cublasOperation_t opB = Bm.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = A.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const long long strideC = (long long)(M * N);
  if (out.dtype() == DType::f32) {
    const float one = 1, zero = 0;
    cuda::check_cublas(cublasSgemmStridedBatched(h, opB, opA, (int)N, (int)M, (int)K, &one,
                                                 static_cast<const float*>(Bm.data), Bm.ld, Bm.batch_stride,
                                                 static_cast<const float*>(A.data), A.ld, A.batch_stride, &zero,
                                                 out.data<float>(), (int)N, strideC, (int)B),
                       "matmul (cublasSgemmStridedBatched)", device);
  } else if (out.dtype() == DType::f64) {
    const double one = 1, zero = 0;
    cuda::check_cublas(cublasDgemmStridedBatched(h, opB, opA, (int)N, (int)M, (int)K, &one,
                                                 static_cast<const double*>(Bm.data), Bm.ld, Bm.batch_stride,
                                                 static_cast<const double*>(A.data), A.ld, A.batch_stride, &zero,
                                                 out.data<double>(), (int)N, strideC, (int)B),
                       "matmul (cublasDgemmStridedBatched)", device);
  } else {
    fail("matmul: expected float32 or float64 on ", out.device().str(), ", got ", dtype_name(out.dtype()));
  }
}

}  // namespace

void register_cuda_linalg(TensorBackend& b) { b.matmul = cuda_matmul; }

}  // namespace ocrt
