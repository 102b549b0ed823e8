#include "models/text_boxes.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace ocrt::nn {

namespace {

double cross(const Point& o, const Point& a, const Point& b) {
  return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
}

}  // namespace

std::vector<Point> convex_hull(std::vector<Point> pts) {
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.x < b.x || (a.x == b.x && a.y < b.y); });
  pts.erase(std::unique(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.x == b.x && a.y == b.y; }),
            pts.end());
  if (pts.size() < 3) return pts;
  std::vector<Point> hull(2 * pts.size());
  size_t k = 0;
  for (size_t i = 0; i < pts.size(); ++i) {  // lower chain
    while (k >= 2 && cross(hull[k - 2], hull[k - 1], pts[i]) <= 0) --k;
    hull[k++] = pts[i];
  }
  for (size_t i = pts.size() - 1, lower = k + 1; i-- > 0;) {  // upper chain
    while (k >= lower && cross(hull[k - 2], hull[k - 1], pts[i]) <= 0) --k;
    hull[k++] = pts[i];
  }
  hull.resize(k - 1);  // the last point is the first
  return hull;
}

RotatedRect min_area_rect(const std::vector<Point>& points) {
  RotatedRect best;
  if (points.empty()) return best;
  const std::vector<Point> hull = convex_hull(points);
  if (hull.size() == 1) {
    best.centre = hull[0];
    return best;
  }
  double best_area = INFINITY;
  for (size_t i = 0; i < hull.size(); ++i) {
    const Point& a = hull[i];
    const Point& b = hull[(i + 1) % hull.size()];
    const double len = std::hypot(b.x - a.x, b.y - a.y);
    if (len == 0) continue;
    const Point u{(b.x - a.x) / len, (b.y - a.y) / len};
    double lo_u = INFINITY, hi_u = -INFINITY, lo_v = INFINITY, hi_v = -INFINITY;
    for (const Point& p : hull) {
      const double pu = p.x * u.x + p.y * u.y, pv = -p.x * u.y + p.y * u.x;
      lo_u = std::min(lo_u, pu), hi_u = std::max(hi_u, pu);
      lo_v = std::min(lo_v, pv), hi_v = std::max(hi_v, pv);
    }
    const double area = (hi_u - lo_u) * (hi_v - lo_v);
    if (area < best_area - 1e-9) {
      best_area = area;
      const double cu = (lo_u + hi_u) / 2, cv = (lo_v + hi_v) / 2;
      best.centre = {cu * u.x - cv * u.y, cu * u.y + cv * u.x};
      best.width = hi_u - lo_u, best.height = hi_v - lo_v;
      best.direction = u;
    }
  }
  return best;
}

double unshrink_offset(double w, double h, double shrink_ratio) {
  // Training shrank a w0 x h0 rectangle by D = w0 h0 (1 - r^2) / (2 (w0 + h0)) on every side, so
  // w = w0 - 2D, h = h0 - 2D. With c = (1 - r^2) / 2 that is 2D (w + h + 4D) = 2c (w + 2D)(h + 2D):
  //   (4 - 4c) D^2 + (1 - 2c)(w + h) D - c w h = 0, whose positive root is D.
  if (w <= 0 || h <= 0) return 0;
  const double c = (1 - shrink_ratio * shrink_ratio) / 2;
  const double qa = 4 - 4 * c, qb = (1 - 2 * c) * (w + h), qc = -c * w * h;
  return (-qb + std::sqrt(qb * qb - 4 * qa * qc)) / (2 * qa);
}

