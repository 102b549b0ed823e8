// Tests for runtime/cpu/int8_gemm.h: the kernel of this machine's path against the plain loops
// and against sums computed here from the unpacked codes, bit for bit (integer sums are exact, and
// the epilogue rounds once), on every edge of the 6 x 16 tile and of K's steps of 4; the
// transposed store; threads; and the quantizer on ties, limits and NaN. ctest runs these under
// each OCRT_CPU_ISA the machine has (tests/CMakeLists.txt, cpu_path_*).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu/int8_gemm.h"
#include "runtime/cpu_isa.h"
#include "runtime/threading.h"

using namespace ocrt;
using namespace ocrt::cpu;

namespace {

struct Case {
  int64_t M, N, K;
  std::vector<uint8_t> a;  // M x Kp activation codes, 0..127 (past K too)
  std::vector<int8_t> w;   // N x K weight codes, -127..127
  std::vector<float> scale, bias;
  std::vector<int32_t> offset;
  int64_t Kp() const { return (K + 3) / 4 * 4; }
};

Case make_case(int64_t M, int64_t N, int64_t K, uint32_t seed, bool extremes = false) {
  std::mt19937 rng(seed);
  Case c{M, N, K, {}, {}, {}, {}, {}};
  std::uniform_int_distribution<int> act(0, 127), wt(-127, 127);
  c.a.resize((size_t)(M * c.Kp()));
  for (auto& v : c.a) v = (uint8_t)(extremes ? 127 : act(rng));
  c.w.resize((size_t)(N * K));
  for (size_t i = 0; i < c.w.size(); ++i) c.w[i] = (int8_t)(extremes ? (i % 2 ? 127 : -127) : wt(rng));
  std::uniform_real_distribution<float> s(1e-4f, 1e-2f), b(-1, 1);
  std::uniform_int_distribution<int32_t> off(-5000, 5000);
  for (int64_t j = 0; j < N; ++j) c.scale.push_back(s(rng)), c.bias.push_back(b(rng)), c.offset.push_back(off(rng));
  return c;
}

// y (M x N, row-major) from the unpacked codes: the exact integer sum, then the epilogue's fma.
std::vector<float> expected(const Case& c) {
  std::vector<float> y((size_t)(c.M * c.N));
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      int64_t s = 0;
      for (int64_t k = 0; k < c.K; ++k) s += (int64_t)c.a[(size_t)(i * c.Kp() + k)] * c.w[(size_t)(j * c.K + k)];
      REQUIRE(std::llabs(s) < (int64_t(1) << 31));
      y[(size_t)(i * c.N + j)] = std::fma((float)(int32_t)(s - c.offset[(size_t)j]), c.scale[(size_t)j], c.bias[(size_t)j]);
    }
  return y;
}

}  // namespace

TEST_CASE("int8_gemm equals the exact integer sums bit for bit on every edge of the tile and of K", "[int8]") {
  INFO("kernel: " << int8_gemm_kernel_name());
  uint32_t seed = 1;
  for (int64_t M : {1, 5, 6, 7, 13, 24, 25, 49})
    for (int64_t N : {1, 8, 15, 16, 17, 33})
      for (int64_t K : {1, 3, 4, 5, 8, 63, 129}) {
        INFO("M " << M << " N " << N << " K " << K);
        const Case c = make_case(M, N, K, seed++);
        const Int8PackedWeights B(K, N, c.w.data(), K, 1);
        REQUIRE(B.padded_rows() == c.Kp());
        const Int8Epilogue e{c.scale.data(), c.offset.data(), c.bias.data()};
        std::vector<float> y((size_t)(M * N), -7.f), ref((size_t)(M * N), -7.f);
        int8_gemm(M, int8_rows(c.a.data(), c.Kp()), B, e, y.data(), N, 1);
        int8_gemm_reference(M, int8_rows(c.a.data(), c.Kp()), B, e, ref.data(), N, 1);
        const std::vector<float> want = expected(c);
        CHECK(y == want);
        CHECK(ref == want);
      }
}

