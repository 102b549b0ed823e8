// DBNet-lite: the text detector that reads whole pages (docs/pages.md), after DBNet (Liao et
// al., "Real-time Scene Text Detection with Differentiable Binarization", AAAI 2020), made small
// enough to run on two CPU cores. The PyTorch reference module is tools/reference/dbnet.py; its
// state_dict loads here unchanged, and the reverse.
//
//   x (N, 1, H, W), H and W multiples of 32, gray p / 127.5 - 1
//     -> stem: conv 3x3/2 + BN + ReLU                               (N, c0, H/2,  W/2)
//     -> stages.0..3: conv 3x3/2 + BN + ReLU, conv 3x3 + BN + ReLU   C2 (H/4) ... C5 (H/32)
//     -> lateral.i: conv 1x1 to `fpn` channels; top-down: P5 = L5, Pi = Li + up2(P(i+1))
//     -> smooth.i: conv 3x3 (fpn -> fpn/4) on each Pi, upsampled to H/4; concatenated
//        (P5, P4, P3, P2 in that order)                             F (N, fpn, H/4, W/4)
//     -> prob_head:   conv 3x3 + BN + ReLU, up2, conv 3x3 + BN + ReLU, up2, conv 3x3 -> (N, 1, H, W)
//     -> thresh_head: the same                                                        -> (N, 1, H, W)
//
// The probability head gives logits of "this pixel lies in a text line shrunk towards its
// centre line" (sigmoid gives the probability map that models/text_boxes.h reads); the threshold
// head is DB's learnt threshold, used only in training: the approximate binary map
// sigmoid(k (P - T)) with k = 50 is what makes the binarisation differentiable
// (train/det_loss.h). Inference runs the probability head alone.
//
// Differences from the paper's DBNet-ResNet18, and why: a plain 9-conv backbone (8 to 128
// channels) instead of ResNet-18 (11M parameters) so that a 2550 x 3300 page scaled to 1280
// pixels costs about 2 GFLOP; nearest upsampling followed by a 3x3 conv instead of transposed
// convolutions (the same receptive growth, no checkerboard, and one op less to maintain); one
// input channel, since ocrt reads pages in gray.
#pragma once
#include <array>
#include <memory>
#include <string>

#include "models/layers.h"
#include "models/text_boxes.h"
#include "runtime/image.h"
#include "runtime/json.h"

namespace ocrt::nn {

struct DBNetConfig {
  std::array<int64_t, 5> channels{8, 16, 32, 64, 128};  // the stem, then stages 0-3
  int64_t fpn = 32;   // the pyramid's channels (a multiple of 4: each level gives fpn/4 to F)
  int64_t head = 16;  // the heads' inner channels
  // Training targets (train/det_targets.h) and reading the map back (models/text_boxes.h) must
  // agree on how much a line was shrunk; the model file carries both.
  double shrink_ratio = 0.6;  // r: lines shrink by D = A (1 - r^2) / L (area A, perimeter L)
  // 0: a found region grows by the offset that exactly undoes the shrink (text_boxes'
  // shrink_ratio); > 0: by the paper's D' = A' u / L' instead.
  double unclip_ratio = 0;
  float threshold = 0.3f;     // a pixel is text when its probability is above this
  float box_threshold = 0.5f; // a region is kept when its mean probability is at least this

  // "dbnet" (the sizes above).
  static DBNetConfig preset(const std::string& name);
  Json to_json() const;
  static DBNetConfig from_json(const Json& j);  // throws naming the missing or bad field
};

// Nearest upsampling by a whole factor (torch.nn.Upsample(scale_factor=s, mode="nearest")).
class Upsample : public Module {
 public:
  explicit Upsample(int64_t scale) : scale(scale) {}
  Tensor forward(const Tensor& x) override;
  const int64_t scale;

 protected:
  const char* type_name() const override { return "Upsample"; }
};

class DBNet : public Module {
 public:
  DBNet(const DBNetConfig& config, Generator& gen);

