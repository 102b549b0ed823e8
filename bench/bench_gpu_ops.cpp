// GPU time of the OCR operators at the shapes of CRNN (the `crnn` preset of docs/models.md on 32 x 100
// lines) and SVTR-lite (SVTR-Tiny's stages on the same lines: 8x25, 4x25, 2x25 token grids),
// at batch 256, plus one whole CRNN training step. bench/torch_gpu_ops.py runs the same cases
// with PyTorch on the same GPU; its --compare prints the two side by side (bench/README.md).
//
//   bench_gpu_ops --device cuda:N [--batch B] [--reps R] [--case-seconds S] [--only SUBSTRING]
//                 [--json FILE] [--gemm N] [--copy-mib M]
//
// Each case is timed as "fwd" (the op under NoGradGuard, as inference runs it) and, where the
// op is trained, "fwd+bwd" (forward, then backward from a fixed random upstream gradient, with
// the leaves' .grad dropped before each repetition so no accumulation is timed). Every
// repetition is bracketed by cuda_synchronize, so a time is the GPU work plus the host's
// launch and autograd overhead, as a training loop sees it. 3 warm-ups, then R repetitions
// (fewer when a case would take more than --case-seconds); the median is reported.
//
// Efficiency: compute-bound cases report GFLOP/s (2 x multiply-adds of the convolutions,
// GEMMs and LSTM gates; a backward costs two forwards: one GEMM for the input's gradient, one
// for the weights'), measured against this run's own SGEMM rate (an --gemm^3 float32 matmul:
// cuBLAS, TF32 off). Memory-bound cases report GB/s of the bytes that must move (each input read
// once, each output written once; saved indices and statistics not counted), measured against
// this run's own copy rate (Tensor::clone() of --copy-mib MiB: bytes read + bytes written).
//
// Kernels are being written family by family: an op the CUDA backend lacks shows as
// "n/a (<the error>)" and the run goes on.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/crnn.h"
#include "ops/attention.h"
#include "ops/conv.h"
#include "ops/ctc.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/norm.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/lstm.h"
#include "runtime/autograd.h"
#include "runtime/cuda/cuda_glue.h"
#include "runtime/json.h"

using namespace ocrt;

namespace {

constexpr int kWarmup = 3;
constexpr int64_t kClasses = 97;  // blank + the 96-character charset of the brief's CRNN
constexpr int64_t kFrames = 26;   // T = W/4 + 1 for W = 100

// What a case prepares: its timed steps and the work one run of each does.
struct Prepared {
  std::function<void()> fwd, train;  // train empty: nothing to train (not used so far)
  double fwd_work = 0, train_work = 0;  // FLOPs, or bytes when memory_bound
  bool memory_bound = false;
};

struct Case {
  std::string name, shape;
  std::function<Prepared()> make;  // allocates inputs on the GPU; may throw (op missing)
};

struct Row {
  std::string name, shape, mode;
  bool ok = false;
  std::string reason;  // why not ok
  double median = 0, min = 0, max = 0;
  int reps = 0;
  double work = 0;  // FLOPs or bytes per run
  bool memory_bound = false;
  double rate = 0;       // GFLOP/s or GB/s
  double fraction = -1;  // of this run's ceiling; < 0: no ceiling measured
  double peak_mib = 0;   // cuda_memory_stats peak_allocated during this row
};

std::string dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t v : d) {
    if (!s.empty()) s += 'x';
    s += std::to_string(v);
  }
  return s;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// Random inputs on the benchmark's GPU, never zeros.
class Inputs {
 public:
  Inputs(Device dev, uint64_t seed) : dev_(dev), gen_(seed) {}
  Device device() const { return dev_; }
  Generator& gen() { return gen_; }

  // U[lo, hi) on the GPU: drawn there when the CUDA backend has its random kernel, otherwise on
  // the host and copied over (the same numbers either way: Philox does not depend on the device).
  Tensor uniform(const Shape& s, double lo, double hi) {
    try {
      return ocrt::uniform(s, lo, hi, gen_, DType::f32, dev_);
    } catch (const Error&) {
      return ocrt::uniform(s, lo, hi, gen_).to(dev_);
    }
  }
  // An activation-like input in [-1, 1), a leaf that requires grad unless told otherwise.
  Tensor input(const Shape& s, bool requires_grad = true) {
    Tensor t = uniform(s, -1, 1);
    if (requires_grad) t.set_requires_grad(true);
    return t;
  }
  // A trained weight with PyTorch's default bound 1/sqrt(fan_in).
  Tensor weight(const Shape& s, int64_t fan_in) {
    const double b = 1.0 / std::sqrt((double)fan_in);
    Tensor t = uniform(s, -b, b);
    t.set_requires_grad(true);
    return t;
  }

