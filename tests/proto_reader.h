// A protobuf wire-format reader for tests: it splits a message into its fields, so a test can
// read back what models/protobuf.h and models/onnx.h wrote without a protobuf library. It is
// written from the wire-format rules (protobuf.h's top comment), apart from the encoder, and
// fails a test (throws) on anything malformed: a truncated varint or payload, an unknown wire
// type.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ocrt::testing {

struct ProtoField {
  uint32_t number = 0;
  uint32_t wire = 0;        // 0 varint, 1 I64, 2 LEN, 5 I32
  uint64_t varint = 0;      // wire 0
  uint64_t fixed = 0;       // wire 1 and 5
  std::string_view bytes;   // wire 2
  int64_t as_int() const { return (int64_t)varint; }
  float as_float() const {
    const uint32_t bits = (uint32_t)fixed;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

inline uint64_t read_varint(std::string_view s, size_t& pos) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (pos >= s.size()) throw std::runtime_error("protobuf: truncated varint");
    const uint8_t b = (uint8_t)s[pos++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  throw std::runtime_error("protobuf: varint longer than 10 bytes");
}

inline std::vector<ProtoField> proto_fields(std::string_view s) {
  std::vector<ProtoField> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const uint64_t tag = read_varint(s, pos);
    ProtoField f;
    f.number = (uint32_t)(tag >> 3);
    f.wire = (uint32_t)(tag & 7);
    if (f.number == 0) throw std::runtime_error("protobuf: field number 0");
    auto take = [&](size_t n) {
      if (s.size() - pos < n) throw std::runtime_error("protobuf: truncated payload");
      std::string_view v = s.substr(pos, n);
      pos += n;
      return v;
    };
    if (f.wire == 0) {
      f.varint = read_varint(s, pos);
    } else if (f.wire == 1 || f.wire == 5) {
      const std::string_view v = take(f.wire == 1 ? 8 : 4);
      for (size_t i = 0; i < v.size(); ++i) f.fixed |= (uint64_t)(uint8_t)v[i] << (8 * i);
    } else if (f.wire == 2) {
      f.bytes = take(read_varint(s, pos));
    } else {
      throw std::runtime_error("protobuf: unknown wire type " + std::to_string(f.wire));
    }
    out.push_back(f);
  }
  return out;
}

// Every field `number` of message s, in order.
inline std::vector<ProtoField> proto_all(std::string_view s, uint32_t number) {
  std::vector<ProtoField> out;
  for (const auto& f : proto_fields(s))
    if (f.number == number) out.push_back(f);
  return out;
}

// The one field `number` of message s (throws when it is absent or repeated).
inline ProtoField proto_one(std::string_view s, uint32_t number) {
  const auto all = proto_all(s, number);
  if (all.size() != 1)
    throw std::runtime_error("protobuf: field " + std::to_string(number) + " occurs " + std::to_string(all.size()) +
                             " times, expected once");
  return all[0];
}

}  // namespace ocrt::testing
