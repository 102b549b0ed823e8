// The protobuf wire-format encoder against known encodings: the worked examples of protobuf's
// "Encoding" guide (150 as field 1 is 08 96 01, "testing" as field 2 is 12 07 74 65 73 74 69 6e
// 67, an embedded message holding the first as field 3 is 1a 03 08 96 01), negative int64s as
// ten bytes, floats as little-endian IEEE 754, tags of fields past 15 in two bytes, and the
// field-number limits.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "models/protobuf.h"
#include "runtime/error.h"

using namespace ocrt;

namespace {

std::vector<uint8_t> bytes_of(const pb::Writer& w) { return std::vector<uint8_t>(w.bytes().begin(), w.bytes().end()); }

}  // namespace

TEST_CASE("protobuf: varints, low 7 bits first with the high bit as continuation", "[protobuf]") {
  auto varint = [](uint64_t v) {
    pb::Writer w;
    w.varint(v);
    return bytes_of(w);
  };
  CHECK(varint(0) == std::vector<uint8_t>{0x00});
  CHECK(varint(1) == std::vector<uint8_t>{0x01});
  CHECK(varint(127) == std::vector<uint8_t>{0x7f});
  CHECK(varint(128) == std::vector<uint8_t>{0x80, 0x01});
  CHECK(varint(150) == std::vector<uint8_t>{0x96, 0x01});
  CHECK(varint(300) == std::vector<uint8_t>{0xac, 0x02});
  CHECK(varint(UINT64_MAX) == std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
}

TEST_CASE("protobuf: the encoding guide's examples", "[protobuf]") {
  pb::Writer a;
  a.int_field(1, 150);
  CHECK(bytes_of(a) == std::vector<uint8_t>{0x08, 0x96, 0x01});

  pb::Writer b;
  b.bytes_field(2, "testing");
  CHECK(bytes_of(b) == std::vector<uint8_t>{0x12, 0x07, 0x74, 0x65, 0x73, 0x74, 0x69, 0x6e, 0x67});

  pb::Writer c;
  c.message_field(3, a);
  CHECK(bytes_of(c) == std::vector<uint8_t>{0x1a, 0x03, 0x08, 0x96, 0x01});

  // Fields written one after another; append joins two runs of fields.
  pb::Writer d;
  d.int_field(1, 150);
  d.append(b);
  CHECK(bytes_of(d) == std::vector<uint8_t>{0x08, 0x96, 0x01, 0x12, 0x07, 0x74, 0x65, 0x73, 0x74, 0x69, 0x6e, 0x67});
}

TEST_CASE("protobuf: int32 and int64 fields take negative values as ten bytes", "[protobuf]") {
  pb::Writer w;
  w.int_field(1, -1);
  CHECK(bytes_of(w) == std::vector<uint8_t>{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
  pb::Writer v;
  v.int_field(1, -2);
  CHECK(bytes_of(v) == std::vector<uint8_t>{0x08, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
  pb::Writer z;
  z.int_field(4, 0);  // a zero is still written (proto2 "has" the field)
  CHECK(bytes_of(z) == std::vector<uint8_t>{0x20, 0x00});
}

TEST_CASE("protobuf: floats and fixed32 as four little-endian bytes", "[protobuf]") {
  pb::Writer w;
  w.float_field(2, 1.0f);     // 0x3f800000
  w.float_field(1, -2.5f);    // 0xc0200000
  w.fixed32_field(5, 0x12345678u);
  CHECK(bytes_of(w) == std::vector<uint8_t>{0x15, 0x00, 0x00, 0x80, 0x3f, 0x0d, 0x00, 0x00, 0x20, 0xc0, 0x2d, 0x78,
                                            0x56, 0x34, 0x12});
}

TEST_CASE("protobuf: tags of fields past 15 take two bytes, field numbers are 1 .. 2^29 - 1", "[protobuf]") {
  pb::Writer w;
  w.int_field(16, 1);   // (16 << 3) | 0 = 128
  w.int_field(20, 7);   // AttributeProto.type: (20 << 3) | 0 = 160
  w.bytes_field(14, "");  // an empty string is a zero length
  CHECK(bytes_of(w) == std::vector<uint8_t>{0x80, 0x01, 0x01, 0xa0, 0x01, 0x07, 0x72, 0x00});

  pb::Writer big;
  big.int_field((1u << 29) - 1, 1);  // tag (2^29 - 1) << 3 = 0xfffffff8: five bytes
  CHECK(bytes_of(big) == std::vector<uint8_t>{0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01});
  CHECK_THROWS_AS(big.int_field(0, 1), Error);
  CHECK_THROWS_AS(big.int_field(1u << 29, 1), Error);
}

TEST_CASE("protobuf: a length past 127 bytes is a two-byte varint", "[protobuf]") {
  const std::string payload(200, 'x');
  pb::Writer w;
  w.bytes_field(9, payload);  // TensorProto.raw_data
  REQUIRE(w.size() == 3 + payload.size());
  CHECK(bytes_of(w)[0] == 0x4a);  // (9 << 3) | 2
  CHECK(bytes_of(w)[1] == 0xc8);  // 200 = 0b1_1001000: 0x48 | 0x80, then 0x01
  CHECK(bytes_of(w)[2] == 0x01);
  CHECK(w.bytes().substr(3) == payload);
}
