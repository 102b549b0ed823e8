// Fuzz target: TIFF files (runtime/tiff.h), every page of them, as a page reader will read them.
//
// tiff_page_count, then decode_tiff_page for each page (at most 8) with a pixel budget of
// 1 Mpixel, so that the fuzzer spends its time in the parsers rather than in big buffers. Every
// decoded page must have the size its checks promised.
#include <algorithm>

#include "fuzz/fuzz_common.h"
#include "runtime/tiff.h"

using namespace ocrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr int64_t kBudget = int64_t(1) << 20;
  int64_t pages = 0;
  try {
    pages = tiff_page_count(data, size, "fuzz-tiff");
  } catch (const Error&) {
    return 0;
  }
  FUZZ_EXPECT(pages >= 0);
  for (int64_t p = 0; p < std::min<int64_t>(pages, 8); ++p) {
    try {
      const GrayImage page = decode_tiff_page(data, size, "fuzz-tiff", p, kBudget);
      FUZZ_EXPECT(page.width >= 1 && page.height >= 1 && page.width * page.height <= kBudget);
      FUZZ_EXPECT((int64_t)page.pixels.size() == page.width * page.height);
    } catch (const Error&) {
    }
  }
  try {  // past the last page: always an error
    (void)decode_tiff_page(data, size, "fuzz-tiff", pages, kBudget);
    FUZZ_EXPECT(false);
  } catch (const Error&) {
  }
  return 0;
}
