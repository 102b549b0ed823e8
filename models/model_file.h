// Model files: one safetensors file that holds a recogniser's weights and, in its
// "__metadata__", everything needed to use them (docs/formats.md has the exact layout):
//
//   "format"         "ocrt-model-1"
//   "arch"           "crnn", "crnn-s", "svtr-lite", ...
//   "config"         the architecture config, JSON (channels, hidden, num_classes, ...)
//   "charset"        JSON array of the characters, class k+1 = charset[k] (0 is the CTC blank);
//                    empty for a text detector (models/dbnet.h), which reads no characters
//   "input"          JSON: {"height": 32, "channels": 1, "scale": 1/127.5, "offset": -1,
//                    "width_multiple": 4} — pixel p becomes p * scale + offset
//   "training"       JSON: a short record (data, steps, val CER, ...); optional
//
// Tensor names are the PyTorch state_dict names of the reference module, so a file exported
// from PyTorch also loads as weights only: then the caller supplies arch and charset. That is
// a file with no metadata, or with metadata that is plainly not ocrt's (e.g. {"format": "pt"},
// which safetensors.torch.save_file writes for Hugging Face), which is ignored with a note.
// Metadata that claims to be ocrt's (a format starting "ocrt", or an "arch" entry) is parsed
// strictly. Files are written atomically (runtime/safetensors.h).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/module.h"
#include "runtime/cpu_allocator.h"
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
  // A weights-only file's foreign metadata, which loading ignored (and named in its note).
  std::map<std::string, std::string> ignored_metadata;
};

// Writes module's state_dict and info to path.
void save_model_file(const std::string& path, const Module& module, const ModelInfo& info);
// The same for a state dict (an int8 file's, models/int8.h).
void save_model_file(const std::string& path, const StateDict& weights, const ModelInfo& info);
// Reads a model file; every float tensor must be finite (the first one holding a NaN or
// infinity is named). Its metadata is one of:
//   - ocrt's: "format" starts with "ocrt" or an "arch" entry is present. Every field is then
//     parsed and checked; a format other than "ocrt-model-1" (ocrt-model-2, or "pt" beside an
//     "arch") is refused as an unknown model file format;
//   - a training checkpoint's ("format" ocrt-checkpoint-1, train/checkpoint.h): its model, the
//     tensors "model.<name>" (without the prefix) and the fields of its "model" entry, checked as
//     a model file's; the optimizer's tensors are left out;
//   - none: weights only, no info;
//   - anything else (foreign, e.g. {"format": "pt"}): weights only, no info; the metadata is
//     kept in ignored_metadata and a one-line note naming the file and what was ignored goes
//     to stderr unless `quiet`.
ModelFile load_model_file(const std::string& path, bool quiet = false);

// The one-line note load_model_file prints for a file whose foreign metadata it ignored
// (without the trailing newline).
std::string ignored_metadata_note(const std::string& path, const std::map<std::string, std::string>& metadata);

// Building a model from a file's config, while this lives on the thread that builds it: the
// model's CPU tensors may take at most 4 times the file's values as float32, plus 64 MiB (the
// initialiser's temporaries). A config that asks for a far larger model than its weights (a
// 20 KB file whose config says 100,000 channels) fails at once with an error naming the file,
// before the model's memory is taken; the shapes are then compared by load_state_dict as always.
class ModelSizeGuard {
 public:
  ModelSizeGuard(const StateDict& weights, const std::string& path);

 private:
  static size_t budget(const StateDict& weights);
  CpuAllocationCap cap_;
};

// The input spec every ocrt model uses today: 32-high gray, p / 127.5 - 1, width multiple of 4.
Json default_input_spec();

}  // namespace ocrt::nn
