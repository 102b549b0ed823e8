// A small check of XML well-formedness for tests (no parser library in the project).
#pragma once
#include <cctype>
#include <set>
#include <string>
#include <vector>

namespace ocrt::testing {

// What is wrong with `xml` as a well-formed XML element ("" when nothing): one root element;
// start and end tags that match; attributes quoted, unique per element, with no '<' in their
// values; '&' only as a predefined entity (amp, lt, gt, quot, apos) or a character reference;
// no '<' in text; comments closed; before the root, an XML declaration, processing instructions
// and a DOCTYPE may stand. Enough of XML 1.0 for the SVG of the training report and the hOCR,
// ALTO and PAGE XML of pages.
inline std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  bool had_root = false;
  size_t i = 0;
  const size_t n = xml.size();
  auto at = [&](size_t k) { return " at byte " + std::to_string(k); };
  auto name_char = [](char c, bool first) {
    return std::isalpha((unsigned char)c) || c == '_' || c == ':' ||
           (!first && (std::isdigit((unsigned char)c) || c == '-' || c == '.'));
  };
  auto name = [&](size_t& k) {
    const size_t start = k;
    while (k < n && name_char(xml[k], k == start)) ++k;
    return xml.substr(start, k - start);
  };
  // A reference after '&' at k: returns its length, 0 when it is not a valid one.
  auto reference = [&](size_t k) -> size_t {
    const size_t semi = xml.find(';', k);
    if (semi == std::string::npos || semi - k > 10) return 0;
    const std::string body = xml.substr(k + 1, semi - k - 1);
    static const std::set<std::string> named = {"amp", "lt", "gt", "quot", "apos"};
    bool ok = named.count(body) > 0;
    if (!ok && body.size() >= 2 && body[0] == '#') {
      const bool hex = body[1] == 'x';
      const std::string digits = body.substr(hex ? 2 : 1);
      ok = !digits.empty();
      for (char c : digits) ok = ok && (hex ? std::isxdigit((unsigned char)c) : std::isdigit((unsigned char)c));
    }
    return ok ? semi - k + 1 : 0;
  };
  auto skip_ws = [&](size_t& k) {
    while (k < n && std::isspace((unsigned char)xml[k])) ++k;
  };
  skip_ws(i);
  while (i < n) {
    if (had_root && open.empty()) {
      skip_ws(i);
      if (i < n) return "content after the root element" + at(i);
      break;
    }
    if (!had_root && xml.compare(i, 2, "<?") == 0) {
      const size_t end = xml.find("?>", i + 2);
      if (end == std::string::npos) return "an unclosed processing instruction" + at(i);
      i = end + 2;
    } else if (!had_root && xml.compare(i, 9, "<!DOCTYPE") == 0) {
      const size_t end = xml.find('>', i + 9);
      if (end == std::string::npos) return "an unclosed DOCTYPE" + at(i);
      i = end + 1;
    } else if (xml.compare(i, 4, "<!--") == 0) {
      const size_t end = xml.find("-->", i + 4);
      if (end == std::string::npos) return "an unclosed comment" + at(i);
      i = end + 3;
    } else if (xml.compare(i, 2, "</") == 0) {
      size_t k = i + 2;
      const std::string tag = name(k);
      skip_ws(k);
      if (k >= n || xml[k] != '>') return "a malformed end tag" + at(i);
      if (open.empty() || open.back() != tag)
        return "</" + tag + "> does not close <" + (open.empty() ? "" : open.back()) + ">" + at(i);
      open.pop_back();
      i = k + 1;
    } else if (xml[i] == '<') {
      size_t k = i + 1;
      const std::string tag = name(k);
      if (tag.empty()) return "a '<' that starts no tag" + at(i);
      std::set<std::string> attrs;
      while (true) {
        const size_t before = k;
        skip_ws(k);
        if (k >= n) return "an unclosed start tag <" + tag + ">" + at(i);
        if (xml[k] == '>' || xml.compare(k, 2, "/>") == 0) break;
        if (k == before) return "no space before an attribute of <" + tag + ">" + at(k);
        const std::string attr = name(k);
        if (attr.empty()) return "a malformed attribute in <" + tag + ">" + at(k);
        if (!attrs.insert(attr).second) return "attribute " + attr + " twice in <" + tag + ">" + at(k);
        if (k >= n || xml[k] != '=') return "attribute " + attr + " without '='" + at(k);
        ++k;
        if (k >= n || (xml[k] != '"' && xml[k] != '\'')) return "attribute " + attr + " not quoted" + at(k);
        const char q = xml[k++];
        for (; k < n && xml[k] != q; ++k) {
          if (xml[k] == '<') return "'<' in the value of " + attr + at(k);
          if (xml[k] == '&') {
            const size_t len = reference(k);
            if (len == 0) return "a bare '&' in the value of " + attr + at(k);
            k += len - 1;
          }
        }
        if (k >= n) return "an unclosed value of " + attr + at(i);
        ++k;
      }
      had_root = true;
      if (xml[k] == '>') {
        open.push_back(tag);
        i = k + 1;
      } else {
        i = k + 2;
      }
    } else if (xml[i] == '&') {
      const size_t len = reference(i);
      if (len == 0) return "a bare '&' in text" + at(i);
      i += len;
    } else {
      if (!had_root && !std::isspace((unsigned char)xml[i])) return "text before the root element" + at(i);
      ++i;
    }
  }
  if (!open.empty()) return "<" + open.back() + "> is never closed";
  if (!had_root) return "no element";
  return "";
}

}  // namespace ocrt::testing
