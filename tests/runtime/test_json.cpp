// Tests for runtime/json.h: round trips, number formatting, string escapes (incl. surrogate
// pairs and UTF-8 validation), accessors, and the parse errors a hand-edited config can hit.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "runtime/json.h"

using namespace ocrt;
using Catch::Contains;

TEST_CASE("json: parses scalars, arrays and objects", "[json]") {
  Json j = parse_json(R"( {"a": 1, "b": [true, false, null], "c": "x", "d": -2.5e3, "e": {}} )");
  REQUIRE(j.is_object());
  REQUIRE(j.size() == 5);
  CHECK(j.at("a").as_int() == 1);
  CHECK(j.at("b").is_array());
  CHECK(j.at("b")[0].as_bool() == true);
  CHECK(j.at("b")[1].as_bool() == false);
  CHECK(j.at("b")[2].is_null());
  CHECK(j.at("c").as_string() == "x");
  CHECK(j.at("d").as_number() == -2500.0);
  CHECK(j.at("e").is_object());
  CHECK(j.at("e").size() == 0);
  CHECK(j.find("zzz") == nullptr);
  CHECK(j.contains("a"));
  CHECK_FALSE(j.contains("A"));
  CHECK(parse_json("0").as_int() == 0);
  CHECK(parse_json("-0.0").as_number() == 0.0);
  CHECK(parse_json("1E2").as_number() == 100.0);
  CHECK(parse_json("1e-2").as_number() == 0.01);
  CHECK(parse_json("\"\"").as_string().empty());
  CHECK(parse_json("[]").size() == 0);
}

TEST_CASE("json: objects keep insertion order through dump and parse", "[json]") {
  Json j = Json::object();
  j.set("zeta", 1).set("alpha", 2).set("mid", Json::array());
  j.set("alpha", 3);  // replaced in place, not moved to the end
  CHECK(j.dump() == R"({"zeta":1,"alpha":3,"mid":[]})");
  Json back = parse_json(j.dump());
  REQUIRE(back.as_object().size() == 3);
  CHECK(back.as_object()[0].first == "zeta");
  CHECK(back.as_object()[1].first == "alpha");
  CHECK(back.as_object()[2].first == "mid");
  CHECK(back == j);
}

TEST_CASE("json: round trip of a nested document, compact and indented", "[json]") {
  const std::string text =
      R"({"name":"crnn","layers":[64,128,256],"lr":0.001,"flags":{"bn":true,"drop":null},"neg":-7,"s":"a\"b\\c\n"})";
  Json j = parse_json(text);
  CHECK(j.dump() == text);
  std::string pretty = j.dump(2);
  CHECK(parse_json(pretty) == j);
  CHECK(pretty.find("\n  \"layers\": [\n    64,\n") != std::string::npos);
  CHECK(Json::array().dump(2) == "[]");
  CHECK(Json::object().dump(2) == "{}");
  CHECK(parse_json(R"({"a":[1,{"b":2}]})").dump(1) == "{\n \"a\": [\n  1,\n  {\n   \"b\": 2\n  }\n ]\n}");
}

TEST_CASE("json: integers are exact up to 2^53 and print without a decimal point", "[json]") {
  CHECK(Json(3).dump() == "3");
  CHECK(Json(-42).dump() == "-42");
  CHECK(Json(3.0).dump() == "3");
  CHECK(Json(size_t(123456789)).dump() == "123456789");
  const int64_t big = (int64_t(1) << 53);
  CHECK(Json(big).dump() == "9007199254740992");
  CHECK(Json(-big).dump() == "-9007199254740992");
  CHECK(parse_json("9007199254740992").as_int() == big);
  CHECK(parse_json("9007199254740991").as_int() == big - 1);
  CHECK(parse_json("-9007199254740991").as_int() == -(big - 1));
  // Past 2^53 doubles skip integers: constructing or reading one as int is refused.
  REQUIRE_THROWS_WITH(Json(big + 1), Contains("2^53"));
  REQUIRE_THROWS_WITH(Json(uint64_t(1) << 60), Contains("2^53"));
  REQUIRE_THROWS_WITH(parse_json("1e20").as_int(), Contains("integer"));
  CHECK(parse_json("1e20").as_number() == 1e20);
  REQUIRE_THROWS_WITH(parse_json("2.5").as_int(), Contains("integer"));
  CHECK(parse_json("2.5").is_int() == false);
  CHECK(parse_json("2.0").is_int());
}

TEST_CASE("json: non-integers print in their shortest round-trip form", "[json]") {
  for (double d : {0.1, -2.5, 1.0 / 3.0, 6.02214076e23, 1e-300, 123.456, 5e-324, 1.7976931348623157e308}) {
    Json j(d);
    CHECK(parse_json(j.dump()).as_number() == d);
  }
  CHECK(Json(0.1).dump() == "0.1");
  CHECK(Json(-2.5).dump() == "-2.5");
  REQUIRE_THROWS_WITH(Json(std::nan("")), Contains("NaN"));
  REQUIRE_THROWS_WITH(Json(INFINITY), Contains("infinity"));
}

