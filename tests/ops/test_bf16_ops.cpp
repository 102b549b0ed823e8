// Convolutions and matrix products in bf16 (runtime/cpu/gemm.h, MatmulPrecision::bf16) on the path
// this run takes (tests/CMakeLists.txt runs the [bf16] tests once per instruction-set path):
// forward and both gradients against the float32 plain-loop reference, within the bound of a
// bf16 product (tests/tolerance.h, bf16_product_tolerance), and different from float32 (so the
// bf16 kernel, not the float32 one, did the work). These run im2col (exact mode); Winograd in
// bf16 is tested beside its float32 test in tests/ops/test_conv.cpp.
#include <catch2/catch.hpp>

#include "ops/conv.h"
#include "ops/cpu/conv_amx.h"
#include "ops/cpu/conv_direct.h"
#include "ops/cpu/conv_reference.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/linalg_reference.h"
#include "runtime/cpu_isa.h"
#include "runtime/threading.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "gradcheck.h"
#include "tolerance.h"

#if defined(OCRT_CPU_SGEMM)

using namespace ocrt;
using namespace ocrt::testing;

TEST_CASE("conv2d in bf16: y, dx and dw within the bf16 bound of the float32 reference", "[bf16][conv]") {
  if (!cpu::sgemm_available()) return;
  struct Geo {
    int64_t N, C, H, W, Cout, k, stride, pad;
  };
  // CRNN-like 3x3 layers, a 1x1, a strided 2x2 and a one-channel input.
  const std::vector<Geo> geos = {{2, 16, 6, 9, 32, 3, 1, 1}, {2, 64, 4, 26, 64, 3, 1, 1}, {3, 24, 5, 7, 16, 1, 1, 0},
                                 {2, 32, 4, 10, 48, 2, 2, 0}, {4, 1, 8, 20, 16, 3, 1, 1}};
  for (size_t gi = 0; gi < geos.size(); ++gi) {
    const Geo& g = geos[gi];
    INFO("geometry " << gi);
    Conv2dOptions opt;
    opt.stride = {g.stride, g.stride}, opt.padding = {g.pad, g.pad};
    const Tensor x0 = det_uniform({g.N, g.C, g.H, g.W}, 300 + gi, -1, 1, DType::f32);
    const Tensor w0 = det_uniform({g.Cout, g.C, g.k, g.k}, 310 + gi, -0.3, 0.3, DType::f32);
    const Tensor b0 = det_uniform({g.Cout}, 320 + gi, -1, 1, DType::f32);
    const int64_t Ho = (g.H + 2 * g.pad - g.k) / g.stride + 1, Wo = (g.W + 2 * g.pad - g.k) / g.stride + 1;
    const Tensor dy = det_uniform({g.N, g.Cout, Ho, Wo}, 330 + gi, -1, 1, DType::f32);
    struct Run {
      Tensor y, dx, dw;
    };
    auto run = [&](cpu::MatmulPrecision precision) {
      cpu::MatmulPrecisionScope scope(precision);
      ConvModeScope exact(ConvMode::exact);
      Tensor x = x0.clone(), w = w0.clone(), b = b0.clone();
      x.set_requires_grad(true), w.set_requires_grad(true);
      Tensor y = conv2d(x, w, b, opt);
      y.backward(dy);
      return Run{y.detach(), x.grad(), w.grad()};
    };
    const Run bf = run(cpu::MatmulPrecision::bf16), f32 = run(cpu::MatmulPrecision::f32);

    const Conv2dParams p{g.stride, g.stride, g.pad, g.pad, 1, 1, 1};
    auto reference_of = [&](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& d) {
      Tensor y = Tensor::empty({g.N, g.Cout, Ho, Wo}), dx = Tensor::empty(x0.shape()), dw = Tensor::empty(w0.shape()),
             db = Tensor::empty(b0.shape());
      reference::conv2d(x.data<float>(), w.data<float>(), b.data<float>(), y.data<float>(), g.N, g.C, g.H, g.W, g.Cout,
                        g.k, g.k, Ho, Wo, p);
      reference::conv2d_backward(x.data<float>(), w.data<float>(), d.data<float>(), dx.data<float>(), dw.data<float>(),
                                 db.data<float>(), g.N, g.C, g.H, g.W, g.Cout, g.k, g.k, Ho, Wo, p);
      return Run{y, dx, dw};
    };
    const Run ref = reference_of(x0, w0, b0, dy), abs_terms = reference_of(abs(x0), abs(w0), abs(b0), abs(dy));
    require_within_bf16_bound(bf.y, ref.y, abs_terms.y, g.k * g.k * g.C + 1, "bf16 y");
    require_within_bf16_bound(bf.dx, ref.dx, abs_terms.dx, g.k * g.k * g.Cout, "bf16 dx");
    require_within_bf16_bound(bf.dw, ref.dw, abs_terms.dw, g.N * Ho * Wo, "bf16 dw");
    // A layer of few input values an output (the one-channel input) is summed directly in float32
    // in both precisions (ops/cpu/conv_direct.h); the others' y went through the bf16 GEMM.
    if (cpu::direct_conv_applies(g.C, g.Cout, g.k, g.k, p)) CHECK(bf.y.to_vector<float>() == f32.y.to_vector<float>());
    else CHECK(bf.y.to_vector<float>() != f32.y.to_vector<float>());
    CHECK(bf.dw.to_vector<float>() != f32.dw.to_vector<float>());
  }
}

