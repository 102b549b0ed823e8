// Forward + backward time of the OCR operators at the exact shapes of CRNN (batch 32, lines of
// 32 x 128; the `crnn` preset of docs/models.md) and SVTR-lite (batch 32, token grids 8x32, 4x32, 2x32),
// on a fixed thread count. bench/torch_ops.py runs the same cases in PyTorch; its --compare
// prints the side-by-side table (bench/README.md).
//
//   bench_ops [--threads N] [--reps R] [--only SUBSTRING] [--json FILE] [--device cpu] [--forward]
//
// One repetition = forward, then backward from a fixed upstream gradient, with every input and
// parameter requiring grad (as in training). 2 warm-up repetitions, then R timed ones; the
// median and the min-max spread are reported, in milliseconds. With --forward, one repetition
// is the forward pass alone under no-grad (what inference runs).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "ops/attention.h"
#include "ops/conv.h"
#include "ops/ctc.h"
#include "ops/norm.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/lstm.h"
#include "runtime/autograd.h"
#include "runtime/cpu/gemm.h"
#include "runtime/threading.h"
#include "timing.h"

using namespace ocrt;

namespace {

struct Result {
  std::string name, size;
  double median, min, max;
  int reps;
};

struct Case {
  std::string name, size;
  // Builds the inputs and returns one forward + backward.
  std::function<std::function<void()>(Generator&)> make;
};

Tensor param(const Shape& s, Generator& gen, double scale = 0.1) {
  Tensor t = uniform(s, -scale, scale, gen);
  t.set_requires_grad(true);
  return t;
}

// Set by --forward: time the forward pass alone, under no-grad, as inference runs it.
bool forward_only = false;

// Forward + backward with a random upstream gradient of the output's shape (or the forward
// alone under no-grad, with --forward).
std::function<void()> fwd_bwd(std::function<Tensor()> forward, Generator& gen) {
  if (forward_only)
    return [forward] {
      NoGradGuard no_grad;
      forward();
    };
  Tensor probe;
  {
    NoGradGuard no_grad;
    probe = forward();
  }
  Tensor g = uniform(probe.shape(), -1, 1, gen);
  return [forward, g] { forward().backward(g); };
}

Case conv_case(const std::string& name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Cout, int64_t k,
               int64_t pad, bool bias) {
  const std::string size = std::to_string(N) + "x" + std::to_string(C) + "x" + std::to_string(H) + "x" +
                           std::to_string(W) + "->" + std::to_string(Cout);
  return {name, size, [=](Generator& gen) {
            Tensor x = param({N, C, H, W}, gen, 1.0), w = param({Cout, C, k, k}, gen),
                   b = bias ? param({Cout}, gen) : Tensor();
            Conv2dOptions o;
            o.padding = {pad, pad};
            return fwd_bwd([=] { return conv2d(x, w, b, o); }, gen);
          }};
}

Case pool_case(const std::string& name, int64_t N, int64_t C, int64_t H, int64_t W, Pair stride, Pair pad) {
  return {name, std::to_string(N) + "x" + std::to_string(C) + "x" + std::to_string(H) + "x" + std::to_string(W),
          [=](Generator& gen) {
            Tensor x = param({N, C, H, W}, gen, 1.0);
            MaxPool2dOptions o;
            o.kernel = {2, 2}, o.stride = stride, o.padding = pad;
            return fwd_bwd([=] { return max_pool2d(x, o); }, gen);
          }};
}

Case bn_case(const std::string& name, int64_t N, int64_t C, int64_t H, int64_t W) {
  return {name, std::to_string(N) + "x" + std::to_string(C) + "x" + std::to_string(H) + "x" + std::to_string(W),
          [=](Generator& gen) {
            Tensor x = param({N, C, H, W}, gen, 1.0), w = param({C}, gen), b = param({C}, gen);
            Tensor rm = Tensor::zeros({C}), rv = Tensor::ones({C});
            return fwd_bwd([=] { return batch_norm(x, rm, rv, w, b, true); }, gen);
          }};
}

Case lstm_case(const std::string& name, int64_t T, int64_t N, int64_t I, int64_t H) {
  return {name, "T" + std::to_string(T) + " N" + std::to_string(N) + " " + std::to_string(I) + "->" + std::to_string(H),
          [=](Generator& gen) {
            Tensor x = param({T, N, I}, gen, 1.0);
            std::vector<Tensor> w;
            for (int64_t l = 0; l < 2; ++l)
              for (int d = 0; d < 2; ++d) {
                w.push_back(param({4 * H, l == 0 ? I : 2 * H}, gen));
                w.push_back(param({4 * H, H}, gen));
                w.push_back(param({4 * H}, gen));
                w.push_back(param({4 * H}, gen));
              }
            LSTMOptions o;
            o.num_layers = 2, o.bidirectional = true;
            return fwd_bwd([=] { return lstm(x, w, o).output; }, gen);
          }};
}

// CTC at (T, N=32, C=96) with target lengths drawn in [lo, hi]; from logits (fused) or from
// log-probabilities (log_softmax as a separate op, as PyTorch users write it).
Case ctc_case(const std::string& name, int64_t T, int64_t lo, int64_t hi, bool fused) {
  return {name, "T" + std::to_string(T) + " N32 C96", [=](Generator& gen) {
            const int64_t N = 32, C = 96;
            Tensor z = param({T, N, C}, gen, 3.0);
            std::vector<int64_t> targets, lengths, input_lengths((size_t)N, T);
            for (int64_t n = 0; n < N; ++n) {
              lengths.push_back(lo + (int64_t)(gen.next_u64() % (uint64_t)(hi - lo + 1)));
              for (int64_t k = 0; k < lengths.back(); ++k) targets.push_back(1 + (int64_t)(gen.next_u64() % (C - 1)));
            }
            Tensor tg = Tensor::from_vector(targets);
            return std::function<void()>([=] {
              Tensor loss = fused ? ctc_loss_from_logits(z, tg, input_lengths, lengths)
                                  : ctc_loss(log_softmax(z, 2), tg, input_lengths, lengths);
              loss.backward();
            });
          }};
}

Case ln_case(const std::string& name, int64_t N, int64_t L, int64_t E) {
  return {name, std::to_string(N) + "x" + std::to_string(L) + "x" + std::to_string(E), [=](Generator& gen) {
            Tensor x = param({N, L, E}, gen, 1.0), w = param({E}, gen), b = param({E}, gen);
            return fwd_bwd([=] { return layer_norm(x, {E}, w, b); }, gen);
          }};
}

Case mha_case(const std::string& name, int64_t Hgrid, int64_t Wgrid, int64_t E, int64_t heads, bool local) {
  const int64_t L = Hgrid * Wgrid, N = 32;
  return {name, "L" + std::to_string(L) + " N32 E" + std::to_string(E) + " h" + std::to_string(heads),
          [=](Generator& gen) {
            Tensor x = param({L, N, E}, gen, 1.0), w_in = param({3 * E, E}, gen), b_in = param({3 * E}, gen),
                   w_out = param({E, E}, gen), b_out = param({E}, gen);
            Tensor mask = local ? local_attention_mask(Hgrid, Wgrid) : Tensor();
            MultiheadAttentionOptions o;
            o.num_heads = heads;
            return fwd_bwd([=] { return multi_head_attention(x, x, x, w_in, b_in, w_out, b_out, o, mask).output; }, gen);
          }};
}

std::vector<Case> all_cases() {
  return {
      // CRNN, batch 32, 32x128 lines: the conv layers (cnn.<index>) at their input shapes.
      conv_case("crnn.conv0", 32, 1, 32, 128, 64, 3, 1, true),
      conv_case("crnn.conv3", 32, 64, 16, 64, 128, 3, 1, true),
      conv_case("crnn.conv6", 32, 128, 8, 32, 256, 3, 1, false),
      conv_case("crnn.conv9", 32, 256, 8, 32, 256, 3, 1, true),
      conv_case("crnn.conv12", 32, 256, 4, 33, 512, 3, 1, false),
      conv_case("crnn.conv15", 32, 512, 4, 33, 512, 3, 1, true),
      conv_case("crnn.conv18", 32, 512, 2, 34, 512, 2, 0, false),
      pool_case("crnn.pool2", 32, 64, 32, 128, {2, 2}, {0, 0}),
      pool_case("crnn.pool11", 32, 256, 8, 32, {2, 1}, {0, 1}),
      bn_case("crnn.bn7", 32, 256, 8, 32),
      bn_case("crnn.bn13", 32, 512, 4, 33),
      bn_case("crnn.bn19", 32, 512, 1, 33),
      lstm_case("crnn.lstm", 33, 32, 512, 256),
      lstm_case("crnn-s.lstm", 33, 32, 256, 128), lstm_case("crnn-s.lstm101", 101, 32, 256, 128),
      ctc_case("ctc.crnn.fused", 33, 5, 20, true),
      ctc_case("ctc.crnn.logsoftmax", 33, 5, 20, false),
      ctc_case("ctc.long.fused", 400, 80, 120, true),
      ctc_case("ctc.long.logsoftmax", 400, 80, 120, false),
      // SVTR-lite, batch 32: token grids 8x32 (dim 64), 4x32 (128), 2x32 (256).
      ln_case("svtr.ln1", 32, 256, 64),
      ln_case("svtr.ln2", 32, 128, 128),
      ln_case("svtr.ln3", 32, 64, 256),
      mha_case("svtr.mha1.local", 8, 32, 64, 2, true),
      mha_case("svtr.mha2.global", 4, 32, 128, 4, false),
      mha_case("svtr.mha3.global", 2, 32, 256, 8, false),
  };
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 7;
  std::string json, only, precision = "fp32";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--help" || a == "-h") {
      std::printf("usage: bench_ops [--threads N] [--reps R] [--only SUBSTRING] [--json FILE] [--device cpu] [--forward]\n"
                  "                 [--precision fp32|bf16]\n"
                  "Forward + backward milliseconds of the OCR operators at CRNN and SVTR-lite shapes\n"
                  "(--forward: the forward pass alone, under no-grad; --precision: the CPU's matrix products).\n");
      return 0;
    } else if (a == "--threads" && next) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--reps" && next) {
      reps = std::max(5, std::atoi(argv[++i]));
    } else if (a == "--only" && next) {
      only = argv[++i];
    } else if (a == "--precision" && next) {
      precision = argv[++i];
    } else if (a == "--forward") {
      forward_only = true;
    } else if (a == "--json" && next) {
      json = argv[++i];
    } else if (a == "--device" && next) {
      const std::string d = argv[++i];
      if (d != "cpu") {
        std::fprintf(stderr, "bench_ops: only --device cpu is measured so far (CUDA kernels are another issue)\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "bench_ops: unknown or incomplete argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (threads < 1) {
    std::fprintf(stderr, "bench_ops: --threads must be >= 1\n");
    return 2;
  }
  set_num_threads(threads);
  cpu::set_matmul_precision(cpu::parse_matmul_precision(precision));
  Generator gen(1);
  std::vector<Result> results;
  std::printf("ocrt, %d thread%s, %s products: %s, ms\n%-22s %-26s %9s %21s\n", threads, threads == 1 ? "" : "s",
              cpu::matmul_precision_name(cpu::matmul_precision()), forward_only ? "forward (no-grad)" : "forward + backward", "case", "size", "median", "min - max");
  for (const Case& c : all_cases()) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    std::function<void()> step = c.make(gen);
    step(), step();  // warm-up
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) ms.push_back(1e3 * bench::seconds_of(step));
    const double median = bench::median(ms);
    const auto [lo, hi] = std::minmax_element(ms.begin(), ms.end());
    results.push_back({c.name, c.size, median, *lo, *hi, reps});
    std::printf("%-22s %-26s %9.2f %10.2f - %8.2f\n", c.name.c_str(), c.size.c_str(), median, *lo, *hi);
    std::fflush(stdout);
  }
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"impl\": \"ocrt\", \"threads\": " << threads << ", \"forward_only\": " << (forward_only ? "true" : "false")
        << ", \"unit\": \"ms\", \"results\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      out << "  {\"name\": \"" << r.name << "\", \"size\": \"" << r.size << "\", \"median\": " << r.median
          << ", \"min\": " << r.min << ", \"max\": " << r.max << ", \"reps\": " << r.reps << "}"
          << (i + 1 < results.size() ? "," : "") << "\n";
    }
    out << "]}\n";
  }
  return 0;
}
