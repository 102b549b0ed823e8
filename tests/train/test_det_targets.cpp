// The detector's training targets and crops (train/det_targets.h): shrunk fills against the
// analytic shrunk rectangle (upright, turned, at the image's edge), tiny lines ignored, the
// threshold map at known distances and where two borders meet, the polygon helpers; the
// sampler's size, determinism, placement and odd pages; and the round trip through the
// inference post-processing (models/text_boxes.h): the shrink map of some lines, read back as a
// probability map, gives boxes on the lines.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

#include "models/text_boxes.h"
#include "train/det_targets.h"
#include "train/synth.h"

using namespace ocrt;
using namespace ocrt::train;

namespace {

// DBNetConfig's defaults (models/dbnet.h), kept here so these tests do not need the model.
constexpr double kShrinkRatio = 0.6;
constexpr float kThreshold = 0.3f, kBoxThreshold = 0.5f;

// A rectangle of w x h centred on (cx, cy), turned clockwise by deg (y down).
Quad turned_rect(double cx, double cy, double w, double h, double deg) {
  const double a = deg * M_PI / 180, c = std::cos(a), s = std::sin(a);
  auto at = [&](double u, double v) { return Point{cx + u * c - v * s, cy + u * s + v * c}; };
  return {{at(-w / 2, -h / 2), at(w / 2, -h / 2), at(w / 2, h / 2), at(-w / 2, h / 2)}};
}

std::vector<Point> points(const Quad& q) { return {q.corners.begin(), q.corners.end()}; }

double iou(const Quad& a, const Quad& b) {
  const double inter = polygon_area(intersect_convex(points(a), points(b)));
  return inter / (polygon_area(points(a)) + polygon_area(points(b)) - inter);
}

// A point inside a quad whose corners go round in either direction.
bool inside(const Quad& q, const Point& p) {
  int sign = 0;
  for (size_t i = 0; i < 4; ++i) {
    const Point& a = q.corners[i];
    const Point& b = q.corners[(i + 1) % 4];
    const double c = (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x);
    const int s = c > 0 ? 1 : (c < 0 ? -1 : 0);
    if (s != 0 && sign != 0 && s != sign) return false;
    if (s != 0) sign = s;
  }
  return true;
}

float at(const std::vector<float>& map, const DetTargets& t, int64_t x, int64_t y) {
  return map[(size_t)(y * t.width + x)];
}

int64_t count(const std::vector<float>& map, float value) {
  int64_t n = 0;
  for (float v : map) n += v == value;
  return n;
}

// The pixels whose centre x + 0.5 lies in [lo, hi].
int64_t centres_in(double lo, double hi) {
  return std::max<int64_t>(0, (int64_t)std::floor(hi - 0.5) - (int64_t)std::ceil(lo - 0.5) + 1);
}

GrayImage white(int64_t w, int64_t h) {
  GrayImage im;
  im.width = w, im.height = h;
  im.pixels.assign((size_t)(w * h), 255);
  return im;
}

}  // namespace

TEST_CASE("det targets: the polygon helpers", "[det_targets]") {
  const std::vector<Point> r = points(Quad::from_rect({10, 20, 70, 40}));
  CHECK(polygon_area(r) == Approx(1200));
  CHECK(polygon_perimeter(r) == Approx(160));
  CHECK(polygon_thickness(r) == Approx(20));
  CHECK(polygon_thickness(points(turned_rect(0, 0, 50, 8, 33))) == Approx(8));
  // D = A (1 - r^2) / L = 1200 * 0.64 / 160.
  CHECK(shrink_offset(r, kShrinkRatio) == Approx(4.8));
  const std::vector<Point> s = shrink_polygon(r, 4.8);
  REQUIRE(s.size() == 4);
  const Rect b = bounding_rect(s.data(), s.size());
  CHECK(b.x0 == Approx(14.8));
  CHECK(b.x1 == Approx(65.2));
  CHECK(b.y0 == Approx(24.8));
  CHECK(b.y1 == Approx(35.2));
  CHECK(shrink_polygon(r, 10).empty());  // half the shorter side: nothing left
  // Corners in any order, either orientation, repeated: the same convex polygon.
  const std::vector<Point> shuffled = {r[2], r[0], r[3], r[1], r[0]};
  CHECK(polygon_area(convex_polygon(shuffled)) == Approx(1200));
  CHECK(convex_polygon({{0, 0}, {1, 1}, {2, 2}}).size() == 2);  // collinear: no polygon
  CHECK(shrink_offset({{0, 0}, {1, 1}, {2, 2}}, kShrinkRatio) == 0);
  CHECK(polygon_area(intersect_convex(r, points(Quad::from_rect({60, 30, 100, 100})))) == Approx(100));
  CHECK(intersect_convex(r, points(Quad::from_rect({80, 0, 90, 10}))).empty());
}

