#include "train/det_targets.h"

#include <algorithm>
#include <cmath>

#include "models/text_boxes.h"
#include "runtime/error.h"
#include "train/synth.h"

namespace ocrt::train {

namespace {

double cross(const Point& o, const Point& a, const Point& b) {
  return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
}

// Edge i of a polygon with positive shoelace area runs from p[i] to p[i+1] with the inside on
// its left: n . (q - p[i]) >= 0 for the unit normal n = (-dy, dx) / |d|.
struct HalfPlane {
  Point n;
  double c;  // inside: n . q >= c
  double eval(const Point& q) const { return n.x * q.x + n.y * q.y - c; }
};

HalfPlane edge_half_plane(const Point& a, const Point& b, double shift) {
  const double len = std::hypot(b.x - a.x, b.y - a.y);
  const Point n{-(b.y - a.y) / len, (b.x - a.x) / len};
  return {n, n.x * a.x + n.y * a.y + shift};
}

// Sutherland-Hodgman against one half-plane: the part of a convex polygon inside it.
std::vector<Point> clip(const std::vector<Point>& poly, const HalfPlane& h) {
  std::vector<Point> out;
  for (size_t i = 0; i < poly.size(); ++i) {
    const Point& a = poly[i];
    const Point& b = poly[(i + 1) % poly.size()];
    const double fa = h.eval(a), fb = h.eval(b);
    if (fa >= 0) out.push_back(a);
    if ((fa >= 0) != (fb >= 0)) {
      const double t = fa / (fa - fb);
      out.push_back({a.x + t * (b.x - a.x), a.y + t * (b.y - a.y)});
    }
  }
  return out;
}

// An edge a -> b, ready for the squared distance of many points to it (the threshold map asks
// it of every pixel of every border: a square root per pixel, not per edge).
struct Segment {
  Point a, d;
  double inv_len2;
  Segment(const Point& a_, const Point& b) : a(a_), d{b.x - a_.x, b.y - a_.y} {
    const double len2 = d.x * d.x + d.y * d.y;
    inv_len2 = len2 > 0 ? 1 / len2 : 0;
  }
  double distance2(const Point& p) const {
    const double px = p.x - a.x, py = p.y - a.y;
    const double t = std::clamp((px * d.x + py * d.y) * inv_len2, 0.0, 1.0);
    const double ex = px - t * d.x, ey = py - t * d.y;
    return ex * ex + ey * ey;
  }
};

// Where the row y = yc crosses a convex polygon: [*x0, *x1]; false when it misses.
bool row_span(const std::vector<Point>& poly, double yc, double* x0, double* x1) {
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < poly.size(); ++i) {
    const Point& a = poly[i];
    const Point& b = poly[(i + 1) % poly.size()];
    if (yc < std::min(a.y, b.y) || yc > std::max(a.y, b.y)) continue;
    if (a.y == b.y) {
      lo = std::min({lo, a.x, b.x}), hi = std::max({hi, a.x, b.x});
    } else {
      const double x = a.x + (yc - a.y) * (b.x - a.x) / (b.y - a.y);
      lo = std::min(lo, x), hi = std::max(hi, x);
    }
  }
  *x0 = lo, *x1 = hi;
  return lo <= hi;
}

// Calls f(x, y) for every pixel of the height x width map whose centre lies in the convex
// polygon (boundary included): row by row, only the span the polygon covers.
template <class F>
void for_each_pixel(const std::vector<Point>& poly, int64_t height, int64_t width, F&& f) {
  if (poly.size() < 3) return;
  const Rect box = bounding_rect(poly.data(), poly.size());
  const int64_t y0 = std::max<int64_t>(0, (int64_t)std::ceil(box.y0 - 0.5));
  const int64_t y1 = std::min<int64_t>(height - 1, (int64_t)std::floor(box.y1 - 0.5));
  for (int64_t y = y0; y <= y1; ++y) {
    double xl, xr;
    if (!row_span(poly, (double)y + 0.5, &xl, &xr)) continue;
    const int64_t x0 = std::max<int64_t>(0, (int64_t)std::ceil(xl - 0.5));
    const int64_t x1 = std::min<int64_t>(width - 1, (int64_t)std::floor(xr - 0.5));
    for (int64_t x = x0; x <= x1; ++x) f(x, y);
  }
}

GrayImage transposed(const GrayImage& in) {
  GrayImage out;
  out.width = in.height, out.height = in.width;
  out.pixels.resize(in.pixels.size());
  for (int64_t y = 0; y < in.height; ++y)
    for (int64_t x = 0; x < in.width; ++x) out.pixels[(size_t)(x * out.width + y)] = in.at(x, y);
  return out;
}

// The page with its longer side `longer` pixels long. resize_to_height fixes the height and
// rounds the width from the aspect ratio, so a wide page is turned on its side first: the
// longer side is then exactly `longer` and only the shorter one is rounded.
GrayImage scale_longer_side(const GrayImage& page, int64_t longer) {
  if (page.height >= page.width) return resize_to_height(page, longer);
  return transposed(resize_to_height(transposed(page), longer));
}

}  // namespace

