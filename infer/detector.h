// The text detector of the page pipeline (docs/pages.md): a page image in, the outlines of its
// text lines out, in the page's pixels.
//
//   TextDetector det("weights/det-en.safetensors", {Device::cpu(), 1280});
//   std::vector<TextBox> lines = det.detect(page);
//
// What detect() does with a DBNet model (models/dbnet.h detect_text_lines, which training's
// evaluation runs too, so the two cannot read a page differently):
//   1. scale the page so that its longer side is at most max_side pixels (never enlarged: a
//      small page keeps its size), shrinking by area averaging (runtime/image.h);
//   2. pad it on the right and at the bottom with white to multiples of 32 (the network halves
//      the image five times), and normalise p / 127.5 - 1 (the model file's input spec);
//   3. run the probability head under no-grad on the detector's device, then a sigmoid;
//   4. keep the part of the map that covers the scaled page (the padding is not page);
//   5. turn the map into line outlines with models/text_boxes.h, with the threshold and box
//      threshold the model was trained for and the growth that undoes its training shrink
//      (its config carries them), and the page's own size as the image size, so outlines come
//      back in page pixels;
//   6. a second look at pages of small print: where the lines found are on the whole (their
//      median) thinner than small_lines pixels in the map, and the page was scaled down, steps
//      1-5 run again with the page scaled so that they would be line_target pixels (up to the
//      page's own size, at most 1.6 x max_side), and those outlines are the page's. The shipped
//      detector learnt from pages whose lines are 15-40 pixels in its map; on a page whose
//      print is smaller (a dense table, a page of small type scanned large) it misses short
//      lines and merges others. docs/pages.md ("A second look at small print") has the figures.
//   7. descreening (descreen > 0): the page at the scale of the outlines kept, blurred by
//      `descreen` of its pixels; where it is printed on a halftone screen (screened_regions),
//      steps 2-5 on each screened region of the blurred page, and the outlines of those passes
//      that overlap none of the first pass's added to them (add_unseen_boxes; then all in
//      text_boxes' order again, top to bottom, then left to right). Print on a halftone screen
//      (shaded table cells, a title bar) shows the detector dots where a blur shows it text on
//      grey; the first pass keeps the sharp page's outlines everywhere else. Most pages have
//      no screen, and then no second model pass.
//
// Two other ways to build one, for tests and experiments: from a DBNet already in memory (random
// weights, or one being trained), and from a function that paints the probability map (a test
// paints it from a synthetic page's truth, so the rest of the pipeline can be checked without a
// trained detector).
//
// A TextDetector is used from one thread at a time (it drives its device from the calling
// thread; docs/cuda.md: one thread drives a GPU at a time). ocrt-infer runs it between the
// predictor's runs, never beside them.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/text_boxes.h"
#include "runtime/device.h"
#include "runtime/image.h"

namespace ocrt::nn {
class DBNet;
}

namespace ocrt::infer {

struct DetectorOptions {
  Device device = Device::cpu();
  int64_t max_side = 1280;  // the page's longer side is scaled down to this before the model
  // Reading the map, in place of the model file's own values (negative: the model's): a pixel
  // is text above `threshold`; a region is kept when its mean probability is at least
  // `box_threshold`. Both in [0, 1].
  double threshold = -1, box_threshold = -1;
  // Step 6 above: a second look when the lines' median thickness in the map is under
  // small_lines pixels (0: never), at the scale that makes it line_target pixels.
  double small_lines = 15, line_target = 20;
  // Step 7 above: the blur of the descreening pass, in pixels of the scaled page (0: no pass).
  double descreen = 0.75;
  // Threads lent to a detect() call besides its caller's own (on the CPU; asked at the call's
  // start; runtime/threading.h LentThreads): ocrt-infer's idle page lanes (page_lanes.h).
  std::function<int()> borrow_threads;
};

// A probability map over a whole page: height x width values in [0, 1], row-major. It may be
// smaller than the page (a scaled page's map); text_boxes scales its outlines to the page.
struct ProbabilityMap {
  int64_t width = 0, height = 0;
  std::vector<float> values;
};

// Paints a page's probability map (tests, experiments).
using MapFunction = std::function<ProbabilityMap(const GrayImage& page)>;

class TextDetector {
 public:
  // Loads a detector's model file (arch "dbnet"; its config holds the thresholds), checks it and
  // moves it to options.device. Throws naming the file for a missing or corrupt file, a file
  // without ocrt metadata, or a file that holds a recogniser rather than a detector.
  TextDetector(const std::string& model_path, DetectorOptions options = {});
  // A DBNet already built (it is put in eval mode and moved to options.device).
  TextDetector(std::shared_ptr<nn::DBNet> model, DetectorOptions options = {});
  // A hand-made map: `paint` gives the map of a page, read with `boxes`.
  TextDetector(MapFunction paint, nn::TextBoxOptions boxes);
  ~TextDetector();
  TextDetector(const TextDetector&) = delete;
  TextDetector& operator=(const TextDetector&) = delete;

