// conv2d and pooling: golden tests against PyTorch (tools/reference/ops_conv.py), float64
// gradient checks, the im2col, Winograd and direct paths against the plain-loop reference on
// many geometries (both thread regimes), and argument errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "golden_runner.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/cpu/conv_direct.h"
#include "ops/cpu/conv_reference.h"
#include "runtime/cpu/gemm.h"
#include "ops/cpu/winograd.h"
#include "runtime/threading.h"
#include "tolerance.h"

using namespace ocrt;
using namespace ocrt::testing;

namespace {

const SafetensorsFile& fixture() {
  static const SafetensorsFile f = load_safetensors(std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/ops_conv.safetensors");
  return f;
}

Conv2dOptions conv_opt(Pair stride, Pair padding, Pair dilation = {1, 1}, int64_t groups = 1) {
  Conv2dOptions o;
  o.stride = stride, o.padding = padding, o.dilation = dilation, o.groups = groups;
  return o;
}

struct ThreadCountGuard {
  int saved = num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

}  // namespace

TEST_CASE("conv2d matches PyTorch, forward and every gradient", "[conv][golden]") {
  const auto& f = fixture();
  run_golden_case(f, "conv_basic", [](const TensorList& in) { return TensorList{conv2d(in[0], in[1], in[2], conv_opt({1, 1}, {1, 1}))}; });
  run_golden_case(f, "conv_nobias_stride", [](const TensorList& in) { return TensorList{conv2d(in[0], in[1], Tensor(), conv_opt({2, 3}, {1, 2}))}; });
  run_golden_case(f, "conv_dilation", [](const TensorList& in) { return TensorList{conv2d(in[0], in[1], in[2], conv_opt({1, 1}, {2, 1}, {2, 3}))}; });
  run_golden_case(f, "conv_groups", [](const TensorList& in) { return TensorList{conv2d(in[0], in[1], in[2], conv_opt({1, 1}, {1, 1}, {1, 1}, 2))}; });
  run_golden_case(f, "conv_depthwise", [](const TensorList& in) { return TensorList{conv2d(in[0], in[1], Tensor(), conv_opt({2, 2}, {1, 1}, {1, 1}, 3))}; });
  run_golden_case(f, "conv_1x1", [](const TensorList& in) { return TensorList{conv2d(in[0], in[1], in[2])}; });
  run_golden_case(f, "conv_k2_pad0", [](const TensorList& in) { return TensorList{conv2d(in[0], in[1])}; });
  run_golden_case(f, "conv_cin1", [](const TensorList& in) { return TensorList{conv2d(in[0], in[1], in[2], conv_opt({1, 1}, {1, 1}))}; });
  run_golden_case(f, "conv_f32", [](const TensorList& in) { return TensorList{conv2d(in[0], in[1], in[2], conv_opt({1, 1}, {1, 1}))}; });
}

TEST_CASE("pooling matches PyTorch, forward and gradient", "[pool][golden]") {
  const auto& f = fixture();
  auto maxp = [](Pair k, Pair s, Pair p, Pair d = {1, 1}, bool ceil = false) {
    MaxPool2dOptions o;
    o.kernel = k, o.stride = s, o.padding = p, o.dilation = d, o.ceil_mode = ceil;
    return o;
  };
  auto avgp = [](Pair k, Pair s, Pair p, bool ceil = false, bool include = true) {
    AvgPool2dOptions o;
    o.kernel = k, o.stride = s, o.padding = p, o.ceil_mode = ceil, o.count_include_pad = include;
    return o;
  };
  run_golden_case(f, "maxpool_2x2", [&](const TensorList& in) { return TensorList{max_pool2d(in[0], maxp({2, 2}, {2, 2}, {0, 0}))}; });
  run_golden_case(f, "maxpool_crnn", [&](const TensorList& in) { return TensorList{max_pool2d(in[0], maxp({2, 2}, {2, 1}, {0, 1}))}; });
  run_golden_case(f, "maxpool_odd_ceil", [&](const TensorList& in) { return TensorList{max_pool2d(in[0], maxp({3, 3}, {2, 2}, {1, 1}, {1, 1}, true))}; });
  run_golden_case(f, "maxpool_dilation", [&](const TensorList& in) { return TensorList{max_pool2d(in[0], maxp({2, 3}, {1, 1}, {1, 1}, {2, 1}))}; });
  run_golden_case(f, "avgpool_2x2", [&](const TensorList& in) { return TensorList{avg_pool2d(in[0], avgp({2, 2}, {0, 0}, {0, 0}))}; });
  run_golden_case(f, "avgpool_pad", [&](const TensorList& in) { return TensorList{avg_pool2d(in[0], avgp({3, 3}, {2, 2}, {1, 1}))}; });
  run_golden_case(f, "avgpool_pad_exclude_ceil", [&](const TensorList& in) { return TensorList{avg_pool2d(in[0], avgp({3, 3}, {2, 2}, {1, 1}, true, false))}; });
  run_golden_case(f, "adaptive_avg", [](const TensorList& in) { return TensorList{adaptive_avg_pool2d(in[0], {3, 4})}; });
  run_golden_case(f, "adaptive_avg_height1", [](const TensorList& in) { return TensorList{adaptive_avg_pool2d(in[0], {1, 5})}; });
  run_golden_case(f, "upsample_nearest_2x", [](const TensorList& in) { return TensorList{upsample_nearest2d(in[0], {2, 2})}; });
  run_golden_case(f, "upsample_nearest_3x1", [](const TensorList& in) { return TensorList{upsample_nearest2d(in[0], {3, 1})}; });
}

TEST_CASE("conv2d and pooling gradients agree with finite differences", "[conv][pool][gradcheck]") {
  check_gradients("conv2d stride/pad/dilation/groups", [](const std::vector<Tensor>& in) {
    return conv2d(in[0], in[1], in[2], conv_opt({2, 1}, {1, 2}, {1, 2}, 2));
  }, {det_uniform({2, 4, 5, 6}, 1), det_uniform({4, 2, 3, 2}, 2), det_uniform({4}, 3)});
  check_gradients("conv2d 1x1 batch 1", [](const std::vector<Tensor>& in) { return conv2d(in[0], in[1]); },
                  {det_uniform({1, 3, 2, 3}, 4), det_uniform({2, 3, 1, 1}, 5)});
  MaxPool2dOptions mp;
  mp.kernel = {2, 2}, mp.stride = {2, 1}, mp.padding = {0, 1};
  check_gradients("max_pool2d", [&](const std::vector<Tensor>& in) { return max_pool2d(in[0], mp); },
                  {det_uniform({2, 2, 4, 5}, 6)});
  AvgPool2dOptions ap;
  ap.kernel = {3, 2}, ap.stride = {2, 1}, ap.padding = {1, 1}, ap.count_include_pad = false;
  check_gradients("avg_pool2d", [&](const std::vector<Tensor>& in) { return avg_pool2d(in[0], ap); },
                  {det_uniform({1, 2, 5, 4}, 7)});
  check_gradients("adaptive_avg_pool2d", [](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], {2, 3}); },
                  {det_uniform({2, 1, 5, 7}, 8)});
  check_gradients("upsample_nearest2d", [](const std::vector<Tensor>& in) { return upsample_nearest2d(in[0], {2, 3}); },
                  {det_uniform({2, 2, 3, 4}, 9)});
}

