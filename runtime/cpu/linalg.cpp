// CPU matrix product: out[i] = a[i] @ b[i] for a (B,M,K), b (B,K,N), out (B,M,N) contiguous,
// float32 or float64. The front-end (ops/linalg.cpp) has already broadcast and flattened the
// batch dims and passes transposed operands as strided views.
//
// The work is done by Eigen's GEMM, which reads each matrix through an Eigen::Map over the
// tensor's own memory, laid out by matrix_operand (runtime/strided.h, shared with CUDA):
//   - a matrix whose rows are contiguous (column stride 1) is a row-major map whose outer
//     stride is the row stride;
//   - a matrix whose columns are contiguous (row stride 1), such as w.t() of a contiguous w,
//     is a column-major map: a transposed operand costs nothing;
//   - anything else (an expanded inner dim, a slice with a step) is copied to a contiguous
//     buffer first, once for the whole operand.
// Eigen packs both operands into cache-sized panels itself, so the layout of the map changes
// which packing routine runs, not the speed of the inner kernel.
//
// Threads: ocrt splits the work itself and every Eigen GEMM runs on one thread. The output
// is cut into tasks (whole products of a batch, and bands of rows or columns of a product when
// there are fewer products than threads) that one OpenMP loop shares out; inside a parallel
// region Eigen sees omp_get_num_threads() > 1 and stays single-threaded
// (Eigen/src/Core/products/Parallelizer.h), so the two levels never multiply. Why not Eigen's
// own parallel GEMM for a single large product: its threads share packed blocks and spin-wait
// on each other many times per product, while these tasks meet only once, at the end. Measured
// side by side on 2 threads (bench/results/core.md): as fast from 512^3 up, 2.7x faster at
// 256^3, and much less hurt when another process takes a core for a moment.
//
// Results are deterministic for a given thread count: every output element is computed by
// one GEMM call with a fixed order of operations.
//
// float32 on a CPU with AVX2 + FMA or AVX-512 (cpu::sgemm_available(), runtime/cpu/gemm.h) does not
// use Eigen but ocrt's own packed GEMM, faster than Eigen's on both (bench/results/core.md), in
// float32 or bf16 (cpu::matmul_precision()). It reads
// any strides through its packing, so no operand is ever copied, and it shares one product among
// the threads itself (its threads share the packed B blocks). Several products are instead given
// out whole, one per thread, when they divide evenly among the threads (or are many): then
// nothing is shared and the threads never wait for each other. Its results do not depend on the
// thread count at all.
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <numeric>

#include "runtime/backend.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/linalg_reference.h"
#include "runtime/strided.h"

