// Tests for models/int8.h: weight quantization, the int8 Linear and Conv2d against float32 on
// the dequantized values (the integer products are exact, so the only difference is float32
// rounding), the quantization error bound against the float layer, calibration, int8 model files
// (write, read, attach, refuse damaged ones), and ocrt-quantize + ocrt-infer end to end.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <random>

#include "models/crnn.h"
#include "models/dbnet.h"
#include "models/int8.h"
#include "runtime/cpu/int8_winograd.h"
#include "models/layers.h"
#include "models/model_check.h"
#include "models/model_file.h"
#include "models/recognizer.h"
#include "ops/conv.h"
#include "ops/linalg.h"
#include "runtime/cpu_isa.h"
#include "run_command.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::nn;
using namespace ocrt::testing;

namespace {

Tensor random_tensor(const Shape& shape, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v((size_t)n);
  for (auto& x : v) x = u(rng);
  return Tensor::from_vector(v, shape);
}

// x as the int8 layer sees it: its codes times the scale (clamped to the input's range).
Tensor fake_quantized(const Tensor& x, const Int8Input& in) {
  std::vector<float> v = x.contiguous().to_vector<float>();
  std::vector<uint8_t> codes(v.size());
  int8_quantize_input(v.data(), (int64_t)v.size(), in, codes.data());
  for (size_t i = 0; i < v.size(); ++i) v[i] = (float)((int)codes[i] - in.offset()) * in.scale;
  return Tensor::from_vector(v, x.shape());
}

// |a - b| <= tol elementwise, tol from an absolute-sum tensor: factor x abs_sum + floor.
void check_within(const Tensor& a, const Tensor& b, const Tensor& bound, const char* what) {
  const auto va = a.contiguous().to_vector<float>(), vb = b.contiguous().to_vector<float>();
  const auto vt = bound.contiguous().to_vector<float>();
  REQUIRE(va.size() == vb.size());
  int64_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    const double d = std::fabs((double)va[i] - vb[i]);
    worst = std::max(worst, d / std::max(1e-30, (double)vt[i]));
    bad += d > vt[i];
  }
  INFO(what << ": worst |difference| / bound " << worst);
  CHECK(bad == 0);
}

Tensor abs_t(const Tensor& t) {
  std::vector<float> v = t.contiguous().to_vector<float>();
  for (auto& x : v) x = std::fabs(x);
  return Tensor::from_vector(v, t.shape());
}

// The largest |a - b| and the largest |b|: how far an int8 model's logits are from the float ones.
std::pair<double, double> worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, (double)std::fabs(a[i] - b[i])), scale = std::max(scale, (double)std::fabs(b[i]));
  return {worst, scale};
}

Tensor scaled(const Tensor& t, float f, float floor = 0) {
  std::vector<float> v = t.contiguous().to_vector<float>();
  for (auto& x : v) x = x * f + floor;
  return Tensor::from_vector(v, t.shape());
}

}  // namespace

TEST_CASE("quantize_weight: codes in -127..127 per output channel, within half a step, zero rows kept", "[int8]") {
  Tensor w = random_tensor({5, 3, 3, 3}, -2, 2, 1);
  {
    std::vector<float> v = w.to_vector<float>();
    for (int k = 0; k < 27; ++k) v[(size_t)(2 * 27 + k)] = 0;  // channel 2 all zero
    w = Tensor::from_vector(v, w.shape());
  }
  const Int8Weight q = quantize_weight(w);
  CHECK(q.codes.dtype() == DType::i8);
  CHECK(q.codes.shape() == w.shape());
  const auto codes = q.codes.to_vector<int8_t>();
  const auto s = q.scales.to_vector<float>();
  const auto v = w.to_vector<float>();
  const auto back = dequantize_weight(q.codes, q.scales).to_vector<float>();
  for (int64_t o = 0; o < 5; ++o) {
    int amax = 0;
    for (int64_t k = 0; k < 27; ++k) {
      const size_t i = (size_t)(o * 27 + k);
      amax = std::max(amax, std::abs((int)codes[i]));
      CHECK(std::fabs(back[i] - v[i]) <= s[(size_t)o] * 0.5f * (1 + 1e-6f));
    }
    CHECK(amax == (o == 2 ? 0 : 127));
  }
  CHECK(s[2] == 1.0f);
  // A weight that is not finite is refused, never cast to a code.
  for (const float bad : {std::nanf(""), INFINITY}) {
    std::vector<float> with_bad = v;
    with_bad[7] = bad;
    CHECK_THROWS_WITH(quantize_weight(Tensor::from_vector(with_bad, w.shape())), Catch::Contains("not finite"));
  }
}

TEST_CASE("Int8Linear equals float32 on the dequantized input and weights, and stays within the quantization bound", "[int8]") {
  Generator gen(3);
  for (bool is_signed : {false, true}) {
    Linear lin(37, 21, true, gen);
    const Tensor x = random_tensor({3, 11, 37}, is_signed ? -1.5f : 0.f, 1.5f, 7);
    Int8Input in;
    in.is_signed = is_signed;
    in.scale = 1.5f / in.max_code();
    const Int8Weight q = quantize_weight(lin.weight);
    const Int8Linear il(q.codes, q.scales, lin.bias, in);
    const Tensor y = il.forward(x);
    CHECK(y.shape() == Shape{3, 11, 21});
    // The same products in float32: exact integers times the scales, so float32 rounding only.
    const Tensor wq = dequantize_weight(q.codes, q.scales), xq = fake_quantized(x, in);
    const Tensor y_deq = linear(xq, wq, lin.bias);
    const Tensor abs_sum = linear(abs_t(xq), abs_t(wq), abs_t(lin.bias));
    check_within(y, y_deq, scaled(abs_sum, 1e-5f, 1e-7f), "int8 vs dequantized float32");
    // Against the float layer: |x - xq| <= scale_x / 2, |w - wq| <= scale_w / 2 per element, so
    // |y - y_float| <= sum_k (scale_x / 2 |w_k| + |xq_k| scale_w / 2) (+ float32 rounding).
    const Tensor y_float = linear(x, lin.weight, lin.bias);
    const auto ws = q.scales.to_vector<float>();
    std::vector<float> hs(21 * 37);
    for (int64_t o = 0; o < 21; ++o)
      for (int64_t k = 0; k < 37; ++k) hs[(size_t)(o * 37 + k)] = ws[(size_t)o] / 2;
    const Tensor bound = add(linear(Tensor::full(x.shape(), in.scale / 2), abs_t(lin.weight)),
                             linear(abs_t(xq), Tensor::from_vector(hs, {21, 37})));
    check_within(y, y_float, scaled(bound, 1.0001f, 1e-5f), "int8 vs float32 layer");
  }
}

