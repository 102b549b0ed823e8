// Reading a recogniser's model file as ocrt-infer does, for the predictor and for ocrt-export:
// an ocrt model file (docs/formats.md) carries its arch, config, charset and input spec; a
// weights-only file (a PyTorch export: no metadata, or metadata that is not ocrt's) needs the
// arch and a charset file, and gets the arch's preset sizes for that charset.
#pragma once
#include <memory>
#include <string>

#include "models/charset.h"
#include "models/model_check.h"
#include "models/model_file.h"
#include "models/recognizer.h"

namespace ocrt::infer {

struct LoadedModel {
  std::string path;
  std::string arch;
  Json config;           // the architecture config (a model file's "config")
  nn::Charset charset;
  Json input;            // the input spec (nn::default_input_spec() for a weights-only file)
  Json training = Json::object();  // the model file's training record, if any
  nn::StateDict weights;  // on the CPU, as stored
  bool weights_only = false;  // the file had no ocrt metadata

  // What a model file would store about it (arch, config, charset, input, training).
  nn::ModelInfo info() const;
};

// Reads and checks a model file. arch and charset_path: required for a weights-only file;
// for an ocrt model file, optional, and when given they must match the file's own (an error
// says what differs). A corrupt file, an unknown arch, a charset that does not match the class
// count all throw, naming the file.
LoadedModel load_model(const std::string& path, const std::string& arch = "", const std::string& charset_path = "");
// The same for a model file already read (nn::load_model_file), named by its path.
LoadedModel load_model(nn::ModelFile file, const std::string& arch = "", const std::string& charset_path = "");

// The recogniser of m's arch and config with m's weights (loaded strictly: a missing,
// unexpected or misshapen tensor is an error that lists them all, naming the file), in eval mode
// on the CPU. inference_only (the predictor): an int8 file's layers keep no float32 copy of their
// weights (models/int8.h, load_model_weights).
std::shared_ptr<nn::Recognizer> build_model(const LoadedModel& m, bool inference_only = false);
// The same from its parts (the predictor's workers each build their own copy), without the
// file's name in the error.
std::shared_ptr<nn::Recognizer> build_model(const std::string& arch, const Json& config, const nn::StateDict& weights,
                                            bool inference_only = false);

}  // namespace ocrt::infer