std::vector<TextBox> text_boxes(const float* prob, int64_t height, int64_t width, const TextBoxOptions& o,
                                int64_t image_width, int64_t image_height) {
  OCRT_CHECK(height >= 0 && width >= 0, "text_boxes: bad map size ", height, "x", width);
  OCRT_CHECK(std::isfinite(o.threshold) && std::isfinite(o.box_threshold) && o.unclip_ratio >= 0 && o.min_size >= 0 &&
                 std::isfinite(o.shrink_ratio) && o.shrink_ratio >= 0 && o.shrink_ratio < 1,
             "text_boxes: bad options");
  if (image_width <= 0) image_width = width;
  if (image_height <= 0) image_height = height;
  const double sx = width > 0 ? (double)image_width / (double)width : 1;
  const double sy = height > 0 ? (double)image_height / (double)height : 1;

  // 1-2. Text pixels, and their regions by flood fill (an explicit stack: no recursion depth).
  const int64_t n = height * width;
  std::vector<int32_t> region(n, -1);
  std::vector<int64_t> stack;
  std::vector<TextBox> boxes;
  struct Candidate {
    RotatedRect rect;
    double score;
  };
  std::vector<Candidate> found;
  for (int64_t start = 0; start < n; ++start) {
    if (region[start] >= 0 || !(prob[start] > o.threshold)) continue;
    const int32_t id = (int32_t)found.size();
    std::vector<Point> centres;
    double sum = 0;
    region[start] = id;
    stack.assign(1, start);
    while (!stack.empty()) {
      const int64_t at = stack.back();
      stack.pop_back();
      const int64_t y = at / width, x = at % width;
      centres.push_back({(double)x + 0.5, (double)y + 0.5});
      sum += prob[at];
      for (int64_t dy = -1; dy <= 1; ++dy)
        for (int64_t dx = -1; dx <= 1; ++dx) {
          const int64_t ny = y + dy, nx = x + dx;
          if (ny < 0 || ny >= height || nx < 0 || nx >= width) continue;
          const int64_t next = ny * width + nx;
          if (region[next] < 0 && prob[next] > o.threshold) {
            region[next] = id;
            stack.push_back(next);
          }
        }
    }
    // 3-4. The region's rectangle: around the pixel centres, then out to cover the pixels
    // themselves. An edge that runs along the pixel grid has every centre half a pixel inside
    // it; an edge that crosses rows or columns (turned by t against the grid, its centres'
    // distances from it spread over length * sin t) has its outermost centres nearly on it.
    // So each side moves out by half of max(0, 1 - spread).
    RotatedRect r = min_area_rect(centres);
    const double sin_t = std::min(std::abs(r.direction.x), std::abs(r.direction.y));
    const double w = r.width, h = r.height;
    r.height += std::max(0.0, 1 - w * sin_t);
    r.width += std::max(0.0, 1 - h * sin_t);
    found.push_back({r, sum / (double)centres.size()});
  }

  std::vector<Candidate> kept;
  for (const Candidate& c : found)
    if (c.score >= o.box_threshold && std::min(c.rect.width, c.rect.height) >= o.min_size) kept.push_back(c);
  if ((int64_t)kept.size() > o.max_regions) {
    std::stable_sort(kept.begin(), kept.end(), [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
    kept.resize((size_t)o.max_regions);
  }

  for (const Candidate& c : kept) {
    RotatedRect r = c.rect;
    // 5. Unclip: exactly undo the training's shrink, or the paper's rule.
    const double grow = o.shrink_ratio > 0 ? unshrink_offset(r.width, r.height, o.shrink_ratio)
                                           : r.width * r.height * o.unclip_ratio / (2 * (r.width + r.height));
    r.width += 2 * grow, r.height += 2 * grow;
    // The text runs along the longer side, pointing right (or down when it stands upright).
    Point u = r.direction;
    double along = r.width, across = r.height;
    if (r.height > r.width) u = {-u.y, u.x}, std::swap(along, across);
    if (u.x < 0 || (u.x == 0 && u.y < 0)) u = {-u.x, -u.y};
    const Point v{-u.y, u.x};  // across the text, downwards
    const Point& m = r.centre;
    auto corner = [&](double a, double b) {
      const double x = (m.x + a * along / 2 * u.x + b * across / 2 * v.x) * sx;
      const double y = (m.y + a * along / 2 * u.y + b * across / 2 * v.y) * sy;
      return Point{std::clamp(x, 0.0, (double)image_width), std::clamp(y, 0.0, (double)image_height)};
    };
    TextBox box;
    box.outline.corners = {corner(-1, -1), corner(1, -1), corner(1, 1), corner(-1, 1)};
    box.score = c.score;
    box.angle = std::atan2(u.y, u.x) * 180 / M_PI;
    if (box.angle <= -90) box.angle += 180;
    boxes.push_back(box);
  }
  sort_top_to_bottom(boxes);
  return boxes;
}

void sort_top_to_bottom(std::vector<TextBox>& boxes) {
  std::stable_sort(boxes.begin(), boxes.end(), [](const TextBox& a, const TextBox& b) {
    const Rect ra = a.outline.box(), rb = b.outline.box();
    return ra.y0 < rb.y0 || (ra.y0 == rb.y0 && ra.x0 < rb.x0);
  });
}

}  // namespace ocrt::nn