TEST_CASE("Int8Conv2d equals float32 conv2d on the dequantized values: padding, stride, dilation, odd channels, signed inputs", "[int8]") {
  struct Shape4 {
    int64_t N, C, H, W, Cout, kh, kw;
    Conv2dOptions opt;
  };
  std::vector<Shape4> shapes = {
      {2, 5, 9, 13, 7, 3, 3, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {1, 8, 10, 17, 19, 3, 3, {{2, 1}, {1, 1}, {1, 1}, 1}},
      {3, 4, 6, 11, 16, 2, 2, {{1, 1}, {0, 0}, {1, 1}, 1}},
      {1, 6, 12, 12, 5, 3, 3, {{1, 2}, {2, 2}, {2, 2}, 1}},
      // 64 channels a pixel: on AMX the taps are read in place from the image (cpu::Int8Image),
      // rows of 19 and 6 pixels crossing the tiles' 16, with dilation too.
      {2, 64, 5, 19, 40, 3, 3, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {1, 128, 7, 6, 33, 3, 3, {{1, 1}, {2, 2}, {2, 2}, 1}},
  };
  uint32_t seed = 11;
  for (const auto& s : shapes)
    for (bool is_signed : {false, true}) {
      INFO("C " << s.C << " Cout " << s.Cout << " signed " << is_signed);
      const Tensor x = random_tensor({s.N, s.C, s.H, s.W}, is_signed ? -2.f : 0.f, 2.f, seed++);
      const Tensor w = random_tensor({s.Cout, s.C, s.kh, s.kw}, -0.5f, 0.5f, seed++);
      const Tensor b = random_tensor({s.Cout}, -0.3f, 0.3f, seed++);
      Int8Input in;
      in.is_signed = is_signed;
      in.scale = 2.f / in.max_code();
      const Int8Weight q = quantize_weight(w);
      const Int8Conv2d ic(q.codes, q.scales, b, s.opt, in);
      const Tensor y = ic.forward(x);
      const Tensor wq = dequantize_weight(q.codes, q.scales), xq = fake_quantized(x, in);
      ConvModeScope exact(ConvMode::exact);
      const Tensor y_deq = conv2d(xq, wq, b, s.opt);
      REQUIRE(y.shape() == y_deq.shape());
      const Tensor abs_sum = conv2d(abs_t(xq), abs_t(wq), abs_t(b), s.opt);
      check_within(y, y_deq, scaled(abs_sum, 1e-5f, 1e-7f), "int8 conv vs dequantized float32");
    }
  const Int8Weight q = quantize_weight(random_tensor({4, 4, 3, 3}, -1, 1, 1));
  const Int8Conv2d ic(q.codes, q.scales, Tensor(), {}, Int8Input{0.01f, false});
  CHECK_THROWS_WITH(ic.forward(Tensor::zeros({1, 3, 8, 8})), Catch::Contains("(N, 4, H, W)"));
  CHECK_THROWS_WITH(ic.forward(Tensor::zeros({1, 4, 2, 8})), Catch::Contains("smaller than the kernel"));
  CHECK_THROWS_WITH(Int8Conv2d(q.codes, q.scales, Tensor(), {}, Int8Input{0.f, false}), Catch::Contains("positive"));
}

TEST_CASE("Int8Conv2d pools image by image as max_pool2d pools its whole output, and Sequential hands it the pool", "[int8]") {
  // The pool takes the epilogue's float32 values as they are: the same bits as the layers one
  // after the other, one image or several (the by-image threads), on CRNN's pools and others.
  const Int8Weight q = quantize_weight(random_tensor({16, 6, 3, 3}, -0.5f, 0.5f, 41));
  const Tensor b = random_tensor({16}, -0.3f, 0.3f, 42);
  const Int8Conv2d ic(q.codes, q.scales, b, {{1, 1}, {1, 1}}, Int8Input{2.f / 127, false});
  const std::vector<MaxPool2dOptions> pools = {
      {}, {{2, 2}, {2, 1}, {0, 1}}, {{3, 3}, {2, 2}, {1, 1}, {1, 1}, true}, {{2, 1}, {1, 1}}};
  uint32_t seed = 50;
  for (int64_t N : {1, 3})
    for (const MaxPool2dOptions& opt : pools) {
      INFO("N " << N << " kernel " << opt.kernel[0] << "x" << opt.kernel[1]);
      const Tensor x = random_tensor({N, 6, 8, 13}, 0.f, 2.f, seed++);
      Int8PostOps post;
      post.relu = true;
      post.pool = opt;
      const Tensor fused = ic.forward(x, post);
      const Tensor apart = max_pool2d(relu(ic.forward(x)), opt);
      REQUIRE(fused.shape() == apart.shape());
      CHECK(fused.to_vector<float>() == apart.to_vector<float>());
    }
  // Called from inside a parallel region (each thread its own call), it runs on that thread and
  // gives the same bits.
  {
    const Tensor x = random_tensor({3, 6, 8, 13}, 0.f, 2.f, 70);
    Int8PostOps post;
    post.relu = true;
    post.pool = pools[1];
    const std::vector<float> want = ic.forward(x, post).to_vector<float>();
    std::vector<std::vector<float>> got(2);
#pragma omp parallel num_threads(2)
    got[(size_t)omp_get_thread_num()] = ic.forward(x, post).to_vector<float>();
    CHECK(got[0] == want);
    CHECK((got[1].empty() || got[1] == want));  // a team of one where nesting gives no second thread
  }
  // In a Sequential without gradients: Conv2d (int8), ReLU, MaxPool2d as one call.
  Generator gen(7);
  Sequential s;
  auto conv = s.add(std::make_shared<Conv2d>(6, 16, Pair{3, 3}, gen, Conv2dOptions{{1, 1}, {1, 1}}));
  conv->int8 = std::make_shared<const Int8Conv2d>(q.codes, q.scales, conv->bias, conv->options, Int8Input{2.f / 127, false});
  s.add(std::make_shared<ReLU>());
  s.add(std::make_shared<MaxPool2d>(MaxPool2dOptions{{2, 2}, {2, 1}, {0, 1}}));
  s.eval();
  NoGradGuard no_grad;
  const Tensor x = random_tensor({2, 6, 8, 13}, 0.f, 2.f, 60);
  const Tensor whole = s.forward(x);
  const Tensor one_by_one = s[2].forward(s[1].forward(s[0].forward(x)));
  REQUIRE(whole.shape() == one_by_one.shape());
  CHECK(whole.to_vector<float>() == one_by_one.to_vector<float>());
}

TEST_CASE("Int8Conv2d hands its output to the next int8 convolution as codes: the same bits as through float32", "[int8]") {
  // forward_codes then the next layer's forward against forward then the next layer's forward:
  // pooled (CRNN's pools, one with padding, one in ceil mode) or not, an unsigned and a signed
  // next input, channels a multiple of 4 and not (6: padded to 8), a stride-1 and a stride-2 next
  // layer, one image and several, and a chain of three in a Sequential.
  uint32_t seed = 300;
  const std::vector<std::optional<MaxPool2dOptions>> pools = {
      std::nullopt, MaxPool2dOptions{}, MaxPool2dOptions{{2, 2}, {2, 1}, {0, 1}},
      MaxPool2dOptions{{3, 3}, {2, 2}, {1, 1}, {1, 1}, true}};
  for (const int64_t mid : {16, 6})
    for (const bool signed_next : {false, true})
      for (const int64_t next_stride : {1, 2})
        for (const auto& pool : pools)
          for (const int64_t N : {1, 3}) {
            INFO("mid " << mid << " signed " << signed_next << " next stride " << next_stride << " pool "
                        << (pool ? pool->kernel[0] : 0) << " N " << N);
            const Int8Weight q1 = quantize_weight(random_tensor({mid, 5, 3, 3}, -0.5f, 0.5f, seed++));
            const Int8Weight q2 = quantize_weight(random_tensor({7, mid, 3, 3}, -0.5f, 0.5f, seed++));
            const Int8Conv2d first(q1.codes, q1.scales, random_tensor({mid}, -0.3f, 0.3f, seed++), {{1, 1}, {1, 1}},
                                   Int8Input{2.f / 127, false});
            const Int8Conv2d next(q2.codes, q2.scales, random_tensor({7}, -0.3f, 0.3f, seed++),
                                  {{next_stride, next_stride}, {1, 1}},
                                  signed_next ? Int8Input{1.5f / 63, true} : Int8Input{1.5f / 127, false});
            Int8PostOps post;
            post.relu = !signed_next;  // signed: the next layer's input keeps its negative values
            const Tensor bn_scale = random_tensor({mid}, 0.5f, 1.5f, seed++);
            post.affine = {bn_scale, random_tensor({mid}, -0.2f, 0.2f, seed++)};
            post.pool = pool;
            const Tensor x = random_tensor({N, 5, 9, 14}, 0.f, 2.f, seed++);
            const Int8Codes codes = first.forward_codes(x, post, next);
            CHECK(codes.reader == &next);
            const Tensor chained = next.forward(codes, Int8PostOps{});
            const Tensor apart = next.forward(first.forward(x, post));
            REQUIRE(chained.shape() == apart.shape());
            CHECK(chained.to_vector<float>() == apart.to_vector<float>());
            CHECK_THROWS_WITH(first.forward(codes, Int8PostOps{}), Catch::Contains("laid out for another layer"));
          }
  // Three int8 convolutions in a Sequential (a BatchNorm, ReLUs and a pool between them): the
  // activations between them go as codes, and the output is the int8 layers' one after the
  // other through float32, each with its BatchNorm, ReLU and pool in its epilogue.
  Generator gen(11);
  Sequential s;
  const std::vector<std::pair<int64_t, int64_t>> io = {{4, 8}, {8, 16}, {16, 12}};
  std::vector<std::shared_ptr<const Int8Conv2d>> convs;
  std::shared_ptr<BatchNorm2d> bn;
  for (size_t k = 0; k < io.size(); ++k) {
    auto conv = s.add(std::make_shared<Conv2d>(io[k].first, io[k].second, Pair{3, 3}, gen, Conv2dOptions{{1, 1}, {1, 1}}));
    const Int8Weight q = quantize_weight(conv->weight);
    conv->int8 = std::make_shared<const Int8Conv2d>(q.codes, q.scales, conv->bias, conv->options, Int8Input{0.02f, false});
    convs.push_back(conv->int8);
    if (k == 0) bn = s.add(std::make_shared<BatchNorm2d>(io[k].second));
    s.add(std::make_shared<ReLU>());
    if (k == 1) s.add(std::make_shared<MaxPool2d>(MaxPool2dOptions{{2, 2}, {2, 1}, {0, 1}}));
  }
  s.eval();
  NoGradGuard no_grad;
  const Tensor x = random_tensor({2, 4, 10, 17}, 0.f, 2.f, 400);
  const Tensor whole = s.forward(x);
  Int8PostOps p0, p1, p2;
  p0.affine = bn->eval_affine(), p0.relu = true;
  p1.relu = true, p1.pool = MaxPool2dOptions{{2, 2}, {2, 1}, {0, 1}};
  p2.relu = true;
  const Tensor y = convs[2]->forward(convs[1]->forward(convs[0]->forward(x, p0), p1), p2);
  REQUIRE(whole.shape() == y.shape());
  CHECK(whole.to_vector<float>() == y.to_vector<float>());
}

namespace {

// A 3x3, stride-1, padding-1 convolution's integer sums, the plain loop: codes q (C, H, W; the
// padding at code 0) against weights w (Cout, C, 3, 3); (Cout, H, W).
std::vector<int64_t> direct_sums(const std::vector<int>& q, const int8_t* w, int64_t Cout, int64_t C, int64_t H,
                                 int64_t W) {
  std::vector<int64_t> sums((size_t)(Cout * H * W), 0);
  for (int64_t k = 0; k < Cout; ++k)
    for (int64_t i = 0; i < H; ++i)
      for (int64_t j = 0; j < W; ++j) {
        int64_t sum = 0;
        for (int64_t c = 0; c < C; ++c)
          for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) {
              const int64_t r = i + a - 1, s = j + b - 1;
              if (r >= 0 && r < H && s >= 0 && s < W)
                sum += q[(size_t)((c * H + r) * W + s)] * (int64_t)w[((k * C + c) * 3 + a) * 3 + b];
            }
        sums[(size_t)((k * H + i) * W + j)] = sum;
      }
  return sums;
}

}  // namespace

// Sets int8 Winograd (runtime/cpu/int8_winograd.h) on or off, and the largest tile that layers'
// weights made meanwhile take, while it lives, then back as it was.
struct Int8WinogradScope {
  bool before = cpu::int8_winograd_enabled();
  explicit Int8WinogradScope(bool on, int max_tile = 0) { cpu::set_int8_winograd(on, cpu::kInt8WinogradMinChannels, max_tile); }
  ~Int8WinogradScope() { cpu::set_int8_winograd(before); }
};

TEST_CASE("int8 Winograd F(4x4) and F(2x2) give im2col's bits: shapes, signed inputs, epilogues, codes", "[int8]") {
  if (!cpu_isa_supported(CpuIsa::avx2)) return;  // int8 Winograd runs on AVX2 only
  // Odd and even sizes (a last tile half outside the image), one row or column, channels not a
  // multiple of 16 (the transform's scalar tail) or of 4 (padded), more than 48 tiles to a row
  // (two chunks), batches of narrow images (several images' tiles in a chunk, chunks across
  // images), output channels not a multiple of 16 (a partial panel), signed inputs (padding at
  // code 64), and the epilogue's BatchNorm, ReLU and pool.
  uint32_t seed = 900;
  struct Case {
    int64_t N, C, Cout, H, W;
    bool is_signed, post;
  };
  // (Input channels from kInt8WinogradMinChannels on: with fewer the layer keeps im2col.)
  const Case cases[] = {{1, 32, 1, 1, 1, false, false},  {2, 33, 5, 2, 7, false, true},   {1, 44, 16, 5, 13, true, false},
                        {3, 49, 20, 3, 1, false, true},  {1, 36, 33, 8, 101, true, true}, {2, 64, 32, 4, 130, false, true},
                        {1, 32, 16, 16, 9, false, false}, {2, 40, 7, 7, 8, true, true},
                        {21, 40, 18, 4, 13, true, true}};  // narrow images: several a chunk, chunks across them
  for (const int tile : {4, 2})
  for (const Case& c : cases) {
    INFO("F(" << tile << "x" << tile << ", 3x3): N " << c.N << " C " << c.C << " Cout " << c.Cout << " " << c.H << "x" << c.W << " signed " << c.is_signed);
    const Int8Weight q = quantize_weight(random_tensor({c.Cout, c.C, 3, 3}, -0.5f, 0.5f, seed++));
    // (these weights are well within F(4x4)'s bound: the layer takes the tile asked for)
    REQUIRE(cpu::Int8WinogradWeights(c.Cout, c.C, q.codes.data<int8_t>(), tile).tile() == tile);
    const Int8Input in = c.is_signed ? Int8Input{1.f / 63, true} : Int8Input{2.f / 127, false};
    const Int8Conv2d conv(q.codes, q.scales, random_tensor({c.Cout}, -0.3f, 0.3f, seed++), {{1, 1}, {1, 1}}, in);
    const Tensor x = random_tensor({c.N, c.C, c.H, c.W}, c.is_signed ? -1.2f : 0.f, 2.2f, seed++);  // some clamped
    Int8PostOps post;
    if (c.post) {
      const Tensor bn_scale = random_tensor({c.Cout}, 0.5f, 1.5f, seed++);
      post.affine = {bn_scale, random_tensor({c.Cout}, -0.2f, 0.2f, seed++)};
      post.relu = true;
      if (c.H >= 2 && c.W >= 2) post.pool = MaxPool2dOptions{};
    }
    Tensor y[2];
    for (int w = 0; w < 2; ++w) {
      Int8WinogradScope scope(w == 1, tile);
      y[w] = conv.forward(x, post);
    }
    REQUIRE(y[0].shape() == y[1].shape());
    CHECK(y[0].to_vector<float>() == y[1].to_vector<float>());
    // and as the next layer's codes, then that layer's output
    const Int8Weight q2 = quantize_weight(random_tensor({3, c.Cout, 3, 3}, -0.5f, 0.5f, seed++));
    const Int8Conv2d next(q2.codes, q2.scales, Tensor(), {{1, 1}, {1, 1}}, Int8Input{1.5f / 127, false});
    Tensor z[2];
    for (int w = 0; w < 2; ++w) {
      Int8WinogradScope scope(w == 1, tile);
      z[w] = next.forward(conv.forward_codes(x, post, next), Int8PostOps{});
    }
    CHECK(z[0].to_vector<float>() == z[1].to_vector<float>());
  }
}

TEST_CASE("int8 Winograd at the bound: the largest codes and weights over 512 channels, on 1 and 2 threads", "[int8]") {
  if (!cpu_isa_supported(CpuIsa::avx2)) return;  // int8 Winograd runs on AVX2 only
  // Every code 127 against weights of +-127 in patterns that make the transforms' largest values
  // (|U| up to 1143, |V| up to 508) and sums near the int32 bound (4 x 9 x 127 x 127 x 512 ~ 3e8
  // before the shift): the exact integers, so the same floats as im2col. Scale 1: the floats are
  // the sums themselves, and each is checked against the direct sum too.
  const int64_t C = 512, Cout = 16, H = 5, W = 6;
  Tensor codes = Tensor::empty({Cout, C, 3, 3}, DType::i8);
  int8_t* w = codes.data<int8_t>();
  for (int64_t k = 0; k < Cout; ++k)
    for (int64_t i = 0; i < C * 9; ++i) w[k * C * 9 + i] = (int8_t)(k % 3 == 0 ? 127 : k % 3 == 1 ? -127 : ((i + k) % 2 ? 127 : -127));
  REQUIRE(cpu::Int8WinogradWeights(Cout, C, w, 4).tile() == 2);  // far beyond F(4x4)'s bound: F(2x2)
  const Int8Conv2d conv(codes, Tensor::ones({Cout}), Tensor(), {{1, 1}, {1, 1}}, Int8Input{1.0f, false});
  const Tensor x = Tensor::full({1, C, H, W}, 127.0f);
  for (const int threads : {1, 2}) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    Tensor y[2];
    for (int v = 0; v < 2; ++v) {
      Int8WinogradScope scope(v == 1);
      y[v] = conv.forward(x);
    }
    omp_set_num_threads(before);
    CHECK(y[0].to_vector<float>() == y[1].to_vector<float>());
    const std::vector<float> got = y[1].to_vector<float>();
    const std::vector<int64_t> sums = direct_sums(std::vector<int>((size_t)(C * H * W), 127), w, Cout, C, H, W);
    for (size_t i = 0; i < sums.size(); ++i) REQUIRE(got[i] == (float)sums[i]);
  }
}

