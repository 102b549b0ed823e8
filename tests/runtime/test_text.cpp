// Text for XML and JSON (runtime/text.h): valid UTF-8 kept, every invalid byte and every
// character XML 1.0 cannot hold replaced by U+FFFD, markup characters escaped.
#include <catch2/catch.hpp>

#include <string>

#include "runtime/text.h"

using namespace ocrt;

TEST_CASE("xml: escaping and UTF-8 repair", "[text]") {
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(xml_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  CHECK(xml_escape("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  CHECK(xml_escape("\xC0\xAF") == fffd + fffd);             // overlong '/'
  CHECK(xml_escape("\xED\xA0\x80") == fffd + fffd + fffd);  // a surrogate
  CHECK(xml_escape("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd);  // past U+10FFFF
  CHECK(xml_escape("\xE2\x82") == fffd + fffd);             // cut short
  CHECK(xml_escape(std::string("a\0b\x07\x7F", 5)) == "a" + fffd + "b" + fffd + fffd);
  CHECK(xml_escape("tab\tand\nnewline") == "tab\tand\nnewline");
  // JSON may hold control characters (escaped) but must be UTF-8.
  CHECK(valid_utf8(std::string("a\0\x07\xff", 4)) == std::string("a\0\x07", 3) + fffd);
  CHECK(valid_utf8("\xC3\xA9") == "\xC3\xA9");
  CHECK(valid_utf8("") == "");
}
