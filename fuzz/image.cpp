// Fuzz target: image files, through everything a line goes through before the model.
//
// decode_gray_image reads every format stb_image reads (PNG, JPEG, BMP, TGA, GIF, PNM, PSD,
// HDR, PIC) with the default pixel budget. A decoded image then takes the path of
// infer/predictor.cpp (the same size checks, resize to the model height, normalize_line,
// pack_batch) and the path of training (train/data.cpp: resize_to_height of the whole image).
#include <algorithm>
#include <cmath>

#include "fuzz/fuzz_common.h"
#include "runtime/image.h"

using namespace ocrt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr int64_t kHeight = 32;  // the height of every ocrt model
  GrayImage src;
  try {
    src = decode_gray_image(data, size, "fuzz-image");
  } catch (const Error&) {
    return 0;  // refused with a message: fine
  }
  FUZZ_EXPECT(src.width >= 1 && src.height >= 1);
  FUZZ_EXPECT(src.width * src.height <= kDefaultMaxImagePixels);
  FUZZ_EXPECT((int64_t)src.pixels.size() == src.width * src.height);
  try {
    // Inference: the predictor's limits (PredictorOptions: 8 px high, 8 to 8192 wide at 32).
    const int64_t w = src.height == kHeight
                          ? src.width
                          : std::max<int64_t>(1, std::llround((double)src.width * kHeight / (double)src.height));
    if (src.height >= 8 && w >= 8 && w <= 8192) {
      const GrayImage line = resize_to_height(src, kHeight);
      FUZZ_EXPECT(line.height == kHeight && line.width == w);
      LineNormalization info;
      const GrayImage norm = normalize_line(line, {}, &info);
      FUZZ_EXPECT(norm.width == line.width && norm.height == line.height);
      if (!info.blank) {
        std::vector<int64_t> widths;
        const Tensor x = pack_batch({norm}, BatchSpec{}, &widths);
        FUZZ_EXPECT(widths.size() == 1 && widths[0] == padded_width(norm.width));
        FUZZ_EXPECT(x.size(3) == widths[0]);
      }
    } else {
      (void)is_uniform(src, 10);
    }
    // Training: the whole image to the model height (train/data.cpp, train/loader.cpp).
    const GrayImage line = resize_to_height(src, kHeight);
    FUZZ_EXPECT(line.height == kHeight && line.width >= 1);
    FUZZ_EXPECT((int64_t)line.pixels.size() == line.width * kHeight);
  } catch (const Error&) {
  }
  return 0;
}