TEST_CASE("int8 Winograd F(4x4) at its bound: sums of +-(2^25 - 16) exact, F(2x2) one weight past it", "[int8]") {
  if (!cpu_isa_supported(CpuIsa::avx2)) return;  // int8 Winograd runs on AVX2 only
  // F(4x4)'s output transform leaves 576 x the sum modulo 2^32; the sum comes back exactly when
  // it lies within -2^25 .. 2^25 - 1 (int8_winograd.h). Channels here reach that bound: 232 input
  // channels, weights of 127 on 2080 of the 2088 taps and 48 on one (127 x 264208 = 2^25 - 16
  // against codes of 127), positive, negative, and mixed; a wrong recovery is off by 2^26.
  // Scale 1: the floats are the sums (even, so exact in float32 too).
  const int64_t C = 232, Cout = 16;
  Tensor codes = Tensor::empty({Cout, C, 3, 3}, DType::i8);
  int8_t* w = codes.data<int8_t>();
  for (int64_t k = 0; k < Cout; ++k) {
    const int sign = k % 3 == 1 ? -1 : 1;
    for (int64_t i = 0; i < C * 9; ++i) {
      int v = i < 2080 ? 127 : i == 2080 ? 48 : 0;
      if (k % 3 == 2) v = i % 2 ? 127 : -127;  // mixed: about half the bound each way
      w[k * C * 9 + i] = (int8_t)(sign * v);
    }
  }
  REQUIRE(cpu::int8_winograd4_fits(Cout, C, w));
  REQUIRE(cpu::Int8WinogradWeights(Cout, C, w, 4).tile() == 4);
  {  // one more on a positive channel's weights, or on a negative one's: over the bound
    std::vector<int8_t> over(w, w + Cout * C * 9);
    over[2081] = 1;
    CHECK_FALSE(cpu::int8_winograd4_fits(Cout, C, over.data()));
    CHECK(cpu::Int8WinogradWeights(Cout, C, over.data(), 4).tile() == 2);
    over.assign(w, w + Cout * C * 9);
    over[C * 9 + 2081] = -1;
    CHECK_FALSE(cpu::int8_winograd4_fits(Cout, C, over.data()));
  }
  const Int8Conv2d conv(codes, Tensor::ones({Cout}), Tensor(), {{1, 1}, {1, 1}}, Int8Input{1.0f, false});
  // Codes of 127 (interior pixels reach the bound), and random ones; 9 x 10: tiles part outside.
  for (const bool full : {true, false}) {
    const int64_t H = 9, W = 10;
    const Tensor x = full ? Tensor::full({1, C, H, W}, 127.0f) : random_tensor({1, C, H, W}, 0.f, 127.f, 77);
    std::vector<int> q((size_t)(C * H * W));
    for (size_t i = 0; i < q.size(); ++i) q[i] = (int)std::lround(std::clamp(x.data<float>()[i], 0.f, 127.f));
    for (const int threads : {1, 2}) {
      INFO("codes " << (full ? "127" : "random") << ", " << threads << " threads");
      const int before = omp_get_max_threads();
      omp_set_num_threads(threads);
      Tensor y[2];
      for (int v = 0; v < 2; ++v) {
        Int8WinogradScope scope(v == 1, 4);
        y[v] = conv.forward(x);
      }
      omp_set_num_threads(before);
      CHECK(y[0].to_vector<float>() == y[1].to_vector<float>());
      const std::vector<float> got = y[1].to_vector<float>();
      const std::vector<int64_t> sums = direct_sums(q, w, Cout, C, H, W);
      for (size_t i = 0; i < sums.size(); ++i) REQUIRE(got[i] == (float)sums[i]);
      if (full) CHECK(got[(size_t)(1 * W + 1)] == 33554416.0f);  // channel 0 at an interior pixel: the bound
    }
  }
}