 private:
  Device dev_;
  Generator gen_;
};

// The two steps of a differentiable op: forward without a graph, and forward + backward from a
// fixed upstream gradient of the output's shape. `leaves` lose their .grad before each backward.
Prepared fwd_and_train(Inputs& in, std::function<Tensor()> forward, std::vector<Tensor> leaves) {
  Shape out_shape;
  {
    NoGradGuard no_grad;
    out_shape = forward().shape();  // also fails here, early, when the forward kernel is missing
  }
  const Tensor dy = in.uniform(out_shape, -1, 1);
  Prepared p;
  p.fwd = [forward] {
    NoGradGuard no_grad;
    forward();
  };
  p.train = [forward, dy, leaves] {
    for (Tensor l : leaves) l.zero_grad();
    forward().backward(dy);
  };
  return p;
}

// ---------------------------------------------------------------- the cases

struct ConvLayer {
  const char* name;
  int64_t cin, h, w, cout, k, pad;
  bool bias;
  int64_t ho() const { return h + 2 * pad - k + 1; }
  int64_t wo() const { return w + 2 * pad - k + 1; }
  double macs(int64_t N) const { return (double)N * cout * ho() * wo() * cin * k * k; }
};

// The convolutions of CRNN's `cnn` (docs/models.md) at their input shapes for a 32 x 100 line.
const ConvLayer kCrnnConvs[] = {
    {"crnn.conv0", 1, 32, 100, 64, 3, 1, true},     {"crnn.conv3", 64, 16, 50, 128, 3, 1, true},
    {"crnn.conv6", 128, 8, 25, 256, 3, 1, false},   {"crnn.conv9", 256, 8, 25, 256, 3, 1, true},
    {"crnn.conv12", 256, 4, 26, 512, 3, 1, false},  {"crnn.conv15", 512, 4, 26, 512, 3, 1, true},
    {"crnn.conv18", 512, 2, 27, 512, 2, 0, false},
};

// Forward multiply-adds of CRNN's 2-layer bidirectional LSTM: per layer, direction and step,
// the gates (N, 4H) = x W_ih^T + h W_hh^T.
double lstm_macs(int64_t T, int64_t N, int64_t I, int64_t H, int64_t layers) {
  double m = 0;
  for (int64_t l = 0; l < layers; ++l) m += 2.0 * T * N * 4 * H * ((l == 0 ? I : 2 * H) + H);
  return m;
}

Case conv_case(Inputs& in, const ConvLayer& c, int64_t N) {
  return {c.name, dims({N, c.cin, c.h, c.w}) + "->" + std::to_string(c.cout) + " k" + std::to_string(c.k),
          [&in, c, N] {
            // conv0 reads the image, which needs no gradient (as in training): its backward is
            // the weight gradient only.
            const bool first = c.cin == 1;
            Tensor x = in.input({N, c.cin, c.h, c.w}, !first);
            Tensor w = in.weight({c.cout, c.cin, c.k, c.k}, c.cin * c.k * c.k);
            Tensor b = c.bias ? in.weight({c.cout}, c.cin * c.k * c.k) : Tensor();
            Conv2dOptions o;
            o.padding = {c.pad, c.pad};
            std::vector<Tensor> leaves{w};
            if (!first) leaves.push_back(x);
            if (b.defined()) leaves.push_back(b);
            Prepared p = fwd_and_train(in, [=] { return conv2d(x, w, b, o); }, leaves);
            p.fwd_work = 2 * c.macs(N);
            p.train_work = p.fwd_work * (first ? 2 : 3);
            return p;
          }};
}

