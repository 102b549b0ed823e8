// Tests for runtime/safetensors.h: round trips of every dtype and odd shape, the exact byte
// layout of a small file, atomic writing, and one case per kind of damaged file the reader
// must refuse with a clear Error (the bad bytes are built here and written under /tmp).
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "runtime/safetensors.h"

using namespace ocrt;
using Catch::Contains;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    // A fresh name per folder (load_error makes many): mkdtemp, under the same prefix as
    // tests/temp_dir.h's folders.
    std::string tmpl = (std::filesystem::temp_directory_path() / "ocrt-test-safetensors-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return path + "/" + name; }
};

std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xFF);
  return s;
}

// A safetensors file from a header text and a data buffer (no padding, as a sloppy writer
// might produce; readers must accept that).
std::string st_bytes(const std::string& header, const std::string& data = "") {
  return u64_le(header.size()) + header + data;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(f.good());
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Writes `bytes` to a fresh file and returns what loading it throws ("" if it loads).
std::string load_error(const std::string& bytes) {
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  write_file(path, bytes);
  try {
    load_safetensors(path);
  } catch (const Error& e) {
    std::string msg = e.what();
    CHECK_THAT(msg, Contains(path));  // every message names the file
    return msg;
  }
  return "";
}

std::string f32_bytes(std::initializer_list<float> values) {
  std::string s;
  for (float v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
  return s;
}

const std::string kOne = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";  // an entry that is fine

}  // namespace

TEST_CASE("safetensors: round trip of every dtype and shape", "[safetensors]") {
  TempDir dir;
  Tensor base = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Tensor transposed = base.t();
  REQUIRE_FALSE(transposed.is_contiguous());
  std::vector<std::pair<std::string, Tensor>> in = {
      {"f32", Tensor::from_vector<float>({1.5f, -2.25f, 3e-8f, 1e30f, 0.f, -0.f}, {2, 3})},
      {"f64", Tensor::from_vector<double>({3.141592653589793, -1e-300, 2.0, 0.5}, {4})},
      {"i32", Tensor::from_vector<int32_t>({INT32_MIN, -1, INT32_MAX}, {3, 1})},
      {"i64", Tensor::from_vector<int64_t>({INT64_MIN, 0, INT64_MAX, 42}, {2, 2})},
      {"u8", Tensor::from_vector<uint8_t>({0, 1, 127, 128, 255}, {5})},
      {"i8", Tensor::from_vector<int8_t>({-127, -1, 0, 1, 127}, {5})},
      {"scalar", Tensor::from_vector<float>({7.0f}, {})},
      {"empty_2d", Tensor::empty({0, 3}, DType::f32)},
      {"empty_i64", Tensor::empty({0}, DType::i64)},
      {"transposed", transposed},
      {"narrowed", base.narrow(1, 1, 2)},  // a view with an offset and a gap between rows
      {"weight.with.dots/and/slashes", Tensor::from_vector<float>({1, 2}, {1, 1, 2})},
  };
  std::string path = dir.file("all.safetensors");
  save_safetensors(path, in);
  SafetensorsFile f = load_safetensors(path);
  REQUIRE(f.tensors.size() == in.size());
  CHECK(f.metadata.empty());
  for (size_t i = 0; i < in.size(); ++i) {
    INFO(in[i].first);
    const Tensor& a = in[i].second;
    const Tensor& b = f.tensors[i].second;
    CHECK(f.tensors[i].first == in[i].first);  // file order = the order given
    CHECK(b.dtype() == a.dtype());
    CHECK(b.shape() == a.shape());
    CHECK(b.device().is_cpu());
    CHECK(b.is_contiguous());
    switch (a.dtype()) {
      case DType::f32: CHECK(b.to_vector<float>() == a.to_vector<float>()); break;
      case DType::f64: CHECK(b.to_vector<double>() == a.to_vector<double>()); break;
      case DType::i32: CHECK(b.to_vector<int32_t>() == a.to_vector<int32_t>()); break;
      case DType::i64: CHECK(b.to_vector<int64_t>() == a.to_vector<int64_t>()); break;
      case DType::u8: CHECK(b.to_vector<uint8_t>() == a.to_vector<uint8_t>()); break;
      case DType::i8: CHECK(b.to_vector<int8_t>() == a.to_vector<int8_t>()); break;
    }
  }
  CHECK(f.get("transposed").to_vector<float>() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK(f.get("narrowed").to_vector<float>() == std::vector<float>{1, 2, 5, 6, 9, 10});
  CHECK(f.get("scalar").dim() == 0);
  CHECK(f.get("scalar").item() == 7.0);
  CHECK(f.contains("u8"));
  CHECK_FALSE(f.contains("nope"));
  // The loaded tensors own their memory: changing one does not touch the input.
  f.get("f32").data<float>()[0] = 99.f;
  CHECK(in[0].second.to_vector<float>()[0] == 1.5f);
}

TEST_CASE("safetensors: metadata round trip", "[safetensors]") {
  TempDir dir;
  std::map<std::string, std::string> meta = {
      {"arch", "crnn-s"},
      {"config", R"({"hidden": 128, "classes": [1, 2]})"},
      {"charset", "abc\n \t\"\\\xE2\x82\xAC"},
      {"empty", ""},
      {"format", "pt"},
  };
  std::string path = dir.file("meta.safetensors");
  save_safetensors(path, {{"w", Tensor::from_vector<float>({1, 2, 3})}}, meta);
  SafetensorsFile f = load_safetensors(path);
  CHECK(f.metadata == meta);
  CHECK(f.get("w").to_vector<float>() == std::vector<float>{1, 2, 3});

  // A file with only metadata and no tensors is valid too.
  save_safetensors(path, {}, {{"only", "meta"}});
  SafetensorsFile g = load_safetensors(path);
  CHECK(g.tensors.empty());
  CHECK(g.metadata.at("only") == "meta");
}

TEST_CASE("safetensors: byte-exact layout of a tiny file", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("tiny.safetensors");
  save_safetensors(path, {{"a", Tensor::from_vector<float>({1.0f, 2.0f})},
                          {"b", Tensor::from_vector<uint8_t>({7}, {1, 1})}});
  // 108 bytes of JSON, padded with 4 spaces to 112 (a multiple of 8), as the reference writer
  // does; then a's two floats and b's byte.
  std::string json = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"U8","shape":[1,1],"data_offsets":[8,9]}})";
  REQUIRE(json.size() == 108);
  std::string header = json + std::string(4, ' ');
  REQUIRE(header.size() == 112);
  std::string expected = std::string("\x70\0\0\0\0\0\0\0", 8) + header +
                         std::string("\x00\x00\x80\x3f\x00\x00\x00\x40\x07", 9);
  CHECK(read_file(path) == expected);

  // With metadata: "__metadata__" comes first, and the header is padded again.
  save_safetensors(path, {{"x", Tensor::from_vector<int32_t>({1})}}, {{"k", "v"}});
  std::string bytes = read_file(path);
  std::string json2 = R"({"__metadata__":{"k":"v"},"x":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})";
  REQUIRE(json2.size() == 79);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  CHECK(n == 80);
  CHECK(bytes.substr(8, 80) == json2 + std::string(1, ' '));
  CHECK(bytes.substr(88) == std::string("\x01\0\0\0", 4));
  CHECK(bytes.size() == 92);
}