TEST_CASE("int8 Winograd weights are shared by layers of the same codes while one holds them", "[int8]") {
  const int64_t Cout = 20, C = 36;
  std::vector<int8_t> w((size_t)(Cout * C * 9)), other;
  std::mt19937 rng(5);
  for (int8_t& v : w) v = (int8_t)((int)(rng() % 255) - 127);
  other = w;
  other[100] = (int8_t)(other[100] == 5 ? 6 : 5);
  auto a = cpu::shared_int8_winograd_weights(Cout, C, w.data(), 4);
  const std::vector<int8_t> copy = w;  // equal bytes elsewhere: a second model's copy of the file
  auto b = cpu::shared_int8_winograd_weights(Cout, C, copy.data(), 4);
  CHECK(a == b);
  CHECK(a->tile() == 4);
  CHECK(cpu::shared_int8_winograd_weights(Cout, C, other.data(), 4) != a);  // one code apart
  CHECK(cpu::shared_int8_winograd_weights(Cout, C, w.data(), 2) != a);      // another tile
  CHECK(cpu::shared_int8_winograd_weights(Cout, C, w.data(), 2)->tile() == 2);
  // The same bytes read as other shapes are other weights.
  CHECK(cpu::shared_int8_winograd_weights(C, Cout, w.data(), 4) != a);
  const cpu::Int8WinogradWeights* held = a.get();
  const std::vector<int16_t> first(held->panel(0, 0), held->panel(0, 0) + held->pairs() * 2 * cpu::kInt8NR);
  a.reset(), b.reset();  // none holds them: made again, equal
  auto c = cpu::shared_int8_winograd_weights(Cout, C, w.data(), 4);
  CHECK(std::equal(first.begin(), first.end(), c->panel(0, 0)));
}