TEST_CASE("int8_gemm reads A through per-segment row pointers as a convolution gives them", "[int8]") {
  // K in S segments of L codes; each row's segments point at scattered runs of one pool (as a
  // convolution's taps point into its image), overlapping one another. The result must be that
  // of the dense rows the segments spell out, on tile edges and with segments of one step.
  INFO("kernel: " << int8_gemm_kernel_name());
  uint32_t seed = 500;
  for (int64_t S : {1, 2, 9})
    for (int64_t L : {4, 8, 20, 512})
      for (int64_t M : {1, 5, 6, 7, 30})
        for (int64_t N : {16, 17, 40}) {
          INFO("S " << S << " L " << L << " M " << M << " N " << N);
          std::mt19937 rng(seed++);
          std::vector<uint8_t> pool((size_t)(L * 16 + 7));
          std::uniform_int_distribution<int> code(0, 127);
          for (auto& v : pool) v = (uint8_t)code(rng);
          std::uniform_int_distribution<int64_t> start(0, (int64_t)pool.size() - L);
          std::vector<int64_t> where((size_t)(M * S));
          for (auto& w : where) w = start(rng);
          Case c = make_case(M, N, S * L, seed++);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t s = 0; s < S; ++s)
              for (int64_t u = 0; u < L; ++u)
                c.a[(size_t)(i * c.Kp() + s * L + u)] = pool[(size_t)(where[(size_t)(i * S + s)] + u)];
          Int8A a;
          a.segments = S;
          a.rows = [&](int64_t i0, int64_t rows, const uint8_t** ptrs) {
            for (int64_t r = 0; r < kInt8MR; ++r)
              for (int64_t s = 0; s < S; ++s)
                ptrs[s * kInt8MR + r] = pool.data() + where[(size_t)((i0 + std::min(r, rows - 1)) * S + s)];
          };
          const Int8PackedWeights B(c.K, N, c.w.data(), c.K, 1);
          const Int8Epilogue e{c.scale.data(), c.offset.data(), c.bias.data()};
          std::vector<float> y((size_t)(M * N)), ref((size_t)(M * N));
          int8_gemm(M, a, B, e, y.data(), N, 1);
          int8_gemm_reference(M, a, B, e, ref.data(), N, 1);
          const std::vector<float> want = expected(c);
          CHECK(y == want);
          CHECK(ref == want);
        }
  const Case c = make_case(6, 16, 12, 9);
  const Int8PackedWeights B(c.K, c.N, c.w.data(), c.K, 1);
  Int8A a = int8_rows(c.a.data(), c.Kp());
  a.segments = 2;  // 12 codes do not split into two runs of whole steps
  std::vector<float> y(96);
  CHECK_THROWS_WITH(int8_gemm(6, a, B, Int8Epilogue{c.scale.data()}, y.data(), 16, 1), Catch::Contains("segments"));
}

TEST_CASE("int8_gemm's largest products do not saturate, and the transposed store and threads give the same bits", "[int8]") {
  // Every activation code 127 and weight codes +-127: vpmaddubsw's pairs reach 2 x 127 x 127.
  for (bool extremes : {true, false}) {
    const Case c = make_case(200, 37, 2304, 99, extremes);
    const Int8PackedWeights B(c.K, c.N, c.w.data(), c.K, 1);
    const Int8Epilogue e{c.scale.data(), c.offset.data(), c.bias.data()};
    const std::vector<float> want = expected(c);
    std::vector<float> y((size_t)(c.M * c.N)), yt((size_t)(c.M * c.N)), serial((size_t)(c.M * c.N));
    int8_gemm(c.M, int8_rows(c.a.data(), c.Kp()), B, e, y.data(), c.N, 1, true);
    int8_gemm(c.M, int8_rows(c.a.data(), c.Kp()), B, e, serial.data(), c.N, 1, false);
    int8_gemm(c.M, int8_rows(c.a.data(), c.Kp()), B, e, yt.data(), 1, c.M);  // y^T (N x M)
    CHECK(y == want);
    CHECK(serial == want);
    bool transposed_ok = true;
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) transposed_ok &= yt[(size_t)(j * c.M + i)] == want[(size_t)(i * c.N + j)];
    CHECK(transposed_ok);
  }
}

