#include "train/synth_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>

#include "runtime/error.h"
#include "runtime/json.h"

namespace ocrt::train {

const char* page_layout_name(PageLayout layout) {
  switch (layout) {
    case PageLayout::article: return "article";
    case PageLayout::table: return "table";
    case PageLayout::form: return "form";
    case PageLayout::receipt: return "receipt";
    case PageLayout::slide: return "slide";
    case PageLayout::chart: return "chart";
  }
  return "?";
}

PageLayout parse_page_layout(const std::string& name) {
  for (PageLayout l : {PageLayout::article, PageLayout::table, PageLayout::form, PageLayout::receipt, PageLayout::slide,
                       PageLayout::chart})
    if (name == page_layout_name(l)) return l;
  fail("unknown page layout '", name, "' (expected article, table, form, receipt, slide or chart)");
}

ScanOptions PageSynthOptions::page_scan_options() {
  ScanOptions s;
  s.p_crop = s.p_margin = s.p_skew = s.p_curve = s.p_lowres = 0;
  return s;
}

void PageSynthOptions::validate() const {
  auto in = [](double v, double lo, double hi, const char* name) {
    OCRT_CHECK(std::isfinite(v) && v >= lo && v <= hi, "page synthesis: ", name, " must be in [", lo, ", ", hi, "], got ", v);
  };
  in(min_dpi, 50, 600, "min_dpi");
  in(max_dpi, min_dpi, 600, "max_dpi");
  in(min_pt, 4, 72, "min_pt");
  in(max_pt, min_pt, 72, "max_pt");
  in(max_skew_deg, 0, 10, "max_skew_deg");
  in(min_word_space, 0, 2, "min_word_space");
  in(max_word_space, min_word_space, 2, "max_word_space");
  in(p_scan, 0, 1, "p_scan");
  in(p_light, 0, 1, "p_light");
  in(max_light, 0, 0.8, "max_light");
  in(p_bleed, 0, 1, "p_bleed");
  in(p_numbered, 0, 1, "p_numbered");
  in(p_small_caps, 0, 1, "p_small_caps");
  in(max_bleed, 0, 128, "max_bleed");
  scan.validate();
  OCRT_CHECK(scan.p_crop == 0 && scan.p_margin == 0 && scan.p_skew == 0 && scan.p_curve == 0 && scan.p_lowres == 0,
             "page synthesis: the scan simulation of a page cannot crop, pad, skew, curve or resample it "
             "(the outlines would no longer match)");
  OCRT_CHECK(layout_weights.size() == kPageLayouts, "page synthesis: layout_weights needs ", kPageLayouts,
             " weights, got ", layout_weights.size());
  double sum = 0;
  for (double w : layout_weights) {
    in(w, 0, 1e9, "a layout weight");
    sum += w;
  }
  OCRT_CHECK(sum > 0, "page synthesis: the layout weights are all zero");
  OCRT_CHECK(max_pixels >= 10000, "page synthesis: max_pixels must be at least 10000, got ", max_pixels);
}

namespace {

// ---- drawing

class Canvas {
 public:
  Canvas(int64_t width, int64_t height, uint8_t paper) : paper_(paper) {
    image_.width = width, image_.height = height;
    image_.pixels.assign((size_t)(width * height), paper);
  }
  GrayImage& image() { return image_; }
  int64_t width() const { return image_.width; }
  int64_t height() const { return image_.height; }
  uint8_t paper() const { return paper_; }

  void fill(const Rect& r, uint8_t v) {
    const int64_t x0 = clampx(r.x0), x1 = clampx(r.x1), y0 = clampy(r.y0), y1 = clampy(r.y1);
    for (int64_t y = y0; y < y1; ++y)
      std::fill(image_.pixels.begin() + y * image_.width + x0, image_.pixels.begin() + y * image_.width + x1, v);
  }
  // A scanner's halftone of a light shade over r: dots of `v` on a diagonal lattice with
  // `period` pixels between rows of dots.
  void halftone(const Rect& r, int64_t period, uint8_t v) {
    const int64_t x0 = clampx(r.x0), x1 = clampx(r.x1), y0 = clampy(r.y0), y1 = clampy(r.y1), half = period / 2;
    for (int64_t y = y0; y < y1; ++y) {
      const int64_t phase = y % period;
      if (phase != 0 && phase != half) continue;
      for (int64_t x = x0 + (phase == 0 ? 0 : half) - x0 % period; x < x1; x += period)
        if (x >= x0) image_.pixels[(size_t)(y * image_.width + x)] = v;
    }
  }
  // The outline of r, `t` pixels thick.
  void frame(const Rect& r, double t, uint8_t v) {
    fill({r.x0, r.y0, r.x1, r.y0 + t}, v);
    fill({r.x0, r.y1 - t, r.x1, r.y1}, v);
    fill({r.x0, r.y0, r.x0 + t, r.y1}, v);
    fill({r.x1 - t, r.y0, r.x1, r.y1}, v);
  }
  // A straight stroke from (x0, y0) to (x1, y1), `t` pixels thick (squares stamped along it).
  void stroke(double x0, double y0, double x1, double y1, double t, uint8_t v) {
    const double len = std::hypot(x1 - x0, y1 - y0);
    const int64_t steps = std::max<int64_t>(1, (int64_t)std::ceil(len / std::max(0.5, t / 2)));
    for (int64_t i = 0; i <= steps; ++i) {
      const double f = (double)i / (double)steps, x = x0 + (x1 - x0) * f, y = y0 + (y1 - y0) * f;
      fill({x - t / 2, y - t / 2, x + t / 2, y + t / 2}, v);
    }
  }
  // Glyphs rendered dark on white (0 ink, 255 paper), laid on the page in colour `ink` with
  // their darkness as coverage.
  void draw(const GrayImage& glyphs, int64_t x, int64_t y, uint8_t ink) {
    for (int64_t gy = 0; gy < glyphs.height; ++gy) {
      const int64_t py = y + gy;
      if (py < 0 || py >= image_.height) continue;
      for (int64_t gx = 0; gx < glyphs.width; ++gx) {
        const int64_t px = x + gx;
        if (px < 0 || px >= image_.width) continue;
        const double a = (255.0 - glyphs.at(gx, gy)) / 255.0;
        uint8_t& p = image_.pixels[(size_t)(py * image_.width + px)];
        p = (uint8_t)std::lround(p * (1 - a) + ink * a);
      }
    }
  }

