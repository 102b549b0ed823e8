// ocrt's packed GEMM (runtime/cpu/gemm.cpp) against a plain double-precision loop, on the
// instruction-set path this run takes (cpu_isa(): the best this CPU runs, or the one OCRT_CPU_ISA
// forces; tests/CMakeLists.txt runs these tests once per path, skipped where the CPU lacks it) and
// in both precisions: sizes on and off every block boundary of that kernel (its tile and block
// sizes come from sgemm_blocking()), K = 0, transposed, padded and broadcast (stride 0) operands,
// accumulation into C, and bit-identical results on 1, 2 and 3 threads.
// float32: each element within the forward-error bound of its dot product (tests/tolerance.h).
// bf16: the reference rounds every operand to bf16 first (runtime/bf16.h), so what is left is the
// same float32 bound: a kernel that rounded differently (truncation, or no rounding at all)
// would be off by about 2^-9 of every product and fail.
// Only built where the GEMM is (x86-64); runtime/cpu/linalg.cpp uses Eigen elsewhere.
#include <catch2/catch.hpp>

#include "runtime/cpu/gemm.h"

#if defined(OCRT_CPU_SGEMM)

#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "runtime/bf16.h"
#include "runtime/cpu/gemm_kernels.h"
#include "runtime/threading.h"
#include "tolerance.h"

using ocrt::CpuIsa;
using ocrt::cpu::MatmulPrecision;

namespace {

// The kernel under test: this run's path, in one precision.
struct Path {
  CpuIsa isa;
  MatmulPrecision precision;
  ocrt::cpu::SgemmBlocking blk;
};
Path path_for(MatmulPrecision p) {
  const CpuIsa isa = ocrt::cpu_isa();
  return {isa, p, ocrt::cpu::sgemm_blocking(isa, p)};
}

struct ThreadCountGuard {
  int saved = ocrt::num_threads();
  ~ThreadCountGuard() { ocrt::set_num_threads(saved); }
};

// Deterministic values in [-1, 1).
std::vector<float> values(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = (float)(seed >> 8) / (float)(1 << 23) - 1.f;
  }
  return v;
}

// How an operand (rows x cols) is laid out in memory.
enum class Layout {
  plain,       // row-major, strides (ld, 1)
  transposed,  // stored as its transpose (cols x rows): strides (1, ld)
  rows_same,   // one row repeated: strides (0, 1), as an expanded (1, cols) tensor
  cols_same,   // one column repeated: strides (1, 0), as an expanded (rows, 1) tensor
};

// An operand's strides and the floats its storage needs; `pad` lengthens its leading dimension.
struct Strides {
  int64_t row, col, storage;
};
Strides strides_of(Layout l, int64_t rows, int64_t cols, int64_t pad) {
  switch (l) {
    case Layout::plain: return {cols + pad, 1, rows * (cols + pad)};
    case Layout::transposed: return {1, rows + pad, cols * (rows + pad)};
    case Layout::rows_same: return {0, 1, cols};
    case Layout::cols_same: return {1, 0, rows};
  }
  return {};
}

// One product: A (M,K) and B (K,N) with the given layouts; C with row stride ldc = N + 2 where
// `pad` is set (the padding must stay untouched), and C's old values kept where `accumulate`.
struct Case {
  int64_t M, N, K;
  Layout a = Layout::plain, b = Layout::plain;
  bool pad = false, accumulate = false;
};

