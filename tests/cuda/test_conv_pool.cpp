// CPU-vs-CUDA parity of conv2d and pooling (ops/cuda/conv.cu, ops/cuda/pool.cu against
// ops/cpu/conv.cpp and ops/cpu/pool.cpp): forward outputs and, through autograd, every input
// gradient, on the layer shapes of CRNN and SVTR and on the corners of the index arithmetic
// (groups, depthwise, dilation, odd sizes, padding rules, ties and NaN in max pooling, adaptive
// windows that overlap, a batch split into several column chunks).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "cuda/parity.h"

using namespace ocrt;
using namespace ocrt::parity;

namespace {

Conv2dOptions conv_opt(Pair stride, Pair padding, Pair dilation = {1, 1}, int64_t groups = 1) {
  Conv2dOptions o;
  o.stride = stride, o.padding = padding, o.dilation = dilation, o.groups = groups;
  return o;
}

MaxPool2dOptions maxp(Pair kernel, Pair stride, Pair padding, Pair dilation = {1, 1}, bool ceil_mode = false) {
  MaxPool2dOptions o;
  o.kernel = kernel, o.stride = stride, o.padding = padding, o.dilation = dilation, o.ceil_mode = ceil_mode;
  return o;
}

AvgPool2dOptions avgp(Pair kernel, Pair stride, Pair padding, bool count_include_pad = true, bool ceil_mode = false) {
  AvgPool2dOptions o;
  o.kernel = kernel, o.stride = stride, o.padding = padding, o.count_include_pad = count_include_pad;
  o.ceil_mode = ceil_mode;
  return o;
}

// x (N,C,H,W) and w (Cout, C/groups, kh, kw) (plus bias (Cout)) through conv2d on both devices.
void check_conv(const std::string& name, const Shape& x_shape, const Shape& w_shape, bool with_bias,
                const Conv2dOptions& opt, DType dtype = DType::f32) {
  ParityEnv env;
  std::vector<Tensor> in = {env.uniform(x_shape, -1, 1, dtype), env.uniform(w_shape, -1, 1, dtype)};
  if (with_bias) in.push_back(env.uniform({w_shape[0]}, -1, 1, dtype));
  check_op(env, name, in, [&](const std::vector<Tensor>& t) {
    return std::vector<Tensor>{conv2d(t[0], t[1], t.size() > 2 ? t[2] : Tensor(), opt)};
  }, kTolGemm);
}

// Takes the test case's ParityEnv (one per case: a second one would turn poisoning off when it ends).
void check_max_pool(ParityEnv& env, const std::string& name, const Tensor& x, const MaxPool2dOptions& opt) {
  check_op(env, name, {x}, [&](const std::vector<Tensor>& t) { return std::vector<Tensor>{max_pool2d(t[0], opt)}; },
           kTolElementwise);
}

void check_avg_pool(const std::string& name, const Shape& x_shape, const AvgPool2dOptions& opt,
                    DType dtype = DType::f32) {
  ParityEnv env;
  check_op(env, name, {env.uniform(x_shape, -1, 1, dtype)},
           [&](const std::vector<Tensor>& t) { return std::vector<Tensor>{avg_pool2d(t[0], opt)}; }, kTolElementwise);
}

void check_adaptive(const std::string& name, const Shape& x_shape, Pair out, DType dtype = DType::f32) {
  ParityEnv env;
  check_op(env, name, {env.uniform(x_shape, -1, 1, dtype)},
           [&](const std::vector<Tensor>& t) { return std::vector<Tensor>{adaptive_avg_pool2d(t[0], out)}; },
           kTolElementwise);
}

// Values from {0, 1, 2}, so most pooling windows hold ties (the first maximum must win on both
// devices), with a NaN at every `nan_every`-th element when nan_every > 0.
Tensor ties_and_nans(const Shape& shape, uint64_t seed, int64_t nan_every) {
  Generator gen(seed);
  std::vector<float> v = uniform(shape, 0, 3, gen).to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = std::floor(v[i]);
    if (nan_every > 0 && (int64_t)i % nan_every == 0) v[i] = std::numeric_limits<float>::quiet_NaN();
  }
  return Tensor::from_vector(v, shape);
}

}  // namespace