namespace {

std::shared_ptr<CRNN> small_crnn() {
  CRNNConfig c;
  c.channels = {4, 8, 8, 8, 12, 12, 12};
  c.hidden = 8;
  c.num_classes = 9;
  Generator gen(5);
  auto m = std::make_shared<CRNN>(c, gen);
  m->eval();
  return m;
}

ModelInfo small_info(const CRNN& m) {
  ModelInfo info;
  info.arch = "crnn";
  info.config = m.config_json();
  info.charset = {"a", "b", "c", "d", "e", "f", "g", "h"};
  info.input = default_input_spec();
  return info;
}

}  // namespace

TEST_CASE("an int8 model file: calibrated, written, read back with its layers in int8, close to the float model", "[int8]") {
  TempDir dir("int8-file");
  auto model = small_crnn();
  const Tensor x = random_tensor({3, 1, 32, 48}, -1, 1, 21);
  StateDict sd;
  {
    Int8Calibration calibration(100);
    calibration.add_model(*model);
    NoGradGuard no_grad;
    model->forward(x);
    CHECK(calibration.values_seen("cnn.3.weight") > 0);
    CHECK(calibration.values_seen("rnn.weight_ih_l1") > 0);
    CHECK(calibration.values_seen("rnn.weight_hh_l0") > 0);
    CHECK(calibration.input_for("rnn.weight_ih_l1_reverse").is_signed);  // tanh outputs
    CHECK_FALSE(calibration.input_for("cnn.3.weight").is_signed);          // after a ReLU
    CHECK_THROWS_WITH(calibration.input_for("nope.weight"), Catch::Contains("never seen"));
    sd = int8_state_dict(*model, calibration);
  }
  CHECK(sd.at("cnn.3.weight").dtype() == DType::i8);
  CHECK(sd.at("cnn.0.weight").dtype() == DType::f32);  // one input channel: float32
  CHECK(sd.at("rnn.weight_hh_l0").dtype() == DType::i8);
  CHECK(sd.at("rnn.weight_hh_l0.int8_input").to_vector<float>()[1] == 1.0f);  // h is signed
  CHECK(sd.at("fc.weight").dtype() == DType::i8);
  const std::string path = (dir.path / "m8.safetensors").string();
  save_model_file(path, sd, small_info(*model));

  const ModelFile f = load_model_file(path);
  CHECK(is_int8_state_dict(f.weights));
  auto loaded = build_recognizer("crnn", f.info->config, f.weights, path);
  auto* crnn = dynamic_cast<CRNN*>(loaded.get());
  REQUIRE(crnn);
  CHECK(crnn->fc->int8);
  CHECK(crnn->rnn->int8_input.size() == 4);
  CHECK(crnn->rnn->int8_recurrent.size() == 4);
  CHECK(dynamic_cast<Conv2d&>((*crnn->cnn)[3]).int8);
  CHECK_FALSE(dynamic_cast<Conv2d&>((*crnn->cnn)[0]).int8);

  set_grad_enabled(false);
  const Tensor y8 = loaded->forward(x), yf = model->forward(x);
  set_grad_enabled(true);
  const auto a = y8.to_vector<float>(), b = yf.to_vector<float>();
  const auto [worst, scale] = worst_difference(a, b);
  INFO("worst |int8 - float| " << worst << " of logits up to " << scale);
  CHECK(worst < 0.05 * scale);
  CHECK(worst > 0);  // it did compute in int8
  // With gradients the same model computes in float32 on the dequantized weights.
  const Tensor yg = loaded->forward(x);
  CHECK(yg.to_vector<float>() != a);
}