TEST_CASE("safetensors: reads files from other writers (BOOL, no padding, gaps, key order)", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("other.safetensors");
  // Header keys in another order than the data, a BOOL tensor, 2 unused bytes between tensors,
  // an empty tensor whose offset sits inside another's range, and no padding.
  std::string header = R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[10,13]},)"
                       R"("z":{"shape":[0,5],"dtype":"F32","data_offsets":[4,4]},)"
                       R"("__metadata__":{"format":"pt"},)"
                       R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":"ignored"}})";
  write_file(path, st_bytes(header, f32_bytes({1.f, -1.f}) + "??" + std::string("\x01\x00\x01", 3)));
  SafetensorsFile f = load_safetensors(path);
  REQUIRE(f.tensors.size() == 3);
  CHECK(f.tensors[0].first == "m");
  CHECK(f.tensors[1].first == "z");
  CHECK(f.tensors[2].first == "w");
  CHECK(f.get("m").dtype() == DType::u8);
  CHECK(f.get("m").to_vector<uint8_t>() == std::vector<uint8_t>{1, 0, 1});
  CHECK(f.get("z").shape() == Shape{0, 5});
  CHECK(f.get("w").to_vector<float>() == std::vector<float>{1.f, -1.f});
  CHECK(f.metadata.at("format") == "pt");
  CHECK(f.name == path);
}