Case pool_case(Inputs& in, const std::string& name, int64_t N, int64_t C, int64_t H, int64_t W, Pair stride,
               Pair pad) {
  return {name, dims({N, C, H, W}) + " s" + std::to_string(stride[0]) + "," + std::to_string(stride[1]),
          [=, &in] {
            Tensor x = in.input({N, C, H, W});
            MaxPool2dOptions o;
            o.kernel = {2, 2}, o.stride = stride, o.padding = pad;
            const int64_t ho = (H + 2 * pad[0] - 2) / stride[0] + 1, wo = (W + 2 * pad[1] - 2) / stride[1] + 1;
            const double in_bytes = 4.0 * N * C * H * W, out_bytes = 4.0 * N * C * ho * wo;
            Prepared p = fwd_and_train(in, [=] { return max_pool2d(x, o); }, {x});
            p.memory_bound = true;
            p.fwd_work = in_bytes + out_bytes;            // x read, y written
            p.train_work = p.fwd_work + out_bytes + in_bytes;  // + dy read, dx written
            return p;
          }};
}

Case bn_case(Inputs& in, const std::string& name, int64_t N, int64_t C, int64_t H, int64_t W) {
  return {name, dims({N, C, H, W}), [=, &in] {
            Tensor x = in.input({N, C, H, W}), w = in.weight({C}, 1), b = in.weight({C}, 1);
            // Running statistics: random too (they are updated in place every call).
            Tensor rm = in.uniform({C}, -0.1, 0.1), rv = in.uniform({C}, 0.5, 1.5);
            Prepared p = fwd_and_train(in, [=] { return batch_norm(x, rm, rv, w, b, true); }, {x, w, b});
            const double bytes = 4.0 * N * C * H * W;
            p.memory_bound = true;
            p.fwd_work = 2 * bytes;    // x read, y written
            p.train_work = 5 * bytes;  // + x and dy read, dx written
            return p;
          }};
}

Case lstm_case(Inputs& in, const std::string& name, int64_t T, int64_t N, int64_t I, int64_t H) {
  return {name, "T" + std::to_string(T) + " N" + std::to_string(N) + " " + std::to_string(I) + "->" +
                    std::to_string(H) + " 2L bi",
          [=, &in] {
            Tensor x = in.input({T, N, I});
            std::vector<Tensor> w;
            for (int64_t l = 0; l < 2; ++l)
              for (int d = 0; d < 2; ++d) {
                w.push_back(in.weight({4 * H, l == 0 ? I : 2 * H}, H));
                w.push_back(in.weight({4 * H, H}, H));
                w.push_back(in.weight({4 * H}, H));
                w.push_back(in.weight({4 * H}, H));
              }
            LSTMOptions o;
            o.num_layers = 2, o.bidirectional = true;
            std::vector<Tensor> leaves = w;
            leaves.push_back(x);
            Prepared p = fwd_and_train(in, [=] { return lstm(x, w, o).output; }, leaves);
            p.fwd_work = 2 * lstm_macs(T, N, I, H, 2);
            p.train_work = 3 * p.fwd_work;
            return p;
          }};
}

Case linear_case(Inputs& in, const std::string& name, int64_t M, int64_t K, int64_t Nout) {
  return {name, dims({M, K}) + "->" + std::to_string(Nout), [=, &in] {
            Tensor x = in.input({M, K}), w = in.weight({Nout, K}, K), b = in.weight({Nout}, K);
            Prepared p = fwd_and_train(in, [=] { return linear(x, w, b); }, {x, w, b});
            p.fwd_work = 2.0 * M * K * Nout;
            p.train_work = 3 * p.fwd_work;
            return p;
          }};
}

Case gelu_case(Inputs& in, const std::string& name, int64_t M, int64_t D) {
  return {name, dims({M, D}), [=, &in] {
            Tensor x = in.input({M, D});
            Prepared p = fwd_and_train(in, [=] { return gelu(x); }, {x});
            const double bytes = 4.0 * M * D;
            p.memory_bound = true;
            p.fwd_work = 2 * bytes;    // x read, y written
            p.train_work = 5 * bytes;  // + x and dy read, dx written
            return p;
          }};
}

Case layer_norm_case(Inputs& in, const std::string& name, int64_t M, int64_t D) {
  return {name, dims({M, D}), [=, &in] {
            Tensor x = in.input({M, D}), w = in.weight({D}, 1), b = in.weight({D}, 1);
            Prepared p = fwd_and_train(in, [=] { return layer_norm(x, {D}, w, b); }, {x, w, b});
            const double bytes = 4.0 * M * D;
            p.memory_bound = true;
            p.fwd_work = 2 * bytes;
            p.train_work = 5 * bytes;
            return p;
          }};
}

