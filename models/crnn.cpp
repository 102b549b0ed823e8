// CRNN: the layer table of docs/models.md, in code (see crnn.h).
#include "models/crnn.h"

namespace ocrt::nn {

CRNNConfig CRNNConfig::preset(const std::string& name, int64_t num_classes) {
  OCRT_CHECK(num_classes >= 2, "CRNN: num_classes must be >= 2 (blank + at least one character), got ", num_classes);
  CRNNConfig c;
  c.num_classes = num_classes;
  if (name == "crnn") {
    c.channels = {64, 128, 256, 256, 512, 512, 512};
    c.hidden = 256;
  } else if (name == "crnn-s") {
    c.channels = {32, 64, 128, 128, 256, 256, 256};
    c.hidden = 128;
  } else {
    fail("unknown CRNN preset '", name, "' (expected crnn or crnn-s)");
  }
  return c;
}

Json CRNNConfig::to_json() const {
  Json ch = Json::array();
  for (int64_t c : channels) ch.push_back(c);
  Json j = Json::object();
  j.set("channels", ch);
  j.set("hidden", hidden);
  j.set("num_classes", num_classes);
  if (!batch_norm) j.set("batch_norm", false);
  return j;
}

CRNNConfig CRNNConfig::from_json(const Json& j) {
  OCRT_CHECK(j.is_object(), "CRNN config: expected a JSON object");
  CRNNConfig c;
  const Json* ch = j.find("channels");
  OCRT_CHECK(ch && ch->is_array() && ch->size() == 7, "CRNN config: 'channels' must be an array of 7 integers");
  for (size_t i = 0; i < 7; ++i) {
    c.channels[i] = (*ch)[i].as_int();
    OCRT_CHECK(c.channels[i] >= 1, "CRNN config: channel count ", i, " must be >= 1");
  }
  OCRT_CHECK(j.contains("hidden") && j.contains("num_classes"), "CRNN config: needs 'hidden' and 'num_classes'");
  c.hidden = j.at("hidden").as_int();
  c.num_classes = j.at("num_classes").as_int();
  OCRT_CHECK(c.hidden >= 1 && c.num_classes >= 2, "CRNN config: hidden must be >= 1 and num_classes >= 2");
  if (const Json* bn = j.find("batch_norm")) {
    OCRT_CHECK(bn->is_bool(), "CRNN config: 'batch_norm' must be true or false");
    c.batch_norm = bn->as_bool();
  }
  return c;
}

CRNN::CRNN(const CRNNConfig& cfg, Generator& gen) : config(cfg) {
  const auto& c = cfg.channels;
  auto conv = [&](int64_t in, int64_t out, int64_t k, int64_t pad, bool bias) {
    Conv2dOptions o;
    o.padding = {pad, pad};
    return std::make_shared<Conv2d>(in, out, Pair{k, k}, gen, o, bias);
  };
  auto pool = [](Pair stride, Pair padding) {
    MaxPool2dOptions o;
    o.kernel = {2, 2}, o.stride = stride, o.padding = padding;
    return std::make_shared<MaxPool2d>(o);
  };
  const bool bn = cfg.batch_norm;
  auto norm = [&](int64_t channels) -> std::shared_ptr<Module> {
    if (bn) return std::make_shared<BatchNorm2d>(channels);
    return std::make_shared<Identity>();
  };
  cnn = register_module("cnn", std::make_shared<Sequential>());
  cnn->add(conv(1, c[0], 3, 1, true));      // 0
  cnn->add(std::make_shared<ReLU>());       // 1
  cnn->add(pool({2, 2}, {0, 0}));           // 2
  cnn->add(conv(c[0], c[1], 3, 1, true));   // 3
  cnn->add(std::make_shared<ReLU>());       // 4
  cnn->add(pool({2, 2}, {0, 0}));           // 5
  cnn->add(conv(c[1], c[2], 3, 1, !bn));    // 6
  cnn->add(norm(c[2]));                     // 7
  cnn->add(std::make_shared<ReLU>());       // 8
  cnn->add(conv(c[2], c[3], 3, 1, true));   // 9
  cnn->add(std::make_shared<ReLU>());       // 10
  cnn->add(pool({2, 1}, {0, 1}));           // 11
  cnn->add(conv(c[3], c[4], 3, 1, !bn));    // 12
  cnn->add(norm(c[4]));                     // 13
  cnn->add(std::make_shared<ReLU>());       // 14
  cnn->add(conv(c[4], c[5], 3, 1, true));   // 15
  cnn->add(std::make_shared<ReLU>());       // 16
  cnn->add(pool({2, 1}, {0, 1}));           // 17
  cnn->add(conv(c[5], c[6], 2, 0, !bn));    // 18
  cnn->add(norm(c[6]));                     // 19
  cnn->add(std::make_shared<ReLU>());       // 20
  LSTMOptions lo;
  lo.num_layers = 2, lo.bidirectional = true;
  rnn = register_module("rnn", std::make_shared<LSTM>(c[6], cfg.hidden, gen, lo));
  fc = register_module("fc", std::make_shared<Linear>(2 * cfg.hidden, cfg.num_classes, true, gen));
}

Tensor CRNN::forward(const Tensor& x, const std::vector<int64_t>& widths) {
  OCRT_CHECK(x.defined() && x.dim() == 4 && x.size(1) == 1 && x.size(2) == 32, "CRNN: expected input (N, 1, 32, W), got ",
             x.defined() ? shape_str(x.shape()) : std::string("undefined"));
  const int64_t N = x.size(0), W = x.size(3);
  OCRT_CHECK(W >= 4 && W % 4 == 0, "CRNN: the input width must be a positive multiple of 4, got ", W);
  std::vector<int64_t> lengths;
  if (!widths.empty()) {
    OCRT_CHECK((int64_t)widths.size() == N, "CRNN: expected ", N, " widths, got ", widths.size());
    for (size_t n = 0; n < widths.size(); ++n) {
      OCRT_CHECK(widths[n] >= 4 && widths[n] <= W && widths[n] % 4 == 0, "CRNN: width ", widths[n], " of line ", n,
                 " must be a multiple of 4 in [4, ", W, "]");
      lengths.push_back(frames_for_width(widths[n]));
    }
  }
  Tensor f = cnn->forward(x);                       // (N, c6, 1, T)
  f = f.squeeze(2).permute({2, 0, 1}).contiguous();  // (T, N, c6)
  Tensor y = rnn->forward(f, lengths).output;       // (T, N, 2H)
  return fc->forward(y);                            // (T, N, classes)
}

}  // namespace ocrt::nn
