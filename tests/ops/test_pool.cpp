// Pooling kernels (ops/cpu/pool.cpp) against their plain-loop references
// (ops/cpu/pool_reference.h): max, average, adaptive average and nearest upsampling, forward and backward, on
// many window geometries, and the 2x2 fast path's ties and NaNs. The golden and gradient
// checks of pooling are in test_conv.cpp beside convolution's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <utility>

#include "gradcheck.h"
#include "ops/backend.h"
#include "ops/conv.h"
#include "ops/cpu/pool_reference.h"
#include "runtime/threading.h"

using namespace ocrt;
using namespace ocrt::testing;

namespace {

struct ThreadCountGuard {
  int saved = num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t dil) {
  return (in + 2 * pad - dil * (k - 1) - 1) / s + 1;
}

const LayerBackend& cpu() { return layer_backend(Device::cpu()); }

}  // namespace

TEST_CASE("pooling kernels equal the plain-loop reference: max, avg, adaptive, forward and backward", "[pool]") {
  ThreadCountGuard guard;
  int checked = 0;
  for (int threads : {1, 2})
    for (int64_t k : {1, 2, 3})
      for (int64_t s : {1, 2})
        for (int64_t pad = 0; pad <= k / 2; ++pad)
          for (int64_t dil : {1, 2})
            for (bool include_pad : {true, false}) {
              set_num_threads(threads);
              const int64_t N = 2, C = 3, H = 7, W = 9;
              Pool2dParams p;
              p.kernel_h = k, p.kernel_w = std::min<int64_t>(k + 1, 3), p.stride_h = s, p.stride_w = 3 - s;
              p.pad_h = pad, p.pad_w = std::min(pad, p.kernel_w / 2), p.dilation_h = dil, p.dilation_w = 1;
              p.count_include_pad = include_pad;
              INFO("kernel " << p.kernel_h << "x" << p.kernel_w << " stride " << p.stride_h << "," << p.stride_w
                             << " pad " << p.pad_h << "," << p.pad_w << " dilation " << dil << ", " << threads
                             << " threads");
              const int64_t Ho = out_size(H, p.kernel_h, p.stride_h, p.pad_h, dil);
              const int64_t Wo = out_size(W, p.kernel_w, p.stride_w, p.pad_w, 1);
              if (Ho < 1 || Wo < 1) continue;
              const Tensor x = det_uniform({N, C, H, W}, 11 + k), dy = det_uniform({N, C, Ho, Wo}, 12 + s);
              std::vector<double> xv = x.to_vector<double>(), dyv = dy.to_vector<double>();
              std::vector<double> y_ref((size_t)(N * C * Ho * Wo)), dx_ref((size_t)(N * C * H * W));
              std::vector<int64_t> at_ref((size_t)(N * C * Ho * Wo));

              // max: values and indices exactly (the same comparisons in the same order)
              Tensor y = Tensor::empty({N, C, Ho, Wo}, DType::f64), at = Tensor::empty({N, C, Ho, Wo}, DType::i64);
              cpu().max_pool2d(x, p, y, at);
              reference::max_pool2d(xv.data(), y_ref.data(), at_ref.data(), N, C, H, W, Ho, Wo, p);
              REQUIRE(y.to_vector<double>() == y_ref);
              REQUIRE(at.to_vector<int64_t>() == at_ref);
              Tensor dx = Tensor::empty({N, C, H, W}, DType::f64);
              cpu().max_pool2d_backward(dy, at, dx);
              reference::max_pool2d_backward(dyv.data(), at_ref.data(), dx_ref.data(), N, C, H, W, Ho, Wo);
              require_close(dx, Tensor::from_vector(dx_ref, {N, C, H, W}), 1e-14, 1e-15, "max_pool2d backward");

              // average (no dilation)
              if (dil == 1) {
                cpu().avg_pool2d(x, p, y);
                reference::avg_pool2d(xv.data(), y_ref.data(), N, C, H, W, Ho, Wo, p);
                require_close(y, Tensor::from_vector(y_ref, {N, C, Ho, Wo}), 1e-14, 1e-15, "avg_pool2d");
                cpu().avg_pool2d_backward(dy, p, dx);
                reference::avg_pool2d_backward(dyv.data(), dx_ref.data(), N, C, H, W, Ho, Wo, p);
                require_close(dx, Tensor::from_vector(dx_ref, {N, C, H, W}), 1e-14, 1e-15, "avg_pool2d backward");
              }
              ++checked;
            }
  CHECK(checked > 50);

  for (auto [Ho, Wo] : {std::pair<int64_t, int64_t>{1, 1}, {3, 4}, {7, 9}, {1, 5}, {4, 2}}) {
    const int64_t N = 2, C = 3, H = 7, W = 9;
    INFO("adaptive to " << Ho << "x" << Wo);
    const Tensor x = det_uniform({N, C, H, W}, 5), dy = det_uniform({N, C, Ho, Wo}, 6);
    std::vector<double> xv = x.to_vector<double>(), dyv = dy.to_vector<double>();
    std::vector<double> y_ref((size_t)(N * C * Ho * Wo)), dx_ref((size_t)(N * C * H * W));
    Tensor y = Tensor::empty({N, C, Ho, Wo}, DType::f64), dx = Tensor::empty({N, C, H, W}, DType::f64);
    cpu().adaptive_avg_pool2d(x, y);
    reference::adaptive_avg_pool2d(xv.data(), y_ref.data(), N, C, H, W, Ho, Wo);
    require_close(y, Tensor::from_vector(y_ref, {N, C, Ho, Wo}), 1e-14, 1e-15, "adaptive_avg_pool2d");
    cpu().adaptive_avg_pool2d_backward(dy, dx);
    reference::adaptive_avg_pool2d_backward(dyv.data(), dx_ref.data(), N, C, H, W, Ho, Wo);
    require_close(dx, Tensor::from_vector(dx_ref, {N, C, H, W}), 1e-14, 1e-15, "adaptive_avg_pool2d backward");
  }
}

