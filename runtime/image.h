// Image input for text-line recognition: decoding (stb_image), conversion to 8-bit gray,
// resizing to the model's height, and packing lines into a normalised batch tensor. Used by
// training and inference alike, so both preprocess identically; inference also makes odd lines
// readable (normalize_line at the end of this file: blank, inverted and faint lines).
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

// Limits on decoding, for files that may be hostile:
//  - an image is decoded only when its header (read alone first, stbi_info_from_memory) says it
//    has at most `max_pixels` pixels, kDefaultMaxImagePixels (16 Mpixels, e.g. 16384 x 1024)
//    unless the caller (ocrt-infer --max-image-pixels) says otherwise. A text line at 600 dpi is
//    well under 1 Mpixel; 16 Mpixels of 16-bit RGBA is what stb_image's largest buffer (8 bytes a
//    pixel) may then take: 128 MiB.
//  - the decoders of all threads together hold at most kDecodePixelsInFlight pixels (64 Mpixels,
//    at most 512 MiB of stb_image buffers) at once: a decode waits until it fits, and one larger
//    than that alone waits until it is alone. (What is done with a decoded image, resizing for
//    instance, is not counted: it is at most a few such images per thread.)
//  - a file shorter than its header promises (any format) is an error, never an image read
//    from zeros or uninitialised memory; a BMP with a negative height (stored top-down) reads
//    like the same image stored bottom-up.
constexpr int64_t kDefaultMaxImagePixels = int64_t(1) << 24;
constexpr int64_t kDecodePixelsInFlight = int64_t(1) << 26;

// The shortest text line image ocrt reads (the predictor's default min_source_height): below 8
// pixels a 32-high model input is mostly interpolation. ocrt-synth never writes a shorter line.
constexpr int64_t kMinLineHeight = 8;

// Holds `pixels` of the kDecodePixelsInFlight budget while it lives: waits until they fit (or,
// for an image larger than the budget, until nothing else is being decoded). Every decoder
// (stb_image's formats here, TIFF in runtime/tiff.cpp) takes one before it allocates.
class DecodeReservation {
 public:
  explicit DecodeReservation(int64_t pixels);
  ~DecodeReservation();
  DecodeReservation(const DecodeReservation&) = delete;
  DecodeReservation& operator=(const DecodeReservation&) = delete;

 private:
  int64_t pixels_;
};

// Decodes a file (PNG, JPEG, BMP, TGA, GIF's first frame, PNM, TIFF's first page, ...). Throws an Error naming the
// path for a missing, unreadable, empty, truncated, corrupt, zero-sized or too large image (the
// message says which, with the size from the header when it is known).
GrayImage load_gray_image(const std::string& path, int64_t max_pixels = kDefaultMaxImagePixels);
// The same from bytes in memory; `name` is used in messages.
GrayImage decode_gray_image(const void* data, size_t size, const std::string& name,
                            int64_t max_pixels = kDefaultMaxImagePixels);

// Writes an 8-bit gray PNG (atomically: temp file + rename). Throws naming the path.
void save_gray_png(const std::string& path, const GrayImage& image);
// The bytes of that PNG, in memory (for pages that embed images as data: URIs).
std::string encode_gray_png(const GrayImage& image);

// Resizes to the given height keeping the aspect ratio (see the top of this file).
GrayImage resize_to_height(const GrayImage& image, int64_t height);

// A Gaussian blur of `sigma` pixels. Same size; sigma <= 0: a copy. Taps outside the image are
// left out (the rest renormalised); the kernel radius (3 sigma) is clamped to the image, so a
// huge sigma gives the mean of the whole row, then of the whole column. (The scan simulation
// of training blurs with it; the text detector's descreening pass too, infer/detector.h.)
GrayImage gaussian_blur(const GrayImage& image, double sigma);

// Whether the part [x0, x1) x [y0, y1) of an image looks printed on a halftone screen, judged
// against its blur (the same size): at least 75% of it grey once blurred (levels 49 to 207:
// neither paper nor solid ink) and the sharp image at least 12 levels from its blur on average
// (a field of dots, not a flat grey). The text detector's descreening finds screened blocks of a
// page with it (infer/detector.h), the page reader screened line cuts (infer/page.h).
bool looks_screened(const GrayImage& sharp, const GrayImage& blurred, int64_t x0, int64_t y0, int64_t x1, int64_t y1);

