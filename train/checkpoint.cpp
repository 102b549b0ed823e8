// Training checkpoints (see checkpoint.h for the layout).
#include "train/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "runtime/safetensors.h"

namespace fs = std::filesystem;

namespace ocrt::train {

namespace {

constexpr const char* kFormat = "ocrt-checkpoint-1";

Json info_to_json(const nn::ModelInfo& info) {
  Json j = Json::object();
  j.set("arch", info.arch);
  j.set("config", info.config);
  Json cs = Json::array();
  for (const auto& c : info.charset) cs.push_back(c);
  j.set("charset", cs);
  j.set("input", info.input);
  j.set("training", info.training);
  return j;
}

nn::ModelInfo info_from_json(const Json& j) {
  nn::ModelInfo info;
  info.arch = j.at("arch").as_string();
  info.config = j.at("config");
  for (const Json& c : j.at("charset").as_array()) info.charset.push_back(c.as_string());
  info.input = j.at("input");
  if (const Json* t = j.find("training")) info.training = *t;
  return info;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof(name), "ckpt-%08lld.safetensors", (long long)step);
  return (fs::path(dir) / name).string();
}

void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer& optim,
                     const TrainState& state, const nn::ModelInfo& info) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : model.state_dict()) tensors.emplace_back("model." + name, t);
  for (auto& [key, t] : optim.state_dict()) tensors.emplace_back("optim." + key, t);
  Json s = Json::object();
  s.set("step", state.step);
  s.set("seed", std::to_string(state.seed));
  s.set("best_cer", state.best_cer);
  s.set("best_step", state.best_step);
  s.set("skipped_steps", state.skipped_steps);
  s.set("optimizer", std::string(optim.name()));
  s.set("settings", state.settings);
  save_safetensors(path, tensors, {{"format", kFormat}, {"state", s.dump()}, {"model", info_to_json(info).dump()}});
}

Checkpoint load_checkpoint(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  auto meta = [&](const char* key) -> const std::string& {
    auto it = f.metadata.find(key);
    OCRT_CHECK(it != f.metadata.end(), path, ": not an ocrt checkpoint (no '", key, "' in its metadata)");
    return it->second;
  };
  OCRT_CHECK(meta("format") == kFormat, path, ": checkpoint format '", meta("format"), "', expected '", kFormat, "'");
  Checkpoint c;
  c.path = path;
  try {
    Json s = parse_json(meta("state"));
    c.state.step = s.at("step").as_int();
    c.state.seed = std::stoull(s.at("seed").as_string());
    c.state.best_cer = s.at("best_cer").as_number();
    c.state.best_step = s.at("best_step").as_int();
    c.state.skipped_steps = s.at("skipped_steps").as_int();
    c.state.settings = s.at("settings");
    c.info = info_from_json(parse_json(meta("model")));
  } catch (const std::exception& e) {
    fail(path, ": damaged checkpoint metadata: ", e.what());
  }
  for (auto& [name, t] : f.tensors) {
    if (name.rfind("model.", 0) == 0) c.model[name.substr(6)] = t;
    else if (name.rfind("optim.", 0) == 0) c.optim[name.substr(6)] = t;
    else fail(path, ": unexpected tensor '", name, "' in a checkpoint");
  }
  return c;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && name.size() > 17 && name.substr(name.size() - 12) == ".safetensors" &&
        name.find(".tmp.") == std::string::npos)
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());  // zero-padded step numbers sort by step
  return out;
}

void prune_checkpoints(const std::string& dir, int64_t keep) {
  auto all = list_checkpoints(dir);
  for (int64_t i = 0; i + keep < (int64_t)all.size(); ++i) fs::remove(all[(size_t)i]);
}

}  // namespace ocrt::train
