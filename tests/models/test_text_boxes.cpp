// From probability maps drawn by hand to line outlines (models/text_boxes.h): rectangles with
// and without unclipping, a rotated line, regions one pixel apart, weak and tiny regions
// dropped, a map smaller than its image, and degenerate maps.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "models/text_boxes.h"

using namespace ocrt;
using namespace ocrt::nn;

namespace {

struct Map {
  int64_t h, w;
  std::vector<float> p;
  Map(int64_t h_, int64_t w_) : h(h_), w(w_), p((size_t)(h_ * w_), 0.0f) {}
  void fill(int64_t x0, int64_t y0, int64_t x1, int64_t y1, float v) {
    for (int64_t y = y0; y < y1; ++y)
      for (int64_t x = x0; x < x1; ++x) p[(size_t)(y * w + x)] = v;
  }
};

TextBoxOptions no_unclip() {
  TextBoxOptions o;
  o.unclip_ratio = 0;
  return o;
}

}  // namespace

TEST_CASE("text_boxes: an upright rectangle, exact, and unclipped", "[page]") {
  Map m(100, 100);
  m.fill(20, 30, 60, 40, 0.9f);  // 40 x 10 pixels
  std::vector<TextBox> boxes = text_boxes(m.p.data(), m.h, m.w, no_unclip());
  REQUIRE(boxes.size() == 1);
  const Rect r = boxes[0].outline.box();
  CHECK(r.x0 == Approx(20));
  CHECK(r.y0 == Approx(30));
  CHECK(r.x1 == Approx(60));
  CHECK(r.y1 == Approx(40));
  CHECK(boxes[0].score == Approx(0.9));
  CHECK(boxes[0].angle == Approx(0).margin(1e-9));
  // Corners as the text reads: top-left, top-right, bottom-right, bottom-left.
  const auto& c = boxes[0].outline.corners;
  CHECK((c[0].x == Approx(20) && c[0].y == Approx(30)));
  CHECK((c[1].x == Approx(60) && c[1].y == Approx(30)));
  CHECK((c[2].x == Approx(60) && c[2].y == Approx(40)));
  CHECK((c[3].x == Approx(20) && c[3].y == Approx(40)));

  // Unclip 1.5: D' = 40 * 10 * 1.5 / (2 * 50) = 6 pixels on every side.
  boxes = text_boxes(m.p.data(), m.h, m.w);
  REQUIRE(boxes.size() == 1);
  const Rect u = boxes[0].outline.box();
  CHECK(u.x0 == Approx(14));
  CHECK(u.y0 == Approx(24));
  CHECK(u.x1 == Approx(66));
  CHECK(u.y1 == Approx(46));
}

TEST_CASE("text_boxes: a line turned by 10 degrees", "[page]") {
  Map m(120, 160);
  const double a = 10 * M_PI / 180, cx = 80, cy = 60, len = 100, thick = 14;
  for (int64_t y = 0; y < m.h; ++y)
    for (int64_t x = 0; x < m.w; ++x) {
      const double dx = (double)x + 0.5 - cx, dy = (double)y + 0.5 - cy;
      const double along = dx * std::cos(a) + dy * std::sin(a), across = -dx * std::sin(a) + dy * std::cos(a);
      if (std::fabs(along) < len / 2 && std::fabs(across) < thick / 2) m.p[(size_t)(y * m.w + x)] = 0.8f;
    }
  const std::vector<TextBox> boxes = text_boxes(m.p.data(), m.h, m.w, no_unclip());
  REQUIRE(boxes.size() == 1);
  CHECK(boxes[0].angle == Approx(10).margin(1.5));  // pixels quantise the edges
  const auto& c = boxes[0].outline.corners;
  const double along = std::hypot(c[1].x - c[0].x, c[1].y - c[0].y);
  const double across = std::hypot(c[3].x - c[0].x, c[3].y - c[0].y);
  CHECK(along == Approx(len).margin(2.5));
  CHECK(across == Approx(thick).margin(2.5));
  CHECK(c[0].x < c[1].x);  // reads left to right
  CHECK(c[1].y > c[0].y);  // and down: a clockwise turn
  CHECK(c[3].y > c[0].y);  // the bottom edge below the top
}

