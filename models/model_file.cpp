// Model files: safetensors + metadata (see model_file.h).
#include "models/model_file.h"

#include <cmath>

#include "runtime/safetensors.h"

namespace ocrt::nn {

namespace {
constexpr const char* kFormat = "ocrt-model-1";

Json parse_field(const std::map<std::string, std::string>& meta, const char* key, const std::string& path) {
  auto it = meta.find(key);
  OCRT_CHECK(it != meta.end(), path, ": model file metadata has no '", key, "' entry");
  try {
    return parse_json(it->second);
  } catch (const Error& e) {
    fail(path, ": model file metadata '", key, "' is not valid JSON: ", e.what());
  }
}
}  // namespace

Json default_input_spec() {
  Json j = Json::object();
  j.set("height", 32);
  j.set("channels", 1);
  j.set("scale", 1.0 / 127.5);
  j.set("offset", -1.0);
  j.set("width_multiple", 4);
  return j;
}

void save_model_file(const std::string& path, const Module& module, const ModelInfo& info) {
  OCRT_CHECK(!info.arch.empty(), "save_model_file: the architecture name is empty");
  OCRT_CHECK(!info.charset.empty(), "save_model_file: the charset is empty");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : module.state_dict()) tensors.emplace_back(name, t);
  Json charset = Json::array();
  for (const auto& c : info.charset) charset.push_back(c);
  std::map<std::string, std::string> meta{
      {"format", kFormat},
      {"arch", info.arch},
      {"config", info.config.dump()},
      {"charset", charset.dump()},
      {"input", info.input.dump()},
      {"training", info.training.dump()},
  };
  save_safetensors(path, tensors, meta);
}

ModelFile load_model_file(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  // A NaN or infinite weight makes every line's output NaN: refused here, naming the first
  // such tensor in the file's order, rather than met as unusable numbers at the end of a run.
  for (const auto& [name, t] : f.tensors) {
    auto first_bad = [&](auto* v) -> int64_t {
      const Tensor c = t.contiguous();
      const auto* x = c.data<std::remove_pointer_t<decltype(v)>>();
      for (int64_t i = 0; i < c.numel(); ++i)
        if (!std::isfinite(x[i])) return i;
      return -1;
    };
    int64_t bad = -1;
    double value = 0;
    if (t.dtype() == DType::f32) {
      bad = first_bad((float*)nullptr);
      if (bad >= 0) value = t.contiguous().data<float>()[bad];
    } else if (t.dtype() == DType::f64) {
      bad = first_bad((double*)nullptr);
      if (bad >= 0) value = t.contiguous().data<double>()[bad];
    }
    OCRT_CHECK(bad < 0, path, ": tensor '", name, "' holds a non-finite value (", value, " at element ", bad,
               " of ", t.numel(), "); the model file is damaged or its training diverged");
  }
  ModelFile out;
  out.path = path;
  for (auto& [name, t] : f.tensors) out.weights[name] = t;
  const auto& meta = f.metadata;
  if (!meta.count("format") && !meta.count("arch")) return out;  // weights only

  auto format = meta.find("format");
  OCRT_CHECK(format != meta.end() && format->second == kFormat, path, ": unknown model file format '",
             format == meta.end() ? std::string("(none)") : format->second, "' (expected ", kFormat, ")");
  ModelInfo info;
  auto arch = meta.find("arch");
  OCRT_CHECK(arch != meta.end() && !arch->second.empty(), path, ": model file metadata has no 'arch' entry");
  info.arch = arch->second;
  info.config = parse_field(meta, "config", path);
  OCRT_CHECK(info.config.is_object(), path, ": model file 'config' must be a JSON object");
  const Json charset = parse_field(meta, "charset", path);
  OCRT_CHECK(charset.is_array() && charset.size() > 0, path, ": model file 'charset' must be a non-empty JSON array");
  for (size_t i = 0; i < charset.size(); ++i) {
    OCRT_CHECK(charset[i].is_string() && !charset[i].as_string().empty(), path, ": charset entry ", i,
               " is not a non-empty string");
    info.charset.push_back(charset[i].as_string());
  }
  info.input = parse_field(meta, "input", path);
  OCRT_CHECK(info.input.is_object(), path, ": model file 'input' must be a JSON object");
  if (meta.count("training")) info.training = parse_field(meta, "training", path);
  out.info = std::move(info);
  return out;
}

}  // namespace ocrt::nn