TEST_CASE("det targets: an upright rectangle's shrunk fill is the analytic shrunk rectangle", "[det_targets]") {
  // 60 x 20 at (10, 20): D = 4.8, shrunk to [14.8, 65.2] x [24.8, 35.2].
  const DetTargets t = make_det_targets({Quad::from_rect({10, 20, 70, 40})}, 60, 90);
  REQUIRE(t.shrink.size() == 60 * 90);
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < t.width; ++x) {
      const double cx = x + 0.5, cy = y + 0.5;
      const bool in = cx >= 14.8 && cx <= 65.2 && cy >= 24.8 && cy <= 35.2;
      INFO("pixel " << x << ", " << y);
      REQUIRE(at(t.shrink, t, x, y) == (in ? 1.0f : 0.0f));
    }
  CHECK(count(t.shrink, 1) == centres_in(14.8, 65.2) * centres_in(24.8, 35.2));
  CHECK(count(t.shrink, 1) == 50 * 10);
  CHECK(count(t.shrink_mask, 1) == 60 * 90);  // nothing ignored
  CHECK(t.ignored == 0);
}

TEST_CASE("det targets: a turned rectangle shrinks about its centre", "[det_targets]") {
  const double w = 120, h = 24, deg = 30;
  const Quad q = turned_rect(100, 80, w, h, deg);
  const double d = w * h * (1 - kShrinkRatio * kShrinkRatio) / (2 * (w + h));
  const DetTargets t = make_det_targets({q}, 160, 200);
  const double a = deg * M_PI / 180;
  int64_t inside = 0;
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < t.width; ++x) {
      // The pixel centre in the rectangle's own axes.
      const double dx = x + 0.5 - 100, dy = y + 0.5 - 80;
      const double u = dx * std::cos(a) + dy * std::sin(a), v = -dx * std::sin(a) + dy * std::cos(a);
      const double margin = std::min(w / 2 - d - std::abs(u), h / 2 - d - std::abs(v));
      if (std::abs(margin) < 1e-9) continue;  // on the edge: either is right
      INFO("pixel " << x << ", " << y);
      REQUIRE(at(t.shrink, t, x, y) == (margin > 0 ? 1.0f : 0.0f));
      inside += margin > 0;
    }
  CHECK(count(t.shrink, 1) == inside);
  CHECK((double)inside == Approx((w - 2 * d) * (h - 2 * d)).epsilon(0.03));
}

TEST_CASE("det targets: lines at and beyond the image's edges are clipped", "[det_targets]") {
  // 60 x 20 reaching out of the top-left corner: shrunk to [-15.2, 35.2] x [-0.2, 10.2].
  const Quad corner = Quad::from_rect({-20, -5, 40, 15});
  // Out past the bottom-right corner, and wholly outside.
  const Quad beyond = Quad::from_rect({30, 40, 90, 60});
  const Quad outside = Quad::from_rect({200, 200, 260, 220});
  const DetTargets t = make_det_targets({corner, beyond, outside}, 50, 50);
  int64_t top_left = 0;
  for (int64_t y = 0; y < 25; ++y)
    for (int64_t x = 0; x < 25; ++x) top_left += at(t.shrink, t, x, y) == 1;
  CHECK(top_left == 25 * 10);                           // columns 0..24 of rows 0..9
  CHECK(at(t.shrink, t, 34, 9) == 1);
  CHECK(at(t.shrink, t, 35, 9) == 0);
  CHECK(at(t.shrink, t, 0, 10) == 0);
  // beyond: shrunk to [34.8, 85.2] x [44.8, 55.2]: columns 35..49 of rows 45..49.
  int64_t bottom_right = 0;
  for (int64_t y = 25; y < 50; ++y)
    for (int64_t x = 25; x < 50; ++x) bottom_right += at(t.shrink, t, x, y) == 1;
  CHECK(bottom_right == 15 * 5);
  // Borders stop at the edge too: the top-left line's border covers the first row.
  CHECK(at(t.thresh_mask, t, 0, 0) == 1);
  CHECK(count(t.shrink_mask, 0) == 0);
  // An empty map is fine.
  const DetTargets none = make_det_targets({corner}, 0, 0);
  CHECK(none.shrink.empty());
}

