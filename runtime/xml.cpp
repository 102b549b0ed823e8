#include "runtime/xml.h"

#include <cctype>
#include <cstdint>

#include "runtime/error.h"
#include "runtime/text.h"

namespace ocrt {

std::string_view XmlElement::local_name() const {
  const size_t colon = name.find(':');
  return colon == std::string::npos ? std::string_view(name) : std::string_view(name).substr(colon + 1);
}

const std::string* XmlElement::attribute(std::string_view n) const {
  for (const auto& [k, v] : attributes)
    if (k == n) return &v;
  return nullptr;
}

std::string XmlElement::inner_text() const {
  std::string out;
  size_t from = 0;
  for (size_t i = 0; i < children.size(); ++i) {
    out.append(text, from, child_at[i] - from);
    out += children[i].inner_text();
    from = child_at[i];
  }
  out.append(text, from, std::string::npos);
  return out;
}

const XmlElement* XmlElement::child(std::string_view local) const {
  for (const XmlElement& c : children)
    if (c.local_name() == local) return &c;
  return nullptr;
}

namespace {

class XmlParser {
 public:
  XmlParser(std::string_view s, const std::string& name) : s_(s), name_(name) {}

  XmlElement document() {
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // a byte-order mark
    if (valid_utf8(std::string(s_)) != s_) fail_at(0, "the document is not UTF-8");
    misc(true);
    if (pos_ >= s_.size() || s_[pos_] != '<') fail_at(pos_, "expected the root element");
    XmlElement root = element(1);
    misc(false);
    if (pos_ < s_.size()) fail_at(pos_, "content after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail_at(size_t at, const std::string& why) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') ++line, column = 1;
      else ++column;
    }
    fail(name_, ": not well-formed XML (line ", line, ", column ", column, ": ", why, ")");
  }

  bool starts(std::string_view t) const { return s_.substr(pos_, t.size()) == t; }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  // Skips past `end`; an error naming `what` when it never comes.
  void skip_past(std::string_view end, const char* what) {
    const size_t at = s_.find(end, pos_);
    if (at == std::string_view::npos) fail_at(pos_, std::string("an unclosed ") + what);
    pos_ = at + end.size();
  }

  // Before the root (prolog: XML declaration, DOCTYPE) or after it: comments, processing
  // instructions and white space.
  void misc(bool prolog) {
    bool first = true;
    while (true) {
      skip_space();
      if (starts("<?xml") && prolog && first && pos_ <= 3) {
        declaration();
      } else if (starts("<?")) {
        skip_past("?>", "processing instruction");
      } else if (starts("<!--")) {
        comment();
      } else if (prolog && starts("<!DOCTYPE")) {
        doctype();
      } else {
        return;
      }
      first = false;
    }
  }

  void declaration() {
    const size_t start = pos_;
    skip_past("?>", "XML declaration");
    const std::string_view decl = s_.substr(start, pos_ - start);
    const size_t enc = decl.find("encoding");
    if (enc != std::string_view::npos) {
      const size_t q = decl.find_first_of("\"'", enc);
      const size_t q2 = q == std::string_view::npos ? q : decl.find(decl[q], q + 1);
      if (q2 == std::string_view::npos) fail_at(start, "a malformed encoding in the XML declaration");
      std::string e(decl.substr(q + 1, q2 - q - 1));
      for (char& c : e) c = (char)std::tolower((unsigned char)c);
      if (e != "utf-8" && e != "utf8" && e != "us-ascii") fail_at(start, "encoding '" + e + "': only UTF-8 is read");
    }
  }

  void comment() {
    pos_ += 4;
    const size_t at = s_.find("--", pos_);
    if (at == std::string_view::npos) fail_at(pos_, "an unclosed comment");
    if (at + 2 >= s_.size() || s_[at + 2] != '>') fail_at(at, "'--' inside a comment");
    pos_ = at + 3;
  }

  // <!DOCTYPE name ... [internal subset]>: skipped, brackets and quotes followed.
  void doctype() {
    const size_t start = pos_;
    pos_ += 9;
    int depth = 0;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '"' || c == '\'') {
        const size_t end = s_.find(c, pos_ + 1);
        if (end == std::string_view::npos) break;
        pos_ = end + 1;
        continue;
      }
      if (c == '[') ++depth;
      if (c == ']') --depth;
      ++pos_;
      if (c == '>' && depth <= 0) return;
    }
    fail_at(start, "an unclosed DOCTYPE");
  }

