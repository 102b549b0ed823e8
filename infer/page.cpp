#include "infer/page.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>

#include "runtime/cpu_isa.h"
#include "runtime/error.h"

namespace ocrt::infer {

namespace {

Point lerp(const Point& a, const Point& b, double f) { return {a.x + (b.x - a.x) * f, a.y + (b.y - a.y) * f}; }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

Quad outline_slice(const Quad& q, double f0, double f1) {
  const auto& c = q.corners;
  return {{lerp(c[0], c[1], f0), lerp(c[0], c[1], f1), lerp(c[3], c[2], f1), lerp(c[3], c[2], f0)}};
}

Quad lengthen(const Quad& outline, double pad) { return lengthen(outline, pad, pad); }

Quad lengthen(const Quad& outline, double start_pad, double end_pad) {
  Quad q = outline;
  auto& c = q.corners;
  const double along = distance(c[0], c[1]), across = distance(c[0], c[3]);
  if (!(along > 0)) return q;
  const Point u{(c[1].x - c[0].x) / along, (c[1].y - c[0].y) / along};
  if (start_pad > 0)
    for (int i : {0, 3}) c[(size_t)i].x -= start_pad * across * u.x, c[(size_t)i].y -= start_pad * across * u.y;
  if (end_pad > 0)
    for (int i : {1, 2}) c[(size_t)i].x += end_pad * across * u.x, c[(size_t)i].y += end_pad * across * u.y;
  return q;
}

namespace {

// Grey levels counted in a histogram of n > 0 pixels: the level of the pixel at 0-based rank
// floor(f n) in increasing order, f in [0, 1).
int level_at(const int64_t (&counts)[256], int64_t n, double f) {
  const int64_t rank = std::min<int64_t>(n - 1, (int64_t)(f * (double)n));
  int64_t seen = 0;
  for (int v = 0; v < 256; ++v)
    if ((seen += counts[v]) > rank) return v;
  return 255;
}

// Which grey levels are ink in part of a line cut out upright (columns [x0, x1), rows [y0, y1)):
// darker (or, on a dark ground, lighter) than the threshold midway between the part's 5th and
// 95th percentiles. The ground is what the rows of those columns outside [g0, g1) mostly show
// (the margins beside the glyphs). None when those percentiles are under 48 grey levels apart (a
// blank or faint line).
struct InkRule {
  int threshold;
  bool dark_ground;
  bool ink(int v) const { return dark_ground ? v > threshold : v < threshold; }
};

std::optional<InkRule> ink_rule(const GrayImage& line, int64_t x0, int64_t x1, int64_t y0, int64_t y1, int64_t g0,
                                int64_t g1) {
  int64_t counts[256] = {}, n = 0;
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x) ++counts[line.at(x, y)], ++n;
  if (n == 0) return std::nullopt;
  const int lo = level_at(counts, n, 0.05), hi = level_at(counts, n, 0.95);
  if (hi - lo < 48) return std::nullopt;
  InkRule r{(lo + hi) / 2, false};
  int64_t dark = 0, all = 0;
  for (int64_t y = 0; y < line.height; ++y) {
    if (y >= g0 && y < g1) continue;
    for (int64_t x = x0; x < x1; ++x) dark += line.at(x, y) < r.threshold, ++all;
  }
  r.dark_ground = 2 * dark > all;
  return r;
}

// Which columns of a line image hold ink (by `rule`) in any of its rows [y0, y1).
std::vector<bool> inked_columns(const GrayImage& line, const InkRule& rule, int64_t y0, int64_t y1) {
  std::vector<bool> ink((size_t)line.width, false);
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = 0; x < line.width; ++x)
      if (rule.ink(line.at(x, y))) ink[(size_t)x] = true;
  return ink;
}

// How far past one end of a line its glyphs' ink goes, in columns of `ink` (one flag per column
// of the line cut out at its own scale), walking from column `from` by `step` (+1 or -1): the
// inked columns reached through gaps narrower than `gap`, or -1 when there are none, or when the
// ink runs on to the edge of the array without such a gap.
int64_t ink_past_end(const std::vector<bool>& ink, int64_t from, int step, int64_t gap) {
  int64_t last = -1, blank = 0;
  for (int64_t x = from; x >= 0 && x < (int64_t)ink.size(); x += step) {
    if (ink[(size_t)x]) {
      last = x, blank = 0;
    } else if (++blank >= gap) {
      return last;
    }
  }
  return -1;  // no gap before the edge: a rule or a neighbour, not a cut glyph
}

}  // namespace

Quad fit_ends_to_ink(const GrayImage& page, const Quad& outline, double pad, double reach) {
  const auto& c = outline.corners;
  const double along = distance(c[0], c[1]), across = distance(c[0], c[3]);
  const Quad plain = lengthen(outline, pad);
  if (!(along >= 1 && across >= 1) || !(reach > 0)) return plain;
  // The line and `reach` heights beyond each end, cut out at its own scale (a column a pixel).
  const int64_t h = std::max<int64_t>(8, std::llround(across));
  const GrayImage line = crop_line(page, lengthen(outline, reach), h);
  const double scale = (double)line.width / (along + 2 * reach * across);  // columns per page unit
  const int64_t x0 = std::llround(reach * across * scale), x1 = line.width - x0;  // the outline's ends
  if (x1 - x0 < 2) return plain;
  // The ground: the outer 15% of rows on each side, above and below the glyphs' middle.
  const int64_t edge = std::max<int64_t>(1, (int64_t)(0.15 * (double)h));
  const std::optional<InkRule> rule = ink_rule(line, x0, x1, 0, h, edge, h - edge);
  if (!rule) return plain;
  const std::vector<bool> ink =
      inked_columns(line, *rule, (int64_t)(0.2 * (double)h), (int64_t)std::ceil(0.8 * (double)h));
  const int64_t gap = std::max<int64_t>(2, std::llround(pad * (double)h));
  const int64_t first = ink_past_end(ink, x0 - 1, -1, gap), last = ink_past_end(ink, x1, +1, gap);
  // An end moves out to `pad` heights past its last inked column, never in from the plain pad.
  const double start = first >= 0 ? std::max(pad, ((double)(x0 - first) / scale) / across + pad) : pad;
  const double end = last >= 0 ? std::max(pad, ((double)(last + 1 - x1) / scale) / across + pad) : pad;
  return lengthen(outline, start, end);
}

Quad grow_into_blank(const GrayImage& page, const Quad& outline, double reach) {
  const auto& c = outline.corners;
  const double along = distance(c[0], c[1]), across = distance(c[0], c[3]);
  if (!(along >= 1 && across >= 1) || !(reach > 0)) return outline;
  // The outline grown by `reach` heights above and below (corners 0, 1 away from 3, 2), cut
  // out at the line's own scale: `band` rows above it and below it.
  auto thicken = [&](double above, double below) {
    Quad q = outline;
    auto& t = q.corners;
    for (int a : {0, 1}) {
      const int b = 3 - a;  // 0 with 3, 1 with 2
      const Point d{c[(size_t)b].x - c[(size_t)a].x, c[(size_t)b].y - c[(size_t)a].y};
      t[(size_t)a].x -= above * d.x, t[(size_t)a].y -= above * d.y;
      t[(size_t)b].x += below * d.x, t[(size_t)b].y += below * d.y;
    }
    return q;
  };
  const int64_t h0 = std::max<int64_t>(8, std::llround(across));
  const int64_t band = std::max<int64_t>(1, std::llround(reach * (double)h0)), h = h0 + 2 * band;
  const GrayImage line = crop_line(page, thicken(reach, reach), h);
  // The ground: the rows beside the outline, which it may grow into.
  const std::optional<InkRule> rule = ink_rule(line, 0, line.width, band, h - band, band, h - band);
  if (!rule) return outline;
  auto inked = [&](int64_t y) {
    for (int64_t x = 0; x < line.width; ++x)
      if (rule->ink(line.at(x, y))) return true;
    return false;
  };
  int64_t above = 0, below = 0;
  for (int64_t y = band - 1; y >= 0 && !inked(y); --y) ++above;
  for (int64_t y = h - band; y < h && !inked(y); ++y) ++below;
  // Half of the blank on each side: the rest is the neighbour's margin.
  return thicken(0.5 * (double)above / (double)h0, 0.5 * (double)below / (double)h0);
}

PageLine place_words(const LineResult& r, const Quad& outline, double line_width) {
  PageLine line;
  line.outline = outline;
  line.box = outline.box();
  line.text = r.text;
  line.confidence = r.confidence;
  line.error = r.error;
  const size_t n = r.chars.size();
  if (!r.ok() || n == 0 || !(line_width > 0)) return line;

  // The typical distance between neighbouring characters, in the line image's pixels; for a
  // single character, about a character's width (0.6 of the line's height).
  std::vector<double> steps;
  for (size_t i = 1; i < n; ++i) steps.push_back(r.chars[i].x - r.chars[i - 1].x);
  const auto& c = outline.corners;
  const double top = distance(c[0], c[1]);
  const double height_px = top > 0 ? line_width * distance(c[0], c[3]) / top : 0;
  double pitch = steps.empty() ? 0.6 * height_px : median(steps);
  if (!(pitch > 0)) pitch = line_width / (double)n;

  // Character i spans [lo[i], hi[i]): midway to each neighbour, at most one pitch from its centre.
  std::vector<double> lo(n), hi(n);
  for (size_t i = 0; i < n; ++i) {
    const double x = r.chars[i].x;
    lo[i] = i == 0 ? x - pitch / 2 : std::max((r.chars[i - 1].x + x) / 2, x - pitch);
    hi[i] = i + 1 == n ? x + pitch / 2 : std::min((x + r.chars[i + 1].x) / 2, x + pitch);
    lo[i] = std::clamp(lo[i], 0.0, line_width);
    hi[i] = std::clamp(hi[i], lo[i], line_width);
  }

  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    if (r.chars[i].ch == " ") continue;
    if (!any) line.text_begin = lo[i] / line_width;
    line.text_end = hi[i] / line_width;
    any = true;
  }

  PageWord word;
  auto finish_word = [&] {
    if (word.chars.empty()) return;
    double sum = 0;
    for (const PageChar& ch : word.chars) sum += ch.confidence;
    word.confidence = sum / (double)word.chars.size();
    line.words.push_back(std::move(word));
    word = PageWord{};
  };
  for (size_t i = 0; i < n; ++i) {
    const CharPosition& cp = r.chars[i];
    if (cp.ch == " ") {
      finish_word();
      continue;
    }
    PageChar ch{cp.ch, outline_slice(outline, lo[i] / line_width, hi[i] / line_width).box(), cp.confidence,
                lo[i] / line_width, hi[i] / line_width, std::clamp(cp.x / line_width, 0.0, 1.0)};
    if (word.chars.empty()) word.begin = lo[i] / line_width;
    word.end = hi[i] / line_width;
    word.text += ch.ch;
    word.box = word.box.united(ch.box);
    word.chars.push_back(std::move(ch));
  }
  finish_word();
  return line;
}

