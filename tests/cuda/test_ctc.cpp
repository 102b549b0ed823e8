// CPU-vs-CUDA parity for the CTC loss (ops/cuda/ctc.cu against ops/cpu/ctc.cpp) and for greedy
// decoding of scores that live on a GPU (models/ctc_decode.cpp). See parity.h for the method:
// fresh seeds, poisoned GPU buffers (so a gradient element the kernel never writes fails), and
// relative errors. Both sides run alpha and beta in double, so the elementwise tolerance holds
// even for T = 1200 and logits of +-100.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "models/ctc_decode.h"
#include "ops/ctc.h"
#include "ops/reduce.h"
#include "parity.h"

using namespace ocrt;
using namespace ocrt::parity;

namespace {

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

CTCLossOptions with(Reduction r, bool zero_infinity = false, int64_t blank = 0) {
  CTCLossOptions o;
  o.reduction = r, o.zero_infinity = zero_infinity, o.blank = blank;
  return o;
}

const char* reduction_name(Reduction r) {
  return r == Reduction::none ? "none" : r == Reduction::sum ? "sum" : "mean";
}

// A batch of samples: frames per sample and each sample's labels, as padded (N, S) or
// concatenated 1-D int64 targets.
struct Batch {
  int64_t T, C;
  std::vector<int64_t> input_lengths;
  std::vector<std::vector<int64_t>> labels;

  int64_t N() const { return (int64_t)labels.size(); }
  std::vector<int64_t> target_lengths() const {
    std::vector<int64_t> out;
    for (const auto& l : labels) out.push_back((int64_t)l.size());
    return out;
  }
  // Padding is the blank of the default options (0); the front-end reads only each row's length.
  Tensor padded() const {
    int64_t S = 1;
    for (const auto& l : labels) S = std::max<int64_t>(S, (int64_t)l.size());
    std::vector<int64_t> v((size_t)(N() * S), 0);
    for (int64_t n = 0; n < N(); ++n)
      for (size_t k = 0; k < labels[(size_t)n].size(); ++k) v[(size_t)(n * S) + k] = labels[(size_t)n][k];
    return Tensor::from_vector(v, {N(), S});
  }
  Tensor concatenated() const {
    std::vector<int64_t> v;
    for (const auto& l : labels) v.insert(v.end(), l.begin(), l.end());
    return Tensor::from_vector(v, {(int64_t)v.size()});
  }
};

// The awkward cases side by side, blank 0: an ordinary target, an adjacent repeat (needs a
// blank between), an empty target, an infeasible one ("555" needs 5 frames, it has 4),
// non-adjacent repeats, zero frames with an empty target, and input lengths below T.
Batch mixed_batch() {
  return Batch{14, 7, {14, 9, 14, 4, 11, 0}, {{1, 2, 3}, {4, 4, 2, 4}, {}, {5, 5, 5}, {6, 1, 6, 1, 6}, {}}};
}

// n labels in [0, C) other than `blank`, drawn from rng (repeats happen, adjacent ones too).
std::vector<int64_t> random_labels(std::mt19937_64& rng, int64_t n, int64_t C, int64_t blank) {
  std::uniform_int_distribution<int64_t> pick(0, C - 2);
  std::vector<int64_t> out;
  for (int64_t k = 0; k < n; ++k) {
    int64_t c = pick(rng);
    out.push_back(c >= blank ? c + 1 : c);
  }
  return out;
}

// Parity of ctc_loss (from log-probabilities) or ctc_loss_from_logits, loss and gradient.
void check_ctc(ParityEnv& env, const std::string& name, const Tensor& scores, const Tensor& targets, const Batch& b,
               const CTCLossOptions& opt, bool from_logits) {
  const std::vector<int64_t> il = b.input_lengths, tl = b.target_lengths();
  const std::string full = name + (from_logits ? " (from logits)" : "") + ", reduction " +
                           reduction_name(opt.reduction) + (opt.zero_infinity ? ", zero_infinity" : "");
  check_op(env, full, {scores, targets},
           [&](const std::vector<Tensor>& in) {
             return std::vector<Tensor>{from_logits ? ctc_loss_from_logits(in[0], in[1], il, tl, opt)
                                                    : ctc_loss(in[0], in[1], il, tl, opt)};
           },
           kTolElementwise);
}

}  // namespace

TEST_CASE("ctc_loss: every reduction, zero_infinity on and off, padded targets", "[cuda]") {
  ParityEnv env;
  const Batch b = mixed_batch();
  const Tensor lp = log_softmax(env.uniform({b.T, b.N(), b.C}, -3, 3), 2);
  for (Reduction r : {Reduction::none, Reduction::sum, Reduction::mean})
    for (bool zero_inf : {false, true}) check_ctc(env, "mixed batch", lp, b.padded(), b, with(r, zero_inf), false);
}