TEST_CASE("int8_gemm's work split over row blocks and column groups gives the same bits on 1-3 threads", "[int8]") {
  // The AMX loop (amx path) gathers 32 rows at a time, in runs of blocks, and, with fewer row
  // blocks than threads, splits the columns too; the other kernels split rows. Either way every
  // sum is exact.
  INFO("kernel: " << int8_gemm_kernel_name());
  if (ocrt::cpu_has_amx_int8()) CHECK(std::string(int8_gemm_kernel_name()) == "amx tdpbusd");
  const int saved = ocrt::num_threads();
  // M 1189 (38 row blocks): the AMX loop's runs of row blocks that share each panel pair of B
  // (4 blocks a run on 2 threads, 3 on 3, 8 on 1), the last run short, its last block partial.
  for (int64_t M : {6, 31, 32, 33, 70, 1189})
    for (int64_t N : {16, 48, 100}) {
      INFO("M " << M << " N " << N);
      const Case c = make_case(M, N, 300, 7 + (uint32_t)(M * N));
      const Int8PackedWeights B(c.K, N, c.w.data(), c.K, 1);
      const Int8Epilogue e{c.scale.data(), c.offset.data(), c.bias.data()};
      const std::vector<float> want = expected(c);
      for (int threads : {1, 2, 3}) {
        ocrt::set_num_threads(threads);
        std::vector<float> y((size_t)(M * N));
        int8_gemm(M, int8_rows(c.a.data(), c.Kp()), B, e, y.data(), N, 1);
        CHECK(y == want);
      }
    }
  ocrt::set_num_threads(saved);
}

