// The charset: which characters a recogniser reads, and the mapping between text and CTC
// classes (class 0 is the blank, character k of the charset is class k + 1).
//
// Text is UTF-8; a "character" is one Unicode code point. Files are PaddleOCR dictionaries: one
// character per line, UTF-8, a line holding a single space is the space character.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ocrt::nn {

// Splits UTF-8 text into its code points (each as its UTF-8 bytes). Throws for invalid UTF-8
// (bad lead or continuation bytes, overlong forms, surrogates, truncation), naming the byte
// offset; `what` names the text in the message (a file and line, say).
std::vector<std::string> utf8_chars(const std::string& text, const std::string& what = "text");

class Charset {
 public:
  // The 95 printable ASCII characters, space (0x20) to tilde (0x7E): the default.
  static Charset ascii();
  // One character per line; empty lines are skipped, a trailing '\r' is dropped. Duplicates and
  // lines of more than one character, and control characters, are errors naming the line.
  static Charset from_file(const std::string& path);
  // From a list of characters (each one code point); duplicates are errors.
  static Charset from_chars(const std::vector<std::string>& chars);

  int64_t size() const { return (int64_t)chars_.size(); }  // characters, without the blank
  int64_t num_classes() const { return size() + 1; }      // with the blank
  const std::vector<std::string>& chars() const { return chars_; }
  bool contains(const std::string& ch) const { return index_.count(ch) > 0; }

  // Text -> classes (1-based). Characters not in the charset are never dropped: they are
  // listed in *unknown (when given) and the function returns false.
  bool encode(const std::string& text, std::vector<int64_t>& classes, std::vector<std::string>* unknown = nullptr) const;
  // Like encode, but throws listing the unknown characters.
  std::vector<int64_t> encode_or_throw(const std::string& text) const;
  // Classes -> text; blank (0) is skipped; a class outside [0, num_classes) throws.
  std::string decode(const std::vector<int64_t>& classes) const;

  // The charset file's text (one character per line); throws for a control character (a charset
  // from a model file's JSON may hold one), which a charset file cannot.
  std::string to_text() const;

 private:
  std::vector<std::string> chars_;
  std::unordered_map<std::string, int64_t> index_;  // character -> class
};

}  // namespace ocrt::nn
