// Reading a whole page: detect, orient, cut, recognise, place, order (see page_reader.h).
#include "infer/page_reader.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <numeric>
#include <utility>

#include "runtime/error.h"

namespace ocrt::infer {

namespace {

// Adds the seconds since `since` to `total` and restarts the clock.
using Clock = std::chrono::steady_clock;
void lap(Clock::time_point& since, double& total) {
  const auto now = Clock::now();
  total += std::chrono::duration<double>(now - since).count();
  since = now;
}

void check_rotation(int rotation) {
  OCRT_CHECK(rotation == 0 || rotation == 90 || rotation == 180 || rotation == 270,
             "a page's rotation must be 0, 90, 180 or 270 degrees, got ", rotation);
}

// The direction text runs on a page turned clockwise by `rotation` (y points down).
Point text_direction(int rotation) {
  switch (rotation) {
    case 90: return {0, 1};
    case 180: return {-1, 0};
    case 270: return {0, -1};
    default: return {1, 0};
  }
}

// An outline a recogniser can read: at least 0.3 times as long as it is high (a single narrow
// glyph's box, "l" or "1", is widened symmetrically; at height 32 the predictor needs 8 columns).
Quad widen_narrow(const Quad& q) {
  const auto& c = q.corners;
  const double along = distance(c[0], c[1]), across = distance(c[0], c[3]);
  const double least = 0.3 * across;
  if (!(along < least)) return q;
  return lengthen(q, (least - along) / 2 / across);  // leaves a zero-length outline as it is
}

// A line image: the outline cut out upright, at least min_height rows (a smaller line is
// enlarged here, bilinearly, as the predictor would enlarge it; a larger one keeps its pixels
// and the predictor shrinks it by area averaging), blurred by `descreen` of its pixels where it
// is printed on a halftone screen (descreen_line; 0: never), the column rules of a table that cross it
// erased (erase_column_rules, reach column_reach; 0: kept), then its underlines and rules
// (erase_rules, runs of rule_run heights; 0: kept).
GrayImage cut_line(const GrayImage& page, const Quad& q, int64_t min_height, double descreen, double rule_run,
                   double column_reach) {
  const double across = distance(q.corners[0], q.corners[3]);
  GrayImage line = crop_line(page, q, std::max<int64_t>(min_height, std::llround(across)));
  if (descreen > 0) descreen_line(line, descreen);
  if (column_reach > 0) erase_column_rules(page, q, line, column_reach);
  if (rule_run > 0) erase_rules(line, rule_run);
  return line;
}

// The lines of `outlines`, cut out on every thread (a 300 dpi page's 40-odd lines took 75 ms on
// one); the first error, if any, is thrown after the loop.
std::vector<GrayImage> cut_lines(const GrayImage& page, const std::vector<Quad>& outlines, int64_t min_height,
                                 double descreen, double rule_run, double column_reach) {
  std::vector<GrayImage> out(outlines.size());
  std::vector<std::string> errors(outlines.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < outlines.size(); ++i) {
    try {
      out[i] = cut_line(page, outlines[i], min_height, descreen, rule_run, column_reach);
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  }
  for (const std::string& e : errors) OCRT_CHECK(e.empty(), e);
  return out;
}

// Reads lines in one predictor run, results in input order, in batches of at most
// `max_batch_columns` columns.
std::vector<LineResult> recognise(Predictor& predictor, std::vector<LineInput>&& lines, int64_t max_batch_columns) {
  std::vector<LineResult> out(lines.size());
  size_t next = 0;
  predictor.run(
      [&](LineInput& in) {
        if (next == lines.size()) return false;
        in = std::move(lines[next++]);
        return true;
      },
      [&](int64_t index, LineResult&& r) { out[(size_t)index] = std::move(r); }, max_batch_columns);
  return out;
}

// Mean confidence per character of some readings (failed and blank ones add nothing).
double confidence_per_char(const std::vector<const LineResult*>& results) {
  double sum = 0;
  int64_t chars = 0;
  for (const LineResult* r : results) {
    if (!r->ok()) continue;
    for (const CharPosition& c : r->chars) sum += c.confidence, ++chars;
  }
  return chars ? sum / (double)chars : 0;
}

// The page's skew on the upright page, in radians (positive: lines fall to the right): the
// median direction of the lines at least twice as long as high (a short box's direction says
// little). 0 without such lines.
double skew_of(const std::vector<PageLine>& lines, int rotation, int64_t width, int64_t height) {
  std::vector<double> angles;
  for (const PageLine& l : lines) {
    const auto& c = l.outline.corners;
    if (!(distance(c[0], c[1]) >= 2 * distance(c[0], c[3]))) continue;
    const Point a = to_upright(c[0], rotation, width, height), b = to_upright(c[1], rotation, width, height);
    angles.push_back(std::atan2(b.y - a.y, b.x - a.x));
  }
  if (angles.empty()) return 0;
  std::nth_element(angles.begin(), angles.begin() + (long)angles.size() / 2, angles.end());
  return angles[angles.size() / 2];
}

// Which way the outlines run: true when more of their length runs down the page than across
// it. Only outlines whose long side is at least 1.5 times the short one vote (a square box says
// nothing about direction), each with the length of its long side.
bool runs_down(const std::vector<nn::TextBox>& boxes) {
  double across = 0, down = 0;
  for (const nn::TextBox& b : boxes) {
    const auto& c = b.outline.corners;
    const Point e1{c[1].x - c[0].x, c[1].y - c[0].y}, e2{c[3].x - c[0].x, c[3].y - c[0].y};
    const double l1 = std::hypot(e1.x, e1.y), l2 = std::hypot(e2.x, e2.y);
    const double longer = std::max(l1, l2), shorter = std::min(l1, l2);
    if (!(longer >= 1.5 * shorter)) continue;
    const Point& e = l1 >= l2 ? e1 : e2;
    (std::abs(e.x) >= std::abs(e.y) ? across : down) += longer;
  }
  return down > across;
}

}  // namespace

Quad orient_outline(const Quad& outline, int rotation) {
  check_rotation(rotation);
  const Point d = text_direction(rotation);
  const auto& c = outline.corners;
  size_t best = 0;
  double best_cos = -2;
  for (size_t k = 0; k < 4; ++k) {
    const Point& a = c[k];
    const Point& b = c[(k + 1) % 4];
    const double len = distance(a, b);
    const double cos = len > 0 ? ((b.x - a.x) * d.x + (b.y - a.y) * d.y) / len : -2;
    if (cos > best_cos) best_cos = cos, best = k;
  }
  Quad q;
  for (size_t i = 0; i < 4; ++i) q.corners[i] = c[(i + best) % 4];
  return q;
}

Point to_upright(const Point& p, int rotation, int64_t width, int64_t height) {
  check_rotation(rotation);
  const double W = (double)width, H = (double)height;
  switch (rotation) {
    case 90: return {p.y, W - p.x};
    case 180: return {W - p.x, H - p.y};
    case 270: return {H - p.y, p.x};
    default: return p;
  }
}

Point from_upright(const Point& p, int rotation, int64_t width, int64_t height) {
  check_rotation(rotation);
  const double W = (double)width, H = (double)height;
  switch (rotation) {
    case 90: return {W - p.y, p.x};
    case 180: return {W - p.x, H - p.y};
    case 270: return {p.y, H - p.x};
    default: return p;
  }
}

double vote_confidence(const LineResult& r) {
  if (!r.ok()) return 0;
  int64_t alnum = 0, marks = 0;
  for (const CharPosition& c : r.chars) {
    const std::string& t = c.ch;
    if (t.size() == 1 && std::isspace((unsigned char)t[0])) continue;
    ++marks;
    if (t.size() > 1 || std::isalnum((unsigned char)t[0])) ++alnum;  // multi-byte: a letter of some script
  }
  if (alnum < 3 || 2 * alnum < marks) return 0;
  return confidence_per_char({&r});
}

namespace {

// The lines that read at least `floor` a character one way or the other, each counted for the
// way it reads surer (votes[0] upright, votes[1] turned); equal readings count for neither.
void count_votes(const std::vector<double>& upright, const std::vector<double>& turned, double floor,
                 int64_t votes[2]) {
  votes[0] = votes[1] = 0;
  for (size_t j = 0; j < upright.size(); ++j) {
    const double a = upright[j], b = turned[j];
    if (a != b && std::max(a, b) >= floor) ++votes[b > a ? 1 : 0];
  }
}

// The mean confidence per character of a page's probe lines read the way it was found turned.
double winner_confidence(const PageReadInfo& info) {
  return info.probe_confidence[info.rotation == 180 || info.rotation == 270 ? 1 : 0];
}

}  // namespace

int orientation_vote(const std::vector<double>& upright, const std::vector<double>& turned, double mean_upright,
                     double mean_turned, int votes[2]) {
  OCRT_CHECK(upright.size() == turned.size(), "orientation_vote: ", upright.size(), " lines read upright, ",
             turned.size(), " turned");
  int64_t counted[2];
  count_votes(upright, turned, kOrientationVoteFloor, counted);
  votes[0] = (int)counted[0], votes[1] = (int)counted[1];
  if (votes[0] != votes[1]) return votes[1] > votes[0] ? 1 : 0;
  return mean_turned > mean_upright ? 1 : 0;
}

namespace {

// What reading a page's lines needs and gives, line by line (index i is the detector's box i).
struct PageWork {
  const GrayImage& image;
  const std::string& name;
  Predictor& predictor;
  const PageReaderOptions& o;
  PageReadInfo& info;
  std::vector<nn::TextBox> boxes;
  std::vector<LineResult> readings;  // box i's reading
  std::vector<Quad> outlines;        // its outline, oriented
  std::vector<double> widths;        // the width of the image that was read
  std::vector<bool> done;            // read already (a probe line)
  size_t first_ink = SIZE_MAX;       // boxes from here on were found at ink no outline covered