TEST_CASE("det targets: a line thinner than min_text_height is ignored, not negative", "[det_targets]") {
  const Quad tiny = Quad::from_rect({10, 10.2, 50, 12.2});  // 2 pixels high
  const Quad line = Quad::from_rect({10, 30, 50, 40});
  const DetTargets t = make_det_targets({tiny, line}, 50, 60);
  CHECK(t.ignored == 1);
  // Its whole outline (pixel centres in [10, 50] x [10.2, 12.2]: rows 10 and 11) leaves the mask.
  CHECK(count(t.shrink_mask, 0) == 40 * 2);
  CHECK(at(t.shrink_mask, t, 10, 10) == 0);
  CHECK(at(t.shrink_mask, t, 49, 11) == 0);
  CHECK(at(t.shrink_mask, t, 30, 12) == 1);
  for (int64_t x = 0; x < 60; ++x) CHECK(at(t.shrink, t, x, 11) == 0);
  CHECK(at(t.thresh_mask, t, 30, 10) == 0);  // no border learnt either
  CHECK(at(t.shrink, t, 30, 35) == 1);       // the other line is untouched
  // min_text_height 0 learns it: shrunk by D = 80 * 0.64 / 84 = 0.61, to [10.61, 49.39] x
  // [10.81, 11.59]: columns 11..48 of row 11.
  DetTargetOptions o;
  o.min_text_height = 0;
  const DetTargets all = make_det_targets({tiny}, 50, 60, o);
  const double d = 80 * 0.64 / 84;
  CHECK(all.ignored == 0);
  CHECK(count(all.shrink, 1) == centres_in(10 + d, 50 - d) * centres_in(10.2 + d, 12.2 - d));
  CHECK(count(all.shrink, 1) == 38);
  CHECK(count(all.shrink_mask, 1) == 50 * 60);
  // A line with no area is ignored whatever the option.
  CHECK(make_det_targets({Quad::from_rect({5, 5, 40, 5})}, 20, 50, o).ignored == 1);
}

TEST_CASE("det targets: the threshold map at known distances from the outline", "[det_targets]") {
  // Edges through pixel centres: 60 x 20 with its top edge on row 20's centres. D = 4.8.
  const DetTargets t = make_det_targets({Quad::from_rect({20.5, 20.5, 80.5, 40.5})}, 70, 100);
  const double D = 4.8;
  auto expect = [&](double d) { return Approx(0.3 + 0.4 * (1 - std::min(d / D, 1.0))).margin(1e-6); };
  CHECK(at(t.thresh, t, 50, 20) == expect(0));  // on the edge: 0.7
  CHECK(at(t.thresh, t, 50, 20) == Approx(0.7));
  CHECK(at(t.thresh, t, 50, 18) == expect(2));  // outside
  CHECK(at(t.thresh, t, 50, 22) == expect(2));  // inside
  CHECK(at(t.thresh, t, 50, 16) == expect(4));
  CHECK(at(t.thresh_mask, t, 50, 16) == 1);
  CHECK(at(t.thresh, t, 50, 15) == Approx(0.3));  // 5 > D away: beyond the border
  CHECK(at(t.thresh_mask, t, 50, 15) == 0);
  CHECK(at(t.thresh, t, 50, 30) == Approx(0.3));  // deep inside: 10 from every edge, still masked
  CHECK(at(t.thresh_mask, t, 50, 30) == 1);
  CHECK(at(t.thresh, t, 2, 2) == Approx(0.3));
  CHECK(at(t.thresh_mask, t, 2, 2) == 0);
  // Round corners: 3 pixels out diagonally from the top-left corner is 4.24 < D away, 4 is 5.66.
  CHECK(at(t.thresh, t, 17, 17) == expect(3 * std::sqrt(2.0)));
  CHECK(at(t.thresh_mask, t, 17, 17) == 1);
  CHECK(at(t.thresh_mask, t, 16, 16) == 0);
  CHECK(at(t.thresh_mask, t, 20, 16) == 1);  // straight above the corner: 4 away
  // The mask is exactly the pixels within D of the rectangle.
  int64_t within = 0;
  for (int64_t y = 0; y < t.height; ++y)
    for (int64_t x = 0; x < t.width; ++x) {
      const double dx = std::max({20.5 - (x + 0.5), 0.0, x + 0.5 - 80.5});
      const double dy = std::max({20.5 - (y + 0.5), 0.0, y + 0.5 - 40.5});
      within += std::hypot(dx, dy) <= D;
    }
  CHECK(count(t.thresh_mask, 1) == within);
}