namespace {

// A line's characters on the upright page (split_at_gutters): the line's middle and height, the
// characters' centres across the page (their CTC positions), and the pitch between neighbours
// in a word: a character is taken to span half a pitch either side of its centre.
struct UprightLine {
  bool usable = false;
  double middle = 0, height = 0, pitch = 0;
  std::vector<double> centre;
  double x0(size_t k) const { return centre[k] - pitch / 2; }
  double x1(size_t k) const { return centre[k] + pitch / 2; }
};

UprightLine upright_line(const PageLine& line, const std::function<Point(const Point&)>& upright) {
  UprightLine u;
  const auto& c = line.outline.corners;
  u.height = distance(c[0], c[3]);
  if (!line.error.empty() || line.words.empty() || !(u.height > 0)) return u;
  Quad q;
  for (size_t k = 0; k < 4; ++k) q.corners[k] = upright(c[k]);
  const Rect box = q.box();
  u.middle = (box.y0 + box.y1) / 2;
  std::vector<double> steps;
  for (const PageWord& w : line.words)
    for (size_t k = 0; k < w.chars.size(); ++k) {
      const Rect r = outline_slice(q, w.chars[k].centre, w.chars[k].centre).box();
      u.centre.push_back((r.x0 + r.x1) / 2);
      if (k > 0) steps.push_back(u.centre.back() - u.centre[u.centre.size() - 2]);
    }
  u.pitch = steps.empty() ? 0.5 * u.height : median(steps);
  u.usable = !u.centre.empty() && u.pitch > 0;
  return u;
}

// The widest part of [lo, hi] that none of `taken` covers (an empty interval when all is).
std::pair<double, double> widest_free(double lo, double hi, std::vector<std::pair<double, double>> taken) {
  std::sort(taken.begin(), taken.end());
  std::pair<double, double> best{lo, lo};
  double from = lo;
  for (const auto& [a, b] : taken) {
    if (a > from && std::min(a, hi) - from > best.second - best.first) best = {from, std::min(a, hi)};
    from = std::max(from, b);
    if (from >= hi) break;
  }
  if (hi - from > best.second - best.first) best = {from, hi};
  return best;
}

// The characters [first, last] of `line` as a line of their own, between fractions f0 and f1
// of its outline. Its text runs from half a pitch (`half_pitch`, a fraction of the outline's
// length) before its first character's centre to half a pitch after its last one's: the
// characters' spans reach up to a pitch into the gutter, and the reading order looks for the
// gutter between the pieces' texts.
PageLine line_piece(const PageLine& line, size_t first, size_t last, double f0, double f1, double half_pitch) {
  PageLine piece;
  piece.outline = outline_slice(line.outline, f0, f1);
  piece.box = piece.outline.box();
  piece.confidence = line.confidence;
  const double span = f1 - f0;
  auto rebase = [&](double f) { return std::clamp((f - f0) / span, 0.0, 1.0); };
  size_t k = 0;
  for (const PageWord& w : line.words) {
    PageWord part;
    for (const PageChar& ch : w.chars) {
      if (k >= first && k <= last) {
        PageChar moved = ch;
        moved.begin = rebase(ch.begin), moved.end = rebase(ch.end), moved.centre = rebase(ch.centre);
        if (part.chars.empty()) part.begin = moved.begin;
        part.end = moved.end;
        part.text += moved.ch;
        part.box = part.box.united(moved.box);
        part.confidence += moved.confidence;
        part.chars.push_back(std::move(moved));
      }
      ++k;
    }
    if (part.chars.empty()) continue;
    part.confidence /= (double)part.chars.size();
    if (!piece.text.empty()) piece.text += ' ';
    piece.text += part.text;
    piece.words.push_back(std::move(part));
  }
  piece.text_begin = std::max(0.0, piece.words.front().chars.front().centre - half_pitch / span);
  piece.text_end = std::min(1.0, piece.words.back().chars.back().centre + half_pitch / span);
  return piece;
}

}  // namespace

std::vector<PageLine> split_at_gutters(std::vector<PageLine> lines, const std::function<Point(const Point&)>& upright,
                                       const GutterOptions& o) {
  std::vector<UprightLine> up;
  std::vector<double> heights, pitches;
  for (const PageLine& l : lines) {
    up.push_back(upright_line(l, upright));
    if (up.back().usable) heights.push_back(up.back().height), pitches.push_back(up.back().pitch);
  }
  const double typical_height = heights.empty() ? 0 : median(heights);
  const double typical_pitch = pitches.empty() ? 0 : median(pitches);
  std::vector<PageLine> out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const UprightLine& u = up[i];
    // The characters in order, with their fractions along the outline.
    std::vector<const PageChar*> chars;
    for (const PageWord& w : lines[i].words)
      for (const PageChar& ch : w.chars) chars.push_back(&ch);
    std::vector<size_t> cuts;  // split after these characters
    const size_t n = u.centre.size();
    // A line much taller than the page's lines but of their pitch is two lines of text run
    // together (a detector joins a line of one column with the next column's line below it, a
    // skewed page putting them at different heights), not a heading in large type: its
    // neighbours are the lines of the usual height.
    const bool joined = u.height > o.joined_height * typical_height && u.pitch < o.joined_pitch * typical_pitch;
    const double h = joined ? typical_height : u.height;
    std::vector<const UprightLine*> around;  // the lines around this one, of a like height
    for (size_t j = 0; u.usable && j < lines.size(); ++j) {
      const UprightLine& v = up[j];
      if (j != i && v.usable && std::abs(v.middle - u.middle) <= o.reach * h && v.height <= 1.6 * h &&
          v.height * 1.6 >= h)
        around.push_back(&v);
    }
    // Each piece keeps min_beside characters at least: CTC can place a line's first (or last)
    // character apart from the rest as it does a paragraph's (below), and one character cut off
    // a word is no column.
    const size_t least = std::max<size_t>(o.min_beside, 1);
    for (size_t k = least - 1; u.usable && k + least < n; ++k) {
      const double g0 = u.x1(k), g1 = u.x0(k + 1);
      if (g1 - g0 < o.min_gap * u.pitch) continue;
      std::vector<std::pair<double, double>> taken;
      for (const UprightLine* v : around)
        for (size_t m = 0; m < v->centre.size(); ++m)
          if (v->x1(m) > g0 && v->x0(m) < g1) taken.push_back({v->x0(m), v->x1(m)});
      const auto [f0, f1] = widest_free(g0, g1, taken);
      if (f1 - f0 < o.min_gutter * u.pitch) continue;
      if (o.blank_run && o.blank_run(lines[i], chars[k]->centre, chars[k + 1]->centre) < o.min_gutter * u.pitch)
        continue;  // the page shows ink where the CTC positions leave a band
      // Text on both sides: a line around with min_beside characters within 3 heights of the band
      // on the left, and one on the right (one character alone is not a column: the first
      // characters of a paragraph's lines leave a band beside them where CTC places them apart).
      auto text_beside = [&](bool on_left) {
        for (const UprightLine* v : around) {
          size_t count = 0;
          for (size_t m = 0; m < v->centre.size(); ++m)
            count += on_left ? v->x1(m) <= f0 && v->x1(m) >= f0 - 3 * h : v->x0(m) >= f1 && v->x0(m) <= f1 + 3 * h;
          if (count >= o.min_beside) return true;
        }
        return false;
      };
      // Lines around whose text comes up to the band (within 2 pitches) on either side: a
      // gutter has a column's edge on each side, a stray alignment of two spaces does not.
      size_t edges = 0;
      for (const UprightLine* v : around)
        for (size_t m = 0; m < v->centre.size(); ++m)
          if ((v->x1(m) <= f0 && v->x1(m) >= f0 - 2 * v->pitch) || (v->x0(m) >= f1 && v->x0(m) <= f1 + 2 * v->pitch)) {
            ++edges;
            break;
          }
      if (edges >= o.min_lines && text_beside(true) && text_beside(false)) cuts.push_back(k);
    }
    if (cuts.empty()) {
      out.push_back(std::move(lines[i]));
      continue;
    }
    const auto& c4 = lines[i].outline.corners;
    const double half_pitch = u.pitch / 2 / distance(c4[0], c4[1]);
    // A piece's outline ends half a pitch past its text at a gutter (the line's own ends stay).
    size_t first = 0;
    double f0 = 0;
    for (size_t c = 0; c <= cuts.size(); ++c) {
      const size_t last = c < cuts.size() ? cuts[c] : chars.size() - 1;
      const double f1 = c < cuts.size() ? std::min(1.0, chars[last]->centre + half_pitch) : 1.0;
      out.push_back(line_piece(lines[i], first, last, f0, f1, half_pitch));
      first = last + 1;
      if (first < chars.size()) f0 = std::max(0.0, chars[first]->centre - half_pitch);
    }
  }
  return out;
}

namespace {

// The paper and ink of a cut-out line as erase_rules (page.h) reads them; none when they are
// under 48 levels apart.
struct PaperAndInk {
  int paper = 255, mid = 128;
  double near_paper = 1;  // the fraction of the pixels within 24 levels of the paper
  bool light_ink = false;
  bool ink(uint8_t v) const { return light_ink ? v > mid : v < mid; }
};

std::optional<PaperAndInk> paper_and_ink(const GrayImage& line) {
  const int64_t n = line.width * line.height;
  if (n == 0) return std::nullopt;
  int64_t counts[256] = {};
  for (uint8_t p : line.pixels) ++counts[p];
  const auto percentile = [&](double f) { return level_at(counts, n, f); };
  // Which side is ink: the fewer pixels (light print on a dark slide too).
  const int lo = percentile(0.02), hi = percentile(0.98);
  int64_t dark = 0;
  for (int v = 0; v < (lo + hi) / 2; ++v) dark += counts[v];
  PaperAndInk r;
  r.light_ink = 2 * dark > n;
  r.paper = r.light_ink ? percentile(0.1) : percentile(0.9);
  const int ink = r.light_ink ? hi : lo;
  if (std::abs(r.paper - ink) < 48) return std::nullopt;
  r.mid = (r.paper + ink) / 2;
  int64_t near = 0;
  for (int v = std::max(0, r.paper - 24); v <= std::min(255, r.paper + 24); ++v) near += counts[v];
  r.near_paper = (double)near / (double)n;
  return r;
}

void check_line_image(const GrayImage& line, const char* what) {
  OCRT_CHECK(line.width >= 0 && line.height >= 0 && (int64_t)line.pixels.size() == line.width * line.height, what,
             ": an inconsistent image (", line.width, "x", line.height, ", ", line.pixels.size(), " pixels)");
}

}  // namespace

