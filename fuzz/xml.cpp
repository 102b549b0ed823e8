// Fuzz target: XML (runtime/xml.h) and the page truth readers on it (infer/page_eval.h: hOCR,
// ALTO, PAGE XML), as ocrt-infer --eval will read a truth file beside a page.
//
// A parsed document must print its text the same way twice (inner_text is a pure function of
// the tree), and every word a reader returns must have finite box coordinates.
#include <cmath>

#include "fuzz/fuzz_common.h"
#include "infer/page_eval.h"
#include "runtime/xml.h"

using namespace ocrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  XmlElement root;
  try {
    root = parse_xml(text, "fuzz-xml");
  } catch (const Error&) {
    return 0;
  }
  FUZZ_EXPECT(root.inner_text() == root.inner_text());
  FUZZ_EXPECT(root.child_at.size() == root.children.size());
  for (auto reader : {infer::truth_from_hocr, infer::truth_from_alto, infer::truth_from_page_xml}) {
    try {
      const infer::PageTruth t = reader(root, "fuzz-xml");
      for (const infer::TruthWord& w : t.words) {
        FUZZ_EXPECT(!w.text.empty());
        FUZZ_EXPECT(std::isfinite(w.box.x0) && std::isfinite(w.box.y0) && std::isfinite(w.box.x1) && std::isfinite(w.box.y1));
      }
    } catch (const Error&) {
    }
  }
  return 0;
}