  static bool name_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || c >= 0x80;
  }
  static bool name_char(unsigned char c) { return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.'; }
  std::string name() {
    const size_t start = pos_;
    if (pos_ >= s_.size() || !name_start((unsigned char)s_[pos_])) fail_at(pos_, "expected a name");
    while (pos_ < s_.size() && name_char((unsigned char)s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  // A reference after '&': appends what it stands for.
  void reference(std::string& out) {
    const size_t start = pos_;
    const size_t semi = s_.find(';', pos_);
    if (semi == std::string_view::npos || semi - pos_ > 12) fail_at(start, "a bare '&'");
    const std::string_view body = s_.substr(pos_ + 1, semi - pos_ - 1);
    pos_ = semi + 1;
    if (body == "lt") out += '<';
    else if (body == "gt") out += '>';
    else if (body == "amp") out += '&';
    else if (body == "quot") out += '"';
    else if (body == "apos") out += '\'';
    else if (body.size() >= 2 && body[0] == '#') {
      const bool hex = body[1] == 'x';
      const std::string_view digits = body.substr(hex ? 2 : 1);
      if (digits.empty()) fail_at(start, "an empty character reference");
      uint32_t cp = 0;
      for (char c : digits) {
        const int d = c >= '0' && c <= '9' ? c - '0' : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) fail_at(start, "a malformed character reference");
        cp = cp * (hex ? 16 : 10) + (uint32_t)d;
        if (cp > 0x10FFFF) fail_at(start, "a character reference past U+10FFFF");
      }
      const bool allowed = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                           (cp >= 0xE000 && cp <= 0xFFFD) || cp >= 0x10000;
      if (!allowed) fail_at(start, "a character reference to a character XML cannot hold");
      append_utf8(out, cp);
    } else {
      fail_at(start, "the entity '&" + std::string(body) + ";' is not one of XML's five (declared entities are not read)");
    }
  }

  XmlElement element(int depth) {
    if (depth > kMaxXmlDepth) fail_at(pos_, "elements nested more than " + std::to_string(kMaxXmlDepth) + " deep");
    const size_t open = pos_;
    ++pos_;  // '<'
    XmlElement el;
    el.name = name();
    while (true) {
      const size_t before = pos_;
      skip_space();
      if (pos_ >= s_.size()) fail_at(open, "an unclosed start tag <" + el.name + ">");
      if (starts("/>")) {
        pos_ += 2;
        return el;
      }
      if (s_[pos_] == '>') {
        ++pos_;
        break;
      }
      if (pos_ == before) fail_at(pos_, "expected a space before an attribute");
      std::string key = name();
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '=') fail_at(pos_, "attribute " + key + " without '='");
      ++pos_;
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) fail_at(pos_, "attribute " + key + " not quoted");
      const char q = s_[pos_++];
      std::string value;
      while (true) {
        if (pos_ >= s_.size()) fail_at(open, "an unclosed attribute value");
        const char c = s_[pos_];
        if (c == q) {
          ++pos_;
          break;
        }
        if (c == '<') fail_at(pos_, "'<' in an attribute value");
        if (c == '&') {
          reference(value);
          continue;
        }
        value += c == '\t' || c == '\n' || c == '\r' ? ' ' : c;  // attribute-value normalisation
        ++pos_;
      }
      if (el.attributes.size() >= 256) fail_at(pos_, "more than 256 attributes on <" + el.name + ">");
      if (el.attribute(key)) fail_at(pos_, "attribute " + key + " twice");
      el.attributes.emplace_back(std::move(key), std::move(value));
    }
    // Content, up to the matching end tag.
    while (true) {
      if (pos_ >= s_.size()) fail_at(open, "<" + el.name + "> is never closed");
      const char c = s_[pos_];
      if (c == '<') {
        if (starts("</")) {
          const size_t at = pos_;
          pos_ += 2;
          const std::string end = name();
          skip_space();
          if (pos_ >= s_.size() || s_[pos_] != '>') fail_at(at, "a malformed end tag");
          if (end != el.name) fail_at(at, "</" + end + "> does not close <" + el.name + ">");
          ++pos_;
          return el;
        }
        if (starts("<!--")) {
          comment();
        } else if (starts("<![CDATA[")) {
          pos_ += 9;
          const size_t end = s_.find("]]>", pos_);
          if (end == std::string_view::npos) fail_at(pos_, "an unclosed CDATA section");
          el.text += s_.substr(pos_, end - pos_);
          pos_ = end + 3;
        } else if (starts("<?")) {
          skip_past("?>", "processing instruction");
        } else if (starts("<!")) {
          fail_at(pos_, "a declaration inside an element");
        } else {
          XmlElement child = element(depth + 1);
          el.child_at.push_back(el.text.size());
          el.children.push_back(std::move(child));
        }
      } else if (c == '&') {
        reference(el.text);
      } else {
        if (c == '\r') {
          el.text += '\n';
          pos_ += pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n' ? 2 : 1;
          continue;
        }
        el.text += c;
        ++pos_;
      }
    }
  }

  std::string_view s_;
  const std::string& name_;
  size_t pos_ = 0;
};

}  // namespace

XmlElement parse_xml(std::string_view text, const std::string& name) { return XmlParser(text, name).document(); }

}  // namespace ocrt