TEST_CASE("det targets: where two borders meet the threshold map takes the larger", "[det_targets]") {
  // Two lines 4 pixels apart (rows 41.5 .. 43.5 between them); D = 4.8 for both.
  const Quad a = Quad::from_rect({20.5, 20.5, 80.5, 40.5});
  const Quad b = Quad::from_rect({20.5, 44.5, 80.5, 64.5});
  const DetTargets t = make_det_targets({a, b}, 80, 100);
  const double D = 4.8;
  auto value = [&](double d) { return Approx(0.3 + 0.4 * (1 - d / D)).margin(1e-6); };
  CHECK(at(t.thresh, t, 50, 41) == value(1));  // 1 from a, 3 from b
  CHECK(at(t.thresh, t, 50, 42) == value(2));  // 2 from both: not added
  CHECK(at(t.thresh, t, 50, 43) == value(1));  // 3 from a, 1 from b
  // Each line alone gives the same values on its own side.
  const DetTargets only_a = make_det_targets({a}, 80, 100);
  CHECK(at(only_a.thresh, only_a, 50, 41) == at(t.thresh, t, 50, 41));
  CHECK(at(only_a.thresh, only_a, 50, 43) == value(3));
}

TEST_CASE("det targets: options are checked, naming the field", "[det_targets]") {
  DetTargetOptions o;
  o.shrink_ratio = 1;
  CHECK_THROWS_WITH(make_det_targets({}, 4, 4, o), Catch::Contains("shrink_ratio must be in (0, 1)"));
  o = {};
  o.min_text_height = -1;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("min_text_height"));
  o = {};
  o.thresh_min = 0.8f;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("thresh_min"));
  DetSampleOptions s;
  s.size = 100;
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("size must be a positive multiple of 32"));
  s = {};
  s.min_side = 2000;
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("min_side"));
  s = {};
  s.max_upscale = 0.5;
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("max_upscale"));
  s = {};
  s.p_text_crop = 2;
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("p_text_crop"));
  s = {};
  s.targets.shrink_ratio = 0;
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("shrink_ratio"));
  CHECK_THROWS_WITH(make_det_sample(GrayImage{}, {}, 1, {}), Catch::Contains("make_det_sample: the page is empty"));
}

TEST_CASE("det sample: size, determinism, scale and lines that stay on their ink", "[det_targets]") {
  // A 1000 x 700 page with black bars where its lines are (one turned).
  GrayImage page = white(1000, 700);
  std::vector<Quad> lines;
  for (int i = 0; i < 8; ++i) lines.push_back(Quad::from_rect({60.0 + 10 * i, 60.0 + 75 * i, 900.0 - 20 * i, 84.0 + 75 * i}));
  lines.push_back(turned_rect(500, 650, 400, 20, 3));
  for (int64_t y = 0; y < page.height; ++y)
    for (int64_t x = 0; x < page.width; ++x)
      for (const Quad& q : lines)
        if (inside(q, {x + 0.5, y + 0.5})) page.pixels[(size_t)(y * page.width + x)] = 0;

  DetSampleOptions o;
  o.size = 320;
  o.min_side = 400, o.max_side = 1200;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    INFO("seed " << seed);
    const DetSample s = make_det_sample(page, lines, seed, o);
    REQUIRE(s.image.width == 320);
    REQUIRE(s.image.height == 320);
    REQUIRE(s.image.pixels.size() == 320 * 320);
    for (const auto* m : {&s.maps.shrink, &s.maps.shrink_mask, &s.maps.thresh, &s.maps.thresh_mask})
      REQUIRE(m->size() == 320 * 320);
    // The longer side was scaled to [400, 1200] pixels.
    const double longer = 1000 * s.scale_x;
    CHECK(longer >= 400);
    CHECK(longer <= 1200);
    CHECK(s.scale_y == Approx(s.scale_x).epsilon(0.01));
    // Where a line's shrunk core is in the crop, the crop shows its ink.
    int64_t checked = 0;
    for (int64_t y = 0; y < 320; ++y)
      for (int64_t x = 0; x < 320; ++x)
        if (s.maps.shrink[(size_t)(y * 320 + x)] == 1) {
          CHECK(s.image.pixels[(size_t)(y * 320 + x)] < 128);
          ++checked;
        }
    // And each kept line's centre, when it is in the crop, is on ink.
    for (const Quad& q : s.lines) {
      Point c{0, 0};
      for (const Point& p : q.corners) c.x += p.x / 4, c.y += p.y / 4;
      if (c.x >= 1 && c.y >= 1 && c.x < 319 && c.y < 319)
        CHECK(s.image.pixels[(size_t)((int64_t)c.y * 320 + (int64_t)c.x)] < 128);
    }
    // The same seed gives the same sample, bit for bit.
    const DetSample again = make_det_sample(page, lines, seed, o);
    CHECK(again.image.pixels == s.image.pixels);
    CHECK(again.maps.shrink == s.maps.shrink);
    CHECK(again.maps.thresh == s.maps.thresh);
    CHECK((again.crop_x == s.crop_x && again.crop_y == s.crop_y));
  }
  CHECK(make_det_sample(page, lines, 1, o).image.pixels != make_det_sample(page, lines, 2, o).image.pixels);
}