TEST_CASE("conv2d in bf16 on AMX tiles: within the bf16 bound on rows narrower and wider than a tile, any thread count", "[bf16][conv]") {
  // ops/cpu/conv_amx.h: the taps read in place from a channels-last image, each output row run
  // over the padded width and the pixels past its end dropped; 32-pixel blocks across row ends,
  // images of one pixel a row, dilation, 1x1 and 2x2 kernels, output channels not a multiple
  // of 16 (a lone last panel), one image (split over panels or blocks) and several (split over
  // images). Every output's sum is made alike however the work is split: the same bits on 1-3
  // threads. On paths without AMX the layer must not be taken there.
  if (!cpu::sgemm_available()) return;
  cpu::MatmulPrecisionScope bf16(cpu::MatmulPrecision::bf16);
  struct Geo {
    int64_t N, C, H, W, Cout, k, pad, dil;
  };
  const std::vector<Geo> geos = {{1, 32, 3, 1, 16, 3, 1, 1},  {3, 64, 4, 26, 40, 3, 1, 1}, {1, 96, 5, 17, 17, 3, 2, 2},
                                 {2, 32, 2, 50, 48, 1, 0, 1}, {1, 64, 2, 33, 128, 2, 0, 1}, {2, 128, 3, 7, 16, 3, 1, 1},
                                 {3, 32, 5, 21, 64, 3, 2, 2},  {2, 64, 4, 9, 96, 3, 1, 1}};
  for (size_t gi = 0; gi < geos.size(); ++gi) {
    const Geo& g = geos[gi];
    INFO("geometry " << gi);
    const Conv2dParams p{1, 1, g.pad, g.pad, g.dil, g.dil, 1};
    if (cpu_isa() != CpuIsa::amx) {
      CHECK_FALSE(cpu::amx_conv_applies(g.C, g.Cout, g.k, g.k, p));
      continue;
    }
    REQUIRE(cpu::amx_conv_applies(g.C, g.Cout, g.k, g.k, p));
    Conv2dOptions opt;
    opt.padding = {g.pad, g.pad}, opt.dilation = {g.dil, g.dil};
    const int64_t Ho = g.H + 2 * g.pad - g.dil * (g.k - 1), Wo = g.W + 2 * g.pad - g.dil * (g.k - 1);
    const Tensor x = det_uniform({g.N, g.C, g.H, g.W}, 700 + gi, -1, 1, DType::f32);
    const Tensor w = det_uniform({g.Cout, g.C, g.k, g.k}, 710 + gi, -0.3, 0.3, DType::f32);
    const Tensor b = det_uniform({g.Cout}, 720 + gi, -1, 1, DType::f32);
    Tensor ref = Tensor::empty({g.N, g.Cout, Ho, Wo}), abs_terms = Tensor::empty({g.N, g.Cout, Ho, Wo});
    reference::conv2d(x.data<float>(), w.data<float>(), b.data<float>(), ref.data<float>(), g.N, g.C, g.H, g.W, g.Cout,
                      g.k, g.k, Ho, Wo, p);
    const Tensor ax = abs(x), aw = abs(w), ab = abs(b);
    reference::conv2d(ax.data<float>(), aw.data<float>(), ab.data<float>(), abs_terms.data<float>(), g.N, g.C, g.H, g.W,
                      g.Cout, g.k, g.k, Ho, Wo, p);
    std::vector<float> first;
    const int saved = num_threads();
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      const Tensor y = conv2d(x, w, b, opt);
      require_within_bf16_bound(y, ref, abs_terms, g.k * g.k * g.C + 1, "AMX bf16 y");
      if (first.empty()) first = y.to_vector<float>();
      else CHECK(y.to_vector<float>() == first);
    }
    set_num_threads(saved);
    // The weights are kept packed between calls, matched by their bytes: changed in place, they
    // are packed again.
    Tensor w2 = w.clone();
    const Tensor y1 = conv2d(x, w2, b, opt);
    float* wp = w2.data<float>();
    for (int64_t i = 0; i < w2.numel(); ++i) wp[i] *= 0.5f;
    const Tensor y2 = conv2d(x, w2, b, opt);
    Tensor ref2 = Tensor::empty({g.N, g.Cout, Ho, Wo});
    reference::conv2d(x.data<float>(), w2.data<float>(), b.data<float>(), ref2.data<float>(), g.N, g.C, g.H, g.W,
                      g.Cout, g.k, g.k, Ho, Wo, p);
    require_within_bf16_bound(y2, ref2, abs_terms, g.k * g.k * g.C + 1, "AMX bf16 y, weights changed in place");
    CHECK(y1.to_vector<float>() == first);
    // Both gradients against the reference's, of the terms' values and of their magnitudes.
    const Tensor dy = det_uniform({g.N, g.Cout, Ho, Wo}, 730 + gi, -1, 1, DType::f32), ady = abs(dy);
    Tensor dx_ref = Tensor::empty(x.shape()), dx_abs = Tensor::empty(x.shape()), dw_ref = Tensor::empty(w.shape()),
           dw_abs = Tensor::empty(w.shape()), db = Tensor::empty(b.shape());
    reference::conv2d_backward(x.data<float>(), w.data<float>(), dy.data<float>(), dx_ref.data<float>(),
                               dw_ref.data<float>(), db.data<float>(), g.N, g.C, g.H, g.W, g.Cout, g.k, g.k, Ho, Wo, p);
    reference::conv2d_backward(ax.data<float>(), aw.data<float>(), ady.data<float>(), dx_abs.data<float>(),
                               dw_abs.data<float>(), db.data<float>(), g.N, g.C, g.H, g.W, g.Cout, g.k, g.k, Ho, Wo, p);
    // dx of an undilated layer is the convolution of dy with the turned filters, on the tiles as
    // well (ops/cpu/conv.cpp, amx_backward_input) where dy's channels allow it (else im2col: exact
    // mode, so that no Winograd, with its wider bound, takes it).
    if (g.dil == 1) {
      ConvModeScope exact(ConvMode::exact);
      Tensor xg = x.clone();
      xg.set_requires_grad(true);
      conv2d(xg, w, b, opt).backward(dy);
      require_within_bf16_bound(xg.grad(), dx_ref, dx_abs, g.k * g.k * g.Cout, "AMX bf16 dx");
    }
    // dw on the tiles (amx_bf16_conv2d_weight_grad) where Cout is a multiple of 32: within the
    // bound of a product as long as the pixels of all images, the same bits on 1-3 threads.
    if (cpu::amx_weight_grad_applies(g.C, g.Cout, g.k, g.k, p)) {
      std::vector<float> first_dw;
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        Tensor wg = w.clone();
        wg.set_requires_grad(true);
        conv2d(x, wg, b, opt).backward(dy);
        require_within_bf16_bound(wg.grad(), dw_ref, dw_abs, g.N * Ho * Wo, "AMX bf16 dw");
        if (first_dw.empty()) first_dw = wg.grad().to_vector<float>();
        else CHECK(wg.grad().to_vector<float>() == first_dw);
      }
      set_num_threads(saved);
    }
  }
}