TEST_CASE("int8_gemm reads a stride-1 convolution's image in place (Int8Image) as through its row pointers", "[int8]") {
  // A padded image of cp codes a pixel, pitch pixels a row; output pixel (oh, ow) reads its taps
  // at pixel oh * pitch + ow plus each tap's offset. With the image given, the AMX loop (amx
  // path, cp a multiple of 64) loads 16 pixels a tile straight from it and drops the pitch -
  // width pixels past each row's end, whose destinations are mapped row by row: rows narrower
  // than a tile, a tile across a row's end, the last block partial. With fewer codes a pixel the
  // AMX loop gathers each row's taps from the image (pixels of 4 to 32 codes, sizes its copies
  // know and one they do not); every other kernel reads the pointers. Both layouts of y, on 1-3
  // threads, bit for bit against the plain loops.
  INFO("kernel: " << int8_gemm_kernel_name());
  const int saved = ocrt::num_threads();
  uint32_t seed = 900;
  struct Geometry {
    int64_t cp, kh, kw, dil, Ho, Wo, pad;
  };
  for (const Geometry g : {Geometry{64, 3, 3, 1, 1, 1, 1}, Geometry{64, 3, 3, 1, 2, 3, 1}, Geometry{128, 3, 3, 1, 3, 15, 1},
                           Geometry{64, 3, 3, 1, 2, 16, 1}, Geometry{64, 3, 3, 2, 3, 17, 2}, Geometry{192, 1, 1, 1, 4, 33, 0},
                           Geometry{64, 2, 2, 1, 5, 40, 0}, Geometry{256, 3, 3, 1, 4, 100, 1}, Geometry{8, 3, 3, 1, 3, 20, 1},
                           Geometry{16, 3, 3, 1, 3, 21, 1}, Geometry{32, 3, 3, 2, 4, 18, 2}, Geometry{20, 3, 3, 1, 2, 9, 1},
                           Geometry{12, 5, 5, 1, 3, 11, 2}, Geometry{4, 1, 1, 1, 5, 7, 0}})
    for (int64_t N : {16, 40, 96}) {
      INFO("cp " << g.cp << " taps " << g.kh << "x" << g.kw << " dilation " << g.dil << " Ho " << g.Ho << " Wo " << g.Wo
                 << " N " << N);
      const int64_t Hp = g.Ho + g.dil * (g.kh - 1), Wp = g.Wo + g.dil * (g.kw - 1), M = g.Ho * g.Wo;
      Int8Image im;
      im.pixel = g.cp, im.width = g.Wo, im.pitch = Wp;
      for (int64_t ki = 0; ki < g.kh; ++ki)
        for (int64_t kj = 0; kj < g.kw; ++kj) im.taps.push_back((ki * g.dil * Wp + kj * g.dil) * g.cp);
      std::mt19937 rng(seed++);
      std::uniform_int_distribution<int> code(0, 127);
      std::vector<uint8_t> codes((size_t)std::max(Hp * Wp * g.cp, int8_image_codes(im, M)));
      for (auto& v : codes) v = (uint8_t)code(rng);
      im.codes = codes.data();
      const int64_t S = g.kh * g.kw;
      Case c = make_case(M, N, S * g.cp, seed++);
      for (int64_t i = 0; i < M; ++i) {
        const int64_t pixel = (i / g.Wo) * Wp + i % g.Wo;
        for (int64_t s = 0; s < S; ++s)
          for (int64_t u = 0; u < g.cp; ++u)
            c.a[(size_t)(i * c.Kp() + s * g.cp + u)] = codes[(size_t)(pixel * g.cp + im.taps[(size_t)s] + u)];
      }
      Int8A a;
      a.segments = S;
      a.rows = [&](int64_t i0, int64_t rows, const uint8_t** ptrs) {
        for (int64_t r = 0; r < kInt8MR; ++r) {
          const int64_t i = i0 + std::min(r, rows - 1), pixel = (i / g.Wo) * Wp + i % g.Wo;
          for (int64_t s = 0; s < S; ++s) ptrs[s * kInt8MR + r] = codes.data() + pixel * g.cp + im.taps[(size_t)s];
        }
      };
      a.image = &im;
      const Int8PackedWeights B(c.K, N, c.w.data(), c.K, 1);
      const Int8Epilogue e{c.scale.data(), c.offset.data(), c.bias.data(), true};
      std::vector<float> want = expected(c);
      for (auto& v : want) v = v > 0 ? v : 0.0f;
      std::vector<float> ref((size_t)(M * N));
      int8_gemm_reference(M, a, B, e, ref.data(), N, 1);
      CHECK(ref == want);
      for (int threads : {1, 2, 3}) {
        ocrt::set_num_threads(threads);
        std::vector<float> y((size_t)(M * N), -7.f), yt((size_t)(M * N), -7.f);
        int8_gemm(M, a, B, e, y.data(), N, 1);
        int8_gemm(M, a, B, e, yt.data(), 1, M);  // a convolution's output: each channel's pixels in a row
        CHECK(y == want);
        bool transposed_ok = true;
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) transposed_ok &= yt[(size_t)(j * M + i)] == want[(size_t)(i * N + j)];
        CHECK(transposed_ok);
      }
    }
  ocrt::set_num_threads(saved);
}

TEST_CASE("int8_gemm: null offset and bias are zeros, and packed weights refuse -128 and a K that could overflow", "[int8]") {
  const Case c = make_case(7, 9, 11, 5);
  const Int8PackedWeights B(c.K, c.N, c.w.data(), c.K, 1);
  std::vector<float> y((size_t)(c.M * c.N));
  int8_gemm(c.M, int8_rows(c.a.data(), c.Kp()), B, Int8Epilogue{c.scale.data(), nullptr, nullptr}, y.data(), c.N, 1);
  Case z = c;
  std::fill(z.offset.begin(), z.offset.end(), 0);
  std::fill(z.bias.begin(), z.bias.end(), 0.f);
  CHECK(y == expected(z));
  std::vector<int8_t> bad = c.w;
  bad[3] = -128;
  CHECK_THROWS_WITH(Int8PackedWeights(c.K, c.N, bad.data(), c.K, 1), Catch::Contains("below -127"));
  CHECK_THROWS_WITH(Int8PackedWeights(140000, 0, bad.data(), 1, 1), Catch::Contains("overflow"));
  CHECK_THROWS_WITH(int8_gemm(c.M, int8_rows(c.a.data(), c.Kp()), B, Int8Epilogue{}, y.data(), c.N, 1),
                    Catch::Contains("scale"));
}