void check(const Path& path, const Case& c) {
  const bool bf16 = path.precision == MatmulPrecision::bf16;
  INFO("path " << ocrt::cpu_isa_name(path.isa) << " " << ocrt::cpu::matmul_precision_name(path.precision) << " M "
               << c.M << " N " << c.N << " K " << c.K << " a " << (int)c.a << " b " << (int)c.b << " pad " << c.pad
            << " accumulate " << c.accumulate);
  const Strides sa = strides_of(c.a, c.M, c.K, c.pad ? 3 : 0), sb = strides_of(c.b, c.K, c.N, c.pad ? 5 : 0);
  const int64_t ldc = c.N + (c.pad ? 2 : 0);
  const std::vector<float> a = values(sa.storage, 1 + (uint32_t)c.M), b = values(sb.storage, 2 + (uint32_t)c.N);
  const std::vector<float> c0 = values(c.M * ldc, 3 + (uint32_t)c.K);  // C before the call
  auto operand = [bf16](float x) { return (double)(bf16 ? ocrt::round_to_bf16(x) : x); };
  auto A = [&](int64_t i, int64_t k) { return operand(a[i * sa.row + k * sa.col]); };
  auto B = [&](int64_t k, int64_t j) { return operand(b[k * sb.row + j * sb.col]); };

  auto run = [&](int threads) {
    ocrt::set_num_threads(threads);
    std::vector<float> out = c0;
    ocrt::cpu::sgemm_on(path.isa, path.precision, c.M, c.N, c.K, a.data(), sa.row, sa.col, b.data(), sb.row, sb.col,
                        out.data(), ldc, c.accumulate);
    return out;
  };
  ThreadCountGuard guard;
  const std::vector<float> one = run(1);
  REQUIRE(one == run(2));  // bit-identical, padding included
  REQUIRE(one == run(3));  // threads get unequal shares of the tiles

  int64_t bad = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double sum = c.accumulate ? c0[i * ldc + j] : 0, abs_sum = std::abs(sum);
      for (int64_t k = 0; k < c.K; ++k) sum += A(i, k) * B(k, j), abs_sum += std::abs(A(i, k) * B(k, j));
      // K products added in float32 (and C's old value: one addition more), in the kernel's
      // order: within gamma_n of the sum of |terms|. Equal terms (broadcast operands) come close.
      // In bf16 the products of the rounded operands are exact in float32, so the same holds.
      const double got = one[i * ldc + j];
      const double tol = ocrt::testing::f32_reduction_tolerance(c.K + (c.accumulate ? 1 : 0), abs_sum);
      if (!(std::abs(got - sum) <= tol) && bad++ < 5)
        FAIL_CHECK("C(" << i << "," << j << ") = " << got << ", expected " << sum << ", tolerance " << tol);
    }
    for (int64_t j = c.N; j < ldc; ++j)
      if (one[i * ldc + j] != c0[i * ldc + j] && bad++ < 5) FAIL_CHECK("padding C(" << i << "," << j << ") was written");
  }
  REQUIRE(bad == 0);
}

}  // namespace

TEST_CASE("sgemm blocks hold whole register tiles", "[gemm]") {
  if (!ocrt::cpu::sgemm_available()) return;  // the generic path: Eigen, tested elsewhere
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  const auto& blk = path.blk;
  INFO("mr " << blk.mr << " nr " << blk.nr << " kc " << blk.kc << " mc " << blk.mc << " nc " << blk.nc);
  REQUIRE(blk.mr > 0);
  REQUIRE(blk.nr > 0);
  REQUIRE(blk.kc > 0);
  REQUIRE(blk.mc % blk.mr == 0);
  REQUIRE(blk.nc % blk.nr == 0);
}

TEST_CASE("sgemm matches a double loop on sizes around the tile edges", "[gemm]") {
  if (!ocrt::cpu::sgemm_available()) return;  // the generic path: Eigen, tested elsewhere
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  const auto& blk = path.blk;
  const int64_t ms[] = {1, 2, blk.mr - 1, blk.mr, blk.mr + 1, 2 * blk.mr + 3, 97};
  const int64_t ns[] = {1, 2, blk.nr - 1, blk.nr, blk.nr + 1, 3 * blk.nr + 5, 97};
  for (int64_t M : ms)
    for (int64_t N : ns)
      for (int64_t K : {1, 2, 13, 257}) check(path, {M, N, K});
  // Larger, odd sizes: several tiles of both kinds of edge at once.
  for (int64_t M : {257, 515})
    for (int64_t N : {33, 257, 515}) check(path, {M, N, 13});
}

TEST_CASE("sgemm's rows do not depend on where the tile edge falls: partial tiles give the full tile's bits", "[gemm]") {
  // C's first M rows from an M-row product (M < MR ends in a partial tile: edge_tile's scratch
  // tile, the bf16 kernel's partial_tile) equal the same rows of a product of 2 MR + 1
  // rows (whole tiles), bit for bit; also with a partial column edge, with K across KC blocks,
  // accumulating, and on the same rows read from a packed B (few_rows not taken).
  if (!ocrt::cpu::sgemm_available()) return;
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  ocrt::cpu::MatmulPrecisionScope scope(path.precision);
  const auto& blk = path.blk;
  const int64_t big = 2 * blk.mr + 1;
  for (int64_t N : {blk.nr, 2 * blk.nr, blk.nr + 5})
    for (int64_t K : {int64_t(7), blk.kc + 3}) {
      const std::vector<float> a = values(big * K, 61), b = values(K * N, 62), c0 = values(big * N, 63);
      for (bool accumulate : {false, true}) {
        std::vector<float> whole = c0;
        ocrt::cpu::sgemm(big, N, K, a.data(), K, 1, b.data(), N, 1, whole.data(), N, accumulate);
        const ocrt::cpu::SgemmPackedB packed(K, N, b.data(), N, 1);
        for (int64_t M = 1; M < blk.mr; ++M) {
          INFO("M " << M << " N " << N << " K " << K << " accumulate " << accumulate);
          std::vector<float> part(c0.begin(), c0.begin() + M * N), from_packed = part;
          ocrt::cpu::sgemm(M, N, K, a.data(), K, 1, b.data(), N, 1, part.data(), N, accumulate);
          ocrt::cpu::sgemm_packed(M, a.data(), K, 1, packed, from_packed.data(), N, accumulate);
          REQUIRE(std::equal(part.begin(), part.end(), whole.begin()));
          REQUIRE(from_packed == part);
        }
      }
    }
}

