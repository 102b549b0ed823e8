// conv2d and pooling: golden tests against PyTorch (tools/reference/ops_conv.py), float64
// gradient checks, the im2col fast path against the plain-loop reference on many geometries
// (both thread regimes), and argument errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "golden_runner.h"
#include "ops/conv.h"
#include "ops/cpu/conv_reference.h"
#include "ops/cpu/winograd.h"
#include "runtime/threading.h"

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
}

TEST_CASE("conv2d's im2col path equals the plain-loop reference on many geometries and thread counts", "[conv]") {
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
      require_close(y, ry, 1e-5, 1e-5, "y");
      require_close(x.grad(), rdx, 1e-5, 1e-5, "dx");
      require_close(w.grad(), rdw, 1e-5, 1e-5, "dw");
      require_close(b.grad(), rdb, 1e-5, 1e-5, "db");
    }
  }
}

#if defined(OCRT_CPU_WINOGRAD)
TEST_CASE("fast mode through 3x3 layers: Winograd F(4x4,3x3) against the plain-loop reference", "[conv][winograd]") {
  ThreadCountGuard guard;
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

    std::vector<float> ref(direct.size());
    reference::conv2d(x.data<float>(), w.data<float>(), g.bias ? b.data<float>() : nullptr, ref.data(), g.N, g.C, g.H,
                      g.W, g.Cout, 3, 3, Ho, Wo, p);
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs((double)direct[i] - ref[i]) / (1 + std::abs(ref[i])));
    // F(4x4,3x3) rounds more than a direct sum: its transforms scale values by up to 8 and
    // 1/24 before they cancel. The error grows like the square root of the terms summed
    // (bench: about 3e-5 for 576 terms); a wrong transform coefficient gives errors of order 1.
    const double tolerance = 5e-6 * std::sqrt(9.0 * g.C);
    INFO("largest error relative to 1 + |y|: " << worst << ", tolerance " << tolerance);
    CHECK(worst < tolerance);
  }
}

TEST_CASE("Winograd's weight gradient against the plain-loop reference", "[conv][winograd]") {
  ThreadCountGuard guard;
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
    const std::vector<float> ref = rdw.to_vector<float>();
    // Errors relative to the largest |dw| (each dw sums N * Ho * Wo products of terms of about
    // 0.5; the transforms scale by up to 8 and 1/24 before they cancel, as in the forward).
    double scale = 0;
    for (float v : ref) scale = std::max(scale, (double)std::abs(v));
    double worst = 0, worst_chunked = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      worst = std::max(worst, std::abs((double)runs[0][i] - ref[i]) / scale);
      worst_chunked = std::max(worst_chunked, std::abs((double)chunked[i] - ref[i]) / scale);
    }
    const double tolerance = 3e-6 * std::sqrt((double)(g.N * Ho * Wo) / 16);  // measured: 5e-7 to 8e-6
    INFO("largest error relative to max |dw| " << scale << ": " << worst << " (chunked " << worst_chunked
                                               << "), tolerance " << tolerance);
    CHECK(worst < tolerance);
    CHECK(worst_chunked < tolerance);
  }
}

TEST_CASE("fast and exact modes: y, dx and dw within Winograd's rounding of the reference, db the same",
          "[conv][winograd]") {
  struct Geo {
    int64_t N, C, H, W, Cout, pad;
  };
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
    // Exact mode: the direct sum's rounding.
    require_close(exact.y, ry, 1e-5, 1e-5, "exact y");
    require_close(exact.dx, rdx, 1e-5, 1e-5, "exact dx");
    // Fast mode: y is Winograd's (bit for bit) and dx took it too (it differs from exact mode's),
    // both within its rounding; a wrongly turned filter or swapped channel would be off by order 1.
    std::vector<float> wino((size_t)(g.N * g.Cout * Ho * Wo));
    cpu::winograd_conv2d(x0.data<float>(), w0.data<float>(), b0.data<float>(), wino.data(), g.N, g.C, g.H, g.W, g.Cout,
                         g.pad, g.pad);
    CHECK(fast.y.to_vector<float>() == wino);
    auto worst = [](const Tensor& got, const Tensor& want) {
      const auto a = got.to_vector<float>(), b = want.to_vector<float>();
      double e = 0;
      for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs((double)a[i] - b[i]) / (1 + std::abs(b[i])));
      return e;
    };
    const double ey = worst(fast.y, ry), edx = worst(fast.dx, rdx);
    INFO("fast y error " << ey << ", fast dx error " << edx);
    CHECK(ey < 5e-6 * std::sqrt(9.0 * g.C));
    CHECK(edx < 5e-6 * std::sqrt(9.0 * g.Cout));
    CHECK(fast.dx.to_vector<float>() != exact.dx.to_vector<float>());
    // dw takes Winograd's weight gradient in fast mode (tested on its own above); db, a plain
    // sum of dy, is the same in both modes.
    require_close(exact.dw, rdw, 1e-5, 1e-5, "exact dw");
    require_close(fast.dw, rdw, 1e-4, 1e-4, "fast dw");
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

