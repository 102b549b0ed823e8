// The training report (report.h): reading a run folder defensively, SVG charts, the page.
#include "train/report.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "runtime/text.h"
#include "train/checkpoint.h"

namespace fs = std::filesystem;

namespace ocrt::train {

namespace {

std::string esc(const std::string& s) { return html_escape(s); }

const char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    for (int k = 3; k >= 0; --k) out += kBase64[(v >> (6 * k)) & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    const uint32_t v = (uint32_t)p[i] << 16 | (rest == 2 ? (uint32_t)p[i + 1] << 8 : 0);
    out += kBase64[(v >> 18) & 63];
    out += kBase64[(v >> 12) & 63];
    out += rest == 2 ? kBase64[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string printf_string(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// A number for a person: up to `digits` significant digits, no trailing zeros, exponent form
// ("2e-4") only for the very small and very large.
std::string fmt_num(double v, int digits = 4) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  const double a = std::fabs(v);
  std::string s;
  if (a < 1e-3 || a >= 1e7) {
    s = printf_string(("%." + std::to_string(std::max(0, digits - 1)) + "e").c_str(), v);
    const size_t e = s.find('e');
    std::string mant = s.substr(0, e), ex = s.substr(e + 1);
    if (mant.find('.') != std::string::npos) {
      while (mant.back() == '0') mant.pop_back();
      if (mant.back() == '.') mant.pop_back();
    }
    const bool neg = ex[0] == '-';
    ex = ex.substr(1);
    while (ex.size() > 1 && ex[0] == '0') ex.erase(0, 1);
    return mant + "e" + (neg ? "-" : "") + ex;
  }
  const int decimals = std::clamp(digits - 1 - (int)std::floor(std::log10(a)), 0, 12);
  s = printf_string(("%." + std::to_string(decimals) + "f").c_str(), v);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string fmt_percent(double v) { return std::isfinite(v) ? fmt_num(100 * v, 3) + "%" : "n/a"; }

// Seconds as "42 s", "12.5 min", "3.2 h".
std::string fmt_duration(double s) {
  if (!std::isfinite(s)) return "n/a";
  if (s < 120) return fmt_num(s, 3) + " s";
  if (s < 7200) return fmt_num(s / 60, 3) + " min";
  return fmt_num(s / 3600, 3) + " h";
}

// A whole number with thousands separated: 2,203,744.
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

// A JSON value as one line of text: strings bare, lists of strings joined by commas.
std::string json_text(const Json& v) {
  if (v.is_string()) return v.as_string();
  if (v.is_number() && v.is_int() && std::fabs(v.as_number()) >= 1e4) return with_commas(v.as_int());
  if (v.is_number()) return fmt_num(v.as_number(), 6);
  if (v.is_array()) {
    bool strings = true;
    for (const Json& e : v.as_array()) strings = strings && e.is_string();
    if (strings) {
      std::string s;
      for (const Json& e : v.as_array()) s += (s.empty() ? "" : ", ") + e.as_string();
      return s;
    }
  }
  return v.dump();
}

// ---- files

// Writes `text` to `path` through a temporary file and a rename: a reader (a browser refreshing
// the report during a run) sees the old file or the new one, never half of one.
void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    OCRT_CHECK(out.good(), "cannot write ", tmp, ": ", std::strerror(errno));
    out << text;
    out.close();
    if (!out.good()) {
      std::remove(tmp.c_str());
      fail("cannot write ", tmp, " (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail("cannot rename ", tmp, " to ", path, ": ", ec.message());
  }
}

// The first `limit` bytes of a file at most; nullopt when it cannot be opened. `truncated` says
// whether there was more.
std::optional<std::string> read_file(const fs::path& path, size_t limit, bool* truncated = nullptr) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string s(limit, '\0');
  in.read(s.data(), (std::streamsize)limit);
  s.resize((size_t)in.gcount());
  if (truncated) *truncated = in.peek() != std::char_traits<char>::eof();
  return s;
}

// The settings a checkpoint records (its metadata's state.settings), read from the header alone:
// a run folder written before the "start" event existed still shows its settings.
Json checkpoint_settings(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char len[8];
  if (!in.read(reinterpret_cast<char*>(len), 8)) return Json();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  if (n == 0 || n > (uint64_t)100 << 20) return Json();  // the limit the safetensors reader has
  std::string header((size_t)n, '\0');
  if (!in.read(header.data(), (std::streamsize)n)) return Json();
  try {
    const Json h = parse_json(header);
    const Json* meta = h.is_object() ? h.find("__metadata__") : nullptr;
    const Json* state = meta && meta->is_object() ? meta->find("state") : nullptr;
    if (!state || !state->is_string()) return Json();
    const Json s = parse_json(state->as_string());
    const Json* settings = s.is_object() ? s.find("settings") : nullptr;
    return settings && settings->is_object() ? *settings : Json();
  } catch (const Error&) {
    return Json();
  }
}

// ---- metrics.jsonl

// Python's json module writes NaN, Infinity and -Infinity, which JSON does not have; a line
// holding them is read with those tokens (outside strings) taken as null.
std::string nonfinite_tokens_to_null(const std::string& line) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < line.size()) out += line[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    const std::string_view rest(line.data() + i, line.size() - i);
    size_t matched = 0;
    for (std::string_view token : {"-Infinity", "Infinity", "NaN"})
      if (matched == 0 && rest.substr(0, token.size()) == token) matched = token.size();
    if (matched > 0) {
      out += "null";
      i += matched - 1;
    } else {
      out += c;
    }
  }
  return out;
}

// A number field: NaN when absent, null, not a number.
double number_field(const Json& j, const char* key) {
  const Json* v = j.find(key);
  return v && v->is_number() ? v->as_number() : NAN;
}

// Keeps one point per step (the last logged: after a resume whose metrics were not cut back,
// the step is logged again) and orders them by step.
template <class P>
void one_per_step(std::vector<P>& points) {
  std::stable_sort(points.begin(), points.end(), [](const P& a, const P& b) { return a.step < b.step; });
  std::vector<P> kept;
  for (const P& p : points) {
    if (!kept.empty() && kept.back().step == p.step) kept.back() = p;
    else kept.push_back(p);
  }
  points.swap(kept);
}

constexpr size_t kMaxMetricsLine = size_t(1) << 20;  // a line longer than this is not an event
constexpr int64_t kMaxWorstShown = 100;
constexpr int64_t kMaxWorstPixels = int64_t(1) << 20;  // a line image: 32 x 32768 at most

void read_metrics(RunRecord& run) {
  const fs::path path = fs::path(run.dir) / "metrics.jsonl";
  std::ifstream in(path);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    run.notes.push_back("metrics.jsonl is missing: nothing to chart.");
    return;
  }
  if (!in) {
    run.notes.push_back("metrics.jsonl cannot be read: " + std::string(std::strerror(errno)) + ".");
    return;
  }
  int64_t bad = 0, patched = 0, events = 0, bad_line_no = 0;
  // The clock of the events restarts with each process (each "start"); the parts are joined
  // end to end, so the time axis is the run's training time, without the pauses between them.
  double offset = 0, last_joined = NAN;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j;
    bool ok = line.size() <= kMaxMetricsLine;
    if (ok) {
      try {
        j = parse_json(line);
      } catch (const Error&) {
        try {
          j = parse_json(nonfinite_tokens_to_null(line));
          ++patched;
        } catch (const Error&) {
          ok = false;
        }
      }
    }
    const Json* kind = ok && j.is_object() ? j.find("event") : nullptr;
    const Json* step_v = kind ? j.find("step") : nullptr;
    const bool is_summary = kind && kind->is_string() && kind->as_string() == "summary";
    // Every event but the summary names its step, a whole number >= 0.
    ok = kind && kind->is_string() &&
         (is_summary || (step_v && step_v->is_number() && step_v->is_int() && step_v->as_number() >= 0));
    if (!ok) {
      if (bad++ == 0) bad_line_no = line_no;
      continue;
    }
    ++events;
    const std::string& event = kind->as_string();
    const int64_t step = is_summary ? -1 : step_v->as_int();
    double t = number_field(j, "time");
    if (!(t >= 0) || !std::isfinite(t)) t = NAN;
    if (event == "start") offset = std::isfinite(last_joined) ? last_joined : 0;
    double joined = NAN;
    if (std::isfinite(t)) {
      joined = offset + t;
      last_joined = joined;
      run.has_time = true;
    }
    if (event == "train") {
      TrainPoint p;
      p.step = step;
      p.time = joined;
      p.loss = number_field(j, "loss");
      p.lr = number_field(j, "lr");
      p.samples_per_sec = number_field(j, "samples_per_sec");
      const double skipped = number_field(j, "skipped_steps");
      p.skipped_steps = std::isfinite(skipped) && skipped >= 0 && skipped < 1e15 ? (int64_t)skipped : 0;
      run.train.push_back(p);
    } else if (event == "eval") {
      EvalPoint p;
      p.step = step;
      p.time = joined;
      p.cer = number_field(j, "cer");
      p.line_accuracy = number_field(j, "line_accuracy");
      const double lines = number_field(j, "lines");
      p.lines = std::isfinite(lines) && lines >= 0 && lines < 1e15 ? (int64_t)lines : 0;
      run.evals.push_back(p);
    } else if (event == "checkpoint") {
      const Json* why = j.find("why");
      run.checkpoints.emplace_back(step, why && why->is_string() ? why->as_string() : "");
    } else if (event == "start") {
      RunStart s;
      s.step = step;
      s.time = joined;
      const Json* from = j.find("from");
      if (from && from->is_string()) s.from = from->as_string();
      s.event = j;
      run.starts.push_back(s);
      run.summary_is_last = false;
    } else if (event == "summary") {
      run.summary = j;
      run.summary_is_last = true;
    }
  }
  one_per_step(run.train);
  one_per_step(run.evals);
  if (events == 0) run.notes.push_back("metrics.jsonl holds no events yet.");
  if (bad > 0)
    run.notes.push_back("metrics.jsonl: " + std::to_string(bad) + " line" + (bad == 1 ? " was" : "s were") +
                        " not an ocrt event and " + (bad == 1 ? "was" : "were") + " skipped (the first: line " +
                        std::to_string(bad_line_no) + ").");
  if (patched > 0)
    run.notes.push_back("metrics.jsonl: " + std::to_string(patched) + " line" + (patched == 1 ? "" : "s") +
                        " held NaN or Infinity, which JSON does not have; read as missing values.");
}