TEST_CASE("sgemm's columns do not depend on where the tile edge falls: partial columns give the full tile's bits", "[gemm]") {
  // C's first n columns from an n-column product (a partial panel: masked columns, and in bf16
  // a panel of at most 16 columns reads only its first column vector; in float32 a panel of at
  // most NR / 2 columns goes two row panels at a time on half the width) equal the same columns
  // of a product over a whole panel of NR columns, bit for bit, on full and partial rows, with K
  // across KC blocks and accumulating.
  if (!ocrt::cpu::sgemm_available()) return;
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  ocrt::cpu::MatmulPrecisionScope scope(path.precision);
  const auto& blk = path.blk;
  // 2 MR and 3 MR + 3 rows: pairs of row panels, then a whole and a partial one after them.
  for (int64_t M : {blk.mr, blk.mr + 3, 2 * blk.mr, 3 * blk.mr + 3})
    for (int64_t K : {int64_t(9), blk.kc + 3}) {
      const int64_t N = blk.nr;
      const std::vector<float> a = values(M * K, 71), b = values(K * N, 72), c0 = values(M * N, 73);
      for (bool accumulate : {false, true}) {
        std::vector<float> whole = c0;
        ocrt::cpu::sgemm(M, N, K, a.data(), K, 1, b.data(), N, 1, whole.data(), N, accumulate);
        for (int64_t n : {int64_t(1), int64_t(5), N / 2 - 1, N / 2, N / 2 + 1, int64_t(15), int64_t(16), int64_t(17),
                          N - 1}) {
          if (n >= N) continue;
          INFO("M " << M << " n " << n << " K " << K << " accumulate " << accumulate);
          std::vector<float> part(c0), b_cols((size_t)(K * n));
          for (int64_t k = 0; k < K; ++k)
            for (int64_t j = 0; j < n; ++j) b_cols[(size_t)(k * n + j)] = b[(size_t)(k * N + j)];
          // C rows N apart, its first n columns written: the columns past them must stay c0's.
          ocrt::cpu::sgemm(M, n, K, a.data(), K, 1, b_cols.data(), n, 1, part.data(), N, accumulate);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              const float want = j < n ? whole[(size_t)(i * N + j)] : c0[(size_t)(i * N + j)];
              REQUIRE(part[(size_t)(i * N + j)] == want);
            }
        }
      }
    }
}

TEST_CASE("sgemm across KC, MC and NC blocks", "[gemm]") {
  if (!ocrt::cpu::sgemm_available()) return;  // the generic path: Eigen, tested elsewhere
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  const auto& blk = path.blk;
  check(path, {3, 5, blk.kc + 6});              // two KC blocks, the second short
  check(path, {29, 40, 2 * blk.kc + 1});        // three KC blocks, the last of depth 1
  check(path, {blk.mr, blk.nr, blk.kc});        // exactly one tile, one KC block
  check(path, {2 * blk.mr, 2 * blk.nr, 2 * blk.kc});
  check(path, {blk.mc - 1, 17, 9});             // one MC block, one row short
  check(path, {blk.mc + 1, 17, 9});             // one row into the second MC block
  check(path, {2 * blk.mc + blk.mr + 3, 33, blk.kc + 1});  // several MC blocks per thread and two KC blocks
  check(path, {5, blk.nc + 7, 7});              // two NC blocks, the second short
  check(path, {blk.mr + 1, 2 * blk.nc + blk.nr - 1, 3});  // three NC blocks and edges in both directions
}

