// CRNN (Shi, Bai & Yao, "An End-to-End Trainable Neural Network for Image-based Sequence
// Recognition", 2015) exactly as docs/models.md specifies it, so that a state_dict of the
// PyTorch reference module (tools/reference/crnn.py) loads unchanged, and the reverse.
//
//   x (N, 1, 32, W)  -> cnn (7 convs, 4 max-pools, 3 BatchNorms) -> (N, c6, 1, T), T = W/4 + 1
//                    -> (T, N, c6) -> 2-layer bidirectional LSTM -> Linear -> (T, N, classes)
#pragma once
#include <array>
#include <memory>
#include <string>

#include "models/layers.h"
#include "models/recognizer.h"
#include "runtime/json.h"

namespace ocrt::nn {

struct CRNNConfig {
  std::array<int64_t, 7> channels{64, 128, 256, 256, 512, 512, 512};
  int64_t hidden = 256;
  int64_t num_classes = 96;  // blank + the charset
  // false: no BatchNorm (Identity in its place, and the three convs before it get a bias), so
  // that a line's result never depends on the rest of its batch; data-parallel equivalence
  // tests use it (docs/distributed.md). Stored in the config only when false.
  bool batch_norm = true;

  // "crnn" or "crnn-s" (docs/models.md's presets) for a charset of num_classes - 1 characters.
  static CRNNConfig preset(const std::string& name, int64_t num_classes);
  Json to_json() const;
  static CRNNConfig from_json(const Json& j);  // throws naming the missing or bad field
};

class CRNN : public Recognizer {
 public:
  CRNN(const CRNNConfig& config, Generator& gen);
  // x (N, 1, 32, W), W a multiple of 4 -> logits (T, N, num_classes). widths: each line's true
  // width in pixels (a multiple of 4, at most W); the LSTM then stops at each line's own last
  // frame, so the padding a batch adds does not change a line's result. Empty: all W.
  Tensor forward(const Tensor& x, const std::vector<int64_t>& widths) override;
  using Recognizer::forward;
  // Frames the model emits for a line of width W: W / 4 + 1.
  static int64_t frames(int64_t width) { return width / 4 + 1; }
  int64_t frames_for_width(int64_t width) const override { return frames(width); }
  // Four input columns per frame; the pools' padding puts frame t's centre near column 4t + 1.5.
  double frame_center(int64_t t) const override { return 4.0 * (double)t + 1.5; }
  int64_t first_channels() const override { return config.channels[0]; }
  // Frame t reads input columns up to 4t + 26 (three 3x3 convs and two 2x2 pools at full and
  // half width, then the stride-(2,1) pools and the final 2x2 conv); the last frame of a line of
  // width w is t = w / 4: 27 columns past its end (tests/infer checks that more changes nothing).
  int64_t right_context() const override { return 27; }
  int64_t num_classes() const override { return config.num_classes; }
  Json config_json() const override { return config.to_json(); }

  const CRNNConfig config;
  std::shared_ptr<Sequential> cnn;
  std::shared_ptr<LSTM> rnn;
  std::shared_ptr<Linear> fc;

 protected:
  const char* type_name() const override { return "CRNN"; }
};

}  // namespace ocrt::nn
