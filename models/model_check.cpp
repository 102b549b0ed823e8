// Checking a model file's metadata and building a model from it (see model_check.h).
#include "models/model_check.h"

#include <cmath>

#include "models/int8.h"
#include "runtime/error.h"
#include "runtime/rng.h"

namespace ocrt::nn {

namespace {

void check_arch(const ModelInfo& info, const std::string& source, const ModelExpectation& want) {
  if (want.arch.empty() || want.arch == info.arch) return;
  if (want.arch_flag.empty()) fail(source, " holds a '", info.arch, "' model, but '", want.arch, "' was asked for");
  fail(source, " holds a '", info.arch, "' model, but ", want.arch_flag, " is ", want.arch);
}

void check_recognizer(const ModelInfo& info, const std::string& source, const ModelExpectation& want) {
  OCRT_CHECK(is_known_arch(info.arch), source, ": the model's architecture is '", info.arch,
             "', which this build does not know (it runs ", known_archs_str(), ")");
  check_arch(info, source, want);
  OCRT_CHECK(!want.charset || *want.charset == info.charset, source, " was trained with another charset");
  const Json* classes = info.config.find("num_classes");
  OCRT_CHECK(classes && classes->is_number(), source, ": the model's config has no 'num_classes'");
  OCRT_CHECK(classes->as_int() == (int64_t)info.charset.size() + 1, source, ": the model has ", classes->as_int(),
             " classes but its charset ", info.charset.size(), " characters (expected characters + 1 for the blank)");
}

void check_detector(const ModelInfo& info, const std::string& source, const ModelExpectation& want) {
  OCRT_CHECK(is_detector_arch(info.arch), source, " holds a '", info.arch,
             "' model, which is not a text detector (expected arch 'dbnet')");
  check_arch(info, source, want);
  // detect_text_lines feeds p / 127.5 - 1; a file asking for other input would be misread.
  const Json spec = detector_input_spec();
  for (const char* key : {"scale", "offset"}) {
    const Json* expected = spec.find(key);
    const Json* got = info.input.find(key);
    OCRT_CHECK(!got || !expected ||
                   (got->is_number() && std::abs(got->as_number() - expected->as_number()) < 1e-9),
               source, ": the detector's input spec has ", key, " ", got ? got->dump() : "", ", expected ",
               expected ? expected->dump() : "");
  }
}

}  // namespace

void check_model_info(const ModelInfo& info, const std::string& source, const ModelExpectation& want) {
  if (want.kind == ModelExpectation::Kind::detector) check_detector(info, source, want);
  else check_recognizer(info, source, want);
}

std::shared_ptr<Recognizer> build_recognizer(const std::string& arch, const Json& config, const StateDict& weights,
                                             const std::string& path, bool inference_only) {
  std::shared_ptr<Recognizer> model;
  try {
    Generator gen(0);
    {
      const ModelSizeGuard guard(weights, path);
      const SkipInit loaded_next;  // every parameter comes from `weights` (strict load)
      model = make_recognizer(arch, config, gen);
    }
    load_model_weights(*model, weights, inference_only);
  } catch (const Error& e) {
    const Json* classes = config.find("num_classes");
    fail(path, ": the weights do not fit a '", arch, "' model",
         classes && classes->is_number() ? " with " + std::to_string(classes->as_int()) + " classes" : std::string(),
         ": ", e.what());
  }
  model->eval();
  return model;
}

std::shared_ptr<DBNet> build_detector(const std::string& arch, const Json& config, const StateDict& weights,
                                      const std::string& path, bool inference_only) {
  std::shared_ptr<DBNet> model;
  try {
    Generator gen(0);
    {
      const ModelSizeGuard guard(weights, path);
      const SkipInit loaded_next;  // every parameter comes from `weights` (strict load)
      model = make_detector(arch, config, gen);
    }
    load_model_weights(*model, weights, inference_only);
  } catch (const Error& e) {
    fail(path, ": the weights do not fit its '", arch, "' model: ", e.what());
  }
  model->eval();
  return model;
}

}  // namespace ocrt::nn
