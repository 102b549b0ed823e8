// JSON parsing and printing for runtime/json.h: a recursive-descent parser over the bytes of
// the text (depth-limited, so hostile input cannot overflow the stack) and a printer that writes
// integers without a decimal point and other numbers in their shortest round-trip form.
#include "runtime/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_set>
#include <utility>

#include "runtime/text.h"

namespace ocrt {

namespace {

constexpr double kMaxExactInt = 9007199254740992.0;  // 2^53

const char* type_name_of(Json::Type t) {
  switch (t) {
    case Json::Type::null: return "null";
    case Json::Type::boolean: return "bool";
    case Json::Type::number: return "number";
    case Json::Type::string: return "string";
    case Json::Type::array: return "array";
    case Json::Type::object: return "object";
  }
  return "?";
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Json parse_document() {
    skip_ws();
    Json v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) error(pos_, "end of input after the JSON value");
    return v;
  }

 private:
  // "JSON parse error at byte 12: expected ':' after an object key, got 'x'"
  [[noreturn]] void error(size_t at, std::string_view expected) const {
    std::string got;
    if (at >= s_.size()) {
      got = "end of input";
    } else {
      unsigned char c = s_[at];
      if (c >= 0x20 && c < 0x7F) {
        got = std::string("'") + char(c) + "'";
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "0x%02X", c);
        got = std::string("byte ") + buf;
      }
    }
    fail("JSON parse error at byte ", at, ": expected ", expected, ", got ", got);
  }
  [[noreturn]] void error_msg(size_t at, std::string_view msg) const {
    fail("JSON parse error at byte ", at, ": ", msg);
  }

  bool at_end() const { return pos_ >= s_.size(); }
  // The next byte, or -1 at the end (a NUL byte in the text is 0, not the end).
  int peek() const { return at_end() ? -1 : static_cast<unsigned char>(s_[pos_]); }
  void skip_ws() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r') ++pos_;
  }
  void expect(char c, std::string_view what) {
    if (peek() != c) error(pos_, what);
    ++pos_;
  }

  Json parse_value(int depth) {
    switch (peek()) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Json(parse_string());
      case 't': return parse_literal("true", Json(true));
      case 'f': return parse_literal("false", Json(false));
      case 'n': return parse_literal("null", Json());
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        error(pos_, "a JSON value (object, array, string, number, true, false or null)");
    }
  }

  void check_depth(int depth) const {
    if (depth > kMaxJsonDepth)
      error_msg(pos_, "arrays/objects nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }

  Json parse_object(int depth) {
    check_depth(depth);
    ++pos_;  // '{'
    Json::Object members;
    std::unordered_set<std::string> seen;  // objects keep order in a vector; this catches repeats
    skip_ws();
    if (peek() == '}') {
      ++pos_;
      return Json(std::move(members));
    }
    while (true) {
      skip_ws();
      size_t key_pos = pos_;
      if (peek() != '"') error(pos_, members.empty() ? "a string key or '}'" : "a string key");
      std::string key = parse_string();
      if (!seen.insert(key).second) error_msg(key_pos, "duplicate key " + json_quote(key));
      skip_ws();
      expect(':', "':' after an object key");
      skip_ws();
      Json value = parse_value(depth);
      members.emplace_back(std::move(key), std::move(value));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}', "',' or '}' after an object member");
      return Json(std::move(members));
    }
  }

  Json parse_array(int depth) {
    check_depth(depth);
    ++pos_;  // '['
    Json::Array items;
    skip_ws();
    if (peek() == ']') {
      ++pos_;
      return Json(std::move(items));
    }
    while (true) {
      skip_ws();
      items.push_back(parse_value(depth));
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']', "',' or ']' after an array element");
      return Json(std::move(items));
    }
  }

  Json parse_literal(std::string_view word, Json value) {
    if (s_.substr(pos_, word.size()) != word) {
      std::string expected = "'";
      expected.append(word).append("'");
      error(pos_, expected);
    }
    pos_ += word.size();
    return value;
  }

  // Validates the grammar first (from_chars alone would accept "01", "1." or "+1"), then converts.
  Json parse_number() {
    size_t start = pos_;
    auto digits = [&] {
      size_t n = 0;
      for (; peek() >= '0' && peek() <= '9'; ++pos_) ++n;
      return n;
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else if (digits() == 0) {
      error(pos_, "a digit");
    }
    if (peek() == '.') {
      ++pos_;
      if (digits() == 0) error(pos_, "a digit after the decimal point");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) error(pos_, "a digit in the exponent");
    }
    double d = 0;
    auto [ptr, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, d);
    if (ec != std::errc() || ptr != s_.data() + pos_)
      error_msg(start, "number " + std::string(s_.substr(start, pos_ - start)) + " is out of range of a 64-bit float");
    return Json(d);
  }

  uint32_t parse_hex4() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      int c = peek();
      int h = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (h < 0) error(pos_, "4 hex digits after \\u");
      v = v * 16 + uint32_t(h);
    }
    return v;
  }

  // Copies one UTF-8 encoded character, rejecting overlong forms, surrogates and code points
  // past U+10FFFF, so every string a Json holds is valid UTF-8.
  void copy_utf8_char(std::string& out) {
    size_t start = pos_;
    unsigned char lead = s_[pos_];
    int len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0;
    if (len == 0 || lead > 0xF4) error_msg(start, "invalid UTF-8 in string");
    uint32_t cp = lead & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      if (start + i >= s_.size() || (static_cast<unsigned char>(s_[start + i]) & 0xC0) != 0x80)
        error_msg(start, "invalid UTF-8 in string (truncated sequence)");
      cp = (cp << 6) | (static_cast<unsigned char>(s_[start + i]) & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      error_msg(start, "invalid UTF-8 in string (overlong form, surrogate or beyond U+10FFFF)");
    out.append(s_.substr(start, size_t(len)));
    pos_ += size_t(len);
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) error(pos_, "'\"' to close the string");
      unsigned char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) error(pos_, "a string character (control characters must be escaped)");
      if (c >= 0x80) {
        copy_utf8_char(out);
        continue;
      }
      if (c != '\\') {
        out += char(c);
        ++pos_;
        continue;
      }
      size_t esc = pos_++;
      int e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parse_hex4();
          // Characters beyond the BMP arrive as a UTF-16 surrogate pair: \uD83D\uDE00.
          if (cp >= 0xDC00 && cp <= 0xDFFF) error_msg(esc, "unpaired low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(pos_, 2) != "\\u") error(pos_, "a \\u low surrogate after a high surrogate");
            pos_ += 2;
            uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) error_msg(pos_ - 6, "expected a low surrogate (\\uDC00-\\uDFFF)");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: error(pos_ - 1, "an escape (one of \" \\ / b f n r t u)");
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