  struct Maps {
    Tensor prob;    // (N, 1, H, W) logits of the shrunk text map
    Tensor thresh;  // (N, 1, H, W) logits of the threshold map; undefined unless asked for
  };
  // x (N, 1, H, W), H and W positive multiples of 32. The threshold head runs only when
  // `with_threshold` (training). In inference on the CPU (eval mode, grad off) the probability
  // head runs over bands of kHeadBandRows rows of its input (at 1/4 of the page) with
  // kHeadHalo rows of context on each side, and the bands' maps are joined: the same map (its
  // receptive field is 1.75 input rows on each side), without the 16-channel activations at
  // full resolution of the whole page at once (81 MB each for a 300 dpi page at 1280 pixels).
  Maps forward_maps(const Tensor& x, bool with_threshold);
  static constexpr int64_t kHeadBandRows = 64, kHeadHalo = 2;
  // The probability logits alone (N, 1, H, W).
  Tensor forward(const Tensor& x) override { return forward_maps(x, false).prob; }

  static constexpr int64_t kSizeMultiple = 32;  // the input's height and width must be multiples
  Json config_json() const { return config.to_json(); }
  // How this model's probability map is read (text_boxes): its threshold, box threshold, and
  // either the paper's unclip ratio or the exact inverse of the shrink it was trained with.
  TextBoxOptions box_options() const;

  const DBNetConfig config;
  std::shared_ptr<Sequential> stem;
  std::shared_ptr<ModuleList> stages;   // 4 Sequentials: C2 (H/4) .. C5 (H/32)
  std::shared_ptr<ModuleList> lateral;  // 4 Conv2d 1x1, for C2..C5
  std::shared_ptr<ModuleList> smooth;   // 4 Conv2d 3x3, for P2..P5
  std::shared_ptr<Sequential> prob_head, thresh_head;

 protected:
  const char* type_name() const override { return "DBNet"; }

 private:
  // Each band runs the probability head with each nearest 2x upsampling and the 3x3 convolution
  // after it (and its BatchNorm) as one 3x3 convolution of the smaller map into four times the
  // channels, then depth to space: the same map, without the upsampled activations.
  Tensor prob_head_in_bands(const Tensor& F) const;
  // The same modules as in the lists above, typed.
  std::array<std::shared_ptr<Sequential>, 4> stage_;
  std::array<std::shared_ptr<Conv2d>, 4> lateral_, smooth_;
};

// A page read the way inference reads it: scaled (area average) so that its longer side is at
// most max_side pixels (never enlarged), padded on the right and bottom with white to multiples
// of 32, normalised p / 127.5 - 1, run through the probability head on the model's device in
// eval mode without gradients, and the map's part over the scaled page turned into line
// outlines by text_boxes (with the model's threshold, box_threshold and unclip_ratio), in the
// page's own pixels. A page smaller than the detector's stride in either side is padded the same way.
// `prob_out` (optional) receives the probability map over the scaled page (height x width).
struct DetectedPage {
  std::vector<TextBox> boxes;
  int64_t map_width = 0, map_height = 0;  // the scaled page's size
  std::vector<float> prob;                // with keep_map only
  // Seconds spent: scaling the page into the input tensor; the model, its sigmoid and the map's
  // copy to the host (on a GPU this waits for the device); outlines from the map.
  double prepare_s = 0, forward_s = 0, boxes_s = 0;
};
DetectedPage detect_text_lines(DBNet& model, const GrayImage& page, int64_t max_side = 1280, bool keep_map = false);
// The page as detect_text_lines scales it for max_side (a copy of it when it is not scaled).
GrayImage scale_for_detection(const GrayImage& page, int64_t max_side);
// The same, the map read with `boxes` instead of the model's own box_options() (a caller's
// thresholds: ocrt-infer --det-threshold, --box-threshold).
// prescaled: scale_for_detection(page, max_side), when the caller has it already (the text
// detector, which blurs it for its descreening pass, infer/detector.h); outlines still come back
// in the page's pixels.
DetectedPage detect_text_lines(DBNet& model, const GrayImage& page, int64_t max_side, bool keep_map,
                               const TextBoxOptions& boxes, const GrayImage* prescaled = nullptr);

// The detector architectures: "dbnet".
bool is_detector_arch(const std::string& arch);
std::shared_ptr<DBNet> make_detector(const std::string& arch, Generator& gen);
std::shared_ptr<DBNet> make_detector(const std::string& arch, const Json& config, Generator& gen);

// The input spec of a detector's model file: gray, p / 127.5 - 1, sides multiples of 32.
Json detector_input_spec();

}  // namespace ocrt::nn