  std::string line_name(size_t i) const { return name + " line " + std::to_string(i + 1); }

  // Room for every box's reading, none read yet.
  void start() {
    const size_t n = boxes.size();
    readings.assign(n, {}), outlines.assign(n, {}), widths.assign(n, 0), done.assign(n, false);
  }
  // The mean confidence per character of the probe lines read the way decide_orientation took.
  double winner_confidence() const { return ocrt::infer::winner_confidence(info); }

  // Cuts out boxes `which`, each turned by `rotation`, and reads them; returns the readings,
  // the oriented outlines and the images' widths in the order of `which`.
  std::vector<LineResult> cut_and_read(const std::vector<size_t>& which, int rotation, std::vector<Quad>& quads,
                                       std::vector<double>& image_widths) {
    auto t = Clock::now();
    quads.clear(), image_widths.clear();
    quads.resize(which.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t j = 0; j < which.size(); ++j) {
      const Quad q = orient_outline(boxes[which[j]].outline, rotation);
      try {
        quads[j] = widen_narrow(grow_into_blank(image, fit_ends_to_ink(image, q, o.end_pad, o.end_reach), o.side_reach));
      } catch (const std::exception&) {  // an outline crop_line refuses: cut_lines reports it
        quads[j] = widen_narrow(lengthen(q, o.end_pad));
      }
    }
    const bool look_again = o.space_gap > 0 || o.small_caps_drop > 0;  // at the line images, after the reading
    std::vector<GrayImage> images = cut_lines(image, quads, o.min_line_height, o.descreen_lines, o.erase_rules,
                                              o.erase_column_rules);
    std::vector<LineInput> lines;
    for (size_t j = 0; j < which.size(); ++j) {
      image_widths.push_back((double)images[j].width);
      // Kept for the word gaps and the small capitals after the reading when they are looked for.
      lines.push_back({line_name(which[j]), look_again ? images[j] : std::move(images[j])});
    }
    lap(t, info.cut_s);
    std::vector<LineResult> read =
        lines.empty() ? std::vector<LineResult>() : recognise(predictor, std::move(lines), o.max_batch_columns);
    lap(t, info.recognise_s);
    if (look_again) {
      int64_t added = 0, joined = 0, lowered = 0;
#pragma omp parallel for schedule(dynamic, 4) reduction(+ : added, joined, lowered)
      for (size_t j = 0; j < read.size(); ++j) {
        if (o.space_gap > 0) {
          added += split_at_ink_gaps(read[j], images[j], o.space_gap, o.space_gap_ratio);
          joined += join_address_spaces(read[j], images[j], o.space_gap);
        }
        lowered += lower_small_caps(read[j], images[j], o.small_caps_drop);
      }
      info.gap_spaces += added, info.address_spaces += joined, info.small_caps_words += lowered;
      lap(t, info.cut_s);
    }
    return read;
  }