TEST_CASE("safetensors: parse_safetensors reads from memory", "[safetensors]") {
  std::string bytes = st_bytes("{" + ("\"w\":{" + kOne + "}") + "}   ", f32_bytes({5.f, 6.f}));
  SafetensorsFile f = parse_safetensors(bytes.data(), bytes.size(), "in-memory");
  CHECK(f.get("w").to_vector<float>() == std::vector<float>{5.f, 6.f});
  REQUIRE_THROWS_WITH(parse_safetensors(bytes.data(), 4, "in-memory"), Contains("'in-memory'"));
}

TEST_CASE("safetensors: get() on a missing name lists the names", "[safetensors]") {
  SafetensorsFile f;
  f.name = "model.safetensors";
  f.tensors = {{"fc.weight", Tensor::zeros({2, 2})}, {"fc.bias", Tensor::zeros({2})}};
  REQUIRE_THROWS_WITH(f.get("fc.wieght"), Contains("no tensor 'fc.wieght'") && Contains("fc.weight, fc.bias") &&
                                               Contains("model.safetensors"));
}

TEST_CASE("safetensors: writing replaces the file atomically and leaves no temp file", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("model.safetensors");
  write_file(path, "old contents");
  save_safetensors(path, {{"w", Tensor::from_vector<float>({1, 2})}});
  CHECK(load_safetensors(path).get("w").to_vector<float>() == std::vector<float>{1, 2});
  save_safetensors(path, {{"w", Tensor::from_vector<float>({3})}});
  CHECK(load_safetensors(path).get("w").to_vector<float>() == std::vector<float>{3});
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
    CHECK(e.path().filename() == "model.safetensors");
    ++files;
  }
  CHECK(files == 1);
}