TEST_CASE("conv2d's im2col path (and the direct sum for few output channels) equals the plain-loop reference on many geometries and thread counts", "[conv]") {
  ThreadCountGuard guard;
  struct Geo {
    int64_t N, C, H, W, Cout, kh, kw;
    Conv2dOptions opt;
  };
  const std::vector<Geo> geos = {
      {1, 1, 5, 5, 1, 1, 1, conv_opt({1, 1}, {0, 0})},
      {3, 2, 6, 7, 4, 3, 3, conv_opt({1, 1}, {1, 1})},
      {4, 4, 9, 5, 6, 3, 2, conv_opt({2, 3}, {1, 0}, {1, 2}, 2)},
      {2, 6, 4, 33, 6, 3, 3, conv_opt({1, 1}, {1, 1}, {1, 1}, 6)},
      {5, 3, 2, 9, 5, 2, 2, conv_opt({1, 1}, {0, 0})},
      {2, 8, 3, 3, 4, 1, 1, conv_opt({1, 1}, {0, 0})},
      {3, 2, 7, 7, 3, 5, 5, conv_opt({3, 2}, {2, 2})},
  };
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (size_t gi = 0; gi < geos.size(); ++gi) {
      const Geo& g = geos[gi];
      INFO("geometry " << gi << ", " << threads << " threads");
      Tensor x = det_uniform({g.N, g.C, g.H, g.W}, 10 + gi, -1, 1, DType::f32);
      Tensor w = det_uniform({g.Cout, g.C / g.opt.groups, g.kh, g.kw}, 20 + gi, -1, 1, DType::f32);
      Tensor b = det_uniform({g.Cout}, 30 + gi, -1, 1, DType::f32);
      x.set_requires_grad(true), w.set_requires_grad(true), b.set_requires_grad(true);
      Tensor y = conv2d(x, w, b, g.opt);
      Tensor dy = det_uniform(y.shape(), 40 + gi, -1, 1, DType::f32);
      y.backward(dy);

      const Conv2dParams p{g.opt.stride[0], g.opt.stride[1], g.opt.padding[0], g.opt.padding[1],
                           g.opt.dilation[0], g.opt.dilation[1], g.opt.groups};
      Tensor ry = Tensor::empty(y.shape()), rdx = Tensor::empty(x.shape()), rdw = Tensor::empty(w.shape()),
             rdb = Tensor::empty(b.shape());
      reference::conv2d(x.data<float>(), w.data<float>(), b.data<float>(), ry.data<float>(), g.N, g.C, g.H, g.W,
                        g.Cout, g.kh, g.kw, y.size(2), y.size(3), p);
      reference::conv2d_backward(x.data<float>(), w.data<float>(), dy.data<float>(), rdx.data<float>(),
                                 rdw.data<float>(), rdb.data<float>(), g.N, g.C, g.H, g.W, g.Cout, g.kh, g.kw,
                                 y.size(2), y.size(3), p);
      // Each result is a float32 sum of products: within 2 gamma_n of the sum of |terms|
      // (tests/tolerance.h), those sums being the reference run on |x|, |w|, |b| and |dy|.
      // n: y sums C/groups kh kw products and the bias, dx at most Cout/groups kh kw products,
      // dw and db one per output pixel of every sample.
      NoGradGuard no_grad;
      const Tensor ax = abs(x.detach()), aw = abs(w.detach()), ab = abs(b.detach()), ady = abs(dy);
      Tensor sy = Tensor::empty(y.shape()), sdx = Tensor::empty(x.shape()), sdw = Tensor::empty(w.shape()),
             sdb = Tensor::empty(b.shape());
      reference::conv2d(ax.data<float>(), aw.data<float>(), ab.data<float>(), sy.data<float>(), g.N, g.C, g.H, g.W,
                        g.Cout, g.kh, g.kw, y.size(2), y.size(3), p);
      reference::conv2d_backward(ax.data<float>(), aw.data<float>(), ady.data<float>(), sdx.data<float>(),
                                 sdw.data<float>(), sdb.data<float>(), g.N, g.C, g.H, g.W, g.Cout, g.kh, g.kw,
                                 y.size(2), y.size(3), p);
      const int64_t taps = g.kh * g.kw, pixels = g.N * y.size(2) * y.size(3);
      require_within_bound(y, ry, sy, g.C / g.opt.groups * taps + 1, "y");
      require_within_bound(x.grad(), rdx, sdx, g.Cout / g.opt.groups * taps, "dx");
      require_within_bound(w.grad(), rdw, sdw, pixels, "dw");
      require_within_bound(b.grad(), rdb, sdb, pixels, "db");
    }
  }
}

TEST_CASE("conv2d with few output channels: the direct sum against the plain-loop reference", "[conv]") {
  // Rows wide enough for every block size of ops/cpu/conv_direct.cpp (64, 32, 16 and 8 columns),
  // then the 8-column blocks and edge columns of what is left; kernels 1x1 to 5x5, padding none,
  // the kernel's reach and wider; one-row and one-column inputs; chunks of 8 output channels.
  ThreadCountGuard guard;
  struct Geo {
    int64_t N, C, H, W, Cout, kh, kw, ph, pw;
    bool bias;
  };
  const std::vector<Geo> geos = {
      {1, 16, 5, 150, 1, 3, 3, 1, 1, true},  {2, 3, 4, 77, 2, 3, 3, 1, 1, false}, {1, 5, 3, 41, 3, 3, 3, 0, 0, true},
      {2, 8, 6, 37, 4, 3, 3, 1, 1, true},    {1, 4, 4, 29, 5, 5, 3, 2, 1, true},  {1, 2, 3, 20, 6, 1, 1, 0, 0, false},
      {2, 7, 5, 19, 7, 3, 3, 3, 3, true},    {1, 32, 4, 70, 8, 3, 3, 1, 1, true}, {1, 3, 1, 9, 8, 3, 3, 1, 1, true},
      {2, 2, 7, 1, 1, 3, 3, 1, 1, true},     {1, 1, 3, 3, 2, 3, 3, 0, 1, false},
      // Many output channels of few input values (a first layer on gray lines): chunks of 8.
      {2, 1, 32, 90, 64, 3, 3, 1, 1, true},  {1, 3, 5, 40, 21, 3, 3, 1, 1, true}, {1, 1, 4, 30, 13, 5, 5, 2, 2, false},
  };
  for (size_t gi = 0; gi < geos.size(); ++gi) {
    const Geo& g = geos[gi];
    INFO("geometry " << gi << ": Cout " << g.Cout << ", " << g.kh << "x" << g.kw << ", W " << g.W);
    const Conv2dParams p{1, 1, g.ph, g.pw, 1, 1, 1, true};
    REQUIRE(cpu::direct_conv_applies(g.C, g.Cout, g.kh, g.kw, p));
    Tensor x = det_uniform({g.N, g.C, g.H, g.W}, 80 + gi, -1, 1, DType::f32);
    Tensor w = det_uniform({g.Cout, g.C, g.kh, g.kw}, 90 + gi, -1, 1, DType::f32);
    Tensor b = g.bias ? det_uniform({g.Cout}, 100 + gi, -1, 1, DType::f32) : Tensor();
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      NoGradGuard no_grad;
      runs.push_back(conv2d(x, w, b, conv_opt({1, 1}, {g.ph, g.pw})).to_vector<float>());
    }
    REQUIRE(runs[0] == runs[1]);  // the thread count changes nothing
    const int64_t Ho = g.H + 2 * g.ph - g.kh + 1, Wo = g.W + 2 * g.pw - g.kw + 1;
    const Shape ys{g.N, g.Cout, Ho, Wo};
    std::vector<float> direct((size_t)(g.N * g.Cout * Ho * Wo));
    const float* bp = g.bias ? b.data<float>() : nullptr;
    cpu::direct_conv2d(x.data<float>(), w.data<float>(), bp, direct.data(), g.N, g.C, g.H, g.W, g.Cout, g.kh, g.kw,
                       g.ph, g.pw);
    REQUIRE(direct == runs[0]);  // conv2d took the direct path
    std::vector<float> ref(direct.size()), sums(direct.size());
    reference::conv2d(x.data<float>(), w.data<float>(), bp, ref.data(), g.N, g.C, g.H, g.W, g.Cout, g.kh, g.kw, Ho, Wo,
                      p);
    // Both are float32 sums of C kh kw products and the bias: within 2 gamma_n of the sum of
    // |terms| (the reference run on |x|, |w|, |b|).
    NoGradGuard no_grad;
    const Tensor ax = abs(x), aw = abs(w), ab = g.bias ? abs(b) : Tensor();
    reference::conv2d(ax.data<float>(), aw.data<float>(), g.bias ? ab.data<float>() : nullptr, sums.data(), g.N, g.C,
                      g.H, g.W, g.Cout, g.kh, g.kw, Ho, Wo, p);
    require_within_bound(Tensor::from_vector(direct, ys), Tensor::from_vector(ref, ys), Tensor::from_vector(sums, ys),
                         g.C * g.kh * g.kw + 1, "direct y");
  }
  // Nine output channels of 28 input values each are past the direct path: im2col takes them,
  // and strided layers.
  CHECK_FALSE(cpu::direct_conv_applies(28, cpu::kDirectConvMaxCout + 1, 1, 1, Conv2dParams{1, 1, 1, 1, 1, 1, 1, true}));
  CHECK_FALSE(cpu::direct_conv_applies(1, 1, 3, 3, Conv2dParams{2, 2, 1, 1, 1, 1, 1, true}));
}