TEST_CASE("conv2d on CUDA matches the CPU on the CRNN layer shapes", "[cuda][conv]") {
  check_conv("conv0 1->64 32x100 3x3 pad 1", {4, 1, 32, 100}, {64, 1, 3, 3}, true, conv_opt({1, 1}, {1, 1}));
  check_conv("conv 64->128 16x50 3x3 pad 1", {2, 64, 16, 50}, {128, 64, 3, 3}, true, conv_opt({1, 1}, {1, 1}));
  check_conv("conv 128->64 4x26 3x3 pad 1", {4, 128, 4, 26}, {64, 128, 3, 3}, true, conv_opt({1, 1}, {1, 1}));
  check_conv("last conv 64->64 2x26 2x2 no pad", {4, 64, 2, 26}, {64, 64, 2, 2}, true, conv_opt({1, 1}, {0, 0}));
}

TEST_CASE("conv2d on CUDA matches the CPU on SVTR-style strided convs", "[cuda][conv]") {
  check_conv("stride 2 3->32 32x100", {4, 3, 32, 100}, {32, 3, 3, 3}, true, conv_opt({2, 2}, {1, 1}));
  check_conv("stride (2,1) 32->64 16x50", {4, 32, 16, 50}, {64, 32, 3, 3}, true, conv_opt({2, 1}, {1, 1}));
  check_conv("1x1 projection 64->48", {3, 64, 8, 25}, {48, 64, 1, 1}, true, conv_opt({1, 1}, {0, 0}));
}

TEST_CASE("conv2d on CUDA matches the CPU with groups, depthwise, dilation and odd geometry", "[cuda][conv]") {
  check_conv("groups 2", {3, 8, 9, 11}, {12, 4, 3, 3}, true, conv_opt({1, 1}, {1, 1}, {1, 1}, 2));
  check_conv("groups 4 strided", {2, 8, 10, 13}, {8, 2, 3, 2}, false, conv_opt({2, 3}, {1, 0}, {1, 2}, 4));
  check_conv("depthwise 3x3", {4, 16, 8, 25}, {16, 1, 3, 3}, true, conv_opt({1, 1}, {1, 1}, {1, 1}, 16));
  check_conv("depthwise multiplier 2, stride (2,1)", {2, 6, 9, 20}, {12, 1, 3, 3}, false,
             conv_opt({2, 1}, {1, 1}, {1, 1}, 6));
  check_conv("dilation 2", {3, 5, 12, 15}, {7, 5, 3, 3}, true, conv_opt({1, 1}, {2, 2}, {2, 2}));
  check_conv("dilation (2,3) pad (2,1)", {2, 4, 11, 17}, {6, 4, 3, 3}, true, conv_opt({1, 1}, {2, 1}, {2, 3}));
  check_conv("no bias", {4, 16, 8, 25}, {32, 16, 3, 3}, false, conv_opt({1, 1}, {1, 1}));
  check_conv("odd sizes, kernel 3x2, stride (2,3)", {3, 3, 7, 9}, {5, 3, 3, 2}, true, conv_opt({2, 3}, {1, 0}));
  check_conv("kernel 5x5 stride (3,2) pad 2", {3, 2, 7, 7}, {3, 2, 5, 5}, true, conv_opt({3, 2}, {2, 2}));
  check_conv("stride larger than the kernel", {2, 4, 9, 10}, {5, 4, 1, 1}, true, conv_opt({3, 4}, {0, 0}));
  check_conv("batch 1", {1, 16, 8, 25}, {32, 16, 3, 3}, true, conv_opt({1, 1}, {1, 1}));
  check_conv("batch 1, one output position", {1, 8, 3, 3}, {4, 8, 3, 3}, true, conv_opt({1, 1}, {0, 0}));
}

TEST_CASE("conv2d on CUDA matches the CPU in float64", "[cuda][conv]") {
  check_conv("f64 3x3 pad 1", {3, 8, 9, 14}, {16, 8, 3, 3}, true, conv_opt({1, 1}, {1, 1}), DType::f64);
  check_conv("f64 groups 2 stride (2,1) dilation 2", {2, 6, 11, 12}, {4, 3, 3, 3}, true,
             conv_opt({2, 1}, {2, 2}, {2, 2}, 2), DType::f64);
  check_conv("f64 depthwise batch 1", {1, 5, 6, 7}, {5, 1, 3, 3}, false, conv_opt({1, 1}, {1, 1}, {1, 1}, 5),
             DType::f64);
}

