// DBNet-lite: the layer table of dbnet.h, in code.
#include "models/dbnet.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "models/int8.h"
#include "models/model_file.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "runtime/error.h"

namespace ocrt::nn {

DBNetConfig DBNetConfig::preset(const std::string& name) {
  OCRT_CHECK(name == "dbnet", "unknown detector preset '", name, "' (expected dbnet)");
  return DBNetConfig{};
}

Json DBNetConfig::to_json() const {
  Json ch = Json::array();
  for (int64_t c : channels) ch.push_back(c);
  Json j = Json::object();
  j.set("channels", ch);
  j.set("fpn", fpn);
  j.set("head", head);
  j.set("shrink_ratio", shrink_ratio);
  j.set("unclip_ratio", unclip_ratio);
  j.set("threshold", (double)threshold);
  j.set("box_threshold", (double)box_threshold);
  return j;
}

DBNetConfig DBNetConfig::from_json(const Json& j) {
  OCRT_CHECK(j.is_object(), "DBNet config: expected a JSON object");
  DBNetConfig c;
  const Json* ch = j.find("channels");
  OCRT_CHECK(ch && ch->is_array() && ch->size() == 5, "DBNet config: 'channels' must be an array of 5 integers");
  for (size_t i = 0; i < 5; ++i) {
    c.channels[i] = (*ch)[i].as_int();
    OCRT_CHECK(c.channels[i] >= 1, "DBNet config: channel count ", i, " must be >= 1");
  }
  OCRT_CHECK(j.contains("fpn") && j.contains("head"), "DBNet config: needs 'fpn' and 'head'");
  c.fpn = j.at("fpn").as_int();
  c.head = j.at("head").as_int();
  OCRT_CHECK(c.fpn >= 4 && c.fpn % 4 == 0, "DBNet config: 'fpn' must be a positive multiple of 4, got ", c.fpn);
  OCRT_CHECK(c.head >= 1, "DBNet config: 'head' must be >= 1, got ", c.head);
  auto real = [&](const char* name, double lo, double hi, double& out) {
    if (const Json* v = j.find(name)) {
      OCRT_CHECK(v->is_number(), "DBNet config: '", name, "' must be a number");
      out = v->as_number();
      OCRT_CHECK(out >= lo && out <= hi, "DBNet config: '", name, "' must be in [", lo, ", ", hi, "], got ", out);
    }
  };
  real("shrink_ratio", 0.05, 0.95, c.shrink_ratio);
  real("unclip_ratio", 0, 20, c.unclip_ratio);
  double t = c.threshold, bt = c.box_threshold;
  real("threshold", 0, 1, t);
  real("box_threshold", 0, 1, bt);
  c.threshold = (float)t, c.box_threshold = (float)bt;
  return c;
}

Tensor Upsample::forward(const Tensor& x) { return upsample_nearest2d(x, {scale, scale}); }

namespace {

// conv 3x3 (stride s, padding 1, no bias) + BatchNorm + ReLU, appended to seq.
void conv_bn_relu(Sequential& seq, int64_t in, int64_t out, int64_t stride, Generator& gen) {
  Conv2dOptions o;
  o.stride = {stride, stride};
  o.padding = {1, 1};
  seq.add(std::make_shared<Conv2d>(in, out, Pair{3, 3}, gen, o, false));
  seq.add(std::make_shared<BatchNorm2d>(out));
  seq.add(std::make_shared<ReLU>());
}

// A head: F (N, fpn, H/4, W/4) -> (N, 1, H, W) logits.
//   0 conv 3x3, 1 BN, 2 ReLU, 3 up2, 4 conv 3x3, 5 BN, 6 ReLU, 7 up2, 8 conv 3x3 (with bias)
std::shared_ptr<Sequential> make_head(int64_t in, int64_t mid, Generator& gen) {
  auto h = std::make_shared<Sequential>();
  conv_bn_relu(*h, in, mid, 1, gen);
  h->add(std::make_shared<Upsample>(2));
  conv_bn_relu(*h, mid, mid, 1, gen);
  h->add(std::make_shared<Upsample>(2));
  Conv2dOptions o;
  o.padding = {1, 1};
  h->add(std::make_shared<Conv2d>(mid, 1, Pair{3, 3}, gen, o, true));
  return h;
}

}  // namespace

DBNet::DBNet(const DBNetConfig& cfg, Generator& gen) : config(cfg) {
  const auto& c = cfg.channels;
  stem = register_module("stem", std::make_shared<Sequential>());
  conv_bn_relu(*stem, 1, c[0], 2, gen);
  stages = register_module("stages", std::make_shared<ModuleList>());
  for (int i = 0; i < 4; ++i) {
    stage_[i] = stages->add(std::make_shared<Sequential>());
    conv_bn_relu(*stage_[i], c[i], c[i + 1], 2, gen);
    conv_bn_relu(*stage_[i], c[i + 1], c[i + 1], 1, gen);
  }
  lateral = register_module("lateral", std::make_shared<ModuleList>());
  smooth = register_module("smooth", std::make_shared<ModuleList>());
  for (int i = 0; i < 4; ++i) {
    lateral_[i] = lateral->add(std::make_shared<Conv2d>(c[i + 1], cfg.fpn, Pair{1, 1}, gen, Conv2dOptions{}, false));
    Conv2dOptions o;
    o.padding = {1, 1};
    smooth_[i] = smooth->add(std::make_shared<Conv2d>(cfg.fpn, cfg.fpn / 4, Pair{3, 3}, gen, o, false));
  }
  prob_head = register_module("prob_head", make_head(cfg.fpn, cfg.head, gen));
  thresh_head = register_module("thresh_head", make_head(cfg.fpn, cfg.head, gen));
}

DBNet::Maps DBNet::forward_maps(const Tensor& x, bool with_threshold) {
  OCRT_CHECK(x.defined() && x.dim() == 4 && x.size(1) == 1, "DBNet: expected input (N, 1, H, W), got ",
             x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  OCRT_CHECK(x.size(2) >= kSizeMultiple && x.size(3) >= kSizeMultiple && x.size(2) % kSizeMultiple == 0 &&
                 x.size(3) % kSizeMultiple == 0,
             "DBNet: the input's height and width must be positive multiples of ", kSizeMultiple, ", got ",
             x.size(2), "x", x.size(3));
  // The backbone: C[i] at 1/4, 1/8, 1/16, 1/32 of the input.
  std::array<Tensor, 4> C;
  Tensor y = stem->forward(x);
  for (int i = 0; i < 4; ++i) C[i] = y = stage_[i]->forward(y);
  y = Tensor();
  // The pyramid, top-down: P5 = L5, Pi = Li + up2(P(i+1)). Each level smoothed to fpn/4 channels
  // and brought to 1/4: F = cat(P5, P4, P3, P2). Without gradients each level goes into its
  // slice of F as soon as it is made, and each C and P is let go once used: a page's detector
  // then holds F and one level's maps at a time (with the head's bands written straight into
  // the map, 131 MiB of tensors at most at 2048 pixels instead of 161, 51 at 1280 instead of 69:
  // bench_layers --page PAGE --side N; with the upsampled maps written in place, below, 81 and
  // 35 MiB, and 31.5 at 1280 with the stem summed without im2col, ops/cpu/conv_direct.h).
  const bool inference = !is_training() && !grad_enabled();
  std::array<Tensor, 4> P;
  Tensor F;
  const int64_t part_channels = smooth_[0]->weight.size(0);
  const auto smoothed = [&](int i) {
    Tensor s = smooth_[i]->forward(P[(size_t)i]);
    const int64_t up = int64_t(1) << i;
    return up > 1 ? upsample_nearest2d(s, {up, up}) : s;
  };
  // On the CPU the upsampled maps are never made as tensors of their own: each level's smoothed
  // map is written upsampled straight into its slice of F, and the top-down sum adds P(i+1)
  // upsampled into the lateral's fresh output (upsample_nearest2d_into: the same values). At
  // 1280 pixels that is four fewer maps of 10 MB a page, fresh memory each time the allocator's
  // cache has given its blocks to other sizes. (The CUDA kernel of upsample_nearest2d_into has
  // not run on a GPU yet: docs/gpu-status.md; GPUs keep the composed ops.)
  const bool in_place = inference && x.device().is_cpu();
  const auto into_F = [&](int i) {  // level i, smoothed, into its slice of F; then P[i] goes
    const int64_t up = int64_t(1) << i;
    const Tensor s = in_place ? smooth_[i]->forward(P[(size_t)i]) : smoothed(i);
    if (!F.defined())  // at 1/4 of the input, as C[0] and P[0]
      F = Tensor::empty({s.size(0), 4 * part_channels, x.size(2) / 4, x.size(3) / 4}, s.dtype(), s.device());
    Tensor slice = F.narrow(1, (3 - i) * part_channels, part_channels);
    if (in_place && up > 1) upsample_nearest2d_into(s, {up, up}, slice, false);
    else slice.copy_(s);
    P[(size_t)i] = Tensor();
  };
  P[3] = lateral_[3]->forward(C[3]);
  if (inference) C[3] = Tensor();
  for (int i = 2; i >= 0; --i) {
    if (in_place) {
      P[(size_t)i] = lateral_[i]->forward(C[(size_t)i]);
      upsample_nearest2d_into(P[(size_t)i + 1], {2, 2}, P[(size_t)i], true);
    } else {
      P[(size_t)i] = add(lateral_[i]->forward(C[(size_t)i]), upsample_nearest2d(P[(size_t)i + 1], {2, 2}));
    }
    if (inference) {
      C[(size_t)i] = Tensor();
      into_F(i + 1);
    }
  }
  if (inference) {
    into_F(0);
  } else {
    std::vector<Tensor> parts;
    for (int i = 3; i >= 0; --i) parts.push_back(smoothed(i));
    F = concat(parts, 1);
  }
  Maps m;
  // While int8 calibration observes the layers' inputs (ocrt-quantize), the heads run layer by
  // layer, unbanded, and the threshold head too: every convolution that int8 computes sees its
  // input, so that every one gets its scale (int8_state_dict quantizes them all; inference
  // never runs the threshold head, whose codes only keep the file's layers uniform).
  const bool calibrating = Int8Calibration::active() != nullptr;
  const bool banded = !with_threshold && !calibrating && inference && F.device().is_cpu() &&
                      F.size(2) > kHeadBandRows + 2 * kHeadHalo;
  m.prob = banded ? prob_head_in_bands(F) : prob_head->forward(F);
  if (with_threshold) m.thresh = thresh_head->forward(F);
  else if (calibrating) thresh_head->forward(F);
  return m;
}

namespace {

// Nearest 2x upsampling followed by a 3x3 convolution (padding 1) is a 3x3 convolution of the
// small input with four kernels, one for each position (a, b) of an output pixel in its 2x2
// block, then depth to space. Output row 2i + a, kernel row k reads upsampled row 2i + a + k - 1,
// which is input row i + floor((a + k - 1) / 2): for a = 0, kernel rows 0, 1, 2 read input rows
// i - 1, i, i; for a = 1, rows i, i, i + 1 (columns alike). So the phase kernel adds up the
// kernel taps that land on the same input pixel, and the zero padding of the upsampled map is
// the zero padding of the input. With BatchNorm after the convolution folded in too (eval mode:
// a scale and shift per channel), for w (Cout, C, 3, 3) this gives
//   weight (4 Cout, C, 3, 3): [4 o + 2 a + b, c, dy + 1, dx + 1] = scale[o] * sum of w[o, c, ky, kx]
//                             over ky with floor((a + ky - 1) / 2) = dy, kx with floor((b + kx - 1) / 2) = dx
//   bias (4 Cout):            [4 o + 2 a + b] = bias[o] * scale[o] + shift[o]
// The same products, summed in another order; 4x fewer input pixels and no upsampled copy.
struct PhaseConv {
  Tensor weight, bias;
};

PhaseConv fold_up2_conv3x3(const Conv2d& conv, const BatchNorm2d* bn) {
  const Conv2dOptions& p = conv.options;
  const Pair one{1, 1};
  OCRT_CHECK(conv.weight.size(2) == 3 && conv.weight.size(3) == 3 && p.stride == one && p.padding == one &&
                 p.dilation == one && p.groups == 1 && conv.weight.dtype() == DType::f32,
             "fold_up2_conv3x3: a float32 3x3 convolution with stride 1 and padding 1 only");
  const Tensor w = conv.weight.contiguous();
  const int64_t Cout = w.size(0), C = w.size(1);
  std::vector<float> scale((size_t)Cout, 1.0f), shift((size_t)Cout, 0.0f);
  if (bn) {
    const auto g = bn->weight.to_vector<float>(), be = bn->bias.to_vector<float>();
    const auto mean = bn->running_mean.to_vector<float>(), var = bn->running_var.to_vector<float>();
    for (int64_t o = 0; o < Cout; ++o) {
      scale[(size_t)o] = (float)(g[(size_t)o] / std::sqrt((double)var[(size_t)o] + bn->eps));
      shift[(size_t)o] = be[(size_t)o] - mean[(size_t)o] * scale[(size_t)o];
    }
  }
  const std::vector<float> bias = conv.bias.defined() ? conv.bias.to_vector<float>() : std::vector<float>((size_t)Cout, 0.0f);
  PhaseConv out{Tensor::zeros({4 * Cout, C, 3, 3}), Tensor::empty({4 * Cout})};
  const float* wp = w.data<float>();
  float* pw = out.weight.data<float>();
  float* pb = out.bias.data<float>();
  const auto at = [](int64_t phase, int64_t k) { return (phase + k - 1 + 2) / 2 - 1; };  // floor((phase + k - 1) / 2)
  for (int64_t o = 0; o < Cout; ++o)
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < 2; ++b) {
        const int64_t q = 4 * o + 2 * a + b;
        pb[q] = bias[(size_t)o] * scale[(size_t)o] + shift[(size_t)o];
        for (int64_t c = 0; c < C; ++c)
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx)
              pw[((q * C + c) * 3 + at(a, ky) + 1) * 3 + at(b, kx) + 1] +=
                  wp[((o * C + c) * 3 + ky) * 3 + kx] * scale[(size_t)o];
      }
  return out;
}

// (N, 4 C, h, w) -> (N, C, 2 h, 2 w): channel 4 c + 2 a + b goes to rows 2 i + a, columns 2 j + b.
// (view + permute + contiguous says the same, but a general strided copy whose innermost run
// is 2 values long took longer than the convolution before it.) Contiguous float32 on the CPU.
Tensor depth_to_space2(const Tensor& y) {
  const int64_t N = y.size(0), C = y.size(1) / 4, h = y.size(2), w = y.size(3);
  Tensor out = Tensor::empty({N, C, 2 * h, 2 * w});
  const float* src = y.data<float>();
  float* dst = out.data<float>();
#pragma omp parallel for schedule(static) if (N * C * h * w > 32768)
  for (int64_t r = 0; r < N * C * h; ++r) {  // r = (n, c, i)
    const int64_t nc = r / h, i = r % h;
    for (int64_t a = 0; a < 2; ++a) {
      const float* even = src + ((4 * nc + 2 * a) * h + i) * w;  // b = 0
      const float* odd = even + h * w;                           // b = 1
      float* row = dst + (nc * 2 * h + 2 * i + a) * 2 * w;
      for (int64_t j = 0; j < w; ++j) row[2 * j] = even[j], row[2 * j + 1] = odd[j];
    }
  }
  return out;
}

// A head (make_head's layers: 0 conv, 1 BN, 2 ReLU, 3 up2, 4 conv, 5 BN, 6 ReLU, 7 up2, 8 conv)
// for inference, with each upsampling and the 3x3 convolution after it (and its BatchNorm) run
// as one convolution of the smaller map then depth to space: the same map, without the
// upsampled activations. The folded weights are made once, for every band of a page.
//
// In an int8 model (models/int8.h) the head's convolutions compute in int8 too: the first with
// its BatchNorm and ReLU in the epilogue, and each folded phase convolution from its float
// weights (the file's codes times their scales, folded) quantized again per output channel,
// with the input scale calibrated for the convolution it replaces (the upsampled map holds the
// same values as the map before it).
class FusedHead {
 public:
  explicit FusedHead(const Sequential& h)
      : h_(h),
        first_(dynamic_cast<const Conv2d&>(h[0])),
        mid_(fold_up2_conv3x3(dynamic_cast<const Conv2d&>(h[4]), dynamic_cast<const BatchNorm2d*>(&h[5]))),
        last_(fold_up2_conv3x3(dynamic_cast<const Conv2d&>(h[8]), nullptr)) {
    o_.padding = {1, 1};
    const auto& mid_conv = dynamic_cast<const Conv2d&>(h[4]);
    const auto& last_conv = dynamic_cast<const Conv2d&>(h[8]);
    if (first_.int8) {
      first_post_.affine = dynamic_cast<const BatchNorm2d&>(h[1]).eval_affine();
      first_post_.relu = true;
    }
    if (mid_conv.int8) mid8_ = int8_phase_conv(mid_, mid_conv.int8->input());
    if (last_conv.int8) last8_ = int8_phase_conv(last_, last_conv.int8->input());
  }