TEST_CASE("conv2d of an image too large to unfold at once goes through bands of rows, as the reference", "[conv]") {
  // A page-sized sample unfolds into more than kMaxUnfoldBytes (16 MB): ops/cpu/conv.cpp then
  // unfolds and multiplies bands of output rows. Both geometries here take several bands
  // (the second with groups and stride 2); exact mode keeps Winograd out of the way.
  ThreadCountGuard guard;
  const ConvModeScope exact(ConvMode::exact);
  struct Geo {
    int64_t N, C, H, W, Cout;
    Conv2dOptions opt;
  };
  const std::vector<Geo> geos = {{2, 16, 210, 190, 3, conv_opt({1, 1}, {1, 1})},
                                 {1, 16, 601, 599, 4, conv_opt({2, 2}, {1, 1}, {1, 1}, 2)}};
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (size_t gi = 0; gi < geos.size(); ++gi) {
      const Geo& g = geos[gi];
      INFO("geometry " << gi << ", " << threads << " threads");
      const Tensor x = det_uniform({g.N, g.C, g.H, g.W}, 50 + gi, -1, 1, DType::f32);
      const Tensor w = det_uniform({g.Cout, g.C / g.opt.groups, 3, 3}, 60 + gi, -1, 1, DType::f32);
      const Tensor b = det_uniform({g.Cout}, 70 + gi, -1, 1, DType::f32);
      NoGradGuard no_grad;
      const Tensor y = conv2d(x, w, b, g.opt);
      REQUIRE((g.C / g.opt.groups) * 9 * y.size(2) * y.size(3) * 4 > (int64_t(16) << 20));  // more than one band
      const Conv2dParams p{g.opt.stride[0], g.opt.stride[1], g.opt.padding[0], g.opt.padding[1],
                           g.opt.dilation[0], g.opt.dilation[1], g.opt.groups};
      Tensor ry = Tensor::empty(y.shape()), sy = Tensor::empty(y.shape());
      reference::conv2d(x.data<float>(), w.data<float>(), b.data<float>(), ry.data<float>(), g.N, g.C, g.H, g.W,
                        g.Cout, 3, 3, y.size(2), y.size(3), p);
      const Tensor ax = abs(x), aw = abs(w), ab = abs(b);
      reference::conv2d(ax.data<float>(), aw.data<float>(), ab.data<float>(), sy.data<float>(), g.N, g.C, g.H, g.W,
                        g.Cout, 3, 3, y.size(2), y.size(3), p);
      require_within_bound(y, ry, sy, g.C / g.opt.groups * 9 + 1, "y");
    }
  }
}

#if defined(OCRT_CPU_WINOGRAD)
namespace {

// Error bounds for Winograd F(4x4,3x3) (ops/cpu/winograd.cpp). Its float32 result is a chain of
// roundings through small linear maps, so the same componentwise forward-error bound as for a
// sum holds with the matrices replaced by their absolute values (Higham, ch. 3):
//   |fl(y) - y| <= gamma_n |A^T| [ sum_c (|G| |g_kc| |G^T|) * (|B^T| |d_c| |B|) ] |A|
// where n counts the roundings along the longest path from an input to an output. Counted in
// winograd.cpp: per axis, the input transform 3 (one product by 5, two additions; the products
// by 4 are exact), the filter transform 4 (two additions, the product by 1/6, and 1/6 itself
// rounded), the output transform 3 (its products by 2, 4 and 8 are exact); the 36 products sum
// C terms. So n = C + 2 (3 + 4 + 3) + 1 for the bias, and tests/tolerance.h doubles the bound.
// The weight gradient, G^T [ sum over tiles (A dy A^T) * (B^T d B) ] G, in the same way: per
// axis dy's transform 2, the input's 3, G^T's 5 (two additions inside, two outside, 1/6 and its
// rounding); its products sum the tiles of a chunk and add each chunk's result to the last, at
// most 2 N tiles roundings: n = 2 N tiles + 2 (2 + 3 + 5).
// These sums of |terms| are what the bound multiplies; a wrong coefficient or a swapped tap
// makes errors of the order of the terms themselves, far outside it.
constexpr double kBt[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                              {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
constexpr double kG[6][3] = {{1. / 4, 0, 0},           {-1. / 6, -1. / 6, -1. / 6}, {-1. / 6, 1. / 6, -1. / 6},
                             {1. / 24, 1. / 12, 1. / 6}, {1. / 24, -1. / 12, 1. / 6}, {0, 0, 1}};
constexpr double kAt[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
constexpr int64_t kWinogradFilterOps = 4, kWinogradInputOps = 3, kWinogradOutputOps = 3, kWinogradDyOps = 2,
                  kWinogradWeightOutOps = 5;

// out (R x R) = |M| X |M|^T for X (S x S) and M (R x S), all row-major.
template <int R, int S>
void abs_sandwich(const double (&M)[R][S], const double* X, double* out) {
  double t[R][S] = {};
  for (int a = 0; a < R; ++a)
    for (int j = 0; j < S; ++j)
      for (int i = 0; i < S; ++i) t[a][j] += std::abs(M[a][i]) * X[i * S + j];
  for (int a = 0; a < R; ++a)
    for (int b = 0; b < R; ++b) {
      double v = 0;
      for (int j = 0; j < S; ++j) v += t[a][j] * std::abs(M[b][j]);
      out[a * R + b] = v;
    }
}

// |B^T| |d| |B| for the 6x6 input tile of channel c, sample n, at tile (ty, tx).
void abs_input_tile(const float* x, int64_t n, int64_t c, int64_t C, int64_t H, int64_t W, int64_t ty, int64_t tx,
                    int64_t ph, int64_t pw, double* v) {
  double d[36];
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      const int64_t ih = 4 * ty - ph + i, iw = 4 * tx - pw + j;
      d[i * 6 + j] = ih >= 0 && ih < H && iw >= 0 && iw < W ? std::abs(x[((n * C + c) * H + ih) * W + iw]) : 0.0;
    }
  abs_sandwich(kBt, d, v);
}

// The sums of |terms| of winograd_conv2d's outputs (N, Cout, Ho, Wo); bias may be null.
Tensor winograd_abs_terms(const float* x, const float* w, const float* bias, int64_t N, int64_t C, int64_t H,
                          int64_t W, int64_t Cout, int64_t ph, int64_t pw) {
  const int64_t Ho = H + 2 * ph - 2, Wo = W + 2 * pw - 2, th = (Ho + 3) / 4, tw = (Wo + 3) / 4;
  std::vector<double> U((size_t)(Cout * C * 36)), V((size_t)(C * 36)), out((size_t)(N * Cout * Ho * Wo));
  for (int64_t kc = 0; kc < Cout * C; ++kc) {
    double g[9];
    for (int i = 0; i < 9; ++i) g[i] = std::abs(w[kc * 9 + i]);
    abs_sandwich(kG, g, &U[(size_t)(kc * 36)]);
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ty = 0; ty < th; ++ty)
      for (int64_t tx = 0; tx < tw; ++tx) {
        for (int64_t c = 0; c < C; ++c) abs_input_tile(x, n, c, C, H, W, ty, tx, ph, pw, &V[(size_t)(c * 36)]);
        for (int64_t k = 0; k < Cout; ++k) {
          double m[36] = {}, o[16];
          for (int64_t c = 0; c < C; ++c)
            for (int xi = 0; xi < 36; ++xi) m[xi] += U[(size_t)((k * C + c) * 36 + xi)] * V[(size_t)(c * 36 + xi)];
          abs_sandwich(kAt, m, o);
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b) {
              const int64_t oh = 4 * ty + a, ow = 4 * tx + b;
              if (oh < Ho && ow < Wo)
                out[(size_t)(((n * Cout + k) * Ho + oh) * Wo + ow)] = o[a * 4 + b] + (bias ? std::abs(bias[k]) : 0.0);
            }
        }
      }
  return Tensor::from_vector(out, {N, Cout, Ho, Wo});
}

// The sums of |terms| of winograd_conv2d_weight_grad's dw (Cout, C, 3, 3) for dy (N, Cout, Ho, Wo).
Tensor winograd_weight_grad_abs_terms(const float* x, const float* dy, int64_t N, int64_t C, int64_t H, int64_t W,
                                      int64_t Cout, int64_t ph, int64_t pw) {
  const int64_t Ho = H + 2 * ph - 2, Wo = W + 2 * pw - 2, th = (Ho + 3) / 4, tw = (Wo + 3) / 4;
  double A[6][4];  // A = (A^T)^T
  for (int i = 0; i < 6; ++i)
    for (int a = 0; a < 4; ++a) A[i][a] = kAt[a][i];
  double Gt[3][6];
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 6; ++i) Gt[r][i] = kG[i][r];
  std::vector<double> S((size_t)(Cout * C * 36), 0.0), V((size_t)(C * 36)), D((size_t)(Cout * 36));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ty = 0; ty < th; ++ty)
      for (int64_t tx = 0; tx < tw; ++tx) {
        for (int64_t c = 0; c < C; ++c) abs_input_tile(x, n, c, C, H, W, ty, tx, ph, pw, &V[(size_t)(c * 36)]);
        for (int64_t k = 0; k < Cout; ++k) {
          double t[16];
          for (int a = 0; a < 4; ++a)
            for (int b = 0; b < 4; ++b) {
              const int64_t oh = 4 * ty + a, ow = 4 * tx + b;
              t[a * 4 + b] = oh < Ho && ow < Wo ? std::abs(dy[((n * Cout + k) * Ho + oh) * Wo + ow]) : 0.0;
            }
          abs_sandwich(A, t, &D[(size_t)(k * 36)]);
        }
        for (int64_t k = 0; k < Cout; ++k)
          for (int64_t c = 0; c < C; ++c)
            for (int xi = 0; xi < 36; ++xi)
              S[(size_t)((k * C + c) * 36 + xi)] += D[(size_t)(k * 36 + xi)] * V[(size_t)(c * 36 + xi)];
      }
  std::vector<double> out((size_t)(Cout * C * 9));
  for (int64_t kc = 0; kc < Cout * C; ++kc) abs_sandwich(Gt, &S[(size_t)(kc * 36)], &out[(size_t)(kc * 9)]);
  return Tensor::from_vector(out, {Cout, C, 3, 3});
}