void DetTargetOptions::validate() const {
  OCRT_CHECK(shrink_ratio > 0 && shrink_ratio < 1, "detector targets: shrink_ratio must be in (0, 1), got ",
             shrink_ratio);
  OCRT_CHECK(std::isfinite(min_text_height) && min_text_height >= 0,
             "detector targets: min_text_height must be >= 0, got ", min_text_height);
  OCRT_CHECK(thresh_min >= 0 && thresh_min < thresh_max && thresh_max <= 1,
             "detector targets: thresh_min and thresh_max must satisfy 0 <= thresh_min < thresh_max <= 1, got ",
             thresh_min, " and ", thresh_max);
}

std::vector<Point> convex_polygon(const std::vector<Point>& points) { return nn::convex_hull(points); }

double polygon_area(const std::vector<Point>& p) {
  double twice = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const Point& a = p[i];
    const Point& b = p[(i + 1) % p.size()];
    twice += a.x * b.y - b.x * a.y;
  }
  return std::abs(twice) / 2;
}

double polygon_perimeter(const std::vector<Point>& p) {
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const Point& a = p[i];
    const Point& b = p[(i + 1) % p.size()];
    sum += std::hypot(b.x - a.x, b.y - a.y);
  }
  return sum;
}

double polygon_thickness(const std::vector<Point>& p) {
  // The narrowest pair of parallel support lines of a convex polygon has one of them on an
  // edge (the rotating-calipers argument), so trying every edge is enough.
  if (p.size() < 3) return 0;
  double best = INFINITY;
  for (size_t i = 0; i < p.size(); ++i) {
    const Point& a = p[i];
    const Point& b = p[(i + 1) % p.size()];
    const double len = std::hypot(b.x - a.x, b.y - a.y);
    if (len == 0) continue;
    double far = 0;
    for (const Point& q : p) far = std::max(far, std::abs(cross(a, b, q)) / len);
    best = std::min(best, far);
  }
  return std::isfinite(best) ? best : 0;
}

double shrink_offset(const std::vector<Point>& polygon, double shrink_ratio) {
  const double area = polygon_area(polygon), length = polygon_perimeter(polygon);
  if (area <= 0 || length <= 0) return 0;
  return area * (1 - shrink_ratio * shrink_ratio) / length;
}

std::vector<Point> shrink_polygon(const std::vector<Point>& convex, double d) {
  const std::vector<Point> p = convex_polygon(convex);
  if (p.size() < 3) return {};
  std::vector<Point> out = p;
  for (size_t i = 0; i < p.size() && out.size() >= 3; ++i) out = clip(out, edge_half_plane(p[i], p[(i + 1) % p.size()], d));
  // Shrunk by exactly half its width, a polygon leaves a segment whose computed area is
  // rounding noise: that is nothing left, too.
  if (out.size() < 3 || polygon_area(out) <= 1e-9 * polygon_area(p)) return {};
  return out;
}

std::vector<Point> intersect_convex(const std::vector<Point>& a, const std::vector<Point>& b) {
  const std::vector<Point> pa = convex_polygon(a), pb = convex_polygon(b);
  if (pa.size() < 3 || pb.size() < 3) return {};
  std::vector<Point> out = pa;
  for (size_t i = 0; i < pb.size() && out.size() >= 3; ++i) out = clip(out, edge_half_plane(pb[i], pb[(i + 1) % pb.size()], 0));
  if (out.size() < 3 || polygon_area(out) <= 0) return {};
  return out;
}