TEST_CASE("an int8 model loaded for inference only keeps no float32 weights, reads the same, and refuses gradients", "[int8]") {
  auto model = small_crnn();
  const Tensor x = random_tensor({2, 1, 32, 40}, -1, 1, 23);
  StateDict sd;
  {
    Int8Calibration calibration(100);
    calibration.add_model(*model);
    NoGradGuard no_grad;
    model->forward(x);
    sd = int8_state_dict(*model, calibration);
  }
  auto full = build_recognizer("crnn", small_info(*model).config, sd, "m8");
  auto lean = build_recognizer("crnn", small_info(*model).config, sd, "m8", /*inference_only=*/true);
  auto* crnn = dynamic_cast<CRNN*>(lean.get());
  REQUIRE(crnn);
  // Every weight int8 computes is a placeholder: its shape, one value in memory.
  std::map<std::string, Tensor> full_params;
  for (const auto& [name, t] : full->named_parameters()) full_params[name] = t;
  int64_t released = 0, float_values = 0, codes = 0;
  for (const auto& [name, t] : sd) codes += t.dtype() == DType::i8;
  for (const auto& [name, t] : lean->named_parameters()) {
    CHECK(t.shape() == full_params.at(name).shape());
    if (sd.at(name).dtype() == DType::i8) {
      ++released;
      CHECK(t.storage()->nbytes() <= 64);
    } else {
      CHECK(t.storage()->nbytes() >= (size_t)t.numel() * 4);
      float_values += t.numel();
    }
  }
  CHECK(released == codes);
  CHECK(released == 1 + 4 + 4 + 6);  // fc, the LSTM's 4 input and 4 recurrent weights, 6 convolutions
  CHECK(float_values > 0);            // the first convolution, BatchNorms and biases stay
  CHECK(crnn->fc->int8_only);
  CHECK(crnn->rnn->int8_only);
  CHECK_FALSE(dynamic_cast<Conv2d&>((*crnn->cnn)[0]).int8_only);
  {
    NoGradGuard no_grad;
    CHECK(lean->forward(x).to_vector<float>() == full->forward(x).to_vector<float>());
  }
  // With gradients it would need the float32 weights: a clear error, not placeholders' zeros.
  CHECK_THROWS_WITH(lean->forward(x), Catch::Contains("int8 model was loaded for inference only"));
  // A float state dict loads the same either way.
  auto float_lean = build_recognizer("crnn", small_info(*model).config, model->state_dict(), "m", true);
  NoGradGuard no_grad;
  CHECK(float_lean->forward(x).to_vector<float>() == model->forward(x).to_vector<float>());
}