// The forward bound's n for C input channels, and the weight gradient's for N images of
// `tiles` tiles each (see above).
int64_t winograd_forward_ops(int64_t C, bool bias) {
  return C + 2 * (kWinogradInputOps + kWinogradFilterOps + kWinogradOutputOps) + (bias ? 1 : 0);
}
int64_t winograd_weight_grad_ops(int64_t N, int64_t tiles) {
  return 2 * N * tiles + 2 * (kWinogradDyOps + kWinogradInputOps + kWinogradWeightOutOps);
}

}  // namespace
TEST_CASE("fast mode through 3x3 layers: Winograd F(4x4,3x3) against the plain-loop reference", "[conv][winograd]") {
  ThreadCountGuard guard;
  if (!cpu::sgemm_available()) return;  // the generic path (OCRT_CPU_ISA=generic) has no Winograd: im2col and Eigen
  struct Geo {
    int64_t N, C, H, W, Cout, ph, pw;
    bool bias;
  };
  const std::vector<Geo> geos = {
      {2, 16, 5, 7, 16, 1, 1, true},    // partial tiles down and across
      {1, 24, 4, 33, 20, 1, 1, false},  // a CRNN row of tiles (H 4), odd channel counts
      {3, 16, 8, 9, 32, 0, 0, true},    // no padding
      {2, 17, 3, 3, 16, 2, 2, true},    // padding wider than the kernel's reach
      {1, 32, 1, 12, 16, 1, 1, false},  // one input row
      {2, 16, 6, 1, 16, 1, 1, true},    // one input column
      {2, 64, 16, 40, 48, 1, 1, true},  // several tile rows and columns per image
      {1, 16, 6, 70, 24, 1, 1, true},   // rows of 18 tiles: a block of 16 and a partial one (AVX-512)
      {1, 16, 4, 128, 16, 1, 1, false}, // rows of two whole blocks of 16 tiles
  };
  for (size_t gi = 0; gi < geos.size(); ++gi) {
    const Geo& g = geos[gi];
    INFO("geometry " << gi);
    Tensor x = det_uniform({g.N, g.C, g.H, g.W}, 50 + gi, -1, 1, DType::f32);
    Tensor w = det_uniform({g.Cout, g.C, 3, 3}, 60 + gi, -0.3, 0.3, DType::f32);
    Tensor b = g.bias ? det_uniform({g.Cout}, 70 + gi, -1, 1, DType::f32) : Tensor();
    const Conv2dOptions opt = conv_opt({1, 1}, {g.ph, g.pw});
    const Conv2dParams p{1, 1, g.ph, g.pw, 1, 1, 1, true};
    REQUIRE(cpu::winograd_applies(g.C, g.Cout, 3, 3, p));
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      NoGradGuard no_grad;
      runs.push_back(conv2d(x, w, b, opt).to_vector<float>());
    }
    // The thread count changes nothing, and conv2d in fast mode is the Winograd path (bit for bit).
    REQUIRE(runs[0] == runs[1]);
    const int64_t Ho = g.H + 2 * g.ph - 2, Wo = g.W + 2 * g.pw - 2;
    std::vector<float> direct((size_t)(g.N * g.Cout * Ho * Wo)), chunked(direct.size());
    cpu::winograd_conv2d(x.data<float>(), w.data<float>(), g.bias ? b.data<float>() : nullptr, direct.data(), g.N, g.C,
                         g.H, g.W, g.Cout, g.ph, g.pw);
    REQUIRE(direct == runs[0]);
    // Chunks of one row of tiles (many chunk boundaries) give the same result.
    cpu::winograd_conv2d(x.data<float>(), w.data<float>(), g.bias ? b.data<float>() : nullptr, chunked.data(), g.N,
                         g.C, g.H, g.W, g.Cout, g.ph, g.pw, 1);
    REQUIRE(chunked == direct);
    // So do the pooled outputs of chunks of one row (ReLU and a 2x2 pool at a stride of (2, 1)
    // with a column of padding, fused): relu then max_pool2d of the whole output.
    if (Ho >= 2 && Wo >= 2) {
      NoGradGuard no_grad;
      const MaxPool2dOptions pool{{2, 2}, {2, 1}, {0, 1}};
      const Tensor want = max_pool2d(relu(Tensor::from_vector(direct, {g.N, g.Cout, Ho, Wo})), pool);
      const cpu::WinogradReluPool spec{2, 1, 1, want.size(2), want.size(3)};
      std::vector<float> pooled((size_t)want.numel());
      cpu::winograd_conv2d(x.data<float>(), w.data<float>(), g.bias ? b.data<float>() : nullptr, pooled.data(), g.N,
                           g.C, g.H, g.W, g.Cout, g.ph, g.pw, 1, &spec);
      REQUIRE(pooled == want.to_vector<float>());
    }

    std::vector<float> ref(direct.size());
    reference::conv2d(x.data<float>(), w.data<float>(), g.bias ? b.data<float>() : nullptr, ref.data(), g.N, g.C, g.H,
                      g.W, g.Cout, 3, 3, Ho, Wo, p);
    // F(4x4,3x3) rounds more than a direct sum: its transforms scale values by up to 8 and 1/24
    // before they cancel; the componentwise bound above covers that.
    const Shape ys{g.N, g.Cout, Ho, Wo};
    require_within_bound(Tensor::from_vector(direct, ys), Tensor::from_vector(ref, ys),
                         winograd_abs_terms(x.data<float>(), w.data<float>(), g.bias ? b.data<float>() : nullptr, g.N,
                                            g.C, g.H, g.W, g.Cout, g.ph, g.pw),
                         winograd_forward_ops(g.C, g.bias), "Winograd y");
  }
}

