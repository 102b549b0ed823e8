// A small XML reader, enough for the page formats ocrt reads as truth (hOCR, ALTO, PAGE XML;
// infer/page_eval.h): elements, attributes, character data, CDATA sections, the five predefined
// entities and character references. A prolog's declaration, processing instructions, comments
// and a DOCTYPE (its internal subset included) are skipped; entities a DOCTYPE would declare are
// not expanded (a reference to one is an error), so nothing outside the text is ever read and a
// "billion laughs" document cannot grow.
//
// Every input may be hostile: the reader refuses what is not well-formed with the line and
// column, nests at most kMaxXmlDepth elements deep (and never recurses deeper than that), takes
// at most 256 attributes on an element, and holds each piece of text once.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ocrt {

constexpr int kMaxXmlDepth = 256;

struct XmlElement {
  std::string name;  // as written, with its prefix ("pc:Word")
  std::vector<std::pair<std::string, std::string>> attributes;  // values with references resolved
  std::vector<XmlElement> children;
  std::string text;               // the character data directly inside it (not its children's)
  std::vector<size_t> child_at;   // children[i] stood at byte child_at[i] of `text`

  // All the character data inside it, its children's included, in document order (built on
  // request: a document's text is held once, however deep it nests).
  std::string inner_text() const;

  // The name without its namespace prefix ("Word").
  std::string_view local_name() const;
  // An attribute's value, or nullptr (exact name, prefix included).
  const std::string* attribute(std::string_view name) const;
  // The first child whose local name is `name`, or nullptr.
  const XmlElement* child(std::string_view local) const;
};

// The document's root element. Throws Error("NAME: not well-formed XML (line L, column C:
// reason)") for anything else, including a document that is not UTF-8.
XmlElement parse_xml(std::string_view text, const std::string& name);

}  // namespace ocrt