  void keep(const std::vector<size_t>& which, std::vector<LineResult>&& read, const std::vector<Quad>& quads,
            const std::vector<double>& image_widths) {
    for (size_t j = 0; j < which.size(); ++j) {
      const size_t i = which[j];
      readings[i] = std::move(read[j]);
      outlines[i] = quads[j];
      widths[i] = image_widths[j];
      done[i] = true;
    }
  }
};

// An outline's text direction as nn::TextBox::angle holds it: degrees in (-90, 90].
double text_angle(const Quad& outline) {
  const auto& c = outline.corners;
  double angle = std::atan2(c[1].y - c[0].y, c[1].x - c[0].x) * 180 / M_PI;
  if (angle <= -90) angle += 180;
  if (angle > 90) angle -= 180;
  return angle;
}

// 1. The detector's outlines, less those too small to cut out (clamped to the page's edge); the
// detector's time adds to info's. With `second_side` the detector takes its first look only
// (TextDetector::detect_first_look) and says there at which side it would have looked again
// (0: none); with `second_at` > 0 (and no `second_side`), its second look only, at that side.
std::vector<nn::TextBox> detect_boxes(const GrayImage& image, TextDetector& detector, PageReadInfo& info,
                                      int64_t* second_side = nullptr, int64_t second_at = 0) {
  std::vector<nn::TextBox> boxes;
  TextDetector::Times t;
  for (nn::TextBox& b : second_side   ? detector.detect_first_look(image, &t, second_side)
                        : second_at > 0 ? detector.detect_second_look(image, second_at, &t)
                                        : detector.detect(image, &t)) {
    const auto& c = b.outline.corners;
    if (distance(c[0], c[1]) >= 1 && distance(c[0], c[3]) >= 1) boxes.push_back(std::move(b));
  }
  // Outlines of a glyph or two take the page's direction (align_short_outlines in page.h).
  std::vector<Quad> outlines;
  for (const nn::TextBox& b : boxes) outlines.push_back(b.outline);
  if (align_short_outlines(outlines) > 0)
    for (size_t i = 0; i < boxes.size(); ++i) {
      boxes[i].outline = outlines[i];
      boxes[i].angle = text_angle(outlines[i]);
    }
  info.detect += t;
  info.boxes = (int64_t)boxes.size();
  return boxes;
}

// 2. The page's orientation, from its longest outlines: read upright (0, or 90 where the
// outlines run down the page) and, only when that reading is not sure, turned by 180 as well;
// then the lines vote (orientation_vote), and the probe lines keep the winning way's readings.
int decide_orientation(PageWork& w) {
  PageReadInfo& info = w.info;
  info.rotation_decided = true;
  info.vertical = runs_down(w.boxes);
  const int first = info.vertical ? 90 : 0, second = first + 180;
  std::vector<size_t> order(w.boxes.size());
  std::iota(order.begin(), order.end(), 0);
  auto long_side = [&](size_t i) {
    const auto& c = w.boxes[i].outline.corners;
    return std::max(distance(c[0], c[1]), distance(c[0], c[3]));
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return long_side(a) > long_side(b); });
  const size_t limit = std::min<size_t>(order.size(), (size_t)w.o.orientation_max_lines);
  size_t probed = std::min<size_t>(limit, (size_t)w.o.orientation_lines);

