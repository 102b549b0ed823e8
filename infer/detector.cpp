// The text detector: a page through DBNet into line outlines (see detector.h).
#include "infer/detector.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "models/dbnet.h"
#include "models/int8.h"
#include "models/model_check.h"
#include "runtime/error.h"
#include "runtime/rng.h"
#include "runtime/threading.h"

namespace ocrt::infer {

namespace {

void check_page(const GrayImage& page) {
  OCRT_CHECK(page.width >= 1 && page.height >= 1 && (int64_t)page.pixels.size() == page.width * page.height,
             "text detector: the page image is empty or inconsistent (", page.width, "x", page.height, ")");
}

// The w x h pixels of `image` from (x, y) on, all inside it.
GrayImage crop_image(const GrayImage& image, int64_t x, int64_t y, int64_t w, int64_t h) {
  GrayImage out;
  out.width = w, out.height = h;
  out.pixels.resize((size_t)(w * h));
  for (int64_t r = 0; r < h; ++r)
    std::copy_n(image.pixels.data() + (y + r) * image.width + x, w, out.pixels.data() + r * w);
  return out;
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
  int8_ = nn::is_int8_state_dict(file.weights);
  OCRT_CHECK(options_.device.is_cpu() || !int8_, model_path, " is an int8 model file, which runs on the CPU only (not on ",
             options_.device.str(), "): give the float detector (weights/det-en.safetensors) for a GPU");
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
  {
    const DeviceTurn turn(options_.device);  // other detectors may share the GPU (page lanes)
    model->to(options_.device);
  }
  model_ = std::move(model);
  boxes_ = model_->box_options();  // what the map is read with: the model's, and the caller's thresholds
  for (const double v : {options_.threshold, options_.box_threshold})
    OCRT_CHECK(v < 0 || v <= 1, "text detector: a threshold must be in [0, 1], got ", v);
  OCRT_CHECK(options_.small_lines >= 0 && std::isfinite(options_.small_lines) && options_.line_target > 0 &&
                 std::isfinite(options_.line_target),
             "text detector: small_lines must be >= 0 and line_target > 0, got ", options_.small_lines, " and ",
             options_.line_target);
  OCRT_CHECK(std::isfinite(options_.descreen) && options_.descreen >= 0 && options_.descreen <= 8,
             "text detector: descreen must be in [0, 8] pixels, got ", options_.descreen);
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
  return detect_looks(page, times, Look::both, 0, nullptr);
}

std::vector<nn::TextBox> TextDetector::detect_first_look(const GrayImage& page, Times* times, int64_t* second_side) {
  return detect_looks(page, times, Look::first, 0, second_side);
}

std::vector<nn::TextBox> TextDetector::detect_second_look(const GrayImage& page, int64_t side, Times* times) {
  OCRT_CHECK(side > options_.max_side, "text detector: a second look is at a side larger than max_side (",
             options_.max_side, "), not ", side);
  return detect_looks(page, times, Look::second, side, nullptr);
}

std::vector<nn::TextBox> TextDetector::detect_looks(const GrayImage& page, Times* times, Look look, int64_t side,
                                                    int64_t* wanted_side) {
  if (wanted_side) *wanted_side = 0;
  check_page(page);
  const LentThreads lent(options_.borrow_threads && options_.device.is_cpu() ? options_.borrow_threads() : 0);
  if (model_) {
    // The page scaled once for each side it is read at, and kept for the descreening pass.
    using Clock = std::chrono::steady_clock;
    const auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    auto t0 = Clock::now();
    const int64_t first_side = look == Look::second ? side : options_.max_side;
    GrayImage scaled = nn::scale_for_detection(page, first_side);
    Times t{seconds_since(t0), 0, 0};
    nn::DetectedPage d = nn::detect_text_lines(*model_, page, first_side, /*keep_map=*/false, boxes_, &scaled);
    t += Times{d.prepare_s, d.forward_s, d.boxes_s, 1};
    const int64_t larger = look == Look::second ? 0 : second_look_side(d.boxes, page.width, page.height, options_);
    if (wanted_side) *wanted_side = larger;
    if (larger > 0 && look == Look::both) {
      t0 = Clock::now();
      scaled = nn::scale_for_detection(page, larger);
      t.prepare += seconds_since(t0);
      nn::DetectedPage again = nn::detect_text_lines(*model_, page, larger, /*keep_map=*/false, boxes_, &scaled);
      t += Times{again.prepare_s, again.forward_s, again.boxes_s, 1};
      d.boxes = std::move(again.boxes);
    }
    if (options_.descreen > 0) {
      // The page at the scale of the outlines kept, blurred; the model runs only on the parts
      // of it that a halftone screen covers (none on most pages).
      t0 = Clock::now();
      const GrayImage blurred = gaussian_blur(scaled, options_.descreen);
      const std::vector<Rect> regions = screened_regions(scaled, blurred);
      t.prepare += seconds_since(t0);
      std::vector<nn::TextBox> more;
      const double to_page_x = (double)page.width / (double)scaled.width;
      const double to_page_y = (double)page.height / (double)scaled.height;
      for (const Rect& r : regions) {
        t0 = Clock::now();
        const GrayImage part = crop_image(blurred, (int64_t)r.x0, (int64_t)r.y0, (int64_t)r.width(), (int64_t)r.height());
        t.prepare += seconds_since(t0);
        const int64_t longer = std::max<int64_t>({part.width, part.height, nn::DBNet::kSizeMultiple});
        nn::DetectedPage found = nn::detect_text_lines(*model_, part, longer, /*keep_map=*/false, boxes_);
        t += Times{found.prepare_s, found.forward_s, found.boxes_s};
        for (nn::TextBox& b : found.boxes) {  // the part's pixels -> the page's
          for (Point& p : b.outline.corners) p = {(p.x + r.x0) * to_page_x, (p.y + r.y0) * to_page_y};
          more.push_back(b);
        }
      }
      if (add_unseen_boxes(d.boxes, more) > 0) nn::sort_top_to_bottom(d.boxes);  // text_boxes' order again
    }
    if (times) *times = t;
    return std::move(d.boxes);
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const ProbabilityMap map = probability_map(page);
  const auto t1 = Clock::now();
  std::vector<nn::TextBox> boxes = nn::text_boxes(map.values.data(), map.height, map.width, boxes_, page.width, page.height);
  if (times)
    *times = {0, std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(Clock::now() - t1).count(),
              1};
  return boxes;
}

int64_t add_unseen_boxes(std::vector<nn::TextBox>& boxes, const std::vector<nn::TextBox>& more) {
  const size_t first = boxes.size();
  int64_t added = 0;
  for (const nn::TextBox& b : more) {
    const Rect r = b.outline.box();
    bool seen = false;
    for (size_t k = 0; k < first && !seen; ++k) {
      const Rect q = boxes[k].outline.box();
      seen = overlap_area(r, q) > 0.2 * std::min(r.area(), q.area());
    }
    if (!seen) boxes.push_back(b), ++added;
  }
  return added;
}

std::vector<Rect> screened_regions(const GrayImage& page, const GrayImage& blurred) {
  OCRT_CHECK(page.width == blurred.width && page.height == blurred.height &&
                 (int64_t)page.pixels.size() == page.width * page.height &&
                 (int64_t)blurred.pixels.size() == page.width * page.height,
             "screened_regions: the page and its blur differ in size or are inconsistent");
  // Blocks of kBlock x kBlock pixels (fewer at the right and bottom edges), each screened or
  // not by looks_screened (runtime/image.h: most of it grey once blurred, not white paper nor
  // solid ink, and the sharp page far from the blur on average, a field of dots, not a flat grey).
  constexpr int64_t kBlock = 16;
  // Blocks around a screened one that its region takes in: the model sees the screen with
  // context around it, as in a pass over the whole page (with 3 blocks, table_04 of the real
  // pages read 6 words fewer than the whole page's pass gave it; with 6, the same words).
  constexpr int64_t kReach = 6;
  constexpr int64_t kMinBlocks = 4;  // a region with fewer screened blocks is a speck
  constexpr int64_t kGrid = nn::DBNet::kSizeMultiple;
  const int64_t W = page.width, H = page.height;
  const int64_t bw = (W + kBlock - 1) / kBlock, bh = (H + kBlock - 1) / kBlock;
  std::vector<uint8_t> screened((size_t)(bw * bh), 0);
  for (int64_t by = 0; by < bh; ++by)
    for (int64_t bx = 0; bx < bw; ++bx) {
      const int64_t x0 = bx * kBlock, y0 = by * kBlock, x1 = std::min(W, x0 + kBlock), y1 = std::min(H, y0 + kBlock);
      screened[(size_t)(by * bw + bx)] = looks_screened(page, blurred, x0, y0, x1, y1);
    }
  // Regions: the screened blocks joined through their reach, each as the box of its blocks'
  // reach, then boxes that overlap merged until none do.
  std::vector<int64_t> reach_owner((size_t)(bw * bh), -1);
  std::vector<Rect> regions;
  std::vector<int64_t> stack;
  for (int64_t start = 0; start < bw * bh; ++start) {
    if (!screened[(size_t)start] || reach_owner[(size_t)start] >= 0) continue;
    const int64_t id = (int64_t)regions.size();
    int64_t count = 0, bx0 = bw, by0 = bh, bx1 = -1, by1 = -1;
    reach_owner[(size_t)start] = id;
    stack.assign(1, start);
    while (!stack.empty()) {  // screened blocks within kReach of each other, one region
      const int64_t at = stack.back();
      stack.pop_back();
      const int64_t cx = at % bw, cy = at / bw;
      ++count;
      bx0 = std::min(bx0, cx), bx1 = std::max(bx1, cx), by0 = std::min(by0, cy), by1 = std::max(by1, cy);
      for (int64_t ny = std::max<int64_t>(0, cy - kReach); ny <= std::min(bh - 1, cy + kReach); ++ny)
        for (int64_t nx = std::max<int64_t>(0, cx - kReach); nx <= std::min(bw - 1, cx + kReach); ++nx) {
          const int64_t k = ny * bw + nx;
          if (screened[(size_t)k] && reach_owner[(size_t)k] < 0) reach_owner[(size_t)k] = id, stack.push_back(k);
        }
    }
    // On the model's grid (kGrid = 32 pixels from the page's top left, which the network halves
    // five times): the region's map is then the whole page's map away from its edges, and it
    // needs no white padding inside the page (only at the page's right and bottom edges, as
    // the whole page does).
    const int64_t x0 = std::max<int64_t>(0, bx0 - kReach) * kBlock / kGrid * kGrid;
    const int64_t y0 = std::max<int64_t>(0, by0 - kReach) * kBlock / kGrid * kGrid;
    const int64_t x1 = (bx1 + 1 + kReach) * kBlock, y1 = (by1 + 1 + kReach) * kBlock;
    Rect r;
    r.x0 = (double)x0, r.y0 = (double)y0;
    r.x1 = (double)std::min(W, x0 + (x1 - x0 + kGrid - 1) / kGrid * kGrid);
    r.y1 = (double)std::min(H, y0 + (y1 - y0 + kGrid - 1) / kGrid * kGrid);
    regions.push_back(count >= kMinBlocks ? r : Rect{});
  }
  std::vector<Rect> kept;
  for (const Rect& r : regions)
    if (!r.empty()) kept.push_back(r);
  for (bool merged = true; merged;) {
    merged = false;
    for (size_t i = 0; i < kept.size() && !merged; ++i)
      for (size_t j = i + 1; j < kept.size() && !merged; ++j)
        if (overlap_area(kept[i], kept[j]) > 0) {
          kept[i] = kept[i].united(kept[j]);
          kept.erase(kept.begin() + (ptrdiff_t)j);
          merged = true;
        }
  }
  return kept;
}

int64_t second_look_side(const std::vector<nn::TextBox>& boxes, int64_t width, int64_t height,
                         const DetectorOptions& options) {
  // A median of fewer lines says little about the print (a slide, a blank page with specks).
  constexpr size_t kMinLines = 8;
  constexpr double kMostScale = 1.6;
  const int64_t longer = std::max(width, height);
  if (options.small_lines <= 0 || boxes.size() < kMinLines || longer <= options.max_side) return 0;
  std::vector<double> thickness;
  thickness.reserve(boxes.size());
  for (const nn::TextBox& b : boxes) {
    const auto& c = b.outline.corners;
    thickness.push_back(std::min(distance(c[0], c[1]), distance(c[0], c[3])));
  }
  std::nth_element(thickness.begin(), thickness.begin() + (ptrdiff_t)(thickness.size() / 2), thickness.end());
  const double in_map = thickness[thickness.size() / 2] * (double)options.max_side / (double)longer;
  if (!(in_map > 0) || in_map >= options.small_lines) return 0;
  const double side = std::min({(double)options.max_side * options.line_target / in_map, (double)longer,
                                kMostScale * (double)options.max_side});
  return side >= (double)options.max_side + nn::DBNet::kSizeMultiple ? (int64_t)side : 0;
}

}  // namespace ocrt::infer
