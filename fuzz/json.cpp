// Fuzz target: JSON text (runtime/json.h), as found in a safetensors header, a model file's
// metadata, a checkpoint or a training record, and ocrt-synth's page truth files
// (runtime/page_truth.h), which ocrt-infer --eval and the detector's training read.
//
// Promises checked: whatever parses prints (compact and indented) and parses back to an equal
// value, and printing is a fixed point; a page truth file is an error or lines with finite
// outlines (and, read for --eval, words with theirs).
#include <string_view>

#include "fuzz/fuzz_common.h"
#include "runtime/json.h"
#include "runtime/page_truth.h"

using namespace ocrt;

namespace {

// Walks the value through the typed accessors, as readers of a header do.
void visit(const Json& j, int depth) {
  FUZZ_EXPECT(depth <= kMaxJsonDepth + 1);
  switch (j.type()) {
    case Json::Type::number:
      if (j.is_int()) (void)j.as_int();
      (void)j.as_number();
      break;
    case Json::Type::array:
      for (size_t i = 0; i < j.size(); ++i) visit(j[i], depth + 1);
      break;
    case Json::Type::object:
      for (const auto& [key, value] : j.as_object()) {
        FUZZ_EXPECT(j.find(key) == &value);  // keys are unique: find returns this member
        visit(value, depth + 1);
      }
      break;
    default:
      break;
  }
}

// The bytes as a page truth file, read both ways.
void page_truth(std::string_view bytes) {
  for (bool words : {false, true}) {
    PageTruthFile t;
    try {
      t = parse_page_truth(std::string(bytes), "fuzz.json", words);
    } catch (const Error&) {
      continue;
    }
    for (const PageTruthLine& l : t.lines) {
      (void)l.outline.box();
      for (const PageTruthWord& w : l.words) (void)w.outline.box();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  page_truth(std::string_view(reinterpret_cast<const char*>(data), size));
  Json j;
  try {
    j = parse_json(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const Error&) {
    return 0;
  }
  visit(j, 0);
  // Anything that parsed must print and read back as the same value.
  const std::string compact = j.dump(), indented = j.dump(2);
  Json again, again_indented;
  try {
    again = parse_json(compact);
    again_indented = parse_json(indented);
  } catch (const Error& e) {
    std::fprintf(stderr, "fuzz: printed JSON does not parse: %s\n", e.what());
    FUZZ_EXPECT(!"printed JSON parses");
  }
  FUZZ_EXPECT(again == j);
  FUZZ_EXPECT(again_indented == j);
  FUZZ_EXPECT(again.dump() == compact);
  return 0;
}