int64_t erase_rules(GrayImage& line, double min_run) {
  const int64_t W = line.width, H = line.height;
  check_line_image(line, "erase_rules");
  OCRT_CHECK(std::isfinite(min_run) && min_run > 0, "erase_rules: min_run must be positive, got ", min_run);
  const double least = min_run * (double)H;
  if (W == 0 || H == 0 || (double)W < least) return 0;
  const std::optional<PaperAndInk> levels = paper_and_ink(line);
  if (!levels) return 0;
  const int paper = levels->paper;
  auto is_ink = [&](uint8_t v) { return levels->ink(v); };
  struct Run {
    int64_t y, x0, x1;
  };
  std::vector<Run> runs;
  for (int64_t y = 0; y < H; ++y) {
    const uint8_t* row = line.pixels.data() + y * W;
    for (int64_t x = 0; x < W;) {
      if (!is_ink(row[x])) {
        ++x;
        continue;
      }
      const int64_t x0 = x;
      while (x < W && is_ink(row[x])) ++x;
      if ((double)(x - x0) >= least) runs.push_back({y, x0, x});
    }
  }
  // The fringe first (pixels lighter than the midpoint beside a run), then the runs themselves.
  for (const Run& r : runs)
    for (int64_t y : {r.y - 1, r.y + 1}) {
      if (y < 0 || y >= H) continue;
      uint8_t* row = line.pixels.data() + y * W;
      for (int64_t x = r.x0; x < r.x1; ++x)
        if (!is_ink(row[x])) row[x] = (uint8_t)paper;
    }
  for (const Run& r : runs) std::fill(line.pixels.begin() + r.y * W + r.x0, line.pixels.begin() + r.y * W + r.x1, (uint8_t)paper);
  return (int64_t)runs.size();
}

int64_t align_short_outlines(std::vector<Quad>& outlines) {
  // Directions as doubled angles, so that a and a + 180 degrees agree.
  double cx = 0, cy = 0;
  int64_t long_ones = 0;
  for (const Quad& q : outlines) {
    const auto& c = q.corners;
    for (const Point& p : c)
      OCRT_CHECK(std::isfinite(p.x) && std::isfinite(p.y), "align_short_outlines: an outline corner is not finite");
    const double along = distance(c[0], c[1]), across = distance(c[0], c[3]);
    if (!(across > 0) || along < 3 * across) continue;
    const double a = std::atan2(c[1].y - c[0].y, c[1].x - c[0].x);
    cx += std::cos(2 * a), cy += std::sin(2 * a), ++long_ones;
  }
  if (long_ones < 3 || std::hypot(cx, cy) < 0.9 * (double)long_ones) return 0;
  const double page_angle = std::atan2(cy, cx) / 2;
  int64_t turned = 0;
  for (Quad& q : outlines) {
    auto& c = q.corners;
    const double along = distance(c[0], c[1]), across = distance(c[0], c[3]);
    if (!(along > 0 && across > 0) || along >= 2 * across) continue;
    const double own = std::atan2(c[1].y - c[0].y, c[1].x - c[0].x);
    if (std::abs(std::remainder(own - page_angle, M_PI)) <= 5 * M_PI / 180) continue;
    // Its new reading direction is the page's, or its opposite (a region read upside down keeps
    // its way round): the one nearer its own.
    const double a = std::abs(std::remainder(own - page_angle, 2 * M_PI)) <= M_PI / 2 ? page_angle : page_angle + M_PI;
    const Point u{std::cos(a), std::sin(a)}, v{-std::sin(a), std::cos(a)};
    double s0 = INFINITY, s1 = -INFINITY, t0 = INFINITY, t1 = -INFINITY;
    for (const Point& p : c) {
      const double s = p.x * u.x + p.y * u.y, t = p.x * v.x + p.y * v.y;
      s0 = std::min(s0, s), s1 = std::max(s1, s), t0 = std::min(t0, t), t1 = std::max(t1, t);
    }
    const auto at = [&](double s, double t) { return Point{s * u.x + t * v.x, s * u.y + t * v.y}; };
    c = {at(s0, t0), at(s1, t0), at(s1, t1), at(s0, t1)};
    ++turned;
  }
  return turned;
}

double widest_blank(const GrayImage& page, const Quad& outline, double f0, double f1) {
  OCRT_CHECK(std::isfinite(f0) && std::isfinite(f1) && 0 <= f0 && f0 <= f1 && f1 <= 1,
             "widest_blank: the fractions must satisfy 0 <= f0 <= f1 <= 1, got ", f0, " and ", f1);
  const auto& c = outline.corners;
  const double along = distance(c[0], c[1]), across = distance(c[0], c[3]);
  if (!(along >= 1 && across >= 1)) return 0;
  const GrayImage cut = crop_line(page, outline, std::max<int64_t>(1, std::llround(across)));
  const std::optional<PaperAndInk> levels = paper_and_ink(cut);
  const double scale = along / (double)cut.width;  // page pixels a column
  const int64_t u0 = std::clamp<int64_t>((int64_t)std::floor(f0 * (double)cut.width), 0, cut.width);
  const int64_t u1 = std::clamp<int64_t>((int64_t)std::ceil(f1 * (double)cut.width), u0, cut.width);
  if (!levels) return (double)(u1 - u0) * scale;
  const int64_t y0 = cut.height / 10, y1 = std::max(y0 + 1, cut.height - cut.height / 10);
  int64_t best = 0, run = 0;
  for (int64_t u = u0; u < u1; ++u) {
    bool blank = true;
    for (int64_t y = y0; y < y1 && blank; ++y) blank = !levels->ink(cut.at(u, y));
    run = blank ? run + 1 : 0;
    best = std::max(best, run);
  }
  return (double)best * scale;
}

namespace {

// dotted_ink (page.h) with the line's paper and ink already read.
bool dotted_ink(const GrayImage& line, const std::optional<PaperAndInk>& levels) {
  if (!levels) return false;
  const int64_t W = line.width, H = line.height;
  int64_t ink = 0, specks = 0, pinholes = 0;
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      const bool here = levels->ink(line.at(x, y));
      int around = 0;  // inked 4-neighbours (outside the image: paper)
      around += x > 0 && levels->ink(line.at(x - 1, y));
      around += x + 1 < W && levels->ink(line.at(x + 1, y));
      around += y > 0 && levels->ink(line.at(x, y - 1));
      around += y + 1 < H && levels->ink(line.at(x, y + 1));
      ink += here;
      specks += here && around <= 1;
      pinholes += !here && around >= 3;
    }
  // Dithered glyphs are dots in clusters: some specks and pinholes, not many. Noise scattered
  // over a scan makes many more specks (a tenth of the ink and up), and a blur there costs
  // more than it mends (synthetic scanned lines: CER 2.59% -> 4.05% when such lines were
  // blurred too).
  const double ink_pixels = (double)std::max<int64_t>(1, ink);
  const double s = (double)specks / ink_pixels, h = (double)pinholes / ink_pixels;
  return ink >= 20 && s >= 0.04 && s < 0.10 && h >= 0.03 && h <= 0.08;
}

}  // namespace

bool dotted_ink(const GrayImage& line) {
  check_line_image(line, "dotted_ink");
  return dotted_ink(line, paper_and_ink(line));
}

bool descreen_line(GrayImage& line, double sigma) {
  check_line_image(line, "descreen_line");
  OCRT_CHECK(std::isfinite(sigma) && sigma > 0, "descreen_line: sigma must be positive, got ", sigma);
  if (line.width == 0 || line.height == 0) return false;
  const std::optional<PaperAndInk> levels = paper_and_ink(line);
  if (dotted_ink(line, levels)) {
    line = gaussian_blur(line, sigma);
    return true;
  }
  // Plain paper, cheaply first: a cut with 40% of its pixels near its paper's level or more.
  if (levels && levels->near_paper >= 0.4) return false;
  GrayImage blurred = gaussian_blur(line, sigma);
  if (!looks_screened(line, blurred, 0, 0, line.width, line.height)) return false;
  line = std::move(blurred);
  return true;
}

int64_t erase_column_rules(const GrayImage& page, const Quad& outline, GrayImage& line, double reach) {
  check_line_image(line, "erase_column_rules");
  check_line_image(page, "erase_column_rules (the page)");
  OCRT_CHECK(std::isfinite(reach) && reach > 0, "erase_column_rules: reach must be positive, got ", reach);
  const auto& c = outline.corners;
  for (const Point& p : c)
    OCRT_CHECK(std::isfinite(p.x) && std::isfinite(p.y), "erase_column_rules: an outline corner is not finite");
  const int64_t W = line.width, H = line.height;
  const double along = distance(c[0], c[1]), across = distance(c[0], c[3]);
  if (W == 0 || H == 0 || page.width == 0 || page.height == 0 || along < 1 || across < 1) return 0;
  const std::optional<PaperAndInk> levels = paper_and_ink(line);
  if (!levels) return 0;
  // A line on a shaded ground (less than 40% of its pixels near the paper's level: a table's
  // screened cells, where 20-27% are; 69% on plain paper) is left as it is: its rules are what
  // tells the line's normalisation (normalize_line in runtime/image.h) which side is ink, and
  // without them the recogniser read such a cell's "-21% -5%" as light print on a dark ground.
  if (levels->near_paper < 0.4) return 0;

  // Columns inked on at least 90% of the cut's rows, in runs of neighbours.
  std::vector<int64_t> inked((size_t)W, 0);
  for (int64_t y = 0; y < H; ++y) {
    const uint8_t* row = line.pixels.data() + y * W;
    for (int64_t x = 0; x < W; ++x) inked[(size_t)x] += levels->ink(row[x]);
  }
  const auto full = [&](int64_t x) { return (double)inked[(size_t)x] >= 0.9 * (double)H; };
  const Point unit{(c[1].x - c[0].x) / along, (c[1].y - c[0].y) / along};
  const double page_per_column = along / (double)W;
  // The page pixel under p is ink (ink = true) or paper (false), as the cut's levels say;
  // outside the page it is neither.
  const auto page_is = [&](const Point& p, bool ink) {
    const int64_t x = (int64_t)std::floor(p.x), y = (int64_t)std::floor(p.y);
    return x >= 0 && y >= 0 && x < page.width && y < page.height && levels->ink(page.at(x, y)) == ink;
  };
  const auto page_ink = [&](const Point& p, double half) {  // any ink within `half` page pixels along the line
    for (double d = -half; d <= half + 1e-9; d += 1)
      if (page_is({p.x + d * unit.x, p.y + d * unit.y}, true)) return true;
    return false;
  };
  // The page past one edge of the cut (fv < 0: above its top; > 1: below its bottom), on the
  // line through fraction fu of its length: ink on at least 90% of `reach` heights of it.
  const int64_t steps = std::max<int64_t>(1, (int64_t)std::ceil(reach * across));
  // And the page beside that line, 2 pixels out from the run's width, is paper on at least
  // 80% of the way on one side: a rule stands alone (at least on one side), where a screened
  // shade, a field of dots, has ink and paper side by side wherever one looks.
  const auto goes_on = [&](double fu, double half, int side) {
    int64_t hits = 0, clear_before = 0, clear_after = 0;
    for (int64_t k = 1; k <= steps; ++k) {
      const double fv = side < 0 ? -(double)k / across : 1 + (double)k / across;
      const Point p = lerp(lerp(c[0], c[3], fv), lerp(c[1], c[2], fv), fu);
      hits += page_ink(p, half);
      const double d = half + 2;
      clear_before += page_is({p.x - d * unit.x, p.y - d * unit.y}, false);
      clear_after += page_is({p.x + d * unit.x, p.y + d * unit.y}, false);
    }
    return (double)hits >= 0.9 * (double)steps && (double)std::max(clear_before, clear_after) >= 0.8 * (double)steps;
  };
  int64_t erased = 0;
  for (int64_t x = 0; x < W;) {
    if (!full(x)) {
      ++x;
      continue;
    }
    const int64_t x0 = x;
    while (x < W && full(x)) ++x;
    if ((double)(x - x0) > 0.3 * (double)H) continue;  // a block of ink, not a rule
    // Beside a rule, past its fringe, at least one column is mostly paper in the cut too.
    const auto sparse = [&](int64_t u) { return u < 0 || u >= W || 2 * inked[(size_t)u] <= H; };
    if (!sparse(x0 - 2) && !sparse(x + 1)) continue;
    const double fu = ((double)(x0 + x) / 2) / (double)W;
    const double half = (double)(x - x0) * page_per_column / 2 + 1;
    if (!goes_on(fu, half, -1) && !goes_on(fu, half, +1)) continue;
    // Filled row by row from the ground beside it, past the fringe (the two sides' levels drawn
    // across; paper where both are ink), so that the ground goes on: a cleaned line's levels
    // are what the line's normalisation reads (a light bar where the ground is grey would be
    // taken for light print).
    const int64_t a = x0 - 2, b = x + 1, from = std::max<int64_t>(0, x0 - 1), to = std::min(W, x + 1);
    for (int64_t y = 0; y < H; ++y) {
      uint8_t* row = line.pixels.data() + y * W;
      const bool use_a = a >= 0 && !levels->ink(row[a]), use_b = b < W && !levels->ink(row[b]);
      for (int64_t u = from; u < to; ++u) {
        if ((u < x0 || u >= x) && levels->ink(row[u])) continue;  // ink in the fringe is a glyph's
        double v = levels->paper;  // a glyph touching the rule is not drawn out over it
        if (use_a && use_b) v = row[a] + (double)(u - a) / (double)(b - a) * ((double)row[b] - row[a]);
        else if (use_a) v = row[a];
        else if (use_b) v = row[b];
        row[u] = (uint8_t)std::lround(v);
      }
    }
    ++erased;
  }
  return erased;
}