 private:
  int64_t clampx(double v) const { return std::clamp<int64_t>((int64_t)std::lround(v), 0, image_.width); }
  int64_t clampy(double v) const { return std::clamp<int64_t>((int64_t)std::lround(v), 0, image_.height); }
  GrayImage image_;
  uint8_t paper_;
};

// A word rendered once, measured and then drawn.
struct Rendered {
  std::string text;
  GrayImage glyphs;
};

// Everything a layout needs: the page being drawn, its text, fonts and random stream.
class Composer {
 public:
  Composer(const TextSource& text, const std::vector<std::shared_ptr<Font>>& fonts, SampleRng& rng, double dpi,
           double body_pt, double word_space)
      : text_(text), fonts_(fonts), rng_(rng), dpi_(dpi), body_pt_(body_pt), space_em_(word_space) {
    body_ = pick_font();
    heading_ = rng_.uniform() < 0.5 ? body_ : pick_font();
  }

  SampleRng& rng() { return rng_; }
  double px(double pt) const { return pt / 72.0 * dpi_; }  // a font size in pixels
  double body_px() const { return px(body_pt_); }
  const Font& body() const { return *body_; }
  const Font& heading() const { return *heading_; }
  std::vector<SynthLine>& lines() { return lines_; }

  void start(Canvas* canvas, uint8_t ink) { canvas_ = canvas, ink_ = ink; }
  // Words set in small capitals (PageSynthOptions::p_small_caps): this share of those that
  // qualify, at this size, picked by a hash of the word and `salt`.
  void set_small_caps(double share, double size, uint64_t salt) {
    small_caps_share_ = share, small_caps_size_ = size, small_caps_salt_ = salt;
  }

  // The next word of running text (prose, structured items and mixed words, as training lines
  // are), one the font can draw.
  std::string next_word(const Font& font) {
    for (int tries = 0; tries < 1000; ++tries) {
      if (queue_.empty()) refill();
      std::string w = std::move(queue_.front());
      queue_.pop_front();
      if (!w.empty() && font.covers(w)) return w;
    }
    fail("page synthesis: the font ", font.path(), " covers none of the text's words");
  }
  // A short text (a table cell, a label, a price): one sample of 1 to max_chars characters.
  std::string short_text(const Font& font, int64_t max_chars) {
    for (int tries = 0; tries < 100; ++tries) {
      std::string s = text_.sample(rng_.next(), 1, std::max<int64_t>(1, max_chars));
      while (!s.empty() && s.back() == ' ') s.pop_back();
      if (!s.empty() && font.covers(s)) return s;
    }
    return next_word(font);
  }

  Rendered render(const Font& font, const std::string& word, double size_px) {
    TypeSetting setting;
    if (small_caps(word)) setting.small_caps = small_caps_size_;
    return {word, font.render(word, size_px, 0, 0, 255, setting)};
  }
  // Whether `word` is set in small capitals on this page: a capital, then lower case letters.
  bool small_caps(const std::string& word) const {
    if (!(small_caps_share_ > 0) || word.size() < 2 || !(word[0] >= 'A' && word[0] <= 'Z')) return false;
    if (std::none_of(word.begin() + 1, word.end(), [](char c) { return c >= 'a' && c <= 'z'; })) return false;
    uint64_t hash = 1469598103934665603ull ^ small_caps_salt_;  // FNV-1a
    for (char c : word) hash = (hash ^ (uint8_t)c) * 1099511628211ull;
    return (double)(hash >> 11) * 0x1.0p-53 < small_caps_share_;
  }

  // Draws words left to right from (x, y) with gaps `space` between them; the line's outline
  // spans the font's line height. Returns the line (and keeps it).
  SynthLine& draw_line(const std::vector<Rendered>& words, double x, double y, double space, double size_px,
                       bool heading = false) {
    SynthLine line;
    line.heading = heading;
    double h = 0;
    for (const Rendered& w : words) h = std::max(h, (double)w.glyphs.height);
    h = std::max(h, size_px);
    double at = x;
    for (size_t i = 0; i < words.size(); ++i) {
      const Rendered& w = words[i];
      canvas_->draw(w.glyphs, (int64_t)std::lround(at), (int64_t)std::lround(y), ink_);
      line.words.push_back({w.text, Quad::from_rect({at, y, at + (double)w.glyphs.width, y + h})});
      line.text += (i ? " " : "") + w.text;
      at += (double)w.glyphs.width + space;
    }
    const double right = words.empty() ? x : at - space;
    line.outline = Quad::from_rect({x, y, right, y + h});
    lines_.push_back(std::move(line));
    return lines_.back();
  }

  // Fills one line of running text up to `width` pixels: words while they fit (a word wider
  // than the whole line is skipped). justify: the gaps widened so the line reaches the width.
  // Returns the words drawn (none when even one does not fit).
  size_t text_line(const Font& font, double size_px, double x, double y, double width, bool justify,
                   const std::string& prefix = "", bool heading = false) {
    const double space = space_em_ * size_px;
    std::vector<Rendered> words;
    double used = 0;
    if (!prefix.empty() && font.covers(prefix)) {
      words.push_back(render(font, prefix, size_px));
      used = (double)words.back().glyphs.width;
    }
    for (int skipped = 0; skipped < 20;) {
      const std::string w = next_word(font);
      Rendered r = render(font, w, size_px);
      const double need = (words.empty() ? 0 : space) + (double)r.glyphs.width;
      if (used + need > width) {
        if (words.empty() && (double)r.glyphs.width > width) {
          ++skipped;
          continue;
        }
        queue_.push_front(w);  // it starts the next line
        break;
      }
      used += need;
      words.push_back(std::move(r));
    }
    if (words.empty()) return 0;
    double gap = space;
    if (justify && words.size() > 1) gap += (width - used) / (double)(words.size() - 1);
    draw_line(words, x, y, gap, size_px, heading);
    return words.size();
  }

  // A single piece of text (one or more words, drawn as one word-run) at (x, y): its width.
  double text_at(const Font& font, const std::string& text, double size_px, double x, double y, bool heading = false) {
    std::vector<Rendered> words;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find(' ', start);
      if (end == std::string::npos) end = text.size();
      if (end > start) words.push_back(render(font, text.substr(start, end - start), size_px));
      start = end + 1;
    }
    if (words.empty()) return 0;
    const SynthLine& l = draw_line(words, x, y, space_em_ * size_px, size_px, heading);
    return l.outline.box().width();
  }
  double measure(const Font& font, const std::string& text, double size_px) {
    double w = 0;
    size_t start = 0, n = 0;
    while (start < text.size()) {
      size_t end = text.find(' ', start);
      if (end == std::string::npos) end = text.size();
      if (end > start) w += (double)render(font, text.substr(start, end - start), size_px).glyphs.width, ++n;
      start = end + 1;
    }
    return w + (n > 1 ? (double)(n - 1) * space_em_ * size_px : 0);
  }

