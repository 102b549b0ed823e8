// Recognizer: what the trainer and the predictor need from a text-line model, whatever its
// architecture (CRNN, SVTR-lite, ...), and the one place that maps an architecture name to a
// model class.
//
// Every recogniser reads a batch of gray lines x (N, 1, 32, W), W a multiple of 4, together with
// each line's true width, and returns CTC logits (T, N, num_classes) with class 0 the blank.
// Lines are padded on the right to the batch's widest; a recogniser must give each line the
// result it would get alone (so batching never changes what is read).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/module.h"
#include "runtime/json.h"

namespace ocrt::nn {

class Recognizer : public Module {
 public:
  // x (N, 1, 32, W) -> logits (T, N, num_classes()), T = frames_for_width(W). widths: each
  // line's true width (a multiple of 4, at most W); empty means all W.
  virtual Tensor forward(const Tensor& x, const std::vector<int64_t>& widths) = 0;
  Tensor forward(const Tensor& x) override { return forward(x, {}); }

  // Output frames for a line of (padded) width W; CTC needs at least as many frames as the
  // label has characters plus one per repeated pair.
  virtual int64_t frames_for_width(int64_t width) const = 0;
  // The input column that output frame t is centred on (for character positions).
  virtual double frame_center(int64_t t) const = 0;
  // How many input columns past a line's last one its logits can depend on (the receptive field
  // to the right). The predictor pads every batch with that many white columns past its widest
  // line, so that the widest line sees the same white as the narrower ones.
  virtual int64_t right_context() const = 0;
  virtual int64_t num_classes() const = 0;
  // The channels of the model's first block (a CRNN's first convolution, an SVTR's patch
  // embedding): what its largest activations hold per input column. The predictor caps a CPU
  // batch's columns by it (infer/predictor.h, cpu_batch_columns).
  virtual int64_t first_channels() const = 0;
  // The architecture config, as stored in model files ("config", models/model_file.h).
  virtual Json config_json() const = 0;
  // What the model reads, as stored in model files ("input"): every recogniser today takes
  // 32-high gray lines, p / 127.5 - 1, widths a multiple of 4 (nn::default_input_spec()).
  virtual Json input_spec() const;
};

// The architecture names make_recognizer knows, for messages: "crnn, crnn-s, svtr-lite".
std::vector<std::string> known_archs();
bool is_known_arch(const std::string& arch);
std::string known_archs_str();

// A freshly initialised model of a named preset for num_classes classes (blank included).
std::shared_ptr<Recognizer> make_recognizer(const std::string& arch, int64_t num_classes, Generator& gen);
// A model from a stored config (a model file's "config"); throws naming a bad field.
std::shared_ptr<Recognizer> make_recognizer(const std::string& arch, const Json& config, Generator& gen);

// frames_for_width of an architecture without building a model (the data pipeline checks that a
// label fits its image before any model exists).
int64_t frames_for_width(const std::string& arch, int64_t width);

}  // namespace ocrt::nn