namespace {

// Characters that sit tight against digits in numbers, dates and amounts set in tabular figures
// ("2015", "08/13", "4.61"), whose narrow glyphs ("1") leave wide blanks beside them.
bool numeric_pair(const std::string& a, const std::string& b) {
  auto digit = [](const std::string& c) { return c.size() == 1 && c[0] >= '0' && c[0] <= '9'; };
  auto joins = [&](const std::string& c) { return digit(c) || c == "." || c == "," || c == ":" || c == "/" || c == "-"; };
  return (digit(a) && joins(b)) || (joins(a) && digit(b));
}

// Marks that hold on to the word before them (", . ; : ! ? ) ] } %") or the one after them
// ("( [ { $ #"), and marks that may do either (quotes, and what typewritten quotes read as,
// "* < > `"; hyphens and dashes, "proce-" at a line's end, "Purpose.--The"): no space is put
// between them and their neighbour.
bool either_way(const std::string& c) {
  return c == "'" || c == "\"" || c == "`" || c == "*" || c == "<" || c == ">" || c == "-" || c == "\u2010" ||
         c == "\u2013" || c == "\u2014" || c == "\u2018" || c == "\u2019" || c == "\u201c" || c == "\u201d";
}
bool holds_left(const std::string& c) {
  return c == "," || c == "." || c == ";" || c == ":" || c == "!" || c == "?" || c == ")" || c == "]" || c == "}" ||
         c == "%" || either_way(c);
}
bool holds_right(const std::string& c) {
  return c == "(" || c == "[" || c == "{" || c == "$" || c == "#" || either_way(c);
}

// Glyphs a stem wide ("i l I 1 j f t r |"), whose side bearings are wide beside their ink: a gap
// next to one must be half as wide again to count.
bool thin(const std::string& c) {
  return c == "i" || c == "l" || c == "I" || c == "1" || c == "j" || c == "f" || c == "t" || c == "r" || c == "|" ||
         c == "!";
}

// The rows of a line image's middle 80%, [edge, height - edge).
int64_t middle_edge(const GrayImage& line) { return std::max<int64_t>(1, (int64_t)(0.1 * (double)line.height)); }

// Ink on a line image as erase_rules reads it, the threshold from the rows of its middle 80%;
// none for an image without clear ink.
std::optional<InkRule> middle_ink_rule(const GrayImage& line) {
  const int64_t edge = middle_edge(line), h = line.height;
  return ink_rule(line, 0, line.width, edge, h - edge, edge, h - edge);
}

// Which columns of a line image hold ink (middle_ink_rule) over the rows of its middle 80%.
std::optional<std::vector<bool>> gap_ink(const GrayImage& line) {
  const std::optional<InkRule> rule = middle_ink_rule(line);
  if (!rule) return std::nullopt;
  const int64_t edge = middle_edge(line);
  return inked_columns(line, *rule, edge, line.height - edge);
}

// The widest run of blank columns with ink on both sides, looked for from the first ink at or
// after column `from` up to column `to`, that starts before column `start_by` (0 when there is
// none); `centre` gets its middle.
int64_t widest_gap(const std::vector<bool>& ink, int64_t from, int64_t start_by, int64_t to, double& centre) {
  int64_t best = 0, run = 0, x = from;
  while (x < to && !ink[(size_t)x]) ++x;  // to the first ink
  for (; x < to; ++x) {
    if (!ink[(size_t)x]) {
      ++run;
      continue;
    }
    if (run > best && x - run < start_by) best = run, centre = (double)x - 0.5 * (double)(run + 1);
    run = 0;
  }
  return best;
}

// The gap between characters `before` and `after` of a reading (after > before; a space may lie
// between them) on its line image's inked columns: the widest blank run (widest_gap) from the
// first ink at or after `before`'s CTC position that starts before `after`'s, looked for up to
// the position of the character after `after` (the image's end for the last).
int64_t gap_between(const LineResult& r, const std::vector<bool>& ink, size_t before, size_t after, double& centre) {
  const int64_t W = (int64_t)ink.size();
  const int64_t from = std::clamp<int64_t>((int64_t)std::ceil(r.chars[before].x), 0, W);
  const int64_t start_by = std::clamp<int64_t>((int64_t)r.chars[after].x, 0, W);
  const int64_t to = std::clamp<int64_t>(after + 1 < r.chars.size() ? (int64_t)r.chars[after + 1].x : W, start_by, W);
  return widest_gap(ink, from, start_by, to, centre);
}

// r.text made again from r.chars.
void retext(LineResult& r) {
  r.text.clear();
  for (const CharPosition& c : r.chars) r.text += c.ch;
}

}  // namespace

int64_t split_at_ink_gaps(LineResult& r, const GrayImage& line, double min_gap, double ratio) {
  const size_t n = r.chars.size();
  if (!r.ok() || n < 4 || !(min_gap > 0) || line.width < 2 || line.height < 2) return 0;
  const int64_t h = line.height;
  const std::optional<std::vector<bool>> inked = gap_ink(line);
  if (!inked) return 0;
  // The gap between characters i and i + 1: the widest run of blank columns with ink on both
  // sides that starts between their CTC positions. A position may lie in the blank before its
  // glyph (the first character of a line, a narrow glyph), so the run must start after ink seen
  // from character i's position, and may end past character i + 1's, up to the next one's.
  auto gap_after = [&](size_t i, double& centre) { return gap_between(r, *inked, i, i + 1, centre); };
  std::vector<int64_t> gaps(n, -1);  // gaps[i]: between characters i and i + 1 (-1: not measured)
  std::vector<double> centres(n, 0);
  std::vector<double> letter_gaps;
  for (size_t i = 0; i + 1 < n; ++i) {
    if (r.chars[i].ch == " " || r.chars[i + 1].ch == " ") continue;
    gaps[i] = gap_after(i, centres[i]);
    letter_gaps.push_back((double)gaps[i]);
    const std::string &a = r.chars[i].ch, &b = r.chars[i + 1].ch;
    if (numeric_pair(a, b) || holds_left(b) || holds_right(a)) gaps[i] = -1;  // measured, never split
  }
  if (letter_gaps.size() < 3) return 0;
  const double typical = median(letter_gaps);
  const double least = std::max(min_gap * (double)h, ratio * std::max(1.0, typical));
  std::vector<CharPosition> chars;
  int64_t added = 0;
  for (size_t i = 0; i < n; ++i) {
    chars.push_back(r.chars[i]);
    if (gaps[i] >= 0 && (double)gaps[i] >= least * (thin(r.chars[i].ch) || thin(r.chars[i + 1].ch) ? 1.5 : 1.0)) {
      const CharPosition &a = r.chars[i], &b = r.chars[i + 1];
      chars.push_back({" ", (a.frame + b.frame) / 2, centres[i], std::min(a.confidence, b.confidence)});
      ++added;
    }
  }
  if (added == 0) return 0;
  r.chars = std::move(chars);
  retext(r);
  return added;
}

int64_t join_address_spaces(LineResult& r, const GrayImage& line, double min_gap) {
  const size_t n = r.chars.size();
  if (!r.ok() || n < 3 || !(min_gap > 0) || line.width < 2 || line.height < 2) return 0;
  // Spaces that follow '.', '_' or '-' and come before a word holding an '@'.
  std::vector<size_t> candidates;
  for (size_t i = 1; i + 1 < n; ++i) {
    const std::string& before = r.chars[i - 1].ch;
    if (r.chars[i].ch != " " || r.chars[i + 1].ch == " " || (before != "." && before != "_" && before != "-")) continue;
    bool address = false;
    for (size_t j = i + 1; j < n && r.chars[j].ch != " " && !address; ++j) address = r.chars[j].ch == "@";
    if (address) candidates.push_back(i);
  }
  if (candidates.empty()) return 0;
  const int64_t h = line.height;
  const std::optional<std::vector<bool>> inked = gap_ink(line);
  if (!inked) return 0;
  std::vector<bool> drop(n, false);
  int64_t dropped = 0;
  for (size_t i : candidates) {
    // The gap from the mark to the next glyph, as split_at_ink_gaps measures one (over the space).
    double centre = 0;
    if ((double)gap_between(r, *inked, i - 1, i + 1, centre) < min_gap * (double)h) drop[i] = true, ++dropped;
  }
  if (dropped == 0) return 0;
  std::vector<CharPosition> chars;
  for (size_t i = 0; i < n; ++i)
    if (!drop[i]) chars.push_back(r.chars[i]);
  r.chars = std::move(chars);
  retext(r);
  return dropped;
}