TEST_CASE("Winograd's weight gradient against the plain-loop reference", "[conv][winograd]") {
  ThreadCountGuard guard;
  if (!cpu::sgemm_available()) return;  // the generic path (OCRT_CPU_ISA=generic) has no Winograd: im2col and Eigen
  struct Geo {
    int64_t N, C, H, W, Cout, ph, pw;
  };
  const std::vector<Geo> geos = {
      {2, 16, 5, 7, 16, 1, 1},    // partial tiles down and across
      {1, 24, 4, 33, 20, 1, 1},   // a CRNN row of tiles, odd channel counts
      {3, 16, 8, 9, 32, 0, 0},    // no padding
      {2, 17, 3, 3, 16, 2, 2},    // padding wider than the kernel's reach
      {1, 32, 1, 12, 16, 1, 1},   // one input row
      {2, 16, 6, 1, 16, 1, 1},    // one input column
      {4, 64, 16, 40, 48, 1, 1},  // many tiles summed
      {1, 16, 6, 70, 24, 1, 1},   // rows of 18 tiles: a block of 16 and a partial one (AVX-512)
  };
  for (size_t gi = 0; gi < geos.size(); ++gi) {
    const Geo& g = geos[gi];
    INFO("geometry " << gi);
    const int64_t Ho = g.H + 2 * g.ph - 2, Wo = g.W + 2 * g.pw - 2;
    Tensor x = det_uniform({g.N, g.C, g.H, g.W}, 130 + gi, -1, 1, DType::f32);
    Tensor w = det_uniform({g.Cout, g.C, 3, 3}, 140 + gi, -0.3, 0.3, DType::f32);
    Tensor dy = det_uniform({g.N, g.Cout, Ho, Wo}, 150 + gi, -1, 1, DType::f32);
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      std::vector<float> dw((size_t)(g.Cout * g.C * 9));
      cpu::winograd_conv2d_weight_grad(x.data<float>(), dy.data<float>(), dw.data(), g.N, g.C, g.H, g.W, g.Cout, g.ph,
                                       g.pw);
      runs.push_back(dw);
    }
    REQUIRE(runs[0] == runs[1]);  // the thread count changes nothing
    // Chunks of one row of tiles (sums carried across many chunks): the same to rounding.
    std::vector<float> chunked(runs[0].size());
    cpu::winograd_conv2d_weight_grad(x.data<float>(), dy.data<float>(), chunked.data(), g.N, g.C, g.H, g.W, g.Cout,
                                     g.ph, g.pw, 1);

    const Conv2dParams p{1, 1, g.ph, g.pw, 1, 1, 1};
    Tensor rdx = Tensor::empty(x.shape()), rdw = Tensor::empty(w.shape()), rdb = Tensor::empty({g.Cout});
    reference::conv2d_backward(x.data<float>(), w.data<float>(), dy.data<float>(), rdx.data<float>(),
                               rdw.data<float>(), rdb.data<float>(), g.N, g.C, g.H, g.W, g.Cout, 3, 3, Ho, Wo, p);
    // Within the componentwise bound above, chunked or not.
    const Tensor sdw = winograd_weight_grad_abs_terms(x.data<float>(), dy.data<float>(), g.N, g.C, g.H, g.W, g.Cout,
                                                      g.ph, g.pw);
    const int64_t n = winograd_weight_grad_ops(g.N, ((Ho + 3) / 4) * ((Wo + 3) / 4));
    require_within_bound(Tensor::from_vector(runs[0], w.shape()), rdw, sdw, n, "Winograd dw");
    require_within_bound(Tensor::from_vector(chunked, w.shape()), rdw, sdw, n, "Winograd dw, chunked");
  }
}

TEST_CASE("Winograd in bf16: y and dw within the bf16 bound of the plain-loop reference", "[conv][winograd][bf16]") {
  // In bf16 (runtime/cpu/gemm.h) the 36 products round the transformed tiles U and V to bf16: each
  // product U V changes by at most (2u + u^2) |U| |V| with u = 2^-8, and the output transform
  // carries that through the same |A^T| (sum |U| |V|) |A| as the float32 terms, so the bound is
  // bf16_product_tolerance over the same sums of |terms| and the same operation count.
  if (!cpu::sgemm_available()) return;
  cpu::MatmulPrecisionScope bf16(cpu::MatmulPrecision::bf16);
  struct Geo {
    int64_t N, C, H, W, Cout, pad;
  };
  const std::vector<Geo> geos = {{2, 16, 5, 7, 16, 1},    {1, 24, 4, 33, 20, 1}, {2, 64, 8, 30, 128, 1},
                                 {2, 17, 3, 3, 16, 2},    {1, 16, 6, 70, 24, 1}};
  for (size_t gi = 0; gi < geos.size(); ++gi) {
    const Geo& g = geos[gi];
    INFO("geometry " << gi);
    const int64_t Ho = g.H + 2 * g.pad - 2, Wo = g.W + 2 * g.pad - 2;
    const Tensor x = det_uniform({g.N, g.C, g.H, g.W}, 160 + gi, -1, 1, DType::f32);
    const Tensor w = det_uniform({g.Cout, g.C, 3, 3}, 170 + gi, -0.3, 0.3, DType::f32);
    const Tensor b = det_uniform({g.Cout}, 180 + gi, -1, 1, DType::f32);
    const Tensor dy = det_uniform({g.N, g.Cout, Ho, Wo}, 190 + gi, -1, 1, DType::f32);
    const Shape ys{g.N, g.Cout, Ho, Wo};
    std::vector<float> y((size_t)(g.N * g.Cout * Ho * Wo)), y32(y.size()), dw((size_t)(g.Cout * g.C * 9));
    cpu::winograd_conv2d(x.data<float>(), w.data<float>(), b.data<float>(), y.data(), g.N, g.C, g.H, g.W, g.Cout, g.pad,
                         g.pad);
    cpu::winograd_conv2d_weight_grad(x.data<float>(), dy.data<float>(), dw.data(), g.N, g.C, g.H, g.W, g.Cout, g.pad,
                                     g.pad);
    {
      cpu::MatmulPrecisionScope f32(cpu::MatmulPrecision::f32);
      cpu::winograd_conv2d(x.data<float>(), w.data<float>(), b.data<float>(), y32.data(), g.N, g.C, g.H, g.W, g.Cout,
                           g.pad, g.pad);
    }
    CHECK(y != y32);  // the bf16 kernel did the products
    // Outside autograd the weights are kept transformed from the second call on, and on the
    // avx512bf16 path the input tiles then go straight into the products' packed bf16 pairs
    // (sgemm_packed_ab, a row of 18 tiles straddling panels of 32 in the last geometry): the same
    // operands and sums as the training path's, so every call gives its bits.
    {
      NoGradGuard no_grad;
      for (int call = 0; call < 3; ++call) {
        INFO("inference call " << call);
        std::vector<float> yi(y.size());
        cpu::winograd_conv2d(x.data<float>(), w.data<float>(), b.data<float>(), yi.data(), g.N, g.C, g.H, g.W, g.Cout,
                             g.pad, g.pad);
        REQUIRE(yi == y);
      }
    }
    const Conv2dParams p{1, 1, g.pad, g.pad, 1, 1, 1};
    Tensor ry = Tensor::empty(ys), rdx = Tensor::empty(x.shape()), rdw = Tensor::empty(w.shape()),
           rdb = Tensor::empty({g.Cout});
    reference::conv2d(x.data<float>(), w.data<float>(), b.data<float>(), ry.data<float>(), g.N, g.C, g.H, g.W, g.Cout, 3,
                      3, Ho, Wo, p);
    reference::conv2d_backward(x.data<float>(), w.data<float>(), dy.data<float>(), rdx.data<float>(),
                               rdw.data<float>(), rdb.data<float>(), g.N, g.C, g.H, g.W, g.Cout, 3, 3, Ho, Wo, p);
    require_within_bf16_bound(Tensor::from_vector(y, ys), ry,
                              winograd_abs_terms(x.data<float>(), w.data<float>(), b.data<float>(), g.N, g.C, g.H, g.W,
                                                 g.Cout, g.pad, g.pad),
                              winograd_forward_ops(g.C, true), "Winograd y in bf16");
    require_within_bf16_bound(Tensor::from_vector(dw, w.shape()), rdw,
                              winograd_weight_grad_abs_terms(x.data<float>(), dy.data<float>(), g.N, g.C, g.H, g.W,
                                                             g.Cout, g.pad, g.pad),
                              winograd_weight_grad_ops(g.N, ((Ho + 3) / 4) * ((Wo + 3) / 4)), "Winograd dw in bf16");
  }
}

