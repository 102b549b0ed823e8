// Flag-value parsing shared by the binaries (ocrt-train, ocrt-synth, ocrt-infer): each helper
// throws an Error that names the flag and quotes the text it could not use.
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/error.h"

namespace ocrt::cli {

inline int64_t parse_int(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(text.c_str(), &end, 10);
  OCRT_CHECK(!text.empty() && *end == '\0' && errno == 0, flag, ": expected an integer, got '", text, "'");
  return x;
}

// An unsigned 64-bit value (seeds): a leading minus is refused, not wrapped.
inline uint64_t parse_u64(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(text.c_str(), &end, 10);
  OCRT_CHECK(!text.empty() && text[0] != '-' && *end == '\0' && errno == 0, flag,
             ": expected an integer in [0, 2^64 - 1], got '", text, "'");
  return x;
}

inline double parse_double(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  OCRT_CHECK(!text.empty() && *end == '\0', flag, ": expected a number, got '", text, "'");
  return x;
}

// "a,b,,c" -> {"a", "b", "c"}: empty items are dropped.
inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace ocrt::cli
