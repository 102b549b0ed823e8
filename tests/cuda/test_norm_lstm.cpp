// CPU-vs-CUDA parity of the norm and LSTM families (ops/cuda/norm.cu, ops/cuda/lstm.cu), with the
// CPU kernels as the oracle (tests/cuda/parity.h). Through the front-ends: batch_norm in
// training (including the in-place running-statistics update) and eval mode, layer_norm over
// one and two trailing dims, and the whole lstm() (1 and 2 layers, bidirectional, initial
// state, variable lengths, the CRNN shape), comparing outputs and every input gradient. Then
// the kernels called directly, for what the front-ends never show: gradients that are not
// wanted, gate inputs with a wider row stride, and the inactive rows' act and dh_carry (which
// only feed other kernels there).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/reduce.h"
#include "ops/lstm.h"
#include "twin_comm.h"
// After the ops headers: parity.h calls sum and mul without including their headers.
#include "cuda/parity.h"

using namespace ocrt;
using parity::kGpu;

namespace {

// float64 cases: the CPU and GPU differ only in summation order (and cuBLAS's for the LSTM),
// so a much tighter bound than float32's; it catches a kernel that quietly rounds to float.
constexpr double kTolF64 = 1e-10;

double tol_norm(DType dt) { return dt == DType::f64 ? kTolF64 : parity::kTolElementwise; }

// ---------------------------------------------------------------------------- batch norm

struct BnCase {
  Shape shape;               // (N, C, ...)
  bool affine = true;        // weight and bias
  bool training = true;
  bool running = true;       // running_mean / running_var given (required in eval)
  DType dtype = DType::f32;
  double shift = 0;          // added to x: a mean far from 0 tests the two-pass variance
};

// batch_norm on CPU and GPU copies; the running statistics, updated in place by a training
// call, are part of the result and compared after it.
void bn_parity(const std::string& name, const BnCase& k) {
  parity::ParityEnv env;
  const int64_t C = k.shape[1];
  std::vector<Tensor> inputs{add(env.uniform(k.shape, -2, 2, k.dtype), k.shift)};
  if (k.affine) {
    inputs.push_back(env.uniform({C}, 0.5, 1.5, k.dtype));
    inputs.push_back(env.uniform({C}, -0.5, 0.5, k.dtype));
  }
  const Tensor rm = env.uniform({C}, -0.5, 0.5, k.dtype), rv = env.uniform({C}, 0.5, 1.5, k.dtype);
  Tensor rm_cpu = rm.clone(), rv_cpu = rv.clone(), rm_gpu = rm.to(kGpu), rv_gpu = rv.to(kGpu);
  parity::check_op(env, name, inputs, [&](const std::vector<Tensor>& in) {
    const bool gpu = in[0].device() == kGpu;
    const Tensor rmean = k.running ? (gpu ? rm_gpu : rm_cpu) : Tensor();
    const Tensor rvar = k.running ? (gpu ? rv_gpu : rv_cpu) : Tensor();
    return std::vector<Tensor>{batch_norm(in[0], rmean, rvar, k.affine ? in[1] : Tensor(),
                                          k.affine ? in[2] : Tensor(), k.training, /*momentum=*/0.3)};
  }, tol_norm(k.dtype));
  if (!k.running) return;
  parity::expect_close(rm_cpu, rm_gpu, tol_norm(k.dtype), name + ": running_mean after the call", env.seed);
  parity::expect_close(rv_cpu, rv_gpu, tol_norm(k.dtype), name + ": running_var after the call", env.seed);
}

// ---------------------------------------------------------------------------- layer norm

void ln_parity(const std::string& name, const Shape& shape, const Shape& normalized, bool weight, bool bias,
               DType dt = DType::f32) {
  parity::ParityEnv env;
  std::vector<Tensor> inputs{add(env.uniform(shape, -2, 2, dt), 0.5)};
  if (weight) inputs.push_back(env.uniform(normalized, 0.5, 1.5, dt));
  if (bias) inputs.push_back(env.uniform(normalized, -0.5, 0.5, dt));
  parity::check_op(env, name, inputs, [&](const std::vector<Tensor>& in) {
    const Tensor w = weight ? in[1] : Tensor(), b = bias ? in[weight ? 2 : 1] : Tensor();
    return std::vector<Tensor>{layer_norm(in[0], normalized, w, b)};
  }, tol_norm(dt));
}

// ---------------------------------------------------------------------------- lstm

struct LstmCase {
  int64_t T, N, I, H;
  LSTMOptions opt;
  bool with_state = false;       // h0 and c0 given (and their gradients checked)
  std::vector<int64_t> lengths = {};  // empty: all T
  DType dtype = DType::f32;
};

// lstm() on CPU and GPU copies: output, h_n, c_n, and the gradients of x, h0, c0 and every weight.
void lstm_parity(const std::string& name, const LstmCase& k) {
  parity::ParityEnv env;
  const int64_t dirs = k.opt.bidirectional ? 2 : 1, L = k.opt.num_layers, H = k.H;
  const double bound = 1 / std::sqrt((double)H);  // torch.nn.LSTM's initialisation range
  std::vector<Tensor> inputs{env.uniform({k.T, k.N, k.I}, -1, 1, k.dtype)};
  if (k.with_state) {
    inputs.push_back(env.uniform({L * dirs, k.N, H}, -1, 1, k.dtype));
    inputs.push_back(env.uniform({L * dirs, k.N, H}, -1, 1, k.dtype));
  }
  const size_t first_weight = inputs.size();
  for (int64_t l = 0; l < L; ++l)
    for (int64_t d = 0; d < dirs; ++d) {
      inputs.push_back(env.uniform({4 * H, l == 0 ? k.I : dirs * H}, -bound, bound, k.dtype));
      inputs.push_back(env.uniform({4 * H, H}, -bound, bound, k.dtype));
      if (k.opt.has_biases) {
        inputs.push_back(env.uniform({4 * H}, -bound, bound, k.dtype));
        inputs.push_back(env.uniform({4 * H}, -bound, bound, k.dtype));
      }
    }
  parity::check_op(env, name, inputs, [&](const std::vector<Tensor>& in) {
    const std::vector<Tensor> w(in.begin() + (std::ptrdiff_t)first_weight, in.end());
    const LSTMOutput r = lstm(in[0], w, k.opt, k.with_state ? in[1] : Tensor(), k.with_state ? in[2] : Tensor(),
                              k.lengths);
    return std::vector<Tensor>{r.output, r.h_n, r.c_n};
  }, k.dtype == DType::f64 ? kTolF64 : parity::kTolGemm);
}

// Runs `run(device)` on the CPU and on the GPU: it builds its arguments on that device, calls
// one kernel of that device's table, and returns the outputs to compare (in `what` order).
void compare_kernel_outputs(parity::ParityEnv& env, const std::string& name, const std::vector<std::string>& what,
                            const std::function<std::vector<Tensor>(Device)>& run, double tol) {
  const std::vector<Tensor> ref = run(Device::cpu()), got = run(kGpu);
  REQUIRE(ref.size() == what.size());
  REQUIRE(got.size() == what.size());
  for (size_t i = 0; i < ref.size(); ++i) parity::expect_close(ref[i], got[i], tol, name + ": " + what[i], env.seed);
}

}  // namespace