TEST_CASE("ctc_loss_from_logits: every reduction, zero_infinity, concatenated int64 and int32 targets", "[cuda]") {
  ParityEnv env;
  const Batch b = mixed_batch();
  const Tensor z = env.uniform({b.T, b.N(), b.C}, -4, 4);
  for (Reduction r : {Reduction::none, Reduction::sum, Reduction::mean})
    for (bool zero_inf : {false, true}) check_ctc(env, "mixed batch", z, b.concatenated(), b, with(r, zero_inf), true);
  check_ctc(env, "int32 targets", z, b.concatenated().to(DType::i32), b, with(Reduction::mean), true);
}

TEST_CASE("ctc_loss in float64, blank = C - 1, concatenated targets", "[cuda]") {
  ParityEnv env;
  const int64_t C = 6, blank = C - 1;
  const Batch b{10, C, {10, 7, 10, 2}, {{0, 0, 1}, {3, 2, 3}, {}, {4, 4}}};  // the last needs 3 frames
  const Tensor z = env.uniform({b.T, b.N(), C}, -3, 3, DType::f64);
  for (Reduction r : {Reduction::none, Reduction::sum, Reduction::mean}) {
    check_ctc(env, "f64 blank last", log_softmax(z, 2), b.concatenated(), b, with(r, false, blank), false);
    check_ctc(env, "f64 blank last", z, b.padded(), b, with(r, true, blank), true);
  }
}

TEST_CASE("an infeasible target: +inf on both devices and a zero gradient", "[cuda]") {
  ParityEnv env;
  const Batch b = mixed_batch();  // sample 3 cannot be aligned
  const Tensor lp = log_softmax(env.uniform({b.T, b.N(), b.C}, -3, 3), 2);
  for (bool zero_inf : {false, true}) {
    INFO("zero_infinity " << zero_inf << ", seed " << env.seed);
    std::vector<Tensor> losses, grads;
    for (Device dev : {Device::cpu(), kGpu}) {
      Tensor x = lp.detach().to(dev).clone();
      x.set_requires_grad(true);
      Tensor loss = ctc_loss(x, b.padded().to(dev), b.input_lengths, b.target_lengths(), with(Reduction::none, zero_inf));
      loss.backward(Tensor::ones({b.N()}, loss.dtype(), dev));
      losses.push_back(loss);
      grads.push_back(x.grad());
    }
    const double inf_loss = losses[1].to(Device::cpu()).to_vector<double>()[3];
    if (zero_inf) CHECK(inf_loss == 0.0);
    else CHECK((std::isinf(inf_loss) && inf_loss > 0));
    for (double g : grads[1].narrow(1, 3, 1).to(Device::cpu()).to_vector<double>()) REQUIRE(g == 0.0);
    expect_close(losses[0], losses[1], kTolElementwise, "losses", env.seed);
    expect_close(grads[0], grads[1], kTolElementwise, "gradient", env.seed);
  }
}

TEST_CASE("edge shapes: T = 1, empty targets, one sample", "[cuda]") {
  ParityEnv env;
  const Batch tiny{1, 4, {1, 1, 1}, {{}, {2}, {1, 2}}};  // {1, 2} needs 2 frames
  check_ctc(env, "T = 1", env.uniform({1, 3, 4}, -2, 2), tiny.padded(), tiny, with(Reduction::none), true);
  const Batch one{6, 3, {6}, {{}}};
  check_ctc(env, "one sample, empty target", env.uniform({6, 1, 3}, -2, 2), one.concatenated(), one,
            with(Reduction::mean), true);
}

TEST_CASE("a long input: T = 1200, C = 97, targets longer than a block's threads", "[cuda]") {
  // 2L+1 = 401 positions for the longest target: more than one pass of the block's threads.
  ParityEnv env;
  std::mt19937_64 rng(env.seed);
  const int64_t T = 1200, C = 97;
  const Batch b{T, C, {T, 1000, 700}, {random_labels(rng, 150, C, 0), random_labels(rng, 200, C, 0), random_labels(rng, 60, C, 0)}};
  check_ctc(env, "T = 1200", env.uniform({T, b.N(), C}, -3, 3), b.padded(), b, with(Reduction::mean), true);
  check_ctc(env, "T = 1200 f64", log_softmax(env.uniform({T, b.N(), C}, -3, 3, DType::f64), 2), b.concatenated(), b,
            with(Reduction::sum), false);
}

