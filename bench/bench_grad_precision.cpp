// How far one training step's gradients move with the precision of the products: a recogniser's
// gradients on one batch at the same weights, computed three ways (float32 with im2col
// convolutions, float32 with Winograd's, and bf16, which on the amx path puts both gradients of
// the 3x3 convolutions on the tiles), and for each parameter the norm of the difference from
// the first, relative to its norm. What bf16 training's gradients carry besides its rounding
// shows here as a layer whose bf16 difference stands out from its neighbours'; how sensitive
// the network itself is shows in the float32 Winograd column, whose products differ from
// im2col's only by float32 rounding (about 1e-5 relative).
//
//   bench_grad_precision [--model FILE] [--arch crnn-s] [--batch 32] [--width 256] [--threads 2]
//                        [--seed 7]
//
// --model: a recogniser model file or training checkpoint (a trained model says more than a
// random one, whose ReLUs and max-pools sit on no typical inputs); without it, --arch with random
// weights. The batch: images uniform in [-1, 1], 20 random labels a line, the CTC loss as
// training takes it (mean, zero_infinity). OCRT_CPU_ISA picks the path (docs/ops/gemm.md).
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/model_file.h"
#include "models/recognizer.h"
#include "ops/conv.h"
#include "ops/ctc.h"
#include "ops/random.h"
#include "runtime/cli.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu_isa.h"
#include "runtime/threading.h"

using namespace ocrt;

namespace {

using Gradients = std::vector<std::pair<std::string, std::vector<double>>>;

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, arch = "crnn-s";
  int64_t batch = 32, width = 256, threads = 2, seed = 7;
  cli::Parser p("bench_grad_precision",
                "usage: bench_grad_precision [options]: one training step's gradients in float32 (im2col and\n"
                "Winograd convolutions) and in bf16, each parameter's relative difference from float32 with im2col\n");
  p.add(cli::text("--model", "FILE", model_path, "a recogniser model file (default: --arch, random weights)"));
  p.add(cli::text("--arch", "NAME", arch, "the architecture without --model (crnn-s)"));
  p.add(cli::integer("--batch", "N", batch, 1, 4096, "lines in the batch (32)"));
  p.add(cli::integer("--width", "W", width, 32, 8192, "line width in pixels (256)"));
  p.add(cli::integer("--threads", "N", threads, 1, 4096, "CPU threads (2)"));
  p.add(cli::integer("--seed", "N", seed, 0, int64_t(1) << 62, "the batch's and random weights' seed (7)"));
  OCRT_CHECK(p.parse(argc, argv).empty(), "bench_grad_precision takes no arguments besides its flags");
  set_num_threads((int)threads);

  Generator gen((uint64_t)seed);
  std::shared_ptr<nn::Recognizer> net;
  if (!model_path.empty()) {
    const nn::ModelFile f = nn::load_model_file(model_path);
    OCRT_CHECK(f.info.has_value(), model_path, ": a model file with ocrt's metadata is needed");
    net = nn::make_recognizer(f.info->arch, f.info->config, gen);
    net->load_state_dict(f.weights);
  } else {
    net = nn::make_recognizer(arch, 96, gen);
  }
  net->train(true);
  const int64_t T = net->frames_for_width(width), labels = std::min<int64_t>(20, std::max<int64_t>(1, T / 3));
  const Tensor x = uniform({batch, 1, 32, width}, -1.0, 1.0, gen);
  const std::vector<int64_t> widths((size_t)batch, width), input_lengths((size_t)batch, T),
      target_lengths((size_t)batch, labels);
  const int64_t classes = net->num_classes();
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < batch * labels; ++i) targets.push_back(1 + (int64_t)(gen.next_u64() % (uint64_t)(classes - 1)));
  const Tensor tg = Tensor::from_vector(targets);
  CTCLossOptions co;
  co.reduction = Reduction::mean;
  co.zero_infinity = true;

  auto gradients = [&](cpu::MatmulPrecision precision, ConvMode conv, double* loss_value) {
    cpu::MatmulPrecisionScope scope(precision);
    const ConvMode before = conv_mode();
    set_conv_mode(conv);
    for (auto& [name, t] : net->named_parameters()) {
      Tensor param = t;
      param.zero_grad();
    }
    Tensor loss = ctc_loss_from_logits(net->forward(x, widths), tg, input_lengths, target_lengths, co);
    loss.backward();
    *loss_value = loss.item();
    set_conv_mode(before);
    Gradients out;
    for (auto& [name, t] : net->named_parameters()) {
      const std::vector<float> g = t.grad().contiguous().to_vector<float>();
      out.push_back({name, std::vector<double>(g.begin(), g.end())});
    }
    return out;
  };
  double loss_exact = 0, loss_fast = 0, loss_bf16 = 0;
  const Gradients exact = gradients(cpu::MatmulPrecision::f32, ConvMode::exact, &loss_exact);
  const Gradients fast = gradients(cpu::MatmulPrecision::f32, ConvMode::fast, &loss_fast);
  const Gradients bf16 = gradients(cpu::MatmulPrecision::bf16, ConvMode::fast, &loss_bf16);

  std::printf("%s, batch %lld of width %lld, %lld threads, cpu path %s\n",
              model_path.empty() ? (arch + " (random weights)").c_str() : model_path.c_str(), (long long)batch,
              (long long)width, (long long)threads, cpu_isa_name(cpu_isa()));
  std::printf("loss: fp32 im2col %.6f, fp32 Winograd %.6f, bf16 %.6f\n\n", loss_exact, loss_fast, loss_bf16);
  std::printf("| parameter | gradient norm | fp32 Winograd, relative | bf16, relative |\n| --- | --- | --- | --- |\n");
  for (size_t i = 0; i < exact.size(); ++i) {
    double norm2 = 0, fast2 = 0, bf2 = 0;
    for (size_t k = 0; k < exact[i].second.size(); ++k) {
      const double g = exact[i].second[k];
      norm2 += g * g;
      fast2 += (fast[i].second[k] - g) * (fast[i].second[k] - g);
      bf2 += (bf16[i].second[k] - g) * (bf16[i].second[k] - g);
    }
    const double norm = std::sqrt(norm2), scale = norm > 0 ? norm : 1;
    std::printf("| %s | %.3e | %.2e | %.2e |\n", exact[i].first.c_str(), norm, std::sqrt(fast2) / scale,
                std::sqrt(bf2) / scale);
  }
  return 0;
}
