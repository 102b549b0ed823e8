// ocrt's own matrix product on the CPU, in float32 or bf16, with a kernel for each instruction-set
// path (runtime/cpu_isa.h) compiled into every x86-64 build and chosen at run time.
// runtime/cpu/gemm.cpp explains the algorithm, runtime/cpu/gemm_<isa>.cpp hold the kernels.
//
//   path         float32 kernel                     bf16 kernel
//   avx2         6 x 16 tile, FMA                   operands rounded to bf16 when packed, then
//                                                   the float32 kernel (the same numbers, no faster)
//   avx512       14 x 32 tile, FMA                  the same, with the avx512 float32 kernel
//   avx512bf16   avx512's                           14 x 32 tile, vdpbf16ps on bf16 pairs
//   amx          avx512's                           32 x 32 tile in four AMX tiles, tdpbf16ps
//
// Where the CPU has no AVX2 (path `generic`) or the build is not for x86-64 (OCRT_CPU_SGEMM not
// defined), runtime/cpu/linalg.cpp and ops/cpu/conv.cpp use Eigen, in float32 only.
//
// What bf16 means here (the same on every path): each element of A and B is rounded to bf16
// (runtime/bf16.h: nearest, ties to even, denormals to zero) and the products are summed in
// float32. A product of two bf16 values is exact in float32, so the error against the float32
// product comes from the two roundings (2^-8 relative each) and the float32 sum, and is bounded by
// (2^-7 + 2^-16 + gamma_K) sum_k |a_ik b_kj| (tests/tolerance.h, bf16_product_tolerance).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "runtime/cpu_isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OCRT_CPU_SGEMM 1
#endif

namespace ocrt::cpu {

// The number format a CPU matrix product rounds its operands to.
enum class MatmulPrecision { f32, bf16 };

// "fp32" or "bf16"; parse_ throws on anything else.
const char* matmul_precision_name(MatmulPrecision p);
MatmulPrecision parse_matmul_precision(const std::string& name);

// The precision of every float32 matrix product and convolution on the CPU from now on (the
// process-wide default is f32). bf16 needs the AVX2 path at least (it throws on `generic`).
// Set it before ops run, from one thread (ocrt-infer's and ocrt-train's --precision do).
void set_matmul_precision(MatmulPrecision p);
MatmulPrecision matmul_precision();

// Sets a precision for its lifetime and restores the previous one (tests, benchmarks).
class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(MatmulPrecision p) : previous_(matmul_precision()) { set_matmul_precision(p); }
  ~MatmulPrecisionScope() { set_matmul_precision(previous_); }
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  MatmulPrecision previous_;
};

// The first cache-line boundary (64 bytes) at or after p, in a buffer the AMX tiles read in
// rows of 64 bytes (such a buffer holds 64 bytes more than its contents): a std::vector's data
// is 16 bytes off a line, which split every tile row over two lines and halved the tiles' rate.
template <class T>
T* cache_line_start(T* p) {
  static_assert(64 % sizeof(T) == 0, "an element never straddles a cache line");
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<T*>((at + 63) / 64 * 64);
}

#if defined(OCRT_CPU_SGEMM)

// Whether this machine runs ocrt's GEMM at all (its path is not `generic`).
bool sgemm_available();

// The register tile (mr x nr, in elements of C) and cache blocks (kc, mc, nc) of one kernel, so
// that tests can pick sizes on and around every edge.
struct SgemmBlocking {
  int64_t mr, nr, kc, mc, nc;
};
SgemmBlocking sgemm_blocking(CpuIsa isa, MatmulPrecision p);
SgemmBlocking sgemm_blocking();  // the kernel that sgemm() uses now

// C = A @ B (or C += A @ B with accumulate) for A (M,K), B (K,N), C (M,N), float32 in memory,
// in the current matmul_precision() on the path cpu_isa().
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

// The same on a given path and precision (tests and benchmarks compare the paths); throws when
// this machine cannot run `isa` or isa is `generic`.
void sgemm_on(CpuIsa isa, MatmulPrecision p, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda_row,
              int64_t lda_col, const float* B, int64_t ldb_row, int64_t ldb_col, float* C, int64_t ldc,
              bool accumulate = false);

// Products of at most this many rows, in float32, whose B rows are contiguous read B straight,
// unpacked (docs/ops/gemm.md, "A few rows"): packing B would cost as much as the product.
constexpr int64_t kSgemmFewRows = 4;

// One B used again and again (an LSTM's recurrent weight, at every time step) in products of
// `rows` rows: while this lives, sgemm() calls made on this thread whose B is this matrix (the
// same pointer, K, N and strides, in the precision of the moment it was made) read it packed
// once, here, instead of packing it at every call. The results are the same bits. Where such
// products read B unpacked anyway (kSgemmFewRows above) nothing is packed. B must not change
// while this lives. Scopes nest (the innermost match wins) and end in reverse order of
// creation, on the thread that made them.
class SgemmPackedB;
class SgemmReusedB {
 public:
  SgemmReusedB(int64_t K, int64_t N, const float* B, int64_t ldb_row, int64_t ldb_col, int64_t rows);
  // The same scope for a packing made before (of this B, with these strides, in the precision
  // of the moment; a caller that keeps packings between calls must know B has not changed),
  // lent to this thread's sgemm() calls while this lives: nothing is packed here.
  SgemmReusedB(std::shared_ptr<const SgemmPackedB> packed, const float* B, int64_t ldb_row, int64_t ldb_col);
  ~SgemmReusedB();
  SgemmReusedB(const SgemmReusedB&) = delete;
  SgemmReusedB& operator=(const SgemmReusedB&) = delete;