  Tensor forward(const Tensor& F) const {
    Tensor y = F;
    if (first_.int8) {  // (the banded head runs on the CPU in inference only: where int8 runs)
      y = first_.int8->forward(F, first_post_);
    } else {
      for (int64_t i = 0; i < 3; ++i) y = h_[i].forward(y);
    }
    if (mid8_) {
      Int8PostOps post;
      post.relu = true;  // ReLU before or after depth to space: the same values
      y = depth_to_space2(mid8_->forward(y, post));
    } else {
      y = relu(depth_to_space2(conv2d(y, mid_.weight, mid_.bias, o_)));
    }
    return depth_to_space2(last8_ ? last8_->forward(y) : conv2d(y, last_.weight, last_.bias, o_));
  }

 private:
  std::shared_ptr<const Int8Conv2d> int8_phase_conv(const PhaseConv& p, const Int8Input& input) const {
    const Int8Weight q = quantize_weight(p.weight);
    return std::make_shared<const Int8Conv2d>(q.codes, q.scales, p.bias, o_, input);
  }

  const Sequential& h_;
  const Conv2d& first_;
  PhaseConv mid_, last_;
  Conv2dOptions o_;
  Int8PostOps first_post_;
  std::shared_ptr<const Int8Conv2d> mid8_, last8_;  // int8 models only
};

}  // namespace

