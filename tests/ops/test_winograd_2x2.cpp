// 2x2 convolutions through Winograd's F(3, 2) (ops/cpu/winograd_2x2.h): against the plain-loop
// reference within a componentwise error bound, in float32 and bf16 products; the same bits on
// any thread count, in chunks of any size, inside and outside autograd and from the weights
// kept between calls; weights changed in place read again; and which layers take the path.
#include <catch2/catch.hpp>

#include <cmath>

#include "gradcheck.h"
#include "ops/conv.h"
#include "ops/cpu/conv_reference.h"
#include "ops/cpu/winograd_2x2.h"
#include "runtime/cpu/gemm.h"
#include "runtime/threading.h"
#include "tolerance.h"

using namespace ocrt;
using namespace ocrt::testing;

#if defined(OCRT_CPU_WINOGRAD)

namespace {

// The componentwise bound of tests/ops/test_conv.cpp's F(4x4, 3x3) with F(3, 2)'s matrices:
//   |fl(y) - y| <= gamma_n sum_xi |A^T[a, xi]| sum_(i,c) (|G| |g_kci|)[xi] (|B^T| |d_ci|)[xi] (+ |bias|)
// where n counts the roundings along the longest path from an input to an output: the input
// transform 1 (one addition), the filter transform 1 (one addition; halving is exact), the
// products' sums over the 2 C pairs (i, c), the output transform 2, the bias 1. A wrong sign, a
// swapped tap or a tile read one column off makes errors of the size of the terms themselves.
constexpr double kBt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, -1, 0, 1}};
constexpr double kG[4][2] = {{1, 0}, {0.5, 0.5}, {0.5, -0.5}, {0, 1}};
constexpr double kAt[3][4] = {{1, 1, 1, 0}, {0, 1, -1, 0}, {0, 1, 1, 1}};

int64_t forward_ops(int64_t C) { return 2 * C + 1 + 1 + 2 + 1; }

// The sums of |terms| of winograd_2x2_conv2d's outputs (N, Cout, Ho, Wo); bias may be null.
Tensor abs_terms(const float* x, const float* w, const float* bias, int64_t N, int64_t C, int64_t H, int64_t W,
                 int64_t Cout, int64_t ph, int64_t pw) {
  const int64_t Ho = H + 2 * ph - 1, Wo = W + 2 * pw - 1, tw = (Wo + 2) / 3;
  std::vector<double> U((size_t)(Cout * C * 2 * 4)), V((size_t)(C * 2 * 4)), out((size_t)(N * Cout * Ho * Wo));
  for (int64_t kci = 0; kci < Cout * C * 2; ++kci)  // filter row (k, c, i)
    for (int xi = 0; xi < 4; ++xi)
      U[(size_t)(kci * 4 + xi)] = std::abs(kG[xi][0]) * std::abs(w[kci * 2]) + std::abs(kG[xi][1]) * std::abs(w[kci * 2 + 1]);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ho = 0; ho < Ho; ++ho)
      for (int64_t tx = 0; tx < tw; ++tx) {
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < 2; ++i) {
            double d[4];
            for (int j = 0; j < 4; ++j) {
              const int64_t ih = ho - ph + i, iw = 3 * tx - pw + j;
              d[j] = ih >= 0 && ih < H && iw >= 0 && iw < W ? std::abs(x[((n * C + c) * H + ih) * W + iw]) : 0.0;
            }
            for (int xi = 0; xi < 4; ++xi) {
              double v = 0;
              for (int j = 0; j < 4; ++j) v += std::abs(kBt[xi][j]) * d[j];
              V[(size_t)((c * 2 + i) * 4 + xi)] = v;
            }
          }
        for (int64_t k = 0; k < Cout; ++k) {
          double m[4] = {};
          for (int64_t ci = 0; ci < C * 2; ++ci)
            for (int xi = 0; xi < 4; ++xi) m[xi] += U[(size_t)((k * C * 2 + ci) * 4 + xi)] * V[(size_t)(ci * 4 + xi)];
          for (int a = 0; a < 3; ++a) {
            const int64_t wo = 3 * tx + a;
            if (wo >= Wo) continue;
            double o = bias ? std::abs(bias[k]) : 0.0;
            for (int xi = 0; xi < 4; ++xi) o += std::abs(kAt[a][xi]) * m[xi];
            out[(size_t)(((n * Cout + k) * Ho + ho) * Wo + wo)] = o;
          }
        }
      }
  return Tensor::from_vector(out, {N, Cout, Ho, Wo});
}