TEST_CASE("cuda sync_batch_norm over twin replicas matches batch_norm on the CPU", "[cuda]") {
  for (DType dt : {DType::f32, DType::f64}) {
    parity::ParityEnv env;
    ocrt::testing::TwinCommunicator twin;  // sync over the batch twice over = plain batch_norm
    std::vector<Tensor> inputs{add(env.uniform({4, 6, 5, 7}, -2, 2, dt), 3.0), env.uniform({6}, 0.5, 1.5, dt),
                               env.uniform({6}, -0.5, 0.5, dt)};
    parity::check_op(env, dt == DType::f32 ? "sync bn twin f32" : "sync bn twin f64", inputs,
                     [&](const std::vector<Tensor>& in) {
                       if (in[0].device() == kGpu)
                         return std::vector<Tensor>{sync_batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], twin)};
                       return std::vector<Tensor>{batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true)};
                     }, tol_norm(dt));
  }
}

TEST_CASE("cuda batch_norm in training mode matches the CPU, running statistics included", "[cuda]") {
  SECTION("(N,C,H,W) with weight and bias") { bn_parity("bn train NCHW", {{4, 6, 5, 7}}); }
  SECTION("(N,C)") { bn_parity("bn train NC", {{16, 10}}); }
  SECTION("without affine") { bn_parity("bn train no affine", {{3, 5, 4, 4}, false}); }
  SECTION("without running statistics") { bn_parity("bn train no running", {{8, 4, 6, 6}, true, true, false}); }
  SECTION("many values per channel (each thread sums many)") { bn_parity("bn train large", {{2, 3, 100, 90}}); }
  SECTION("mean far from zero") {
    bn_parity("bn train shifted", {{4, 3, 8, 8}, true, true, true, DType::f32, 10.0});
  }
  SECTION("float64") { bn_parity("bn train f64", {{4, 3, 5, 5}, true, true, true, DType::f64}); }
}

