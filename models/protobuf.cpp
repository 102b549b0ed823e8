// The protobuf wire-format encoder (see protobuf.h for the format).
#include "models/protobuf.h"

#include <cstring>

#include "runtime/error.h"

namespace ocrt::pb {

namespace {
constexpr uint32_t kMaxField = (1u << 29) - 1;  // field numbers take the tag's upper 29 bits
}  // namespace

void Writer::varint(uint64_t value) {
  while (value >= 0x80) {
    out_.push_back((char)(uint8_t)((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out_.push_back((char)(uint8_t)value);
}

void Writer::tag(uint32_t field, WireType type) {
  OCRT_CHECK(field >= 1 && field <= kMaxField, "protobuf: field number ", field, " is outside 1..", kMaxField);
  varint(((uint64_t)field << 3) | (uint32_t)type);
}

void Writer::fixed32(uint32_t bits) {
  for (int i = 0; i < 4; ++i) out_.push_back((char)(uint8_t)(bits >> (8 * i)));  // little-endian on any host
}

void Writer::int_field(uint32_t field, int64_t value) {
  tag(field, WireType::varint);
  varint((uint64_t)value);  // a negative value as its 64-bit two's complement: 10 bytes
}

void Writer::fixed32_field(uint32_t field, uint32_t bits) {
  tag(field, WireType::i32);
  fixed32(bits);
}

void Writer::float_field(uint32_t field, float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  fixed32_field(field, bits);
}

void Writer::bytes_field(uint32_t field, std::string_view bytes) {
  tag(field, WireType::len);
  varint(bytes.size());
  out_.append(bytes.data(), bytes.size());
}

void Writer::message_field(uint32_t field, const Writer& message) { bytes_field(field, message.bytes()); }

}  // namespace ocrt::pb