TEST_CASE("safetensors: writer errors", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("w.safetensors");
  Tensor t = Tensor::zeros({2});
  REQUIRE_THROWS_WITH(save_safetensors(path, {{"a", t}, {"b", t}, {"a", t}}), Contains("'a' appears twice"));
  REQUIRE_THROWS_WITH(save_safetensors(path, {{"__metadata__", t}}), Contains("reserved"));
  REQUIRE_THROWS_WITH(save_safetensors(path, {{"u", Tensor()}}), Contains("undefined"));
  REQUIRE_THROWS_WITH(save_safetensors(path, {{"bad\xFF", t}}), Contains("valid UTF-8"));
  REQUIRE_THROWS_WITH(save_safetensors(path, {{"a", t}}, {{"k", "\xC3"}}), Contains("valid UTF-8"));
  CHECK_FALSE(std::filesystem::exists(path));  // nothing was written by the refused calls
  std::string missing_dir = dir.file("no/such/dir/w.safetensors");
  REQUIRE_THROWS_WITH(save_safetensors(missing_dir, {{"a", t}}),
                      Contains(missing_dir) && Contains("No such file or directory"));
  // A directory in the way of the rename: the temp file is removed and the error names both.
  std::filesystem::create_directory(dir.file("occupied"));
  std::filesystem::create_directory(dir.file("occupied/inner"));
  REQUIRE_THROWS_WITH(save_safetensors(dir.file("occupied"), {{"a", t}}),
                      Contains("cannot rename") && Contains(dir.file("occupied")));
  for (const auto& e : std::filesystem::directory_iterator(dir.path))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

// ---- damaged files: one case per kind of damage

TEST_CASE("safetensors bad file: missing or unreadable", "[safetensors]") {
  TempDir dir;
  REQUIRE_THROWS_WITH(load_safetensors(dir.file("nope.safetensors")),
                      Contains("cannot open") && Contains("No such file or directory") &&
                          Contains(dir.file("nope.safetensors")));
  REQUIRE_THROWS_WITH(load_safetensors(dir.path), Contains("is a directory"));
}

TEST_CASE("safetensors bad file: shorter than 8 bytes", "[safetensors]") {
  CHECK_THAT(load_error(""), Contains("only 0 bytes"));
  CHECK_THAT(load_error("\x05\x00\x00"), Contains("too short"));
}

TEST_CASE("safetensors bad file: header length past the end of the file", "[safetensors]") {
  CHECK_THAT(load_error(u64_le(1000) + "{}"), Contains("header length 1000 runs past the end of the file"));
  CHECK_THAT(load_error(u64_le(3) + "{}"), Contains("past the end"));
}

TEST_CASE("safetensors bad file: header length over 100 MB", "[safetensors]") {
  CHECK_THAT(load_error(u64_le(100000001) + "{}"), Contains("100 MB"));
  CHECK_THAT(load_error(u64_le(UINT64_MAX) + "{}"), Contains("larger than the 100 MB limit"));
  CHECK(load_error(u64_le(2) + "{}") == "");  // an empty header is a valid (empty) file
}

TEST_CASE("safetensors bad file: invalid JSON header", "[safetensors]") {
  CHECK_THAT(load_error(st_bytes("{\"w\":")), Contains("invalid JSON header") && Contains("byte 5"));
  CHECK_THAT(load_error(st_bytes("{} trailing")), Contains("invalid JSON header"));
  CHECK_THAT(load_error(st_bytes("{\"w\":{" + kOne + "},\"w\":{" + kOne + "}}", f32_bytes({1, 2}))),
             Contains("duplicate key \"w\""));
  CHECK_THAT(load_error(st_bytes(std::string("{\"\xFF\":1}"))), Contains("invalid UTF-8"));
}

TEST_CASE("safetensors bad file: header is not an object", "[safetensors]") {
  CHECK_THAT(load_error(st_bytes("[1, 2]")), Contains("header is a JSON array, expected an object"));
  CHECK_THAT(load_error(st_bytes("null")), Contains("expected an object"));
}

TEST_CASE("safetensors bad file: entry missing a field or with wrong types", "[safetensors]") {
  std::string data = f32_bytes({1, 2});
  CHECK_THAT(load_error(st_bytes(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", data)),
             Contains("tensor 'w'") && Contains("no \"dtype\""));
  CHECK_THAT(load_error(st_bytes(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", data)), Contains("no \"shape\""));
  CHECK_THAT(load_error(st_bytes(R"({"w":{"dtype":"F32","shape":[2]}})", data)), Contains("no \"data_offsets\""));
  CHECK_THAT(load_error(st_bytes(R"({"w":[1,2]})", data)), Contains("entry is a JSON array"));
  CHECK_THAT(load_error(st_bytes(R"({"w":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", data)),
             Contains("\"dtype\" must be a string"));
  CHECK_THAT(load_error(st_bytes(R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", data)),
             Contains("\"shape\" must be an array"));
  CHECK_THAT(load_error(st_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":"0-8"}})", data)),
             Contains("\"data_offsets\" must be [begin, end]"));
}

TEST_CASE("safetensors bad file: unknown dtype", "[safetensors]") {
  CHECK_THAT(load_error(st_bytes(R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", "abcd")),
             Contains("unsupported dtype \"F16\"") && Contains("not supported"));
  CHECK_THAT(load_error(st_bytes(R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})", "abcd")),
             Contains("\"BF16\""));
  CHECK_THAT(load_error(st_bytes(R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", "abcd")),
             Contains("unsupported dtype \"f32\""));
}

TEST_CASE("safetensors bad file: negative or non-integer shape dims", "[safetensors]") {
  std::string data = f32_bytes({1, 2});
  for (const char* shape : {"[-2]", "[2.5]", "[\"2\"]", "[null]", "[1e300]", "[2, -1]"}) {
    INFO(shape);
    std::string header = std::string(R"({"w":{"dtype":"F32","shape":)") + shape + R"(,"data_offsets":[0,8]}})";
    CHECK_THAT(load_error(st_bytes(header, data)), Contains("non-negative integers"));
  }
}

TEST_CASE("safetensors bad file: messages quote hostile values only in part", "[safetensors]") {
  std::string dims(20001, '1');  // 1,1,...,1
  for (size_t i = 1; i < dims.size(); i += 2) dims[i] = ',';
  std::string msg = load_error(st_bytes(R"({"w":{"dtype":"F32","shape":[-1,)" + dims + R"(],"data_offsets":[0,0]}})"));
  CHECK_THAT(msg, Contains("non-negative integers") && Contains("..."));
  CHECK(msg.size() < 500);
}

TEST_CASE("safetensors bad file: shape so large that its size overflows", "[safetensors]") {
  // 2^31 * 2^31 * 2^2 = 2^64 elements: wraps to 0 in 64-bit arithmetic, which would match
  // data_offsets [0, 0] if the product were not checked.
  std::string h1 = R"({"w":{"dtype":"F32","shape":[2147483648,2147483648,4],"data_offsets":[0,0]}})";
  CHECK_THAT(load_error(st_bytes(h1)), Contains("too large"));
  // The element count (2^62) fits in 64 bits but the byte count (x8) does not.
  std::string h2 = R"({"w":{"dtype":"F64","shape":[4503599627370496,1024],"data_offsets":[0,0]}})";
  CHECK_THAT(load_error(st_bytes(h2)), Contains("too large"));
  // Even with a zero dim (numel 0), huge dims are refused: strides would overflow.
  std::string h3 = R"({"w":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})";
  CHECK_THAT(load_error(st_bytes(h3)), Contains("too large"));
}

TEST_CASE("safetensors bad file: data_offsets not two ordered integers", "[safetensors]") {
  std::string data = f32_bytes({1, 2});
  for (const char* offsets : {"[8,0]", "[0]", "[0,8,16]", "[0.5,8.5]", "[-8,0]", "[]", "[\"0\",\"8\"]", "[0,1e300]"}) {
    INFO(offsets);
    std::string header = std::string(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":)") + offsets + "}}";
    CHECK_THAT(load_error(st_bytes(header, data)), Contains("data_offsets") && Contains("0 <= begin <= end"));
  }
}

TEST_CASE("safetensors bad file: data_offsets out of range of the data buffer", "[safetensors]") {
  // A truncated file: the header promises 8 bytes, 6 are there.
  CHECK_THAT(load_error(st_bytes("{\"w\":{" + kOne + "}}", "123456")),
             Contains("run past the end of the 6-byte data buffer"));
  std::string h = R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[9007199254740991,9007199254740992]}})";
  CHECK_THAT(load_error(st_bytes(h, "1234")), Contains("past the end"));
}

TEST_CASE("safetensors bad file: byte size does not match the shape", "[safetensors]") {
  std::string data = f32_bytes({1, 2, 3, 4});
  CHECK_THAT(load_error(st_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", data)),
             Contains("shape [2] of dtype F32 needs 8 bytes") && Contains("hold 16"));
  CHECK_THAT(load_error(st_bytes(R"({"w":{"dtype":"I64","shape":[],"data_offsets":[0,4]}})", data)),
             Contains("needs 8 bytes"));
}

TEST_CASE("safetensors bad file: overlapping tensors", "[safetensors]") {
  std::string data = f32_bytes({1, 2, 3, 4});
  std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  CHECK_THAT(load_error(st_bytes(h, data)), Contains("'a' [0, 8] and 'b' [4, 12] overlap"));
  // Two names for the very same bytes are refused too.
  std::string same = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                     R"("b":{"dtype":"I32","shape":[2],"data_offsets":[8,16]}})";
  CHECK_THAT(load_error(st_bytes(same, data)), Contains("overlap"));
}

TEST_CASE("safetensors bad file: __metadata__ with non-string values", "[safetensors]") {
  std::string data = f32_bytes({1, 2});
  CHECK_THAT(load_error(st_bytes("{\"__metadata__\":{\"epochs\":10},\"w\":{" + kOne + "}}", data)),
             Contains("__metadata__ value for key \"epochs\" must be a string, got 10"));
  CHECK_THAT(load_error(st_bytes("{\"__metadata__\":{\"cfg\":{\"a\":1}}}")), Contains("got {\"a\":1}"));
  CHECK_THAT(load_error(st_bytes("{\"__metadata__\":[\"a\"]}")), Contains("__metadata__ is a JSON array"));
}

// Whatever the damage, the reader answers with an Error or a valid file: never a crash, a hang
// or another exception type (run this under the sanitizers to catch out-of-bounds reads).
TEST_CASE("safetensors: truncated and corrupted files never crash the reader", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("good.safetensors");
  save_safetensors(path,
                   {{"a", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
                    {"b", Tensor::from_vector<int64_t>({7, 8})},
                    {"c", Tensor::from_vector<uint8_t>({1}, {})}},
                   {{"arch", "test"}});
  const std::string good = read_file(path);
  auto try_parse = [](const std::string& bytes) {
    try {
      parse_safetensors(bytes.data(), bytes.size(), "fuzz");
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  REQUIRE(try_parse(good));
  for (size_t n = 0; n < good.size(); ++n) {
    INFO("truncated to " << n << " bytes");
    CHECK_FALSE(try_parse(good.substr(0, n)));  // every tensor's data ends at the file's end
  }
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bad = good;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly hit the length field and the header, where the structure is.
      size_t at = rng() % 4 == 0 ? rng() % bad.size() : rng() % std::min<size_t>(bad.size(), 120);
      bad[at] = rng() % 2 ? char(rng() % 256) : "0123456789[]{},:\"-e. "[rng() % 21];
    }
    REQUIRE_NOTHROW(try_parse(bad));
  }
}
