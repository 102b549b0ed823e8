// Reading ocrt-synth's page truth files (see page_truth.h).
#include "runtime/page_truth.h"

#include <fstream>
#include <sstream>

#include "runtime/error.h"
#include "runtime/json.h"

namespace ocrt {

namespace {

// Four [x, y] points, finite numbers.
Quad quad_of(const Json& points, const std::string& where) {
  OCRT_CHECK(points.is_array() && points.size() == 4, where, ": \"points\" must be 4 corners [x, y]");
  Quad q;
  for (size_t k = 0; k < 4; ++k) {
    const Json& p = points[k];
    OCRT_CHECK(p.is_array() && p.size() == 2 && p[0].is_number() && p[1].is_number(), where, ": corner ", k + 1,
               " must be [x, y], got ", p.dump());
    q.corners[k] = {p[0].as_number(), p[1].as_number()};
  }
  return q;
}

std::string text_of(const Json& object, const std::string& where) {
  const Json* t = object.find("text");
  OCRT_CHECK(t && t->is_string(), where, " needs \"text\"");
  return t->as_string();
}

}  // namespace

PageTruthFile parse_page_truth(const std::string& json_text, const std::string& name, bool need_words) {
  Json j;
  try {
    j = parse_json(json_text);
  } catch (const Error& e) {
    fail(name, ": not a page truth file (", e.what(), ")");
  }
  const Json* lines = j.is_object() ? j.find("lines") : nullptr;
  OCRT_CHECK(lines && lines->is_array(), name,
             ": not a page truth file (expected an object with \"lines\", as ocrt-synth --pages writes)");
  PageTruthFile truth;
  for (size_t i = 0; i < lines->size(); ++i) {
    const Json& l = (*lines)[i];
    const std::string where = name + ": line " + std::to_string(i + 1);
    OCRT_CHECK(l.is_object(), where, " must be an object");
    PageTruthLine line;
    const Json* words = l.find("words");
    if (need_words) {
      line.text = text_of(l, where);
      OCRT_CHECK(words && words->is_array(), where, " needs \"words\"");
    } else if (const Json* t = l.find("text"); t && t->is_string()) {
      line.text = t->as_string();
    }
    if (words && words->is_array())
      for (size_t k = 0; k < words->size(); ++k) {
        const Json& w = (*words)[k];
        const std::string at = where + ", word " + std::to_string(k + 1);
        OCRT_CHECK(w.is_object() && w.find("points"), at, " needs \"text\" and \"points\"");
        line.words.push_back({text_of(w, at), quad_of(*w.find("points"), at)});
      }
    const Json* points = l.find("points");
    OCRT_CHECK(points || !line.words.empty(), where, " needs \"points\"");
    if (points) {
      line.outline = quad_of(*points, where);
    } else {  // the box of its words
      std::vector<Point> all;
      for (const auto& w : line.words) all.insert(all.end(), w.outline.corners.begin(), w.outline.corners.end());
      line.outline = Quad::from_rect(bounding_rect(all.data(), all.size()));
    }
    if (const Json* h = l.find("heading"); h && h->is_bool()) line.heading = h->as_bool();
    truth.lines.push_back(std::move(line));
  }
  return truth;
}

PageTruthFile read_page_truth(const std::string& path, bool need_words) {
  std::ifstream f(path, std::ios::binary);
  OCRT_CHECK(f.good(), path, ": cannot open it");
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_page_truth(ss.str(), path, need_words);
}

}  // namespace ocrt