  // The outlines of the page's text lines, in page pixels (text_boxes' order: top to bottom).
  // An empty or inconsistent image is an error.
  // `times`, when given, gets where the time went (a painted map counts as the model's time).
  struct Times {
    double prepare = 0, forward = 0, boxes = 0;  // seconds: steps 1-2, 3-4, 5
    int64_t looks = 0;  // the model's passes over a whole page (step 6's second look is one; step 7's are not)
    Times& operator+=(const Times& o) {
      prepare += o.prepare, forward += o.forward, boxes += o.boxes, looks += o.looks;
      return *this;
    }
  };
  std::vector<nn::TextBox> detect(const GrayImage& page, Times* times = nullptr);
  // detect() in two parts, for a quick look at a page that may be taken no further (the page
  // reader's sideways check). detect_first_look: without step 6, the outlines at max_side (and
  // step 7's on them); `second_side`, when given, gets the side step 6 would have detected
  // at (second_look_side below; 0: none, and the outlines are detect()'s own).
  // detect_second_look: steps 1-5 and 7 at that side, which must be larger than max_side; for
  // the same page, detect_first_look and then detect_second_look at the side it gave find
  // detect()'s outlines. A hand-made map has no second look.
  std::vector<nn::TextBox> detect_first_look(const GrayImage& page, Times* times = nullptr,
                                             int64_t* second_side = nullptr);
  std::vector<nn::TextBox> detect_second_look(const GrayImage& page, int64_t side, Times* times = nullptr);
  // The map detect() reads (steps 1-4 above; for a model, at the scaled page's size).
  ProbabilityMap probability_map(const GrayImage& page);

  const nn::TextBoxOptions& box_options() const { return boxes_; }
  const DetectorOptions& options() const { return options_; }
  const std::string& model_path() const { return model_path_; }  // empty unless loaded from a file
  bool int8() const { return int8_; }  // loaded from an int8 model file (models/int8.h)

 private:
  void use_model(std::shared_ptr<nn::DBNet> model);
  enum class Look { both, first, second };
  std::vector<nn::TextBox> detect_looks(const GrayImage& page, Times* times, Look look, int64_t side,
                                        int64_t* wanted_side);

  DetectorOptions options_;
  std::string model_path_;
  bool int8_ = false;
  std::shared_ptr<nn::DBNet> model_;  // null for a hand-made map
  MapFunction paint_;
  nn::TextBoxOptions boxes_;
};

// Step 6 of detect(): the longer side at which to detect a `width` x `height` page again, given
// the outlines found with `options` (at options.max_side); 0 for no second look (fewer than 8
// outlines, a page not scaled down, lines at least options.small_lines thick in the map, or
// small_lines 0). At most the page's own size and 1.6 x max_side (the detector's memory grows
// with the pixels: at 2048 its tensors peak at 131 MiB against 51 at 1280).
int64_t second_look_side(const std::vector<nn::TextBox>& boxes, int64_t width, int64_t height,
                         const DetectorOptions& options);

// Step 7 of detect(): where a page (scaled for the detector) is printed on a halftone screen,
// from it and its blur: boxes in its pixels, none overlapping another (none on most pages).
std::vector<Rect> screened_regions(const GrayImage& page, const GrayImage& blurred);

// Step 7 of detect(): appends to `boxes` each of `more` whose bounding box overlaps none of
// boxes' own by more than a fifth of the smaller of the two boxes' areas; returns how many.
int64_t add_unseen_boxes(std::vector<nn::TextBox>& boxes, const std::vector<nn::TextBox>& more);

}  // namespace ocrt::infer