// A file name the worst/ index may point to: a plain name in that folder, nothing else.
bool safe_image_name(const std::string& name) {
  if (name.empty() || name.size() > 100 || name[0] == '.') return false;
  for (char c : name)
    if (!(std::isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.')) return false;
  return name.size() > 4 && name.substr(name.size() - 4) == ".png";
}

void read_worst(RunRecord& run) {
  const fs::path dir = fs::path(run.dir) / "worst";
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  bool truncated = false;
  auto text = read_file(dir / "index.json", 4 << 20, &truncated);
  if (!text) {
    run.notes.push_back("worst/ holds no index.json: its images are not shown.");
    return;
  }
  Json index;
  try {
    OCRT_CHECK(!truncated, "larger than 4 MiB");
    index = parse_json(*text);
    OCRT_CHECK(index.is_object(), "not a JSON object");
  } catch (const Error& e) {
    run.notes.push_back(std::string("worst/index.json cannot be read (") + e.what() + "): no worst lines shown.");
    return;
  }
  const double step = number_field(index, "step"), evaluated = number_field(index, "evaluated");
  run.worst_step = std::isfinite(step) && step >= 0 && step < 1e15 ? (int64_t)step : -1;
  run.worst_evaluated = std::isfinite(evaluated) && evaluated >= 0 && evaluated < 1e15 ? (int64_t)evaluated : 0;
  const Json* lines = index.find("lines");
  if (!lines || !lines->is_array()) {
    run.notes.push_back("worst/index.json has no list of lines.");
    return;
  }
  int64_t missing = 0, odd = 0;
  for (const Json& l : lines->as_array()) {
    if ((int64_t)run.worst.size() >= kMaxWorstShown) {
      run.notes.push_back("worst/index.json lists " + std::to_string(lines->size()) + " lines; the first " +
                          std::to_string(kMaxWorstShown) + " are shown.");
      break;
    }
    if (!l.is_object()) {
      ++odd;
      continue;
    }
    auto str = [&l](const char* key) {
      const Json* v = l.find(key);
      return v && v->is_string() ? v->as_string() : std::string();
    };
    ReportLine r;
    r.image_name = str("image");
    r.id = str("id");
    r.truth = str("truth");
    r.reading = str("reading");
    const double d = number_field(l, "distance");
    r.distance = std::isfinite(d) && d >= 0 && d < 1e15 ? (int64_t)d : 0;
    r.cer = number_field(l, "cer");
    if (safe_image_name(r.image_name)) {
      try {
        const GrayImage g = load_gray_image((dir / r.image_name).string(), kMaxWorstPixels);
        r.png = encode_gray_png(g);
        r.width = g.width;
        r.height = g.height;
      } catch (const Error&) {
        ++missing;
      }
    } else {
      ++missing;
    }
    run.worst.push_back(std::move(r));
  }
  if (missing > 0)
    run.notes.push_back("worst/: " + std::to_string(missing) + " image" + (missing == 1 ? " is" : "s are") +
                        " missing, unreadable or not a plain file name there; shown without " +
                        (missing == 1 ? "it." : "them."));
  if (odd > 0) run.notes.push_back("worst/index.json: " + std::to_string(odd) + " entries are not objects; skipped.");
}

// ---- charts

struct Series {
  std::string name;
  int color = 0;  // CSS class s<color>
  std::vector<std::pair<double, double>> points;  // (x, y), sorted by x
  bool markers = false;  // a dot on every point (few points: evaluations)
};

struct ChartSpec {
  std::string id, title, x_label, y_label;
  std::vector<Series> series;
  bool log_y_if_decades = false;  // log scale when the values are positive and span a factor of 10
  bool y_from_zero = false;
  bool x_from_zero = true;  // steps and times start at 0 (a run's first logged step is not its start)
  double x_to = NAN;         // the axis reaches at least this far (the charts of a column share it)
  std::vector<double> marks;  // x of vertical markers (where the run was resumed)
  std::string empty;          // what to say when there is nothing to draw
};

constexpr double kW = 520, kH = 300;
constexpr double kLeft = 66, kRight = 16, kTop = 36, kBottom = 50;
constexpr double kX0 = kLeft, kX1 = kW - kRight, kY0 = kTop, kY1 = kH - kBottom;
constexpr double kClamp = 1e300;  // so that hi - lo of any two values is finite
constexpr size_t kMaxPolylinePoints = 1600;
constexpr size_t kMaxMarkers = 400;

const char* const kSeriesColor[] = {"#1d64c8", "#d2561b"};  // light scheme; the page's CSS sets both

std::string coord(double v) { return printf_string("%.1f", v); }

// 1, 2 or 5 times a power of ten, near span / target.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / p;
  return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

// Tick labels of a linear axis with ticks `step` apart, all in one form: as many decimals as
// the step needs, thousands as "k" and millions as "M" when the step is a multiple of them, the
// exponent form ("2e-4") when the step is that small or the values that large.
std::vector<std::string> tick_labels(const std::vector<double>& ticks, double step) {
  double top = 0;
  for (double t : ticks) top = std::max(top, std::fabs(t));
  std::vector<std::string> out;
  for (double t : ticks) {
    if (std::fabs(t) < step * 1e-9) {
      out.push_back("0");
    } else if (top >= 1e4 && top < 1e10 && step >= 100) {
      const bool mega = top >= 1e7 && step >= 1e5;
      const double unit = mega ? 1e6 : 1e3;
      const int decimals = std::max(0, -(int)std::floor(std::log10(step / unit) + 1e-9));
      out.push_back(printf_string(("%." + std::to_string(decimals) + "f").c_str(), t / unit) + (mega ? "M" : "k"));
    } else if (step < 1e-3 || top >= 1e7) {
      const double e = std::floor(std::log10(std::fabs(t)) + 1e-9);
      out.push_back(fmt_num(t / std::pow(10.0, e), 3) + "e" + std::to_string((int)e));
    } else {
      const int decimals = std::clamp(-(int)std::floor(std::log10(step) + 1e-9), 0, 12);
      out.push_back(printf_string(("%." + std::to_string(decimals) + "f").c_str(), t));
    }
  }
  return out;
}

struct Axis {
  bool log = false;
  double lo = 0, hi = 1;  // in the axis's space (log10 of the value when log)
  std::vector<std::pair<double, std::string>> ticks;  // (position in the axis's space, label)

  double space(double v) const { return log ? std::log10(v) : v; }
  double frac(double v) const { return (space(v) - lo) / (hi - lo); }
};

Axis linear_axis(double lo, double hi, bool pad_low, bool pad_high, int target) {
  Axis a;
  if (hi - lo <= std::max(std::fabs(hi), std::fabs(lo)) * 1e-12) {  // one value: a range around it
    const double d = lo != 0 ? std::fabs(lo) * 0.1 : 1;
    lo -= d;
    hi += d;
  } else {
    const double pad = (hi - lo) * 0.05;
    if (pad_low) lo -= pad;
    if (pad_high) hi += pad;
  }
  a.lo = lo;
  a.hi = hi;
  const double step = nice_step(hi - lo, target);
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9 && ticks.size() < 25; t += step)
    ticks.push_back(t);
  const std::vector<std::string> labels = tick_labels(ticks, step);
  for (size_t i = 0; i < ticks.size(); ++i) a.ticks.emplace_back(ticks[i], labels[i]);
  return a;
}

Axis log_axis(double lo_value, double hi_value) {
  Axis a;
  a.log = true;
  const double lo = std::log10(lo_value), hi = std::log10(hi_value), pad = (hi - lo) * 0.04;
  a.lo = lo - pad;
  a.hi = hi + pad;
  const int d0 = (int)std::floor(a.lo), d1 = (int)std::ceil(a.hi);
  const bool fine = d1 - d0 <= 3;  // few decades: 2 and 5 times each power of ten as well
  for (int d = d0; d <= d1; ++d) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m != 1 && !fine) continue;
      const double v = m * std::pow(10.0, d), s = std::log10(v);
      if (s >= a.lo && s <= a.hi) a.ticks.emplace_back(s, fmt_num(v, 3));
    }
  }
  return a;
}

