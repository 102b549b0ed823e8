// CPU matrix product: out[i] = a[i] @ b[i] for a (B,M,K), b (B,K,N), out (B,M,N) contiguous,
// float32 or float64. The front-end (ops/linalg.cpp) has already broadcast and flattened the
// batch dims and passes transposed operands as strided views.
//
// The work is done by Eigen's GEMM, which reads each matrix through an Eigen::Map over the
// tensor's own memory:
//   - a matrix whose rows are contiguous (column stride 1) is a row-major map whose outer
//     stride is the row stride;
//   - a matrix whose columns are contiguous (row stride 1), such as w.t() of a contiguous w,
//     is a column-major map: a transposed operand costs nothing;
//   - anything else (an expanded inner dim, a slice with a step) is copied to a contiguous
//     buffer first, once for the whole operand.
// Eigen packs both operands into cache-sized panels itself, so the layout of the map changes
// which packing routine runs, not the speed of the inner kernel.
//
// Threads: a single large product is split by Eigen's own OpenMP code (it starts
// Eigen::nbThreads() threads, which runtime/threading.h keeps equal to the OpenMP count). Many
// small products run in an OpenMP loop over the batch instead, one whole GEMM per iteration:
// inside a parallel region Eigen sees omp_get_num_threads() > 1 and stays single-threaded
// (Eigen/src/Core/products/Parallelizer.h), so the two levels never multiply.
#include <omp.h>

#include <Eigen/Core>
#include <cstdint>

#include "ops/backend.h"
#include "ops/cpu/linalg_reference.h"

namespace ocrt {

namespace {

template <class T>
using RowMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ColMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
template <class M>
using StridedMap = Eigen::Map<const M, Eigen::Unaligned, Eigen::OuterStride<>>;

// How one operand, all of whose matrices share the same inner strides, is read.
struct Operand {
  enum Kind { row_major, col_major } kind;
  const char* data;     // first element of matrix 0
  int64_t batch_stride;  // in elements; 0 when every batch index reads the same matrix
  int64_t ld;            // outer stride in elements (row stride, or column stride)
  Tensor keep_alive;     // the contiguous copy, when one was needed
};

// Decides the layout of x (B,R,C); copies it only when neither map can read it.
Operand make_operand(const Tensor& x) {
  const int64_t R = x.size(1), C = x.size(2);
  const int64_t rs = x.stride(1), cs = x.stride(2);
  // The stride of a size-1 dim is never followed, so it does not disqualify a layout.
  const bool rows_contiguous = (cs == 1 || C == 1) && (R == 1 || rs >= C);
  const bool cols_contiguous = (rs == 1 || R == 1) && (C == 1 || cs >= R);
  Operand op;
  if (rows_contiguous || cols_contiguous) {
    op.data = static_cast<const char*>(x.raw_data());
    op.batch_stride = x.size(0) == 1 ? 0 : x.stride(0);
    if (rows_contiguous) {
      op.kind = Operand::row_major;
      op.ld = R == 1 ? C : rs;
    } else {
      op.kind = Operand::col_major;
      op.ld = C == 1 ? R : cs;
    }
    return op;
  }
  // A broadcast operand (batch stride 0) is copied once, not once per batch index.
  const bool broadcast = x.size(0) > 1 && x.stride(0) == 0;
  op.keep_alive = (broadcast ? x.narrow(0, 0, 1) : x).contiguous();
  op.kind = Operand::row_major;
  op.data = static_cast<const char*>(op.keep_alive.raw_data());
  op.batch_stride = broadcast ? 0 : R * C;
  op.ld = C;
  return op;
}

// Calls f with the Eigen map of matrix i of the operand.
template <class T, class F>
void with_matrix(const Operand& op, int64_t i, int64_t rows, int64_t cols, F&& f) {
  const T* p = reinterpret_cast<const T*>(op.data) + i * op.batch_stride;
  if (op.kind == Operand::row_major)
    f(StridedMap<RowMajorMatrix<T>>(p, rows, cols, Eigen::OuterStride<>(op.ld)));
  else
    f(StridedMap<ColMajorMatrix<T>>(p, rows, cols, Eigen::OuterStride<>(op.ld)));
}

// Per-GEMM work (multiply-adds) below which a batch is better spread over threads one matrix
// each than split inside every GEMM (about a 128^3 product: below it Eigen's own split spends
// a large share of the time starting threads and waiting at its barriers).
constexpr double kSmallGemm = 128.0 * 128.0 * 128.0;

template <class T>
void matmul_typed(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  T* c = out.data<T>();
  if (K == 0) {  // an empty sum: Eigen would handle it, but its maps need real pointers
    Eigen::Map<RowMajorMatrix<T>>(c, B * M, N).setZero();
    return;
  }
  const Operand A = make_operand(a), Bop = make_operand(b);

  auto one = [&](int64_t i) {
    Eigen::Map<RowMajorMatrix<T>> C(c + i * M * N, M, N);
    with_matrix<T>(A, i, M, K, [&](const auto& Am) {
      with_matrix<T>(Bop, i, K, N, [&](const auto& Bm) { C.noalias() = Am * Bm; });
    });
  };

  // Over the batch when there are several small products, or when the batch divides evenly
  // among the threads (each thread then runs whole GEMMs with no synchronisation at all).
  const int threads = omp_get_max_threads();
  const double work = (double)M * (double)N * (double)K;
  const bool over_batch = B > 1 && threads > 1 && !omp_in_parallel() &&
                          (work < kSmallGemm || B % threads == 0 || B >= 4 * threads);
  if (over_batch) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < B; ++i) one(i);
  } else {
    for (int64_t i = 0; i < B; ++i) one(i);  // each GEMM uses Eigen's threads
  }
}

void cpu_matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  OCRT_DISPATCH_FLOAT(out.dtype(), "matmul", [&] { matmul_typed<scalar_t>(a, b, out); });
}

}  // namespace

namespace cpu {

void matmul_reference(const Tensor& a, const Tensor& b, const Tensor& out) {
  OCRT_CHECK(a.dim() == 3 && b.dim() == 3 && out.dim() == 3 && out.is_contiguous(),
             "matmul_reference: expected a (B,M,K), b (B,K,N) and a contiguous out (B,M,N)");
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  OCRT_DISPATCH_FLOAT(out.dtype(), "matmul_reference", [&] {
    using T = scalar_t;
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    T* op = out.data<T>();
    for (int64_t i = 0; i < B; ++i)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc += (double)ap[i * a.stride(0) + m * a.stride(1) + k * a.stride(2)] *
                   (double)bp[i * b.stride(0) + k * b.stride(1) + n * b.stride(2)];
          op[(i * M + m) * N + n] = (T)acc;
        }
  });
}

}  // namespace cpu

void register_cpu_linalg(Backend& b) { b.matmul = cpu_matmul; }

}  // namespace ocrt
