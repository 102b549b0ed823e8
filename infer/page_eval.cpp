#include "infer/page_eval.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "infer/report.h"
#include "runtime/error.h"
#include "runtime/page_truth.h"
#include "runtime/text.h"

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

// A number written in a document (an attribute, a point): finite and the whole text.
double number(std::string_view text, const std::string& name, const char* what) {
  const std::string t(text);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  OCRT_CHECK(!t.empty() && end == t.c_str() + t.size() && std::isfinite(v), name, ": ", what, " is not a number: '", t,
             "'");
  return v;
}

std::vector<std::string> split_spaces(const std::string& text) {
  std::vector<std::string> out;
  const std::string squeezed = squeeze_spaces(text);
  size_t start = 0;
  while (start < squeezed.size()) {
    size_t end = squeezed.find(' ', start);
    if (end == std::string::npos) end = squeezed.size();
    out.push_back(squeezed.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Collects words line by line while a reader walks a document.
struct TruthBuilder {
  PageTruth truth;
  std::vector<std::string> line;  // the current line's words
  void add(const std::string& text, const Rect& box) {
    const std::string t = squeeze_spaces(text);
    if (t.empty()) return;
    truth.words.push_back({t, box});
    line.push_back(t);
  }
  void end_line() {
    if (line.empty()) return;
    std::string l;
    for (const std::string& w : line) l += (l.empty() ? "" : " ") + w;
    truth.text += (truth.text.empty() ? "" : "\n") + l;
    line.clear();
  }
};

bool has_class(const XmlElement& e, std::string_view cls) {
  const std::string* c = e.attribute("class");
  if (!c) return false;
  for (const std::string& w : split_spaces(*c))
    if (w == cls) return true;
  return false;
}

void walk_hocr(const XmlElement& e, TruthBuilder& b, const std::string& name) {
  const bool line = has_class(e, "ocr_line") || has_class(e, "ocrx_line") || has_class(e, "ocr_header") ||
                    has_class(e, "ocr_caption") || has_class(e, "ocr_textfloat");
  if (line) b.end_line();
  if (has_class(e, "ocrx_word")) {
    const std::string* title = e.attribute("title");
    std::vector<std::string> bbox;
    if (title) {
      size_t start = 0;
      while (start <= title->size()) {
        size_t end = title->find(';', start);
        if (end == std::string::npos) end = title->size();
        const std::vector<std::string> parts = split_spaces(title->substr(start, end - start));
        if (!parts.empty() && parts[0] == "bbox") bbox = parts;
        start = end + 1;
      }
    }
    OCRT_CHECK(bbox.size() == 5, name, ": an ocrx_word without a bbox in its title ('", e.inner_text(), "')");
    b.add(e.inner_text(), {number(bbox[1], name, "a bbox value"), number(bbox[2], name, "a bbox value"),
                           number(bbox[3], name, "a bbox value"), number(bbox[4], name, "a bbox value")});
    return;
  }
  for (const XmlElement& c : e.children) walk_hocr(c, b, name);
  if (line) b.end_line();
}

double alto_number(const XmlElement& e, const char* attr, const std::string& name) {
  const std::string* v = e.attribute(attr);
  OCRT_CHECK(v != nullptr, name, ": a String without ", attr);
  return number(*v, name, attr);
}

void walk_alto(const XmlElement& e, TruthBuilder& b, const std::string& name) {
  if (e.local_name() == "String") {
    const double x = alto_number(e, "HPOS", name), y = alto_number(e, "VPOS", name);
    const double w = alto_number(e, "WIDTH", name), h = alto_number(e, "HEIGHT", name);
    const std::string* content = e.attribute("CONTENT");
    OCRT_CHECK(content != nullptr, name, ": a String without CONTENT");
    b.add(*content, {x, y, x + w, y + h});
    return;
  }
  const bool line = e.local_name() == "TextLine";
  for (const XmlElement& c : e.children) walk_alto(c, b, name);
  if (line) b.end_line();
}

Rect coords_box(const XmlElement& e, const std::string& name) {
  const XmlElement* coords = e.child("Coords");
  const std::string* pts = coords ? coords->attribute("points") : nullptr;
  OCRT_CHECK(pts != nullptr, name, ": a ", std::string(e.local_name()), " without Coords points");
  std::vector<Point> points;
  for (const std::string& p : split_spaces(*pts)) {
    const size_t comma = p.find(',');
    OCRT_CHECK(comma != std::string::npos, name, ": a point must be x,y: '", p, "'");
    points.push_back({number(std::string_view(p).substr(0, comma), name, "a point"),
                      number(std::string_view(p).substr(comma + 1), name, "a point")});
  }
  OCRT_CHECK(!points.empty(), name, ": empty Coords points");
  return bounding_rect(points.data(), points.size());
}

std::string text_equiv(const XmlElement& e) {
  for (const XmlElement& c : e.children)
    if (c.local_name() == "TextEquiv")
      if (const XmlElement* u = c.child("Unicode")) return u->inner_text();
  return "";
}

void walk_page_xml(const XmlElement& e, TruthBuilder& b, const std::string& name) {
  if (e.local_name() == "TextLine") {
    bool words = false;
    for (const XmlElement& c : e.children)
      if (c.local_name() == "Word") {
        words = true;
        b.add(text_equiv(c), coords_box(c, name));
      }
    if (!words) {  // a line's text alone: its words share its box by their characters
      const std::vector<std::string> ws = split_spaces(text_equiv(e));
      if (!ws.empty()) {
        const Rect box = coords_box(e, name);
        size_t total = 0;
        for (const std::string& w : ws) total += w.size() + 1;
        double at = box.x0;
        for (const std::string& w : ws) {
          const double width = box.width() * (double)(w.size() + 1) / (double)total;
          b.add(w, {at, box.y0, at + width, box.y1});
          at += width;
        }
      }
    }
    b.end_line();
    return;
  }
  for (const XmlElement& c : e.children) walk_page_xml(c, b, name);
}

}  // namespace

namespace {

// The text with ASCII's capital letters made small (other letters are left as they are).
std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
  return s;
}

// Whether a code point is punctuation: ASCII's by std::ispunct (which also counts the ASCII
// symbols, $ + < = > ^ ` | ~), and beyond ASCII the characters of Unicode's punctuation
// categories (Pc, Pd, Ps, Pe, Pi, Pf, Po) in the blocks print uses: Latin-1's (inverted marks,
// section and pilcrow signs, guillemets, middle dot), General Punctuation (dashes, curly
// quotes, bullets, daggers, ellipsis, primes; not U+2044 FRACTION SLASH or U+2052 COMMERCIAL
// MINUS SIGN, which are math symbols) and Supplemental Punctuation.
bool is_punctuation(uint32_t cp) {
  if (cp < 0x80) return std::ispunct((int)cp) != 0;
  switch (cp) {
    case 0xA1: case 0xA7: case 0xAB: case 0xB6: case 0xB7: case 0xBB: case 0xBF: return true;
    default: break;
  }
  if (cp >= 0x2010 && cp <= 0x2027) return true;
  if (cp >= 0x2030 && cp <= 0x205E) return cp != 0x2044 && cp != 0x2052;
  return cp >= 0x2E00 && cp <= 0x2E4F;
}

}  // namespace

std::string without_punctuation(const std::string& word) {
  std::string out;
  for (uint32_t cp : utf8_code_points(word))
    if (!is_punctuation(cp)) append_utf8(out, cp);
  return out;
}

PageTruth truth_from_synth_json(const std::string& json_text, const std::string& name) {
  PageTruth truth;
  for (const PageTruthLine& l : parse_page_truth(json_text, name, true).lines) {
    truth.text += (truth.text.empty() ? "" : "\n") + l.text;
    for (const PageTruthWord& w : l.words) truth.words.push_back({w.text, w.outline.box()});
  }
  return truth;
}

PageTruth truth_from_hocr(const XmlElement& root, const std::string& name) {
  TruthBuilder b;
  walk_hocr(root, b, name);
  b.end_line();
  return b.truth;
}

PageTruth truth_from_alto(const XmlElement& root, const std::string& name) {
  if (const XmlElement* d = root.child("Description"))
    if (const XmlElement* unit = d->child("MeasurementUnit")) {
      const std::string u = squeeze_spaces(unit->inner_text());
      OCRT_CHECK(u == "pixel", name, ": ALTO in ", u, " (only pixel coordinates are read)");
    }
  TruthBuilder b;
  walk_alto(root, b, name);
  b.end_line();
  return b.truth;
}

PageTruth truth_from_page_xml(const XmlElement& root, const std::string& name) {
  TruthBuilder b;
  walk_page_xml(root, b, name);
  b.end_line();
  return b.truth;
}

PageTruth read_page_truth(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  OCRT_CHECK(in.good(), path, ": cannot read the truth file");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  OCRT_CHECK(!in.bad(), path, ": cannot read the truth file");
  const size_t first = text.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  if (first != std::string::npos && text[first] == '{') return truth_from_synth_json(text, path);
  const XmlElement root = parse_xml(text, path);
  const std::string_view r = root.local_name();
  if (r == "html") return truth_from_hocr(root, path);
  if (r == "alto") return truth_from_alto(root, path);
  if (r == "PcGts") return truth_from_page_xml(root, path);
  fail(path, ": a truth file must be hOCR, ALTO, PAGE XML or ocrt-synth's JSON (its root element is <", root.name, ">)");
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
  joined += o.joined, case_only += o.case_only;
  distance += o.distance, truth_chars += o.truth_chars;
  return *this;
}

Json PageScore::to_json() const {
  Json j = Json::object();
  j.set("truth_words", truth_words);
  j.set("right", right);
  j.set("wrong", wrong);
  j.set("joined", joined);
  j.set("case_only", case_only);
  j.set("missed", missed);
  j.set("extra", extra);
  j.set("word_accuracy", word_accuracy());
  j.set("distance", distance);
  j.set("truth_chars", truth_chars);
  j.set("cer", cer());
  return j;
}

const char* word_miss_kind_name(WordMissKind k) {
  switch (k) {
    case WordMissKind::wrong: return "wrong";
    case WordMissKind::joined: return "joined";
    case WordMissKind::case_only: return "case";
    case WordMissKind::missed: return "missed";
  }
  return "?";
}

Json WordMiss::to_json() const {
  Json j = Json::object();
  j.set("kind", word_miss_kind_name(kind));
  j.set("truth", truth);
  j.set("read", read);
  Json b = Json::array();
  for (double v : {box.x0, box.y0, box.x1, box.y1}) b.push_back(std::round(v));
  j.set("box", std::move(b));
  return j;
}

PageScore score_page(const Page& output, const PageTruth& truth, std::vector<WordMiss>* misses) {
  const std::vector<TruthWord> out = page_words(output);
  PageScore s;
  s.truth_words = (int64_t)truth.words.size();
  // Each truth word's output word (out.size(): none overlaps it), and how many truth words
  // each output word was matched by.
  std::vector<size_t> match(truth.words.size(), out.size());
  std::vector<int> matched_by(out.size(), 0);
  for (size_t w = 0; w < truth.words.size(); ++w) {
    double best = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const double o = overlap_area(truth.words[w].box, out[i].box);
      if (o > best) best = o, match[w] = i;
    }
    if (match[w] < out.size()) ++matched_by[match[w]];
  }
  for (size_t w = 0; w < truth.words.size(); ++w) {
    const TruthWord& t = truth.words[w];
    const size_t at = match[w];
    WordMiss miss{WordMissKind::missed, t.text, "", t.box};
    if (at == out.size()) {
      ++s.missed;
    } else {
      const std::string a = without_punctuation(t.text), b = without_punctuation(out[at].text);
      if (a.empty() || a == b) {
        ++s.right;
        continue;
      }
      ++s.wrong;
      miss.read = out[at].text;
      if (matched_by[at] > 1) {
        miss.kind = WordMissKind::joined;
        ++s.joined;
      } else if (ascii_lower(a) == ascii_lower(b)) {
        miss.kind = WordMissKind::case_only;
        ++s.case_only;
      } else {
        miss.kind = WordMissKind::wrong;
      }
    }
    if (misses) misses->push_back(std::move(miss));
  }
  for (int m : matched_by) s.extra += m > 0 ? 0 : 1;
  const std::string truth_text = squeeze_spaces(truth.text);
  s.distance = char_edit_distance(squeeze_spaces(page_text(output)), truth_text);
  s.truth_chars = char_count(truth_text);
  return s;
}

}  // namespace ocrt::infer