TEST_CASE("json: string escapes", "[json]") {
  CHECK(parse_json(R"("\"\\\/\b\f\n\r\t")").as_string() == "\"\\/\b\f\n\r\t");
  CHECK(parse_json(R"("\u0041\u00e9\u20AC")").as_string() == "A\xC3\xA9\xE2\x82\xAC");  // A é €
  CHECK(parse_json(R"("\u0000")").as_string() == std::string(1, '\0'));
  // U+1F600 (grinning face) as a UTF-16 surrogate pair, and as raw UTF-8.
  CHECK(parse_json(R"("\uD83D\uDE00")").as_string() == "\xF0\x9F\x98\x80");
  CHECK(parse_json("\"\xF0\x9F\x98\x80\"").as_string() == "\xF0\x9F\x98\x80");
  CHECK(parse_json("\"caf\xC3\xA9\"").as_string() == "caf\xC3\xA9");

  // Printing escapes quotes, backslashes and control characters; UTF-8 passes through.
  CHECK(Json("a\"b\\c").dump() == R"("a\"b\\c")");
  CHECK(Json("\n\t\r\b\f").dump() == R"("\n\t\r\b\f")");
  CHECK(Json(std::string("\x01\x1f", 2)).dump() == R"("\u0001\u001f")");
  CHECK(Json("/").dump() == "\"/\"");
  CHECK(Json("\xE2\x82\xAC").dump() == "\"\xE2\x82\xAC\"");
  for (std::string s : {std::string("plain"), std::string("tab\there"), std::string("\0nul", 4),
                        std::string("\xF0\x9F\x98\x80 emoji"), std::string("\x7f del")}) {
    CHECK(parse_json(Json(s).dump()).as_string() == s);
  }
}

TEST_CASE("json: accessors throw on the wrong type", "[json]") {
  Json j = parse_json(R"({"n": 1, "s": "x", "a": [1, 2]})");
  REQUIRE_THROWS_WITH(j.at("n").as_string(), Contains("expected a string, got number"));
  REQUIRE_THROWS_WITH(j.at("s").as_number(), Contains("expected a number, got string"));
  REQUIRE_THROWS_WITH(j.at("s").as_int(), Contains("expected a number, got string"));
  REQUIRE_THROWS_WITH(j.at("a").as_object(), Contains("expected an object, got array"));
  REQUIRE_THROWS_WITH(j.as_array(), Contains("expected an array, got object"));
  REQUIRE_THROWS_WITH(j.at("n").as_bool(), Contains("expected a bool"));
  REQUIRE_THROWS_WITH(j.at("missing"), Contains("no key \"missing\""));
  REQUIRE_THROWS_WITH(j.at("a")[2], Contains("index 2 out of range (size 2)"));
  REQUIRE_THROWS_WITH(j.at("a").at("x"), Contains("expected an object"));
  REQUIRE_THROWS_WITH(j.at("n").size(), Contains("expected an array or object"));
  REQUIRE_THROWS_WITH(Json().push_back(1), Contains("expected an array, got null"));
  REQUIRE_THROWS_AS(j.at("s").as_array(), Error);
}

TEST_CASE("json: parse errors name the byte offset and what was expected", "[json]") {
  REQUIRE_THROWS_WITH(parse_json(""), Contains("byte 0: expected a JSON value"));
  REQUIRE_THROWS_WITH(parse_json("   "), Contains("byte 3: expected a JSON value"));
  REQUIRE_THROWS_WITH(parse_json("[1, 2"), Contains("byte 5: expected ',' or ']'"));
  REQUIRE_THROWS_WITH(parse_json("[1 2]"), Contains("byte 3: expected ',' or ']'"));
  REQUIRE_THROWS_WITH(parse_json("[1,]"), Contains("byte 3: expected a JSON value"));
  REQUIRE_THROWS_WITH(parse_json(R"({"a" 1})"), Contains("byte 5: expected ':'"));
  REQUIRE_THROWS_WITH(parse_json(R"({"a": 1,})"), Contains("byte 8: expected a string key"));
  REQUIRE_THROWS_WITH(parse_json("{1: 2}"), Contains("byte 1: expected a string key or '}'"));
  REQUIRE_THROWS_WITH(parse_json(R"({"a": 1 "b": 2})"), Contains("expected ',' or '}'"));
  REQUIRE_THROWS_WITH(parse_json("tru"), Contains("expected 'true'"));
  REQUIRE_THROWS_WITH(parse_json("nul"), Contains("expected 'null'"));
  REQUIRE_THROWS_WITH(parse_json("True"), Contains("got 'T'"));
  REQUIRE_THROWS_WITH(parse_json("'single'"), Contains("expected a JSON value"));
  REQUIRE_THROWS_WITH(parse_json(R"({"a": 1, "a": 2})"), Contains("duplicate key \"a\""));
}