TEST_CASE("cuda batch_norm in eval mode matches the CPU", "[cuda]") {
  SECTION("(N,C,H,W) with weight and bias") { bn_parity("bn eval NCHW", {{4, 6, 5, 7}, true, false}); }
  SECTION("(N,C)") { bn_parity("bn eval NC", {{16, 10}, true, false}); }
  SECTION("without affine") { bn_parity("bn eval no affine", {{3, 5, 4, 4}, false, false}); }
  SECTION("float64") { bn_parity("bn eval f64", {{4, 3, 5, 5}, true, false, true, DType::f64}); }
}

TEST_CASE("cuda layer_norm matches the CPU", "[cuda]") {
  SECTION("last dim") { ln_parity("ln last dim", {4, 10, 64}, {64}, true, true); }
  SECTION("last two dims") { ln_parity("ln two dims", {6, 5, 4, 8}, {4, 8}, true, true); }
  SECTION("without weight and bias") { ln_parity("ln no affine", {3, 7, 7}, {7}, false, false); }
  SECTION("weight only") { ln_parity("ln weight only", {5, 33}, {33}, true, false); }
  SECTION("bias only") { ln_parity("ln bias only", {5, 33}, {33}, false, true); }
  SECTION("wide rows (threads stride each row)") { ln_parity("ln wide", {12, 1000}, {1000}, true, true); }
  SECTION("many rows (several chunks in the weight/bias reduction)") {
    ln_parity("ln many rows", {2048, 48}, {48}, true, true);
  }
  SECTION("one row") { ln_parity("ln one row", {1, 16}, {16}, true, true); }
  SECTION("float64, last dim") { ln_parity("ln f64", {4, 10, 64}, {64}, true, true, DType::f64); }
  SECTION("float64, last two dims, no affine") {
    ln_parity("ln f64 two dims", {6, 5, 4, 8}, {4, 8}, false, false, DType::f64);
  }
}

TEST_CASE("cuda lstm matches the CPU: outputs, final states and every gradient", "[cuda]") {
  SECTION("1 layer") { lstm_parity("lstm 1 layer", {5, 3, 4, 8, {1, false, true}}); }
  SECTION("1 layer with h0, c0") { lstm_parity("lstm 1 layer state", {5, 3, 4, 8, {1, false, true}, true}); }
  SECTION("1 layer without biases") { lstm_parity("lstm no biases", {5, 3, 4, 8, {1, false, false}}); }
  SECTION("bidirectional") { lstm_parity("lstm bidir", {6, 4, 5, 7, {1, true, true}}); }
  SECTION("2 layers bidirectional with h0, c0") {
    lstm_parity("lstm 2 layers bidir state", {6, 3, 5, 8, {2, true, true}, true});
  }
  SECTION("2 layers unidirectional, lengths {T, 3, 1}") {
    lstm_parity("lstm 2 layers lengths", {6, 3, 5, 8, {2, false, true}, false, {6, 3, 1}});
  }
  SECTION("2 layers bidirectional with h0, c0, lengths {T, 3, 1}") {
    lstm_parity("lstm 2 layers bidir state lengths", {6, 3, 5, 8, {2, true, true}, true, {6, 3, 1}});
  }
  SECTION("T = 1") { lstm_parity("lstm T=1", {1, 2, 3, 4, {2, true, true}, true}); }
  SECTION("float64, 2 layers bidirectional with h0, c0, lengths") {
    lstm_parity("lstm f64", {4, 3, 5, 6, {2, true, true}, true, {4, 3, 1}, DType::f64});
  }
}

