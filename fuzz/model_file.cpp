// Fuzz target: model files (models/model_file.h): safetensors with ocrt's "__metadata__", read
// from a path as ocrt-infer --model does, then checked as infer/predictor.cpp checks a model
// before building it (architecture, charset, class count, architecture config). An int8 model
// file (models/int8.h) is also built, as the predictor builds it: its codes, scales and input
// scales checked, dequantized and packed for the int8 kernels.
#include <cmath>

#include "fuzz/fuzz_common.h"
#include "models/charset.h"
#include "models/crnn.h"
#include "models/int8.h"
#include "models/model_check.h"
#include "models/model_file.h"
#include "models/recognizer.h"
#include "models/svtr_lite.h"

using namespace ocrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("model.safetensors", data, size);
  nn::ModelFile file;
  try {
    file = nn::load_model_file(path);
  } catch (const Error&) {
    return 0;
  }
  for (const auto& [name, t] : file.weights) {
    FUZZ_EXPECT(t.defined() && t.device().is_cpu());
    if (t.dtype() == DType::f32) {
      const Tensor c = t.contiguous();
      for (int64_t i = 0; i < c.numel(); ++i) FUZZ_EXPECT(std::isfinite(c.data<float>()[i]));
    }
  }
  if (!file.info) return 0;
  const nn::ModelInfo& info = *file.info;
  FUZZ_EXPECT(!info.arch.empty() && !info.charset.empty());
  FUZZ_EXPECT(info.config.is_object() && info.input.is_object());
  try {
    const nn::Charset charset = nn::Charset::from_chars(info.charset);
    FUZZ_EXPECT(charset.size() == (int64_t)info.charset.size());
    if (nn::is_known_arch(info.arch)) {
      if (info.arch == "svtr-lite") (void)nn::SVTRLiteConfig::from_json(info.config);
      else (void)nn::CRNNConfig::from_json(info.config);
      if (nn::is_int8_state_dict(file.weights)) {
        auto model = nn::build_recognizer(info.arch, info.config, file.weights, path);
        FUZZ_EXPECT(model != nullptr);
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