namespace ocrt {

namespace {

template <class T>
using RowMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ColMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
template <class M>
using StridedMap = Eigen::Map<const M, Eigen::Unaligned, Eigen::OuterStride<>>;

// Calls f with the Eigen map of matrix i of the operand.
template <class T, class F>
void with_matrix(const MatrixOperand& op, int64_t i, int64_t rows, int64_t cols, F&& f) {
  const T* p = static_cast<const T*>(op.data) + i * op.batch_stride;
  if (!op.col_major)
    f(StridedMap<RowMajorMatrix<T>>(p, rows, cols, Eigen::OuterStride<>(op.ld)));
  else
    f(StridedMap<ColMajorMatrix<T>>(p, rows, cols, Eigen::OuterStride<>(op.ld)));
}

// Below this many multiply-adds in total a product runs on the calling thread. It is Eigen's
// own threshold for starting a second thread (Parallelizer.h: 50000 per thread), so Eigen does
// not start threads for these products either.
constexpr double kParallelWork = 100000;
// A tile is at least this many rows or columns of the output.
constexpr int64_t kMinTile = 32;

template <class T>
void matmul_typed(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  T* c = out.data<T>();
  if (K == 0) {  // an empty sum; and the maps below need real pointers
    Eigen::Map<RowMajorMatrix<T>>(c, B * M, N).setZero();
    return;
  }
  const MatrixOperand A = matrix_operand(a), Bop = matrix_operand(b);  // runtime/strided.h

  // Work is cut into tasks: `tiles` tiles per product, each a band of output rows (or
  // columns, when N > M) computed by one single-threaded Eigen GEMM. B * tiles is made a
  // multiple of the thread count, so every thread gets the same share.
  const int threads = omp_get_max_threads();
  const double work = (double)B * M * N * K;
  const bool parallel = threads > 1 && !omp_in_parallel() && work >= kParallelWork;
  const bool split_rows = M >= N;
  const int64_t len = split_rows ? M : N;
  int64_t tiles = parallel ? threads / std::gcd((int64_t)threads, B) : 1;
  while (tiles > 1 && len / tiles < kMinTile) --tiles;
  // Band j starts at the multiple of 16 (a whole SIMD register of floats) at or below j/tiles
  // of the way; bands are at least kMinTile / 2 long.
  auto band_start = [&](int64_t j) { return j == tiles ? len : j * len / tiles / 16 * 16; };

  auto task = [&](int64_t t) {
    const int64_t i = t / tiles, lo = band_start(t % tiles), n = band_start(t % tiles + 1) - lo;
    T* ci = c + i * M * N;
    with_matrix<T>(A, i, M, K, [&](const auto& Am) {
      with_matrix<T>(Bop, i, K, N, [&](const auto& Bm) {
        if (split_rows) {  // rows lo..lo+n of C = those rows of A times B
          Eigen::Map<RowMajorMatrix<T>> C(ci + lo * N, n, N);
          C.noalias() = Am.middleRows(lo, n) * Bm;
        } else {  // columns lo..lo+n of C = A times those columns of B
          Eigen::Map<RowMajorMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>> C(ci + lo, M, n,
                                                                                   Eigen::OuterStride<>(N));
          C.noalias() = Am * Bm.middleCols(lo, n);
        }
      });
    });
  };
  const int64_t tasks = B * tiles;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < tasks; ++t) task(t);
}

#if defined(OCRT_CPU_SGEMM)
// One product C (M x N, row stride N) = A (M x K) @ B (K x N) by the packed kernel. A product
// with a long K and a C much wider than tall (a linear layer's weight gradient g^T x where the
// layer widens, as an MLP's second layer does: 128 x 512 from 4096 tokens) runs as C^T = B^T A^T
// into scratch, transposed into C afterwards. The kernel's threads split C's rows: each packs
// only its own rows of A but all of each B block, so the wider operand, which comes cold from
// memory (activations saved in the forward pass), is better as A. Cycling through 24 sets of
// operands (larger than the L3) on the 2-vCPU Zen 3 with each thread packing its own B blocks
// (runtime/cpu/gemm_loops.inc): 128 x 512 x 4096 ran at 125 GFLOP/s as it is and 144 transposed,
// 256 x 1024 x 2048 at 146 and 151 (with the B blocks packed together, before: 64 x 256 x 8192 at
// 74 and 101, 256 x 1024 x 2048 at 110 and 126). The sums are the same bits: each value of C is
// the same k-ordered sum of the same products, in the same KC blocks, either way (FMA does not
// care which factor is which).
void sgemm_product(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_row, int64_t a_col, const float* b,
                   int64_t b_row, int64_t b_col, float* c) {
  if (N < 2 * M || K < N) return cpu::sgemm(M, N, K, a, a_row, a_col, b, b_row, b_col, c, N);
  // The scratch from the tensor allocator, like every other tensor of a training step: its
  // cache hands the same block back when the next step makes the same product.
  const Tensor scratch = Tensor::empty({N, M});  // every value written by the product
  float* const ct = scratch.data<float>();
  cpu::sgemm(N, M, K, b, b_col, b_row, a, a_col, a_row, ct, M);
  constexpr int64_t kTile = 32;
  const int64_t row_tiles = (M + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && (double)M * N >= kParallelWork)
  for (int64_t ti = 0; ti < row_tiles; ++ti)
    for (int64_t j0 = 0; j0 < N; j0 += kTile)
      for (int64_t i = ti * kTile; i < std::min(M, (ti + 1) * kTile); ++i)
        for (int64_t j = j0; j < std::min(N, j0 + kTile); ++j) c[i * N + j] = ct[(size_t)(j * M + i)];
}

void matmul_sgemm(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* c = out.data<float>();
  const int64_t a_batch = a.size(0) == 1 ? 0 : a.stride(0), b_batch = b.size(0) == 1 ? 0 : b.stride(0);
  const int threads = omp_get_max_threads();
  const bool per_product = threads > 1 && !omp_in_parallel() && B >= threads &&
                           (B % threads == 0 || B >= 4 * threads) && (double)B * M * N * K >= kParallelWork;
  auto product = [&](int64_t i) {
    sgemm_product(M, N, K, ap + i * a_batch, a.stride(1), a.stride(2), bp + i * b_batch, b.stride(1), b.stride(2),
                  c + i * M * N);
  };
  // Not one loop with `omp parallel for if (per_product)`: a false `if` still opens a (one
  // thread) region, and the parallel region sgemm opens inside it would be a nested one, which
  // libgomp serves with threads outside its pool (measured 2x slower at 256^3).
  if (per_product) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < B; ++i) product(i);  // in a parallel region: each sgemm on one thread
  } else {
    for (int64_t i = 0; i < B; ++i) product(i);  // each sgemm shares its product among the threads
  }
}
#endif

void cpu_matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
#if defined(OCRT_CPU_SGEMM)
  if (out.dtype() == DType::f32 && cpu::sgemm_available()) return matmul_sgemm(a, b, out);
#endif
  dispatch_float(out.dtype(), "matmul", [&](auto zero) { matmul_typed<decltype(zero)>(a, b, out); });
}

}  // namespace

namespace cpu {

void matmul_reference(const Tensor& a, const Tensor& b, const Tensor& out) {
  OCRT_CHECK(a.dim() == 3 && b.dim() == 3 && out.dim() == 3 && out.is_contiguous(),
             "matmul_reference: expected a (B,M,K), b (B,K,N) and a contiguous out (B,M,N)");
  const int64_t B = out.size(0), M = out.size(1), N = out.size(2), K = a.size(2);
  dispatch_float(out.dtype(), "matmul_reference", [&](auto zero) {
    using T = decltype(zero);
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

void register_cpu_linalg(TensorBackend& b) { b.matmul = cpu_matmul; }

}  // namespace ocrt
