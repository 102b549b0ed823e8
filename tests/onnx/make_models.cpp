// ocrt_onnx_models OUTDIR: randomly initialised models of the presets, so that every
// architecture is checked without shipping its weights (crnn is checked with the shipped
// weights/crnn-en.safetensors). tests/onnx/check_onnx.py exports them to ONNX;
// tools/reference/ocrt_files.py loads the model files into the PyTorch reference modules.
//
//   OUTDIR/chars.txt                   a charset of 36 characters (0-9, a-z), one a line
//   OUTDIR/crnn-s-weights.safetensors  a crnn-s preset, weights only (no metadata, as a PyTorch
//                                      export: ocrt-export needs --arch crnn-s --charset chars.txt)
//   OUTDIR/crnn-s.safetensors          the same weights as an ocrt model file
//   OUTDIR/svtr-lite.safetensors       an svtr-lite preset as an ocrt model file
//
// Both draw their weights from a fixed seed (PyTorch's default initialisation), then move every
// norm away from its identity defaults (BatchNorm's running statistics and affine parameters,
// LayerNorm's), and give the attention biases, which initialise to 0, random values: a graph
// that dropped any of them or used them wrongly would compute other logits.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "models/crnn.h"
#include "models/model_file.h"
#include "models/svtr_lite.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "runtime/safetensors.h"

using namespace ocrt;

namespace {

// N(0, std^2)
Tensor normal(const Shape& shape, double std, Generator& gen) { return mul(randn(shape, gen), std); }

void randomise_norms(nn::Module& m, Generator& gen) {
  NoGradGuard no_grad;
  if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(&m)) {
    const Shape s = bn->weight.shape();
    bn->weight.copy_(uniform(s, 0.75, 1.25, gen));
    bn->bias.copy_(normal(s, 0.1, gen));
    bn->running_mean.copy_(normal(s, 0.1, gen));
    bn->running_var.copy_(uniform(s, 0.75, 1.25, gen));
  } else if (auto* ln = dynamic_cast<nn::LayerNorm*>(&m)) {
    ln->weight.copy_(uniform(ln->weight.shape(), 0.75, 1.25, gen));
    ln->bias.copy_(normal(ln->bias.shape(), 0.1, gen));
  } else if (auto* mha = dynamic_cast<nn::MultiheadAttention*>(&m)) {
    mha->in_proj_bias.copy_(normal(mha->in_proj_bias.shape(), 0.1, gen));
    mha->out_proj->bias.copy_(normal(mha->out_proj->bias.shape(), 0.1, gen));
  }
  for (auto& [name, child] : m.children()) randomise_norms(*child, gen);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ocrt_onnx_models OUTDIR\n");
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    std::vector<std::string> chars;
    for (char c = '0'; c <= '9'; ++c) chars.emplace_back(1, c);
    for (char c = 'a'; c <= 'z'; ++c) chars.emplace_back(1, c);
    {
      std::ofstream f(dir / "chars.txt");
      for (const auto& c : chars) f << c << '\n';
      OCRT_CHECK(f.good(), "cannot write ", (dir / "chars.txt").string());
    }
    const int64_t classes = (int64_t)chars.size() + 1;

    Generator gen(2026);
    nn::CRNN crnn_s(nn::CRNNConfig::preset("crnn-s", classes), gen);
    randomise_norms(crnn_s, gen);
    const nn::StateDict sd = crnn_s.state_dict();
    const std::vector<std::pair<std::string, Tensor>> tensors(sd.begin(), sd.end());
    save_safetensors((dir / "crnn-s-weights.safetensors").string(), tensors);  // no metadata: weights only
    auto info_for = [&](const std::string& arch, const nn::Recognizer& m) {
      nn::ModelInfo info;
      info.arch = arch;
      info.config = m.config_json();
      info.charset = chars;
      info.input = nn::default_input_spec();
      return info;
    };
    nn::save_model_file((dir / "crnn-s.safetensors").string(), crnn_s, info_for("crnn-s", crnn_s));

    nn::SVTRLite svtr(nn::SVTRLiteConfig::preset("svtr-lite", classes), gen);
    randomise_norms(svtr, gen);
    nn::save_model_file((dir / "svtr-lite.safetensors").string(), svtr, info_for("svtr-lite", svtr));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt_onnx_models: %s\n", e.what());
    return 2;
  }
  return 0;
}