TEST_CASE("conv2d on CUDA matches the CPU when only some gradients are wanted", "[cuda][conv]") {
  ParityEnv env;
  const Conv2dOptions opt = conv_opt({1, 1}, {1, 1});
  const std::vector<Tensor> in = {env.uniform({3, 4, 6, 9}), env.uniform({8, 4, 3, 3}), env.uniform({8})};
  // The first layer of a network: no dx (conv2d_backward gets an undefined dx).
  check_op(env, "no dx", in, [&](const std::vector<Tensor>& t) {
    return std::vector<Tensor>{conv2d(t[0].detach(), t[1], t[2], opt)};
  }, kTolGemm);
  // Frozen weights and bias: dx only.
  check_op(env, "dx only", in, [&](const std::vector<Tensor>& t) {
    return std::vector<Tensor>{conv2d(t[0], t[1].detach(), t[2].detach(), opt)};
  }, kTolGemm);
}

TEST_CASE("conv2d on CUDA matches the CPU when the batch is split into several column chunks", "[cuda][conv]") {
  // ops/cuda/conv.cu keeps col (C*kh*kw, S*Ho*Wo) and out (Cout, S*Ho*Wo) under 256 MiB. Here one
  // sample needs (128*9 + 8) * 32*32 * 4 bytes = 4.5 MiB, so S = 56: 57 samples make a chunk of
  // 56 (dW accumulated over chunks) and a one-sample chunk (GEMM straight into y, dy read in
  // place). Many input channels keep dW's sums short (57*1024 terms) for float32 while the
  // columns still overflow one chunk. Revisit these sizes if kChunkBytes changes.
  check_conv("57 samples, groups 2", {57, 128, 32, 32}, {8, 64, 3, 3}, true, conv_opt({1, 1}, {1, 1}, {1, 1}, 2));
}

TEST_CASE("max_pool2d on CUDA matches the CPU", "[cuda][pool]") {
  ParityEnv env;
  check_max_pool(env, "CRNN (2,2)/(2,2)", env.uniform({4, 64, 32, 100}), maxp({2, 2}, {2, 2}, {0, 0}));
  check_max_pool(env, "CRNN (2,2)/(2,1) pad (0,1)", env.uniform({4, 256, 4, 25}), maxp({2, 2}, {2, 1}, {0, 1}));
  check_max_pool(env, "overlapping 3x3/2 pad 1 ceil, odd", env.uniform({2, 3, 7, 9}), maxp({3, 3}, {2, 2}, {1, 1}, {1, 1}, true));
  check_max_pool(env, "dilation (2,1) pad 1", env.uniform({2, 3, 8, 9}), maxp({2, 3}, {1, 1}, {1, 1}, {2, 1}));
  check_max_pool(env, "3x3 stride 1 (many overlaps)", env.uniform({2, 4, 6, 7}), maxp({3, 3}, {1, 1}, {1, 1}));
  check_max_pool(env, "f64 (2,2)/(2,1) pad (0,1)", env.uniform({2, 3, 6, 9}, -1, 1, DType::f64), maxp({2, 2}, {2, 1}, {0, 1}));
  // Ties: the first maximum in the window must win on both devices (the gradient shows which).
  check_max_pool(env, "ties", ties_and_nans({2, 3, 8, 10}, env.seed, 0), maxp({3, 3}, {2, 1}, {1, 1}));
  // NaN wins over every number and propagates to y.
  check_max_pool(env, "NaN", ties_and_nans({2, 3, 8, 10}, env.seed + 1, 7), maxp({2, 2}, {2, 1}, {0, 1}));
}