TEST_CASE("sgemm of 1-4 rows with contiguous B rows: the packed kernel's bits, straight from B", "[gemm]") {
  // Such products skip packing (few_rows in runtime/cpu/gemm_loops.inc: an LSTM step on one line)
  // and must give every C value the packed kernel's sums: rows 0..M-1 of a 6-row product (packed)
  // equal the M-row product bit for bit, across KC blocks, partial column blocks, threads and
  // accumulation. The double-loop bounds of check() hold as well.
  if (!ocrt::cpu::sgemm_available()) return;
  const Path path = path_for(MatmulPrecision::f32);
  const auto& blk = path.blk;
  ThreadCountGuard guard;
  for (int64_t N : {1, 7, 16, 33, 100, 1033})
    for (int64_t K : {(int64_t)1, (int64_t)13, (int64_t)256, (int64_t)(blk.kc + 7)})
      for (bool accumulate : {false, true}) {
        INFO("N " << N << " K " << K << " accumulate " << accumulate);
        const int64_t ldc = N + 2;
        const std::vector<float> a = values(6 * K, 11 + (uint32_t)K), b = values(K * N, 12 + (uint32_t)N);
        const std::vector<float> c0 = values(6 * ldc, 13);
        std::vector<float> big = c0;
        ocrt::cpu::sgemm_on(path.isa, path.precision, 6, N, K, a.data(), K, 1, b.data(), N, 1, big.data(), ldc, accumulate);
        for (int64_t M = 1; M <= 4; ++M)
          for (int threads : {1, 2}) {
            ocrt::set_num_threads(threads);
            std::vector<float> small(c0.begin(), c0.begin() + M * ldc);
            ocrt::cpu::sgemm_on(path.isa, path.precision, M, N, K, a.data(), K, 1, b.data(), N, 1, small.data(), ldc,
                                accumulate);
            REQUIRE(std::vector<float>(big.begin(), big.begin() + M * ldc) == small);
          }
      }
  for (int64_t M = 1; M <= 4; ++M) {
    check(path, {M, 1024 + 9, 300});
    check(path, {M, 77, blk.kc + 7, Layout::transposed, Layout::plain, true, true});
  }
}

TEST_CASE("sgemm with a B packed once for reuse gives the same bits as packing it every call", "[gemm]") {
  // SgemmReusedB (an LSTM's recurrent weight): products on this thread whose B matches read the
  // packing made once. Across several KC and NC blocks, partial tiles, both precisions, 1 and 2
  // threads, accumulation; a B that does not match (another pointer, other strides) is packed
  // as usual; scopes nest.
  if (!ocrt::cpu::sgemm_available()) return;
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  ocrt::cpu::MatmulPrecisionScope scope(path.precision);
  const auto& blk = path.blk;
  ThreadCountGuard guard;
  struct Shape3 {
    int64_t M, N, K;
  };
  for (const Shape3& sh : {Shape3{5, 1024, 256}, Shape3{37, 77, blk.kc + 9}, Shape3{13, blk.nc + 19, 2 * blk.kc + 3},
                           Shape3{6, 16, 1}}) {
    INFO("M " << sh.M << " N " << sh.N << " K " << sh.K << " precision " << ocrt::cpu::matmul_precision_name(path.precision));
    const std::vector<float> a = values(sh.M * sh.K, 31), b = values(sh.K * sh.N, 32), c0 = values(sh.M * sh.N, 33);
    const std::vector<float> b_other = values(sh.K * sh.N, 34);
    for (bool accumulate : {false, true})
      for (int threads : {1, 2}) {
        ocrt::set_num_threads(threads);
        // The same storage read another way (B's K x K corner transposed: other strides) is not
        // the reused matrix.
        const int64_t q = std::min(sh.N, sh.K);
        std::vector<float> plain = c0, reused = c0, t_plain = c0, t_inside = c0;
        ocrt::cpu::sgemm(sh.M, sh.N, sh.K, a.data(), sh.K, 1, b.data(), sh.N, 1, plain.data(), sh.N, accumulate);
        ocrt::cpu::sgemm(sh.M, q, q, a.data(), sh.K, 1, b.data(), 1, sh.N, t_plain.data(), q, accumulate);
        {
          ocrt::cpu::SgemmReusedB outer(sh.K, sh.N, b_other.data(), sh.N, 1, sh.M);  // another B: never matches
          ocrt::cpu::SgemmReusedB reuse(sh.K, sh.N, b.data(), sh.N, 1, sh.M);
          ocrt::cpu::sgemm(sh.M, sh.N, sh.K, a.data(), sh.K, 1, b.data(), sh.N, 1, reused.data(), sh.N, accumulate);
          ocrt::cpu::sgemm(sh.M, q, q, a.data(), sh.K, 1, b.data(), 1, sh.N, t_inside.data(), q, accumulate);
        }
        REQUIRE(reused == plain);
        REQUIRE(t_inside == t_plain);
        // The packing made at the start of the scope is what is read: changing B afterwards (which
        // a caller must not do) does not show inside the scope, and does after it.
        std::vector<float> bm = b, inside = c0, outside = c0;
        {
          ocrt::cpu::SgemmReusedB reuse(sh.K, sh.N, bm.data(), sh.N, 1, sh.M);
          for (float& v : bm) v = -v;
          ocrt::cpu::sgemm(sh.M, sh.N, sh.K, a.data(), sh.K, 1, bm.data(), sh.N, 1, inside.data(), sh.N, accumulate);
        }
        ocrt::cpu::sgemm(sh.M, sh.N, sh.K, a.data(), sh.K, 1, bm.data(), sh.N, 1, outside.data(), sh.N, accumulate);
        if (sh.M > 4) REQUIRE(inside == plain);  // 1-4 rows read B straight (few_rows), never packed
        CHECK(outside != plain);
        // After the scope, the same call packs again, with the same result.
        std::vector<float> after = c0;
        ocrt::cpu::sgemm(sh.M, sh.N, sh.K, a.data(), sh.K, 1, b.data(), sh.N, 1, after.data(), sh.N, accumulate);
        REQUIRE(after == plain);
      }
  }
}

