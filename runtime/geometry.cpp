#include "runtime/geometry.h"

#include <algorithm>

namespace ocrt {

Rect Rect::united(const Rect& o) const {
  if (o.empty()) return *this;
  if (empty()) return o;
  return {std::min(x0, o.x0), std::min(y0, o.y0), std::max(x1, o.x1), std::max(y1, o.y1)};
}

double overlap_area(const Rect& a, const Rect& b) {
  const double w = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
  const double h = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
  return w > 0 && h > 0 ? w * h : 0;
}

Rect bounding_rect(const Point* points, size_t n) {
  if (n == 0) return {};
  Rect r{points[0].x, points[0].y, points[0].x, points[0].y};
  for (size_t i = 1; i < n; ++i) {
    r.x0 = std::min(r.x0, points[i].x), r.x1 = std::max(r.x1, points[i].x);
    r.y0 = std::min(r.y0, points[i].y), r.y1 = std::max(r.y1, points[i].y);
  }
  return r;
}

Quad Quad::from_rect(const Rect& r) {
  return {{Point{r.x0, r.y0}, Point{r.x1, r.y0}, Point{r.x1, r.y1}, Point{r.x0, r.y1}}};
}

}  // namespace ocrt
