#include "runtime/text.h"

namespace ocrt {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

namespace {
constexpr uint32_t kReplacement = 0xFFFD;
}  // namespace

std::vector<uint32_t> utf8_code_points(const std::string& s) {
  std::vector<uint32_t> out;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    uint32_t cp = kReplacement;
    size_t len = 1;
    if (c < 0x80) {
      cp = c;
    } else {
      const size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
      bool ok = need > 0 && i + need <= n;
      for (size_t k = 1; ok && k < need; ++k) ok = (p[i + k] & 0xC0) == 0x80;
      if (ok) {
        cp = need == 2 ? (c & 0x1F) : need == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t k = 1; k < need; ++k) cp = (cp << 6) | (p[i + k] & 0x3F);
        const uint32_t least = need == 2 ? 0x80 : need == 3 ? 0x800 : 0x10000;
        if (cp < least || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacement;
        else len = need;
      }
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::vector<uint32_t> xml_code_points(const std::string& text) {
  std::vector<uint32_t> cps = utf8_code_points(text);
  for (uint32_t& cp : cps)
    if ((cp < 0x20 && cp != '\t' && cp != '\n') || cp == 0x7F || cp == 0xFFFE || cp == 0xFFFF) cp = kReplacement;
  return cps;
}

std::string valid_utf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (uint32_t cp : utf8_code_points(text)) append_utf8(out, cp);
  return out;
}

void append_xml_escaped(std::string& out, uint32_t cp) {
  switch (cp) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&#39;"; break;
    default: append_utf8(out, cp);
  }
}

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (uint32_t cp : xml_code_points(text)) append_xml_escaped(out, cp);
  return out;
}

}  // namespace ocrt
