// Fuzz target: charset files (models/charset.h; ocrt-train --charset, ocrt-infer --charset)
// and the UTF-8 splitting every label goes through.
//
// Promises checked: a charset that loads writes (to_text) a file that loads to the same
// characters (control characters, which no line could write back, are refused when loading);
// utf8_chars gives code points whose bytes add up to the text; encode and decode are inverses
// for text in the charset.
#include "fuzz/fuzz_common.h"
#include "models/charset.h"

using namespace ocrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The text as a label: split into characters, then through the default charset.
  try {
    const auto chars = nn::utf8_chars(text, "fuzz text");
    std::string joined;
    for (const auto& c : chars) {
      FUZZ_EXPECT(!c.empty() && c.size() <= 4);
      joined += c;
    }
    FUZZ_EXPECT(joined == text);
    const nn::Charset ascii = nn::Charset::ascii();
    std::vector<int64_t> classes;
    std::vector<std::string> unknown;
    if (ascii.encode(text, classes, &unknown)) {
      FUZZ_EXPECT(unknown.empty() && ascii.decode(classes) == text);
    } else {
      FUZZ_EXPECT(!unknown.empty());
    }
  } catch (const Error&) {
  }
  // The text as a charset file.
  const std::string path = fuzz::write_scratch("charset.txt", data, size);
  nn::Charset cs;
  try {
    cs = nn::Charset::from_file(path);
  } catch (const Error&) {
    return 0;
  }
  FUZZ_EXPECT(cs.size() >= 1);
  std::string all;
  std::vector<int64_t> classes;
  for (int64_t k = 0; k < cs.size(); ++k) {
    all += cs.chars()[(size_t)k];
    classes.push_back(k + 1);
  }
  FUZZ_EXPECT(cs.decode(classes) == all);
  std::vector<int64_t> encoded;
  FUZZ_EXPECT(cs.encode(all, encoded) && encoded == classes);
  const std::string again_path = fuzz::write_scratch("charset-again.txt", cs.to_text().data(), cs.to_text().size());
  try {
    FUZZ_EXPECT(nn::Charset::from_file(again_path).chars() == cs.chars());
  } catch (const Error& e) {
    std::fprintf(stderr, "fuzz: a charset's own text does not load: %s\n", e.what());
    FUZZ_EXPECT(!"to_text() loads");
  }
  return 0;
}