struct ThreadCountGuard {
  int saved = num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

struct Geo {
  int64_t N, C, H, W, Cout, ph, pw;
  bool bias;
};

const std::vector<Geo>& geometries() {
  static const std::vector<Geo> geos = {
      {2, 16, 2, 20, 16, 0, 0, true},     // crnn's shape: two rows to one, a last tile of one column
      {1, 24, 3, 17, 20, 1, 1, false},    // padding on both axes, whole tiles (Wo 18)
      {3, 16, 2, 8, 32, 0, 1, true},      // a last tile of three columns (Wo 9)
      {1, 32, 5, 30, 16, 1, 0, true},     // several output rows, a last tile of two columns
      {2, 64, 2, 103, 48, 0, 0, true},    // a long row of 34 tiles (crnn-en at 400 pixels)
      {1, 16, 1, 7, 16, 1, 1, true},      // one input row: both output rows read a padding row
      {2, 17, 4, 11, 19, 2, 2, false},    // padding wider than the kernel's reach, odd channel counts
  };
  return geos;
}

}  // namespace

TEST_CASE("2x2 layers in fast mode: Winograd F(3,2) against the plain-loop reference, the same bits on any thread count and chunk",
          "[conv][winograd]") {
  ThreadCountGuard guard;
  if (!cpu::sgemm_available()) return;  // the generic path (OCRT_CPU_ISA=generic) has no Winograd: im2col and Eigen
  const auto& geos = geometries();
  for (size_t gi = 0; gi < geos.size(); ++gi) {
    const Geo& g = geos[gi];
    INFO("geometry " << gi);
    const int64_t Ho = g.H + 2 * g.ph - 1, Wo = g.W + 2 * g.pw - 1;
    const Tensor x = det_uniform({g.N, g.C, g.H, g.W}, 300 + gi, -1, 1, DType::f32);
    const Tensor w = det_uniform({g.Cout, g.C, 2, 2}, 310 + gi, -0.3, 0.3, DType::f32);
    const Tensor b = g.bias ? det_uniform({g.Cout}, 320 + gi, -1, 1, DType::f32) : Tensor();
    const float* bp = g.bias ? b.data<float>() : nullptr;
    const Conv2dParams p{1, 1, g.ph, g.pw, 1, 1, 1, true};
    REQUIRE(cpu::winograd_2x2_applies(g.C, g.Cout, 2, 2, Wo, p));
    Conv2dOptions opt;
    opt.padding = {g.ph, g.pw};
    // conv2d in fast mode outside autograd, on one and two threads (the weights kept from the
    // first call on).
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2, 1}) {
      set_num_threads(threads);
      NoGradGuard no_grad;
      runs.push_back(conv2d(x, w, b, opt).to_vector<float>());
    }
    REQUIRE(runs[0] == runs[1]);
    REQUIRE(runs[0] == runs[2]);
    // Inside autograd (the weights transformed for the call) and in chunks of one output row:
    // the same bits.
    std::vector<float> y((size_t)(g.N * g.Cout * Ho * Wo)), chunked(y.size());
    REQUIRE(grad_enabled());
    cpu::winograd_2x2_conv2d(x.data<float>(), w.data<float>(), bp, y.data(), g.N, g.C, g.H, g.W, g.Cout, g.ph, g.pw);
    REQUIRE(y == runs[0]);
    cpu::winograd_2x2_conv2d(x.data<float>(), w.data<float>(), bp, chunked.data(), g.N, g.C, g.H, g.W, g.Cout, g.ph,
                             g.pw, 1);
    REQUIRE(chunked == y);

    std::vector<float> ref(y.size());
    reference::conv2d(x.data<float>(), w.data<float>(), bp, ref.data(), g.N, g.C, g.H, g.W, g.Cout, 2, 2, Ho, Wo, p);
    const Shape ys{g.N, g.Cout, Ho, Wo};
    const Tensor terms = abs_terms(x.data<float>(), w.data<float>(), bp, g.N, g.C, g.H, g.W, g.Cout, g.ph, g.pw);
    require_within_bound(Tensor::from_vector(y, ys), Tensor::from_vector(ref, ys), terms, forward_ops(g.C), "F(3,2) y");

    // bf16 products: the transformed operands rounded to bf16, within bf16's bound of the same
    // sums; the kept (packed in bf16) and the per-call weights give the same bits.
    cpu::MatmulPrecisionScope bf16(cpu::MatmulPrecision::bf16);
    std::vector<float> y16(y.size());
    cpu::winograd_2x2_conv2d(x.data<float>(), w.data<float>(), bp, y16.data(), g.N, g.C, g.H, g.W, g.Cout, g.ph, g.pw);
    CHECK(y16 != y);  // the bf16 kernel did the products
    for (int call = 0; call < 2; ++call) {
      NoGradGuard no_grad;
      std::vector<float> yi(y.size());
      cpu::winograd_2x2_conv2d(x.data<float>(), w.data<float>(), bp, yi.data(), g.N, g.C, g.H, g.W, g.Cout, g.ph,
                               g.pw);
      REQUIRE(yi == y16);
    }
    require_within_bf16_bound(Tensor::from_vector(y16, ys), Tensor::from_vector(ref, ys), terms, forward_ops(g.C),
                              "F(3,2) y in bf16");
  }
}