TEST_CASE("a damaged int8 model file is refused with what is wrong", "[int8]") {
  auto model = small_crnn();
  StateDict sd;
  {
    Int8Calibration calibration(99.9);
    calibration.add_model(*model);
    NoGradGuard no_grad;
    model->forward(random_tensor({2, 1, 32, 40}, -1, 1, 2));
    sd = int8_state_dict(*model, calibration);
  }
  const Json config = model->config_json();
  auto build = [&](const StateDict& w) { return build_recognizer("crnn", config, w, "m8.safetensors"); };
  CHECK_NOTHROW(build(sd));
  StateDict no_scale = sd;
  no_scale.erase("cnn.6.weight.int8_scale");
  CHECK_THROWS_WITH(build(no_scale), Catch::Contains("cnn.6.weight.int8_scale"));
  StateDict no_input = sd;
  no_input.erase("fc.weight.int8_input");
  CHECK_THROWS_WITH(build(no_input), Catch::Contains("fc.weight.int8_input"));
  StateDict bad_code = sd;
  {
    std::vector<int8_t> c = bad_code.at("cnn.9.weight").to_vector<int8_t>();
    c[0] = -128;
    bad_code["cnn.9.weight"] = Tensor::from_vector(c, bad_code.at("cnn.9.weight").shape());
  }
  CHECK_THROWS_WITH(build(bad_code), Catch::Contains("-128"));
  StateDict bad_scale = sd;
  bad_scale["cnn.9.weight.int8_scale"] = Tensor::full({bad_scale.at("cnn.9.weight").size(0)}, -1.f);
  CHECK_THROWS_WITH(build(bad_scale), Catch::Contains("not positive"));
  StateDict stray = sd;
  const int64_t bn = stray.at("cnn.7.weight").numel();
  stray["cnn.7.weight"] = Tensor::from_vector(std::vector<int8_t>((size_t)bn, 1), {bn});
  stray["cnn.7.weight.int8_scale"] = Tensor::ones({bn});
  CHECK_THROWS_WITH(build(stray), Catch::Contains("cnn.7.weight"));
  StateDict half_lstm = sd;
  half_lstm["rnn.weight_ih_l0_reverse"] = dequantize_weight(sd.at("rnn.weight_ih_l0_reverse"), sd.at("rnn.weight_ih_l0_reverse.int8_scale"));
  CHECK_THROWS_WITH(build(half_lstm), Catch::Contains("all or none"));
  StateDict float_input = sd;
  for (const char* n : {"rnn.weight_ih_l0", "rnn.weight_ih_l0_reverse", "rnn.weight_ih_l1", "rnn.weight_ih_l1_reverse"})
    float_input[n] = dequantize_weight(sd.at(n), sd.at(std::string(n) + ".int8_scale"));
  CHECK_THROWS_WITH(build(float_input), Catch::Contains("float32 input weights"));
  CHECK_THROWS_WITH(Tensor::from_vector(std::vector<int8_t>{1, 2, 3}, {3}).clone(),
                    Catch::Contains("quantized weight codes only"));
}

TEST_CASE("ocrt-quantize writes an int8 file a quarter the size that ocrt-infer reads like the float one", "[int8][cli]") {
  TempDir dir("int8-cli");
  const std::string src = OCRT_SOURCE_DIR, out = (dir.path / "crnn-s-int8.safetensors").string();
  std::string said;
  REQUIRE(run_command(program("ocrt-quantize") + " --weights " + src + "/weights/crnn-s-en.safetensors --out " + out +
                          " " + src + "/samples/lines 2>&1",
                      &said) == 0);
  INFO(said);
  CHECK_THAT(said, Catch::Contains("12 calibration lines"));
  const double ratio = (double)std::filesystem::file_size(src + "/weights/crnn-s-en.safetensors") /
                       (double)std::filesystem::file_size(out);
  CHECK(ratio > 3.8);
  std::string text8, textf;
  REQUIRE(run_command(program("ocrt-infer") + " --threads 2 --weights " + out + " " + src + "/samples/lines 2>&1", &text8) == 0);
  REQUIRE(run_command(program("ocrt-infer") + " --threads 2 --weights " + src + "/weights/crnn-s-en.safetensors " + src +
                          "/samples/lines 2>&1",
                      &textf) == 0);
  INFO(text8);
  CHECK_THAT(text8, Catch::Contains("int8 (" + cpu::int8_path_description() + ")"));
  CHECK_THAT(text8, Catch::Contains("Please call"));
  // Refusals: a model that is int8 already, and bf16 with an int8 file.
  CHECK(run_command(program("ocrt-quantize") + " --weights " + out + " --out " + out + ".2 " + src + "/samples/lines 2>&1",
                    &said) == 2);
  CHECK_THAT(said, Catch::Contains("already an int8 model file"));
  CHECK(run_command(program("ocrt-infer") + " --precision bf16 --weights " + out + " " + src + "/samples/lines 2>&1",
                    &said) != 0);
  CHECK_THAT(said, Catch::Contains("bf16"));
  CHECK(help_flags("ocrt-quantize").size() >= 7);
  CHECK(undocumented_flags("ocrt-quantize").empty());
  check_refusals("ocrt-quantize", program("ocrt-quantize"), 2,
                 {{" --out x.safetensors " + src + "/samples/lines", "--weights FILE is required"},
                  {" --weights " + out + " --out y.safetensors", "no calibration lines"},
                  {" --weights " + out + " --out y.safetensors --percentile 20 a.png", "--percentile"},
                  {" --weights /nonexistent.safetensors --out y.safetensors a.png",
                   "safetensors file '/nonexistent.safetensors'"},
                  {" --weights " + src + "/weights/det-en.safetensors --out y.safetensors a.png",
                   "skipped a.png"},
                  {" --weights " + out + " --out /nonexistent-dir/y.safetensors a.png",
                   "--out /nonexistent-dir/y.safetensors: the folder"}});
}