Tensor DBNet::prob_head_in_bands(const Tensor& F) const {
  // Rows [r0, r1) of F give rows [4 r0, 4 r1) of the map; each band is computed from rows
  // [r0 - halo, r1 + halo) (clipped to F), and the rows its own zero padding spoiled, within
  // the halo, are dropped. A halo of 2 covers the head's reach: 1 row of F (its first conv),
  // then half a row (the second, at 1/2), then a quarter (the last, at full resolution).
  constexpr int64_t kUp = 4;  // the head's two 2x upsamplings
  const int64_t H = F.size(2);
  const FusedHead head(*prob_head);
  Tensor map;  // each band's rows go straight into it
  for (int64_t r0 = 0; r0 < H; r0 += kHeadBandRows) {
    const int64_t r1 = std::min(H, r0 + kHeadBandRows);
    const int64_t a = std::max<int64_t>(0, r0 - kHeadHalo), b = std::min(H, r1 + kHeadHalo);
    const Tensor part = head.forward(F.narrow(2, a, b - a).contiguous());
    if (!map.defined()) map = Tensor::empty({part.size(0), part.size(1), kUp * H, part.size(3)}, part.dtype(), part.device());
    map.narrow(2, kUp * r0, kUp * (r1 - r0)).copy_(part.narrow(2, kUp * (r0 - a), kUp * (r1 - r0)));
  }
  return map;
}

