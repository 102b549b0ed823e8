// Model files: safetensors + metadata (see model_file.h).
#include "models/model_file.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "models/dbnet.h"
#include "runtime/safetensors.h"

namespace ocrt::nn {

namespace {
constexpr const char* kFormat = "ocrt-model-1";
constexpr const char* kCheckpointFormat = "ocrt-checkpoint-1";  // train/checkpoint.h

// Metadata that claims to be ocrt's: a format named "ocrt..." (any case: ocrt-model-2, a
// checkpoint's ocrt-checkpoint-1, a golden fixture's ocrt-golden-1) or an "arch" entry, which only
// ocrt writes among the metadata seen in the wild. Such metadata is checked strictly; all other
// metadata is foreign (Hugging Face's {"format": "pt"}, an exporter's own notes) and ignored.
bool claims_to_be_ocrt(const std::map<std::string, std::string>& meta) {
  auto format = meta.find("format");
  if (format != meta.end()) {
    std::string head = format->second.substr(0, 4);
    for (char& c : head) c = (char)std::tolower((unsigned char)c);
    if (head == "ocrt") return true;
  }
  return meta.count("arch") > 0;
}

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

size_t ModelSizeGuard::budget(const StateDict& weights) {
  size_t bytes = 0;
  for (const auto& [name, t] : weights) bytes += (size_t)t.numel() * sizeof(float);
  return 4 * bytes + (size_t(64) << 20);
}

ModelSizeGuard::ModelSizeGuard(const StateDict& weights, const std::string& path)
    : cap_(budget(weights), path + ": the model's config asks for a larger model than its weights (the config and "
                                   "the tensors do not belong together): building it") {}

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
  save_model_file(path, module.state_dict(), info);
}

void save_model_file(const std::string& path, const StateDict& weights, const ModelInfo& info) {
  OCRT_CHECK(!info.arch.empty(), "save_model_file: the architecture name is empty");
  OCRT_CHECK(!info.charset.empty() || is_detector_arch(info.arch), "save_model_file: the charset is empty");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : weights) tensors.emplace_back(name, t);
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

std::string ignored_metadata_note(const std::string& path, const std::map<std::string, std::string>& metadata) {
  Json j = Json::object();
  for (const auto& [k, v] : metadata) j.set(k, v);
  std::string shown = j.dump();  // one line: JSON escapes newlines and control characters
  constexpr size_t kMaxShown = 160;
  if (shown.size() > kMaxShown) {
    size_t cut = kMaxShown;
    while (cut > 0 && ((unsigned char)shown[cut] & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
    shown = shown.substr(0, cut) + "...";
  }
  return "note: " + path + ": ignored metadata that is not ocrt's " + shown + "; read as weights only";
}

ModelFile load_model_file(const std::string& path, bool quiet) {
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
  std::map<std::string, std::string> meta = f.metadata;
  const bool checkpoint = meta.count("format") && meta.at("format") == kCheckpointFormat;
  if (checkpoint) {
    // A training checkpoint (train/checkpoint.h): its model is the tensors "model.<name>" and
    // the metadata "model", a JSON object of the fields a model file holds one by one; the
    // optimizer's state ("optim.*") and the run's ("state") are for resuming, not for reading.
    const Json model = parse_field(meta, "model", path);
    OCRT_CHECK(model.is_object(), path, ": checkpoint metadata 'model' must be a JSON object");
    std::map<std::string, std::string> fields{{"format", kFormat}};
    for (const char* key : {"arch", "config", "charset", "input", "training"}) {
      const Json* v = model.find(key);
      if (!v) continue;
      fields[key] = std::string(key) == "arch" && v->is_string() ? v->as_string() : v->dump();
    }
    meta = std::move(fields);
    for (auto& [name, t] : f.tensors)
      if (name.rfind("model.", 0) == 0) out.weights[name.substr(6)] = t;
    OCRT_CHECK(!out.weights.empty(), path, ": a checkpoint without model tensors ('model.<name>')");
  } else {
    for (auto& [name, t] : f.tensors) out.weights[name] = t;
  }
  if (meta.empty()) return out;  // weights only
  if (!claims_to_be_ocrt(meta)) {  // weights only, with someone else's notes
    out.ignored_metadata = meta;
    if (!quiet) std::fprintf(stderr, "%s\n", ignored_metadata_note(path, meta).c_str());
    return out;
  }

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
  // A detector reads no characters: its charset is the one array that may be empty.
  OCRT_CHECK(charset.is_array() && (charset.size() > 0 || is_detector_arch(info.arch)), path,
             ": model file 'charset' must be a non-empty JSON array");
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