TEST_CASE("ocrt-quantize calibrates a text detector on pages, and ocrt-infer reads a page with it as many words right", "[int8][cli][dbnet]") {
  TempDir dir("int8-det-cli");
  const std::string src = OCRT_SOURCE_DIR, out = (dir.path / "det-int8.safetensors").string();
  std::string said;
  REQUIRE(run_command(program("ocrt-quantize") + " --threads 2 --weights " + src + "/weights/det-en.safetensors --out " +
                          out + " " + src + "/samples/pages 2>&1",
                      &said) == 0);
  INFO(said);
  CHECK_THAT(said, Catch::Contains("1 calibration pages"));
  CHECK_THAT(said, Catch::Contains("prob_head.8.weight"));
  // The BatchNorms and the stem stay float32: a little less than 4x smaller.
  const double ratio = (double)std::filesystem::file_size(src + "/weights/det-en.safetensors") /
                       (double)std::filesystem::file_size(out);
  CHECK(ratio > 3.3);
  // The sample page's words right (crnn-s, to be quick) with the float and the int8 detector.
  const auto words_right = [&](const std::string& det) {
    std::string report;
    REQUIRE(run_command(program("ocrt-infer") + " --threads 2 --weights " + src + "/weights/crnn-s-en.safetensors" +
                            " --det-weights " + det + " --eval " + src + "/samples/pages 2>&1",
                        &report) == 0);
    INFO(report);
    // The summary names the detector and how it computes.
    CHECK_THAT(report, Catch::Contains("ocrt-infer: detector " + det +
                                       (det == out ? " (int8, " + cpu::int8_path_description() + ")"
                                                   : std::string(" (float32)"))));
    const size_t at = report.find("words: ");
    REQUIRE(at != std::string::npos);
    const size_t right = report.find("right ", at);
    REQUIRE(right != std::string::npos);
    return std::stol(report.substr(right + 6));
  };
  const long float_right = words_right(src + "/weights/det-en.safetensors"), int8_right = words_right(out);
  INFO("words right: float detector " << float_right << ", int8 " << int8_right);
  CHECK(float_right > 600);  // of 721
  CHECK(int8_right >= float_right - 7);  // within 1% of the page's words
  // An int8 detector is not quantized again.
  CHECK(run_command(program("ocrt-quantize") + " --weights " + out + " --out " + out + ".2 " + src + "/samples/pages 2>&1",
                    &said) == 2);
  CHECK_THAT(said, Catch::Contains("already an int8 model file"));
}

TEST_CASE("a text detector quantizes: int8 backbone, pyramid and banded head (its folded phase convolutions too) close to the float map", "[int8][dbnet]") {
  Generator gen(21);
  DBNet model(DBNetConfig::preset("dbnet"), gen);
  // BatchNorm statistics and affine maps that are not the identity: the int8 epilogues take
  // them in, and the banded head folds them into its phase convolutions before quantizing.
  {
    NoGradGuard no_grad;
    for (auto& [name, t] : model.named_buffers())
      if (name.find("running_var") != std::string::npos) t.copy_(random_tensor(t.shape(), 0.5f, 2.0f, 31));
      else if (name.find("running_mean") != std::string::npos) t.copy_(random_tensor(t.shape(), -0.2f, 0.2f, 32));
    for (auto& [name, t] : model.named_parameters())
      if (name.find(".1.") != std::string::npos || name.find(".4.") != std::string::npos ||
          name.find("head.5.") != std::string::npos)
        if (t.dim() == 1) t.copy_(random_tensor(t.shape(), 0.5f, 1.5f, 33));
  }
  model.eval();
  // 1184 rows: F has 296 rows, so inference runs the head in 5 bands.
  const Tensor x = random_tensor({1, 1, 1184, 96}, -1, 1, 34);
  StateDict sd;
  Tensor yf;
  {
    Int8Calibration calibration(100);
    calibration.add_model(model);
    NoGradGuard no_grad;
    yf = model.forward(x);  // calibrating: the heads layer by layer, the threshold head too
    sd = int8_state_dict(model, calibration);
  }
  // Every convolution of at least 4 input channels: 8 in the stages, 4 lateral, 4 smoothing,
  // 3 in each head; the stem's (1 channel: the page itself) stays float32.
  int64_t int8_tensors = 0;
  for (const auto& [name, t] : sd) int8_tensors += t.dtype() == DType::i8;
  CHECK(int8_tensors == 22);
  CHECK(sd.at("stem.0.weight").dtype() == DType::f32);
  CHECK(sd.at("prob_head.8.weight").dtype() == DType::i8);
  CHECK(sd.at("thresh_head.4.weight").dtype() == DType::i8);
  auto loaded = build_detector("dbnet", model.config_json(), sd, "det8.safetensors");
  // A damaged file's negative variance would fold into NaN weights: refused when it loads.
  StateDict damaged = sd;
  damaged["prob_head.5.running_var"] = Tensor::full({16}, -1.0f);
  CHECK_THROWS_WITH(build_detector("dbnet", model.config_json(), damaged, "bad.safetensors"),
                    Catch::Contains("prob_head.5.running_var holds a negative variance"));
  NoGradGuard no_grad;
  const Tensor y8 = loaded->forward(x);  // banded, in int8
  REQUIRE(y8.shape() == yf.shape());
  const auto [worst, scale] = worst_difference(y8.to_vector<float>(), yf.to_vector<float>());
  INFO("worst |int8 - float| " << worst << " of logits up to " << scale);
  CHECK(worst > 0);
  CHECK(worst < 0.1 * scale);
}

TEST_CASE("svtr-lite quantizes too: its convolutions and linear layers in int8, close to the float model", "[int8]") {
  Generator gen(9);
  auto model = make_recognizer("svtr-lite", 11, gen);
  model->eval();
  const Tensor x = random_tensor({2, 1, 32, 64}, -1, 1, 4);
  StateDict sd;
  Tensor yf;
  {
    Int8Calibration calibration(100);
    calibration.add_model(*model);
    NoGradGuard no_grad;
    yf = model->forward(x);
    sd = int8_state_dict(*model, calibration);
  }
  int64_t int8_tensors = 0;
  for (const auto& [name, t] : sd) int8_tensors += t.dtype() == DType::i8;
  CHECK(int8_tensors >= 20);
  auto loaded = build_recognizer("svtr-lite", model->config_json(), sd, "svtr8.safetensors");
  NoGradGuard no_grad;
  const auto a = loaded->forward(x).to_vector<float>(), b = yf.to_vector<float>();
  const auto [worst, scale] = worst_difference(a, b);
  INFO("worst |int8 - float| " << worst << " of logits up to " << scale);
  CHECK(worst > 0);
  CHECK(worst < 0.1 * scale);
}
