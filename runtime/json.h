// A minimal JSON value, parser and printer. ocrt needs JSON in a few places that must not pull
// in a dependency: the safetensors header, the architecture config stored in a model file's
// metadata, and the JSON-lines output of ocrt-infer.
//
// Numbers are doubles, as in JavaScript: integers are exact up to 2^53 and are printed without a
// decimal point, so shapes and byte offsets survive a round trip. Objects keep their keys in
// insertion order (a file written twice is byte-identical, and headers read in file order); key
// lookup is a linear scan, which is fine for the small objects ocrt deals with. Parsing rejects
// duplicate keys, invalid UTF-8, trailing garbage and nesting deeper than kMaxJsonDepth, and
// every error names the byte offset and what was expected.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/error.h"

namespace ocrt {

constexpr int kMaxJsonDepth = 512;

class Json {
 public:
  enum class Type { null, boolean, number, string, array, object };  // same order as Value
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : v_(b) {}
  Json(double d);  // NaN and infinities are refused: JSON cannot hold them
  // Any integer type; refused when the double would not hold it exactly (beyond +-2^53).
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Json(T i) : v_(exact_double(i)) {}
  Json(const char* s) : v_(std::string(s)) {}
  Json(std::string s) : v_(std::move(s)) {}
  Json(std::string_view s) : v_(std::string(s)) {}
  Json(Array a) : v_(std::move(a)) {}
  Json(Object o) : v_(std::move(o)) {}
  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }

  Type type() const { return static_cast<Type>(v_.index()); }
  const char* type_name() const;
  bool is_null() const { return type() == Type::null; }
  bool is_bool() const { return type() == Type::boolean; }
  bool is_number() const { return type() == Type::number; }
  bool is_string() const { return type() == Type::string; }
  bool is_array() const { return type() == Type::array; }
  bool is_object() const { return type() == Type::object; }
  // A number with no fractional part that as_int() accepts.
  bool is_int() const;

  // Typed access; each throws an Error naming the expected and actual type.
  bool as_bool() const;
  double as_number() const;
  int64_t as_int() const;  // also throws when the number is not an integer within +-2^53
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;
  Array& as_array();
  Object& as_object();

  // Arrays and objects: number of elements / members.
  size_t size() const;
  // Array element, bounds-checked.
  const Json& operator[](size_t i) const;
  // Object member: at() throws naming the missing key, find() returns nullptr.
  const Json& at(std::string_view key) const;
  const Json* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  // Building: set() replaces an existing key in place or appends a new one.
  Json& set(std::string key, Json value);
  Json& push_back(Json value);

  // indent < 0: compact, one line. indent >= 0: one member per line, nested by `indent` spaces.
  std::string dump(int indent = -1) const;

  // Deep equality; object members are compared in order.
  bool operator==(const Json& other) const;

 private:
  template <std::integral T>
  static double exact_double(T i) {
    constexpr int64_t kMax = int64_t(1) << 53;
    bool ok;
    if constexpr (std::is_signed_v<T>) {
      int64_t v = i;
      ok = v >= -kMax && v <= kMax;
    } else {
      uint64_t v = i;
      ok = v <= static_cast<uint64_t>(kMax);
    }
    if (!ok) fail("Json: integer ", i, " cannot be stored exactly (JSON numbers are exact up to 2^53)");
    return static_cast<double>(i);
  }
  // The alternative T of v_, or an Error naming what was expected and the actual type.
  template <class T>
  const T& get(const char* expected) const;
  void dump_to(std::string& out, int indent, int level) const;

  std::variant<std::monostate, bool, double, std::string, Array, Object> v_;
};

// Parses a complete JSON text (RFC 8259). Throws Error("JSON parse error at byte N: expected
// ..."); whitespace may surround the value, anything else after it is an error.
Json parse_json(std::string_view text);

// The JSON string literal for s, quotes included (escapes ", \ and control characters; a byte
// that is not part of valid UTF-8 is written as U+FFFD, so that the output is always JSON).
std::string json_quote(std::string_view s);

}  // namespace ocrt