TEST_CASE("F(3,2) outside autograd: weights kept between calls, weights changed in place read again", "[conv][winograd]") {
  if (!cpu::sgemm_available()) return;
  const Geo g{2, 32, 2, 40, 24, 0, 0, true};
  Tensor x = det_uniform({g.N, g.C, g.H, g.W}, 400, -1, 1, DType::f32);
  Tensor w = det_uniform({g.Cout, g.C, 2, 2}, 401, -0.3, 0.3, DType::f32);
  Tensor b = det_uniform({g.Cout}, 402, -1, 1, DType::f32);
  auto run = [&] {
    std::vector<float> y((size_t)(g.N * g.Cout * (g.W - 1)));
    cpu::winograd_2x2_conv2d(x.data<float>(), w.data<float>(), b.data<float>(), y.data(), g.N, g.C, g.H, g.W, g.Cout,
                             0, 0);
    return y;
  };
  auto kept = [&] {
    NoGradGuard no_grad;
    return run();
  };
  const std::vector<float> first = run();  // inside autograd: transformed for the call
  for (int call = 0; call < 3; ++call) REQUIRE(kept() == first);
  w.data<float>()[5] += 0.25f;
  const std::vector<float> changed = run();
  REQUIRE(changed != first);
  for (int call = 0; call < 3; ++call) REQUIRE(kept() == changed);
}

TEST_CASE("F(3,2) takes 2x2 stride-1 layers of 16 channels or more and 6 output columns or more, nothing else",
          "[conv][winograd]") {
  if (!cpu::sgemm_available()) return;
  const Conv2dParams plain{1, 1, 0, 0, 1, 1, 1, true};
  CHECK(cpu::winograd_2x2_applies(16, 16, 2, 2, 6, plain));
  CHECK_FALSE(cpu::winograd_2x2_applies(16, 16, 2, 2, 5, plain));   // a tile of three would be mostly waste
  CHECK_FALSE(cpu::winograd_2x2_applies(15, 16, 2, 2, 64, plain));  // too few input channels
  CHECK_FALSE(cpu::winograd_2x2_applies(16, 8, 2, 2, 64, plain));   // too few output channels
  CHECK_FALSE(cpu::winograd_2x2_applies(16, 16, 3, 3, 64, plain));  // 3x3: winograd.h
  CHECK_FALSE(cpu::winograd_2x2_applies(16, 16, 2, 3, 64, plain));
  Conv2dParams strided = plain;
  strided.stride_w = 2;
  CHECK_FALSE(cpu::winograd_2x2_applies(16, 16, 2, 2, 64, strided));
  Conv2dParams dilated = plain;
  dilated.dilation_h = 2;
  CHECK_FALSE(cpu::winograd_2x2_applies(16, 16, 2, 2, 64, dilated));
  Conv2dParams grouped = plain;
  grouped.groups = 2;
  CHECK_FALSE(cpu::winograd_2x2_applies(32, 32, 2, 2, 64, grouped));
}

#endif