TEST_CASE("sgemm_packed: a B packed once and kept gives sgemm's bits on any thread", "[gemm]") {
  // SgemmPackedB (Winograd's kept weights): B packed once, not tied to a thread or a scope;
  // row-major and transposed B, several KC and NC blocks, partial tiles, 1-5 rows (1-4 rows in
  // float32 read the packing through few_rows_packed_of: panels in groups of 4 / M and the rest,
  // on threads where the product is large), accumulation, both precisions, products from two
  // threads at once.
  if (!ocrt::cpu::sgemm_available()) return;
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  ocrt::cpu::MatmulPrecisionScope scope(path.precision);
  const auto& blk = path.blk;
  struct Shape3 {
    int64_t M, N, K;
  };
  for (const Shape3& sh : {Shape3{26, 512, 96}, Shape3{3, 77, blk.kc + 9}, Shape3{13, blk.nc + 19, 2 * blk.kc + 3},
                           Shape3{1, 16, 1}, Shape3{1, blk.nc + 7 * blk.nr + 5, 2 * blk.kc + 5},
                           Shape3{2, 9 * blk.nr + 3, 300}, Shape3{4, 1024, 256}, Shape3{1, 1024, 256}}) {
    for (bool transposed : {false, true}) {
      INFO("M " << sh.M << " N " << sh.N << " K " << sh.K << " transposed " << transposed);
      const std::vector<float> a = values(sh.M * sh.K, 41), b = values(sh.K * sh.N, 42), c0 = values(sh.M * sh.N, 43);
      // B (K x N) row-major, or the transpose of an N x K matrix (strides 1, K).
      const int64_t b_row = transposed ? 1 : sh.N, b_col = transposed ? sh.K : 1;
      const ocrt::cpu::SgemmPackedB packed(sh.K, sh.N, b.data(), b_row, b_col);
      CHECK(packed.rows() == sh.K);
      CHECK(packed.cols() == sh.N);
      for (bool accumulate : {false, true}) {
        std::vector<float> plain = c0;
        ocrt::cpu::sgemm(sh.M, sh.N, sh.K, a.data(), sh.K, 1, b.data(), b_row, b_col, plain.data(), sh.N, accumulate);
        std::vector<std::vector<float>> got(2, c0);
#pragma omp parallel for num_threads(2)
        for (int t = 0; t < 2; ++t)
          ocrt::cpu::sgemm_packed(sh.M, a.data(), sh.K, 1, packed, got[(size_t)t].data(), sh.N, accumulate);
        REQUIRE(got[0] == plain);
        REQUIRE(got[1] == plain);
      }
    }
  }
  // Packed in one precision, refused in the other.
  const std::vector<float> b = values(64, 44);
  const ocrt::cpu::SgemmPackedB packed(8, 8, b.data(), 8, 1);
  const MatmulPrecision other = path.precision == MatmulPrecision::f32 ? MatmulPrecision::bf16 : MatmulPrecision::f32;
  ocrt::cpu::MatmulPrecisionScope switched(other);
  std::vector<float> c(64);
  CHECK_THROWS_WITH(ocrt::cpu::sgemm_packed(8, b.data(), 8, 1, packed, c.data(), 8), Catch::Contains("was packed in"));
}

