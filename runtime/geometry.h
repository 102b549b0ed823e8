// Plain geometry in image pixels, shared by what renders pages (train/synth_page.h) and what
// reads them (infer/page.h, models/text_boxes.h).
#pragma once
#include <array>
#include <cmath>
#include <cstddef>

namespace ocrt {

struct Point {
  double x = 0, y = 0;
};

inline double distance(const Point& a, const Point& b) { return std::hypot(b.x - a.x, b.y - a.y); }

// An axis-aligned box in page pixels: x0 <= x < x1, y0 <= y < y1.
struct Rect {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  double width() const { return x1 - x0; }
  double height() const { return y1 - y0; }
  double area() const { return width() * height(); }
  bool empty() const { return !(x1 > x0 && y1 > y0); }
  Rect united(const Rect& o) const;  // the smallest box holding both (an empty box is ignored)
};

// The area two boxes share (0 when they do not overlap).
double overlap_area(const Rect& a, const Rect& b);

// The smallest axis-aligned box around some points.
Rect bounding_rect(const Point* points, size_t n);

// A text line's outline on the page: the four corners of a (possibly rotated) rectangle, in
// the order top-left, top-right, bottom-right, bottom-left as the text reads. The line image
// given to the recogniser is this rectangle cut out and turned upright: its top edge is
// corners[0] -> corners[1].
struct Quad {
  std::array<Point, 4> corners;
  Rect box() const { return bounding_rect(corners.data(), 4); }
  static Quad from_rect(const Rect& r);
};

}  // namespace ocrt
