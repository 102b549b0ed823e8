// Training checkpoints: everything a run needs to continue exactly where it stopped.
//
// One safetensors file per checkpoint, DIR/ckpt-<step, 8 digits>.safetensors:
//   tensors  "model.<name>"   the model's state_dict (weights and BatchNorm running statistics)
//            "optim.<key>"    the optimizer's state_dict (its step count, moments, momentum)
//   metadata "format"         "ocrt-checkpoint-1"
//            "state"          JSON: step (the number of steps done), seed (as a string: 64
//                             bits do not fit a JSON number), best_cer, best_step,
//                             skipped_steps, and the run's settings
//            "model"          JSON: arch, config, charset, input (what a model file holds)
// The learning rate needs no state (schedules are functions of the step), and the data order
// needs none either (the loader's batch s depends only on the seed and s), so model +
// optimizer + step make a resumed run bit-identical to an uninterrupted one on the CPU.
// Files are written atomically (temp file + fsync + rename) by save_safetensors.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/model_file.h"
#include "runtime/json.h"
#include "train/optim.h"

namespace ocrt::train {

struct TrainState {
  int64_t step = 0;  // optimizer steps done (the next step to run)
  uint64_t seed = 0;
  double best_cer = -1;  // -1: no evaluation yet
  int64_t best_step = -1;
  int64_t skipped_steps = 0;  // steps skipped for a non-finite loss or gradient
  Json settings = Json::object();
};

struct Checkpoint {
  nn::StateDict model, optim;
  TrainState state;
  nn::ModelInfo info;
  std::string path;
};

std::string checkpoint_path(const std::string& dir, int64_t step);
void save_checkpoint(const std::string& path, const nn::Module& model, const Optimizer& optim,
                     const TrainState& state, const nn::ModelInfo& info);
Checkpoint load_checkpoint(const std::string& path);

// The checkpoints in dir, oldest first ("" entries never; an empty list when none).
std::vector<std::string> list_checkpoints(const std::string& dir);
// Deletes all but the newest `keep` checkpoints.
void prune_checkpoints(const std::string& dir, int64_t keep);

}  // namespace ocrt::train