TEST_CASE("int8_quantize rounds to nearest even, clamps, maps NaN to the lowest code, as the plain loop does", "[int8]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, 127.4f, 200.f, -200.f, inf, -inf, nan,
                          62.5f, 63.5f, -63.5f, 1e-30f, -1e-30f, 3.49999f};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-150, 150);
  for (int i = 0; i < 1000; ++i) x.push_back(u(rng));
  struct Range {
    int lo, hi, offset;
  };
  for (const Range r : {Range{0, 127, 0}, Range{-63, 63, 64}}) {
    std::vector<uint8_t> fast(x.size()), ref(x.size());
    int8_quantize(x.data(), (int64_t)x.size(), 1.0f, r.lo, r.hi, r.offset, fast.data());
    int8_quantize_reference(x.data(), (int64_t)x.size(), 1.0f, r.lo, r.hi, r.offset, ref.data());
    CHECK(fast == ref);
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::isnan(x[i]) ? r.lo : std::clamp<double>(std::nearbyint(x[i]), r.lo, r.hi);
      CHECK((int)ref[i] - r.offset == (int)want);
    }
  }
  std::vector<uint8_t> out(4);
  CHECK((int)(int8_quantize(x.data(), 4, 1.0f, 0, 127, 0, out.data()), out[1]) == 0);   // 0.5 -> 0 (even)
  CHECK((int)(int8_quantize(x.data(), 4, 1.0f, 0, 127, 0, out.data()), out[3]) == 2);   // 2.5 -> 2
  CHECK_THROWS_WITH(int8_quantize(x.data(), 4, 1.0f, -63, 63, 0, out.data()), Catch::Contains("do not fit"));
}

TEST_CASE("transpose_bytes equals the plain transpose on whole 16 x 16 blocks and every remainder", "[int8]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t rows : {1, 15, 16, 17, 40})
    for (int64_t cols : {1, 7, 16, 33, 64}) {
      INFO("rows " << rows << " cols " << cols);
      const int64_t src_stride = cols + 3, dst_stride = rows + 5;
      std::vector<uint8_t> src((size_t)(rows * src_stride));
      for (auto& v : src) v = (uint8_t)byte(rng);
      std::vector<uint8_t> dst((size_t)(cols * dst_stride), 0xAB), want = dst;
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < rows; ++r) want[(size_t)(c * dst_stride + r)] = src[(size_t)(r * src_stride + c)];
      transpose_bytes(src.data(), rows, cols, src_stride, dst.data(), dst_stride);
      CHECK(dst == want);  // the padding between rows of dst untouched too
    }
}

TEST_CASE("int8_gemm's narrow tiles (fewer than 16 columns) store with the ReLU, by rows and transposed, bit for bit", "[int8]") {
  // A convolution into 4 or 8 channels (a detector head's phases) has only narrow tiles: their
  // epilogue reads a zero-padded copy of the columns' scales, offsets and biases.
  for (int64_t N : {1, 4, 8, 20}) {
    const Case c = make_case(31, N, 144, 7 + (uint32_t)N);
    const Int8PackedWeights B(c.K, c.N, c.w.data(), c.K, 1);
    std::vector<float> want = expected(c);
    for (float& v : want) v = v > 0 ? v : 0.0f;
    Int8Epilogue e{c.scale.data(), c.offset.data(), c.bias.data(), /*relu=*/true};
    std::vector<float> y((size_t)(c.M * c.N), -1.0f), yt((size_t)(c.M * c.N), -1.0f);
    int8_gemm(c.M, int8_rows(c.a.data(), c.Kp()), B, e, y.data(), c.N, 1);
    int8_gemm(c.M, int8_rows(c.a.data(), c.Kp()), B, e, yt.data(), 1, c.M);  // y^T (N x M)
    INFO("N = " << N);
    CHECK(y == want);
    bool transposed_ok = true;
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) transposed_ok &= yt[(size_t)(j * c.M + i)] == want[(size_t)(i * c.N + j)];
    CHECK(transposed_ok);
  }
}
