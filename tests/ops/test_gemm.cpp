// ocrt's packed float32 GEMM (ops/cpu/gemm.cpp) against a plain double-precision loop: sizes on
// and off every block boundary (MR = 14, NR = 32, MC = 126, KC = 1024, NC = 2048), K = 0,
// transposed and broadcast operands, padded rows, and bit-identical results on 1 and 2 threads.
// Only built where the GEMM is (AVX-512); ops/cpu/linalg.cpp uses Eigen elsewhere.
#include <catch2/catch.hpp>

#include "ops/cpu/gemm.h"

#if defined(OCRT_CPU_SGEMM)

#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/threading.h"

using ocrt::cpu::sgemm;

namespace {

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

// One product: A (M,K) and B (K,N) stored with the given layouts, C with row stride ldc > N
// where `pad` is set (the padding must stay untouched).
struct Case {
  int64_t M, N, K;
  bool a_transposed = false, b_transposed = false, pad = false;
};

// Runs sgemm on the case and returns C (M rows of ldc floats).
std::vector<float> run(const Case& c, const std::vector<float>& a, const std::vector<float>& b, int64_t ldc) {
  // A stored (M,K) has strides (lda, 1); stored transposed, i.e. as (K,M), strides (1, lda).
  const int64_t lda = (c.a_transposed ? c.M : c.K) + (c.pad ? 3 : 0);
  const int64_t ldb = (c.b_transposed ? c.K : c.N) + (c.pad ? 5 : 0);
  std::vector<float> out(c.M * ldc, 7.f);
  sgemm(c.M, c.N, c.K, a.data(), c.a_transposed ? 1 : lda, c.a_transposed ? lda : 1, b.data(),
        c.b_transposed ? 1 : ldb, c.b_transposed ? ldb : 1, out.data(), ldc);
  return out;
}

void check(const Case& c) {
  INFO("M " << c.M << " N " << c.N << " K " << c.K << " a_t " << c.a_transposed << " b_t " << c.b_transposed
            << " pad " << c.pad);
  const int64_t lda = (c.a_transposed ? c.M : c.K) + (c.pad ? 3 : 0);
  const int64_t ldb = (c.b_transposed ? c.K : c.N) + (c.pad ? 5 : 0);
  const int64_t ldc = c.N + (c.pad ? 2 : 0);
  const std::vector<float> a = values((c.a_transposed ? c.K : c.M) * lda, 1 + (uint32_t)c.M);
  const std::vector<float> b = values((c.b_transposed ? c.N : c.K) * ldb, 2 + (uint32_t)c.N);
  auto A = [&](int64_t i, int64_t k) { return (double)(c.a_transposed ? a[k * lda + i] : a[i * lda + k]); };
  auto B = [&](int64_t k, int64_t j) { return (double)(c.b_transposed ? b[j * ldb + k] : b[k * ldb + j]); };

  ThreadCountGuard guard;
  ocrt::set_num_threads(1);
  const std::vector<float> one = run(c, a, b, ldc);
  ocrt::set_num_threads(2);
  const std::vector<float> two = run(c, a, b, ldc);
  REQUIRE(one == two);  // bit-identical, padding included

  int64_t bad = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double sum = 0, abs_sum = 0;
      for (int64_t k = 0; k < c.K; ++k) sum += A(i, k) * B(k, j), abs_sum += std::abs(A(i, k) * B(k, j));
      const double got = one[i * ldc + j];
      if (std::abs(got - sum) > 1e-5 * abs_sum + 1e-6 && bad++ < 5)
        FAIL_CHECK("C(" << i << "," << j << ") = " << got << ", expected " << sum);
    }
    for (int64_t j = c.N; j < ldc; ++j)
      if (one[i * ldc + j] != 7.f && bad++ < 5) FAIL_CHECK("padding C(" << i << "," << j << ") was written");
  }
  REQUIRE(bad == 0);
}

}  // namespace

TEST_CASE("sgemm matches a double loop on sizes around the block edges", "[gemm]") {
  const int64_t sizes[] = {1, 2, 13, 31, 33, 97, 257, 515};
  for (int64_t M : sizes)
    for (int64_t N : sizes)
      for (int64_t K : {1, 13, 257}) check({M, N, K});
}

TEST_CASE("sgemm across KC, MC and NC blocks", "[gemm]") {
  check({3, 5, 1030});     // two KC blocks, the second short
  check({29, 40, 2049});   // three KC blocks
  check({300, 33, 1025});  // several MC blocks per thread, and two KC blocks
  check({5, 2100, 7});     // two NC blocks
  check({14, 32, 1024});   // exactly one tile, one KC block
  check({28, 64, 2048});
}

TEST_CASE("sgemm with K = 0 writes zeros", "[gemm]") {
  for (int64_t M : {1, 15})
    for (int64_t N : {1, 40}) {
      std::vector<float> c(M * N, 7.f);
      sgemm(M, N, 0, nullptr, 0, 1, nullptr, N, 1, c.data(), N);
      REQUIRE(c == std::vector<float>(M * N, 0.f));
    }
}

TEST_CASE("sgemm reads transposed operands and padded rows through its packing", "[gemm]") {
  for (int64_t M : {1, 31, 97})
    for (int64_t N : {1, 33, 97})
      for (int64_t K : {2, 257})
        for (int layout = 0; layout < 8; ++layout) check({M, N, K, (layout & 1) != 0, (layout & 2) != 0, (layout & 4) != 0});
  check({515, 257, 1030, true, true, true});
}

TEST_CASE("sgemm reads a broadcast operand (stride 0)", "[gemm]") {
  // Every row of A is the same vector, read with row stride 0; so every row of C is equal.
  const int64_t M = 40, N = 70, K = 50;
  const std::vector<float> a = values(K, 3), b = values(K * N, 4);
  std::vector<float> c(M * N);
  sgemm(M, N, K, a.data(), 0, 1, b.data(), N, 1, c.data(), N);
  for (int64_t j = 0; j < N; ++j) {
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += (double)a[k] * b[k * N + j];
    for (int64_t i = 0; i < M; ++i) REQUIRE(std::abs(c[i * N + j] - sum) < 1e-4);
  }
}

#endif  // OCRT_CPU_SGEMM