TEST_CASE("fast and exact modes: y, dx and dw within Winograd's rounding of the reference, db the same",
          "[conv][winograd]") {
  struct Geo {
    int64_t N, C, H, W, Cout, pad;
  };
  if (!cpu::sgemm_available()) return;  // the generic path (OCRT_CPU_ISA=generic) has no Winograd: im2col and Eigen
  // dx runs through Winograd with padding 2 - pad: 1, 2 and 0 here.
  const std::vector<Geo> geos = {{2, 16, 5, 7, 16, 1}, {1, 24, 4, 33, 20, 1}, {3, 16, 8, 9, 32, 0},
                                 {2, 17, 3, 5, 16, 2}, {1, 32, 1, 12, 16, 1}, {2, 64, 8, 30, 128, 1}};
  for (size_t gi = 0; gi < geos.size(); ++gi) {
    const Geo& g = geos[gi];
    INFO("geometry " << gi);
    const Conv2dOptions opt = conv_opt({1, 1}, {g.pad, g.pad});
    Tensor x0 = det_uniform({g.N, g.C, g.H, g.W}, 90 + gi, -1, 1, DType::f32);
    Tensor w0 = det_uniform({g.Cout, g.C, 3, 3}, 100 + gi, -0.3, 0.3, DType::f32);
    Tensor b0 = det_uniform({g.Cout}, 110 + gi, -1, 1, DType::f32);
    const int64_t Ho = g.H + 2 * g.pad - 2, Wo = g.W + 2 * g.pad - 2;
    Tensor dy = det_uniform({g.N, g.Cout, Ho, Wo}, 120 + gi, -1, 1, DType::f32);
    struct Run {
      Tensor y, dx, dw, db;
    };
    auto run = [&](ConvMode mode) {
      ConvModeScope scope(mode);
      Tensor x = x0.clone(), w = w0.clone(), b = b0.clone();
      x.set_requires_grad(true), w.set_requires_grad(true), b.set_requires_grad(true);
      Tensor y = conv2d(x, w, b, opt);
      y.backward(dy);
      return Run{y.detach(), x.grad(), w.grad(), b.grad()};
    };
    const Run fast = run(ConvMode::fast), exact = run(ConvMode::exact);
    CHECK(conv_mode() == ConvMode::fast);  // the scope restored the default

    const Conv2dParams p{1, 1, g.pad, g.pad, 1, 1, 1};
    Tensor ry = Tensor::empty({g.N, g.Cout, Ho, Wo}), rdx = Tensor::empty(x0.shape()), rdw = Tensor::empty(w0.shape()),
           rdb = Tensor::empty(b0.shape());
    reference::conv2d(x0.data<float>(), w0.data<float>(), b0.data<float>(), ry.data<float>(), g.N, g.C, g.H, g.W,
                      g.Cout, 3, 3, Ho, Wo, p);
    reference::conv2d_backward(x0.data<float>(), w0.data<float>(), dy.data<float>(), rdx.data<float>(),
                               rdw.data<float>(), rdb.data<float>(), g.N, g.C, g.H, g.W, g.Cout, 3, 3, Ho, Wo, p);
    // Exact mode: im2col + GEMM, within the forward-error bound of each sum (tests/tolerance.h):
    // y sums 9 C products and the bias, dx at most 9 Cout products, dw one per output pixel.
    Tensor sy = Tensor::empty(ry.shape()), sdx = Tensor::empty(rdx.shape()), sdw = Tensor::empty(rdw.shape()),
           sdb = Tensor::empty(rdb.shape());
    {
      const Tensor ax = abs(x0), aw = abs(w0), ab = abs(b0), ady = abs(dy);
      reference::conv2d(ax.data<float>(), aw.data<float>(), ab.data<float>(), sy.data<float>(), g.N, g.C, g.H, g.W,
                        g.Cout, 3, 3, Ho, Wo, p);
      reference::conv2d_backward(ax.data<float>(), aw.data<float>(), ady.data<float>(), sdx.data<float>(),
                                 sdw.data<float>(), sdb.data<float>(), g.N, g.C, g.H, g.W, g.Cout, 3, 3, Ho, Wo, p);
    }
    require_within_bound(exact.y, ry, sy, 9 * g.C + 1, "exact y");
    require_within_bound(exact.dx, rdx, sdx, 9 * g.Cout, "exact dx");
    // Fast mode: y is Winograd's (bit for bit) and dx took it too (it differs from exact mode's),
    // both within its rounding; a wrongly turned filter or swapped channel would be off by order 1.
    std::vector<float> wino((size_t)(g.N * g.Cout * Ho * Wo));
    cpu::winograd_conv2d(x0.data<float>(), w0.data<float>(), b0.data<float>(), wino.data(), g.N, g.C, g.H, g.W, g.Cout,
                         g.pad, g.pad);
    CHECK(fast.y.to_vector<float>() == wino);
    // dx is Winograd's forward pass over dy with the filters turned (w'[c, k] = w[k, c] rotated by
    // 180 degrees) and padding 2 - pad: the same bound, with the channel counts swapped.
    std::vector<float> turned((size_t)(g.C * g.Cout * 9));
    {
      const auto wv = w0.to_vector<float>();
      for (int64_t k = 0; k < g.Cout; ++k)
        for (int64_t c = 0; c < g.C; ++c)
          for (int64_t t = 0; t < 9; ++t) turned[(size_t)((c * g.Cout + k) * 9 + 8 - t)] = wv[(size_t)((k * g.C + c) * 9 + t)];
    }
    require_within_bound(fast.y, ry,
                         winograd_abs_terms(x0.data<float>(), w0.data<float>(), b0.data<float>(), g.N, g.C, g.H, g.W,
                                            g.Cout, g.pad, g.pad),
                         winograd_forward_ops(g.C, true), "fast y");
    require_within_bound(fast.dx, rdx,
                         winograd_abs_terms(dy.data<float>(), turned.data(), nullptr, g.N, g.Cout, Ho, Wo, g.C,
                                            2 - g.pad, 2 - g.pad),
                         winograd_forward_ops(g.Cout, false), "fast dx");
    CHECK(fast.dx.to_vector<float>() != exact.dx.to_vector<float>());
    // dw takes Winograd's weight gradient in fast mode (tested on its own above); db, a plain
    // sum of dy, is the same in both modes.
    require_within_bound(exact.dw, rdw, sdw, g.N * Ho * Wo, "exact dw");
    require_within_bound(fast.dw, rdw,
                         winograd_weight_grad_abs_terms(x0.data<float>(), dy.data<float>(), g.N, g.C, g.H, g.W, g.Cout,
                                                        g.pad, g.pad),
                         winograd_weight_grad_ops(g.N, ((Ho + 3) / 4) * ((Wo + 3) / 4)), "fast dw");
    CHECK(fast.dw.to_vector<float>() != exact.dw.to_vector<float>());
    CHECK(fast.db.to_vector<float>() == exact.db.to_vector<float>());
  }
}

TEST_CASE("conv modes: parsed by name, unknown names refused", "[conv]") {
  CHECK(parse_conv_mode("fast") == ConvMode::fast);
  CHECK(parse_conv_mode("exact") == ConvMode::exact);
  CHECK(std::string(conv_mode_name(ConvMode::exact)) == "exact");
  CHECK_THROWS_WITH(parse_conv_mode("winograd"), Catch::Contains("unknown convolution mode 'winograd'") &&
                                                     Catch::Contains("fast or exact"));
}
#endif

