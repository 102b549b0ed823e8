// Charset and UTF-8 handling (see charset.h).
#include "models/charset.h"

#include <fstream>
#include <sstream>

#include "runtime/error.h"

namespace ocrt::nn {

std::vector<std::string> utf8_chars(const std::string& text, const std::string& what) {
  std::vector<std::string> out;
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) len = 1, cp = c;
    else if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else fail(what, ": invalid UTF-8 at byte ", i, " (byte 0x", std::hex, (int)c, " cannot start a character)");
    OCRT_CHECK(i + len <= n, what, ": invalid UTF-8 at byte ", i, " (the text ends inside a character)");
    for (size_t k = 1; k < len; ++k) {
      OCRT_CHECK((s[i + k] & 0xC0) == 0x80, what, ": invalid UTF-8 at byte ", i + k, " (expected a continuation byte)");
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    OCRT_CHECK(cp >= min_cp[len], what, ": invalid UTF-8 at byte ", i, " (overlong encoding)");
    OCRT_CHECK(cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF), what, ": invalid UTF-8 at byte ", i,
               " (not a Unicode scalar value)");
    out.emplace_back(text, i, len);
    i += len;
  }
  return out;
}

Charset Charset::ascii() {
  std::vector<std::string> chars;
  for (char c = 0x20; c <= 0x7E; ++c) chars.emplace_back(1, c);
  return from_chars(chars);
}

Charset Charset::from_chars(const std::vector<std::string>& chars) {
  Charset cs;
  OCRT_CHECK(!chars.empty(), "charset: no characters");
  for (size_t i = 0; i < chars.size(); ++i) {
    const auto cps = utf8_chars(chars[i], "charset entry " + std::to_string(i));
    OCRT_CHECK(cps.size() == 1, "charset entry ", i, " ('", chars[i], "') must be exactly one character");
    OCRT_CHECK(!cs.index_.count(chars[i]), "charset: '", chars[i], "' appears twice (entries ", cs.index_[chars[i]] - 1,
               " and ", i, ")");
    cs.chars_.push_back(chars[i]);
    cs.index_[chars[i]] = (int64_t)i + 1;
  }
  return cs;
}

Charset Charset::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  OCRT_CHECK(in.good(), "charset file ", path, ": cannot open it");
  std::string line;
  std::vector<std::string> chars;
  std::unordered_map<std::string, int> seen;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string where = path + " line " + std::to_string(lineno);
    const auto cps = utf8_chars(line, where);
    OCRT_CHECK(cps.size() == 1, where, ": expected one character per line, got '", line, "' (", cps.size(),
               " characters)");
    // A control character cannot be written back on a line (a '\r' is taken for the end of a
    // CRLF line, '\n' ends it), and no text line holds one.
    OCRT_CHECK(!((unsigned char)line[0] < 0x20 || line == "\x7f"), where, ": a control character (byte ",
               (int)(unsigned char)line[0], ") cannot be in a charset file");
    OCRT_CHECK(!seen.count(line), where, ": '", line, "' is already on line ", seen[line]);
    seen[line] = lineno;
    chars.push_back(line);
  }
  OCRT_CHECK(!chars.empty(), "charset file ", path, ": no characters in it");
  return from_chars(chars);
}

bool Charset::encode(const std::string& text, std::vector<int64_t>& classes, std::vector<std::string>* unknown) const {
  classes.clear();
  bool ok = true;
  for (const std::string& ch : utf8_chars(text)) {
    auto it = index_.find(ch);
    if (it == index_.end()) {
      ok = false;
      if (unknown) unknown->push_back(ch);
    } else {
      classes.push_back(it->second);
    }
  }
  return ok;
}

std::vector<int64_t> Charset::encode_or_throw(const std::string& text) const {
  std::vector<int64_t> classes;
  std::vector<std::string> unknown;
  if (!encode(text, classes, &unknown)) {
    std::ostringstream os;
    for (size_t i = 0; i < unknown.size(); ++i) os << (i ? ", " : "") << "'" << unknown[i] << "'";
    fail("label '", text, "' has characters that are not in the charset: ", os.str());
  }
  return classes;
}

std::string Charset::decode(const std::vector<int64_t>& classes) const {
  std::string out;
  for (int64_t c : classes) {
    OCRT_CHECK(c >= 0 && c < num_classes(), "charset decode: class ", c, " is outside [0, ", num_classes(), ")");
    if (c > 0) out += chars_[(size_t)(c - 1)];
  }
  return out;
}

std::string Charset::to_text() const {
  std::string out;
  for (const auto& c : chars_) {
    OCRT_CHECK(!(c.size() == 1 && ((unsigned char)c[0] < 0x20 || c[0] == 0x7f)), "charset: the control character (byte ",
               (int)(unsigned char)c[0], ") at class ", &c - chars_.data() + 1, " has no form in a charset file");
    out += c + "\n";
  }
  return out;
}

}  // namespace ocrt::nn
