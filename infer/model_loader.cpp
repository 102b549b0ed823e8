// Reading a model file as ocrt-infer does (see model_loader.h).
#include "infer/model_loader.h"

#include "models/int8.h"

namespace ocrt::infer {

nn::ModelInfo LoadedModel::info() const {
  nn::ModelInfo i;
  i.arch = arch;
  i.config = config;
  i.charset = charset.chars();
  i.input = input;
  i.training = training;
  return i;
}

namespace {
void check_arch_name(const std::string& arch) {
  OCRT_CHECK(arch.empty() || nn::is_known_arch(arch), "unknown architecture '", arch, "' (expected one of ",
             nn::known_archs_str(), ")");
}
}  // namespace

LoadedModel load_model(const std::string& path, const std::string& arch, const std::string& charset_path) {
  check_arch_name(arch);  // before the file is read: a typo in --arch is named first
  nn::ModelFile file;
  try {
    file = nn::load_model_file(path);
  } catch (const Error& e) {
    fail("cannot load the model file: ", e.what());
  }
  return load_model(std::move(file), arch, charset_path);
}

LoadedModel load_model(nn::ModelFile file, const std::string& arch, const std::string& charset_path) {
  check_arch_name(arch);
  const std::string path = file.path;
  LoadedModel m;
  m.path = path;
  m.input = nn::default_input_spec();
  if (file.info) {
    nn::check_model_info(*file.info, path, {nn::ModelExpectation::Kind::recognizer, arch, "", nullptr});
    m.arch = file.info->arch;
    try {
      m.charset = nn::Charset::from_chars(file.info->charset);
    } catch (const Error& e) {
      fail(path, ": ", e.what());
    }
    m.config = file.info->config;
    if (!charset_path.empty())
      OCRT_CHECK(nn::Charset::from_file(charset_path).chars() == m.charset.chars(), "the charset ", charset_path,
                 " differs from the one stored in ", path, " (a model file carries its own charset; leave --charset out)");
    m.input = file.info->input;
    m.training = file.info->training;
  } else {
    OCRT_CHECK(!arch.empty() && !charset_path.empty(), path,
               " holds weights only (no ocrt metadata): give the architecture (--arch ", nn::known_archs_str(), ") and the "
               "charset file (--charset FILE)");
    m.arch = arch;
    m.charset = nn::Charset::from_file(charset_path);
    Generator gen(0);
    m.config = nn::make_recognizer(m.arch, m.charset.num_classes(), gen)->config_json();
    m.weights_only = true;
  }
  m.weights = std::move(file.weights);
  return m;
}

std::shared_ptr<nn::Recognizer> build_model(const std::string& arch, const Json& config, const nn::StateDict& weights,
                                            bool inference_only) {
  Generator gen(0);
  std::shared_ptr<nn::Recognizer> model;
  {
    const nn::SkipInit loaded_next;  // every parameter comes from `weights` (strict load)
    model = nn::make_recognizer(arch, config, gen);
  }
  nn::load_model_weights(*model, weights, inference_only);
  model->eval();
  return model;
}

std::shared_ptr<nn::Recognizer> build_model(const LoadedModel& m, bool inference_only) {
  // The first build of a file's config (the predictor's later copies reuse it): bounded by the
  // size of its weights, so a config that does not fit them fails before allocating.
  return nn::build_recognizer(m.arch, m.config, m.weights, m.path, inference_only);
}

}  // namespace ocrt::infer