TEST_CASE("max_pool2d's 2x2 path equals a plain window scan: values, argmax, ties, NaN, with and without grad",
          "[pool]") {
  // The plain scan, written out here: windows scanned row by row, the first maximum wins, a NaN
  // wins over everything; -1 where a window lies entirely in the padding.
  auto scan = [](const std::vector<float>& x, int64_t H, int64_t W, Pair stride, Pair pad, int64_t Ho, int64_t Wo,
                 std::vector<float>& y, std::vector<int64_t>& at) {
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        float best = 0;
        int64_t best_i = -1;
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 2; ++j) {
            const int64_t ih = oh * stride[0] - pad[0] + i, iw = ow * stride[1] - pad[1] + j;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const float v = x[ih * W + iw];
            if (best_i < 0 || v > best || (std::isnan(v) && !std::isnan(best))) best = v, best_i = ih * W + iw;
          }
        y.push_back(best), at.push_back(best_i);
      }
  };
  ThreadCountGuard guard;
  int checked = 0;
  for (int threads : {1, 2})
    for (int64_t H : {2, 3, 4, 5})
      for (int64_t W : {1, 2, 3, 4, 7, 9})
        for (Pair stride : {Pair{2, 2}, Pair{2, 1}})
          for (Pair pad : {Pair{0, 0}, Pair{0, 1}}) {
            if (W == 1 && pad[1] == 0) continue;  // no window fits
            set_num_threads(threads);
            INFO("H " << H << " W " << W << " stride " << stride[1] << " pad " << pad[1] << ", " << threads
                      << " threads");
            // Small integers make ties common; a few NaNs, never two in one window's scan order
            // mattering differently from the plain scan (both take the first NaN).
            std::vector<float> v((size_t)(3 * H * W));
            for (size_t i = 0; i < v.size(); ++i) v[i] = (float)((i * 7 + H * 3 + W) % 5) - 2.0f;
            if (v.size() > 5) v[5] = NAN;
            if (v.size() > 17) v[17] = NAN;
            MaxPool2dOptions o;
            o.kernel = {2, 2}, o.stride = stride, o.padding = pad;
            for (bool grad : {false, true}) {
              Tensor x = Tensor::from_vector(v).reshape({1, 3, H, W});
              if (grad) x.set_requires_grad(true);
              Tensor y = max_pool2d(x, o);
              const int64_t Ho = y.size(2), Wo = y.size(3);
              const std::vector<float> got = y.to_vector<float>();
              std::vector<float> want_dx(v.size(), 0.0f);
              for (int64_t c = 0; c < 3; ++c) {
                std::vector<float> plane(v.begin() + c * H * W, v.begin() + (c + 1) * H * W), want;
                std::vector<int64_t> at;
                scan(plane, H, W, stride, pad, Ho, Wo, want, at);
                for (int64_t k = 0; k < Ho * Wo; ++k) {
                  const float g = got[(size_t)(c * Ho * Wo + k)];
                  REQUIRE((std::isnan(want[k]) ? std::isnan(g) : g == want[k]));
                  // The backward sends output k's gradient (k + 1) to its argmax.
                  if (at[k] >= 0) want_dx[(size_t)(c * H * W + at[k])] += (float)(k + 1);
                }
                ++checked;
              }
              if (grad) {
                std::vector<float> dy;
                for (int64_t c = 0; c < 3; ++c)
                  for (int64_t k = 0; k < Ho * Wo; ++k) dy.push_back((float)(k + 1));
                y.backward(Tensor::from_vector(dy).reshape(y.shape()));
                REQUIRE(x.grad().to_vector<float>() == want_dx);
              }
            }
          }
  CHECK(checked > 500);
}

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
