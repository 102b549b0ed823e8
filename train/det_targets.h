// The training targets of a DBNet-style text detector (models/dbnet.h), made from text-line
// outlines, and the sampler that cuts training crops from pages (docs/pages.md, "Training the detector").
// After Liao et al. 2020, "Real-time Scene Text Detection with Differentiable Binarization",
// section 3.4, and PaddleOCR's MakeShrinkMap / MakeBorderMap.
//
// For a map of height x width pixels (the image's own pixels; pixel (x, y) covers
// [x, x+1) x [y, y+1) and is tested at its centre (x + 0.5, y + 0.5)), each line's outline, a
// convex polygon of area A and perimeter L, gives an offset D = A (1 - r^2) / L (r = shrink_ratio):
//   shrink map     1 where a pixel centre lies in an outline shrunk inward by D, else 0;
//   shrink mask    1, except 0 over the whole outline of a line that is not text to learn from
//                  (thinner than min_text_height, or shrunk to nothing): ignored, not negative;
//   threshold map  v = 1 - min(d / D, 1), d the distance to the outline's nearest edge, the
//                  maximum over lines, then scaled to [thresh_min, thresh_max]: 0.7 on an
//                  edge, 0.3 at D from it and everywhere else;
//   threshold mask 1 within D of an outline or inside it (the outline dilated by D), else 0.
// Each line costs the pixels of its dilated outline's bounding box (row by row, only the
// span its dilated outline covers), never page x lines.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/geometry.h"
#include "runtime/image.h"

namespace ocrt::train {

struct DetTargetOptions {
  double shrink_ratio = 0.6;    // r; DBNetConfig::shrink_ratio, which inference's unclip must undo
  double min_text_height = 3;   // a line thinner than this (pixels) is ignored
  float thresh_min = 0.3f, thresh_max = 0.7f;  // the threshold map's range
  // Throws naming the field: shrink_ratio in (0, 1), min_text_height >= 0,
  // 0 <= thresh_min < thresh_max <= 1.
  void validate() const;
};

// The four maps, each height * width floats, row-major.
struct DetTargets {
  int64_t width = 0, height = 0;
  std::vector<float> shrink, shrink_mask, thresh, thresh_mask;
  int64_t ignored = 0;  // lines that went to the ignore mask (for logging and tests)
};

DetTargets make_det_targets(const std::vector<Quad>& lines, int64_t height, int64_t width,
                            const DetTargetOptions& o = {});

// ---- The polygon geometry behind the targets (convex polygons, any orientation on input)

// The convex hull of some points (models/text_boxes.h convex_hull, which the detector's
// post-processing uses too): counter-clockwise as seen on a y-down image, collinear and
// repeated points dropped; fewer than 3 points when they are collinear.
std::vector<Point> convex_polygon(const std::vector<Point>& points);
double polygon_area(const std::vector<Point>& polygon);       // absolute
double polygon_perimeter(const std::vector<Point>& polygon);
// The least distance between two parallel lines holding the convex polygon between them (a
// rectangle's shorter side): what min_text_height is compared with.
double polygon_thickness(const std::vector<Point>& polygon);
// D = A (1 - r^2) / L; 0 for a polygon without area.
double shrink_offset(const std::vector<Point>& polygon, double shrink_ratio);
// The convex polygon with every edge moved inward by d >= 0 (the intersection of the shifted
// half-planes: exact, with no mitre or rounding to choose); empty when nothing is left.
std::vector<Point> shrink_polygon(const std::vector<Point>& convex, double d);
// The intersection of two convex polygons (empty when they do not overlap).
std::vector<Point> intersect_convex(const std::vector<Point>& a, const std::vector<Point>& b);

// ---- Training crops

struct DetSampleOptions {
  int64_t size = 640;          // the crop is size x size, a multiple of 32 (the detector's stride)
  int64_t min_side = 800;      // the page's longer side is scaled to a length drawn uniformly
  int64_t max_side = 1600;     // from [min_side, max_side] ...
  double max_upscale = 2;      // ... but a page is never enlarged more than this
  double p_text_crop = 0.8;    // the crop is placed around a random line (else anywhere)
  DetTargetOptions targets;
  // Throws naming the field: size a positive multiple of 32, 1 <= min_side <= max_side,
  // max_upscale >= 1, p_text_crop in [0, 1], and the targets' options.
  void validate() const;
};

struct DetSample {
  GrayImage image;          // size x size, white (255) where the scaled page does not reach
  DetTargets maps;          // on the crop's pixels
  std::vector<Quad> lines;  // the lines that reach the crop (their border included), in its pixels
  double scale_x = 1, scale_y = 1;  // page pixels -> scaled page pixels (the rounding differs per axis)
  int64_t crop_x = 0, crop_y = 0;   // the scaled page's pixel at the crop's (0, 0); negative: padding
};

// A training crop: `page` scaled (area average when shrinking, bilinear when enlarging;
// resize_to_height of runtime/image.h) so that its longer side has a length drawn from
// [min_side, max_side] (at most max_upscale times the page), then a size x size crop placed,
// with probability p_text_crop, around a randomly chosen line (the crop's centre within
// size / 3 of the line's centre along each axis, then moved to stay on the page) and otherwise
// uniformly; `lines` are the page's line outlines in page pixels. A pure function of (page,
// lines, seed, options).
DetSample make_det_sample(const GrayImage& page, const std::vector<Quad>& lines, uint64_t seed,
                          const DetSampleOptions& o = {});

}  // namespace ocrt::train