DetTargets make_det_targets(const std::vector<Quad>& lines, int64_t height, int64_t width, const DetTargetOptions& o) {
  o.validate();
  OCRT_CHECK(height >= 0 && width >= 0, "make_det_targets: bad map size ", height, "x", width);
  DetTargets t;
  t.height = height, t.width = width;
  const size_t n = (size_t)(height * width);
  t.shrink.assign(n, 0.0f);
  t.shrink_mask.assign(n, 1.0f);
  std::vector<float> border(n, 0.0f);  // v in [0, 1] before scaling to the threshold range
  t.thresh_mask.assign(n, 0.0f);

  for (const Quad& q : lines) {
    const std::vector<Point> poly = convex_polygon({q.corners.begin(), q.corners.end()});
    const double d = shrink_offset(poly, o.shrink_ratio);
    const double thickness = polygon_thickness(poly);
    const std::vector<Point> shrunk = d > 0 && d < thickness / 2 ? shrink_polygon(poly, d) : std::vector<Point>{};
    if (thickness < o.min_text_height || shrunk.empty()) {
      // Not text the detector can learn (too thin to see, or shrunk to nothing): neither
      // positive nor negative, and no border to learn either.
      for_each_pixel(poly, height, width, [&](int64_t x, int64_t y) { t.shrink_mask[(size_t)(y * width + x)] = 0; });
      ++t.ignored;
      continue;
    }
    for_each_pixel(shrunk, height, width, [&](int64_t x, int64_t y) { t.shrink[(size_t)(y * width + x)] = 1; });

    // The border: every pixel within d of the outline, or inside it (the outline dilated by d,
    // round corners). All of them lie in the outline's box grown by d and in the outline with
    // every edge moved out by d (mitred corners), so only the pixels of that intersection are
    // scanned.
    const Rect b = bounding_rect(poly.data(), poly.size());
    std::vector<Point> region = {{b.x0 - d, b.y0 - d}, {b.x1 + d, b.y0 - d}, {b.x1 + d, b.y1 + d}, {b.x0 - d, b.y1 + d}};
    std::vector<HalfPlane> inside;
    std::vector<Segment> edges;
    for (size_t i = 0; i < poly.size(); ++i) {
      const Point& a = poly[i];
      const Point& c = poly[(i + 1) % poly.size()];
      region = clip(region, edge_half_plane(a, c, -d));
      inside.push_back(edge_half_plane(a, c, 0));
      edges.emplace_back(a, c);
    }
    const double d2 = d * d;
    for_each_pixel(region, height, width, [&](int64_t x, int64_t y) {
      const Point p{(double)x + 0.5, (double)y + 0.5};
      double dist2 = INFINITY;
      for (const Segment& e : edges) dist2 = std::min(dist2, e.distance2(p));
      const size_t at = (size_t)(y * width + x);
      if (dist2 <= d2) {
        t.thresh_mask[at] = 1;
        border[at] = std::max(border[at], (float)(1 - std::sqrt(dist2) / d));
      } else {
        // Farther than d from every edge: masked (with v = 0) only inside the outline.
        bool in = true;
        for (const HalfPlane& h : inside) in = in && h.eval(p) >= 0;
        if (in) t.thresh_mask[at] = 1;
      }
    });
  }

  t.thresh.resize(n);
  for (size_t i = 0; i < n; ++i) t.thresh[i] = o.thresh_min + border[i] * (o.thresh_max - o.thresh_min);
  return t;
}

void DetSampleOptions::validate() const {
  OCRT_CHECK(size >= 32 && size % 32 == 0, "detector sample: size must be a positive multiple of 32, got ", size);
  OCRT_CHECK(min_side >= 1 && min_side <= max_side, "detector sample: min_side and max_side must satisfy ",
             "1 <= min_side <= max_side, got ", min_side, " and ", max_side);
  OCRT_CHECK(max_side <= 16384, "detector sample: max_side must be at most 16384, got ", max_side);
  OCRT_CHECK(std::isfinite(max_upscale) && max_upscale >= 1, "detector sample: max_upscale must be >= 1, got ",
             max_upscale);
  OCRT_CHECK(p_text_crop >= 0 && p_text_crop <= 1, "detector sample: p_text_crop must be a probability in [0, 1], got ",
             p_text_crop);
  targets.validate();
}