  std::vector<Quad> quads[2];
  std::vector<double> image_widths[2];
  std::vector<LineResult> read[2];
  auto mean_confidence = [](const std::vector<LineResult>& results) {
    std::vector<const LineResult*> of;
    for (const LineResult& r : results) of.push_back(&r);
    return confidence_per_char(of);
  };
  // Reads lines [from, to) of `order` the way k (0: first, 1: second), after those read before.
  auto read_more = [&](int k, size_t from, size_t to) {
    std::vector<size_t> which(order.begin() + (ptrdiff_t)from, order.begin() + (ptrdiff_t)to);
    std::vector<Quad> q;
    std::vector<double> widths;
    std::vector<LineResult> r = w.cut_and_read(which, k ? second : first, q, widths);
    quads[k].insert(quads[k].end(), q.begin(), q.end());
    image_widths[k].insert(image_widths[k].end(), widths.begin(), widths.end());
    for (LineResult& x : r) read[k].push_back(std::move(x));
  };
  read_more(0, 0, probed);
  info.probe_confidence[0] = mean_confidence(read[0]);
  info.probed_both = !(info.probe_confidence[0] >= w.o.orientation_sure);
  int votes[2] = {0, 0};
  int way = 0;
  if (info.probed_both) {
    read_more(1, 0, probed);
    // An undecided vote (the ways within one vote of each other) reads the next longest lines
    // both ways, up to orientation_max_lines: on a ruled table the longest outlines are its
    // rules, which read as runs of dots either way and do not vote.
    for (;;) {
      std::vector<double> per_line[2];
      for (int k = 0; k < 2; ++k)
        for (const LineResult& r : read[k]) per_line[k].push_back(vote_confidence(r));
      info.probe_confidence[0] = mean_confidence(read[0]), info.probe_confidence[1] = mean_confidence(read[1]);
      way = orientation_vote(per_line[0], per_line[1], info.probe_confidence[0], info.probe_confidence[1], votes);
      count_votes(per_line[0], per_line[1], kSureVote, info.probe_sure_votes);
      if (std::abs(votes[0] - votes[1]) >= 2 || probed == limit) break;
      const size_t next = std::min(limit, probed + (size_t)w.o.orientation_lines);
      read_more(0, probed, next), read_more(1, probed, next);
      probed = next;
    }
  }
  order.resize(probed);
  info.probe_lines = (int64_t)probed;
  info.probe_votes[0] = votes[0], info.probe_votes[1] = votes[1];
  w.keep(order, std::move(read[way]), quads[way], image_widths[way]);
  return way ? second : first;
}

// A page turned clockwise by `rotation` degrees, its pixels standing upright (to_upright's
// mapping; width and height swap for 90 and 270).
GrayImage upright_image(const GrayImage& image, int rotation) {
  const int64_t W = image.width, H = image.height;
  const bool swap = rotation == 90 || rotation == 270;
  GrayImage out;
  out.width = swap ? H : W, out.height = swap ? W : H;
  out.pixels.resize(image.pixels.size());
  for (int64_t y = 0; y < out.height; ++y) {
    uint8_t* row = out.pixels.data() + y * out.width;
    for (int64_t x = 0; x < out.width; ++x) {
      int64_t u = x, v = y;  // the source pixel: from_upright of the pixel's centre
      if (rotation == 90) u = W - 1 - y, v = x;
      if (rotation == 180) u = W - 1 - x, v = H - 1 - y;
      if (rotation == 270) u = y, v = H - 1 - x;
      row[x] = image.pixels[(size_t)(v * W + u)];
    }
  }
  return out;
}

}  // namespace

GrayImage turn_clockwise(const GrayImage& image, int degrees) {
  OCRT_CHECK(degrees == 0 || degrees == 90 || degrees == 180 || degrees == 270, "turn_clockwise: ", degrees,
             " degrees (0, 90, 180 or 270)");
  return upright_image(image, (360 - degrees) % 360);
}

namespace {

// The detector's outlines on the page turned upright by `rotation`, put back on the page
// (`second_side`, `second_at`: detect_boxes').
std::vector<nn::TextBox> detect_turned(const GrayImage& image, int rotation, TextDetector& detector,
                                       PageReadInfo& info, int64_t* second_side = nullptr, int64_t second_at = 0) {
  std::vector<nn::TextBox> boxes =
      detect_boxes(upright_image(image, rotation), detector, info, second_side, second_at);
  for (nn::TextBox& b : boxes) {
    for (Point& c : b.outline.corners) c = from_upright(c, rotation, image.width, image.height);
    b.angle = text_angle(b.outline);
  }
  return boxes;
}

// The probe lines' vote was decisive: the winning way had at least three quarters of them more
// than the other among the sure votes (kSureVote: a table's text lines read one way while its
// rules and dots read as junk both ways). Junk from a page lying sideways can vote 7 to 0, but
// at 0.5-0.8 a character, not surely.
bool decisive(const PageReadInfo& info) {
  return 4 * std::abs(info.probe_sure_votes[0] - info.probe_sure_votes[1]) >= 3 * info.probe_lines;
}

}  // namespace

bool take_sideways(const PageReadInfo& first, const PageReadInfo& turned) {
  if (winner_confidence(turned) >= winner_confidence(first) + kSidewaysMargin) return true;
  return turned.probed_both && decisive(turned);
}

namespace {

// 2b. When the probe lines read poorly both ways, the page may stand sideways with lines the
// detector, which learnt upright text, did not find: it sees a page turned by 90 degrees as
// columns of short pieces across the text. The page is detected again turned by a quarter turn,
// those outlines are put back on the page and probed (90 or 270), and they are kept when their
// probe lines read with a mean confidence per character at least kSidewaysMargin higher (on a
// page that reads as junk every way, a hard table, junk must not win by chance). Returns whether it was.
// The turned page gets the detector's first look only: most pages checked stand upright after all
// (a chart, a hard table), and on those the second look at small print, up to 2.6 times the
// pixels, was most of the check's time. `second_side` gets the side of the second look the
// detector wanted on a page it turns (0: none, and the outlines kept are its whole answer; 0 too
// when the page is not turned); the caller takes that look.
bool look_sideways(PageWork& w, TextDetector& detector, int64_t& second_side) {
  PageReadInfo& info = w.info;
  info.sideways_tried = true;
  PageReadInfo side_info;
  PageWork side{w.image, w.name, w.predictor, w.o, side_info,
                detect_turned(w.image, 90, detector, side_info, &second_side), {}, {}, {}, {}};
  info.detect += side_info.detect;
  if (!side.boxes.empty()) {
    side.start();
    side_info.rotation = decide_orientation(side);
    info.sideways_confidence = side.winner_confidence();
  }
  info.cut_s += side_info.cut_s, info.recognise_s += side_info.recognise_s;
  if (side.boxes.empty() || !take_sideways(info, side_info)) {
    second_side = 0;
    return false;
  }
  std::swap(w.boxes, side.boxes), std::swap(w.readings, side.readings), std::swap(w.outlines, side.outlines);
  std::swap(w.widths, side.widths), std::swap(w.done, side.done);
  info.rotation = side_info.rotation, info.boxes = side_info.boxes, info.probe_lines = side_info.probe_lines;
  info.probed_both = side_info.probed_both;
  for (int k = 0; k < 2; ++k)
    info.probe_confidence[k] = side_info.probe_confidence[k], info.probe_votes[k] = side_info.probe_votes[k],
    info.probe_sure_votes[k] = side_info.probe_sure_votes[k];
  return true;
}

// 3a. Boxes where the page has ink that no outline covers (missed_ink in page.h), after the
// detector's; the time counts as cutting's. missed_ink looks for text that runs across: a page
// lying sideways (90 or 270) is looked at turned upright, and what it finds turned back (a page
// upside down is the same to it: its pieces and lines are the same turned by 180 degrees).
void add_missed_ink(PageWork& w) {
  if (!(w.o.missed_ink > 0)) return;
  auto t = Clock::now();
  const int r = w.info.rotation;
  const bool sideways = r == 90 || r == 270;
  const int64_t W = w.image.width, H = w.image.height;
  std::vector<Quad> covered;
  for (const nn::TextBox& b : w.boxes) {
    Quad q = b.outline;
    if (sideways)
      for (Point& c : q.corners) c = to_upright(c, r, W, H);
    covered.push_back(q);
  }
  std::vector<Quad> found = missed_ink(sideways ? upright_image(w.image, r) : w.image, covered);
  w.first_ink = w.boxes.size();
  for (Quad& q : found) {
    if (sideways)
      for (Point& c : q.corners) c = from_upright(c, r, W, H);
    w.boxes.push_back({q, 0.0, text_angle(q)});
    w.readings.emplace_back(), w.outlines.emplace_back(), w.widths.push_back(0), w.done.push_back(false);
  }
  w.info.ink_lines = (int64_t)found.size();
  lap(t, w.info.cut_s);
}

// 5. The words placed on the page; regions that read as nothing, or as nothing sure
// (options.min_confidence; options.missed_ink for the lines add_missed_ink found), are no text
// line.
std::vector<PageLine> place_lines(PageWork& w) {
  std::vector<PageLine> lines;
  for (size_t i = 0; i < w.boxes.size(); ++i) {
    PageLine line = place_words(w.readings[i], w.outlines[i], w.widths[i]);
    if (line.text.empty() && line.error.empty()) continue;
    const bool from_ink = i >= w.first_ink;
    const double least = from_ink ? std::max(w.o.min_confidence, w.o.missed_ink) : w.o.min_confidence;
    if (line.error.empty() && line.confidence < least) {
      if (!from_ink) ++w.info.dropped_lines;
      continue;
    }
    if (from_ink) ++w.info.ink_lines_kept;
    if (!line.error.empty()) ++w.info.failed_lines;
    lines.push_back(std::move(line));
  }
  w.info.lines = (int64_t)lines.size();
  return lines;
}

// 6. Lines split at gutters, then put in reading order, found on the page as it would stand:
// turned upright and deskewed, so that the lines' boxes are as tight as on a straight page
// (reading_order compares axis-aligned boxes: on a page skewed by 2 degrees, a long line's box
// overlaps its neighbours' rows). The order is found on stand-ins holding only the turned
// outlines, each tagged with its line's index, and applied to the lines themselves, which keep
// the image's pixels.
std::vector<PageBlock> order_lines(std::vector<PageLine> lines, const GrayImage& image, const PageReaderOptions& o,
                                   PageReadInfo& info) {
  const int64_t W = image.width, H = image.height;
  const int r = info.rotation;
  const double skew = skew_of(lines, r, W, H);
  info.skew_deg = skew * 180 / M_PI;
  const bool sideways = r == 90 || r == 270;
  const Point centre{(double)(sideways ? H : W) / 2, (double)(sideways ? W : H) / 2};
  const double cs = std::cos(skew), sn = std::sin(skew);
  auto stand = [&](const Point& p) {
    const Point q = to_upright(p, r, W, H);
    const double dx = q.x - centre.x, dy = q.y - centre.y;
    return Point{centre.x + dx * cs + dy * sn, centre.y - dx * sn + dy * cs};
  };
  // Lines the detector ran across a gutter become one line per column.
  if (o.split_gutters) {
    const size_t before = lines.size();
    GutterOptions gutters = o.gutters;
    if (!gutters.blank_run)  // a gutter is blank on the page, not only between CTC positions
      gutters.blank_run = [&image](const PageLine& l, double f0, double f1) {
        return widest_blank(image, l.outline, f0, f1);
      };
    lines = split_at_gutters(std::move(lines), stand, gutters);
    info.gutter_splits = (int64_t)(lines.size() - before);
    info.lines = (int64_t)lines.size();
  }
  // A stand-in spans the line's text (text_begin to text_end along its outline), not the
  // outline's margin past it: at 300 dpi that margin took 30-50 of an 85-pixel gutter.
  std::vector<PageLine> stand_ins(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const Quad text = outline_slice(lines[i].outline, lines[i].text_begin, lines[i].text_end);
    for (size_t k = 0; k < 4; ++k) stand_ins[i].outline.corners[k] = stand(text.corners[k]);
    stand_ins[i].box = stand_ins[i].outline.box();
    stand_ins[i].text = lines[i].text;  // the order reads it (a column of line numbers)
  }
  std::vector<PageBlock> blocks;
  for (const std::vector<size_t>& ordered : reading_order_indices(std::move(stand_ins), o.order)) {
    PageBlock block;
    for (size_t i : ordered) {
      PageLine& line = lines[i];
      block.box = block.box.united(line.box);
      block.lines.push_back(std::move(line));
    }
    blocks.push_back(std::move(block));
  }
  return blocks;
}

}  // namespace

Page read_page(const GrayImage& image, const std::string& name, TextDetector& detector, Predictor& predictor,
               const PageReaderOptions& o, PageReadInfo* info_out) {
  OCRT_CHECK(image.width >= 1 && image.height >= 1 && (int64_t)image.pixels.size() == image.width * image.height,
             name, ": the page image is empty or inconsistent (", image.width, "x", image.height, ")");
  if (o.rotation >= 0) check_rotation(o.rotation);
  OCRT_CHECK(o.min_confidence >= 0 && o.min_confidence <= 1, "read_page: min_confidence must be in [0, 1], got ",
             o.min_confidence);
  OCRT_CHECK(o.missed_ink >= 0 && o.missed_ink <= 1, "read_page: missed_ink must be in [0, 1], got ", o.missed_ink);
  OCRT_CHECK(o.small_caps_drop >= 0 && o.small_caps_drop < 1, "read_page: small_caps_drop must be in [0, 1), got ",
             o.small_caps_drop);
  OCRT_CHECK(o.orientation_lines >= 1 && o.orientation_max_lines >= o.orientation_lines && o.min_line_height >= 8,
             "read_page: bad options (orientation_lines ", o.orientation_lines, ", orientation_max_lines ",
             o.orientation_max_lines, ", min_line_height ", o.min_line_height, ")");
  PageReadInfo info;
  Page page;
  page.name = name;
  page.width = image.width, page.height = image.height;
  PageWork w{image, name, predictor, o, info, detect_boxes(image, detector, info), {}, {}, {}, {}};  // 1. detect
  info.rotation = o.rotation >= 0 ? o.rotation : 0;
  if (!w.boxes.empty()) {
    w.start();
    int detected_at = 0;  // how the image the boxes came from was turned back
    int64_t second_side = 0;  // the second look the sideways check's first look wanted (0: none)
    if (o.rotation < 0) {  // 2. orient
      info.rotation = decide_orientation(w);
      if (info.probed_both && w.winner_confidence() < o.sideways_check && !decisive(info) &&
          look_sideways(w, detector, second_side))
        detected_at = 90;
    }
    // 2c. The detector finds lines best on an upright page: a page found turned is detected
    // again standing upright (the probe's readings were of the other outlines: all are read).
    // A page found sideways at the detector's first look, where it wanted a second at a larger
    // scale, takes that look now: the one the check skipped (turned by 90 as the check turned
    // it), or the whole detection upright at 270.
    const bool upright_again = o.detect_upright && info.rotation != detected_at;
    if (upright_again || second_side > 0) {
      w.boxes = upright_again ? detect_turned(image, info.rotation, detector, info)
                              : detect_turned(image, 90, detector, info, nullptr, second_side);
      info.detected_upright = upright_again;
      w.start();
    }
    add_missed_ink(w);  // 3a
    const size_t n = w.boxes.size();
    info.vertical = info.rotation == 90 || info.rotation == 270;
    // 3-4. Cut out and read the lines the probe did not.
    std::vector<size_t> rest;
    for (size_t i = 0; i < n; ++i)
      if (!w.done[i]) rest.push_back(i);
    std::vector<Quad> quads;
    std::vector<double> image_widths;
    std::vector<LineResult> read = w.cut_and_read(rest, info.rotation, quads, image_widths);
    w.keep(rest, std::move(read), quads, image_widths);
    auto t = Clock::now();
    page.blocks = order_lines(place_lines(w), image, o, info);  // 5-6. place, order
    lap(t, info.layout_s);
  }
  page.rotation = info.rotation;
  if (info_out) *info_out = info;
  return page;
}

}  // namespace ocrt::infer
