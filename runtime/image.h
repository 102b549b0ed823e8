// Image input for text-line recognition: decoding (stb_image), conversion to 8-bit gray,
// resizing to the model's height, and packing lines into a normalised batch tensor. Used by
// training and inference alike, so both preprocess identically.
//
// Conversions, exactly:
//  - gray = 0.299 R + 0.587 G + 0.114 B (ITU-R BT.601 luma), rounded to the nearest integer;
//  - an alpha channel is composited over white: v = a v + (1 - a) 255;
//  - 16-bit images are scaled to 8 bits (v * 255 / 65535, rounded) after the conversions.
//  - resizing to height h keeps the aspect ratio: width = max(1, round(w * h / H)); an image
//    already h high is used as is. Shrinking averages the covered source area (a box filter, so
//    thin strokes fade instead of vanishing); enlarging interpolates bilinearly.
//  - lines are padded on the right with white (255) to a multiple of 4 and to the widest line
//    of the batch; pixels become p * scale + offset (p / 127.5 - 1 for the shipped models).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace ocrt {

struct GrayImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> pixels;  // row-major, width * height
  uint8_t at(int64_t x, int64_t y) const { return pixels[(size_t)(y * width + x)]; }
};

// Decodes a file (PNG, JPEG, BMP, TGA, GIF's first frame, PNM, ...). Throws an Error naming the
// path for a missing, unreadable, empty, corrupt or zero-sized image.
GrayImage load_gray_image(const std::string& path);
// The same from bytes in memory; `name` is used in messages.
GrayImage decode_gray_image(const void* data, size_t size, const std::string& name);

// Writes an 8-bit gray PNG (atomically: temp file + rename). Throws naming the path.
void save_gray_png(const std::string& path, const GrayImage& image);

// Resizes to the given height keeping the aspect ratio (see the top of this file).
GrayImage resize_to_height(const GrayImage& image, int64_t height);

// The width after padding to a multiple (>= the width, >= multiple).
inline int64_t padded_width(int64_t width, int64_t multiple = 4) {
  return std::max<int64_t>(multiple, (width + multiple - 1) / multiple * multiple);
}

struct BatchSpec {
  int64_t width_multiple = 4;
  double scale = 1.0 / 127.5, offset = -1.0;
  uint8_t pad_value = 255;  // white
};

// Lines of equal height -> (N, 1, H, W) float32, W = the widest padded width (or min_width when
// that is wider); `widths` receives each line's padded width (what the model's frame count
// follows).
Tensor pack_batch(const std::vector<GrayImage>& lines, const BatchSpec& spec, std::vector<int64_t>* widths = nullptr,
                  int64_t min_width = 0);

}  // namespace ocrt