TEST_CASE("avg_pool2d on CUDA matches the CPU", "[cuda][pool]") {
  check_avg_pool("2x2 default stride", {4, 64, 16, 50}, avgp({2, 2}, {0, 0}, {0, 0}));
  check_avg_pool("3x3/2 pad 1 count_include_pad", {2, 3, 7, 9}, avgp({3, 3}, {2, 2}, {1, 1}, true));
  check_avg_pool("3x3/2 pad 1 exclude pad", {2, 3, 7, 9}, avgp({3, 3}, {2, 2}, {1, 1}, false));
  check_avg_pool("3x3/2 pad 1 exclude pad, ceil", {2, 3, 8, 10}, avgp({3, 3}, {2, 2}, {1, 1}, false, true));
  check_avg_pool("3x3/2 pad 1 include pad, ceil", {2, 3, 8, 10}, avgp({3, 3}, {2, 2}, {1, 1}, true, true));
  check_avg_pool("(3,2)/(2,1) pad 1 exclude pad", {1, 2, 5, 4}, avgp({3, 2}, {2, 1}, {1, 1}, false));
  check_avg_pool("4x4 stride 1 pad 2 (many overlaps)", {2, 2, 6, 7}, avgp({4, 4}, {1, 1}, {2, 2}, true));
  check_avg_pool("f64 2x2/1 pad 1", {2, 3, 5, 6}, avgp({2, 2}, {1, 1}, {1, 1}, true), DType::f64);
}

TEST_CASE("upsample_nearest2d on CUDA matches the CPU", "[cuda][pool]") {
  for (auto [shape, scale] : {std::pair<Shape, Pair>{{2, 8, 5, 7}, {2, 2}}, {{1, 3, 4, 6}, {4, 4}}, {{2, 2, 3, 5}, {3, 1}}}) {
    ParityEnv env;
    check_op(env, "upsample " + shape_str(shape) + " x " + std::to_string(scale[0]) + "," + std::to_string(scale[1]),
             {env.uniform(shape, -1, 1, DType::f32)},
             [&](const std::vector<Tensor>& t) { return std::vector<Tensor>{upsample_nearest2d(t[0], scale)}; },
             kTolElementwise);
  }
  ParityEnv env;
  check_op(env, "upsample f64 2x3", {env.uniform({1, 2, 3, 4}, -1, 1, DType::f64)},
           [&](const std::vector<Tensor>& t) { return std::vector<Tensor>{upsample_nearest2d(t[0], {2, 3})}; },
           kTolElementwise);
}

TEST_CASE("upsample_nearest2d_into on CUDA matches the CPU: into a channel slice, and added", "[cuda][pool]") {
  // A feature pyramid's two uses (models/dbnet.cpp): a level upsampled into its slice of the
  // concatenation (2 images, so the slice's planes lie apart), and P(i+1) upsampled and added
  // into the lateral's output.
  for (bool accumulate : {false, true})
    for (auto [shape, scale] : {std::pair<Shape, Pair>{{2, 3, 5, 7}, {2, 2}}, {{2, 2, 3, 4}, {4, 4}}, {{1, 3, 4, 6}, {3, 1}}}) {
      ParityEnv env;
      const Shape big{shape[0], 3 * shape[1], shape[2] * scale[0], shape[3] * scale[1]};
      check_op(env, std::string(accumulate ? "added " : "into ") + shape_str(shape),
               {env.uniform(shape, -1, 1, DType::f32), env.uniform(big, -1, 1, DType::f32)},
               [&](const std::vector<Tensor>& t) {
                 Tensor out = t[1].clone();
                 upsample_nearest2d_into(t[0], scale, out.narrow(1, shape[1], shape[1]), accumulate);
                 return std::vector<Tensor>{out};
               },
               kTolElementwise);
    }
}

TEST_CASE("adaptive_avg_pool2d on CUDA matches the CPU", "[cuda][pool]") {
  check_adaptive("height to 1 (CRNN/SVTR head)", {4, 64, 4, 25}, {1, 25});
  check_adaptive("height to 1, width 100 -> 33", {2, 8, 3, 100}, {1, 33});
  check_adaptive("odd 5x7 -> 3x4", {2, 3, 5, 7}, {3, 4});
  check_adaptive("upsampling 3x5 -> 4x7 (overlapping windows)", {2, 3, 3, 5}, {4, 7});
  check_adaptive("global 1x1", {2, 16, 6, 9}, {1, 1});
  check_adaptive("f64 7x6 -> 2x4", {2, 3, 7, 6}, {2, 4}, DType::f64);
}