// Keeps at most about kMaxPolylinePoints of a run of points: each of kMaxPolylinePoints / 2
// slices of x keeps its lowest and highest point, in x order, so spikes stay visible.
std::vector<std::pair<double, double>> thin(const std::vector<std::pair<double, double>>& pts) {
  if (pts.size() <= kMaxPolylinePoints) return pts;
  const size_t buckets = kMaxPolylinePoints / 2;
  const double x0 = pts.front().first, x1 = pts.back().first;
  std::vector<std::pair<double, double>> out;
  size_t i = 0;
  for (size_t b = 0; b < buckets && i < pts.size(); ++b) {
    const double end = b + 1 == buckets ? INFINITY : x0 + (x1 - x0) * (double)(b + 1) / (double)buckets;
    size_t lo = i, hi = i;
    for (; i < pts.size() && (pts[i].first < end || i == lo); ++i) {
      if (pts[i].second < pts[lo].second) lo = i;
      if (pts[i].second > pts[hi].second) hi = i;
    }
    out.push_back(pts[std::min(lo, hi)]);
    if (hi != lo) out.push_back(pts[std::max(lo, hi)]);
  }
  return out;
}

std::string render_chart(const ChartSpec& c) {
  // The points that can be drawn; values past +-1e300 are pinned there (no finite range
  // arithmetic can overflow), and a log axis needs positive values.
  int64_t not_finite = 0, total = 0;
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const Series& s : c.series)
    for (auto [x, y] : s.points) {
      ++total;
      if (!std::isfinite(x) || !std::isfinite(y)) {
        ++not_finite;
        continue;
      }
      x = std::clamp(x, -kClamp, kClamp);
      y = std::clamp(y, -kClamp, kClamp);
      xlo = std::min(xlo, x), xhi = std::max(xhi, x), ylo = std::min(ylo, y), yhi = std::max(yhi, y);
    }
  const bool any = total > not_finite;

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" id=\"" << esc(c.id) << "\" width=\"" << kW
    << "\" height=\"" << kH << "\" viewBox=\"0 0 " << kW << " " << kH << "\" role=\"img\" aria-label=\""
    << esc(c.title) << "\">";
  o << "<title>" << esc(c.title) << "</title>";
  o << "<text class=\"title\" x=\"" << kX0 << "\" y=\"20\">" << esc(c.title) << "</text>";
  o << "<rect class=\"plot-area\" x=\"" << kX0 << "\" y=\"" << kY0 << "\" width=\"" << kX1 - kX0 << "\" height=\""
    << kY1 - kY0 << "\" fill=\"#fbfbfc\" stroke=\"#8a9099\"/>";
  if (!any) {
    const std::string msg = total > 0 ? "no finite values (" + std::to_string(not_finite) + " not finite)"
                                      : (c.empty.empty() ? "no data" : c.empty);
    o << "<text class=\"empty\" x=\"" << (kX0 + kX1) / 2 << "\" y=\"" << (kY0 + kY1) / 2
      << "\" text-anchor=\"middle\">" << esc(msg) << "</text></svg>";
    return o.str();
  }

  if (c.x_from_zero && xlo > 0) xlo = 0;
  if (std::isfinite(c.x_to) && c.x_to <= kClamp) xhi = std::max(xhi, c.x_to);
  const Axis xa = linear_axis(xlo, xhi, false, false, 6);
  Axis ya;
  if (c.log_y_if_decades && ylo > 0 && yhi / ylo >= 10) ya = log_axis(ylo, yhi);
  else if (c.y_from_zero && ylo >= 0) ya = linear_axis(0, yhi, false, true, 5);
  else ya = linear_axis(ylo, yhi, true, true, 5);
  auto px = [&](double x) { return kX0 + xa.frac(std::clamp(x, -kClamp, kClamp)) * (kX1 - kX0); };
  auto py = [&](double y) { return kY1 - ya.frac(std::clamp(y, -kClamp, kClamp)) * (kY1 - kY0); };

  // Grid and ticks.
  o << "<g class=\"grid\" stroke=\"#e6e8eb\">";
  for (auto& [t, label] : ya.ticks) {
    const double y = kY1 - (t - ya.lo) / (ya.hi - ya.lo) * (kY1 - kY0);
    o << "<line x1=\"" << kX0 << "\" x2=\"" << kX1 << "\" y1=\"" << coord(y) << "\" y2=\"" << coord(y) << "\"/>";
  }
  for (auto& [t, label] : xa.ticks) {
    const double x = kX0 + (t - xa.lo) / (xa.hi - xa.lo) * (kX1 - kX0);
    o << "<line x1=\"" << coord(x) << "\" x2=\"" << coord(x) << "\" y1=\"" << kY0 << "\" y2=\"" << kY1 << "\"/>";
  }
  o << "</g><g class=\"ticks\">";
  for (auto& [t, label] : ya.ticks) {
    const double y = kY1 - (t - ya.lo) / (ya.hi - ya.lo) * (kY1 - kY0);
    o << "<text x=\"" << kX0 - 6 << "\" y=\"" << coord(y + 4) << "\" text-anchor=\"end\">" << esc(label)
      << "</text>";
  }
  for (auto& [t, label] : xa.ticks) {
    const double x = kX0 + (t - xa.lo) / (xa.hi - xa.lo) * (kX1 - kX0);
    o << "<text x=\"" << coord(x) << "\" y=\"" << kY1 + 16 << "\" text-anchor=\"middle\">" << esc(label)
      << "</text>";
  }
  o << "</g>";
  o << "<text class=\"label\" x=\"" << (kX0 + kX1) / 2 << "\" y=\"" << kH - 10 << "\" text-anchor=\"middle\">"
    << esc(c.x_label) << "</text>";
  o << "<text class=\"label\" transform=\"translate(16 " << (kY0 + kY1) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << esc(c.y_label + (ya.log ? " (log scale)" : "")) << "</text>";

  // Where the run was resumed.
  for (double m : c.marks) {
    if (!std::isfinite(m) || m < xa.lo || m > xa.hi) continue;
    const double x = px(m);
    o << "<g class=\"mark\"><line x1=\"" << coord(x) << "\" x2=\"" << coord(x) << "\" y1=\"" << kY0 << "\" y2=\""
      << kY1 << "\" stroke=\"#9aa1aa\" stroke-dasharray=\"4 3\"/><text x=\"" << coord(x + 3) << "\" y=\""
      << kY0 + 12 << "\">resumed</text></g>";
  }

  // The lines: one polyline per run of finite points (a non-finite value breaks the line), a
  // dot where a run is a single point or the series asks for dots.
  for (const Series& s : c.series) {
    const std::string cls = "s" + std::to_string(s.color);
    const char* color = kSeriesColor[s.color % 2];
    std::vector<std::vector<std::pair<double, double>>> runs(1);
    for (auto [x, y] : s.points) {
      if (std::isfinite(x) && std::isfinite(y)) runs.back().emplace_back(x, y);
      else if (!runs.back().empty()) runs.emplace_back();
    }
    size_t dots = 0;
    for (const auto& r : runs) {
      if (r.size() >= 2) {
        o << "<polyline class=\"line " << cls << "\" fill=\"none\" stroke=\"" << color << "\" points=\"";
        bool first = true;
        for (auto [x, y] : thin(r)) {
          o << (first ? "" : " ") << coord(px(x)) << "," << coord(py(y));
          first = false;
        }
        o << "\"/>";
      }
      if (r.size() == 1 || (s.markers && s.points.size() <= kMaxMarkers))
        for (auto [x, y] : r) {
          o << "<circle class=\"dot " << cls << "\" cx=\"" << coord(px(x)) << "\" cy=\"" << coord(py(y))
            << "\" r=\"3\" fill=\"" << color << "\"/>";
          ++dots;
        }
    }
  }

  // Legend (several series), and the count of values not drawn.
  if (c.series.size() > 1) {
    double x = kX1 - 8;
    for (size_t i = c.series.size(); i-- > 0;) {
      const Series& s = c.series[i];
      const double w = 30 + 7.0 * (double)s.name.size();
      x -= w;
      o << "<g class=\"legend\"><line class=\"line s" << s.color << "\" x1=\"" << coord(x) << "\" x2=\""
        << coord(x + 20) << "\" y1=\"" << kY0 - 8 << "\" y2=\"" << kY0 - 8 << "\" stroke=\""
        << kSeriesColor[s.color % 2] << "\"/><text x=\"" << coord(x + 24) << "\" y=\"" << kY0 - 4 << "\">"
        << esc(s.name) << "</text></g>";
    }
  }
  if (not_finite > 0)
    o << "<text class=\"warn\" x=\"" << kX1 - 6 << "\" y=\"" << kY1 - 6 << "\" text-anchor=\"end\">"
      << not_finite << (not_finite == 1 ? " value" : " values") << " not finite, not drawn</text>";
  o << "</svg>";
  return o.str();
}