TEST_CASE("text_boxes: close lines apart, weak and tiny regions dropped, reading order", "[page]") {
  Map m(60, 100);
  m.fill(10, 10, 90, 20, 0.9f);   // line 1
  m.fill(10, 21, 90, 31, 0.9f);   // line 2: one background row below line 1
  m.fill(10, 40, 50, 50, 0.4f);   // above the pixel threshold, below the region threshold
  m.fill(70, 45, 72, 47, 0.95f);  // a speck of 2 x 2 pixels
  const std::vector<TextBox> boxes = text_boxes(m.p.data(), m.h, m.w, no_unclip());
  REQUIRE(boxes.size() == 2);
  CHECK(boxes[0].outline.box().y1 == Approx(20));
  CHECK(boxes[1].outline.box().y0 == Approx(21));
  TextBoxOptions o = no_unclip();
  o.box_threshold = 0.3f;
  o.min_size = 2;
  CHECK(text_boxes(m.p.data(), m.h, m.w, o).size() == 4);
  o.max_regions = 3;  // the weakest goes first
  const std::vector<TextBox> three = text_boxes(m.p.data(), m.h, m.w, o);
  REQUIRE(three.size() == 3);
  for (const TextBox& b : three) CHECK(b.score > 0.5);
}

TEST_CASE("text_boxes: a map at a quarter of the image's size", "[page]") {
  Map m(25, 50);
  m.fill(5, 5, 25, 10, 1.0f);
  const std::vector<TextBox> boxes = text_boxes(m.p.data(), m.h, m.w, no_unclip(), 200, 100);
  REQUIRE(boxes.size() == 1);
  const Rect r = boxes[0].outline.box();
  CHECK(r.x0 == Approx(20));
  CHECK(r.x1 == Approx(100));
  CHECK(r.y0 == Approx(20));
  CHECK(r.y1 == Approx(40));
}

TEST_CASE("text_boxes: boxes stay inside the image, degenerate maps", "[page]") {
  Map m(20, 40);
  m.fill(0, 0, 40, 8, 0.9f);  // touches three sides: unclipping would leave the image
  const std::vector<TextBox> boxes = text_boxes(m.p.data(), m.h, m.w);
  REQUIRE(boxes.size() == 1);
  for (const Point& p : boxes[0].outline.corners) {
    CHECK(p.x >= 0);
    CHECK(p.x <= 40);
    CHECK(p.y >= 0);
    CHECK(p.y <= 20);
  }
  CHECK(text_boxes(nullptr, 0, 0).empty());
  const float one = 1.0f;
  CHECK(text_boxes(&one, 1, 1).empty());  // 1 x 1: below min_size
  const Map blank(30, 30);
  CHECK(text_boxes(blank.p.data(), blank.h, blank.w).empty());
  const float nan = NAN;
  CHECK(text_boxes(&nan, 1, 1).empty());  // NaN is not above any threshold
  TextBoxOptions bad;
  bad.unclip_ratio = -1;
  CHECK_THROWS(text_boxes(&one, 1, 1, bad));
}

TEST_CASE("min_area_rect and convex_hull", "[page]") {
  const std::vector<Point> square = {{0, 0}, {2, 0}, {2, 2}, {0, 2}, {1, 1}, {1, 0}};
  CHECK(convex_hull(square).size() == 4);  // the centre and the edge midpoint dropped
  const RotatedRect r = min_area_rect({{0, 0}, {4, 4}, {5, 3}, {1, -1}});  // a 45-degree rectangle
  CHECK(r.width * r.height == Approx(4 * std::sqrt(2) * std::sqrt(2)));
  CHECK(r.centre.x == Approx(2.5));
  CHECK(r.centre.y == Approx(1.5));
  CHECK(min_area_rect({}).width == 0);
  CHECK(min_area_rect({{3, 4}}).centre.x == 3);
  const RotatedRect line = min_area_rect({{0, 0}, {10, 0}});
  CHECK(line.width == Approx(10));
  CHECK(line.height == Approx(0));
}