  Canvas& canvas() { return *canvas_; }
  uint8_t ink() const { return ink_; }

 private:
  std::shared_ptr<Font> pick_font() { return fonts_[(size_t)rng_.integer(0, (int64_t)fonts_.size() - 1)]; }
  void refill() {
    const std::string s = text_.sample(rng_.next(), 120, 400);
    size_t start = 0;
    while (start < s.size()) {
      size_t end = s.find(' ', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) queue_.push_back(s.substr(start, end - start));
      start = end + 1;
    }
    if (queue_.empty()) queue_.push_back("text");
  }

  const TextSource& text_;
  const std::vector<std::shared_ptr<Font>>& fonts_;
  SampleRng& rng_;
  double dpi_, body_pt_;
  double space_em_;  // the space between words, in ems
  double small_caps_share_ = 0, small_caps_size_ = 0;
  uint64_t small_caps_salt_ = 0;
  std::shared_ptr<Font> body_, heading_;
  std::deque<std::string> queue_;
  std::vector<SynthLine> lines_;
  Canvas* canvas_ = nullptr;
  uint8_t ink_ = 0;
};

// A picture that is not text (a photo or drawing): shaded blocks, circles and noise.
void draw_figure(Canvas& c, const Rect& r, SampleRng& rng) {
  c.fill(r, (uint8_t)rng.integer(150, 230));
  for (int k = 0, n = (int)rng.integer(3, 12); k < n; ++k) {
    const double w = rng.uniform(0.1, 0.5) * r.width(), h = rng.uniform(0.1, 0.5) * r.height();
    const double x = rng.uniform(r.x0, r.x1 - w), y = rng.uniform(r.y0, r.y1 - h);
    const uint8_t v = (uint8_t)rng.integer(20, 200);
    if (rng.uniform() < 0.5) {
      c.fill({x, y, x + w, y + h}, v);
    } else {  // an ellipse
      const double cx = x + w / 2, cy = y + h / 2;
      for (int64_t py = (int64_t)y; py < (int64_t)(y + h); ++py)
        for (int64_t px = (int64_t)x; px < (int64_t)(x + w); ++px) {
          const double dx = ((double)px - cx) / (w / 2), dy = ((double)py - cy) / (h / 2);
          if (dx * dx + dy * dy <= 1) c.fill({(double)px, (double)py, (double)px + 1, (double)py + 1}, v);
        }
    }
  }
}

// A chart in r, its words as text lines: a title, the value axis's tick labels (numbers, right
// aligned), the categories under the base axis (words, years, quarters), an axis title and,
// for several series, a legend. Axes, ticks, grid lines, bars, lines and legend swatches are
// ink without outlines: a detector must find the labels among them. Returns false (nothing
// drawn) when r is too small for it.
bool draw_chart(Composer& k, Canvas& c, const Rect& r) {
  SampleRng& rng = k.rng();
  const Font& f = k.body();
  const double s = rng.uniform(0.7, 1.0) * k.body_px();  // label size
  const double t = std::max(1.0, s / 12);
  if (r.width() < 14 * s || r.height() < 10 * s) return false;
  double top = r.y0;
  if (rng.uniform() < 0.7) {
    k.text_line(k.heading(), 1.15 * s, r.x0, top, rng.uniform(0.5, 1.0) * r.width(), false, "", true);
    top += 2 * s;
  }
  // The value axis: ticks at multiples of a round step, sometimes percentages or decimals.
  const int ticks = (int)rng.integer(3, 6);
  const double steps[] = {1, 2, 5, 10, 20, 25, 50, 100, 250, 500, 1000, 2500};
  const double step = steps[rng.integer(0, 11)];
  const int style = (int)rng.integer(0, 2);  // 0 plain, 1 percent, 2 one decimal
  auto tick_label = [&](int i) {
    char buf[32];
    if (style == 2) std::snprintf(buf, sizeof buf, "%.1f", i * step / 10);
    else std::snprintf(buf, sizeof buf, style == 1 ? "%g%%" : "%g", i * step);
    return std::string(buf);
  };
  double label_w = 0;
  for (int i = 0; i <= ticks; ++i) label_w = std::max(label_w, k.measure(f, tick_label(i), s));
  const double ax0 = r.x0 + label_w + 0.8 * s, ax1 = r.x1 - 0.5 * s;
  const double ay0 = top + 0.6 * s, ay1 = r.y1 - 3.4 * s;
  if (ax1 - ax0 < 6 * s || ay1 - ay0 < 5 * s) return false;
  const uint8_t ink = k.ink();
  const uint8_t grid = (uint8_t)std::clamp<int>((int)ink + (int)rng.integer(120, 190), 0, 235);
  const bool grid_lines = rng.uniform() < 0.5;
  for (int i = 0; i <= ticks; ++i) {
    const double y = ay1 - i * (ay1 - ay0) / ticks;
    if (grid_lines && i > 0) c.fill({ax0, y, ax1, y + t}, grid);
    c.fill({ax0 - 0.35 * s, y, ax0, y + t}, ink);
    const std::string label = tick_label(i);
    if (f.covers(label)) k.text_at(f, label, s, ax0 - 0.6 * s - k.measure(f, label, s), y - 0.55 * s);
  }
  c.fill({ax0 - t, ay0, ax0, ay1 + t}, ink);
  c.fill({ax0 - t, ay1, ax1, ay1 + t}, ink);
  // Categories, their labels centred under their slots (left out where one does not fit).
  const int n = (int)rng.integer(3, 8);
  const double slot = (ax1 - ax0) / n;
  const int naming = (int)rng.integer(0, 2);  // 0 words, 1 years, 2 quarters
  const int64_t year0 = rng.integer(1990, 2024);
  for (int i = 0; i < n; ++i) {
    std::string label = naming == 1   ? std::to_string(year0 + i)
                        : naming == 2 ? "Q" + std::to_string(i % 4 + 1)
                                      : k.short_text(f, std::max<int64_t>(2, (int64_t)(slot / (0.6 * s))));
    if (!f.covers(label)) continue;
    const double w = k.measure(f, label, s);
    if (w > 0.95 * slot) continue;
    k.text_at(f, label, s, ax0 + (i + 0.5) * slot - w / 2, ay1 + 0.5 * s);
  }
  // The series: bars side by side in each slot, or lines through the slots' centres.
  const int series = (int)rng.integer(1, 3);
  const bool bars = rng.uniform() < 0.6;
  std::vector<uint8_t> shade(series);
  for (int j = 0; j < series; ++j) shade[(size_t)j] = (uint8_t)std::clamp<int>((int)ink + 70 * j, 0, 200);
  for (int j = 0; j < series; ++j) {
    double px = 0, py = 0;
    for (int i = 0; i < n; ++i) {
      const double v = rng.uniform(0.08, 0.95) * (ay1 - ay0);
      if (bars) {
        const double bw = 0.7 * slot / series, bx = ax0 + i * slot + 0.15 * slot + j * bw;
        c.fill({bx, ay1 - v, bx + 0.9 * bw, ay1}, shade[(size_t)j]);
      } else {
        const double x = ax0 + (i + 0.5) * slot, y = ay1 - v;
        if (i > 0) c.stroke(px, py, x, y, 2 * t, shade[(size_t)j]);
        c.fill({x - 2 * t, y - 2 * t, x + 2 * t, y + 2 * t}, shade[(size_t)j]);
        px = x, py = y;
      }
    }
  }
  if (rng.uniform() < 0.7) {  // the base axis's title, centred under the categories
    const std::string title = k.short_text(f, 24);
    const double w = k.measure(f, title, s);
    if (w < ax1 - ax0) k.text_at(f, title, s, ax0 + (ax1 - ax0 - w) / 2, ay1 + 1.9 * s);
  }
  if (series > 1) {  // a legend in a framed box at the plot's top right: a swatch and a name a series
    std::vector<std::string> names;
    double widest = 0;
    for (int j = 0; j < series; ++j) {
      names.push_back(k.short_text(f, 12));
      widest = std::max(widest, k.measure(f, names.back(), s));
    }
    const Rect box{ax1 - widest - 2.6 * s, ay0, ax1, ay0 + (1.5 * series + 0.6) * s};
    if (box.x0 > ax0 + 0.4 * (ax1 - ax0)) {
      c.fill(box, c.paper());
      c.frame(box, t, ink);
      for (int j = 0; j < series; ++j) {
        const double ly = box.y0 + (0.4 + 1.5 * j) * s, lx = box.x0 + 0.5 * s;
        c.fill({lx, ly + 0.2 * s, lx + 0.8 * s, ly + 0.9 * s}, shade[(size_t)j]);
        k.text_at(f, names[(size_t)j], s, lx + 1.3 * s, ly);
      }
    }
  }
  return true;
}

// ---- layouts (sizes in pixels; `m` is the margin)

// A transcript or a pleading: every line of the page numbered in the left margin (a court
// reporter's 1 to 25, a pleading paper's 1 to 28), double spaced, the numbers apart from the
// text and often behind a rule, the text's lines in speakers' turns ("Q.", "A.", indented) or
// paragraphs; some numbered lines are blank. The numbers are lines of their own, as a page's
// detector must find them: one or two digits, alone.
void layout_numbered(Composer& k, Canvas& c) {
  SampleRng& rng = k.rng();
  const double W = (double)c.width(), H = (double)c.height();
  const double m = rng.uniform(0.06, 0.12) * W, body = k.body_px();
  const double lead = rng.uniform(1.6, 2.3) * body;
  double y = m;
  if (rng.uniform() < 0.5) {  // a running head
    k.text_line(k.body(), 0.9 * body, m, y, rng.uniform(0.3, 0.7) * (W - 2 * m), false);
    y += 2 * body;
  }
  const double numbers_right = m + rng.uniform(1.2, 2.5) * body;  // the numbers' right edge
  const double text_x = numbers_right + rng.uniform(1.0, 3.5) * body;
  const double width = W - m - text_x;
  const int count = std::min<int>((int)((H - m - y) / lead), rng.uniform() < 0.5 ? 25 : 28);
  if (count < 2 || width < 10 * body) return;
  const double rule_w = std::max(1.0, body / 12);
  if (rng.uniform() < 0.6) {  // a rule between the numbers and the text, sometimes doubled
    const double x = (numbers_right + text_x) / 2;
    c.fill({x, y - 0.3 * lead, x + rule_w, y + count * lead}, k.ink());
    if (rng.uniform() < 0.3) c.fill({x + 3 * rule_w, y - 0.3 * lead, x + 4 * rule_w, y + count * lead}, k.ink());
  }
  const double indent = rng.uniform(1.5, 5) * body;
  bool turns = rng.uniform() < 0.6;  // "Q." and "A." turns, or paragraphs
  int turn = rng.uniform() < 0.5 ? 0 : 1;
  for (int n = 1; n <= count; ++n, y += lead) {
    const std::string num = std::to_string(n);
    k.text_at(k.body(), num, body, numbers_right - k.measure(k.body(), num, body), y);
    const double u = rng.uniform();
    if (u < 0.08) continue;  // a blank numbered line
    if (turns && u < 0.4) {  // a new turn: its mark indented, the text after it
      const std::string mark = turn++ % 2 == 0 ? "Q." : "A.";
      k.text_line(k.body(), body, text_x + indent, y, width - indent, false, mark);
    } else {
      const double in = u < 0.5 ? indent : 0;
      const double room = width - in;  // a short last line of a paragraph now and then
      k.text_line(k.body(), body, text_x + in, y, rng.uniform() < 0.15 ? rng.uniform(0.2, 1.0) * room : room, false);
    }
  }
  if (rng.uniform() < 0.6) {  // the page number
    const std::string num = std::to_string(rng.integer(1, 480));
    k.text_at(k.body(), num, 0.9 * body, (W - k.measure(k.body(), num, 0.9 * body)) / 2, H - m * 0.6);
  }
}

void layout_article(Composer& k, Canvas& c, double p_numbered) {
  SampleRng& rng = k.rng();
  // Drawn only when asked for, so that a seed gives the pages it gave before.
  if (p_numbered > 0 && rng.uniform() < p_numbered) return layout_numbered(k, c);
  const double W = (double)c.width(), H = (double)c.height();
  const double m = rng.uniform(0.06, 0.12) * W;
  const double body = k.body_px(), lead = rng.uniform(1.15, 1.45) * body;
  double y = m;
  if (rng.uniform() < 0.5) {  // running head
    const double s = 0.8 * body;
    k.text_line(k.body(), s, m, y * 0.6, rng.uniform(0.3, 0.6) * (W - 2 * m), false);
    if (rng.uniform() < 0.5) c.fill({m, y * 0.6 + 1.3 * s, W - m, y * 0.6 + 1.3 * s + std::max(1.0, s / 12)}, k.ink());
  }
  if (rng.uniform() < 0.8) {  // title
    const double s = rng.uniform(1.5, 2.6) * body;
    for (int l = 0, n = (int)rng.integer(1, 2); l < n && y + 1.3 * s < H - m; ++l, y += 1.25 * s)
      k.text_line(k.heading(), s, m, y, W - 2 * m, false, "", true);
    y += 0.8 * body;
  }
  const int columns = rng.uniform() < 0.4 ? 1 : rng.uniform() < 0.67 ? 2 : 3;
  const double gutter = rng.uniform(0.025, 0.06) * W;
  const double cw = (W - 2 * m - gutter * (columns - 1)) / columns;
  const bool justify = rng.uniform() < 0.5, indent = rng.uniform() < 0.5;
  const double bottom = H - m;
  bool figure_drawn = false;
  for (int col = 0; col < columns; ++col) {
    const double x = m + col * (cw + gutter);
    double cy = y;
    while (cy + lead < bottom) {
      const double u = rng.uniform();
      if (!figure_drawn && u < 0.06 && cy + 0.2 * H < bottom) {  // a figure across the column
        const double fh = rng.uniform(0.1, 0.25) * H;
        draw_figure(c, {x, cy, x + cw, cy + fh}, rng);
        figure_drawn = true;
        cy += fh + lead;
        continue;
      }
      if (u < 0.14) {  // a subheading
        k.text_line(k.heading(), 1.2 * body, x, cy, rng.uniform(0.4, 1.0) * cw, false, "", true);
        cy += 1.5 * lead;
        continue;
      }
      const bool list = u < 0.26;
      const int n = (int)rng.integer(list ? 2 : 2, list ? 6 : 10);
      for (int l = 0; l < n && cy + lead < bottom; ++l, cy += lead) {
        if (list) {
          const std::string mark = rng.uniform() < 0.5 ? "-" : std::to_string(l + 1) + ".";
          const double hang = 1.6 * body;
          k.text_at(k.body(), mark, body, x + 0.5 * body, cy);
          k.text_line(k.body(), body, x + 0.5 * body + hang, cy, cw - 0.5 * body - hang, false);
        } else {
          const bool first = l == 0, last = l == n - 1;
          const double in = first && indent ? 1.5 * body : 0;
          const double width = last ? rng.uniform(0.2, 1.0) * (cw - in) : cw - in;
          k.text_line(k.body(), body, x + in, cy, width, justify && !last);
        }
      }
      cy += indent && !list ? 0 : rng.uniform(0.4, 1.0) * lead;
    }
  }
  if (rng.uniform() < 0.6) {  // page number
    const std::string num = std::to_string(rng.integer(1, 480));
    const double s = 0.9 * body, w = k.measure(k.body(), num, s);
    const double x = rng.uniform() < 0.5 ? (W - w) / 2 : W - m - w;
    k.text_at(k.body(), num, s, x, H - m * 0.6);
  }
}

// A number as tables print it: as many 1- and 2-digit values as long ones (real tables are
// full of counts like "0", "7", "12"), thousands grouped with commas in half of the long ones,
// some with decimals, a currency sign, a percent sign or a sign for negatives.
std::string table_number(SampleRng& rng) {
  static constexpr double kDigits[] = {0.22, 0.18, 0.18, 0.14, 0.12, 0.09, 0.07};  // 1 to 7 digits
  double pick = rng.uniform();
  int digits = 1;
  for (double p : kDigits) {
    if (pick < p) break;
    pick -= p, ++digits;
  }
  digits = std::min(digits, 7);
  const bool grouped = digits >= 4 && rng.uniform() < 0.5;
  std::string n;
  for (int i = 0; i < digits; ++i) {
    if (grouped && i > 0 && (digits - i) % 3 == 0) n.push_back(',');
    n.push_back((char)('0' + (i == 0 && digits > 1 ? rng.integer(1, 9) : rng.integer(0, 9))));
  }
  if (rng.uniform() < 0.2) {
    n.push_back('.');
    for (int64_t i = 0, places = rng.integer(1, 2); i < places; ++i) n.push_back((char)('0' + rng.integer(0, 9)));
  }
  const double mark = rng.uniform();
  if (mark < 0.08) n.insert(n.begin(), '$');
  else if (mark < 0.14) n.push_back('%');
  else if (mark < 0.18) n.insert(n.begin(), '('), n.push_back(')');
  else if (mark < 0.22) n.insert(n.begin(), '-');
  return n;
}

void layout_table(Composer& k, Canvas& c) {
  SampleRng& rng = k.rng();
  const double W = (double)c.width(), H = (double)c.height();
  const double m = rng.uniform(0.06, 0.1) * W, body = k.body_px();
  double y = m;
  k.text_line(k.heading(), 1.6 * body, m, y, W - 2 * m, false, "", true);
  y += 3 * body;
  const int cols = (int)rng.integer(2, 9);
  std::vector<double> share(cols);
  double total = 0;
  for (double& s : share) total += s = rng.uniform(0.6, 2.0);
  const double row_h = rng.uniform(1.6, 2.4) * body, pad = 0.4 * body;
  const bool rules = rng.uniform() < 0.5, vertical = rules && rng.uniform() < 0.6;
  const bool centred = rng.uniform() < 0.4;  // numbers centred in their cells, not right-aligned
  const bool shaded = rng.uniform() < 0.3;   // light bands behind every other row
  const uint8_t band = (uint8_t)std::max(0, (int)c.paper() - (int)rng.integer(25, 70));
  // Half of the shades are a scanner's halftone (dots of ink), as black-and-white scans print them.
  const int64_t dots = rng.uniform() < 0.5 ? rng.integer(2, 4) : 0;
  const double t = std::max(1.0, body / 14);
  const int rows = (int)std::min<double>(rng.integer(5, 30), (H - m - y) / row_h);
  // Some columns in smaller type (units, footnote-sized counts).
  std::vector<double> size(cols, body);
  for (double& s : size)
    if (rng.uniform() < 0.15) s = rng.uniform(0.7, 0.9) * body;
  double x = m;
  std::vector<double> xs = {m};
  for (double s : share) xs.push_back(x += s / total * (W - 2 * m));
  for (int r = 0; r < rows; ++r) {
    const double ry = y + r * row_h;
    if (shaded && r % 2 == 1) {
      if (dots) c.halftone({m, ry, W - m, ry + row_h}, dots, k.ink());
      else c.fill({m, ry, W - m, ry + row_h}, band);
    }
    const Font& f = r == 0 ? k.heading() : k.body();
    for (int col = 0; col < cols; ++col) {
      const double cw = xs[col + 1] - xs[col] - 2 * pad, s = r == 0 ? body : size[(size_t)col];
      if (rng.uniform() < 0.08) continue;  // an empty cell
      const bool number = col > 0 && rng.uniform() < 0.6 && r > 0;
      std::string text = number ? table_number(rng) : k.short_text(f, std::max<int64_t>(1, (int64_t)(cw / (0.55 * s))));
      if (!f.covers(text)) continue;
      double w = k.measure(f, text, s);
      while (w > cw && text.find(' ') != std::string::npos) {  // drop words until it fits
        text = text.substr(0, text.rfind(' '));
        w = k.measure(f, text, s);
      }
      if (w > cw || text.empty()) continue;
      const double tx = !number ? xs[col] + pad : centred ? (xs[col] + xs[col + 1] - w) / 2 : xs[col + 1] - pad - w;
      k.text_at(f, text, s, tx, ry + (row_h - s) / 2, r == 0);
    }
    if (rules || r == 1) c.fill({m, ry, W - m, ry + t}, k.ink());
  }
  if (rules) {
    c.fill({m, y + rows * row_h, W - m, y + rows * row_h + t}, k.ink());
    if (vertical)
      for (double vx : xs) c.fill({vx, y, vx + t, y + rows * row_h}, k.ink());
  }
}

void layout_form(Composer& k, Canvas& c) {
  SampleRng& rng = k.rng();
  const double W = (double)c.width(), H = (double)c.height();
  const double m = rng.uniform(0.06, 0.1) * W, body = k.body_px();
  double y = m;
  k.text_line(k.heading(), 1.5 * body, m, y, W - 2 * m, false, "", true);
  y += 3 * body;
  const double label_w = rng.uniform(0.2, 0.35) * (W - 2 * m);
  const double row_h = rng.uniform(2.2, 3.2) * body, t = std::max(1.0, body / 14);
  const bool boxes = rng.uniform() < 0.5;
  for (int r = 0, rows = (int)rng.integer(5, 18); r < rows && y + row_h < H - m; ++r, y += row_h) {
    if (rng.uniform() < 0.15) {  // check boxes with labels
      double x = m;
      for (int b = 0, n = (int)rng.integer(2, 4); b < n; ++b) {
        const double s = body;
        c.frame({x, y, x + s, y + s}, t, k.ink());
        if (rng.uniform() < 0.4) c.fill({x + 0.25 * s, y + 0.25 * s, x + 0.75 * s, y + 0.75 * s}, k.ink());
        const std::string label = k.short_text(k.body(), 12);
        const double w = k.measure(k.body(), label, body);
        if (x + 1.5 * s + w > W - m) break;
        k.text_at(k.body(), label, body, x + 1.5 * s, y);
        x += 1.5 * s + w + 2 * body;
      }
      continue;
    }
    std::string label = k.short_text(k.body(), 16);
    if (rng.uniform() < 0.7 && k.body().covers(":")) label += ":";
    if (k.measure(k.body(), label, body) > label_w - body) continue;
    k.text_at(k.body(), label, body, m, y);
    const Rect field{m + label_w, y - 0.4 * body, W - m, y + 1.4 * body};
    if (boxes) c.frame(field, t, k.ink());
    else c.fill({field.x0, field.y1 - t, field.x1, field.y1}, k.ink());
    const double fill = rng.uniform();
    if (fill < 0.2) {  // a short value: a count, a code, a tick
      static const char* const kMarks[] = {"X", "Y", "N", "x", "/"};
      const std::string v = rng.uniform() < 0.6 ? table_number(rng) : kMarks[rng.integer(0, 4)];
      if (k.body().covers(v)) k.text_at(k.body(), v, body, field.x0 + 0.5 * body, y);
    } else if (fill < 0.85) {
      k.text_line(k.body(), body, field.x0 + 0.5 * body, y, field.width() - body, false);
    }
  }
}

void layout_receipt(Composer& k, Canvas& c) {
  SampleRng& rng = k.rng();
  const double W = (double)c.width(), H = (double)c.height();
  const double m = 0.06 * W, body = k.body_px(), lead = 1.3 * body;
  double y = m;
  for (int l = 0, n = (int)rng.integer(1, 3); l < n; ++l, y += lead) {  // a centred header
    const std::string s = k.short_text(k.heading(), 20);
    const double w = k.measure(k.heading(), s, body);
    if (w < W - 2 * m) k.text_at(k.heading(), s, body, (W - w) / 2, y, l == 0);
  }
  y += 0.5 * lead;
  auto separator = [&] {
    c.fill({m, y + 0.4 * lead, W - m, y + 0.4 * lead + std::max(1.0, body / 14)}, k.ink());
    y += lead;
  };
  separator();
  while (y + 3 * lead < H - m) {
    const std::string price = std::to_string(rng.integer(0, 199)) + "." + std::to_string(rng.integer(10, 99));
    const double pw = k.measure(k.body(), price, body);
    std::string item = k.short_text(k.body(), 18);
    while (k.measure(k.body(), item, body) > W - 2 * m - pw - body && item.find(' ') != std::string::npos)
      item = item.substr(0, item.rfind(' '));
    if (k.measure(k.body(), item, body) <= W - 2 * m - pw - body) k.text_at(k.body(), item, body, m, y);
    k.text_at(k.body(), price, body, W - m - pw, y);
    y += lead;
  }
  separator();
  const std::string total = std::to_string(rng.integer(10, 999)) + "." + std::to_string(rng.integer(10, 99));
  if (k.heading().covers("TOTAL")) k.text_at(k.heading(), "TOTAL", body, m, y, true);
  k.text_at(k.heading(), total, body, W - m - k.measure(k.heading(), total, body), y, true);
}

void layout_slide(Composer& k, Canvas& c, double title_px, double bullet_px) {
  SampleRng& rng = k.rng();
  const double W = (double)c.width(), H = (double)c.height();
  const double m = rng.uniform(0.05, 0.08) * W;
  double y = m;
  for (int l = 0, n = (int)rng.integer(1, 2); l < n; ++l, y += 1.2 * title_px)
    k.text_line(k.heading(), title_px, m, y, W - 2 * m, false, "", true);
  y += 0.6 * title_px;
  const double lead = rng.uniform(1.4, 1.8) * bullet_px;
  while (y + lead < H - m) {
    const bool bullet = rng.uniform() < 0.8;
    const double indent = bullet ? 1.5 * bullet_px : 0;
    if (bullet) c.fill({m, y + 0.35 * bullet_px, m + 0.4 * bullet_px, y + 0.75 * bullet_px}, k.ink());
    k.text_line(k.body(), bullet_px, m + indent, y, rng.uniform(0.4, 1.0) * (W - 2 * m - indent), false);
    y += lead;
  }
}

// A report page of charts: a title, then one to three charts, each with a caption of running
// text under it, and sometimes a paragraph.
void layout_chart(Composer& k, Canvas& c) {
  SampleRng& rng = k.rng();
  const double W = (double)c.width(), H = (double)c.height();
  const double m = rng.uniform(0.06, 0.1) * W, body = k.body_px(), lead = 1.3 * body;
  double y = m;
  if (rng.uniform() < 0.8) {
    k.text_line(k.heading(), 1.8 * body, m, y, W - 2 * m, false, "", true);
    y += 3 * body;
  }
  const int charts = (int)rng.integer(1, 3);
  const bool side_by_side = charts == 2 && rng.uniform() < 0.4;
  const double ch = side_by_side ? rng.uniform(0.3, 0.45) * H : (H - m - y) / charts - 3.5 * lead;
  for (int i = 0; i < charts && y + ch < H - m; ++i) {
    const double cw = side_by_side ? (W - 2 * m - 2 * body) / 2 : rng.uniform(0.6, 1.0) * (W - 2 * m);
    const double x = side_by_side ? m + i * (cw + 2 * body) : m;
    draw_chart(k, c, {x, y, x + cw, y + ch});
    if (side_by_side && i == 0) continue;
    y += ch + 0.6 * lead;
    for (int l = 0, n = (int)rng.integer(1, 3); l < n && y + lead < H - m; ++l, y += lead)  // the caption
      k.text_line(k.body(), 0.9 * body, m, y, (l + 1 == n ? rng.uniform(0.3, 1.0) : 1.0) * (W - 2 * m), false);
    y += lead;
  }
  while (y + lead < H - m && rng.uniform() < 0.85) {  // a paragraph to the foot
    k.text_line(k.body(), body, m, y, W - 2 * m, false);
    y += lead;
  }
}

// Uneven light, as a photo of a page has it: a vignette (darker towards the corners) and a
// gradient across the sheet in a random direction, together darkening by up to `amount` of
// each pixel's value.
void uneven_light(GrayImage& img, double amount, SampleRng& rng) {
  const double W = (double)img.width, H = (double)img.height;
  const double vignette = rng.uniform(0, amount), slope = amount - vignette;
  const double angle = rng.uniform(0, 2 * M_PI), gx = std::cos(angle), gy = std::sin(angle);
  const double cx = rng.uniform(0.3, 0.7) * W, cy = rng.uniform(0.3, 0.7) * H, R2 = (W * W + H * H) / 4;
  for (int64_t y = 0; y < img.height; ++y)
    for (int64_t x = 0; x < img.width; ++x) {
      const double dx = (double)x - cx, dy = (double)y - cy;
      const double g = 0.5 + 0.5 * (gx * ((double)x / W - 0.5) + gy * ((double)y / H - 0.5)) * 2;  // 0..1 across
      const double dark = vignette * std::min(1.0, (dx * dx + dy * dy) / R2) + slope * std::clamp(g, 0.0, 1.0);
      uint8_t& p = img.pixels[(size_t)(y * img.width + x)];
      p = (uint8_t)std::lround((double)p * (1 - dark));
    }
}

// A box blur of radius r in both directions (running sums), in place.
void box_blur(std::vector<float>& v, int64_t w, int64_t h, int64_t r) {
  std::vector<float> line;
  auto pass = [&](int64_t n, int64_t count, int64_t stride, int64_t step) {
    line.resize((size_t)n);
    for (int64_t k = 0; k < count; ++k) {
      float* base = v.data() + k * stride;
      double sum = 0;
      for (int64_t i = 0; i < std::min(n, r + 1); ++i) sum += base[i * step];
      for (int64_t i = 0; i < n; ++i) {
        const int64_t lo = std::max<int64_t>(0, i - r), hi = std::min(n - 1, i + r);
        line[(size_t)i] = (float)(sum / (double)(hi - lo + 1));
        if (i + r + 1 < n) sum += base[(i + r + 1) * step];
        if (i - r >= 0) sum -= base[(i - r) * step];
      }
      for (int64_t i = 0; i < n; ++i) base[i * step] = line[(size_t)i];
    }
  };
  pass(w, h, w, 1);  // rows
  pass(h, w, 1, w);  // columns
}

// Print from the other side of the sheet showing through: the page's own ink mirrored left to
// right and shifted (another page's lines, at other places), blurred by the paper and faded to
// at most `levels` gray levels, darkening what lies on top of it.
void bleed_through(GrayImage& img, double levels, double blur_px, SampleRng& rng) {
  const int64_t W = img.width, H = img.height, shift = rng.integer(-H / 20, H / 20);
  std::vector<float> back((size_t)(W * H), 0.f);
  for (int64_t y = 0; y < H; ++y) {
    const int64_t sy = y + shift;
    if (sy < 0 || sy >= H) continue;
    for (int64_t x = 0; x < W; ++x) back[(size_t)(y * W + x)] = (float)(255 - img.at(W - 1 - x, sy)) / 255.f;
  }
  box_blur(back, W, H, std::max<int64_t>(1, (int64_t)std::lround(blur_px)));
  for (size_t i = 0; i < img.pixels.size(); ++i) {
    const double p = img.pixels[i];
    img.pixels[i] = (uint8_t)std::lround(std::max(0.0, p - levels * back[i] * (p / 255.0)));
  }
}

// The page turned by deg degrees (clockwise positive) about its centre, on a canvas of the same
// size (bilinear; what comes in from outside is `paper`), and the point map that goes with it.
GrayImage turn(const GrayImage& in, double deg, uint8_t paper) {
  GrayImage out;
  out.width = in.width, out.height = in.height;
  out.pixels.assign(in.pixels.size(), paper);
  const double a = deg * M_PI / 180, ca = std::cos(a), sa = std::sin(a);
  const double cx = (double)in.width / 2, cy = (double)in.height / 2;
  for (int64_t y = 0; y < out.height; ++y)
    for (int64_t x = 0; x < out.width; ++x) {
      // the source of this pixel's centre: turned back by -deg
      const double dx = (double)x + 0.5 - cx, dy = (double)y + 0.5 - cy;
      const double sx = ca * dx + sa * dy + cx - 0.5, sy = -sa * dx + ca * dy + cy - 0.5;
      const int64_t x0 = (int64_t)std::floor(sx), y0 = (int64_t)std::floor(sy);
      const double fx = sx - (double)x0, fy = sy - (double)y0;
      auto at = [&](int64_t px, int64_t py) {
        return px < 0 || py < 0 || px >= in.width || py >= in.height ? (double)paper : (double)in.at(px, py);
      };
      const double v = (1 - fy) * ((1 - fx) * at(x0, y0) + fx * at(x0 + 1, y0)) +
                       fy * ((1 - fx) * at(x0, y0 + 1) + fx * at(x0 + 1, y0 + 1));
      out.pixels[(size_t)(y * out.width + x)] = (uint8_t)std::lround(std::clamp(v, 0.0, 255.0));
    }
  return out;
}

Point turn_point(const Point& p, double deg, double cx, double cy) {
  const double a = deg * M_PI / 180, ca = std::cos(a), sa = std::sin(a);
  const double dx = p.x - cx, dy = p.y - cy;
  return {ca * dx - sa * dy + cx, sa * dx + ca * dy + cy};
}

}  // namespace