// Random CTC targets: N lengths in [5, 15] (about 10 on average), labels in [1, C).
struct Targets {
  Tensor labels;  // 1-D, all samples' labels concatenated, on the host (as a data loader gives them)
  std::vector<int64_t> lengths, input_lengths;
};

Targets ctc_targets(Generator& gen, int64_t T, int64_t N, int64_t C) {
  Targets t;
  std::vector<int64_t> labels;
  for (int64_t n = 0; n < N; ++n) {
    t.lengths.push_back(5 + (int64_t)(gen.next_u64() % 11));
    for (int64_t k = 0; k < t.lengths.back(); ++k) labels.push_back(1 + (int64_t)(gen.next_u64() % (uint64_t)(C - 1)));
  }
  t.labels = Tensor::from_vector(labels);
  t.input_lengths.assign((size_t)N, T);
  return t;
}

// CTC from logits (T, N, C): fused (ctc_loss_from_logits, what training uses) or as
// log_softmax + ctc_loss. Its work is a T-step recursion, latency-bound; the GB/s figure counts
// the logits read and (fwd+bwd) their gradient written.
Case ctc_case(Inputs& in, const std::string& name, int64_t T, int64_t N, int64_t C, bool fused) {
  return {name, "T" + std::to_string(T) + " N" + std::to_string(N) + " C" + std::to_string(C) + " S~10",
          [=, &in] {
            Tensor z = in.uniform({T, N, C}, -3, 3);
            z.set_requires_grad(true);
            const Targets t = ctc_targets(in.gen(), T, N, C);
            auto loss = [=] {
              return fused ? ctc_loss_from_logits(z, t.labels, t.input_lengths, t.lengths)
                           : ctc_loss(log_softmax(z, 2), t.labels, t.input_lengths, t.lengths);
            };
            {
              NoGradGuard no_grad;
              loss();
            }
            Prepared p;
            p.fwd = [loss] {
              NoGradGuard no_grad;
              loss();
            };
            p.train = [loss, z] {
              Tensor leaf = z;
              leaf.zero_grad();
              loss().backward();
            };
            p.memory_bound = true;
            p.fwd_work = 4.0 * T * N * C;
            p.train_work = 2 * p.fwd_work;
            return p;
          }};
}

// torch.nn.MultiheadAttention's forward on x (L, N, E), self-attention, optionally with SVTR's
// 7 x 11 local window mask over an Hg x Wg token grid. FLOPs: the packed q,k,v projection
// (2 L N 3E^2), q k^T and weights v (2 x 2 N L^2 E over all heads), the output projection
// (2 L N E^2); the mask does not reduce them (the scores are computed densely).
Case mha_case(Inputs& in, const std::string& name, int64_t Hg, int64_t Wg, int64_t N, int64_t E, int64_t heads,
              bool local) {
  const int64_t L = Hg * Wg;
  return {name, "L" + std::to_string(L) + "(" + dims({Hg, Wg}) + ") N" + std::to_string(N) + " E" +
                    std::to_string(E) + " h" + std::to_string(heads),
          [=, &in] {
            Tensor x = in.input({L, N, E}), w_in = in.weight({3 * E, E}, E), b_in = in.weight({3 * E}, E),
                   w_out = in.weight({E, E}, E), b_out = in.weight({E}, E);
            Tensor mask = local ? local_attention_mask(Hg, Wg, 7, 11, in.device()) : Tensor();
            MultiheadAttentionOptions o;
            o.num_heads = heads;
            o.average_weights = false;  // PyTorch's need_weights=False: no head-averaged weights
            Prepared p = fwd_and_train(
                in, [=] { return multi_head_attention(x, x, x, w_in, b_in, w_out, b_out, o, mask).output; },
                {x, w_in, b_in, w_out, b_out});
            p.fwd_work = 2.0 * L * N * 4 * E * E + 4.0 * N * L * L * E;
            p.train_work = 3 * p.fwd_work;
            return p;
          }};
}