TEST_CASE("nearest upsampling equals the plain-loop reference, forward and backward", "[pool]") {
  ThreadCountGuard guard;
  for (int threads : {1, 2})
    for (auto [sh, sw] : {std::pair<int64_t, int64_t>{1, 1}, {2, 2}, {3, 1}, {1, 4}, {4, 8}}) {
      set_num_threads(threads);
      const int64_t N = 2, C = 3, H = 5, W = 7;
      INFO("scale " << sh << "x" << sw << ", " << threads << " threads");
      const Tensor x = det_uniform({N, C, H, W}, 21), dy = det_uniform({N, C, H * sh, W * sw}, 22);
      std::vector<double> xv = x.to_vector<double>(), dyv = dy.to_vector<double>();
      std::vector<double> y_ref((size_t)(N * C * H * sh * W * sw)), dx_ref((size_t)(N * C * H * W));
      Tensor y = Tensor::empty({N, C, H * sh, W * sw}, DType::f64), dx = Tensor::empty({N, C, H, W}, DType::f64);
      cpu().upsample_nearest2d(x, sh, sw, y);
      reference::upsample_nearest2d(xv.data(), y_ref.data(), N, C, H, W, sh, sw);
      REQUIRE(y.to_vector<double>() == y_ref);  // copies: exact
      cpu().upsample_nearest2d_backward(dy, sh, sw, dx);
      reference::upsample_nearest2d_backward(dyv.data(), dx_ref.data(), N, C, H, W, sh, sw);
      // sums of sh*sw terms of magnitude <= 1 in double: a few ulps
      require_close(dx, Tensor::from_vector(dx_ref, {N, C, H, W}), 1e-14, 1e-14, "upsample_nearest2d backward");
    }
  // The front-end: f32 through autograd, shapes, and what it refuses.
  Tensor x = det_uniform({1, 2, 3, 4}, 3).to(DType::f32);
  x.set_requires_grad(true);
  const Tensor y = upsample_nearest2d(x, {2, 3});
  CHECK(y.shape() == Shape{1, 2, 6, 12});
  sum(y).backward();
  for (float g : x.grad().to_vector<float>()) CHECK(g == 6.0f);  // each pixel feeds a 2x3 block
  CHECK_THROWS_WITH(upsample_nearest2d(x, {0, 2}), Catch::Contains("scale factors must be in [1, 1024]"));
  CHECK_THROWS_WITH(upsample_nearest2d(Tensor::zeros({2, 3}), {2, 2}), Catch::Contains("upsample_nearest2d"));
}

