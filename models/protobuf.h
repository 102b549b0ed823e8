// A protocol-buffers wire-format encoder: just what writing an ONNX file needs (models/onnx.h),
// so that ocrt depends on no protobuf library. It writes bytes; it knows no schema (the caller
// names each field by its number in the .proto file).
//
// The wire format (protobuf's "Encoding" specification): a message is a sequence of fields,
// each a tag, varint(field_number << 3 | wire_type), followed by its payload:
//   wire type 0 (VARINT)  int32, int64, uint64, bool, enum: base-128 varint, low 7 bits first, the
//                         high bit of each byte set when more follow. Negative int32/int64 are
//                         encoded as their 64-bit two's complement: always 10 bytes.
//   wire type 2 (LEN)     string, bytes, embedded messages, packed repeated scalars: a varint
//                         byte count, then the bytes.
//   wire type 5 (I32)     fixed32, float: 4 bytes, little-endian.
// Fields may come in any order, and a repeated field is written once per element (a proto2
// field such as onnx.proto's `repeated int64 dims` is not packed: no [packed = true]).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ocrt::pb {

enum class WireType : uint32_t { varint = 0, i64 = 1, len = 2, i32 = 5 };

class Writer {
 public:
  // The encoded message so far.
  const std::string& bytes() const { return out_; }
  size_t size() const { return out_.size(); }

  // Field writers. `field` is the field number of the .proto file (1 .. 2^29 - 1).
  void int_field(uint32_t field, int64_t value);     // int32, int64, enum, bool (VARINT)
  void float_field(uint32_t field, float value);     // float (I32)
  void fixed32_field(uint32_t field, uint32_t bits); // fixed32 (I32)
  void bytes_field(uint32_t field, std::string_view bytes);  // string, bytes (LEN)
  void message_field(uint32_t field, const Writer& message); // an embedded message (LEN)
  // Appends another writer's fields (the message is the concatenation of its fields, so
  // repeated fields collected apart can be joined).
  void append(const Writer& fields) { out_ += fields.out_; }

  // The raw pieces (the field writers are made of these).
  void tag(uint32_t field, WireType type);
  void varint(uint64_t value);
  void fixed32(uint32_t bits);

 private:
  std::string out_;
};

}  // namespace ocrt::pb
