// ocrt's packed GEMM (ops/cpu/gemm.cpp) against a plain double-precision loop: sizes on and off
// every block boundary of the kernel this build compiled (AVX-512 or AVX2 + FMA: the tile and
// block sizes come from sgemm_blocking()), K = 0, transposed, padded and broadcast (stride 0)
// operands, accumulation into C, and bit-identical results on 1, 2 and 3 threads. Each element
// must be within the forward-error bound of its dot product (tests/tolerance.h).
// Only built where the GEMM is; ops/cpu/linalg.cpp uses Eigen elsewhere. tests/CMakeLists.txt also
// builds this file into one program per instruction set (ocrt_tests_gemm_<isa>), so that the
// AVX2 and AVX-512 kernels are both tested wherever the CPU can run them.
#include <catch2/catch.hpp>

#include "ops/cpu/gemm.h"

#if defined(OCRT_CPU_SGEMM)

#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/threading.h"
#include "tolerance.h"

using ocrt::cpu::sgemm;

namespace {

const ocrt::cpu::SgemmBlocking blk = ocrt::cpu::sgemm_blocking();

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

void check(const Case& c) {
  INFO("M " << c.M << " N " << c.N << " K " << c.K << " a " << (int)c.a << " b " << (int)c.b << " pad " << c.pad
            << " accumulate " << c.accumulate);
  const Strides sa = strides_of(c.a, c.M, c.K, c.pad ? 3 : 0), sb = strides_of(c.b, c.K, c.N, c.pad ? 5 : 0);
  const int64_t ldc = c.N + (c.pad ? 2 : 0);
  const std::vector<float> a = values(sa.storage, 1 + (uint32_t)c.M), b = values(sb.storage, 2 + (uint32_t)c.N);
  const std::vector<float> c0 = values(c.M * ldc, 3 + (uint32_t)c.K);  // C before the call
  auto A = [&](int64_t i, int64_t k) { return (double)a[i * sa.row + k * sa.col]; };
  auto B = [&](int64_t k, int64_t j) { return (double)b[k * sb.row + j * sb.col]; };

  auto run = [&](int threads) {
    ocrt::set_num_threads(threads);
    std::vector<float> out = c0;
    sgemm(c.M, c.N, c.K, a.data(), sa.row, sa.col, b.data(), sb.row, sb.col, out.data(), ldc, c.accumulate);
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
  INFO("mr " << blk.mr << " nr " << blk.nr << " kc " << blk.kc << " mc " << blk.mc << " nc " << blk.nc);
  REQUIRE(blk.mr > 0);
  REQUIRE(blk.nr > 0);
  REQUIRE(blk.kc > 0);
  REQUIRE(blk.mc % blk.mr == 0);
  REQUIRE(blk.nc % blk.nr == 0);
}

TEST_CASE("sgemm matches a double loop on sizes around the tile edges", "[gemm]") {
  const int64_t ms[] = {1, 2, blk.mr - 1, blk.mr, blk.mr + 1, 2 * blk.mr + 3, 97};
  const int64_t ns[] = {1, 2, blk.nr - 1, blk.nr, blk.nr + 1, 3 * blk.nr + 5, 97};
  for (int64_t M : ms)
    for (int64_t N : ns)
      for (int64_t K : {1, 2, 13, 257}) check({M, N, K});
  // Larger, odd sizes: several tiles of both kinds of edge at once.
  for (int64_t M : {257, 515})
    for (int64_t N : {33, 257, 515}) check({M, N, 13});
}

TEST_CASE("sgemm across KC, MC and NC blocks", "[gemm]") {
  check({3, 5, blk.kc + 6});              // two KC blocks, the second short
  check({29, 40, 2 * blk.kc + 1});        // three KC blocks, the last of depth 1
  check({blk.mr, blk.nr, blk.kc});        // exactly one tile, one KC block
  check({2 * blk.mr, 2 * blk.nr, 2 * blk.kc});
  check({blk.mc - 1, 17, 9});             // one MC block, one row short
  check({blk.mc + 1, 17, 9});             // one row into the second MC block
  check({2 * blk.mc + blk.mr + 3, 33, blk.kc + 1});  // several MC blocks per thread and two KC blocks
  check({5, blk.nc + 7, 7});              // two NC blocks, the second short
  check({blk.mr + 1, 2 * blk.nc + blk.nr - 1, 3});  // three NC blocks and edges in both directions
}

TEST_CASE("sgemm accumulates into C", "[gemm]") {
  for (int64_t M : {int64_t(1), blk.mr + 1, int64_t(97)})
    for (int64_t N : {int64_t(3), blk.nr, 2 * blk.nr + 1}) {
      check({M, N, 13, Layout::plain, Layout::plain, true, true});
      check({M, N, blk.kc + 3, Layout::transposed, Layout::plain, false, true});  // two KC blocks
    }
}

TEST_CASE("sgemm with K = 0 writes zeros, or leaves C alone when accumulating", "[gemm]") {
  for (int64_t M : {1, 15})
    for (int64_t N : {1, 40}) {
      std::vector<float> c(M * N, 7.f);
      sgemm(M, N, 0, nullptr, 0, 1, nullptr, N, 1, c.data(), N, true);
      REQUIRE(c == std::vector<float>(M * N, 7.f));
      sgemm(M, N, 0, nullptr, 0, 1, nullptr, N, 1, c.data(), N);
      REQUIRE(c == std::vector<float>(M * N, 0.f));
    }
}

TEST_CASE("sgemm reads transposed operands and padded rows through its packing", "[gemm]") {
  for (int64_t M : {1, 31, 97})
    for (int64_t N : {1, 33, 97})
      for (int64_t K : {2, 257})
        for (int l = 0; l < 8; ++l)
          check({M, N, K, (l & 1) ? Layout::transposed : Layout::plain, (l & 2) ? Layout::transposed : Layout::plain,
                 (l & 4) != 0});
  check({515, 257, 2 * blk.kc + 6, Layout::transposed, Layout::transposed, true});
}

TEST_CASE("sgemm reads broadcast operands (stride 0)", "[gemm]") {
  // An expanded operand: every row (or column) is the same vector, read with stride 0.
  for (Layout a : {Layout::plain, Layout::rows_same, Layout::cols_same})
    for (Layout b : {Layout::plain, Layout::rows_same, Layout::cols_same})
      for (int64_t K : {int64_t(1), int64_t(50), blk.kc + 1}) check({40, 70, K, a, b, true, K == 50});
}

TEST_CASE("sgemm results do not depend on the thread count at conv-like sizes", "[gemm]") {
  // The shapes of a deep CRNN convolution's three GEMMs, scaled down (ops/cpu/conv.cpp): check()
  // compares 1, 2 and 3 threads bit for bit, and all against the double loop.
  check({128, 264, 576});                                             // forward
  check({576, 128, 264, Layout::plain, Layout::transposed, false, true});  // dw^T += col @ dy^T
  check({576, 264, 128, Layout::transposed, Layout::plain});          // dcol = w^T @ dy
}

#endif  // OCRT_CPU_SGEMM