TEST_CASE("upsample_nearest2d_into writes or adds exactly what upsample_nearest2d and add give, into a channel slice",
          "[pool]") {
  ThreadCountGuard guard;
  for (int threads : {1, 2})
    for (auto [sh, sw] : {std::pair<int64_t, int64_t>{1, 1}, {2, 2}, {3, 1}, {4, 8}})
      for (DType dt : {DType::f32, DType::f64}) {
        set_num_threads(threads);
        INFO("scale " << sh << "x" << sw << ", " << threads << " threads, " << dtype_name(dt));
        const int64_t N = 2, C = 3, H = 5, W = 7;
        const Tensor x = det_uniform({N, C, H, W}, 31).to(dt);
        const Tensor base = det_uniform({N, 3 * C, H * sh, W * sw}, 32).to(dt);  // C channels in the middle
        const Tensor up = upsample_nearest2d(x, {sh, sw});
        Tensor written = base.clone(), added = base.clone();
        upsample_nearest2d_into(x, {sh, sw}, written.narrow(1, C, C), false);
        upsample_nearest2d_into(x, {sh, sw}, added.narrow(1, C, C), true);
        // Outside the slice nothing moves; inside, the same bits as the composed ops.
        for (int64_t part : {int64_t(0), 2 * C}) {
          REQUIRE(written.narrow(1, part, C).contiguous().to_vector<double>() == base.narrow(1, part, C).contiguous().to_vector<double>());
          REQUIRE(added.narrow(1, part, C).contiguous().to_vector<double>() == base.narrow(1, part, C).contiguous().to_vector<double>());
        }
        REQUIRE(written.narrow(1, C, C).contiguous().to_vector<double>() == up.to_vector<double>());
        REQUIRE(added.narrow(1, C, C).contiguous().to_vector<double>() ==
                add(base.narrow(1, C, C), up).contiguous().to_vector<double>());
      }
  // What it refuses: another shape, planes that are not contiguous, another dtype, a gradient.
  const Tensor x = det_uniform({1, 2, 3, 4}, 3).to(DType::f32);
  CHECK_THROWS_WITH(upsample_nearest2d_into(x, {2, 2}, Tensor::zeros({1, 2, 6, 7}), false),
                    Catch::Contains("out has shape [1, 2, 6, 7], the upsampled input [1, 2, 6, 8]"));
  CHECK_THROWS_WITH(upsample_nearest2d_into(x, {2, 2}, Tensor::zeros({1, 2, 6, 16}).narrow(3, 0, 8), false),
                    Catch::Contains("planes must be contiguous"));
  CHECK_THROWS_WITH(upsample_nearest2d_into(x, {2, 2}, Tensor::zeros({1, 2, 6, 8}, DType::f64), false),
                    Catch::Contains("out must be float32"));
  Tensor g = x.clone();
  g.set_requires_grad(true);
  CHECK_THROWS_WITH(upsample_nearest2d_into(g, {2, 2}, Tensor::zeros({1, 2, 6, 8}), false),
                    Catch::Contains("records no gradient"));
}

TEST_CASE("max_pool2d's 2x2 path equals the reference window scan: values, argmax, ties, NaN, with and without grad",
          "[pool]") {
  ThreadCountGuard guard;
  int checked = 0;
  for (int threads : {1, 2})
    for (int64_t H : {2, 3, 4, 5})
      for (int64_t W : {1, 2, 3, 4, 7, 9, 37, 70})  // wide ones through the vector loops too
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
            if (v.size() > 150) v[150] = NAN, v[151] = -INFINITY;
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
                std::vector<float> plane(v.begin() + c * H * W, v.begin() + (c + 1) * H * W);
                std::vector<float> want((size_t)(Ho * Wo));
                std::vector<int64_t> at((size_t)(Ho * Wo));
                Pool2dParams p;
                p.kernel_h = p.kernel_w = 2, p.stride_h = stride[0], p.stride_w = stride[1];
                p.pad_h = pad[0], p.pad_w = pad[1];
                reference::max_pool2d(plane.data(), want.data(), at.data(), 1, 1, H, W, Ho, Wo, p);
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