TEST_CASE("sgemm_packed_a: an A packed once and kept gives sgemm's bits, threaded or on two threads at once", "[gemm]") {
  // SgemmPackedA (Winograd's kept weights in the usual products): A packed once for all its KC
  // blocks and MR panels; row-major and transposed A, rows across MR and MC blocks (so that the
  // threads' row ranges start inside the packing), K across KC blocks, 1-5 rows, accumulation,
  // both precisions; one call shared by the threads, and two calls from two threads at once.
  if (!ocrt::cpu::sgemm_available()) return;
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  ocrt::cpu::MatmulPrecisionScope scope(path.precision);
  const auto& blk = path.blk;
  struct Shape3 {
    int64_t M, N, K;
  };
  for (const Shape3& sh : {Shape3{256, 300, 96}, Shape3{3, 77, blk.kc + 9}, Shape3{blk.mc + 2 * blk.mr + 5, 45, 2 * blk.kc + 3},
                           Shape3{1, 16, 1}, Shape3{5, blk.nc + 19, 31}}) {
    for (bool transposed : {false, true}) {
      INFO("M " << sh.M << " N " << sh.N << " K " << sh.K << " transposed " << transposed);
      const std::vector<float> a = values(sh.M * sh.K, 51), b = values(sh.K * sh.N, 52), c0 = values(sh.M * sh.N, 53);
      // A (M x K) row-major, or the transpose of a K x M matrix (strides 1, M).
      const int64_t a_row = transposed ? 1 : sh.K, a_col = transposed ? sh.M : 1;
      const ocrt::cpu::SgemmPackedA packed(sh.M, sh.K, a.data(), a_row, a_col);
      CHECK(packed.rows() == sh.M);
      CHECK(packed.cols() == sh.K);
      for (bool accumulate : {false, true}) {
        std::vector<float> plain = c0, shared = c0;
        ocrt::cpu::sgemm(sh.M, sh.N, sh.K, a.data(), a_row, a_col, b.data(), sh.N, 1, plain.data(), sh.N, accumulate);
        ocrt::cpu::sgemm_packed_a(packed, sh.N, b.data(), sh.N, 1, shared.data(), sh.N, accumulate);
        REQUIRE(shared == plain);
        std::vector<std::vector<float>> got(2, c0);
#pragma omp parallel for num_threads(2)
        for (int t = 0; t < 2; ++t)
          ocrt::cpu::sgemm_packed_a(packed, sh.N, b.data(), sh.N, 1, got[(size_t)t].data(), sh.N, accumulate);
        REQUIRE(got[0] == plain);
        REQUIRE(got[1] == plain);
      }
    }
  }
  // Packed in one precision, refused in the other.
  const std::vector<float> a = values(64, 54);
  const ocrt::cpu::SgemmPackedA packed(8, 8, a.data(), 8, 1);
  const MatmulPrecision other = path.precision == MatmulPrecision::f32 ? MatmulPrecision::bf16 : MatmulPrecision::f32;
  ocrt::cpu::MatmulPrecisionScope switched(other);
  std::vector<float> c(64);
  CHECK_THROWS_WITH(ocrt::cpu::sgemm_packed_a(packed, 8, a.data(), 8, 1, c.data(), 8), Catch::Contains("was packed in"));
}

TEST_CASE("sgemm accumulates into C", "[gemm]") {
  if (!ocrt::cpu::sgemm_available()) return;  // the generic path: Eigen, tested elsewhere
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  const auto& blk = path.blk;
  for (int64_t M : {int64_t(1), blk.mr + 1, int64_t(97)})
    for (int64_t N : {int64_t(3), blk.nr, 2 * blk.nr + 1}) {
      check(path, {M, N, 13, Layout::plain, Layout::plain, true, true});
      check(path, {M, N, blk.kc + 3, Layout::transposed, Layout::plain, false, true});  // two KC blocks
    }
}