SynthPage render_page(const TextSource& text, const std::vector<std::shared_ptr<Font>>& fonts, uint64_t seed,
                      const PageSynthOptions& o) {
  o.validate();
  OCRT_CHECK(!fonts.empty(), "page synthesis: no fonts");
  SampleRng rng(seed);
  SynthPage page;
  double total = 0;
  for (double w : o.layout_weights) total += w;
  double pick = rng.uniform() * total;
  int layout = 0;
  while (layout + 1 < kPageLayouts && pick >= o.layout_weights[(size_t)layout])
    pick -= o.layout_weights[(size_t)layout++];
  page.layout = (PageLayout)layout;

  // The page's size in inches and its resolution.
  double win = 8.5, hin = 11;
  if (page.layout == PageLayout::receipt) win = rng.uniform(58, 80) / 25.4, hin = rng.uniform(4, 10);
  if (page.layout == PageLayout::slide) {
    win = rng.uniform() < 0.5 ? 10 : 13.333, hin = 7.5;
  } else if (page.layout != PageLayout::receipt && rng.uniform() < 0.4) {
    win = 8.27, hin = 11.69;  // A4
  }
  double dpi = rng.uniform(o.min_dpi, o.max_dpi);
  if (page.layout == PageLayout::slide) dpi = std::min(dpi, rng.uniform(72, 150));  // screenshots and exports
  dpi = std::min(dpi, std::sqrt((double)o.max_pixels / (win * hin)));
  page.dpi = dpi;
  const int64_t W = std::max<int64_t>(16, (int64_t)std::lround(win * dpi));
  const int64_t H = std::max<int64_t>(16, (int64_t)std::lround(hin * dpi));

  // Paper and ink: dark on light, or for slides sometimes light on dark.
  uint8_t paper = (uint8_t)rng.integer(215, 255), ink = (uint8_t)rng.integer(0, 60);
  if (page.layout == PageLayout::slide && rng.uniform() < 0.5)
    paper = (uint8_t)rng.integer(10, 90), ink = (uint8_t)rng.integer(200, 255);
  Canvas canvas(W, H, paper);
  const double body_pt = rng.uniform(o.min_pt, o.max_pt);
  const double word_space = draw_in(rng, o.min_word_space, o.max_word_space);
  Composer k(text, fonts, rng, dpi, page.layout == PageLayout::receipt ? std::min(body_pt, 10.0) : body_pt,
             word_space);
  k.start(&canvas, ink);
  if (o.p_small_caps > 0) {
    const double size = rng.uniform(0.66, 0.8);
    k.set_small_caps(o.p_small_caps, size, rng.next());
  }
  switch (page.layout) {
    case PageLayout::article: layout_article(k, canvas, o.p_numbered); break;
    case PageLayout::table: layout_table(k, canvas); break;
    case PageLayout::form: layout_form(k, canvas); break;
    case PageLayout::receipt: layout_receipt(k, canvas); break;
    case PageLayout::slide: layout_slide(k, canvas, k.px(rng.uniform(28, 44)), k.px(rng.uniform(18, 28))); break;
    case PageLayout::chart: layout_chart(k, canvas); break;
  }
  page.lines = std::move(k.lines());
  const double text_px = k.body_px();
  page.image = std::move(canvas.image());

  page.skew_deg = o.max_skew_deg > 0 ? rng.uniform(-o.max_skew_deg, o.max_skew_deg) : 0;
  if (page.skew_deg != 0) {
    page.image = turn(page.image, page.skew_deg, paper);
    const double cx = (double)W / 2, cy = (double)H / 2;
    for (SynthLine& l : page.lines) {
      for (Point& p : l.outline.corners) p = turn_point(p, page.skew_deg, cx, cy);
      for (SynthWord& w : l.words)
        for (Point& p : w.outline.corners) p = turn_point(p, page.skew_deg, cx, cy);
    }
  }
  // Lines that are not wholly on the page (drawn past an edge, or turned off it) are not text a
  // detector can be asked for: they go, their ink stays.
  std::erase_if(page.lines, [&](const SynthLine& l) {
    const Rect b = l.outline.box();
    return l.words.empty() || b.x0 < 0 || b.y0 < 0 || b.x1 > (double)W || b.y1 > (double)H;
  });
  // The scan's magnitudes (blur, ink spread) scale with the body text's height, as on a line.
  // Then the other side's print and a camera's light (drawn after the scan so that a page of
  // an earlier version keeps its text and scan).
  if (rng.uniform() < o.p_scan) page.image = degrade(page.image, o.scan, rng, text_px);
  if (rng.uniform() < o.p_bleed) bleed_through(page.image, rng.uniform(0.3, 1.0) * o.max_bleed, 0.15 * text_px, rng);
  if (rng.uniform() < o.p_light) uneven_light(page.image, rng.uniform(0.3, 1.0) * o.max_light, rng);
  return page;
}

