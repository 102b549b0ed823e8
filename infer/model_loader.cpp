// Reading a model file as ocrt-infer does (see model_loader.h).
#include "infer/model_loader.h"

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

LoadedModel load_model(const std::string& path, const std::string& arch, const std::string& charset_path) {
  OCRT_CHECK(arch.empty() || nn::is_known_arch(arch), "unknown architecture '", arch, "' (expected one of ",
             nn::known_archs_str(), ")");
  nn::ModelFile file;
  try {
    file = nn::load_model_file(path);
  } catch (const Error& e) {
    fail("cannot load the model file: ", e.what());
  }
  LoadedModel m;
  m.path = path;
  m.input = nn::default_input_spec();
  if (file.info) {
    m.arch = file.info->arch;
    OCRT_CHECK(nn::is_known_arch(m.arch), path, ": the model's architecture is '", m.arch,
               "', which this build does not know (it runs ", nn::known_archs_str(), ")");
    OCRT_CHECK(arch.empty() || arch == m.arch, path, " holds a '", m.arch, "' model, but '", arch, "' was asked for");
    try {
      m.charset = nn::Charset::from_chars(file.info->charset);
      m.config = file.info->config;
    } catch (const Error& e) {
      fail(path, ": ", e.what());
    }
    if (!charset_path.empty())
      OCRT_CHECK(nn::Charset::from_file(charset_path).chars() == m.charset.chars(), "the charset ", charset_path,
                 " differs from the one stored in ", path, " (a model file carries its own charset; leave --charset out)");
    const Json* classes = m.config.find("num_classes");
    OCRT_CHECK(classes && classes->is_number(), path, ": the model's config has no 'num_classes'");
    OCRT_CHECK(classes->as_int() == m.charset.num_classes(), path, ": the model has ", classes->as_int(),
               " classes but its charset ", m.charset.size(), " characters (expected characters + 1 for the blank)");
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

std::shared_ptr<nn::Recognizer> build_model(const std::string& arch, const Json& config, const nn::StateDict& weights) {
  Generator gen(0);  // the initial values are overwritten at once
  auto model = nn::make_recognizer(arch, config, gen);
  model->load_state_dict(weights);
  model->eval();
  return model;
}

std::shared_ptr<nn::Recognizer> build_model(const LoadedModel& m) {
  try {
    // The first build of a file's config (the predictor's later copies reuse it): bounded by
    // the size of its weights, so a config that does not fit them fails before allocating.
    const nn::ModelSizeGuard guard(m.weights, m.path);
    return build_model(m.arch, m.config, m.weights);
  } catch (const Error& e) {
    fail(m.path, ": the weights do not fit a '", m.arch, "' model with ", m.charset.num_classes(), " classes: ",
         e.what());
  }
}

}  // namespace ocrt::infer