// ---- the page

// A value that was not measured (not a gap in the line, nor a non-finite value to count).
constexpr double kNotMeasured = -INFINITY;

// Which axis a chart row uses.
enum class XAxis { step, time };

const char* kStyle = R"(:root{color-scheme:light dark;--bg:#fff;--fg:#1b1d21;--muted:#5b626c;--card:#f4f5f7;
--line:#d9dce1;--plot:#fbfbfc;--grid:#e6e8eb;--axis:#8a9099;--s0:#1d64c8;--s1:#d2561b;--mark:#9aa1aa;
--warn:#b3261e;--del:#fbd3d0;--ins:#fde7b0;--img:#fff}
@media (prefers-color-scheme:dark){:root{--bg:#121417;--fg:#e4e6ea;--muted:#9ba3ae;--card:#1b1e23;--line:#30353c;
--plot:#16191d;--grid:#2a2f36;--axis:#6d7480;--s0:#6cb2ff;--s1:#ff9d5c;--mark:#6d7480;--warn:#ff8a80;
--del:#6b2420;--ins:#5c4a12;--img:#fff}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1100px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px}
.status{color:var(--muted);margin:0}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(160px,1fr));gap:10px;margin-top:16px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:8px 12px}
.card .k{color:var(--muted);font-size:12px}.card .v{font-size:19px;font-weight:600}
.card .d{color:var(--muted);font-size:12px}
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:14px}
@media (max-width:900px){.grid{grid-template-columns:1fr}}
figure.fig{margin:0;background:var(--card);border:1px solid var(--line);border-radius:8px;padding:6px}
figure.fig figcaption{color:var(--muted);font-size:12px;padding:0 8px 4px}
svg.chart{display:block;width:100%;height:auto}
svg.chart text{font-size:12px;fill:var(--muted)}
svg.chart text.title{font-size:14px;font-weight:600;fill:var(--fg)}
svg.chart text.label{fill:var(--fg)}
svg.chart text.empty{font-size:14px}
svg.chart text.warn{fill:var(--warn)}
svg.chart .plot-area{fill:var(--plot);stroke:var(--axis)}
svg.chart .grid line{stroke:var(--grid)}
svg.chart .mark line{stroke:var(--mark)}
svg.chart .line{stroke-width:2;stroke-linejoin:round;stroke-linecap:round;fill:none}
svg.chart .s0{stroke:var(--s0)}svg.chart .s1{stroke:var(--s1)}
svg.chart .dot{stroke:none}svg.chart .dot.s0{fill:var(--s0)}svg.chart .dot.s1{fill:var(--s1)}
.worst{display:flex;flex-direction:column;gap:8px}
.wl{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:6px 12px}
.wl .head{color:var(--muted);font-size:12px;margin-bottom:4px}
.wl img{display:block;max-width:100%;height:auto;background:var(--img);border:1px solid var(--line)}
.wl .noimg{color:var(--warn);font-size:12px}
.wl table{border-collapse:collapse;margin-top:6px}
.wl td{padding:1px 10px 1px 0;vertical-align:top}
.wl td.t{color:var(--muted);font-size:12px;width:4.5em}
.wl td.x{font:15px/1.4 ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;white-space:pre-wrap;word-break:break-all}
.del{background:var(--del);border-radius:2px}.ins{background:var(--ins);border-radius:2px}
table.kv{border-collapse:collapse;width:100%}
table.kv td{border-top:1px solid var(--line);padding:3px 10px 3px 0;vertical-align:top}
table.kv td.k{color:var(--muted);width:11em;white-space:nowrap}
table.kv td.v{word-break:break-word}
.notes li{color:var(--warn)}
.muted{color:var(--muted)}
footer{color:var(--muted);font-size:12px;margin-top:32px})";

