// Fuzz target: character language model files (models/char_lm.h; ocrt-infer --lm FILE).
//
// A file ends with a checksum of everything before it (FNV-1a, 8 bytes), which a mutated input
// would almost never match: the fuzzer would only ever test the checksum. So the input is read
// twice, as it is, and as the body of a file, with its checksum appended; the seeds are files
// without their last 8 bytes.
//
// Promises checked on a file that loads: it writes back to the same bytes' meaning (to_bytes
// loads to a model that writes the same bytes), and every log-probability the beam search asks
// for is finite.
#include <cmath>

#include "fuzz/fuzz_common.h"
#include "models/char_lm.h"

using namespace ocrt;

namespace {
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string file(reinterpret_cast<const char*>(data), size);
  try {
    (void)nn::CharLM::from_bytes(file, "fuzz.clm");
  } catch (const Error&) {
  }
  const uint64_t sum = fnv1a(file);
  for (int i = 0; i < 8; ++i) file.push_back((char)((sum >> (8 * i)) & 0xFF));
  nn::CharLM lm;
  try {
    lm = nn::CharLM::from_bytes(file, "fuzz.clm");
  } catch (const Error&) {
    return 0;
  }
  FUZZ_EXPECT(lm.order() >= 1 && lm.order() <= nn::CharLM::kMaxOrder);
  const std::string bytes = lm.to_bytes();
  try {
    FUZZ_EXPECT(nn::CharLM::from_bytes(bytes, "again").to_bytes() == bytes);
  } catch (const Error& e) {
    std::fprintf(stderr, "fuzz: a model's own bytes do not load: %s\n", e.what());
    FUZZ_EXPECT(!"to_bytes() loads");
  }
  // A walk through the model as the beam search makes it: every symbol after a few contexts.
  const int32_t symbols = lm.vocab_size() + 1;
  nn::CharLM::State s = lm.start();
  for (int step = 0; step < 8; ++step) {
    for (int32_t id = 1; id <= symbols && id <= 64; ++id) FUZZ_EXPECT(std::isfinite(lm.log_prob(s, id)));
    s = lm.next(s, 1 + (int32_t)(step * 7 % symbols));
  }
  FUZZ_EXPECT(std::isfinite(lm.bits_per_char(U"the quick brown fox, 0123")));
  return 0;
}