void dump_number(std::string& out, double d) {
  if (std::trunc(d) == d && std::fabs(d) <= kMaxExactInt) {
    out += std::to_string(static_cast<int64_t>(d));
    return;
  }
  char buf[32];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest form that reads back exactly
  out.append(buf, ptr);
}

}  // namespace

Json::Json(double d) : v_(d) {
  if (!std::isfinite(d)) fail("Json: cannot store ", d, " (JSON has no NaN or infinity)");
}

const char* Json::type_name() const { return type_name_of(type()); }

template <class T>
const T& Json::get(const char* expected) const {
  if (!std::holds_alternative<T>(v_)) fail("JSON: expected ", expected, ", got ", type_name());
  return std::get<T>(v_);
}

bool Json::is_int() const {
  if (!is_number()) return false;
  double d = std::get<double>(v_);
  return std::trunc(d) == d && std::fabs(d) <= kMaxExactInt;
}

bool Json::as_bool() const { return get<bool>("a bool"); }
double Json::as_number() const { return get<double>("a number"); }
const std::string& Json::as_string() const { return get<std::string>("a string"); }
const Json::Array& Json::as_array() const { return get<Array>("an array"); }
const Json::Object& Json::as_object() const { return get<Object>("an object"); }
Json::Array& Json::as_array() { return const_cast<Array&>(std::as_const(*this).as_array()); }
Json::Object& Json::as_object() { return const_cast<Object&>(std::as_const(*this).as_object()); }

int64_t Json::as_int() const {
  double d = as_number();
  if (!is_int()) fail("JSON: expected an integer (within +-2^53), got ", dump());
  return static_cast<int64_t>(d);
}

size_t Json::size() const {
  if (is_array()) return std::get<Array>(v_).size();
  if (is_object()) return std::get<Object>(v_).size();
  fail("JSON: expected an array or object, got ", type_name());
}

const Json& Json::operator[](size_t i) const {
  const Array& a = as_array();
  if (i >= a.size()) fail("JSON: array index ", i, " out of range (size ", a.size(), ")");
  return a[i];
}

const Json* Json::find(std::string_view key) const {
  for (const auto& [k, v] : as_object())
    if (k == key) return &v;
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  const Json* v = find(key);
  if (!v) fail("JSON: object has no key ", json_quote(key));
  return *v;
}

Json& Json::set(std::string key, Json value) {
  Object& o = as_object();
  for (auto& [k, v] : o) {
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  }
  o.emplace_back(std::move(key), std::move(value));
  return *this;
}

Json& Json::push_back(Json value) {
  as_array().push_back(std::move(value));
  return *this;
}

bool Json::operator==(const Json& other) const { return v_ == other.v_; }

std::string json_quote(std::string_view text) {
  const std::string s = valid_utf8(std::string(text));  // JSON text is UTF-8, a file name need not be
  std::string out = "\"";
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
  return out;
}

void Json::dump_to(std::string& out, int indent, int level) const {
  // Between members: nothing when compact, else a newline and the next level's indentation.
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(size_t(indent) * size_t(lvl), ' ');
  };
  switch (type()) {
    case Type::null: out += "null"; break;
    case Type::boolean: out += std::get<bool>(v_) ? "true" : "false"; break;
    case Type::number: dump_number(out, std::get<double>(v_)); break;
    case Type::string: out += json_quote(std::get<std::string>(v_)); break;
    case Type::array: {
      const Array& a = std::get<Array>(v_);
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        a[i].dump_to(out, indent, level + 1);
      }
      if (!a.empty()) newline(level);
      out += ']';
      break;
    }
    case Type::object: {
      const Object& o = std::get<Object>(v_);
      out += '{';
      for (size_t i = 0; i < o.size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        out += json_quote(o[i].first);
        out += indent < 0 ? ":" : ": ";
        o[i].second.dump_to(out, indent, level + 1);
      }
      if (!o.empty()) newline(level);
      out += '}';
      break;
    }
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

Json parse_json(std::string_view text) { return Parser(text).parse_document(); }

}  // namespace ocrt