TEST_CASE("json: trailing garbage is rejected", "[json]") {
  REQUIRE_THROWS_WITH(parse_json("{} x"), Contains("byte 3: expected end of input after the JSON value, got 'x'"));
  REQUIRE_THROWS_WITH(parse_json("1 2"), Contains("end of input"));
  REQUIRE_THROWS_WITH(parse_json(std::string("{}\0", 3)), Contains("got byte 0x00"));
  CHECK(parse_json(" \t\r\n{}\n  ").is_object());  // whitespace around the value is fine
}

TEST_CASE("json: malformed numbers", "[json]") {
  for (const char* bad : {"01", "1.", ".5", "+1", "-", "1e", "1e+", "--1", "0x10", "1.e5", "-.5", "NaN", "Infinity"}) {
    INFO(bad);
    REQUIRE_THROWS_AS(parse_json(bad), Error);
  }
  REQUIRE_THROWS_WITH(parse_json("1."), Contains("digit after the decimal point"));
  REQUIRE_THROWS_WITH(parse_json("1e"), Contains("digit in the exponent"));
  REQUIRE_THROWS_WITH(parse_json("1e400"), Contains("out of range"));
}

TEST_CASE("json: malformed strings", "[json]") {
  REQUIRE_THROWS_WITH(parse_json("\"abc"), Contains("'\"' to close the string"));
  REQUIRE_THROWS_WITH(parse_json("\"a\nb\""), Contains("control characters must be escaped"));
  REQUIRE_THROWS_WITH(parse_json(R"("\x")"), Contains("expected an escape"));
  REQUIRE_THROWS_WITH(parse_json(R"("\u12")"), Contains("4 hex digits"));
  REQUIRE_THROWS_WITH(parse_json(R"("\u12G4")"), Contains("4 hex digits"));
  REQUIRE_THROWS_WITH(parse_json(R"("\uD83D")"), Contains("low surrogate"));
  REQUIRE_THROWS_WITH(parse_json(R"("\uD83Dx")"), Contains("low surrogate"));
  REQUIRE_THROWS_WITH(parse_json(R"("\uD83D\u0041")"), Contains("low surrogate"));
  REQUIRE_THROWS_WITH(parse_json(R"("\uDE00")"), Contains("unpaired low surrogate"));
  // Invalid UTF-8: a lone continuation byte, a truncated sequence, an overlong '/', an encoded
  // surrogate, and a code point past U+10FFFF.
  for (const char* bad : {"\"\x80\"", "\"\xC3\"", "\"\xC0\xAF\"", "\"\xED\xA0\x80\"", "\"\xF4\x90\x80\x80\"",
                          "\"\xFF\""}) {
    INFO(bad);
    REQUIRE_THROWS_WITH(parse_json(bad), Contains("invalid UTF-8"));
  }
}

TEST_CASE("json: nesting depth is limited", "[json]") {
  auto nested = [](int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); };
  CHECK(parse_json(nested(kMaxJsonDepth)).is_array());
  REQUIRE_THROWS_WITH(parse_json(nested(kMaxJsonDepth + 1)), Contains("nested deeper than 512"));
  // Deep enough to overflow the stack without the limit.
  REQUIRE_THROWS_WITH(parse_json(std::string(1000000, '[')), Contains("nested deeper"));
  REQUIRE_THROWS_WITH(parse_json(std::string(1000000, '{')), Contains("expected a string key"));
  std::string objs;
  for (int i = 0; i < 100000; ++i) objs += "{\"a\":";
  REQUIRE_THROWS_WITH(parse_json(objs), Contains("nested deeper"));
}

TEST_CASE("json: building values", "[json]") {
  Json a = Json::array();
  a.push_back(1).push_back("two").push_back(nullptr).push_back(false).push_back(Json::object());
  CHECK(a.dump() == R"([1,"two",null,false,{}])");
  Json o(Json::Object{{"k", Json(Json::Array{Json(1), Json(2.5)})}, {"s", "v"}});
  CHECK(o.dump() == R"({"k":[1,2.5],"s":"v"})");
  CHECK(o != a);
  CHECK(Json(std::string_view("sv")).as_string() == "sv");
  CHECK(Json() == Json(nullptr));
  CHECK(Json(1) == Json(1.0));
  CHECK(Json(1) != Json(true));
}

TEST_CASE("json: strings that are not UTF-8 are written as valid JSON", "[json]") {
  // A file name on Linux is any bytes; ocrt-infer --format jsonl writes it.
  CHECK(json_quote("scan\xff.png") == "\"scan\xEF\xBF\xBD.png\"");
  CHECK(json_quote("caf\xC3\xA9") == "\"caf\xC3\xA9\"");
  Json j = Json::object();
  j.set("path", std::string("a\xC0\xAF"));
  CHECK(parse_json(j.dump()).at("path").as_string() == "a\xEF\xBF\xBD\xEF\xBF\xBD");
}