// Truth and reading with the characters that differ marked: an alignment of least edits
// between their code points (deleted or replaced characters of the truth, inserted or
// replacing characters of the reading). Lines past 2000 characters are shown unmarked.
std::pair<std::string, std::string> marked_diff(const std::string& truth, const std::string& reading) {
  const std::vector<uint32_t> a = xml_code_points(truth), b = xml_code_points(reading);
  std::vector<bool> ma(a.size()), mb(b.size());
  if (a.size() <= 2000 && b.size() <= 2000) {
    const size_t n = a.size(), m = b.size();
    std::vector<uint32_t> d((n + 1) * (m + 1));
    auto at = [&](size_t i, size_t j) -> uint32_t& { return d[i * (m + 1) + j]; };
    for (size_t i = 0; i <= n; ++i) at(i, 0) = (uint32_t)i;
    for (size_t j = 0; j <= m; ++j) at(0, j) = (uint32_t)j;
    for (size_t i = 1; i <= n; ++i)
      for (size_t j = 1; j <= m; ++j)
        at(i, j) = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + (a[i - 1] == b[j - 1] ? 0u : 1u)});
    for (size_t i = n, j = m; i > 0 || j > 0;) {
      if (i > 0 && j > 0 && at(i, j) == at(i - 1, j - 1) + (a[i - 1] == b[j - 1] ? 0u : 1u)) {
        ma[i - 1] = mb[j - 1] = a[i - 1] != b[j - 1];
        --i, --j;
      } else if (i > 0 && at(i, j) == at(i - 1, j) + 1) {
        ma[--i] = true;
      } else {
        mb[--j] = true;
      }
    }
  }
  auto render = [](const std::vector<uint32_t>& cps, const std::vector<bool>& marks, const char* cls) {
    std::string out;
    for (size_t i = 0; i < cps.size();) {
      size_t j = i;
      while (j < cps.size() && marks[j] == marks[i]) ++j;
      if (marks[i]) out += std::string("<span class=\"") + cls + "\">";
      for (size_t k = i; k < j; ++k) append_xml_escaped(out, cps[k]);
      if (marks[i]) out += "</span>";
      i = j;
    }
    return out;
  };
  return {render(a, ma, "del"), render(b, mb, "ins")};
}