TEST_CASE("extreme logits (scale 100) stay finite and agree", "[cuda]") {
  ParityEnv env;
  std::mt19937_64 rng(env.seed);
  const int64_t T = 300, C = 20;
  const Batch b{T, C, {T, 200}, {random_labels(rng, 40, C, 0), random_labels(rng, 60, C, 0)}};
  // float64 logits through the fused path; float32 log-probabilities made once on the CPU, so
  // both devices start from the same values and only the CTC kernels are compared.
  check_ctc(env, "logits x100", env.uniform({T, b.N(), C}, -100, 100, DType::f64), b.padded(), b,
            with(Reduction::mean), true);
  const Tensor lp = log_softmax(env.uniform({T, b.N(), C}, -100, 100), 2);
  check_ctc(env, "log-probs x100", lp, b.padded(), b, with(Reduction::none), false);
  Tensor x = lp.to(kGpu);
  x.set_requires_grad(true);
  Tensor loss = ctc_loss(x, b.padded().to(kGpu), b.input_lengths, b.target_lengths(), with(Reduction::sum));
  REQUIRE(std::isfinite(loss.item()));
  loss.backward();
  for (double g : x.grad().to(Device::cpu()).to_vector<double>()) REQUIRE(std::isfinite(g));
}

TEST_CASE("a path at e^-1000 is handled exactly (log space) on the GPU", "[cuda]") {
  // The case of tests/ops/test_ctc.cpp: the label's class has log-probability -1000 at each of
  // three frames, so p(label) = 3 e^-1000 and class 1 gets a third of the paths at each frame.
  ParityEnv env;
  std::vector<double> v;
  for (int t = 0; t < 3; ++t) {
    const double lp1 = -1000.0, lp2 = -5.0;
    v.insert(v.end(), {std::log(1 - std::exp(lp2)), lp1, lp2});
  }
  const Batch b{3, 3, {3}, {{1}}};
  const Tensor lp = Tensor::from_vector(v, {3, 1, 3});
  check_ctc(env, "e^-1000", lp, b.concatenated(), b, with(Reduction::sum), false);
  Tensor x = lp.to(kGpu);
  x.set_requires_grad(true);
  ctc_loss(x, b.concatenated().to(kGpu), {3}, {1}, with(Reduction::sum)).backward();
  const auto g = x.grad().to(Device::cpu()).to_vector<double>();
  for (int t = 0; t < 3; ++t) CHECK(g[(size_t)(t * 3 + 1)] == Approx(-1.0 / 3).epsilon(1e-9));
}

TEST_CASE("greedy decoding of GPU scores equals decoding them on the CPU", "[cuda]") {
  ParityEnv env;
  std::mt19937_64 rng(env.seed);
  const int64_t T = 50, N = 4, C = 12;
  for (DType dt : {DType::f32, DType::f64})
    for (int64_t blank : {int64_t(0), C - 1}) {
      // Each frame has a dominant class, the blank half of the time, so the paths have runs,
      // repeats across blanks and empty stretches, as a trained model's output.
      std::vector<double> z = env.uniform({T, N, C}, -2, 2, DType::f64).to_vector<double>();
      std::uniform_int_distribution<int64_t> cls(0, C - 1);
      std::bernoulli_distribution coin(0.5);
      for (int64_t tn = 0; tn < T * N; ++tn) z[(size_t)(tn * C + (coin(rng) ? blank : cls(rng)))] += 4;
      // Ties: a constant frame (class 0 wins) and two equal maxima (the lower class wins).
      for (int64_t c = 0; c < C; ++c) z[(size_t)(5 * N * C + c)] = 1.0;
      z[(size_t)(7 * N * C + 3)] = z[(size_t)(7 * N * C + 8)] = 10.0;
      const Tensor scores = Tensor::from_vector(z, {T, N, C}).to(dt);
      const std::vector<int64_t> lengths{T, 37, 0, 12};
      const auto ref = nn::ctc_greedy_decode(scores, lengths, blank);
      const auto got = nn::ctc_greedy_decode(scores.to(kGpu), lengths, blank);
      REQUIRE(got.size() == ref.size());
      for (size_t n = 0; n < ref.size(); ++n) {
        INFO("dtype " << dtype_name(dt) << ", blank " << blank << ", sample " << n << ", seed " << env.seed);
        CHECK(got[n].labels == ref[n].labels);
        CHECK(got[n].frames == ref[n].frames);
        CHECK(got[n].log_prob == Approx(ref[n].log_prob).epsilon(1e-9));
        CHECK(got[n].confidence == Approx(ref[n].confidence).epsilon(1e-9));
      }
    }
}