TextBoxOptions DBNet::box_options() const {
  TextBoxOptions o;
  o.threshold = config.threshold;
  o.box_threshold = config.box_threshold;
  o.unclip_ratio = config.unclip_ratio;
  if (config.unclip_ratio == 0) o.shrink_ratio = config.shrink_ratio;
  return o;
}

GrayImage scale_for_detection(const GrayImage& page, int64_t max_side) {
  const int64_t longer = std::max(page.width, page.height);
  if (longer <= max_side) return page;
  // Rounded down, so that the width resize_to_height derives from it stays within max_side too.
  const int64_t h = std::max<int64_t>(1, (int64_t)std::floor((double)page.height * (double)max_side / (double)longer));
  return resize_to_height(page, h);
}

DetectedPage detect_text_lines(DBNet& model, const GrayImage& page, int64_t max_side, bool keep_map) {
  return detect_text_lines(model, page, max_side, keep_map, model.box_options());
}

DetectedPage detect_text_lines(DBNet& model, const GrayImage& page, int64_t max_side, bool keep_map,
                               const TextBoxOptions& boxes, const GrayImage* prescaled) {
  OCRT_CHECK(max_side >= DBNet::kSizeMultiple, "detect_text_lines: max_side must be at least ", DBNet::kSizeMultiple,
             ", got ", max_side);
  if (prescaled)
    OCRT_CHECK(prescaled->width >= 1 && prescaled->height >= 1 &&
                   std::max(prescaled->width, prescaled->height) <= std::max(max_side, std::max(page.width, page.height)) &&
                   (int64_t)prescaled->pixels.size() == prescaled->width * prescaled->height,
               "detect_text_lines: the scaled page given (", prescaled->width, "x", prescaled->height,
               ") is not the page scaled for ", max_side);
  DetectedPage out;
  if (page.width <= 0 || page.height <= 0) return out;
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  auto t = Clock::now();
  // Scale so that the longer side fits (never up): resize_to_height keeps the aspect ratio.
  // The page itself is read where no scaling is asked (a 300 dpi page is 8 MB: the detector
  // runs up to three times a page).
  GrayImage scaled;
  const GrayImage* in = prescaled ? prescaled : &page;
  if (!prescaled && std::max(page.width, page.height) > max_side) {
    scaled = scale_for_detection(page, max_side);
    in = &scaled;
  }
  const int64_t h = in->height, w = in->width;
  const int64_t H = padded_width(h, DBNet::kSizeMultiple), W = padded_width(w, DBNet::kSizeMultiple);
  Tensor x = Tensor::empty({1, 1, H, W});
  float* px = x.data<float>();
  for (int64_t y = 0; y < H; ++y) {
    float* row = px + y * W;
    const int64_t page_columns = y < h ? w : 0;
    for (int64_t c = 0; c < page_columns; ++c) row[c] = (float)in->at(c, y) / 127.5f - 1.0f;
    std::fill(row + page_columns, row + W, 1.0f);  // the padding is white: 255 / 127.5 - 1
  }
  out.prepare_s = seconds_since(t);
  t = Clock::now();
  const bool was_training = model.is_training();
  model.eval();
  Tensor prob;
  {
    NoGradGuard no_grad;
    const DeviceTurn turn(model.device());  // the GPU may be shared (runtime/device.h)
    prob = sigmoid(model.forward(x.to(model.device()))).to(Device::cpu()).contiguous();
  }
  model.train(was_training);
  const float* p = prob.data<float>();
  std::vector<float> map;
  map.reserve((size_t)(h * w));
  for (int64_t y = 0; y < h; ++y) map.insert(map.end(), p + y * W, p + y * W + w);
  out.forward_s = seconds_since(t);
  t = Clock::now();
  out.boxes = text_boxes(map.data(), h, w, boxes, page.width, page.height);
  out.boxes_s = seconds_since(t);
  out.map_width = w, out.map_height = h;
  if (keep_map) out.prob = std::move(map);
  return out;
}

bool is_detector_arch(const std::string& arch) { return arch == "dbnet"; }

std::shared_ptr<DBNet> make_detector(const std::string& arch, Generator& gen) {
  OCRT_CHECK(is_detector_arch(arch), "unknown detector architecture '", arch, "' (expected dbnet)");
  return std::make_shared<DBNet>(DBNetConfig::preset(arch), gen);
}

std::shared_ptr<DBNet> make_detector(const std::string& arch, const Json& config, Generator& gen) {
  OCRT_CHECK(is_detector_arch(arch), "unknown detector architecture '", arch, "' (expected dbnet)");
  return std::make_shared<DBNet>(DBNetConfig::from_json(config), gen);
}

Json detector_input_spec() {
  Json j = default_input_spec();
  j.set("height", 0);  // any height: the sides are multiples of size_multiple
  j.set("size_multiple", DBNet::kSizeMultiple);
  return j;
}

}  // namespace ocrt::nn
