// From a text detector's probability map to text-line outlines (the post-processing of
// differentiable binarisation, Liao et al. 2020, "Real-time Scene Text Detection with
// Differentiable Binarization"):
//   1. threshold the map (p > threshold) into a bitmap of text pixels;
//   2. split the bitmap into connected regions (8-neighbourhood);
//   3. drop regions that are too small or whose mean probability is below box_threshold;
//   4. fit each region's smallest rotated rectangle (convex hull, then the hull edge that gives
//      the least area: a rectangle of least area has a side on the hull);
//   5. grow it back to the glyphs' extent: the detector learns regions shrunk from the text by
//      an offset D = A (1 - r^2) / L (area A, perimeter L); the rectangle is grown on every side
//      by the offset that undoes that shrink exactly (shrink_ratio given), or by
//      D' = A' * unclip_ratio / L' of the fitted rectangle (the paper's rule, unclip_ratio 1.5);
//   6. scale from the map's pixels to the image's.
// A region's outline runs along its longer side (a text line is wider than it is tall).
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/geometry.h"

namespace ocrt::nn {

struct TextBoxOptions {
  float threshold = 0.3f;       // a pixel is text when its probability is above this
  float box_threshold = 0.6f;   // a region is kept when its mean probability is at least this
  double unclip_ratio = 1.5;    // growth of the fitted rectangle (0: none), when shrink_ratio is 0
  // > 0: the ratio r training shrank lines with; each fitted rectangle then grows by the offset
  // that exactly undoes that shrink for a rectangle (unshrink_offset), instead of unclip_ratio.
  // For long lines unclip_ratio ~ 1/r^2 - 1 comes close, but not for short ones.
  double shrink_ratio = 0;
  double min_size = 3;          // the fitted rectangle's shorter side, in map pixels, must reach this
  int64_t max_regions = 10000;  // the regions kept, most probable first (a noise map cannot explode)
};

struct TextBox {
  Quad outline;        // in image pixels, corners top-left, top-right, bottom-right, bottom-left
  double score = 0;    // the region's mean probability
  double angle = 0;    // of the text direction, in degrees, in (-90, 90]; positive turns clockwise
};

// The order text_boxes gives: by the top of each outline's bounding box, then by its left
// (a stable sort: boxes level with each other keep their order).
void sort_top_to_bottom(std::vector<TextBox>& boxes);

// prob: height x width values in [0, 1], row-major. The map covers an image of
// image_width x image_height pixels (the same size when 0), and boxes are given in that image's
// pixels, clamped to it. Regions come out top to bottom, then left to right (reading order is
// the job of reading_order()).
std::vector<TextBox> text_boxes(const float* prob, int64_t height, int64_t width, const TextBoxOptions& o = {},
                                int64_t image_width = 0, int64_t image_height = 0);

// The offset D that grows a w x h rectangle back to the one that training shrank (by
// D = A (1 - r^2) / L on every side, r = shrink_ratio) into w x h.
double unshrink_offset(double w, double h, double shrink_ratio);

// The smallest-area rectangle around some points (width along its first side).
struct RotatedRect {
  Point centre;
  double width = 0, height = 0;  // width along `direction`, height across it
  Point direction{1, 0};         // unit vector
};
RotatedRect min_area_rect(const std::vector<Point>& points);

// The convex hull, counter-clockwise in a y-down image (Andrew's monotone chain); collinear
// points dropped.
std::vector<Point> convex_hull(std::vector<Point> points);

}  // namespace ocrt::nn