std::string card(const std::string& key, const std::string& value, const std::string& detail = "") {
  return "<div class=\"card\"><div class=\"k\">" + esc(key) + "</div><div class=\"v\">" + esc(value) + "</div>" +
         (detail.empty() ? "" : "<div class=\"d\">" + esc(detail) + "</div>") + "</div>";
}

std::string kv_row(const std::string& k, const std::string& v) {
  return "<tr><td class=\"k\">" + esc(k) + "</td><td class=\"v\">" +
         (v.empty() ? "<span class=\"muted\">(not set)</span>" : esc(v)) + "</td></tr>";
}

// Rows for the members of an object, one level of nesting flattened as "outer.inner".
std::string kv_rows(const Json& obj, const std::set<std::string>& skip = {}) {
  std::string rows;
  if (!obj.is_object()) return rows;
  for (const auto& [k, v] : obj.as_object()) {
    if (skip.count(k)) continue;
    if (v.is_object() && !v.as_object().empty()) {
      for (const auto& [k2, v2] : v.as_object()) rows += kv_row(k + "." + k2, json_text(v2));
    } else {
      rows += kv_row(k, json_text(v));
    }
  }
  return rows;
}

const Json* member(const std::optional<Json>& j, const char* key) {
  return j && j->is_object() ? j->find(key) : nullptr;
}

double planned_steps(const RunRecord& run) {
  const Json* s = run.settings.is_object() ? run.settings.find("steps") : nullptr;
  return s && s->is_number() ? s->as_number() : NAN;
}

std::string status_line(const RunRecord& run) {
  const int64_t last = std::max(run.train.empty() ? 0 : run.train.back().step,
                                run.evals.empty() ? 0 : run.evals.back().step);
  if (run.summary && run.summary_is_last) {
    const Json* steps = member(run.summary, "steps");
    const Json* intr = member(run.summary, "interrupted");
    const std::string n = steps && steps->is_number() ? fmt_num(steps->as_number(), 15) : std::to_string(last);
    if (intr && intr->is_bool() && intr->as_bool()) return "Interrupted by a signal after step " + n + ".";
    const double planned = planned_steps(run);
    if (steps && steps->is_number() && std::isfinite(planned) && steps->as_number() < planned)
      return "Stopped after step " + n + " of " + fmt_num(planned, 15) + " (--stop-at or --max-minutes).";
    return "Finished: " + n + " steps.";
  }
  if (run.train.empty() && run.evals.empty()) return "No training steps recorded yet.";
  const double planned = planned_steps(run);
  return "Running, or stopped without a summary: the last event is at step " + std::to_string(last) +
         (std::isfinite(planned) ? " of " + fmt_num(planned, 15) : "") + ".";
}

}  // namespace

std::string html_escape(const std::string& text) { return xml_escape(text); }

void write_worst_lines(const std::string& run_dir, int64_t step, int64_t evaluated,
                       const std::vector<WorstLine>& lines) {
  const fs::path dir = fs::path(run_dir) / "worst";
  fs::create_directories(dir);
  Json list = Json::array();
  std::set<std::string> names;
  for (size_t k = 0; k < lines.size(); ++k) {
    const WorstLine& l = lines[k];
    char name[48];
    std::snprintf(name, sizeof name, "%08lld-%02zu.png", (long long)step, k + 1);
    save_gray_png((dir / name).string(), l.image);
    names.insert(name);
    Json j = Json::object();
    j.set("image", std::string(name));
    j.set("id", l.id);
    j.set("truth", l.truth);
    j.set("reading", l.reading);
    j.set("distance", l.distance);
    j.set("cer", std::isfinite(l.cer) ? Json(l.cer) : Json());
    list.push_back(j);
  }
  Json index = Json::object();
  index.set("format", "ocrt-worst-1");
  index.set("step", step);
  index.set("evaluated", evaluated);
  index.set("lines", list);
  write_file_atomic((dir / "index.json").string(), index.dump(1) + "\n");
  // The images of earlier evaluations (NNNNNNNN-KK.png) go; anything else there is left alone.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    const bool ours = n.size() >= 15 && n.substr(n.size() - 4) == ".png" && n[8] == '-' &&
                      std::all_of(n.begin(), n.begin() + 8, digit) && std::all_of(n.begin() + 9, n.end() - 4, digit);
    if (ours && !names.count(n)) fs::remove(e.path(), ec);
  }
}

RunRecord read_run(const std::string& dir) {
  std::error_code ec;
  OCRT_CHECK(fs::is_directory(dir, ec), dir, ": not a folder (give the --out folder of an ocrt-train run)");
  RunRecord run;
  run.dir = dir;
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  run.name = p.filename().string();
  if (run.name.empty() || run.name == ".") run.name = fs::absolute(p, ec).filename().string();
  read_metrics(run);
  for (auto it = run.starts.rbegin(); it != run.starts.rend(); ++it) {
    const Json* s = it->event.find("settings");
    if (s && s->is_object()) {
      run.settings = *s;
      run.settings_from = "metrics.jsonl (the run's start at step " + std::to_string(it->step) + ")";
      break;
    }
  }
  if (!run.settings.is_object()) {
    std::vector<std::string> ckpts;
    try {
      ckpts = list_checkpoints(dir);
    } catch (const Error&) {
    }
    if (!ckpts.empty()) {
      run.settings = checkpoint_settings(ckpts.back());
      if (run.settings.is_object()) run.settings_from = fs::path(ckpts.back()).filename().string();
    }
  }
  read_worst(run);
  return run;
}