TEST_CASE("cuda lstm matches the CPU at the CRNN shape", "[cuda]") {
  SECTION("T=26 N=8 I=512 H=256, 2 layers bidirectional, variable lengths") {
    lstm_parity("lstm crnn 512x256", {26, 8, 512, 256, {2, true, true}, false, {26, 20, 26, 13, 1, 26, 7, 25}});
  }
  SECTION("T=26 N=8 I=256 H=64, 1 layer bidirectional with h0, c0") {
    lstm_parity("lstm crnn 256x64", {26, 8, 256, 64, {1, true, true}, true});
  }
}

TEST_CASE("cuda lstm_cell kernels match the CPU on every output, strided views and inactive rows included",
          "[cuda]") {
  parity::ParityEnv env;
  const int64_t N = 5, H = 37;
  const DType f32 = DType::f32;
  // gates_x as a column block of a wider tensor (row stride 5H, not 4H), with a few saturated
  // pre-activations: the sigmoid must give 0 or 1 there, never NaN.
  Tensor gx_wide = env.uniform({N, 5 * H}, -4, 4);
  gx_wide.select(0, 0).narrow(0, H, 3).fill_(-100);      // i gate, units 0..2
  gx_wide.select(0, 2).narrow(0, 2 * H + 4, 3).fill_(100);  // f gate, units 4..6
  gx_wide.select(0, 3).narrow(0, 4 * H, 2).fill_(-100);  // o gate, units 0..1
  const Tensor gh = env.uniform({N, 4 * H}, -2, 2), h_prev = env.uniform({N, H}), c_prev = env.uniform({N, H}, -2, 2);
  const Tensor active = Tensor::from_vector(std::vector<uint8_t>{1, 0, 1, 1, 0}, {N});

  // Forward: act, h, c, and out as the middle block of an (N, 3H) tensor (row stride 3H).
  auto forward = [&](Device dev) {
    std::vector<Tensor> r{Tensor::empty({N, 4 * H}, f32, dev), Tensor::empty({N, H}, f32, dev),
                          Tensor::empty({N, H}, f32, dev), Tensor::empty({N, 3 * H}, f32, dev).narrow(1, H, H)};
    kernel(dev, &LayerBackend::lstm_cell, "lstm")(gx_wide.to(dev).narrow(1, H, 4 * H), gh.to(dev), h_prev.to(dev),
                                             c_prev.to(dev), active.to(dev), r[0], r[1], r[2], r[3]);
    return r;
  };
  compare_kernel_outputs(env, "lstm_cell", {"act", "h", "c", "out"}, forward, parity::kTolElementwise);

  // Backward from the CPU forward's saved act and c, dout a column block of an (N, 2H) tensor.
  const std::vector<Tensor> saved = forward(Device::cpu());
  const Tensor dh = env.uniform({N, H}), dc = env.uniform({N, H}), dout_wide = env.uniform({N, 2 * H});
  const Tensor dh_more = env.uniform({N, H});
  // Without and with dh_more (the carry of the step before, added to dh in the kernel).
  for (const bool more : {false, true}) {
    INFO("dh_more " << (more ? "given" : "undefined"));
    auto backward = [&](Device dev) {
      std::vector<Tensor> r{Tensor::empty({N, 4 * H}, f32, dev), Tensor::empty({N, H}, f32, dev),
                            Tensor::empty({N, H}, f32, dev)};
      kernel(dev, &LayerBackend::lstm_cell_backward, "lstm backward")(
          saved[0].to(dev), c_prev.to(dev), saved[2].to(dev), dh.to(dev), more ? dh_more.to(dev) : Tensor(),
          dout_wide.to(dev).narrow(1, H, H), dc.to(dev), active.to(dev), r[0], r[1], r[2]);
      return r;
    };
    compare_kernel_outputs(env, "lstm_cell_backward", {"dgates", "dc_prev", "dh_carry"}, backward,
                           parity::kTolElementwise);
  }
}