 private:
  struct Packed;
  Packed* packed_;
};

// A B packed once and kept: for products on any thread while it lives, through sgemm_packed
// (the results are sgemm's with B itself, bit for bit). Unlike SgemmReusedB it is not tied to
// a thread or a scope, and it does not keep B: a caller that keeps it must know B has not
// changed (ops/cpu/winograd.cpp keeps transformed weights by their content). Packed for the
// path and the precision of the moment it is made; sgemm_packed refuses another precision.
class SgemmPackedB {
 public:
  SgemmPackedB(int64_t K, int64_t N, const float* B, int64_t ldb_row, int64_t ldb_col);
  int64_t rows() const { return K_; }
  int64_t cols() const { return N_; }
  size_t bytes() const { return bytes_; }
  MatmulPrecision precision() const { return precision_; }

 private:
  friend void sgemm_packed(int64_t, const float*, int64_t, int64_t, const SgemmPackedB&, float*, int64_t, bool);
  friend class SgemmReusedB;  // packs through this, and lends the packing to sgemm on its thread
  int64_t K_, N_, b_row_, b_col_;
  MatmulPrecision precision_;
  size_t bytes_ = 0;
  std::unique_ptr<float, void (*)(void*)> buffer_;
};

// C (M x B.cols()) = A (M x B.rows()) @ B, or += with accumulate, as sgemm.
void sgemm_packed(int64_t M, const float* A, int64_t lda_row, int64_t lda_col, const SgemmPackedB& B, float* C,
                  int64_t ldc, bool accumulate = false);

// An A packed once and kept, the counterpart of SgemmPackedB for products whose weights are
// their A (ops/cpu/winograd.cpp keeps each layer's 36 transformed weight planes so, between
// calls): C (A.rows() x N) = A @ B (K x N) through sgemm_packed_a, the same bits as sgemm with A
// itself, on any thread. It does not keep A. Packed for the path and precision of the moment it
// is made; sgemm_packed_a refuses another precision.
class SgemmPackedA {
 public:
  SgemmPackedA(int64_t M, int64_t K, const float* A, int64_t lda_row, int64_t lda_col);
  int64_t rows() const { return M_; }
  int64_t cols() const { return K_; }
  size_t bytes() const { return bytes_; }
  MatmulPrecision precision() const { return precision_; }

 private:
  friend void sgemm_packed_a(const SgemmPackedA&, int64_t, const float*, int64_t, int64_t, float*, int64_t, bool);
  friend void sgemm_packed_ab(const SgemmPackedA&, int64_t, const uint32_t*, float*, int64_t);
  int64_t M_, K_;
  MatmulPrecision precision_;
  size_t bytes_ = 0;
  std::unique_ptr<float, void (*)(void*)> buffer_;
};

// C (A.rows() x N) = A @ B (A.cols() x N), or += with accumulate, as sgemm.
void sgemm_packed_a(const SgemmPackedA& A, int64_t N, const float* B, int64_t ldb_row, int64_t ldb_col, float* C,
                    int64_t ldc, bool accumulate = false);

// Where the bf16 products of this path read B as pairs packed by vdpbf16ps's kernel (the
// avx512bf16 path; AMX and the paths that round float32 operands pack otherwise): its panel
// width nr and blocks kc (values of K) and nc (columns); all zero elsewhere. A B of K <= kc rows
// and N <= nc columns, K even, packed in that layout is ceil(N / nr) panels of K / 2 rows of nr
// uint32 pairs: element (k, j) is the low (k even) or high half of
//   packed[(j / nr) * nr * (K / 2) + (k / 2) * nr + j % nr]
// and columns past N in the last panel are zero. Products may then read such a B that its maker
// packed itself (ops/cpu/winograd.cpp writes its transformed tiles so), through sgemm_packed_ab.
struct SgemmBf16Pairs {
  int64_t nr = 0, kc = 0, nc = 0;
};
SgemmBf16Pairs sgemm_bf16_pairs_layout();

// C (A.rows() x N) = A @ B for A packed (SgemmPackedA, in bf16) and B packed by the caller in
// sgemm_bf16_pairs_layout()'s layout (A.cols() rows, even, at most kc; N at most nc). The same
// bits as sgemm_packed_a with B itself in float32 when B's pairs are its values rounded to bf16
// as the kernel rounds them (to nearest even).
void sgemm_packed_ab(const SgemmPackedA& A, int64_t N, const uint32_t* packed_b, float* C, int64_t ldc);

#endif  // OCRT_CPU_SGEMM

}  // namespace ocrt::cpu
