// UTF-8 text going out: repaired for JSON (which must be UTF-8) and escaped for XML and HTML
// (the training report, hOCR, ALTO and PAGE XML): any bytes in, well-formed output.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ocrt {

// The code points of a text; a byte that does not start a valid UTF-8 sequence (overlong forms,
// surrogates and values past U+10FFFF included) becomes U+FFFD.
std::vector<uint32_t> utf8_code_points(const std::string& text);

// The text with every byte that utf8_code_points replaces written as U+FFFD: what JSON, which
// must be UTF-8, can carry (a file name on Linux is any bytes).
std::string valid_utf8(const std::string& text);

// utf8_code_points, and the characters XML 1.0 cannot hold (controls other than tab and newline, U+007F, U+FFFE, U+FFFF): text read
// from a hostile file must not break the document it is written into.
std::vector<uint32_t> xml_code_points(const std::string& text);

// Appends code point cp as UTF-8.
void append_utf8(std::string& out, uint32_t cp);

// Appends cp with & < > " ' written as entities (safe in element text and in attribute values
// quoted either way).
void append_xml_escaped(std::string& out, uint32_t cp);

// xml_code_points, escaped: text for an XML or HTML element or attribute.
std::string xml_escape(const std::string& text);

}  // namespace ocrt