TEST_CASE("cuda norm backward kernels write exactly the gradients asked for", "[cuda]") {
  parity::ParityEnv env;
  const DType f32 = DType::f32;

  // batch_norm_backward on x (N,C,S) with given statistics: each subset of outputs in turn.
  const int64_t N = 3, C = 4, S = 50;
  const Tensor x = env.uniform({N, C, S}, -2, 2), dy = env.uniform({N, C, S}), mean = env.uniform({C}, -0.5, 0.5);
  const Tensor invstd = env.uniform({C}, 0.5, 2), weight = env.uniform({C}, 0.5, 1.5);
  struct Want {
    bool dx, dw, db, training;
    const char* name;
  };
  for (const Want& want : {Want{false, true, false, true, "batch_norm_backward dweight only"},
                           Want{false, false, true, false, "batch_norm_backward dbias only"},
                           Want{true, false, false, true, "batch_norm_backward dx only (training)"},
                           Want{true, false, false, false, "batch_norm_backward dx only (eval)"}}) {
    std::vector<std::string> what;
    if (want.dx) what.push_back("dx");
    if (want.dw) what.push_back("dweight");
    if (want.db) what.push_back("dbias");
    compare_kernel_outputs(env, want.name, what, [&](Device dev) {
      const Tensor dx = want.dx ? Tensor::empty({N, C, S}, f32, dev) : Tensor();
      const Tensor dw = want.dw ? Tensor::empty({C}, f32, dev) : Tensor();
      const Tensor db = want.db ? Tensor::empty({C}, f32, dev) : Tensor();
      kernel(dev, &LayerBackend::batch_norm_backward, "batch_norm backward")(
          x.to(dev), dy.to(dev), mean.to(dev), invstd.to(dev), weight.to(dev), want.training, dx, dw, db);
      std::vector<Tensor> r;
      for (const Tensor& t : {dx, dw, db})
        if (t.defined()) r.push_back(t);
      return r;
    }, parity::kTolElementwise);
  }

  // layer_norm_backward on x (M,D) (300 rows: five chunks in the weight/bias reduction).
  const int64_t M = 300, D = 70;
  const Tensor lx = env.uniform({M, D}, -2, 2), ldy = env.uniform({M, D}), lmean = env.uniform({M}, -0.5, 0.5);
  const Tensor lrstd = env.uniform({M}, 0.5, 2), lweight = env.uniform({D}, 0.5, 1.5);
  for (const Want& want : {Want{false, true, false, true, "layer_norm_backward dweight only"},
                           Want{false, false, true, true, "layer_norm_backward dbias only"},
                           Want{true, false, false, true, "layer_norm_backward dx only"}}) {
    std::vector<std::string> what;
    if (want.dx) what.push_back("dx");
    if (want.dw) what.push_back("dweight");
    if (want.db) what.push_back("dbias");
    compare_kernel_outputs(env, want.name, what, [&](Device dev) {
      const Tensor dx = want.dx ? Tensor::empty({M, D}, f32, dev) : Tensor();
      const Tensor dw = want.dw ? Tensor::empty({D}, f32, dev) : Tensor();
      const Tensor db = want.db ? Tensor::empty({D}, f32, dev) : Tensor();
      kernel(dev, &LayerBackend::layer_norm_backward, "layer_norm backward")(
          lx.to(dev), ldy.to(dev), lmean.to(dev), lrstd.to(dev), lweight.to(dev), dx, dw, db);
      std::vector<Tensor> r;
      for (const Tensor& t : {dx, dw, db})
        if (t.defined()) r.push_back(t);
      return r;
    }, parity::kTolElementwise);
  }
}