TEST_CASE("det sample: text crops hold a line, small pages are padded white, 1x1 pages work", "[det_targets]") {
  // A big page with one small line far from the middle: a text crop always holds it.
  GrayImage page = white(3000, 2000);
  const std::vector<Quad> line = {Quad::from_rect({2500, 1700, 2800, 1730})};
  DetSampleOptions o;
  o.size = 256;
  o.p_text_crop = 1;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const DetSample s = make_det_sample(page, line, seed, o);
    REQUIRE(s.lines.size() == 1);
    int64_t positives = 0;
    for (float v : s.maps.shrink) positives += v == 1;
    CHECK(positives > 0);
  }

  // A page smaller than the crop (never enlarged more than twice): white around it, all text-free.
  GrayImage small = white(100, 60);
  for (auto& p : small.pixels) p = 0;
  o.p_text_crop = 0.5;
  const DetSample s = make_det_sample(small, {}, 7, o);
  CHECK(s.scale_x == 2);
  CHECK(s.scale_y == 2);
  CHECK(s.crop_x <= 0);
  CHECK(s.crop_x >= 200 - 256);
  int64_t black = 0;
  for (uint8_t p : s.image.pixels) black += p == 0;
  CHECK(black == 200 * 120);
  CHECK(s.image.pixels[0] == (s.crop_x == 0 && s.crop_y == 0 ? 0 : 255));
  CHECK(count(s.maps.shrink_mask, 1) == 256 * 256);
  CHECK(count(s.maps.shrink, 0) == 256 * 256);
  CHECK(count(s.maps.thresh_mask, 0) == 256 * 256);

  // 1 x 1 page, with a line around its one pixel.
  GrayImage dot = white(1, 1);
  const DetSample d = make_det_sample(dot, {Quad::from_rect({0, 0, 1, 1})}, 3, o);
  CHECK(d.image.width == 256);
  CHECK(d.scale_x == 2);
  CHECK(d.maps.ignored == 1);  // 2 pixels high: too thin
}

TEST_CASE("det targets round trip: the shrink map read by text_boxes gives the lines back", "[det_targets]") {
  // A page of lines as the synthetic pages draw them: a heading, body lines 12 to 20 pixels
  // high, short and long, and words and a number in a table row; turned as a scanned page is.
  struct Line {
    double x0, y0, x1, y1;
  };
  const std::vector<Line> rects = {{20, 20, 580, 44},    {20, 60, 560, 76},    {20, 82, 500, 98},
                                   {20, 104, 260, 116},  {20, 140, 440, 158},  {20, 180, 320, 200},
                                   {20, 250, 180, 270},  {240, 250, 320, 270}, {380, 250, 420, 266}};
  nn::TextBoxOptions tb;
  tb.threshold = kThreshold;
  tb.box_threshold = kBoxThreshold;
  tb.shrink_ratio = kShrinkRatio;  // the exact inverse of the shrink (DBNetConfig's unclip_ratio 0)
  for (double deg : {2.0, -1.5, 0.5, 0.0}) {
    std::vector<Quad> lines;
    for (const Line& r : rects)
      lines.push_back(turned_rect((r.x0 + r.x1) / 2, (r.y0 + r.y1) / 2, r.x1 - r.x0, r.y1 - r.y0, deg));
    const DetTargets t = make_det_targets(lines, 300, 600);
    REQUIRE(t.ignored == 0);
    const std::vector<nn::TextBox> boxes = nn::text_boxes(t.shrink.data(), 300, 600, tb);
    CHECK(boxes.size() == lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      double best = 0;
      for (const nn::TextBox& b : boxes) best = std::max(best, iou(lines[i], b.outline));
      const double aspect = (rects[i].x1 - rects[i].x0) / (rects[i].y1 - rects[i].y0);
      INFO("turned " << deg << " degrees, line " << i << ", " << aspect << " to 1: IoU " << best);
      // The fitted rectangle of the region's pixel centres, grown by the exact inverse of the
      // shrink: within a pixel of the line. Upright, a 12-pixel line's kernel (4.7 pixels)
      // rasterises to 4 or 5 whole rows, and unshrinking multiplies that error by about 2.5:
      // measured 0.856 and 0.865 for the two thinnest lines, 0.95 and more for the others.
      CHECK(best > (aspect >= 8 && deg != 0 ? 0.9 : 0.8));
    }
  }
}

