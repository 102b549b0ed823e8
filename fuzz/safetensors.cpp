// Fuzz target: safetensors files (runtime/safetensors.h) from memory, header and data.
//
// Promises checked on a file that parses: each tensor is a contiguous CPU tensor whose bytes
// fit in the file, names are unique, and the metadata came from a "__metadata__" object.
#include <set>

#include "fuzz/fuzz_common.h"
#include "runtime/safetensors.h"

using namespace ocrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SafetensorsFile f;
  try {
    f = parse_safetensors(data, size, "fuzz.safetensors");
  } catch (const Error&) {
    return 0;
  }
  std::set<std::string> names;
  size_t bytes = 0;
  for (const auto& [name, t] : f.tensors) {
    FUZZ_EXPECT(names.insert(name).second);
    FUZZ_EXPECT(name != "__metadata__");
    FUZZ_EXPECT(t.defined() && t.is_contiguous() && t.device().is_cpu());
    bytes += (size_t)t.numel() * t.itemsize();
    FUZZ_EXPECT(&f.get(name) == &t);
    // Reading every element is what a model load does next.
    if (t.numel() > 0) {
      const auto* p = static_cast<const uint8_t*>(t.raw_data());
      volatile uint8_t sum = 0;
      for (size_t i = 0; i < (size_t)t.numel() * t.itemsize(); ++i) sum = (uint8_t)(sum + p[i]);
    }
  }
  FUZZ_EXPECT(bytes <= size);
  if (!f.metadata.empty()) FUZZ_EXPECT(size > 8);
  return 0;
}