TEST_CASE("linear and batched matmul in bf16 within the bf16 bound of the reference", "[bf16][linalg]") {
  if (!cpu::sgemm_available()) return;
  cpu::MatmulPrecisionScope scope(cpu::MatmulPrecision::bf16);
  // linear reads its weight transposed (the LSTM's and the classifier's case).
  for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{32, 512, 1024}, {7, 33, 97}, {100, 256, 37}}) {
    INFO("linear " << M << "x" << K << " -> " << N);
    const Tensor x = det_uniform({M, K}, 400 + K, -1, 1, DType::f32), w = det_uniform({N, K}, 410 + N, -0.2, 0.2, DType::f32);
    const Tensor y = linear(x, w);
    Tensor ref = Tensor::empty({1, M, N}), abs_terms = Tensor::empty({1, M, N});
    cpu::matmul_reference(x.reshape({1, M, K}), w.t().reshape({1, K, N}), ref);
    cpu::matmul_reference(abs(x).reshape({1, M, K}), abs(w).t().reshape({1, K, N}), abs_terms);
    require_within_bf16_bound(y, ref.reshape({M, N}), abs_terms.reshape({M, N}), K, "linear");
  }
  const Tensor a = det_uniform({6, 40, 64}, 420, -1, 1, DType::f32), b = det_uniform({6, 64, 50}, 421, -1, 1, DType::f32);
  Tensor ref = Tensor::empty({6, 40, 50}), abs_terms = Tensor::empty({6, 40, 50});
  cpu::matmul_reference(a, b, ref);
  cpu::matmul_reference(abs(a), abs(b), abs_terms);
  require_within_bf16_bound(matmul(a, b), ref, abs_terms, 64, "batched matmul");
}

#endif  // OCRT_CPU_SGEMM
