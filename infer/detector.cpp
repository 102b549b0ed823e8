// The text detector: a page through DBNet into line outlines (see detector.h).
#include "infer/detector.h"

#include <chrono>
#include <cmath>

#include "models/dbnet.h"
#include "models/model_check.h"
#include "runtime/error.h"
#include "runtime/rng.h"

namespace ocrt::infer {

namespace {

void check_page(const GrayImage& page) {
  OCRT_CHECK(page.width >= 1 && page.height >= 1 && (int64_t)page.pixels.size() == page.width * page.height,
             "text detector: the page image is empty or inconsistent (", page.width, "x", page.height, ")");
}

}  // namespace

TextDetector::TextDetector(const std::string& model_path, DetectorOptions options)
    : options_(options), model_path_(model_path) {
  nn::ModelFile file;
  try {
    file = nn::load_model_file(model_path, /*quiet=*/true);
  } catch (const Error& e) {
    fail("cannot load the text detector's model file: ", e.what());
  }
  OCRT_CHECK(file.info.has_value(), model_path,
             " holds weights only (no ocrt metadata): a text detector's model file must carry its arch and "
             "config (docs/formats.md)");
  nn::check_model_info(*file.info, model_path, {nn::ModelExpectation::Kind::detector, "", "", nullptr});
  std::shared_ptr<nn::DBNet> model = nn::build_detector(file.info->arch, file.info->config, file.weights, model_path);
  use_model(std::move(model));
}

TextDetector::TextDetector(std::shared_ptr<nn::DBNet> model, DetectorOptions options) : options_(options) {
  OCRT_CHECK(model != nullptr, "text detector: no model");
  use_model(std::move(model));
}

TextDetector::TextDetector(MapFunction paint, nn::TextBoxOptions boxes) : paint_(std::move(paint)), boxes_(boxes) {
  OCRT_CHECK(paint_ != nullptr, "text detector: no map function");
}

TextDetector::~TextDetector() = default;

void TextDetector::use_model(std::shared_ptr<nn::DBNet> model) {
  OCRT_CHECK(options_.max_side >= nn::DBNet::kSizeMultiple, "text detector: max_side must be at least ",
             nn::DBNet::kSizeMultiple, ", got ", options_.max_side);
  validate(options_.device);
  model->eval();
  model->to(options_.device);
  model_ = std::move(model);
  boxes_ = model_->box_options();  // what the map is read with: the model's, and the caller's thresholds
  for (const double v : {options_.threshold, options_.box_threshold})
    OCRT_CHECK(v < 0 || v <= 1, "text detector: a threshold must be in [0, 1], got ", v);
  if (options_.threshold >= 0) boxes_.threshold = (float)options_.threshold;
  if (options_.box_threshold >= 0) boxes_.box_threshold = (float)options_.box_threshold;
}

ProbabilityMap TextDetector::probability_map(const GrayImage& page) {
  check_page(page);
  ProbabilityMap map;
  if (paint_) {
    map = paint_(page);
    OCRT_CHECK(map.width >= 1 && map.height >= 1 && (int64_t)map.values.size() == map.width * map.height,
               "text detector: the painted map is empty or inconsistent (", map.width, "x", map.height, ", ",
               map.values.size(), " values)");
    return map;
  }
  nn::DetectedPage d = nn::detect_text_lines(*model_, page, options_.max_side, /*keep_map=*/true, boxes_);
  map.width = d.map_width, map.height = d.map_height;
  map.values = std::move(d.prob);
  return map;
}

std::vector<nn::TextBox> TextDetector::detect(const GrayImage& page, Times* times) {
  check_page(page);
  if (model_) {
    nn::DetectedPage d = nn::detect_text_lines(*model_, page, options_.max_side, /*keep_map=*/false, boxes_);
    if (times) *times = {d.prepare_s, d.forward_s, d.boxes_s};
    return std::move(d.boxes);
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const ProbabilityMap map = probability_map(page);
  const auto t1 = Clock::now();
  std::vector<nn::TextBox> boxes = nn::text_boxes(map.values.data(), map.height, map.width, boxes_, page.width, page.height);
  if (times)
    *times = {0, std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(Clock::now() - t1).count()};
  return boxes;
}

}  // namespace ocrt::infer
