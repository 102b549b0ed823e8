// The XML reader (runtime/xml.h): what the page formats use, read right; and everything that is
// not well-formed, or would make a reader expand or fetch something, refused with its line and
// column.
#include <catch2/catch.hpp>

#include <string>

#include "runtime/xml.h"

using namespace ocrt;

TEST_CASE("xml: elements, attributes, text, references, CDATA, and what is skipped", "[xml]") {
  const std::string doc =
      "\xEF\xBB\xBF<?xml version=\"1.0\" encoding=\"UTF-8\"?>\r\n"
      "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0//EN\" \"x.dtd\" [ <!ENTITY e \"]>\"> ]>\n"
      "<!-- a comment -->\n"
      "<pc:Root xmlns:pc='urn:x' a=\"1 &amp; 2\" b='q&quot;&#65;&#x42;'>"
      "one<w class=\"ocrx_word\">two &lt;three&gt;</w>four<![CDATA[<five> & six]]><?pi x?><!-- c -->line\r\nend"
      "<empty/></pc:Root>\n<!-- after -->\n";
  const XmlElement root = parse_xml(doc, "doc.xml");
  CHECK(root.name == "pc:Root");
  CHECK(root.local_name() == "Root");
  REQUIRE(root.attribute("a"));
  CHECK(*root.attribute("a") == "1 & 2");
  CHECK(*root.attribute("b") == "q\"AB");
  CHECK(root.attribute("c") == nullptr);
  REQUIRE(root.children.size() == 2);
  CHECK(root.child("w")->text == "two <three>");
  CHECK(root.child("empty")->children.empty());
  CHECK(root.child("nope") == nullptr);
  CHECK(root.text == "onefour<five> & sixline\nend");  // its own text; CRLF read as LF
  CHECK(root.inner_text() == "onetwo <three>four<five> & sixline\nend");
  // Attribute values have their tabs and newlines made spaces.
  CHECK(*parse_xml("<a v=\"x\ty\nz\"/>", "a").attribute("v") == "x y z");
}

TEST_CASE("xml: what is not well-formed is refused with where", "[xml]") {
  const std::pair<std::string, std::string> bad[] = {
      {"", "expected the root element"},
      {"just text", "expected the root element"},
      {"<a>", "<a> is never closed"},
      {"<a></b>", "</b> does not close <a>"},
      {"<a>x</a><b/>", "content after the root element"},
      {"<a>&</a>", "a bare '&'"},
      {"<a>&nbsp;</a>", "the entity '&nbsp;' is not one of XML's five"},
      {"<a>&#0;</a>", "a character XML cannot hold"},
      {"<a>&#x110000;</a>", "past U+10FFFF"},
      {"<a>&#xZZ;</a>", "a malformed character reference"},
      {"<a v=\"<\"/>", "'<' in an attribute value"},
      {"<a v=1/>", "attribute v not quoted"},
      {"<a v=\"1\" v=\"2\"/>", "attribute v twice"},
      {"<a v/>", "attribute v without '='"},
      {"<a v=\"1\"w=\"2\"/>", "expected a space before an attribute"},
      {"<a><!-- x -- y --></a>", "'--' inside a comment"},
      {"<a><![CDATA[x</a>", "an unclosed CDATA section"},
      {"<a><!ENTITY x 'y'></a>", "a declaration inside an element"},
      {"<a>\xff</a>", "the document is not UTF-8"},
      {"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><a/>", "only UTF-8 is read"},
      {"<!DOCTYPE a [ <!ENTITY x 'y'> <a/>", "an unclosed DOCTYPE"},
  };
  for (const auto& [doc, why] : bad) {
    INFO(doc);
    CHECK_THROWS_WITH(parse_xml(doc, "f.xml"), Catch::StartsWith("f.xml: not well-formed XML (line 1, column") &&
                                                   Catch::Contains(why));
  }
  CHECK_THROWS_WITH(parse_xml("<a>\n\n  <b></c></a>", "f.xml"), Catch::Contains("line 3, column 6"));
}

TEST_CASE("xml: hostile documents stay small", "[xml]") {
  // Declared entities are never expanded: the "billion laughs" document is an error, not 3 GB.
  std::string laughs = "<!DOCTYPE l [<!ENTITY l0 \"lol\">";
  for (int i = 1; i < 10; ++i)
    laughs += "<!ENTITY l" + std::to_string(i) + " \"" + std::string(10, ' ') + "\">";
  laughs += "]><l>&l9;</l>";
  CHECK_THROWS_WITH(parse_xml(laughs, "l.xml"), Catch::Contains("is not one of XML's five"));
  // Nesting is bounded (no stack overflow), and so are attributes.
  std::string deep;
  for (int i = 0; i < kMaxXmlDepth; ++i) deep += "<d>";
  std::string closing;
  for (int i = 0; i < kMaxXmlDepth; ++i) closing += "</d>";
  CHECK_NOTHROW(parse_xml(deep + closing, "deep.xml"));
  CHECK_THROWS_WITH(parse_xml("<e>" + deep + closing + "</e>", "deep.xml"), Catch::Contains("nested more than 256 deep"));
  std::string many = "<a";
  for (int i = 0; i < 300; ++i) many += " a" + std::to_string(i) + "=\"\"";
  CHECK_THROWS_WITH(parse_xml(many + "/>", "many.xml"), Catch::Contains("more than 256 attributes"));
}