int64_t lower_small_caps(LineResult& r, const GrayImage& line, double least_drop) {
  const size_t n = r.chars.size();
  if (!r.ok() || n < 3 || !(least_drop > 0) || line.width < 2 || line.height < 8) return 0;
  const int64_t W = line.width, h = line.height;
  const std::optional<InkRule> rule = middle_ink_rule(line);
  if (!rule) return 0;
  // Glyphs are runs of columns inked in the band of rows 0.2 to 0.8 of the height, where capitals
  // and small capitals both have ink.
  const int64_t band0 = (int64_t)(0.2 * (double)h), band1 = (int64_t)std::ceil(0.8 * (double)h);
  const std::vector<bool> ink = inked_columns(line, *rule, band0, band1);
  // A column's top: from its highest ink in the band up through the ink joined to it (a
  // neighbouring line's descender above a blank row is not the glyph's); its bottom likewise.
  std::vector<int64_t> top((size_t)W, h), bottom((size_t)W, -1);
  for (int64_t x = 0; x < W; ++x) {
    auto inked = [&](int64_t y) { return rule->ink(line.at(x, y)); };
    int64_t y0 = band0;
    while (y0 < band1 && !inked(y0)) ++y0;
    if (y0 == band1) continue;
    int64_t y1 = band1 - 1;
    while (!inked(y1)) --y1;
    while (y0 > 0 && inked(y0 - 1)) --y0;
    while (y1 + 1 < h && inked(y1 + 1)) ++y1;
    top[(size_t)x] = y0, bottom[(size_t)x] = y1;
  }
  auto upper = [](const std::string& c) { return c.size() == 1 && c[0] >= 'A' && c[0] <= 'Z'; };
  auto lower = [](const std::string& c) { return c.size() == 1 && c[0] >= 'a' && c[0] <= 'z'; };
  auto trailing = [](const std::string& c) { return c == ":" || c == "," || c == "." || c == ";"; };
  auto apostrophe = [](const std::string& c) { return c == "'" || c == "\u2019"; };
  int64_t lowered = 0;
  for (size_t w0 = 0; w0 < n;) {
    size_t w1 = w0;  // the word: chars [w0, w1)
    while (w1 < n && r.chars[w1].ch != " ") ++w1;
    // Letters from w0, the first a capital and another read as one too, then only trailing marks.
    size_t letters = w0;
    while (letters < w1 && (upper(r.chars[letters].ch) || lower(r.chars[letters].ch))) ++letters;
    size_t capitals = 0;
    for (size_t k = w0 + 1; k < letters; ++k) capitals += upper(r.chars[k].ch);
    bool plain = letters - w0 >= 3 && upper(r.chars[w0].ch) && capitals > 0;
    // After the letters only marks, and a possessive ("'s", "’s"): lower case after an apostrophe.
    bool possessive = false;
    for (size_t k = letters; k < w1 && plain; ++k) {
      const std::string& c = r.chars[k].ch;
      possessive = possessive || apostrophe(c);
      plain = trailing(c) || apostrophe(c) || (possessive && lower(c));
    }
    if (plain) {
      // The word's columns: from the position of the character before it (a space, in the gap)
      // to that of the one after it; its glyphs, runs of inked columns (specks under 0.3 of
      // the tallest run's height left out).
      const int64_t x0 = w0 > 0 ? std::clamp<int64_t>((int64_t)std::ceil(r.chars[w0 - 1].x), 0, W) : 0;
      const int64_t x1 = w1 < n ? std::clamp<int64_t>((int64_t)r.chars[w1].x, x0, W) : W;
      struct Run {
        int64_t x0, x1, top, bottom;
      };
      std::vector<Run> runs;
      int64_t tallest = 0;
      for (int64_t x = x0; x < x1;) {
        if (!ink[(size_t)x]) {
          ++x;
          continue;
        }
        Run run{x, x, h, -1};
        for (; x < x1 && ink[(size_t)x]; ++x)
          run.top = std::min(run.top, top[(size_t)x]), run.bottom = std::max(run.bottom, bottom[(size_t)x]);
        run.x1 = x;
        runs.push_back(run);
        tallest = std::max(tallest, run.bottom - run.top);
      }
      std::erase_if(runs, [&](const Run& g) { return (double)(g.bottom - g.top) < 0.3 * (double)tallest; });
      // Each letter's glyph: the run that holds its CTC position, or the nearest one.
      std::vector<const Run*> glyph;
      for (size_t k = w0; k < letters && !runs.empty(); ++k) {
        const double x = r.chars[k].x;
        const Run* best = nullptr;
        double best_d = INFINITY;
        for (const Run& g : runs) {
          const double d = x < (double)g.x0 ? (double)g.x0 - x : x >= (double)g.x1 ? x - (double)g.x1 + 1 : 0;
          if (d < best_d) best_d = d, best = &g;
        }
        glyph.push_back(best);
      }
      // The first letter's glyph its own, and at least three glyphs in the word.
      if (glyph.size() == letters - w0 && glyph[0] != glyph[1]) {
        std::vector<double> bottoms, rest;
        for (const Run* g : glyph) bottoms.push_back((double)g->bottom);
        const double base = median(bottoms);
        const double cap = base - (double)glyph[0]->top;
        // The letters read as capitals after the first (small capitals read as lower case
        // already, "MasKING", are not measured).
        for (size_t k = 1; k < glyph.size(); ++k)
          if (upper(r.chars[w0 + k].ch)) rest.push_back((double)glyph[k]->top - (double)glyph[0]->top);
        const auto [lo, hi] = std::minmax_element(rest.begin(), rest.end());
        const bool inside = glyph[0]->top > 0 && glyph[0]->bottom < h - 1;  // no ink running off the cut
        if (inside && cap >= 8 && *lo >= std::max(2.0, least_drop * cap) && *hi <= 0.42 * cap && *hi - *lo <= 0.1 * cap) {
          for (size_t k = w0 + 1; k < letters; ++k)
            if (upper(r.chars[k].ch)) r.chars[k].ch[0] = (char)(r.chars[k].ch[0] - 'A' + 'a');
          ++lowered;
        }
      }
    }
    w0 = w1 + 1;
  }
  if (lowered > 0) retext(r);
  return lowered;
}

