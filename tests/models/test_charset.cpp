// Charsets and UTF-8: the ASCII default, files (space line, CRLF, duplicates, multi-character
// lines), encode/decode with unknown characters reported (never dropped), invalid UTF-8.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "models/charset.h"
#include "temp_dir.h"

using namespace ocrt::nn;

namespace {
std::string write_file(const std::string& name, const std::string& text) {
  const auto path = (ocrt::testing::process_temp_dir("charset") / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}
}  // namespace

TEST_CASE("the default charset is the 95 printable ASCII characters", "[charset]") {
  Charset cs = Charset::ascii();
  CHECK(cs.size() == 95);
  CHECK(cs.num_classes() == 96);
  CHECK(cs.encode_or_throw(" ~A") == std::vector<int64_t>{1, 95, 34});
  CHECK(cs.decode({34, 0, 35, 1}) == "AB ");
}

TEST_CASE("charset files: one character per line, space line, CRLF, UTF-8", "[charset]") {
  Charset cs = Charset::from_file(write_file("ok.txt", "a\r\n \r\n\xc3\xa9\n\n\xe4\xb8\xad\n"));
  CHECK(cs.chars() == std::vector<std::string>{"a", " ", "\xc3\xa9", "\xe4\xb8\xad"});
  std::vector<int64_t> classes;
  std::vector<std::string> unknown;
  CHECK(cs.encode("a \xc3\xa9\xe4\xb8\xad", classes));
  CHECK(classes == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(cs.decode(classes) == "a \xc3\xa9\xe4\xb8\xad");
  CHECK(!cs.encode("ab\xc3\xa9z", classes, &unknown));
  CHECK(unknown == std::vector<std::string>{"b", "z"});
  CHECK_THROWS_WITH(cs.encode_or_throw("abz"), Catch::Contains("not in the charset: 'b', 'z'"));
  CHECK(Charset::from_chars(cs.chars()).to_text() == cs.to_text());
}

TEST_CASE("bad charsets and bad UTF-8 are reported with the line or byte", "[charset]") {
  CHECK_THROWS_WITH(Charset::from_file(write_file("dup.txt", "a\nb\na\n")), Catch::Contains("line 3: 'a' is already on line 1"));
  CHECK_THROWS_WITH(Charset::from_file(write_file("multi.txt", "a\nbc\n")),
                    Catch::Contains("line 2: expected one character per line"));
  CHECK_THROWS_WITH(Charset::from_file(write_file("empty.txt", "\n\n")), Catch::Contains("no characters"));
  CHECK_THROWS_WITH(Charset::from_file("/nonexistent/charset.txt"), Catch::Contains("cannot open"));
  CHECK_THROWS_WITH(Charset::from_file(write_file("bad.txt", "a\n\xff\n")), Catch::Contains("line 2: invalid UTF-8 at byte 0"));
  CHECK_THROWS_WITH(utf8_chars("ab\xc3"), Catch::Contains("ends inside a character"));
  CHECK_THROWS_WITH(utf8_chars("\xc0\xaf"), Catch::Contains("overlong"));
  CHECK_THROWS_WITH(utf8_chars("\xed\xa0\x80"), Catch::Contains("not a Unicode scalar value"));
  CHECK_THROWS_WITH(utf8_chars("a\xe4" "bc"), Catch::Contains("invalid UTF-8 at byte 2 (expected a continuation byte)"));
  CHECK(utf8_chars("\xf0\x9f\x98\x80x").size() == 2);
  CHECK_THROWS_WITH(Charset::ascii().decode({96}), Catch::Contains("class 96 is outside [0, 96)"));
}

TEST_CASE("a control character is refused in a charset file and has no form in one", "[charset]") {
  // "\r\r\n" is a line holding '\r' once its CRLF end is dropped: it used to load as a class
  // that to_text() then wrote as "\r\n", which reads back as an empty line.
  CHECK_THROWS_WITH(Charset::from_file(write_file("cr.txt", "a\n\r\r\n")),
                    Catch::Contains("line 2: a control character (byte 13) cannot be in a charset file"));
  CHECK_THROWS_WITH(Charset::from_file(write_file("tab.txt", "\t\n")), Catch::Contains("byte 9"));
  CHECK_THROWS_WITH(Charset::from_file(write_file("del.txt", "a\n\x7f\n")), Catch::Contains("byte 127"));
  // A model file's charset is JSON, which can hold one: writing it as a charset file says so.
  const Charset from_json = Charset::from_chars({"a", "\r"});
  CHECK_THROWS_WITH(from_json.to_text(), Catch::Contains("control character (byte 13) at class 2"));
  // Everything else round-trips through the file.
  const Charset ok = Charset::from_chars({"a", " ", "\xc3\xa9", "~"});
  CHECK(Charset::from_file(write_file("round.txt", ok.to_text())).chars() == ok.chars());
}