namespace {

Json points_json(const Quad& q) {
  Json pts = Json::array();
  for (const Point& p : q.corners) {
    Json pt = Json::array();
    pt.push_back(std::round(p.x * 10) / 10);
    pt.push_back(std::round(p.y * 10) / 10);
    pts.push_back(pt);
  }
  return pts;
}

}  // namespace

std::string page_truth_json(const SynthPage& page) {
  Json lines = Json::array();
  for (const SynthLine& l : page.lines) {
    Json words = Json::array();
    for (const SynthWord& w : l.words) {
      Json jw = Json::object();
      jw.set("text", w.text);
      jw.set("points", points_json(w.outline));
      words.push_back(jw);
    }
    Json jl = Json::object();
    jl.set("text", l.text);
    jl.set("points", points_json(l.outline));
    jl.set("heading", l.heading);
    jl.set("words", words);
    lines.push_back(jl);
  }
  Json j = Json::object();
  j.set("width", page.image.width);
  j.set("height", page.image.height);
  j.set("dpi", std::round(page.dpi * 10) / 10);
  j.set("layout", page_layout_name(page.layout));
  j.set("skew", std::round(page.skew_deg * 1000) / 1000);
  j.set("lines", lines);
  return j.dump() + "\n";
}

}  // namespace ocrt::train