DetSample make_det_sample(const GrayImage& page, const std::vector<Quad>& lines, uint64_t seed,
                          const DetSampleOptions& o) {
  o.validate();
  OCRT_CHECK(page.width >= 1 && page.height >= 1 && (int64_t)page.pixels.size() == page.width * page.height,
             "make_det_sample: the page is empty or inconsistent (", page.width, "x", page.height, ", ",
             page.pixels.size(), " pixels)");
  // Every draw is taken whether it is used or not, so the stream's use never depends on the
  // page: side, text or not, which line, the jitter, the uniform placement.
  SampleRng rng(seed);
  const int64_t side = rng.integer(o.min_side, o.max_side);
  const bool text_crop = rng.uniform() < o.p_text_crop;
  const double pick = rng.uniform();
  const double jx = rng.uniform(-1, 1), jy = rng.uniform(-1, 1);
  const double ux = rng.uniform(), uy = rng.uniform();

  // 1. Scale.
  const int64_t longer = std::max(page.width, page.height);
  const double scale = std::min((double)side / (double)longer, o.max_upscale);
  const int64_t target = std::max<int64_t>(1, std::llround((double)longer * scale));
  const GrayImage scaled = target == longer ? page : scale_longer_side(page, target);
  DetSample s;
  s.scale_x = (double)scaled.width / (double)page.width;
  s.scale_y = (double)scaled.height / (double)page.height;
  std::vector<Quad> placed;
  for (const Quad& q : lines) {
    Quad p = q;
    for (Point& c : p.corners) c = {c.x * s.scale_x, c.y * s.scale_y};
    placed.push_back(p);
  }

  // 2. Place the crop. Along an axis where the page is shorter than the crop the origin is
  // negative (the page lies somewhere inside the crop, white around it); where it is longer,
  // the crop stays on the page.
  const int64_t S = o.size;
  const int64_t lo_x = std::min<int64_t>(0, scaled.width - S), hi_x = std::max<int64_t>(0, scaled.width - S);
  const int64_t lo_y = std::min<int64_t>(0, scaled.height - S), hi_y = std::max<int64_t>(0, scaled.height - S);
  if (text_crop && !placed.empty()) {
    const size_t i = std::min(placed.size() - 1, (size_t)(pick * (double)placed.size()));
    Point c{0, 0};
    for (const Point& p : placed[i].corners) c.x += p.x / 4, c.y += p.y / 4;
    s.crop_x = std::llround(c.x - (double)S / 2 + jx * (double)S / 3);
    s.crop_y = std::llround(c.y - (double)S / 2 + jy * (double)S / 3);
  } else {
    s.crop_x = lo_x + (int64_t)std::floor(ux * (double)(hi_x - lo_x + 1));
    s.crop_y = lo_y + (int64_t)std::floor(uy * (double)(hi_y - lo_y + 1));
  }
  s.crop_x = std::clamp(s.crop_x, lo_x, hi_x);
  s.crop_y = std::clamp(s.crop_y, lo_y, hi_y);

  // 3. Cut it out, and move the lines into it.
  s.image.width = s.image.height = S;
  s.image.pixels.assign((size_t)(S * S), 255);
  for (int64_t y = 0; y < S; ++y) {
    const int64_t sy = y + s.crop_y;
    if (sy < 0 || sy >= scaled.height) continue;
    const int64_t x0 = std::max<int64_t>(0, -s.crop_x), x1 = std::min<int64_t>(S, scaled.width - s.crop_x);
    if (x1 > x0)
      std::copy_n(scaled.pixels.begin() + (ptrdiff_t)(sy * scaled.width + x0 + s.crop_x), x1 - x0,
                  s.image.pixels.begin() + (ptrdiff_t)(y * S + x0));
  }
  // A line just outside the crop still has its border (within D of it) inside.
  for (Quad q : placed) {
    for (Point& c : q.corners) c = {c.x - (double)s.crop_x, c.y - (double)s.crop_y};
    const Rect b = q.box();
    const double d = shrink_offset(convex_polygon({q.corners.begin(), q.corners.end()}), o.targets.shrink_ratio);
    if (b.x1 + d > 0 && b.x0 - d < (double)S && b.y1 + d > 0 && b.y0 - d < (double)S) s.lines.push_back(q);
  }
  s.maps = make_det_targets(s.lines, S, S, o.targets);
  return s;
}

}  // namespace ocrt::train
