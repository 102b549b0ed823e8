// Fuzz target: render cache shards (train/line_cache.h; ocrt-train --render-cache DIR reads
// every shard of DIR when it starts).
//
// A shard ends with a checksum of everything before it (FNV-1a, 8 bytes), which a mutated input
// would almost never match: the fuzzer would only ever test the checksum. So the input is read
// twice, as it is, and as the body of a shard with its checksum appended; the seeds are shards
// without their last 8 bytes. The first input byte picks the height the reader wants (1..32),
// so that the size checks meet more than one height.
//
// Promises checked on a shard that reads: every line's pixels lie inside the input, its width
// and text within the limits, and writing the lines again gives the same bytes.
#include <string>
#include <vector>

#include "fuzz/fuzz_common.h"
#include "train/line_cache.h"

using namespace ocrt;
using namespace ocrt::train;

namespace {
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

void check(const std::string& file, int64_t height) {
  std::vector<ShardLine> lines;
  try {
    lines = decode_line_shard(reinterpret_cast<const uint8_t*>(file.data()), file.size(), height, "fuzz.bin");
  } catch (const Error&) {
    return;
  }
  std::vector<LineSample> again;
  for (const ShardLine& l : lines) {
    FUZZ_EXPECT(l.width >= 1 && l.width <= kMaxCachedLineWidth);
    FUZZ_EXPECT(!l.text.empty() && (int64_t)l.text.size() <= kMaxCachedTextBytes);
    const auto* begin = reinterpret_cast<const uint8_t*>(file.data());
    FUZZ_EXPECT(l.pixels >= begin && l.pixels + l.width * height <= begin + file.size());
    LineSample s;
    s.image.width = l.width, s.image.height = height;
    s.image.pixels.assign(l.pixels, l.pixels + l.width * height);
    s.text = l.text;
    again.push_back(std::move(s));
  }
  FUZZ_EXPECT(encode_line_shard(again, height) == file);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int64_t height = 1 + data[0] % 32;
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  check(file, height);
  const uint64_t sum = fnv1a(file);
  for (int i = 0; i < 8; ++i) file.push_back((char)((sum >> (8 * i)) & 0xFF));
  check(file, height);
  return 0;
}