TEST_CASE("sgemm with K = 0 writes zeros, or leaves C alone when accumulating", "[gemm]") {
  if (!ocrt::cpu::sgemm_available()) return;  // the generic path: Eigen, tested elsewhere
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  for (int64_t M : {1, 15})
    for (int64_t N : {1, 40}) {
      std::vector<float> c(M * N, 7.f);
      ocrt::cpu::sgemm_on(path.isa, path.precision, M, N, 0, nullptr, 0, 1, nullptr, N, 1, c.data(), N, true);
      REQUIRE(c == std::vector<float>(M * N, 7.f));
      ocrt::cpu::sgemm_on(path.isa, path.precision, M, N, 0, nullptr, 0, 1, nullptr, N, 1, c.data(), N);
      REQUIRE(c == std::vector<float>(M * N, 0.f));
    }
}

TEST_CASE("sgemm reads transposed operands and padded rows through its packing", "[gemm]") {
  if (!ocrt::cpu::sgemm_available()) return;  // the generic path: Eigen, tested elsewhere
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  const auto& blk = path.blk;
  for (int64_t M : {1, 31, 97})
    for (int64_t N : {1, 33, 97})
      for (int64_t K : {2, 257})
        for (int l = 0; l < 8; ++l)
          check(path, {M, N, K, (l & 1) ? Layout::transposed : Layout::plain, (l & 2) ? Layout::transposed : Layout::plain,
                 (l & 4) != 0});
  check(path, {515, 257, 2 * blk.kc + 6, Layout::transposed, Layout::transposed, true});
}

TEST_CASE("sgemm reads broadcast operands (stride 0)", "[gemm]") {
  if (!ocrt::cpu::sgemm_available()) return;  // the generic path: Eigen, tested elsewhere
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  const auto& blk = path.blk;
  // An expanded operand: every row (or column) is the same vector, read with stride 0.
  for (Layout a : {Layout::plain, Layout::rows_same, Layout::cols_same})
    for (Layout b : {Layout::plain, Layout::rows_same, Layout::cols_same})
      for (int64_t K : {int64_t(1), int64_t(50), blk.kc + 1}) check(path, {40, 70, K, a, b, true, K == 50});
}

TEST_CASE("sgemm results do not depend on the thread count at conv-like sizes", "[gemm]") {
  if (!ocrt::cpu::sgemm_available()) return;  // the generic path: Eigen, tested elsewhere
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  // The shapes of a deep CRNN convolution's three GEMMs, scaled down (ops/cpu/conv.cpp): check()
  // compares 1, 2 and 3 threads bit for bit, and all against the double loop.
  check(path, {128, 264, 576});                                             // forward
  check(path, {576, 128, 264, Layout::plain, Layout::transposed, false, true});  // dw^T += col @ dy^T
  check(path, {576, 264, 128, Layout::transposed, Layout::plain});          // dcol = w^T @ dy
}

TEST_CASE("sgemm with fewer row panels than threads splits the columns and gives the same bits", "[gemm]") {
  if (!ocrt::cpu::sgemm_available()) return;
  const Path path = path_for(GENERATE(MatmulPrecision::f32, MatmulPrecision::bf16));
  // An LSTM step on a batch of a few lines: M rows in one or two panels of the kernel's tile,
  // 4H = 1024 columns; check() runs it on 1, 2 and 3 threads (unequal shares of the panels).
  for (int64_t M : {int64_t(5), int64_t(9), path.blk.mr + 3})
    for (int64_t N : {int64_t(1024), 3 * path.blk.nr + 5}) {
      check(path, {M, N, 256, Layout::plain, Layout::transposed});  // h @ W_hh^T
      check(path, {M, N, 1030, Layout::plain, Layout::plain, true, true});
    }
}

TEST_CASE("sgemm follows set_matmul_precision", "[gemm]") {
  if (!ocrt::cpu::sgemm_available()) return;
  // The dispatching sgemm() takes the precision set for the process: bf16 gives the rounded
  // operands' product, float32 the exact one (values chosen so that the two differ).
  struct Restore {
    MatmulPrecision saved = ocrt::cpu::matmul_precision();
    ~Restore() { ocrt::cpu::set_matmul_precision(saved); }
  } restore;
  const float a[2] = {1.f + 0x1p-12f, 1.f}, b[2] = {1.f, 1.f + 0x1p-12f};
  float c = 0;
  ocrt::cpu::set_matmul_precision(MatmulPrecision::f32);
  ocrt::cpu::sgemm(1, 1, 2, a, 2, 1, b, 1, 1, &c, 1);
  REQUIRE(c == 2.f + 0x1p-11f);
  ocrt::cpu::set_matmul_precision(MatmulPrecision::bf16);
  ocrt::cpu::sgemm(1, 1, 2, a, 2, 1, b, 1, 1, &c, 1);
  REQUIRE(c == 2.f);
}