// Not run by default: how well text_boxes' unclip undoes the shrink, on ideal maps of 600 lines
// drawn at random (height 8 to 32 pixels, 2 to 40 times longer, placed anywhere within a
// pixel), upright or turned by up to 3 degrees; the mean IoU for each unclip ratio, and the
// share above 0.8, for long lines (8 to 1 and more) and short ones. The numbers of
// docs/pages.md, "Training the detector". ocrt_tests "[det_unclip_sweep]".
TEST_CASE("det targets: unclip ratio sweep", "[.][det_unclip_sweep]") {
  std::vector<double> unclips;
  for (int k = 0; k <= 10; ++k) unclips.push_back(1.0 + 0.1 * k);
  for (bool turned : {true, false}) {
    SampleRng rng(turned ? 1 : 2);
    // One row per unclip ratio, and a last one for the exact inverse.
    std::vector<double> long_iou(unclips.size() + 1), long_good(unclips.size() + 1), short_iou(unclips.size() + 1),
        short_good(unclips.size() + 1);
    int n_long = 0, n_short = 0;
    for (int it = 0; it < 600; ++it) {
      const double h = rng.uniform(8, 32), aspect = std::exp(rng.uniform(std::log(2.0), std::log(40.0)));
      const double deg = turned ? rng.uniform(-3, 3) : 0;
      const double w = h * aspect;
      const int64_t W = (int64_t)(w + 4 * h + 20), H = (int64_t)(w * 0.06 + 5 * h + 20);
      const Quad q = turned_rect(W / 2.0 + rng.uniform(), H / 2.0 + rng.uniform(), w, h, deg);
      const DetTargets t = make_det_targets({q}, H, W);
      const bool is_long = aspect >= 8;
      (is_long ? n_long : n_short)++;
      for (size_t k = 0; k < unclips.size(); ++k) {
        nn::TextBoxOptions tb;
        tb.threshold = kThreshold;
        tb.box_threshold = kBoxThreshold;
        tb.unclip_ratio = unclips[k];
        double best = 0;
        for (const nn::TextBox& b : nn::text_boxes(t.shrink.data(), H, W, tb)) best = std::max(best, iou(q, b.outline));
        (is_long ? long_iou : short_iou)[k] += best;
        (is_long ? long_good : short_good)[k] += best > 0.8;
      }
      nn::TextBoxOptions exact;
      exact.threshold = kThreshold;
      exact.box_threshold = kBoxThreshold;
      exact.shrink_ratio = kShrinkRatio;
      double best = 0;
      for (const nn::TextBox& b : nn::text_boxes(t.shrink.data(), H, W, exact)) best = std::max(best, iou(q, b.outline));
      (is_long ? long_iou : short_iou).back() += best;
      (is_long ? long_good : short_good).back() += best > 0.8;
    }
    std::printf("%s: %d long lines, %d short\nunclip  long: IoU  >0.8   short: IoU  >0.8\n",
                turned ? "turned by up to 3 degrees" : "upright", n_long, n_short);
    for (size_t k = 0; k <= unclips.size(); ++k) {
      if (k < unclips.size())
        std::printf("%6.1f", unclips[k]);
      else
        std::printf(" exact");
      std::printf("  %11.3f %5.3f  %12.3f %5.3f\n", long_iou[k] / n_long, long_good[k] / n_long, short_iou[k] / n_short,
                  short_good[k] / n_short);
    }
  }
}