// The whole CRNN on 32 x 100 lines: inference (eval mode, no graph) and one training step
// (train mode: forward, CTC from the logits, backward; the optimizer is not included).
Case crnn_case(Inputs& in, int64_t N) {
  return {"crnn.model", dims({N, 1, 32, 100}) + " C" + std::to_string(kClasses), [=, &in] {
            auto model = std::make_shared<nn::CRNN>(nn::CRNNConfig::preset("crnn", kClasses), in.gen());
            model->to(in.device());
            Tensor x = in.input({N, 1, 32, 100}, false);
            const Targets t = ctc_targets(in.gen(), kFrames, N, kClasses);
            {
              NoGradGuard no_grad;
              model->eval();
              model->forward(x);
            }
            Prepared p;
            p.fwd = [model, x] {
              NoGradGuard no_grad;
              model->eval();
              model->forward(x);
            };
            p.train = [model, x, t] {
              model->train();
              model->zero_grad();
              ctc_loss_from_logits(model->forward(x), t.labels, t.input_lengths, t.lengths).backward();
            };
            double macs = lstm_macs(kFrames, N, 512, 256, 2) + (double)kFrames * N * 512 * kClasses;
            for (const ConvLayer& c : kCrnnConvs) macs += c.macs(N);
            p.fwd_work = 2 * macs;
            p.train_work = 3 * p.fwd_work - 2 * kCrnnConvs[0].macs(N);  // no gradient for the image
            return p;
          }};
}

std::vector<Case> all_cases(Inputs& in, int64_t N) {
  std::vector<Case> cases;
  // CRNN on 32 x 100 lines: conv -> pool shapes 32x100 -> 16x50 -> 8x25 -> 4x26 -> 2x27 -> 1x26.
  for (const ConvLayer& c : kCrnnConvs) cases.push_back(conv_case(in, c, N));
  cases.push_back(pool_case(in, "crnn.pool2", N, 64, 32, 100, {2, 2}, {0, 0}));
  cases.push_back(pool_case(in, "crnn.pool5", N, 128, 16, 50, {2, 2}, {0, 0}));
  cases.push_back(pool_case(in, "crnn.pool11", N, 256, 8, 25, {2, 1}, {0, 1}));
  cases.push_back(pool_case(in, "crnn.pool17", N, 512, 4, 26, {2, 1}, {0, 1}));
  cases.push_back(bn_case(in, "crnn.bn7", N, 256, 8, 25));
  cases.push_back(bn_case(in, "crnn.bn13", N, 512, 4, 26));
  cases.push_back(bn_case(in, "crnn.bn19", N, 512, 1, 26));
  cases.push_back(lstm_case(in, "crnn.lstm", kFrames, N, 512, 256));
  cases.push_back(linear_case(in, "crnn.fc", kFrames * N, 512, kClasses));
  cases.push_back(ctc_case(in, "crnn.ctc.fused", kFrames, N, kClasses, true));
  cases.push_back(ctc_case(in, "crnn.ctc.logsoftmax", kFrames, N, kClasses, false));
  cases.push_back(crnn_case(in, N));
  // SVTR-lite (SVTR-Tiny's stages) on 32 x 100 lines: 8x25 tokens of dim 64 (2 heads), 4x25 of
  // 128 (4 heads), 2x25 of 256 (8 heads); pre-LayerNorm, MLP ratio 4 with GELU.
  cases.push_back(layer_norm_case(in, "svtr.ln1", N * 200, 64));
  cases.push_back(layer_norm_case(in, "svtr.ln2", N * 100, 128));
  cases.push_back(layer_norm_case(in, "svtr.ln3", N * 50, 256));
  cases.push_back(mha_case(in, "svtr.mha1.local", 8, 25, N, 64, 2, true));
  cases.push_back(mha_case(in, "svtr.mha1.global", 8, 25, N, 64, 2, false));
  cases.push_back(mha_case(in, "svtr.mha2.global", 4, 25, N, 128, 4, false));
  cases.push_back(mha_case(in, "svtr.mha3.global", 2, 25, N, 256, 8, false));
  cases.push_back(linear_case(in, "svtr.mlp1.fc1", N * 200, 64, 256));
  cases.push_back(gelu_case(in, "svtr.mlp1.gelu", N * 200, 256));
  cases.push_back(linear_case(in, "svtr.mlp1.fc2", N * 200, 256, 64));
  cases.push_back(linear_case(in, "svtr.mlp3.fc1", N * 50, 256, 1024));
  cases.push_back(linear_case(in, "svtr.mlp3.fc2", N * 50, 1024, 256));
  return cases;
}