TEST_CASE("sgemm in float32 takes the AVX2 kernel where AVX-512 FMAs are split in halves", "[gemm]") {
  if (!ocrt::cpu::sgemm_available()) return;
  struct Restore {
    MatmulPrecision saved = ocrt::cpu::matmul_precision();
    ~Restore() { ocrt::cpu::set_matmul_precision(saved); }
  } restore;
  ocrt::cpu::set_matmul_precision(MatmulPrecision::f32);
  const CpuIsa isa = ocrt::cpu_isa();
  const CpuIsa expected = isa >= CpuIsa::avx512 && ocrt::cpu_avx512_fma_is_split() ? CpuIsa::avx2 : isa;
  // The AVX2 kernel cuts K into blocks of 512, the AVX-512 one into blocks of 1024: with K = 700
  // and values of many magnitudes their sums round differently somewhere, so bit equality with
  // one of them says which ran (checked below where the CPU has both).
  const int64_t M = 37, N = 70, K = 700;
  std::vector<float> a(M * K), b(K * N), got(M * N), want(M * N), other(M * N);
  for (int64_t i = 0; i < M * K; ++i) a[i] = std::sin(0.37f * (float)i) * std::exp2((float)(i % 9) - 4.f);
  for (int64_t i = 0; i < K * N; ++i) b[i] = std::cos(0.11f * (float)i) * std::exp2((float)(i % 7) - 3.f);
  ocrt::cpu::sgemm(M, N, K, a.data(), K, 1, b.data(), N, 1, got.data(), N);
  ocrt::cpu::sgemm_on(expected, MatmulPrecision::f32, M, N, K, a.data(), K, 1, b.data(), N, 1, want.data(), N);
  INFO("path " << ocrt::cpu_isa_name(isa) << ", split FMA " << ocrt::cpu_avx512_fma_is_split());
  REQUIRE(got == want);
  if (isa >= CpuIsa::avx512) {
    const CpuIsa unexpected = expected == CpuIsa::avx2 ? CpuIsa::avx512 : CpuIsa::avx2;
    ocrt::cpu::sgemm_on(unexpected, MatmulPrecision::f32, M, N, K, a.data(), K, 1, b.data(), N, 1, other.data(), N);
    CHECK(got != other);
  }
  CHECK(ocrt::cpu::sgemm_blocking().mr == ocrt::cpu::sgemm_blocking(expected, MatmulPrecision::f32).mr);
}

TEST_CASE("sgemm_on refuses a path this CPU cannot run", "[gemm]") {
  if (ocrt::best_cpu_isa() == CpuIsa::amx) return;  // nothing above it to refuse
  const CpuIsa above = (CpuIsa)((int)ocrt::best_cpu_isa() + 1);
  float c = 0;
  const float one = 1;
  REQUIRE_THROWS_WITH(ocrt::cpu::sgemm_on(above, MatmulPrecision::f32, 1, 1, 1, &one, 1, 1, &one, 1, 1, &c, 1),
                      Catch::Contains("cannot run"));
}

TEST_CASE("AMX tiles configured by the out-of-line amx_configure_tiles run a product", "[gemm]") {
  // The configuration the out-of-line function loads is the one every tile kernel then relies
  // on for the thread (it configures a thread once). GCC 12's _tile_loadconfig let the compiler
  // drop its stores of rows and bytes per row: this function loaded empty tiles, and the next
  // tile instruction on the thread raised SIGILL (the kernels' inlined copies happened to keep
  // their stores). A fresh thread, so that this call is the thread's first.
  if (ocrt::cpu_isa() != CpuIsa::amx) return;
  ocrt::cpu::MatmulPrecisionScope scope(MatmulPrecision::bf16);
  const int64_t M = 40, N = 40, K = 70;
  const std::vector<float> a = values(M * K, 71), b = values(K * N, 72);
  std::vector<float> got((size_t)(M * N)), want((size_t)(M * N));
  ocrt::cpu::sgemm(M, N, K, a.data(), K, 1, b.data(), N, 1, want.data(), N);
  std::thread t([&] {
    ocrt::cpu::detail::amx_configure_tiles();
    ocrt::cpu::sgemm(M, N, K, a.data(), K, 1, b.data(), N, 1, got.data(), N);
  });
  t.join();
  REQUIRE(got == want);
}

#endif  // OCRT_CPU_SGEMM