// A sample rounded to the nearest pixel value, halves up, clamped to 0..255 (NaN gives 0): the
// rounding of the resampling loops, inline where std::lround is a library call per pixel.
inline uint8_t to_pixel(double v) { return (uint8_t)((v > 0 ? (v < 255 ? v : 255.0) : 0.0) + 0.5); }

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

// ---- Odd input made readable: inference only (infer/predictor.cpp calls it; training does not)
//
// The models learn from dark ink on light paper. Lines met in real use may be light text on a
// dark background, faint or coloured print (colour is already gray by BT.601 luma), or no
// text at all. normalize_line looks at a line already resized to the model height:
//  1. Ink. A copy is smoothed with a 3x3 box (edge pixels repeated): pixel noise and paper
//     texture average out (white noise of standard deviation s becomes s / 3) while strokes 2 px
//     or wider keep most of their contrast. Each block of 2 x height columns (the last one takes
//     the rest) has its own background, the median of its smoothed pixels, so that light falling
//     unevenly along a photographed line is not taken for ink. A smoothed pixel at least T gray
//     levels darker than its block's background is dark ink, at least T lighter is light ink;
//     T = max(ink_threshold (10), 2 s), s the line's noise estimated from the 25th percentile of
//     the differences between horizontal neighbours (so 6 standard deviations of smoothed white
//     noise: noise alone never makes ink).
//  2. Blank: fewer than `min_ink_pixels` (12) pixels of dark ink and of light ink. The line has
//     no text (a period at height 32 makes about 25); the predictor returns "" for it without
//     running the model. The cost: print fainter than about 15 gray levels (more on a noisy
//     line) reads as blank.
//  3. Polarity: the paper is on the side of the border. When the median of the smoothed
//     line's border ring (its outermost rows and columns) is at least T / 2 lighter than the
//     median of the whole smoothed line, the paper is light; at least T / 2 darker, dark (light
//     text on a dark background). Otherwise (the usual case: ink is a minority, so both medians
//     are paper) the ink is whichever kind step 1 found more of. A line with dark paper is
//     inverted (v -> 255 - v). The border decides for bold or blurred ink (an 8-px line grown
//     to 32) that covers half the line and pulls its median off the paper; a tight crop whose
//     border crosses ink is still mostly paper there.
//  4. Contrast: lo = the 10th percentile of the (inverted) line's pixels where step 1 found
//     ink of the line's own kind (a stroke's core, however thin the stroke, and never paper
//     noise, however little ink the line has), hi = the 99th percentile of all its pixels (the
//     paper). When hi - lo < `stretch_below` the line is stretched linearly, lo -> 0 and
//     hi -> 255, rounded and clamped. Print at ordinary contrast is left exactly as it is
//     (measured hi - lo: samples/lines 130-220, red on white 95-170, gray 150 on 190 20-35;
//     bench/results/odd-input.md, where 128 made red on white and 8-px lines read worse).
struct LineNormalizeOptions {
  bool enabled = true;          // false: the line is used as it is (training's preprocessing)
  int ink_threshold = 10;       // least gray levels between ink and its background
  int64_t min_ink_pixels = 12;  // fewer ink pixels than this: blank
  int stretch_below = 64;       // contrast (hi - lo) below which a line is stretched
};

struct LineNormalization {
  bool blank = false, inverted = false, stretched = false;
  int64_t dark_ink = 0, light_ink = 0;  // ink pixels of each kind (before any inversion)
  int lo = 0, hi = 255;                 // the ink and paper levels after inversion
  double border = 0, median = 0;        // medians of the smoothed border ring and of the whole line
  double noise = 0;                     // estimated standard deviation of the pixel noise
  int threshold = 0;                    // T: gray levels between ink and its background
};

// The line after the steps above (the line itself, unchanged, when it is blank or nothing
// applies); `info` receives what was decided. Works on any size, 1x1 included.
GrayImage normalize_line(const GrayImage& line, const LineNormalizeOptions& options = {},
                         LineNormalization* info = nullptr);

// True when every pixel is within `tolerance` gray levels of every other: for images that cannot
// be resized to a line (outside the predictor's size limits), which are blank when uniform.
bool is_uniform(const GrayImage& image, int tolerance);

}  // namespace ocrt
