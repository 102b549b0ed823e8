// Packed GEMM (float32, or bf16 with float32 sums) with a micro-kernel per instruction set, in
// the style of BLIS (Van Zee & van de Geijn, "BLIS: A Framework for Rapidly Instantiating BLAS
// Functionality", 2015) and GotoBLAS (Goto & van de Geijn, "Anatomy of High-Performance Matrix Multiplication", 2008).
//
// Why ocrt has its own: Eigen 3.4's kernels keep too few of the vector registers as accumulators.
// Its AVX-512 kernel reaches about 70% of a hand-written one on the project's Zen 5 machines, its
// AVX2 kernel about 60% of OpenBLAS's on the Zen 3 ones (bench/results/core.md has the figures).
//
// C = A @ B is computed as a sum of small outer products. Five loops cut the work so that each
// operand is read from the cache level it fits in:
//
//   for jc over N in steps of NC            B block (KC x NC), shared by all threads: L3
//     for pc over K in steps of KC          pack B[pc:pc+KC, jc:jc+NC] into NR-column panels
//       for ic over this thread's rows, MC  pack A[ic:ic+MC, pc:pc+KC] into MR-row panels: L2
//         for jr over the block's NR panels B micro-panel (KC x NR): L2/L1, reused over ir
//           for ir over the block's MR panels
//             micro-kernel: C[MR x NR] += A panel (MR x KC) @ B panel (KC x NR)
//
// Packing copies a block into the exact order the micro-kernel reads it (A: MR values of one
// column after another; B: NR values of one row after another), so the kernel only ever streams
// through contiguous memory, whatever the strides of the operands; edges are padded with zeros.
//
// The micro-kernel keeps an MR x NR tile of C in vector registers. Per step of k it loads the
// NR values of B's row (NV vectors), broadcasts the MR values of A's column one at a time, and
// does MR x NV FMAs (the bf16 kernel: two values of k per step, runtime/cpu/gemm_avx512bf16.cpp;
// the AMX kernel keeps its tile in tile registers instead, runtime/cpu/gemm_amx.cpp).
//
// Threads split the rows of C (whole MR panels), and each packs its own A blocks and its own
// copy of each B block: B is packed once per thread, a small cost beside the products (1 / M of
// a packed value per multiply-add on 2 threads), and the threads never wait for each other
// before the product's end (gemm_loops.inc says why that matters). A product with fewer row
// panels than threads (an LSTM step on a few lines) is split by its columns instead (whole NR
// panels of each block), every thread packing all of the few rows of A and the threads packing
// each B block together: two barriers per (jc, pc) block.
//
// Files: the loops above are runtime/cpu/gemm_loops.inc, compiled once per instruction set by
// runtime/cpu/gemm_avx2.cpp, gemm_avx512.cpp, gemm_avx512bf16.cpp and gemm_amx.cpp, each of which sets its tile,
// blocks and micro-kernel. This file picks one at run time: the path cpu_isa() chose at start-up
// (runtime/cpu_isa.h) and the precision set by set_matmul_precision().
#include "runtime/cpu/gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <vector>

#include "runtime/cpu/gemm_kernels.h"
#include "runtime/error.h"

