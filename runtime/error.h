// The one exception type of ocrt. Every check that fails throws an Error whose message names
// the operation (or file, or argument) and what was expected, so that the user can act on it.
#pragma once
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ocrt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Formats a shape as [2, 3, 4].
inline std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

// Builds a message from any streamable pieces: fail("conv2d: stride must be >= 1, got ", s).
template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}

}  // namespace ocrt

#define OCRT_CHECK(cond, ...)              \
  do {                                     \
    if (!(cond)) ::ocrt::fail(__VA_ARGS__); \
  } while (0)