namespace {

#if defined(OCRT_TARGET_ATTRS)
// crop_line's row v for the columns [u0, u1) whose four source pixels (x0, y0) .. (x0 + 1,
// y0 + 1) all lie inside the page with 2 more columns to spare on row y0 + 1 (each pixel pair
// is read as 4 bytes): 4 columns at a time in double, the same formulas as the scalar loop
// (bilinear weights, to_pixel's clamp and rounding); columns near an edge are left to it.
// Returns the first column it did not do.
OCRT_TARGET_AVX2 int64_t crop_row_avx2(const GrayImage& page, Point left, Point right, const double* fu, int64_t u0,
                                       int64_t u1, uint8_t* out) {
  const __m256d lx = _mm256_set1_pd(left.x), ly = _mm256_set1_pd(left.y);
  const __m256d dx = _mm256_set1_pd(right.x - left.x), dy = _mm256_set1_pd(right.y - left.y);
  const __m256d half = _mm256_set1_pd(0.5), one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
  const __m256d top = _mm256_set1_pd(255.0);
  // Inside with room: 0 <= x0, x0 + 3 < W (the 4-byte read of a pixel pair), 0 <= y0, y0 + 1 < H.
  const __m256d xmax = _mm256_set1_pd((double)page.width - 3), ymax = _mm256_set1_pd((double)page.height - 1);
  const int W = (int)page.width;
  const uint8_t* pixels = page.pixels.data();
  int64_t u = u0;
  for (; u + 4 <= u1; u += 4) {
    const __m256d f = _mm256_loadu_pd(fu + u);
    const __m256d sx = _mm256_sub_pd(_mm256_add_pd(lx, _mm256_mul_pd(dx, f)), half);
    const __m256d sy = _mm256_sub_pd(_mm256_add_pd(ly, _mm256_mul_pd(dy, f)), half);
    const __m256d fx0 = _mm256_floor_pd(sx), fy0 = _mm256_floor_pd(sy);
    const __m256d inside = _mm256_and_pd(_mm256_and_pd(_mm256_cmp_pd(fx0, zero, _CMP_GE_OQ), _mm256_cmp_pd(fx0, xmax, _CMP_LT_OQ)),
                                         _mm256_and_pd(_mm256_cmp_pd(fy0, zero, _CMP_GE_OQ), _mm256_cmp_pd(fy0, ymax, _CMP_LT_OQ)));
    if (_mm256_movemask_pd(inside) != 0xF) break;  // the scalar loop takes it from here
    const __m128i x0 = _mm256_cvttpd_epi32(fx0), y0 = _mm256_cvttpd_epi32(fy0);
    const __m128i at = _mm_add_epi32(_mm_mullo_epi32(y0, _mm_set1_epi32(W)), x0);
    // Four bytes from each pixel pair's address: the low two are (x0, y) and (x0 + 1, y).
    const __m128i r0 = _mm_i32gather_epi32(reinterpret_cast<const int*>(pixels), at, 1);
    const __m128i r1 = _mm_i32gather_epi32(reinterpret_cast<const int*>(pixels + W), at, 1);
    const __m128i mask = _mm_set1_epi32(0xFF);
    const __m256d p00 = _mm256_cvtepi32_pd(_mm_and_si128(r0, mask));
    const __m256d p01 = _mm256_cvtepi32_pd(_mm_and_si128(_mm_srli_epi32(r0, 8), mask));
    const __m256d p10 = _mm256_cvtepi32_pd(_mm_and_si128(r1, mask));
    const __m256d p11 = _mm256_cvtepi32_pd(_mm_and_si128(_mm_srli_epi32(r1, 8), mask));
    const __m256d fx = _mm256_sub_pd(sx, fx0), fy = _mm256_sub_pd(sy, fy0);
    const __m256d gx = _mm256_sub_pd(one, fx), gy = _mm256_sub_pd(one, fy);
    const __m256d row0 = _mm256_add_pd(_mm256_mul_pd(gx, p00), _mm256_mul_pd(fx, p01));
    const __m256d row1 = _mm256_add_pd(_mm256_mul_pd(gx, p10), _mm256_mul_pd(fx, p11));
    __m256d v = _mm256_add_pd(_mm256_mul_pd(gy, row0), _mm256_mul_pd(fy, row1));
    v = _mm256_add_pd(_mm256_min_pd(_mm256_max_pd(v, zero), top), half);  // to_pixel
    const __m128i q = _mm256_cvttpd_epi32(v);
    const __m128i b = _mm_shuffle_epi8(q, _mm_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    const int packed = _mm_cvtsi128_si32(b);
    std::memcpy(out + u, &packed, 4);
  }
  return u;
}
#endif

}  // namespace

GrayImage crop_line(const GrayImage& page, const Quad& outline, int64_t height, uint8_t outside, int64_t max_width) {
  const auto& c = outline.corners;
  const double along = distance(c[0], c[1]), across = distance(c[0], c[3]);
  for (const Point& p : c) OCRT_CHECK(std::isfinite(p.x) && std::isfinite(p.y), "crop_line: an outline corner is not finite");
  OCRT_CHECK(along >= 1 && across >= 1, "crop_line: the outline is smaller than a pixel (", along, " x ", across, ")");
  OCRT_CHECK(height >= 0 && max_width >= 1, "crop_line: bad height ", height, " or max_width ", max_width);
  GrayImage out;
  out.height = height > 0 ? height : std::max<int64_t>(1, std::llround(across));
  out.width = std::clamp<int64_t>(std::llround(along * (double)out.height / across), 1, max_width);
  out.pixels.resize((size_t)(out.width * out.height));
  auto at = [&](int64_t x, int64_t y) -> double {
    return x < 0 || y < 0 || x >= page.width || y >= page.height ? (double)outside : (double)page.at(x, y);
  };
  // Each column's fraction along the line, divided once for all rows (the same values).
  std::vector<double> fu((size_t)out.width);
  for (int64_t u = 0; u < out.width; ++u) fu[(size_t)u] = ((double)u + 0.5) / (double)out.width;
#if defined(OCRT_TARGET_ATTRS)
  const bool avx2 = cpu_isa() >= CpuIsa::avx2 && page.width >= 4 && page.height >= 2 &&
                    page.width * page.height < (int64_t{1} << 31) - 4;
#endif
  for (int64_t v = 0; v < out.height; ++v) {
    const double fv = ((double)v + 0.5) / (double)out.height;
    const Point left = lerp(c[0], c[3], fv), right = lerp(c[1], c[2], fv);
    int64_t u = 0;
    for (; u < out.width; ++u) {
#if defined(OCRT_TARGET_ATTRS)
      // Hand runs of columns inside the page to the vector loop; it stops at the first four
      // that are not, which this loop does one by one before trying it again.
      if (avx2 && (u & 3) == 0 && u + 4 <= out.width) {
        const int64_t done = crop_row_avx2(page, left, right, fu.data(), u, out.width, out.pixels.data() + v * out.width);
        if (done > u) {
          u = done - 1;
          continue;
        }
      }
#endif
      const Point p = lerp(left, right, fu[(size_t)u]);
      const double sx = p.x - 0.5, sy = p.y - 0.5;  // pixel centres sit at +0.5
      const double fx0 = std::floor(sx), fy0 = std::floor(sy);
      const int64_t x0 = (int64_t)fx0, y0 = (int64_t)fy0;
      const double fx = sx - fx0, fy = sy - fy0;
      double p00, p01, p10, p11;  // p<dy><dx>
      if (x0 >= 0 && y0 >= 0 && x0 + 1 < page.width && y0 + 1 < page.height) {  // inside: no checks
        const uint8_t* row = page.pixels.data() + y0 * page.width + x0;
        p00 = row[0], p01 = row[1], p10 = row[page.width], p11 = row[page.width + 1];
      } else {
        p00 = at(x0, y0), p01 = at(x0 + 1, y0), p10 = at(x0, y0 + 1), p11 = at(x0 + 1, y0 + 1);
      }
      const double value = (1 - fy) * ((1 - fx) * p00 + fx * p01) + fy * ((1 - fx) * p10 + fx * p11);
      out.pixels[(size_t)(v * out.width + u)] = to_pixel(value);
    }
  }
  return out;
}

std::string page_text(const Page& page) {
  std::string out;
  for (size_t b = 0; b < page.blocks.size(); ++b) {
    if (b > 0) out += '\n';
    for (const PageLine& l : page.blocks[b].lines) out += l.text + '\n';
  }
  return out;
}

// ---- reading order

namespace {

struct Interval {
  double lo, hi;
};

// The gaps at least min_gap wide (and more than 0) between the union of some intervals.
std::vector<Interval> gaps_between(std::vector<Interval> iv, double min_gap) {
  std::sort(iv.begin(), iv.end(), [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  std::vector<Interval> gaps;
  double reach = iv.empty() ? 0 : iv[0].hi;
  for (size_t i = 1; i < iv.size(); ++i) {
    const double gap = iv[i].lo - reach;
    if (gap > 0 && gap >= min_gap) gaps.push_back({reach, iv[i].lo});
    reach = std::max(reach, iv[i].hi);
  }
  return gaps;
}

// Do two lines share a row: do they overlap vertically by at least half the lower one?
bool same_row(const Rect& a, const Rect& b) {
  const double overlap = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
  return overlap >= 0.5 * std::min(a.height(), b.height());
}

class Orderer {
 public:
  Orderer(const std::vector<PageLine>& lines, const ReadingOrderOptions& o) : lines_(lines), o_(o) {
    std::vector<double> heights;
    for (const PageLine& l : lines) heights.push_back(l.box.height());
    line_height_ = std::max(median(heights), 1.0);
  }

  struct Part {
    std::vector<size_t> lines;  // indices into the page's lines, in reading order
    bool mergeable = false;     // a plain block of one column (may join its neighbour band)
  };

  std::vector<Part> order(std::vector<size_t> ids) const {
    if (ids.empty()) return {};
    if (ids.size() == 1) return {Part{ids, true}};
    const std::vector<std::vector<size_t>> columns = split(ids, true, o_.column_gap * line_height_);
    if (columns.size() >= 2) {
      const std::vector<std::vector<size_t>> groups = side_by_side_groups(columns);
      if (groups.size() == 1 && cells_share_rows(columns)) return table_rows(ids, columns);
      std::vector<Part> out;
      for (const auto& column : groups.size() >= 2 ? groups : columns)
        for (Part& p : order(column)) out.push_back(std::move(p));
      for (Part& p : out) p.mergeable = false;  // a column's blocks stay apart from what is above
      return out;
    }
    // A line that spans the columns below it (a heading) closes the gutter: no column split is
    // possible here, and a band split would cut the region where a gap happens to run across
    // it (a paragraph break in one column beside a figure in the other), reading part of the
    // left column, then the right one, then the rest of the left. When the lines without the
    // spanning ones fall into columns, the region is cut at the first spanning line's bottom
    // instead: what is above it (or it) first, then the rest, which splits into its columns.
    if (const auto cut = spanning_cut(ids); cut.size() == 2) {
      std::vector<Part> out = order(cut[0]);
      for (Part& p : order(cut[1])) out.push_back(std::move(p));
      return out;
    }
    // Narrower lines can close a gutter too: a centred title or page number over it, a line
    // the detector ran across it. When a few lines are all that cross a gutter that many lines
    // line up on, the region is cut at each of them: what is above the first, the first, what
    // is between it and the next, ... (each part then splits into its columns).
    if (const auto cut = crossing_cut(ids); cut.size() >= 2) {
      std::vector<Part> out;
      for (const auto& part : cut)
        for (Part& p : order(part)) out.push_back(std::move(p));
      for (Part& p : out) p.mergeable = false;
      return out;
    }
    const std::vector<std::vector<size_t>> bands = split(ids, false, 0, true);
    if (bands.size() >= 2) {
      std::vector<Part> out;
      for (const auto& band : bands)
        for (Part& p : order(band)) {
          if (!out.empty() && continues(out.back(), p)) {
            out.back().lines.insert(out.back().lines.end(), p.lines.begin(), p.lines.end());
          } else {
            out.push_back(std::move(p));
          }
        }
      return out;
    }
    return {Part{rows_left_to_right(ids), true}};
  }

 private:
  // {lines whose centre is above the first spanning line's bottom, the rest}, when ids has
  // lines wider than half the region and the other lines fall into columns; otherwise {} (and
  // when either part would be empty: the spanning line is the last).
  std::vector<std::vector<size_t>> spanning_cut(const std::vector<size_t>& ids) const {
    double x0 = 1e300, x1 = -1e300;
    for (size_t i : ids) x0 = std::min(x0, lines_[i].box.x0), x1 = std::max(x1, lines_[i].box.x1);
    std::vector<size_t> spanning, rest;
    for (size_t i : ids) (lines_[i].box.width() > 0.5 * (x1 - x0) ? spanning : rest).push_back(i);
    if (spanning.empty() || rest.size() < 2 || split(rest, true, o_.column_gap * line_height_).size() < 2) return {};
    double bottom = 1e300;  // of the topmost spanning line
    double top = 1e300;
    for (size_t i : spanning)
      if (lines_[i].box.y0 < top) top = lines_[i].box.y0, bottom = lines_[i].box.y1;
    std::vector<std::vector<size_t>> cut(2);
    for (size_t i : ids) cut[(lines_[i].box.y0 + lines_[i].box.y1) / 2 < bottom ? 0 : 1].push_back(i);
    if (cut[0].empty() || cut[1].empty()) return {};
    return cut;
  }

  // The parts that a gutter crossed by few lines cuts ids into (see order()), or {} when there
  // is none: a vertical band at least narrow_column_gap line heights wide that at most
  // max(2, 5% of the lines) lines cross, with narrow_column_lines lines wholly on each side of
  // it, and the columns the other lines form are no table. Of several, the one crossed by the
  // fewest lines (then the widest) is taken. The parts,
  // top to bottom: the lines (crossers aside) whose middle lies above the first crosser's
  // middle, the first crosser, the lines between it and the next, ..., the lines below the last.
  std::vector<std::vector<size_t>> crossing_cut(const std::vector<size_t>& ids) const {
    const size_t most = std::max<size_t>(2, ids.size() / 20);
    const double min_width = o_.narrow_column_gap * line_height_;
    std::vector<double> edges;
    for (size_t i : ids) edges.push_back(lines_[i].box.x0), edges.push_back(lines_[i].box.x1);
    std::sort(edges.begin(), edges.end());
    std::vector<size_t> best;
    double best_width = 0;
    for (size_t e = 0; e + 1 < edges.size(); ++e) {
      const double lo = edges[e], hi = edges[e + 1];
      if (!(hi > lo)) continue;
      std::vector<size_t> crossers;
      for (size_t i : ids)
        if (lines_[i].box.x0 < hi && lines_[i].box.x1 > lo) crossers.push_back(i);
      if (crossers.empty() || crossers.size() > most || (!best.empty() && crossers.size() > best.size())) continue;
      // The gap the other lines leave around [lo, hi], and the lines wholly on each side.
      double left_edge = -1e300, right_edge = 1e300;
      int64_t left = 0, right = 0;
      for (size_t i : ids) {
        if (std::find(crossers.begin(), crossers.end(), i) != crossers.end()) continue;
        const Rect& b = lines_[i].box;
        if (b.x1 <= lo) left_edge = std::max(left_edge, b.x1), ++left;
        else if (b.x0 >= hi) right_edge = std::min(right_edge, b.x0), ++right;
      }
      const double width = right_edge - left_edge;
      if (left < o_.narrow_column_lines || right < o_.narrow_column_lines || width < min_width) continue;
      if (best.empty() || crossers.size() < best.size() || width > best_width) best = crossers, best_width = width;
    }
    if (best.empty()) return {};
    // Cells that share rows (a table or a form, with a cell run across a rule) are read row
    // by row by the band split instead.
    std::vector<size_t> rest;
    for (size_t i : ids)
      if (std::find(best.begin(), best.end(), i) == best.end()) rest.push_back(i);
    if (is_table(split(rest, true, min_width))) return {};
    auto middle = [&](size_t i) { return (lines_[i].box.y0 + lines_[i].box.y1) / 2; };
    std::sort(best.begin(), best.end(), [&](size_t a, size_t b) { return middle(a) < middle(b); });
    std::vector<std::vector<size_t>> parts(2 * best.size() + 1);
    for (size_t k = 0; k < best.size(); ++k) parts[2 * k + 1].push_back(best[k]);
    for (size_t i : rest) {
      size_t above = 0;  // crossers whose middle is above this line's
      while (above < best.size() && middle(best[above]) <= middle(i)) ++above;
      parts[2 * above].push_back(i);
    }
    parts.erase(std::remove_if(parts.begin(), parts.end(), [](const auto& p) { return p.empty(); }), parts.end());
    return parts;
  }

  // The lines of ids in the groups that the gaps (vertical ones when by_x) separate; with
  // widest_only, only the widest gaps (and those within a tenth of a line height of them).
  std::vector<std::vector<size_t>> split(const std::vector<size_t>& ids, bool by_x, double min_gap,
                                         bool widest_only = false) const {
    std::vector<Interval> iv;
    for (size_t i : ids) {
      const Rect& b = lines_[i].box;
      iv.push_back(by_x ? Interval{b.x0, b.x1} : Interval{b.y0, b.y1});
    }
    // A narrower vertical gap is a gutter too when many lines line up on both sides of it (the
    // spaces of a paragraph never do).
    const double narrow = o_.narrow_column_gap * line_height_;
    const bool narrow_ok = by_x && narrow < min_gap;
    std::vector<Interval> gaps = gaps_between(iv, narrow_ok ? narrow : min_gap);
    if (narrow_ok)
      gaps.erase(std::remove_if(gaps.begin(), gaps.end(),
                                [&](const Interval& g) {
                                  if (g.hi - g.lo >= min_gap) return false;
                                  int64_t left = 0, right = 0;
                                  for (const Interval& v : iv) left += v.hi <= g.lo, right += v.lo >= g.hi;
                                  return left < o_.narrow_column_lines || right < o_.narrow_column_lines;
                                }),
                 gaps.end());
    if (widest_only && !gaps.empty()) {
      double widest = 0;
      for (const Interval& g : gaps) widest = std::max(widest, g.hi - g.lo);
      const double keep = widest - 0.1 * line_height_;
      gaps.erase(std::remove_if(gaps.begin(), gaps.end(), [&](const Interval& g) { return g.hi - g.lo < keep; }),
                 gaps.end());
    }
    std::vector<std::vector<size_t>> groups(gaps.size() + 1);
    for (size_t i : ids) {
      const Rect& b = lines_[i].box;
      const double at = by_x ? b.x0 : b.y0;
      size_t g = 0;
      while (g < gaps.size() && at >= gaps[g].hi) ++g;
      groups[g].push_back(i);
    }
    return groups;
  }

  // Lines top to bottom; those that share a row, left to right.
  std::vector<size_t> rows_left_to_right(std::vector<size_t> ids) const {
    auto centre = [&](size_t i) { return (lines_[i].box.y0 + lines_[i].box.y1) / 2; };
    std::stable_sort(ids.begin(), ids.end(), [&](size_t a, size_t b) { return centre(a) < centre(b); });
    for (size_t start = 0; start < ids.size();) {
      size_t end = start + 1;
      while (end < ids.size() && same_row(lines_[ids[start]].box, lines_[ids[end]].box)) ++end;
      std::stable_sort(ids.begin() + (std::ptrdiff_t)start, ids.begin() + (std::ptrdiff_t)end,
                       [&](size_t a, size_t b) { return lines_[a].box.x0 < lines_[b].box.x0; });
      start = end;
    }
    return ids;
  }

  // Are two neighbouring columns text side by side rather than columns of one table? Where the
  // two share a band (lines with no gap across both) holding table_row_lines lines or more of
  // each, a table's lines sit on common baselines, one beside another, and two columns of text
  // (or a table beside a column of text) line up only by chance: they are side by side when
  // under three quarters of the band's lines of the sparser column have a line of the other
  // whose middle lies within 0.25 line heights of theirs. (A real report page, multicol_04 of
  // bench/results/pages.md: a table and paragraphs in a wide left column, paragraphs in the
  // right one, whose short cells made the pair look like a table, was read band by band
  // across both.)
  bool side_by_side(const std::vector<size_t>& left, const std::vector<size_t>& right) const {
    std::vector<size_t> both = left;
    both.insert(both.end(), right.begin(), right.end());
    std::vector<bool> is_left(lines_.size(), false);
    for (size_t i : left) is_left[i] = true;
    auto middle = [&](size_t i) { return (lines_[i].box.y0 + lines_[i].box.y1) / 2; };
    for (const std::vector<size_t>& band : split(both, false, 0)) {
      std::vector<size_t> l, r;
      for (size_t i : band) (is_left[i] ? l : r).push_back(i);
      const auto& a = l.size() <= r.size() ? l : r;
      const auto& b = &a == &l ? r : l;
      if ((int64_t)a.size() < o_.table_row_lines) continue;
      size_t aligned = 0;
      for (size_t i : a)
        aligned += std::any_of(b.begin(), b.end(), [&](size_t q) {
          return std::abs(middle(i) - middle(q)) <= 0.25 * line_height_;
        });
      if ((double)aligned < 0.75 * (double)a.size()) return true;
    }
    return false;
  }

  // The columns in groups, split where neighbouring columns are side by side (above): each
  // group is read as a region of its own (a table beside a column of text: the table's
  // columns, then the text's).
  std::vector<std::vector<size_t>> side_by_side_groups(const std::vector<std::vector<size_t>>& columns) const {
    std::vector<std::vector<size_t>> groups(1, columns[0]);
    for (size_t k = 1; k < columns.size(); ++k) {
      if (side_by_side(columns[k - 1], columns[k])) groups.emplace_back();
      groups.back().insert(groups.back().end(), columns[k].begin(), columns[k].end());
    }
    return groups;
  }

  // Some lines of a column: the median of their widths, and whether they are cells: very short
  // lines (under half of cell_width_in_heights), or short lines that leave their column mostly
  // empty (cells of different lengths). A narrow column of running text, justified or ragged,
  // is filled by most of its lines: a three-column article at 150 dpi has lines of 9 line
  // heights, which must not be read row by row across its columns.
  struct ColumnLines {
    double median_width;
    bool cells;
  };
  ColumnLines column_lines(const std::vector<size_t>& ids) const {
    std::vector<double> widths;
    double x0 = 1e300, x1 = -1e300;
    for (size_t i : ids) {
      widths.push_back(lines_[i].box.width());
      x0 = std::min(x0, lines_[i].box.x0), x1 = std::max(x1, lines_[i].box.x1);
    }
    const double m = median(widths);
    return {m, m < 0.5 * o_.cell_width_in_heights * line_height_ ||
                   (m < o_.cell_width_in_heights * line_height_ && m < 0.75 * (x1 - x0))};
  }

  // Columns of cells that share rows: a table or a form (no two neighbours side by side, and
  // cells_share_rows below).
  bool is_table(const std::vector<std::vector<size_t>>& columns) const {
    if (!cells_share_rows(columns)) return false;
    for (size_t k = 0; k + 1 < columns.size(); ++k)
      if (side_by_side(columns[k], columns[k + 1])) return false;
    return true;
  }

  // A column of line numbers: the margin of a transcript or of pleading paper, each line of the
  // text beside it numbered 1, 2, 3, ... (from 1 again on each page of a condensed transcript,
  // four pages to a sheet). At least 8 lines, each a whole number under 100, and at least four
  // fifths of them, top to bottom, one or two more than the line above (a short number is
  // easily missed: one or two narrow glyphs, often read below the confidence that keeps a line)
  // or at most 2 again. (A column of years or of amounts does not count on by one.)
  bool line_numbers(const std::vector<size_t>& column) const {
    constexpr size_t kLeast = 8;
    if (column.size() < kLeast) return false;
    std::vector<std::pair<double, int>> numbers;  // (top, value)
    for (size_t i : column) {
      const std::string& t = lines_[i].text;
      size_t a = t.find_first_not_of(' '), b = t.find_last_not_of(' ');
      if (a == std::string::npos || b - a + 1 > 2) return false;
      int value = 0;
      for (size_t k = a; k <= b; ++k) {
        if (t[k] < '0' || t[k] > '9') return false;
        value = 10 * value + (t[k] - '0');
      }
      numbers.emplace_back(lines_[i].box.y0, value);
    }
    std::sort(numbers.begin(), numbers.end());
    size_t counting = 0;
    for (size_t k = 1; k < numbers.size(); ++k) {
      const int step = numbers[k].second - numbers[k - 1].second;
      counting += step == 1 || step == 2 || (step < 0 && numbers[k].second <= 2);
    }
    return (double)counting >= 0.8 * (double)(numbers.size() - 1);
  }

  // is_table's test of the columns' lines themselves, for columns already known to hold no
  // text side by side (order() has their side_by_side_groups). Columns of line numbers take no
  // part: they share rows with the text they number, line for line, and that text is no table
  // (a condensed transcript's two pages side by side, each with its numbers, had been read row
  // by row across both). Without them, the rest decides.
  bool cells_share_rows(const std::vector<std::vector<size_t>>& all_columns) const {
    std::vector<std::vector<size_t>> columns;
    for (const auto& column : all_columns)
      if (!line_numbers(column)) columns.push_back(column);
    if (columns.size() < 2) return false;
    bool cells = false;
    std::vector<double> median_width;  // of each column's lines
    for (const auto& column : columns) {
      const ColumnLines c = column_lines(column);
      median_width.push_back(c.median_width);
      cells = cells || c.cells;
    }
    if (!cells) return false;
    // Neighbouring columns share rows: at least half of the shorter column's lines have a line
    // of the other beside them (a table may leave many cells of a column empty). Beside a
    // column of long lines (running text, or a form's long typed values: a median line of
    // twice cell_width_in_heights or more) it takes more: half of each column's lines paired,
    // their middles within a quarter of a line height (a typed value sits on its label's
    // baseline). A column of running text next to a column that holds a table among its
    // paragraphs is no table: its lines pair with some of the other's, but the other's many
    // lines (cells at their own pitch) mostly pair with none of its. (Values written on a
    // form's rules sit above their labels, and are shorter: the plain rule takes them.)
    auto long_lines = [&](size_t k) { return median_width[k] >= 2 * o_.cell_width_in_heights * line_height_; };
    auto paired_share = [&](const std::vector<size_t>& a, const std::vector<size_t>& b, bool aligned) {
      size_t paired = 0;
      for (size_t i : a)
        for (size_t j : b) {
          const Rect &p = lines_[i].box, &q = lines_[j].box;
          if (same_row(p, q) && (!aligned || std::abs((p.y0 + p.y1) - (q.y0 + q.y1)) / 2 <= 0.25 * line_height_)) {
            ++paired;
            break;
          }
        }
      return (double)paired / (double)a.size();
    };
    for (size_t k = 0; k + 1 < columns.size(); ++k) {
      const auto& a = columns[k].size() <= columns[k + 1].size() ? columns[k] : columns[k + 1];
      const auto& b = &a == &columns[k] ? columns[k + 1] : columns[k];
      if (long_lines(k) || long_lines(k + 1)) {
        if (paired_share(a, b, true) < 0.5 || paired_share(b, a, true) < 0.5) return false;
      } else if (paired_share(a, b, false) < 0.5) {
        return false;
      }
    }
    return true;
  }

  // A table read row by row: each band of the table is a block, its lines by column, then top
  // to bottom within a cell.
  std::vector<Part> table_rows(const std::vector<size_t>& ids, const std::vector<std::vector<size_t>>& columns) const {
    std::vector<size_t> column_of(lines_.size(), 0);
    for (size_t k = 0; k < columns.size(); ++k)
      for (size_t i : columns[k]) column_of[i] = k;
    std::vector<Part> out;
    for (const std::vector<size_t>& row : split(ids, false, 0)) {
      // Column by column; in a column, its lines top to bottom and those side by side (cells
      // that a line run across their rule put into one column) left to right.
      std::vector<std::vector<size_t>> by_column(columns.size());
      for (size_t i : row) by_column[column_of[i]].push_back(i);
      // A band of many lines in two columns or more is a stretch of rows with no gap between
      // them (a dense table, whose outlines touch): read line by line across, left to right.
      // Unless two of those columns are of long lines, not cells (running text, whose lines
      // fill their column: newspaper columns on a common baseline grid, which is_table can take
      // for a table when a column holds a caption or cells too), read column by column as before.
      int64_t full = 0, long_lines = 0;
      for (const auto& cells : by_column) {
        if ((int64_t)cells.size() < o_.table_row_lines) continue;
        ++full;
        long_lines += !column_lines(cells).cells;
      }
      if (full >= 2 && long_lines <= 1) {
        out.push_back(Part{rows_left_to_right(row), false});
        continue;
      }
      Part part{{}, false};
      for (const auto& cells : by_column)
        for (size_t i : rows_left_to_right(cells)) part.lines.push_back(i);
      out.push_back(std::move(part));
    }
    return out;
  }

  // Does block b continue block a (the band above it): close below it and overlapping it?
  bool continues(const Part& a, const Part& b) const {
    if (!a.mergeable || !b.mergeable) return false;
    const Rect& above = lines_[a.lines.back()].box;
    const Rect& below = lines_[b.lines.front()].box;
    const double gap = below.y0 - above.y1;
    const double overlap = std::min(above.x1, below.x1) - std::max(above.x0, below.x0);
    return gap < o_.paragraph_gap * line_height_ && overlap >= 0.5 * std::min(above.width(), below.width());
  }

  const std::vector<PageLine>& lines_;
  ReadingOrderOptions o_;
  double line_height_ = 1;
};

// The order of lines whose boxes are set.
std::vector<std::vector<size_t>> order_of(const std::vector<PageLine>& lines, const ReadingOrderOptions& o) {
  std::vector<size_t> ids(lines.size());
  std::iota(ids.begin(), ids.end(), 0);
  const Orderer orderer(lines, o);
  std::vector<std::vector<size_t>> blocks;
  for (Orderer::Part& part : orderer.order(ids)) blocks.push_back(std::move(part.lines));
  return blocks;
}

void fill_boxes(std::vector<PageLine>& lines) {
  for (PageLine& l : lines)
    if (l.box.empty()) l.box = l.outline.box();
}

}  // namespace

std::vector<std::vector<size_t>> reading_order_indices(std::vector<PageLine> lines, const ReadingOrderOptions& o) {
  fill_boxes(lines);
  return order_of(lines, o);
}

namespace {

// A connected piece of ink on missed_ink's grid, in grid cells: its box [x0, x1] x [y0, y1]
// (inclusive) and its count of inked cells.
struct InkPiece {
  int64_t x0, y0, x1, y1, cells;
};

// The pieces of ink on `ink` (gw x gh cells, 1: ink; marked 2 once visited) that touch no inked
// `covered` cell (8-connected), found by a flood from each unvisited inked cell outside them; at most `most` pieces (nullopt past that:
// a page of speckle or a photo, where lone glyphs are not to be looked for).
std::optional<std::vector<InkPiece>> uncovered_pieces(std::vector<uint8_t>& ink, const std::vector<uint8_t>& covered,
                                                      int64_t gw, int64_t gh, size_t most) {
  std::vector<InkPiece> pieces;
  std::vector<int64_t> stack;
  for (int64_t start = 0; start < gw * gh; ++start) {
    if (ink[(size_t)start] != 1 || covered[(size_t)start]) continue;
    InkPiece p{start % gw, start / gw, start % gw, start / gw, 0};
    bool touches = false;
    ink[(size_t)start] = 2;  // visited
    stack.assign(1, start);
    while (!stack.empty()) {
      const int64_t at = stack.back();
      stack.pop_back();
      const int64_t x = at % gw, y = at / gw;
      ++p.cells;
      p.x0 = std::min(p.x0, x), p.x1 = std::max(p.x1, x), p.y0 = std::min(p.y0, y), p.y1 = std::max(p.y1, y);
      for (int64_t ny = std::max<int64_t>(0, y - 1); ny <= std::min(gh - 1, y + 1); ++ny)
        for (int64_t nx = std::max<int64_t>(0, x - 1); nx <= std::min(gw - 1, x + 1); ++nx) {
          const size_t n = (size_t)(ny * gw + nx);
          if (!ink[n]) continue;
          if (covered[n]) {
            touches = true;
            continue;
          }
          if (ink[n] == 1) ink[n] = 2, stack.push_back((int64_t)n);
        }
    }
    if (touches) continue;
    if (pieces.size() == most) return std::nullopt;
    pieces.push_back(p);
  }
  return pieces;
}

}  // namespace

std::vector<Quad> missed_ink(const GrayImage& page, const std::vector<Quad>& covered, const MissedInkOptions& o) {
  const int64_t W = page.width, H = page.height;
  OCRT_CHECK(W >= 0 && H >= 0 && (int64_t)page.pixels.size() == W * H, "missed_ink: an inconsistent image (", W, "x",
             H, ", ", page.pixels.size(), " pixels)");
  OCRT_CHECK(std::isfinite(o.margin) && o.margin >= 0, "missed_ink: margin must be 0 or more, got ", o.margin);
  for (const Quad& q : covered)
    for (const Point& c : q.corners)
      OCRT_CHECK(std::isfinite(c.x) && std::isfinite(c.y), "missed_ink: an outline's corner is not finite");
  // The type's size: the outlines' median height, from at least three of them.
  std::vector<double> heights;
  for (const Quad& q : covered) heights.push_back(distance(q.corners[0], q.corners[3]));
  if (heights.size() < 3) return {};
  const double h = median(heights);
  const std::optional<PaperAndInk> levels = paper_and_ink(page);
  if (!levels || levels->light_ink || !(h >= 8) || !(h <= (double)std::max(W, H))) return {};
  // The grid: cells of f x f pixels, a cell inked when any of its pixels is, so that a line's
  // height spans 16 cells or more.
  const int64_t f = std::clamp<int64_t>((int64_t)(h / 16), 1, 4);
  const int64_t gw = (W + f - 1) / f, gh = (H + f - 1) / f;
  std::vector<uint8_t> ink((size_t)(gw * gh), 0), cover((size_t)(gw * gh), 0);
  for (int64_t y = 0; y < H; ++y) {
    const uint8_t* row = page.pixels.data() + y * W;
    uint8_t* cells = ink.data() + (y / f) * gw;
    for (int64_t x = 0; x < W; ++x)
      if (row[x] < levels->mid) cells[x / f] = 1;
  }
  // A coordinate's cell, of n; clamped as a double first, so that an outline far off the page
  // casts safely.
  auto cell = [&](double v, int64_t n) { return (int64_t)std::clamp(std::floor(v / (double)f), 0.0, (double)(n - 1)); };
  for (const Quad& q : covered) {
    const Rect b = q.box();
    const double m = o.margin * distance(q.corners[0], q.corners[3]);
    const int64_t x0 = cell(b.x0 - m, gw), x1 = cell(b.x1 + m, gw), y0 = cell(b.y0 - m, gh), y1 = cell(b.y1 + m, gh);
    for (int64_t y = y0; y <= y1; ++y) std::fill(cover.begin() + y * gw + x0, cover.begin() + y * gw + x1 + 1, 1);
  }
  const std::optional<std::vector<InkPiece>> pieces = uncovered_pieces(ink, cover, gw, gh, o.max_pieces);
  if (!pieces) return {};
  // Glyph-sized pieces, in page pixels: at least 0.3 of the type's height and at most 1.2 of it,
  // at most 3 heights wide (longer is a rule or a figure's edge); or a dash: under 0.3 heights
  // high, 0.3 to 2 heights long and solid (half its box inked at least). Specks, dots and
  // stray strokes are neither.
  struct Box {
    double x0, y0, x1, y1;
  };
  std::vector<Box> glyphs;
  for (const InkPiece& p : *pieces) {
    const double pw = (double)((p.x1 - p.x0 + 1) * f), ph = (double)((p.y1 - p.y0 + 1) * f);
    const double fill = (double)p.cells / (double)((p.x1 - p.x0 + 1) * (p.y1 - p.y0 + 1));
    const bool glyph = ph >= 0.3 * h && ph <= 1.2 * h && pw <= 3 * h && fill >= 0.12;
    const bool dash = ph < 0.3 * h && pw >= 0.3 * h && pw <= 2 * h && fill >= 0.5;
    if (!glyph && !dash) continue;
    glyphs.push_back({(double)(p.x0 * f), (double)(p.y0 * f), (double)std::min(W, (p.x1 + 1) * f),
                      (double)std::min(H, (p.y1 + 1) * f)});
  }
  // Glyphs side by side make one line: left to right, each joins the first line it lies level
  // with (its middle within the line's rows, give or take a fifth of a height) that ends at most
  // 0.8 heights before it, and keeps the line at most 1.2 heights high.
  std::sort(glyphs.begin(), glyphs.end(), [](const Box& a, const Box& b) { return a.x0 < b.x0; });
  std::vector<Box> lines;
  for (const Box& g : glyphs) {
    const double mid = (g.y0 + g.y1) / 2;
    Box* joined = nullptr;
    for (Box& l : lines)
      if (mid >= l.y0 - 0.2 * h && mid <= l.y1 + 0.2 * h && g.x0 <= l.x1 + 0.8 * h &&
          std::max(l.y1, g.y1) - std::min(l.y0, g.y0) <= 1.2 * h) {
        joined = &l;
        break;
      }
    if (!joined) {
      lines.push_back(g);
      continue;
    }
    joined->x0 = std::min(joined->x0, g.x0), joined->x1 = std::max(joined->x1, g.x1);
    joined->y0 = std::min(joined->y0, g.y0), joined->y1 = std::max(joined->y1, g.y1);
  }
  if (lines.size() > o.max_lines) return {};  // a figure's texture, not lone glyphs
  // Each line's outline: its ink with 0.15 heights more at each end, and as high as its ink and
  // 0.3 heights more, 0.8 heights at least, about its middle.
  std::vector<Quad> out;
  for (const Box& l : lines) {
    const double mid = (l.y0 + l.y1) / 2, half = std::max(l.y1 - l.y0 + 0.3 * h, 0.8 * h) / 2;
    const Rect r{std::max(0.0, l.x0 - 0.15 * h), std::max(0.0, mid - half), std::min((double)W, l.x1 + 0.15 * h),
                 std::min((double)H, mid + half)};
    out.push_back(Quad::from_rect(r));
  }
  return out;
}

std::vector<PageBlock> reading_order(std::vector<PageLine> lines, const ReadingOrderOptions& o) {
  fill_boxes(lines);
  std::vector<PageBlock> blocks;
  for (const std::vector<size_t>& ids : order_of(lines, o)) {
    PageBlock block;
    for (size_t i : ids) {
      block.box = block.box.united(lines[i].box);
      block.lines.push_back(std::move(lines[i]));
    }
    blocks.push_back(std::move(block));
  }
  return blocks;
}

}  // namespace ocrt::infer