namespace ocrt::cpu {

namespace {

std::atomic<MatmulPrecision> g_precision{MatmulPrecision::f32};

}  // namespace

const char* matmul_precision_name(MatmulPrecision p) { return p == MatmulPrecision::bf16 ? "bf16" : "fp32"; }

MatmulPrecision parse_matmul_precision(const std::string& name) {
  if (name == "fp32") return MatmulPrecision::f32;
  if (name == "bf16") return MatmulPrecision::bf16;
  throw Error("unknown precision '" + name + "' (expected fp32 or bf16)");
}

void set_matmul_precision(MatmulPrecision p) {
#if defined(OCRT_CPU_SGEMM)
  const bool has_gemm = sgemm_available();
#else
  const bool has_gemm = false;
#endif
  if (p == MatmulPrecision::bf16 && !has_gemm)
    throw Error(std::string("bf16 matrix products need a CPU with AVX2 and FMA at least (this one runs the '") +
                cpu_isa_name(cpu_isa()) + "' path)");
  g_precision.store(p, std::memory_order_relaxed);
}

MatmulPrecision matmul_precision() { return g_precision.load(std::memory_order_relaxed); }

#if defined(OCRT_CPU_SGEMM)

namespace {

// The kernel for a path and precision. Paths above avx512 use the avx512 float32 kernel; bf16
// uses AMX tiles or vdpbf16ps where the CPU has them and rounded operands in the float32 kernel
// elsewhere.
detail::GemmKernel kernel_for(CpuIsa isa, MatmulPrecision p) {
  const bool bf16 = p == MatmulPrecision::bf16;
  switch (isa) {
    case CpuIsa::generic: break;
    case CpuIsa::avx2: return bf16 ? detail::avx2_bf16_rounded() : detail::avx2_f32();
    case CpuIsa::avx512: return bf16 ? detail::avx512_bf16_rounded() : detail::avx512_f32();
    case CpuIsa::avx512bf16: return bf16 ? detail::avx512bf16_bf16() : detail::avx512_f32();
    case CpuIsa::amx: return bf16 ? detail::amx_bf16() : detail::avx512_f32();
  }
  throw Error("ocrt's GEMM needs AVX2 and FMA at least: this CPU runs the 'generic' path (Eigen)");
}

// The four kernels of the path chosen at start-up, looked up once.
struct Chosen {
  CpuIsa isa;
  detail::GemmKernel f32, bf16;
};
const Chosen& chosen() {
  static const Chosen c = [] {
    const CpuIsa isa = cpu_isa();
    if (isa == CpuIsa::generic) return Chosen{isa, {}, {}};
    // Where AVX-512 runs at AVX2's rate (cpu_avx512_fma_is_split), the AVX2 float32 kernel is faster.
    const CpuIsa f32_isa = isa >= CpuIsa::avx512 && cpu_avx512_fma_is_split() ? CpuIsa::avx2 : isa;
    return Chosen{isa, kernel_for(f32_isa, MatmulPrecision::f32), kernel_for(isa, MatmulPrecision::bf16)};
  }();
  return c;
}

// The B matrices this thread has packed for reuse (SgemmReusedB), innermost last.
struct ReusedB {
  const float* B;
  int64_t K, N, b_row, b_col;
  MatmulPrecision precision;
  const void* packed;
};
thread_local std::vector<ReusedB> t_reused;

// The packed form of this call's B, when this thread packed it for reuse; else null.
const void* reused_packing(MatmulPrecision p, int64_t N, int64_t K, const float* B, int64_t b_row, int64_t b_col) {
  for (auto it = t_reused.rbegin(); it != t_reused.rend(); ++it)
    if (it->B == B && it->K == K && it->N == N && it->b_row == b_row && it->b_col == b_col && it->precision == p)
      return it->packed;
  return nullptr;
}

}  // namespace

struct SgemmReusedB::Packed {
  std::shared_ptr<const SgemmPackedB> b;  // none where nothing is packed
};

SgemmReusedB::SgemmReusedB(int64_t K, int64_t N, const float* B, int64_t ldb_row, int64_t ldb_col, int64_t rows)
    : packed_(new Packed) {
  const MatmulPrecision p = matmul_precision();
  // The float32 kernels' few_rows (gemm_loops.inc) reads such a B straight: packing it would be
  // wasted. An empty product reads no B at all.
  if ((p == MatmulPrecision::f32 && rows <= kSgemmFewRows && ldb_col == 1) || K <= 0 || N <= 0) return;
  packed_->b = std::make_unique<SgemmPackedB>(K, N, B, ldb_row, ldb_col);
  t_reused.push_back({B, K, N, ldb_row, ldb_col, p, packed_->b->buffer_.get()});
}

SgemmReusedB::SgemmReusedB(std::shared_ptr<const SgemmPackedB> packed, const float* B, int64_t ldb_row,
                           int64_t ldb_col)
    : packed_(new Packed{std::move(packed)}) {
  const SgemmPackedB& b = *packed_->b;
  OCRT_CHECK(b.precision_ == matmul_precision(), "SgemmReusedB: B was packed in ", matmul_precision_name(b.precision_),
             ", the products now run in ", matmul_precision_name(matmul_precision()));
  OCRT_CHECK(b.b_row_ == ldb_row && b.b_col_ == ldb_col, "SgemmReusedB: B was packed from strides (", b.b_row_, ", ",
             b.b_col_, "), not (", ldb_row, ", ", ldb_col, ")");
  t_reused.push_back({B, b.K_, b.N_, ldb_row, ldb_col, b.precision_, b.buffer_.get()});
}

SgemmReusedB::~SgemmReusedB() {
  for (auto it = t_reused.rbegin(); packed_->b && it != t_reused.rend(); ++it)
    if (it->packed == packed_->b->buffer_.get()) {
      t_reused.erase(std::next(it).base());
      break;
    }
  delete packed_;
}

SgemmPackedB::SgemmPackedB(int64_t K, int64_t N, const float* B, int64_t ldb_row, int64_t ldb_col)
    : K_(K), N_(N), b_row_(ldb_row), b_col_(ldb_col), precision_(matmul_precision()), buffer_(nullptr, &std::free) {
  const detail::GemmKernel& k = precision_ == MatmulPrecision::bf16 ? chosen().bf16 : chosen().f32;
  OCRT_CHECK(k.run != nullptr, "SgemmPackedB: this CPU runs the 'generic' path, which has no GEMM kernel of ocrt's");
  OCRT_CHECK(K >= 1 && N >= 1, "SgemmPackedB: B must be at least 1 x 1, got ", K, " x ", N);
  bytes_ = (size_t)std::max<int64_t>(64, (k.packed_b_bytes(K, N) + 63) / 64 * 64);
  buffer_.reset(static_cast<float*>(std::aligned_alloc(64, bytes_)));
  OCRT_CHECK(buffer_ != nullptr, "SgemmPackedB: out of memory packing a ", K, " x ", N, " matrix");
  detail::GemmArgs g{0, N, K, nullptr, 0, 0, B, ldb_row, ldb_col, nullptr, 0, false};
  k.pack_b(g, buffer_.get());
}

void sgemm_packed(int64_t M, const float* A, int64_t lda_row, int64_t lda_col, const SgemmPackedB& B, float* C,
                  int64_t ldc, bool accumulate) {
  OCRT_CHECK(B.precision_ == matmul_precision(), "sgemm_packed: B was packed in ", matmul_precision_name(B.precision_),
             ", the products now run in ", matmul_precision_name(matmul_precision()));
  const detail::GemmKernel& k = B.precision_ == MatmulPrecision::bf16 ? chosen().bf16 : chosen().f32;
  // B itself is not kept: the kernels read the packing (few_rows, which reads B straight, is
  // skipped for a packed B: gemm_loops.inc).
  k.run({M, B.N_, B.K_, A, lda_row, lda_col, nullptr, B.b_row_, B.b_col_, C, ldc, accumulate, B.buffer_.get()});
}

SgemmPackedA::SgemmPackedA(int64_t M, int64_t K, const float* A, int64_t lda_row, int64_t lda_col)
    : M_(M), K_(K), precision_(matmul_precision()), buffer_(nullptr, &std::free) {
  const detail::GemmKernel& k = precision_ == MatmulPrecision::bf16 ? chosen().bf16 : chosen().f32;
  OCRT_CHECK(k.run != nullptr, "SgemmPackedA: this CPU runs the 'generic' path, which has no GEMM kernel of ocrt's");
  OCRT_CHECK(M >= 1 && K >= 1, "SgemmPackedA: A must be at least 1 x 1, got ", M, " x ", K);
  bytes_ = (size_t)std::max<int64_t>(64, (k.packed_a_bytes(M, K) + 63) / 64 * 64);
  buffer_.reset(static_cast<float*>(std::aligned_alloc(64, bytes_)));
  OCRT_CHECK(buffer_ != nullptr, "SgemmPackedA: out of memory packing a ", M, " x ", K, " matrix");
  detail::GemmArgs g{M, 0, K, A, lda_row, lda_col, nullptr, 0, 0, nullptr, 0, false};
  k.pack_a_all(g, buffer_.get());
}

void sgemm_packed_a(const SgemmPackedA& A, int64_t N, const float* B, int64_t ldb_row, int64_t ldb_col, float* C,
                    int64_t ldc, bool accumulate) {
  OCRT_CHECK(A.precision_ == matmul_precision(), "sgemm_packed_a: A was packed in ",
             matmul_precision_name(A.precision_), ", the products now run in ", matmul_precision_name(matmul_precision()));
  const detail::GemmKernel& k = A.precision_ == MatmulPrecision::bf16 ? chosen().bf16 : chosen().f32;
  detail::GemmArgs g{A.M_, N, A.K_, nullptr, 0, 0, B, ldb_row, ldb_col, C, ldc, accumulate};
  g.packed_a = A.buffer_.get();
  k.run(g);
}

SgemmBf16Pairs sgemm_bf16_pairs_layout() {
  if (chosen().isa != CpuIsa::avx512bf16) return {};
  const SgemmBlocking b = chosen().bf16.blocking;
  return {b.nr, b.kc, b.nc};
}

void sgemm_packed_ab(const SgemmPackedA& A, int64_t N, const uint32_t* packed_b, float* C, int64_t ldc) {
  const SgemmBf16Pairs layout = sgemm_bf16_pairs_layout();
  OCRT_CHECK(layout.nr > 0 && A.precision_ == MatmulPrecision::bf16 && matmul_precision() == MatmulPrecision::bf16,
             "sgemm_packed_ab: bf16 products on the avx512bf16 path only");
  OCRT_CHECK(A.K_ % 2 == 0 && A.K_ <= layout.kc && N >= 1 && N <= layout.nc, "sgemm_packed_ab: B of ", A.K_, " x ", N,
             " does not fit one block of ", layout.kc, " x ", layout.nc, " with K even");
  detail::GemmArgs g{A.M_, N, A.K_, nullptr, 0, 0, nullptr, 0, 0, C, ldc, false, packed_b};
  g.packed_a = A.buffer_.get();
  chosen().bf16.run(g);
}

bool sgemm_available() { return chosen().isa != CpuIsa::generic; }

SgemmBlocking sgemm_blocking(CpuIsa isa, MatmulPrecision p) { return kernel_for(isa, p).blocking; }

SgemmBlocking sgemm_blocking() {
  const Chosen& c = chosen();
  return (matmul_precision() == MatmulPrecision::bf16 ? c.bf16 : c.f32).blocking;
}

void sgemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda_row, int64_t lda_col, const float* B,
           int64_t ldb_row, int64_t ldb_col, float* C, int64_t ldc, bool accumulate) {
  const Chosen& c = chosen();
  const detail::GemmKernel& k = matmul_precision() == MatmulPrecision::bf16 ? c.bf16 : c.f32;
  OCRT_CHECK(k.run != nullptr, "sgemm: this CPU runs the 'generic' path, which has no GEMM kernel of ocrt's");
  const void* packed = t_reused.empty() ? nullptr : reused_packing(matmul_precision(), N, K, B, ldb_row, ldb_col);
  k.run({M, N, K, A, lda_row, lda_col, B, ldb_row, ldb_col, C, ldc, accumulate, packed});
}

void sgemm_on(CpuIsa isa, MatmulPrecision p, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda_row,
              int64_t lda_col, const float* B, int64_t ldb_row, int64_t ldb_col, float* C, int64_t ldc,
              bool accumulate) {
  if (!cpu_isa_supported(isa))
    throw Error(std::string("sgemm_on: this CPU cannot run the '") + cpu_isa_name(isa) + "' path");
  kernel_for(isa, p).run({M, N, K, A, lda_row, lda_col, B, ldb_row, ldb_col, C, ldc, accumulate});
}

#endif  // OCRT_CPU_SGEMM

}  // namespace ocrt::cpu