// ---------------------------------------------------------------- timing

double seconds_of(const std::function<void()>& step, int dev) {
  cuda_synchronize(dev);
  const auto t0 = std::chrono::steady_clock::now();
  step();
  cuda_synchronize(dev);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Times `step`: kWarmup runs, then `reps` (at least 3, fewer than asked when they would exceed
// `budget_s`). Fills the timing fields of `row` (ms).
void time_step(const std::function<void()>& step, int dev, int reps, double budget_s, Row& row) {
  double last = 0;
  for (int i = 0; i < kWarmup; ++i) last = seconds_of(step, dev);
  if (last * reps > budget_s) reps = std::max(3, (int)(budget_s / std::max(last, 1e-9)));
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) ms.push_back(1e3 * seconds_of(step, dev));
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  row.median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  row.min = ms.front(), row.max = ms.back(), row.reps = (int)n;
}

struct Ceilings {
  double copy_gbs = 0;      // GB/s, 0: not measured
  double sgemm_gflops = 0;  // GFLOP/s, 0: not measured
};

std::string rate_str(const Row& r) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s", r.rate, r.memory_bound ? "GB/s" : "GFLOP/s");
  return buf;
}

std::string fraction_str(const Row& r) {
  if (r.fraction < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%% %s", 100 * r.fraction, r.memory_bound ? "copy" : "sgemm");
  return buf;
}

void print_row(const Row& r) {
  if (!r.ok) {
    std::printf("%-20s %-34s %-8s n/a (%s)\n", r.name.c_str(), r.shape.c_str(), r.mode.c_str(), r.reason.c_str());
  } else {
    std::printf("%-20s %-34s %-8s %9.3f ms (%.3f-%.3f, %d reps) %18s %16s  peak %.0f MiB\n", r.name.c_str(),
                r.shape.c_str(), r.mode.c_str(), r.median, r.min, r.max, r.reps, rate_str(r).c_str(),
                fraction_str(r).c_str(), r.peak_mib);
  }
  std::fflush(stdout);
}

// Times one step of a prepared case into a finished row; an exception makes it "n/a".
Row measure(const std::string& name, const std::string& shape, const std::string& mode,
            const std::function<void()>& step, double work, bool memory_bound, const Ceilings& ceil, int dev,
            int reps, double budget_s) {
  Row r;
  r.name = name, r.shape = shape, r.mode = mode, r.work = work, r.memory_bound = memory_bound;
  try {
    cuda_reset_peak(dev);
    time_step(step, dev, reps, budget_s, r);
    r.peak_mib = (double)cuda_memory_stats(dev).peak_allocated / (1 << 20);
    r.rate = work / (r.median * 1e-3) / 1e9;
    const double top = memory_bound ? ceil.copy_gbs : ceil.sgemm_gflops;
    r.fraction = top > 0 ? r.rate / top : -1;
    r.ok = true;
  } catch (const std::exception& e) {
    r.ok = false;
    r.reason = first_line(e.what());
    try {
      cuda_synchronize(dev);  // surfaces (and reports) an asynchronous error left by the failure
    } catch (const std::exception& e2) {
      r.reason += "; then: " + first_line(e2.what());
    }
  }
  return r;
}

Json row_json(const Row& r) {
  Json j = Json::object();
  j.set("name", r.name);
  j.set("shape", r.shape);
  j.set("mode", r.mode);
  j.set("status", r.ok ? "ok" : "n/a");
  if (!r.ok) {
    j.set("reason", r.reason);
    return j;
  }
  j.set("median", r.median);
  j.set("min", r.min);
  j.set("max", r.max);
  j.set("reps", r.reps);
  j.set(r.memory_bound ? "bytes" : "flops", r.work);
  j.set("rate", r.rate);
  j.set("rate_unit", r.memory_bound ? "GB/s" : "GFLOP/s");
  j.set("fraction_of_ceiling", r.fraction >= 0 ? Json(r.fraction) : Json());
  j.set("peak_MiB", r.peak_mib);
  return j;
}

void usage() {
  std::printf(
      "usage: bench_gpu_ops --device cuda:N [--batch B] [--reps R] [--case-seconds S] [--only SUBSTRING]\n"
      "                     [--json FILE] [--gemm N] [--copy-mib M]\n"
      "GPU milliseconds (median), GFLOP/s or GB/s, and the fraction of this GPU's measured SGEMM / copy\n"
      "rate, of the OCR operators at CRNN and SVTR-lite shapes (32x100 lines), forward and\n"
      "forward+backward, and of a whole CRNN step.\n"
      "  --device cuda:N     the GPU (required)\n"
      "  --batch B           lines per batch (default 256)\n"
      "  --reps R            timed repetitions per case after 3 warm-ups (default 20, at least 3)\n"
      "  --case-seconds S    fewer repetitions when a case would take longer than S seconds (default 3)\n"
      "  --only SUBSTRING    only the cases whose name contains SUBSTRING (the ceilings always run)\n"
      "  --json FILE         also write the results as JSON (bench/torch_gpu_ops.py --compare reads it)\n"
      "  --gemm N            size of the N^3 float32 matmul that measures the arithmetic ceiling (default 8192)\n"
      "  --copy-mib M        size of the clone() that measures the bandwidth ceiling (default 1024)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_text, json_path, only;
  int64_t batch = 256, gemm_n = 8192, copy_mib = 1024;
  int reps = 20;
  double case_seconds = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_next = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--device" && has_next) {
      device_text = argv[++i];
    } else if (a == "--batch" && has_next) {
      batch = std::atoll(argv[++i]);
    } else if (a == "--reps" && has_next) {
      reps = std::max(3, std::atoi(argv[++i]));
    } else if (a == "--case-seconds" && has_next) {
      case_seconds = std::atof(argv[++i]);
    } else if (a == "--only" && has_next) {
      only = argv[++i];
    } else if (a == "--json" && has_next) {
      json_path = argv[++i];
    } else if (a == "--gemm" && has_next) {
      gemm_n = std::atoll(argv[++i]);
    } else if (a == "--copy-mib" && has_next) {
      copy_mib = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "bench_gpu_ops: unknown or incomplete argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (device_text.empty()) {
    std::fprintf(stderr, "bench_gpu_ops: --device cuda:N is required (see --help)\n");
    return 2;
  }
  if (batch < 1 || gemm_n < 1 || copy_mib < 1 || !(case_seconds > 0)) {
    std::fprintf(stderr, "bench_gpu_ops: --batch, --gemm, --copy-mib and --case-seconds must be positive\n");
    return 2;
  }
  Device device;
  try {
    device = Device::parse(device_text);
    OCRT_CHECK(device.is_cuda(), "bench_gpu_ops measures a GPU: expected --device cuda:N, got '", device_text, "'");
    validate(device);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu_ops: %s\n", e.what());
    return 2;
  }
  const int dev = device.index;
  Inputs in(device, 1);

  std::printf("ocrt on %s (%s), batch %lld: median of up to %d repetitions after %d warm-ups, ms\n",
              cuda_device_name(dev).c_str(), device.str().c_str(), (long long)batch, reps, kWarmup);

  // ---- this GPU's own ceilings
  Ceilings ceil;
  std::vector<Row> rows;
  {
    const int64_t n = copy_mib * (1 << 20) / 4;
    Row r;
    try {
      // Tiled from a 64 MiB random block (fewer host draws when the GPU has no random kernel).
      const int64_t block = std::min<int64_t>(n, 1 << 24);
      Tensor src = in.uniform({block}, -1, 1).unsqueeze(0).expand({(n + block - 1) / block, block}).contiguous();
      src = src.reshape({-1}).narrow(0, 0, n).contiguous();
      r = measure("ceiling.copy", std::to_string(copy_mib) + " MiB clone", "copy", [src] { src.clone(); },
                  2.0 * 4 * n, true, ceil, dev, reps, case_seconds);
    } catch (const std::exception& e) {
      r.name = "ceiling.copy", r.mode = "copy", r.reason = first_line(e.what());
    }
    if (r.ok) ceil.copy_gbs = r.rate, r.fraction = 1;
    print_row(r);
    rows.push_back(r);
  }
  {
    Row r;
    try {
      Tensor a = in.uniform({gemm_n, gemm_n}, -1, 1), b = in.uniform({gemm_n, gemm_n}, -1, 1);
      r = measure("ceiling.sgemm", dims({gemm_n, gemm_n, gemm_n}) + " f32", "matmul", [a, b] { matmul(a, b); },
                  2.0 * gemm_n * gemm_n * gemm_n, false, ceil, dev, reps, case_seconds);
    } catch (const std::exception& e) {
      r.name = "ceiling.sgemm", r.mode = "matmul", r.reason = first_line(e.what());
    }
    if (r.ok) ceil.sgemm_gflops = r.rate, r.fraction = 1;
    print_row(r);
    rows.push_back(r);
  }
  try {
    cuda_empty_cache(dev);  // give the ceilings' 3 GiB back before the cases
  } catch (const std::exception&) {
  }

  // ---- the cases
  double peak_mib = 0;
  for (const Row& r : rows) peak_mib = std::max(peak_mib, r.peak_mib);
  for (const Case& c : all_cases(in, batch)) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    Prepared p;
    std::string setup_error;
    try {
      p = c.make();
    } catch (const std::exception& e) {
      setup_error = first_line(e.what());
      try {
        cuda_synchronize(dev);
      } catch (const std::exception& e2) {
        setup_error += "; then: " + first_line(e2.what());
      }
    }
    for (int m = 0; m < 2; ++m) {
      const std::string mode = m == 0 ? "fwd" : "fwd+bwd";
      const auto& step = m == 0 ? p.fwd : p.train;
      Row r;
      if (!setup_error.empty()) {
        r.name = c.name, r.shape = c.shape, r.mode = mode, r.reason = setup_error;
      } else if (!step) {
        continue;
      } else {
        r = measure(c.name, c.shape, mode, step, m == 0 ? p.fwd_work : p.train_work, p.memory_bound, ceil, dev, reps,
                    case_seconds);
      }
      peak_mib = std::max(peak_mib, r.peak_mib);
      print_row(r);
      rows.push_back(r);
    }
  }

  // ---- memory and the summary table
  try {
    const CudaMemoryStats s = cuda_memory_stats(dev);
    std::printf("\nGPU memory (caching allocator): peak allocated %.0f MiB (largest single row), now allocated %.0f MiB, "
                "reserved %.0f MiB, %zu cudaMalloc calls, %zu cache hits\n",
                peak_mib, (double)s.allocated / (1 << 20), (double)s.reserved / (1 << 20), s.num_mallocs, s.cache_hits);
  } catch (const std::exception& e) {
    std::printf("\nGPU memory: n/a (%s)\n", first_line(e.what()).c_str());
  }
  char copy_s[32] = "n/a", gemm_s[32] = "n/a";
  if (ceil.copy_gbs > 0) std::snprintf(copy_s, sizeof copy_s, "%.1f GB/s", ceil.copy_gbs);
  if (ceil.sgemm_gflops > 0) std::snprintf(gemm_s, sizeof gemm_s, "%.1f GFLOP/s", ceil.sgemm_gflops);
  std::printf("\nocrt, %s, batch %lld. Ceilings: copy %s, SGEMM (TF32 off) %s.\n\n", cuda_device_name(dev).c_str(),
              (long long)batch, copy_s, gemm_s);
  std::printf("| case | shape | mode | median ms | rate | of ceiling |\n| --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    if (r.ok) {
      std::printf("| %s | %s | %s | %.3f | %s | %s |\n", r.name.c_str(), r.shape.c_str(), r.mode.c_str(), r.median,
                  rate_str(r).c_str(), fraction_str(r).c_str());
    } else {
      std::string why = r.reason.size() > 70 ? r.reason.substr(0, 67) + "..." : r.reason;
      std::printf("| %s | %s | %s | n/a (%s) | | |\n", r.name.c_str(), r.shape.c_str(), r.mode.c_str(), why.c_str());
    }
  }

  if (!json_path.empty()) {
    Json j = Json::object();
    j.set("impl", "ocrt");
    j.set("device", cuda_device_name(dev));
    j.set("batch", batch);
    j.set("unit", "ms");
    Json c = Json::object();
    c.set("copy_GBps", ceil.copy_gbs > 0 ? Json(ceil.copy_gbs) : Json());
    c.set("sgemm_GFLOPs", ceil.sgemm_gflops > 0 ? Json(ceil.sgemm_gflops) : Json());
    j.set("ceilings", c);
    j.set("peak_MiB", peak_mib);
    Json results = Json::array();
    for (const Row& r : rows) results.push_back(row_json(r));
    j.set("results", results);
    std::ofstream out(json_path);
    out << j.dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "bench_gpu_ops: could not write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