TEST_CASE("conv2d is bit-identical across runs for a fixed thread count", "[conv]") {
  Tensor x = det_uniform({4, 8, 8, 16}, 1, -1, 1, DType::f32), w = det_uniform({16, 8, 3, 3}, 2, -1, 1, DType::f32);
  w.set_requires_grad(true);
  auto run = [&] {
    w.zero_grad();
    Tensor y = conv2d(x, w, Tensor(), conv_opt({1, 1}, {1, 1}));
    sum(y).backward();
    return std::make_pair(y.to_vector<float>(), w.grad().to_vector<float>());
  };
  CHECK(run() == run());
}

TEST_CASE("conv2d and pooling reject bad arguments with the op and shapes in the message", "[conv][pool]") {
  Tensor x = Tensor::zeros({1, 4, 5, 5}), w = Tensor::zeros({6, 2, 3, 3});
  CHECK_THROWS_WITH(conv2d(Tensor::zeros({4, 5, 5}), w), Catch::Contains("conv2d: expected a 4-D input"));
  CHECK_THROWS_WITH(conv2d(x, w, Tensor(), conv_opt({1, 1}, {0, 0}, {1, 1}, 3)),
                    Catch::Contains("must both be divisible by groups (3)"));
  CHECK_THROWS_WITH(conv2d(x, w), Catch::Contains("expects 2 input channels with groups = 1"));
  CHECK_THROWS_WITH(conv2d(x, w, Tensor(), conv_opt({0, 1}, {0, 0}, {1, 1}, 2)), Catch::Contains("stride must be >= 1"));
  CHECK_THROWS_WITH(conv2d(x, w, Tensor(), conv_opt({1, 1}, {-1, 0}, {1, 1}, 2)), Catch::Contains("padding must be >= 0"));
  CHECK_THROWS_WITH(conv2d(x, Tensor::zeros({6, 2, 7, 3}), Tensor(), conv_opt({1, 1}, {0, 0}, {1, 1}, 2)),
                    Catch::Contains("larger than the padded input"));
  CHECK_THROWS_WITH(conv2d(x, w, Tensor::zeros({5}), conv_opt({1, 1}, {0, 0}, {1, 1}, 2)),
                    Catch::Contains("bias must have shape [6]"));
  CHECK_THROWS_WITH(conv2d(x, w.to(DType::f64), Tensor(), conv_opt({1, 1}, {0, 0}, {1, 1}, 2)),
                    Catch::Contains("input is float32 but weight is float64"));
  MaxPool2dOptions mp;
  mp.kernel = {2, 2}, mp.padding = {2, 0};
  CHECK_THROWS_WITH(max_pool2d(x, mp), Catch::Contains("at most half the kernel size"));
  mp.kernel = {7, 7}, mp.padding = {0, 0};
  CHECK_THROWS_WITH(max_pool2d(x, mp), Catch::Contains("too small for kernel (7, 7)"));
  mp.kernel = {0, 2};
  CHECK_THROWS_WITH(max_pool2d(x, mp), Catch::Contains("kernel size must be >= 1"));
  CHECK_THROWS_WITH(adaptive_avg_pool2d(x, {0, 2}), Catch::Contains("output size must be >= 1"));
  CHECK_THROWS_WITH(max_pool2d(Tensor::zeros({1, 1, 4, 4}, DType::i64), MaxPool2dOptions{}),
                    Catch::Contains("expected a float32 or float64 input"));
}

namespace {

// Winograd outside autograd on N images of C x H x W: the same bits from the kept transforms
// (every call but the first) as from chunks of one tile row, which always take the usual path;
// weights changed in place (a model that loads others into the same tensors) read again, as
// the kept transforms are matched by content; each precision keeping its own.
void check_kept_transforms(int64_t N, int64_t C, int64_t Cout, int64_t H, int64_t W, uint64_t seed) {
  if (!cpu::sgemm_available()) return;  // the generic path has no Winograd
  Tensor x = det_uniform({N, C, H, W}, seed, -1, 1, DType::f32);
  Tensor w = det_uniform({Cout, C, 3, 3}, seed + 1, -0.3, 0.3, DType::f32);
  Tensor b = det_uniform({Cout}, seed + 2, -1, 1, DType::f32);
  auto run = [&](int64_t chunk_tiles) {
    std::vector<float> y((size_t)(N * Cout * H * W));
    cpu::winograd_conv2d(x.data<float>(), w.data<float>(), b.data<float>(), y.data(), N, C, H, W, Cout, 1, 1,
                         chunk_tiles);
    return y;
  };
  NoGradGuard no_grad;
  const std::vector<float> usual = run(1);
  for (int call = 0; call < 3; ++call) REQUIRE(run(0) == usual);  // first sight, then the kept transforms
  w.data<float>()[7] += 0.5f;
  const std::vector<float> changed = run(1);
  REQUIRE(changed != usual);
  for (int call = 0; call < 3; ++call) REQUIRE(run(0) == changed);
  if (cpu::sgemm_available()) {
    cpu::MatmulPrecisionScope bf16(cpu::MatmulPrecision::bf16);
    const std::vector<float> usual_bf16 = run(1);
    for (int call = 0; call < 3; ++call) REQUIRE(run(0) == usual_bf16);
  }
  REQUIRE(run(0) == changed);
}

}  // namespace

TEST_CASE("Winograd on a line or two outside autograd: transforms kept between calls, the same bits, weights changed in place seen",
          "[conv][winograd]") {
  // One 4 x 33 line (9 tiles): the small-tile path, whose weights are kept transformed and
  // packed as the B of turned-around products (ops/cpu/winograd.cpp, small_forward).
  check_kept_transforms(1, 32, 40, 4, 33, 91);
}

TEST_CASE("Winograd on a batch outside autograd: transforms kept packed between calls, the same bits, weights changed in place seen",
          "[conv][winograd]") {
  // Two 16 x 100 images (200 tiles, more than the small-tile path takes): the weights kept
  // transformed and packed as the A of the usual products (kept_forward), over the default
  // chunking.
  check_kept_transforms(2, 24, 40, 16, 100, 94);
}

TEST_CASE("conv2d_relu_max_pool2d gives the three ops' bits in one pass, NaN and odd sizes included", "[conv]") {
  // The CPU's fused path (direct convolution, ReLU and 2x2 pool per pair of rows) against
  // max_pool2d(relu(conv2d(...))): first layers on gray lines (C 1, Cout 64: chunks of 8), few
  // output channels with more inputs, odd output sizes (the last row and column dropped),
  // padding, a NaN in the input, threads; and the paths it leaves to the three ops (stride 2,
  // a layer the direct convolution does not take, autograd) give the same values too.
  struct Case {
    int64_t N, C, Cout, H, W, kh, kw, pad;
  };
  NoGradGuard no_grad;
  const MaxPool2dOptions pool2{};
  for (const Case& c : {Case{2, 1, 64, 32, 41, 3, 3, 1}, Case{1, 3, 5, 9, 14, 3, 3, 1}, Case{3, 2, 8, 7, 7, 2, 3, 0},
                        Case{1, 1, 11, 6, 5, 1, 1, 0}}) {
    INFO("N " << c.N << " C " << c.C << " Cout " << c.Cout << " H " << c.H << " W " << c.W);
    Tensor x = det_uniform({c.N, c.C, c.H, c.W}, 71, -1, 1, DType::f32);
    x.data<float>()[5] = std::nanf("");
    Tensor w = det_uniform({c.Cout, c.C, c.kh, c.kw}, 72, -0.5, 0.5, DType::f32);
    Tensor b = det_uniform({c.Cout}, 73, -0.2, 0.2, DType::f32);
    Conv2dOptions opt;
    opt.padding = {c.pad, c.pad};
    for (int threads : {1, 2}) {
      ThreadCountGuard guard;
      set_num_threads(threads);
      const Tensor want = max_pool2d(relu(conv2d(x, w, b, opt)), pool2);
      const Tensor got = conv2d_relu_max_pool2d(x, w, b, opt);
      REQUIRE(got.shape() == want.shape());
      REQUIRE(got.to_vector<float>() == want.to_vector<float>());
      const Tensor no_bias = conv2d_relu_max_pool2d(x, w, Tensor(), opt);
      REQUIRE(no_bias.to_vector<float>() == max_pool2d(relu(conv2d(x, w, Tensor(), opt)), pool2).to_vector<float>());
    }
  }
  // Not the direct convolution's: stride 2, and 16 -> 16 channels (im2col or Winograd).
  Tensor x = det_uniform({1, 16, 12, 12}, 74, -1, 1, DType::f32);
  Tensor w = det_uniform({16, 16, 3, 3}, 75, -0.3, 0.3, DType::f32);
  Conv2dOptions strided;
  strided.stride = {2, 2};
  REQUIRE(conv2d_relu_max_pool2d(x, w, Tensor(), strided).to_vector<float>() ==
          max_pool2d(relu(conv2d(x, w, Tensor(), strided)), pool2).to_vector<float>());
  REQUIRE(conv2d_relu_max_pool2d(x, w).to_vector<float>() == max_pool2d(relu(conv2d(x, w)), pool2).to_vector<float>());
  // Bad arguments are refused with the op's name, as conv2d refuses them.
  CHECK_THROWS_WITH(conv2d_relu_max_pool2d(x, w, Tensor::zeros({3})), Catch::Contains("conv2d_relu_max_pool2d: bias"));
}