namespace {

// The headline figures: best and last CER, loss, learning rate, speed, time, skipped steps.
void report_cards(std::ostringstream& h, const RunRecord& run) {
  h << "<div class=\"cards\">";
  {
    const EvalPoint* best = nullptr;
    for (const EvalPoint& e : run.evals)
      if (std::isfinite(e.cer) && (!best || e.cer < best->cer)) best = &e;
    if (best) h << card("best validation CER", fmt_percent(best->cer), "at step " + std::to_string(best->step));
    if (!run.evals.empty()) {
      const EvalPoint& e = run.evals.back();
      h << card("last validation CER", fmt_percent(e.cer),
                "line accuracy " + fmt_percent(e.line_accuracy) + " on " + std::to_string(e.lines) + " lines");
    }
    if (!run.train.empty()) {
      const TrainPoint& t = run.train.back();
      h << card("training loss", fmt_num(t.loss, 4), "at step " + std::to_string(t.step) + " (smoothed)");
      h << card("learning rate", fmt_num(t.lr, 3), "at step " + std::to_string(t.step));
    }
    const Json* sps = member(run.summary, "samples_per_sec");
    if (sps && sps->is_number() && run.summary_is_last) {
      h << card("lines per second", fmt_num(sps->as_number(), 3), "the whole run");
    } else if (!run.train.empty()) {
      h << card("lines per second", fmt_num(run.train.back().samples_per_sec, 3), "so far");
    }
    double t_end = NAN;
    for (const TrainPoint& t : run.train)
      if (std::isfinite(t.time)) t_end = std::isfinite(t_end) ? std::max(t_end, t.time) : t.time;
    for (const EvalPoint& e : run.evals)
      if (std::isfinite(e.time)) t_end = std::isfinite(t_end) ? std::max(t_end, e.time) : e.time;
    if (std::isfinite(t_end))
      h << card("training time", fmt_duration(t_end),
                run.starts.size() > 1 ? std::to_string(run.starts.size()) + " parts, joined" : "wall clock");
    int64_t skipped = 0;
    for (const TrainPoint& t : run.train) skipped = std::max(skipped, t.skipped_steps);
    if (skipped > 0) h << card("skipped steps", std::to_string(skipped), "non-finite loss or gradient");
  }
  h << "</div>\n";
}

// The charts: one row per quantity, by step on the left and by wall time on the right.
void report_charts(std::ostringstream& h, const RunRecord& run) {
  std::vector<double> resume_steps, resume_times;
  for (const RunStart& s : run.starts)
    if (s.step > 0) resume_steps.push_back((double)s.step), resume_times.push_back(s.time);
  double t_max = 0;
  for (const TrainPoint& t : run.train)
    if (std::isfinite(t.time)) t_max = std::max(t_max, t.time);
  for (const EvalPoint& e : run.evals)
    if (std::isfinite(e.time)) t_max = std::max(t_max, e.time);
  int64_t step_max = 0;
  for (const TrainPoint& t : run.train) step_max = std::max(step_max, t.step);
  for (const EvalPoint& e : run.evals) step_max = std::max(step_max, e.step);
  const double t_unit = t_max < 120 ? 1 : t_max < 7200 ? 60 : 3600;
  const std::string t_label = std::string("wall time (") + (t_unit == 1 ? "s" : t_unit == 60 ? "min" : "h") + ")";
  const std::string no_time = "no wall times in metrics.jsonl (a run from before they were recorded)";

  struct Quantity {
    std::string key, title, y_label, empty;
    bool log, from_zero, markers;
    std::function<double(const TrainPoint&)> train_value;  // null: from the evaluations
    std::function<double(const EvalPoint&)> eval_value;
    std::string caption_unit;
  };
  const std::string no_val = "no evaluations (a run without --val, or none due yet)";
  const std::vector<Quantity> quantities = {
      {"loss", "Training loss", "CTC loss (smoothed)", "no training steps logged yet", true, false, false,
       [](const TrainPoint& p) { return p.loss; }, nullptr, ""},
      {"cer", "Validation CER", "CER (%)", no_val, false, true, true, nullptr,
       [](const EvalPoint& p) { return 100 * p.cer; }, "%"},
      {"lr", "Learning rate", "learning rate", "no training steps logged yet", false, true, false,
       [](const TrainPoint& p) { return p.lr; }, nullptr, ""},
      // ocrt-train logs 0 lines/s until its timed steps begin (after the second step): not
      // measured, so not drawn (a drop to 0 would be read as a stall).
      {"speed", "Lines per second", "lines/s", "no training steps logged yet", false, true, false,
       [](const TrainPoint& p) { return p.samples_per_sec == 0 ? kNotMeasured : p.samples_per_sec; }, nullptr, ""},
  };
  h << "<h2>Progress</h2><div class=\"grid\">\n";
  for (const Quantity& q : quantities) {
    for (XAxis axis : {XAxis::step, XAxis::time}) {
      ChartSpec c;
      c.id = "chart-" + q.key + (axis == XAxis::step ? "-step" : "-time");
      c.title = q.title + (axis == XAxis::step ? " by step" : " by wall time");
      c.x_label = axis == XAxis::step ? "step" : t_label;
      c.y_label = q.y_label;
      c.log_y_if_decades = q.log;
      c.y_from_zero = q.from_zero;
      const bool logged = q.train_value ? !run.train.empty() : !run.evals.empty();
      c.empty = axis == XAxis::time && logged && !run.has_time ? no_time : q.empty;
      c.marks = axis == XAxis::step ? resume_steps : resume_times;
      c.x_to = axis == XAxis::step ? (double)step_max : t_max / t_unit;
      if (axis == XAxis::time)
        for (double& m : c.marks) m /= t_unit;
      Series s;
      s.name = q.title;
      s.markers = q.markers;
      // The caption: the latest value and the extreme one.
      double last = NAN, best = NAN;
      int64_t last_step = -1, best_step = -1;
      auto add = [&](int64_t step, double time, double v) {
        const double x = axis == XAxis::step ? (double)step : time / t_unit;
        if (axis == XAxis::time && !std::isfinite(time)) return;  // never recorded: not a gap
        if (v == kNotMeasured) return;
        s.points.emplace_back(x, v);
        if (std::isfinite(v)) {
          last = v, last_step = step;
          const bool lower_is_better = q.key != "speed" && q.key != "lr";
          if (!std::isfinite(best) || (lower_is_better ? v < best : v > best)) best = v, best_step = step;
        }
      };
      if (q.train_value)
        for (const TrainPoint& p : run.train) add(p.step, p.time, q.train_value(p));
      else
        for (const EvalPoint& p : run.evals) add(p.step, p.time, q.eval_value(p));
      std::sort(s.points.begin(), s.points.end(), [](auto& a, auto& b) { return a.first < b.first; });
      c.series.push_back(std::move(s));
      h << "<figure class=\"fig\">" << render_chart(c);
      if (axis == XAxis::step && last_step >= 0) {
        std::string cap = "last " + fmt_num(last, 4) + q.caption_unit + " at step " + std::to_string(last_step);
        if (q.key == "loss" || q.key == "cer")
          cap += "; lowest " + fmt_num(best, 4) + q.caption_unit + " at step " + std::to_string(best_step);
        if (q.key == "speed") cap += "; highest " + fmt_num(best, 4) + " at step " + std::to_string(best_step);
        h << "<figcaption>" << esc(cap) << "</figcaption>";
      }
      h << "</figure>\n";
    }
  }
  h << "</div>\n";
}

// The worst validation lines of the last evaluation, their differences marked.
void report_worst(std::ostringstream& h, const RunRecord& run) {
  h << "<h2>Worst validation lines";
  if (run.worst_step >= 0) h << " at step " << run.worst_step;
  h << "</h2>\n";
  if (run.worst_step < 0) {
    h << "<p class=\"muted\">None saved: ocrt-train writes them into worst/ at each evaluation (a run without "
         "--val has none).</p>\n";
  } else if (run.worst.empty()) {
    h << "<p class=\"muted\">Every one of the " << run.worst_evaluated
      << " validation lines was read right at that evaluation.</p>\n";
  } else {
    h << "<p class=\"muted\">The " << run.worst.size() << " lines with the highest CER of the "
      << run.worst_evaluated
      << " evaluated, as the model saw them (scaled to its input height). Marked: characters of the truth that "
         "were missed or misread, and characters read in their place or added.</p>\n<div class=\"worst\">\n";
    for (size_t k = 0; k < run.worst.size(); ++k) {
      const ReportLine& l = run.worst[k];
      const auto [truth, reading] = marked_diff(l.truth, l.reading);
      h << "<div class=\"wl\"><div class=\"head\">" << k + 1 << ". CER " << esc(fmt_percent(l.cer)) << ", "
        << l.distance << (l.distance == 1 ? " edit" : " edits") << (l.id.empty() ? "" : " &middot; ") << esc(l.id)
        << "</div>";
      // Shown at 1.5 times the model's height, the width following (and shrinking with the page).
      if (!l.png.empty())
        h << "<img alt=\"line image " << k + 1 << "\" width=\"" << (l.width * 3 + 1) / 2 << "\" height=\""
          << (l.height * 3 + 1) / 2 << "\" src=\"data:image/png;base64," << base64(l.png) << "\">";
      else
        h << "<div class=\"noimg\">(image " << esc(l.image_name) << " missing or unreadable)</div>";
      h << "<table><tr><td class=\"t\">truth</td><td class=\"x\">" << truth
        << "</td></tr><tr><td class=\"t\">read</td><td class=\"x\">"
        << (l.reading.empty() ? "<span class=\"muted\">(nothing)</span>" : reading) << "</td></tr></table></div>\n";
    }
    h << "</div>\n";
  }
}

// The run: settings on the left; its parts, checkpoints and summary on the right; notes.
void report_run(std::ostringstream& h, const RunRecord& run) {
  h << "<h2>Run</h2><div class=\"grid\"><div>\n";
  if (run.settings.is_object()) {
    h << "<p class=\"muted\">Settings, from " << esc(run.settings_from) << ".</p><table class=\"kv\">"
      << kv_rows(run.settings);
    if (!run.starts.empty()) {
      const Json& e = run.starts.back().event;
      for (const char* k : {"arch", "model", "parameters", "replicas"})
        if (const Json* v = e.find(k); v && !(run.settings.find(k) && *run.settings.find(k) == *v))
          h << kv_row(k, json_text(*v));
    }
    h << "</table>\n";
  } else {
    h << "<p class=\"muted\">No settings recorded (no start event in metrics.jsonl and no checkpoint).</p>\n";
  }
  h << "</div><div>\n";
  if (!run.starts.empty()) {
    h << "<p class=\"muted\">Parts of the run.</p><table class=\"kv\">";
    for (const RunStart& s : run.starts)
      h << kv_row("from step " + std::to_string(s.step),
                  s.from.empty() ? "a fresh start from the seed"
                                 : (s.step > 0 ? "resumed from " : "started from ") + s.from);
    h << "</table>\n";
  }
  if (!run.checkpoints.empty()) {
    std::string list;
    const size_t first = run.checkpoints.size() > 30 ? run.checkpoints.size() - 30 : 0;
    for (size_t i = first; i < run.checkpoints.size(); ++i) {
      const auto& [step, why] = run.checkpoints[i];
      list += (list.empty() ? "" : ", ") + std::to_string(step) +
              (why.empty() || why == "schedule" ? "" : " (" + why + ")");
    }
    h << "<p>Checkpoints saved at step" << (run.checkpoints.size() > 1 ? "s " : " ") << (first > 0 ? "..., " : "")
      << esc(list) << ".</p>\n";
  }
  if (run.summary) {
    h << "<p class=\"muted\">Summary" << (run.summary_is_last ? "" : " of an earlier part")
      << ".</p><table class=\"kv\">" << kv_rows(*run.summary, {"event"}) << "</table>\n";
  }
  h << "</div></div>\n";
  if (!run.notes.empty()) {
    h << "<h2>Notes on the run folder</h2><ul class=\"notes\">";
    for (const std::string& n : run.notes) h << "<li>" << esc(n) << "</li>";
    h << "</ul>\n";
  }
}

}  // namespace

std::string report_html(const RunRecord& run, const std::string& generated) {
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    << "<meta name=\"color-scheme\" content=\"light dark\">"
    << "<title>" << esc(run.name) << ": ocrt training report</title><style>" << kStyle << "</style></head><body><main>\n";
  h << "<h1>Training report: " << esc(run.name) << "</h1><p class=\"status\">" << esc(status_line(run)) << "</p>\n";

  report_cards(h, run);
  report_charts(h, run);
  report_worst(h, run);
  report_run(h, run);
  h << "<footer>" << esc(run.dir) << (generated.empty() ? "" : " &middot; written " + esc(generated))
    << " &middot; ocrt-report</footer>\n</main></body></html>\n";
  return h.str();
}

RunRecord write_report(const std::string& run_dir, const std::string& out) {
  RunRecord run = read_run(run_dir);
  const std::time_t now = std::time(nullptr);
  char when[64] = "";
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  write_file_atomic(out, report_html(run, when));
  return run;
}

}  // namespace ocrt::train
