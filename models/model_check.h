// The one place that checks a model file (or a checkpoint) against what its reader expects and
// builds a model from it. ocrt-infer and ocrt-export (infer/model_loader.h), the page reader's
// detector (infer/detector.h) and both trainers' --init and --resume (train/train_loop.h,
// train/det_trainer.cpp) all come through here, so a file is refused with the same words
// wherever it is read.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/dbnet.h"
#include "models/model_file.h"
#include "models/recognizer.h"

namespace ocrt::nn {

// What a reader expects of a model's metadata.
struct ModelExpectation {
  enum class Kind { recognizer, detector };
  Kind kind = Kind::recognizer;
  std::string arch;  // the arch asked for; empty accepts any arch of the kind
  // The flag that asked for it, for the message ("... but --arch is crnn"); empty: "... but
  // 'crnn' was asked for".
  std::string arch_flag;
  // A recogniser's charset that must match the file's; null accepts the file's own.
  const std::vector<std::string>* charset = nullptr;
};

// Checks info against want; every error begins with `source` (a path, or "--init: PATH"):
//   - the arch is one this build knows, of the expected kind (a recogniser or a detector);
//   - it is the arch asked for;
//   - a recogniser's charset is the expected one, and its config's num_classes is the charset's
//     size + 1 (the CTC blank);
//   - a detector's input spec asks for the normalisation detect_text_lines feeds (p / 127.5 - 1).
void check_model_info(const ModelInfo& info, const std::string& source, const ModelExpectation& want);

// A model of arch and config holding weights (loaded strictly: a missing, unexpected or
// misshapen tensor is an error that lists them all), in eval mode on the CPU. Building is
// bounded by the size of the weights (ModelSizeGuard), so a config that does not fit them fails
// before its memory is taken. Errors name `path`. inference_only: as load_model_weights's
// (models/int8.h): an int8 file's layers keep no float32 copy of their weights.
std::shared_ptr<Recognizer> build_recognizer(const std::string& arch, const Json& config, const StateDict& weights,
                                             const std::string& path, bool inference_only = false);
std::shared_ptr<DBNet> build_detector(const std::string& arch, const Json& config, const StateDict& weights,
                                      const std::string& path, bool inference_only = false);

}  // namespace ocrt::nn