TEST_CASE("conv2d_relu_max_pool2d through Winograd pools each tile row as it is made: the three ops' bits", "[conv]") {
  // CRNN's later blocks (3x3, padding 1, 16 channels or more: Winograd in fast mode) with CRNN's
  // pools (2x2; 2x2 at a stride of (2, 1) with a column of padding) and other pools over pairs of
  // rows (3 columns wide, ceil mode), on odd output sizes, with a NaN in the input, in float32
  // and bf16 products, on one image and several, each call three times (the first call
  // transforms the weights, later ones read them kept: the small-tile and the usual path).
  // Pools over more rows go to the three ops, with the same values.
  struct Case {
    int64_t N, C, Cout, H, W;
  };
  NoGradGuard no_grad;
  const std::vector<MaxPool2dOptions> pools = {
      {}, {{2, 2}, {2, 1}, {0, 1}}, {{2, 3}, {2, 2}, {0, 1}, {1, 1}, true}, {{2, 1}, {2, 1}}, {{3, 3}, {2, 2}, {1, 1}}};
  uint64_t seed = 80;
  // With 32 and 64 input channels, bf16 on the amx path goes to the AMX tiles (conv_amx.h),
  // whose fused form pools each group of images' buffer and then rectifies.
  for (const Case& c : {Case{1, 16, 16, 8, 13}, Case{3, 24, 32, 16, 75}, Case{2, 16, 20, 9, 9}, Case{3, 32, 16, 8, 21},
                        Case{1, 64, 40, 6, 40}})
    for (const MaxPool2dOptions& pool : pools)
      for (cpu::MatmulPrecision precision : {cpu::MatmulPrecision::f32, cpu::MatmulPrecision::bf16}) {
        if (precision == cpu::MatmulPrecision::bf16 && !cpu::sgemm_available()) continue;  // generic: no bf16
        INFO("N " << c.N << " C " << c.C << " Cout " << c.Cout << " H " << c.H << " W " << c.W << " pool "
                  << pool.kernel[0] << "x" << pool.kernel[1] << " stride " << pool.stride[1] << " bf16 "
                  << (precision == cpu::MatmulPrecision::bf16));
        cpu::MatmulPrecisionScope scope(precision);
        Tensor x = det_uniform({c.N, c.C, c.H, c.W}, seed++, -1, 1, DType::f32);
        x.data<float>()[7] = std::nanf("");
        const Tensor w = det_uniform({c.Cout, c.C, 3, 3}, seed++, -0.3, 0.3, DType::f32);
        const Tensor b = det_uniform({c.Cout}, seed++, -0.2, 0.2, DType::f32);
        Conv2dOptions opt;
        opt.padding = {1, 1};
        for (int call = 0; call < 3; ++call) {
          const Tensor want = max_pool2d(relu(conv2d(x, w, b, opt)), pool);
          const Tensor got = conv2d_relu_max_pool2d(x, w, b, opt, pool);
          REQUIRE(got.shape() == want.shape());
          REQUIRE(got.to_vector<float>() == want.to_vector<float>());
        }
      }
}

TEST_CASE("a stride-2 first layer on one channel gives ocrt's GEMM path's bits without unfolding", "[conv]") {
  // The page detector's stem (1 -> 8 channels, 3x3, stride 2, padding 1) and its neighbours:
  // conv2d's direct stride-2 path (conv_direct.h) against the unfolded matrix multiplied by
  // ocrt's float32 GEMM, bit for bit (the same fused multiply-adds from zero in tap order, then
  // the bias), on odd and even sizes, other kernels and paddings, 1 and 2 threads.
  if (!cpu::sgemm_available()) return;
  ThreadCountGuard guard;
  struct Case {
    int64_t N, H, W, Cout, k, pad;
    bool bias;
  };
  for (int threads : {1, 2})
    for (const Case& c : {Case{1, 64, 50, 8, 3, 1, false}, Case{2, 33, 47, 8, 3, 1, true}, Case{1, 9, 8, 3, 3, 0, true},
                          Case{1, 20, 31, 5, 5, 2, false}, Case{2, 7, 5, 16, 2, 0, true}, Case{1, 1, 1, 4, 3, 1, false}}) {
      set_num_threads(threads);
      INFO("N " << c.N << " " << c.H << "x" << c.W << " Cout " << c.Cout << " k " << c.k << " pad " << c.pad << ", "
                << threads << " threads");
      const Tensor x = det_uniform({c.N, 1, c.H, c.W}, 71).to(DType::f32);
      const Tensor w = det_uniform({c.Cout, 1, c.k, c.k}, 72).to(DType::f32);
      const Tensor b = c.bias ? det_uniform({c.Cout}, 73).to(DType::f32) : Tensor();
      Conv2dOptions o;
      o.stride = {2, 2};
      o.padding = {c.pad, c.pad};
      const Tensor y = conv2d(x, w, b, o);
      const int64_t Ho = (c.H + 2 * c.pad - c.k) / 2 + 1, Wo = (c.W + 2 * c.pad - c.k) / 2 + 1, K = c.k * c.k;
      REQUIRE(y.shape() == Shape{c.N, c.Cout, Ho, Wo});
      const std::vector<float> xv = x.to_vector<float>(), wv = w.to_vector<float>();
      const std::vector<float> bv = c.bias ? b.to_vector<float>() : std::vector<float>();
      std::vector<float> want;
      for (int64_t n = 0; n < c.N; ++n) {
        std::vector<float> cols((size_t)(K * Ho * Wo), 0.0f), out((size_t)(c.Cout * Ho * Wo));
        for (int64_t i = 0; i < c.k; ++i)
          for (int64_t j = 0; j < c.k; ++j)
            for (int64_t oh = 0; oh < Ho; ++oh)
              for (int64_t ow = 0; ow < Wo; ++ow) {
                const int64_t r = 2 * oh - c.pad + i, col = 2 * ow - c.pad + j;
                if (r >= 0 && r < c.H && col >= 0 && col < c.W)
                  cols[(size_t)((i * c.k + j) * Ho * Wo + oh * Wo + ow)] = xv[(size_t)((n * c.H + r) * c.W + col)];
              }
        cpu::sgemm(c.Cout, Ho * Wo, K, wv.data(), K, 1, cols.data(), Ho * Wo, 1, out.data(), Ho * Wo, false);
        for (int64_t oc = 0; oc < c.Cout; ++oc)
          for (int64_t p = 0; p < Ho * Wo; ++p) out[(size_t)(oc * Ho * Wo + p)] += c.bias ? bv[(size_t)oc] : 0.0f;
        want.insert(want.end(), out.begin(), out.end());
      }
      REQUIRE(y.to_vector<float>() == want);
    }
}
