#include "infer/page_eval.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "infer/report.h"
#include "runtime/error.h"

namespace ocrt::infer {

namespace {

// Every run of white space as one space, none at the ends.
std::string squeeze_spaces(const std::string& text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

double overlap(const Rect& a, const Rect& b) {
  const double w = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
  const double h = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
  return w > 0 && h > 0 ? w * h : 0;
}

Rect rect_of_points(const Json& points, const std::string& name) {
  OCRT_CHECK(points.is_array() && points.size() >= 1, name, ": a word's or line's points must be a list of [x, y]");
  std::vector<Point> pts;
  for (size_t i = 0; i < points.size(); ++i) {
    const Json& p = points[i];
    OCRT_CHECK(p.is_array() && p.size() == 2 && p[0].is_number() && p[1].is_number(), name,
               ": a point must be [x, y], got ", p.dump());
    pts.push_back({p[0].as_number(), p[1].as_number()});
  }
  return bounding_rect(pts.data(), pts.size());
}

}  // namespace

std::string without_punctuation(const std::string& word) {
  std::string out;
  for (char c : word)
    if (!std::ispunct((unsigned char)c)) out += c;
  return out;
}

PageTruth truth_from_synth_json(const std::string& json_text, const std::string& name) {
  Json j;
  try {
    j = parse_json(json_text);
  } catch (const Error& e) {
    fail(name, ": not a page truth file (", e.what(), ")");
  }
  OCRT_CHECK(j.is_object() && j.contains("lines") && j.at("lines").is_array(), name,
             ": not a page truth file (expected an object with \"lines\", as ocrt-synth --pages writes)");
  PageTruth truth;
  const Json& lines = j.at("lines");
  for (size_t i = 0; i < lines.size(); ++i) {
    const Json& l = lines[i];
    OCRT_CHECK(l.is_object() && l.contains("text") && l.at("text").is_string() && l.contains("words") &&
                   l.at("words").is_array(),
               name, ": line ", i + 1, " needs \"text\" and \"words\"");
    truth.text += (truth.text.empty() ? "" : "\n") + l.at("text").as_string();
    const Json& words = l.at("words");
    for (size_t k = 0; k < words.size(); ++k) {
      const Json& w = words[k];
      OCRT_CHECK(w.is_object() && w.contains("text") && w.at("text").is_string() && w.contains("points"), name,
                 ": line ", i + 1, ", word ", k + 1, " needs \"text\" and \"points\"");
      truth.words.push_back({w.at("text").as_string(), rect_of_points(w.at("points"), name)});
    }
  }
  return truth;
}

std::vector<TruthWord> page_words(const Page& page) {
  std::vector<TruthWord> out;
  for (const PageBlock& b : page.blocks)
    for (const PageLine& l : b.lines)
      for (const PageWord& w : l.words) out.push_back({w.text, w.box});
  return out;
}

double PageScore::word_accuracy() const {
  if (truth_words == 0) return extra == 0 ? 1.0 : 0.0;
  return (double)right / (double)truth_words;
}

double PageScore::cer() const {
  if (truth_chars == 0) return distance == 0 ? 0.0 : 1.0;
  return (double)distance / (double)truth_chars;
}

PageScore& PageScore::operator+=(const PageScore& o) {
  truth_words += o.truth_words, right += o.right, wrong += o.wrong, missed += o.missed, extra += o.extra;
  distance += o.distance, truth_chars += o.truth_chars;
  return *this;
}

Json PageScore::to_json() const {
  Json j = Json::object();
  j.set("truth_words", truth_words);
  j.set("right", right);
  j.set("wrong", wrong);
  j.set("missed", missed);
  j.set("extra", extra);
  j.set("word_accuracy", word_accuracy());
  j.set("distance", distance);
  j.set("truth_chars", truth_chars);
  j.set("cer", cer());
  return j;
}

PageScore score_page(const Page& output, const PageTruth& truth) {
  const std::vector<TruthWord> out = page_words(output);
  PageScore s;
  s.truth_words = (int64_t)truth.words.size();
  std::vector<bool> used(out.size(), false);
  for (const TruthWord& t : truth.words) {
    double best = 0;
    size_t at = out.size();
    for (size_t i = 0; i < out.size(); ++i) {
      const double o = overlap(t.box, out[i].box);
      if (o > best) best = o, at = i;
    }
    if (at == out.size()) {
      ++s.missed;
      continue;
    }
    used[at] = true;
    const std::string a = without_punctuation(t.text);
    (a.empty() || a == without_punctuation(out[at].text) ? s.right : s.wrong) += 1;
  }
  for (bool u : used) s.extra += u ? 0 : 1;
  const std::string truth_text = squeeze_spaces(truth.text);
  s.distance = char_edit_distance(squeeze_spaces(page_text(output)), truth_text);
  s.truth_chars = char_count(truth_text);
  return s;
}

}  // namespace ocrt::infer
