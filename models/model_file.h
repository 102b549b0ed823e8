// Model files: one safetensors file that holds a recogniser's weights and, in its
// "__metadata__", everything needed to use them (docs/formats.md has the exact layout):
//
//   "format"         "ocrt-model-1"
//   "arch"           "crnn", "crnn-s", "svtr-lite", ...
//   "config"         the architecture config, JSON (channels, hidden, num_classes, ...)
//   "charset"        JSON array of the characters, class k+1 = charset[k] (0 is the CTC blank)
//   "input"          JSON: {"height": 32, "channels": 1, "scale": 1/127.5, "offset": -1,
//                    "width_multiple": 4} — pixel p becomes p * scale + offset
//   "training"       JSON: a short record (data, steps, val CER, ...); optional
//
// Tensor names are the PyTorch state_dict names of the reference module, so a file exported
// from PyTorch (weights only, no metadata) also loads: then the caller supplies arch and
// charset. Files are written atomically (runtime/safetensors.h).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "models/module.h"
#include "runtime/json.h"

namespace ocrt::nn {

struct ModelInfo {
  std::string arch;
  Json config = Json::object();
  std::vector<std::string> charset;  // one UTF-8 character each
  Json input = Json::object();
  Json training = Json::object();
};

struct ModelFile {
  StateDict weights;            // on the CPU, as stored
  std::optional<ModelInfo> info;  // absent for a weights-only (e.g. PyTorch-exported) file
  std::string path;
};

// Writes module's state_dict and info to path.
void save_model_file(const std::string& path, const Module& module, const ModelInfo& info);
// Reads a model file; every metadata field present is parsed and checked (a corrupt or
// foreign file fails here with the path and what is wrong), and every float tensor must be
// finite (the first one holding a NaN or infinity is named).
ModelFile load_model_file(const std::string& path);

// The input spec every ocrt model uses today: 32-high gray, p / 127.5 - 1, width multiple of 4.
Json default_input_spec();

}  // namespace ocrt::nn
