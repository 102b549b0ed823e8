// Image decoding, gray conversion, resizing, batching and the inference-side line checks (see image.h).
#include "runtime/image.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unistd.h>

#include "runtime/stb.h"
#include "runtime/tiff.h"

namespace ocrt {

namespace {

// std::lround(x) for x >= 0, exactly (x - trunc(x) is exact in double), without a call into
// libm for every pixel (1-2% of ocrt-infer's time on lines and pages went to lround).
inline int64_t round_nonnegative(double x) {
  const int64_t t = (int64_t)x;
  return t + (x - (double)t >= 0.5 ? 1 : 0);
}

// Gray value of one pixel from `channels` samples in [0, max]: 1 gray, 2 gray+alpha, 3 RGB,
// 4 RGBA; the result is on the same [0, max] scale.
double to_gray(const double* v, int channels, double max) {
  double gray = channels >= 3 ? 0.299 * v[0] + 0.587 * v[1] + 0.114 * v[2] : v[0];
  if (channels == 2 || channels == 4) {
    const double a = v[channels - 1] / max;
    gray = a * gray + (1 - a) * max;
  }
  return gray;
}

}  // namespace

namespace {

// The first JPEG Huffman table (DHT segment) that declares more than 256 codes, or -1 (also for
// files that are not JPEGs). stb_image (Debian 12's, 2022-09) builds such a table into a
// 257-entry array without checking the count: up to 4080 bytes written past it, already while
// reading the header. Found by fuzzing (fuzz/image.cpp). The walk follows stb_image's: segments
// by their length, and between them, or in the entropy-coded data after a scan header, any
// byte but 0xFF is skipped, as are 0xFF 0x00 (a stuffed byte), fill bytes and the markers
// without a length (RSTn, TEM, SOI). A table's 16 counts may run past its segment, and past the
// end of the file, where stb_image reads zeros. The file starts as stb_image reads its first
// marker: 0xFF, any number of 0xFF fill bytes, then SOI (0xD8); a file that began FF FF D8
// passed an earlier version of this check as "not a JPEG" and stb_image then wrote past the
// table (found by a 10-minute fuzzing run, fuzz/corpus/image/crash-6cd82e0d...).
int64_t oversized_jpeg_huffman_table(const uint8_t* b, size_t size) {
  if (size < 2 || b[0] != 0xFF) return -1;
  size_t start = 1;
  while (start < size && b[start] == 0xFF) ++start;
  if (start >= size || b[start] != 0xD8) return -1;
  for (size_t i = start + 1; i + 1 < size;) {
    const uint8_t m = b[i + 1];
    if (b[i] != 0xFF || m == 0xFF) {
      ++i;
    } else if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD8)) {
      i += 2;
    } else if (m == 0xD9 || i + 4 > size) {
      break;
    } else {
      const size_t len = (size_t)b[i + 2] << 8 | b[i + 3], end = i + 2 + len;
      if (m == 0xC4)
        for (size_t t = i + 4; t < end && t < size;) {
          size_t codes = 0;
          for (size_t k = 1; k <= 16 && t + k < size; ++k) codes += b[t + k];  // past the end: 0
          if (codes > 256) return (int64_t)t;
          t += 17 + codes;
        }
      i = std::max(end, i + 2);
    }
  }
  return -1;
}

// The first PNG chunk whose length runs past the end of the file: its offset, and its length
// in *length; -1 when there is none (or the file is not a PNG). stb_image grows its buffer for
// the compressed data to an IDAT chunk's declared length (up to 2^30 bytes) before reading the
// chunk, so an 82-byte PNG made it allocate 1 GiB (found by fuzzing, fuzz/image.cpp); such a
// file is truncated and is refused before stb_image reads it. The walk stops at IEND.
int64_t png_chunk_past_end(const uint8_t* b, size_t size, uint64_t* length) {
  if (size < 8 || std::memcmp(b, "\x89PNG\r\n\x1a\n", 8) != 0) return -1;
  for (size_t pos = 8; pos + 8 <= size;) {
    const uint64_t len = (uint64_t)b[pos] << 24 | (uint64_t)b[pos + 1] << 16 | (uint64_t)b[pos + 2] << 8 | b[pos + 3];
    if (len > size - pos - 8) {
      *length = len;
      return (int64_t)pos;
    }
    if (std::memcmp(b + pos + 4, "IEND", 4) == 0) break;
    pos += 12 + (size_t)len;  // length, type, data, CRC
  }
  return -1;
}

// True when a binary PGM or PPM header (P5, P6: the PNM files stb_image reads) holds a number
// over 2^31 - 1 among its width, height and maximum value. stb_image reads them into an int
// digit by digit without a bound (signed overflow, undefined behaviour: found by fuzzing,
// fuzz/image.cpp). The walk is stb_image's: white space and '#' comments to the end of the
// line before each number.
bool pnm_header_number_too_large(const uint8_t* b, size_t size) {
  if (size < 2 || b[0] != 'P' || (b[1] != '5' && b[1] != '6')) return false;
  auto space = [](uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; };
  size_t pos = 2;
  for (int number = 0; number < 3; ++number) {
    for (;;) {
      while (pos < size && space(b[pos])) ++pos;
      if (pos >= size || b[pos] != '#') break;
      while (pos < size && b[pos] != '\n' && b[pos] != '\r') ++pos;
    }
    int64_t value = 0;
    for (; pos < size && b[pos] >= '0' && b[pos] <= '9'; ++pos)
      if ((value = value * 10 + (b[pos] - '0')) > INT32_MAX) return true;
  }
  return false;
}

// Width and height straight from a PNG's IHDR or a JPEG's frame header, for the message when
// stb_image refuses the header (it does so for images over 2^30 bytes without saying why).
bool header_size(const uint8_t* b, size_t size, int64_t& w, int64_t& h) {
  auto be16 = [&](size_t i) { return (int64_t)b[i] << 8 | b[i + 1]; };
  auto be32 = [&](size_t i) { return be16(i) << 16 | be16(i + 2); };
  if (size >= 24 && std::memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0 && std::memcmp(b + 12, "IHDR", 4) == 0) {
    w = be32(16), h = be32(20);
    return true;
  }
  if (size >= 4 && b[0] == 0xFF && b[1] == 0xD8) {  // JPEG: walk the markers to the frame header
    for (size_t i = 2; i + 9 <= size && b[i] == 0xFF;) {
      const uint8_t m = b[i + 1];
      if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
        h = be16(i + 5), w = be16(i + 7);
        return true;
      }
      i += 2 + (size_t)be16(i + 2);
    }
  }
  return false;
}

// stb_image reads through these callbacks, so that a file shorter than its header promises is
// seen: from memory, stb_image returns 0 for every byte past the end (a truncated BMP, TGA, GIF
// or JPEG decodes to a partly black image) and leaves the rest of a PNM's pixel buffer
// uninitialised. stb_image refills its own small buffer with the first read of a decode and
// every later one; such a refill may come back short at the end of the file, but one asked for
// when nothing is left means stb_image needed bytes past the end. Any other read (stbi__getn,
// straight into the image) must get every byte it asks for. A skip past the end (a BMP without
// the padding of its last row) is not an error: no pixel comes from it.
struct MemoryReader {
  const uint8_t* data;
  size_t size, pos = 0;
  const char* refill_buffer = nullptr;
  bool short_read = false;

  static int read(void* user, char* out, int n) {
    auto& r = *static_cast<MemoryReader*>(user);
    if (!r.refill_buffer) r.refill_buffer = out;
    const size_t left = r.size - r.pos, k = std::min(left, (size_t)std::max(n, 0));
    if (out == r.refill_buffer ? left == 0 : k < (size_t)n) r.short_read = true;
    std::memcpy(out, r.data + r.pos, k);
    r.pos += k;
    return (int)k;
  }
  static void skip(void* user, int n) {
    auto& r = *static_cast<MemoryReader*>(user);
    r.pos = n < 0 ? r.pos - std::min(r.pos, (size_t)-(int64_t)n) : r.pos + std::min(r.size - r.pos, (size_t)n);
  }
  static int eof(void* user) {
    auto& r = *static_cast<MemoryReader*>(user);
    return r.pos >= r.size;
  }
};

// The channel count of a Photoshop file (PSD: "8BPS", version 1, then six reserved bytes and a
// big-endian 16-bit count), or 0 for any other file. stb_image takes a PSD's fourth channel for
// alpha whatever the file says it is (CMYK has four) and "removes the white matte" from the first
// three with color / alpha + 255 (1 - 1 / alpha), which falls below 0 wherever a channel is
// darker than the matte: a float outside the range of the integer it is cast to (undefined
// behaviour: found by fuzzing, fuzz/image.cpp, UBSan). So such files are refused before stb.
int psd_channels(const uint8_t* b, size_t size) {
  if (size < 14 || std::memcmp(b, "8BPS", 4) != 0 || b[4] != 0 || b[5] != 1) return 0;
  return (b[12] << 8) | b[13];
}

// Pixels being decoded in all threads at once (see kDecodePixelsInFlight in image.h).
std::mutex in_flight_mu;
std::condition_variable in_flight_cv;
int64_t in_flight_pixels = 0;

}  // namespace

DecodeReservation::DecodeReservation(int64_t pixels) : pixels_(pixels) {
  std::unique_lock<std::mutex> lock(in_flight_mu);
  in_flight_cv.wait(lock, [&] { return in_flight_pixels == 0 || in_flight_pixels + pixels <= kDecodePixelsInFlight; });
  in_flight_pixels += pixels;
}

DecodeReservation::~DecodeReservation() {
  {
    std::lock_guard<std::mutex> lock(in_flight_mu);
    in_flight_pixels -= pixels_;
  }
  in_flight_cv.notify_all();
}

GrayImage decode_gray_image(const void* data, size_t size, const std::string& name, int64_t max_pixels) {
  OCRT_CHECK(size > 0, name, ": the image file is empty (0 bytes)");
  if (is_tiff(data, size)) return decode_tiff_page(data, size, name, 0, max_pixels);  // libtiff, not stb
  OCRT_CHECK(size <= (size_t)INT32_MAX, name, ": the image file is too large (", size, " bytes)");
  const auto* bytes = static_cast<const stbi_uc*>(data);
  const int64_t bad_table = oversized_jpeg_huffman_table(bytes, size);
  OCRT_CHECK(bad_table < 0, name, ": a corrupt JPEG (the Huffman table at byte ", bad_table,
             " declares more than 256 codes)");
  OCRT_CHECK(!pnm_header_number_too_large(bytes, size), name,
             ": a corrupt PGM/PPM header (a number over 2147483647)");
  const int psd = psd_channels(bytes, size);
  OCRT_CHECK(psd < 4, name, ": a Photoshop (PSD) file of ", psd,
             " channels: ocrt reads PSD files of 1 to 3 channels only (gray or RGB, no alpha or CMYK); "
             "flatten it and save it as PNG");
  uint64_t chunk_length = 0;
  const int64_t long_chunk = png_chunk_past_end(bytes, size, &chunk_length);
  OCRT_CHECK(long_chunk < 0, name, ": the image file is truncated (", size, " bytes; its PNG chunk at byte ", long_chunk,
             " says ", chunk_length, " bytes follow)");
  // The header alone first: nothing is allocated for an image before its size is known.
  int w = 0, h = 0, channels = 0;
  if (!stbi_info_from_memory(bytes, (int)size, &w, &h, &channels)) {
    int64_t hw = 0, hh = 0;
    if (header_size(bytes, size, hw, hh) && hw * hh > max_pixels)
      fail(name, ": the image is too large (", hw, "x", hh, " = ", hw * hh, " pixels; at most ", max_pixels,
           " are read, ocrt-infer --max-image-pixels raises it)");
    fail(name, ": not an image ocrt can decode (", stbi_failure_reason(), ")");
  }
  // A BMP stored top-down says so with a negative height; stb_image's header call passes it on
  // as it is, while its decoder reads such a file the right way up.
  if (h < 0 && h != INT32_MIN && size >= 2 && bytes[0] == 'B' && bytes[1] == 'M') h = -h;
  OCRT_CHECK(w > 0 && h > 0, name, ": the image has zero size (", w, "x", h, ")");
  OCRT_CHECK((int64_t)w * h <= max_pixels, name, ": the image is too large (", w, "x", h, " = ", (int64_t)w * h,
             " pixels; at most ", max_pixels, " are read, ocrt-infer --max-image-pixels raises it)");
  const DecodeReservation reservation((int64_t)w * h);
  const bool sixteen = stbi_is_16_bit_from_memory(bytes, (int)size);
  stbi_io_callbacks io{&MemoryReader::read, &MemoryReader::skip, &MemoryReader::eof};
  MemoryReader reader{bytes, size};
  const int header_w = w, header_h = h;
  void* p = sixteen ? (void*)stbi_load_16_from_callbacks(&io, &reader, &w, &h, &channels, 0)
                    : (void*)stbi_load_from_callbacks(&io, &reader, &w, &h, &channels, 0);
  // A decoder that gave up after running out of bytes says so in its own words, if at all
  // (stb_image's reason for a JPEG cut short can even name another format): say truncated.
  OCRT_CHECK(p != nullptr || !reader.short_read, name, ": the image file is truncated (", size,
             " bytes, shorter than its ", header_w, "x", header_h, " header needs)");
  OCRT_CHECK(p != nullptr, name, ": cannot decode the image (", stbi_failure_reason(), ")");
  std::unique_ptr<void, void (*)(void*)> owned(p, stbi_image_free);
  OCRT_CHECK(!reader.short_read, name, ": the image file is truncated (", size, " bytes, shorter than its ", w, "x",
             h, " header needs)");
  OCRT_CHECK(w == header_w && h == header_h && channels >= 1 && channels <= 4, name,
             ": the image's header and data disagree (", header_w, "x", header_h, " vs ", w, "x", h, ")");
  GrayImage out;
  out.width = w, out.height = h;
  out.pixels.resize((size_t)w * h);
  double v[4];
  if (sixteen) {
    const auto* q = static_cast<const stbi_us*>(p);
    for (size_t i = 0; i < out.pixels.size(); ++i) {
      for (int c = 0; c < channels; ++c) v[c] = q[i * channels + c];
      out.pixels[i] = (uint8_t)round_nonnegative(to_gray(v, channels, 65535.0) * 255.0 / 65535.0);
    }
  } else if (channels == 1) {  // gray already: its own values (a scanned page: 8 Mpixels)
    std::memcpy(out.pixels.data(), p, out.pixels.size());
  } else {
    // The same to_gray for each pixel, in a loop of its own for each channel count: with the
    // count a constant, the call folds to its one formula (an RGB scan of 5 Mpixels took 25 ms
    // through the general loop).
    const auto* q = static_cast<const stbi_uc*>(p);
    auto convert = [&](auto channel_count) {
      constexpr int C = decltype(channel_count)::value;
      const size_t n = out.pixels.size();
      for (size_t i = 0; i < n; ++i) {
        double px[C];
        for (int c = 0; c < C; ++c) px[c] = q[i * C + c];
        out.pixels[i] = (uint8_t)std::min<int64_t>(round_nonnegative(to_gray(px, C, 255.0)), 255);
      }
    };
    if (channels == 2) convert(std::integral_constant<int, 2>{});
    else if (channels == 3) convert(std::integral_constant<int, 3>{});
    else convert(std::integral_constant<int, 4>{});
  }
  return out;
}

GrayImage load_gray_image(const std::string& path, int64_t max_pixels) {
  std::error_code ec;
  OCRT_CHECK(std::filesystem::exists(path, ec), path, ": no such file");
  OCRT_CHECK(!std::filesystem::is_directory(path, ec), path, ": is a directory, not an image");
  std::ifstream in(path, std::ios::binary);
  OCRT_CHECK(in.good(), path, ": cannot open it");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  OCRT_CHECK(!in.bad(), path, ": cannot read it");
  return decode_gray_image(bytes.data(), bytes.size(), path, max_pixels);
}

void save_gray_png(const std::string& path, const GrayImage& image) {
  OCRT_CHECK(image.width > 0 && image.height > 0 && (int64_t)image.pixels.size() == image.width * image.height,
             "save_gray_png ", path, ": the image is empty or inconsistent");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  OCRT_CHECK(stbi_write_png(tmp.c_str(), (int)image.width, (int)image.height, 1, image.pixels.data(), (int)image.width),
             "save_gray_png ", path, ": cannot write it");
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail("save_gray_png ", path, ": cannot rename the temporary file (", ec.message(), ")");
  }
}

std::string encode_gray_png(const GrayImage& image) {
  OCRT_CHECK(image.width > 0 && image.height > 0 && (int64_t)image.pixels.size() == image.width * image.height,
             "encode_gray_png: the image is empty or inconsistent");
  std::string out;
  auto append = [](void* to, void* data, int size) {
    static_cast<std::string*>(to)->append((const char*)data, (size_t)size);
  };
  OCRT_CHECK(stbi_write_png_to_func(append, &out, (int)image.width, (int)image.height, 1, image.pixels.data(),
                                    (int)image.width),
             "encode_gray_png: stb_image_write failed on a ", image.width, "x", image.height, " image");
  return out;
}

namespace {

// The taps that resample one axis of in_len samples to out_len: output o is the sum of
// weight[t] * in[index[t]] over t in [first[o], first[o + 1]), divided by divisor[o].
// Shrinking, the taps are the source samples that the interval [o, o + 1) * in_len / out_len
// covers, each weighted by how much of it is covered, and the divisor is the interval's length;
// enlarging, they are the two samples around the output's centre, weighted bilinearly (clamped
// at the ends), and the divisor is 1.
struct ResampleTaps {
  std::vector<int64_t> first, index;
  std::vector<double> weight, divisor;
};

ResampleTaps resample_taps(int64_t in_len, int64_t out_len) {
  ResampleTaps t;
  const double step = (double)in_len / (double)out_len;
  t.first.reserve((size_t)out_len + 1);
  t.divisor.reserve((size_t)out_len);
  for (int64_t o = 0; o < out_len; ++o) {
    t.first.push_back((int64_t)t.index.size());
    if (step >= 1) {
      const double a = (double)o * step, b = std::min((double)in_len, (double)(o + 1) * step);
      double covered = 0;
      for (int64_t i = (int64_t)a; i < (int64_t)std::ceil(b); ++i) {
        const double w = std::min(b, (double)i + 1) - std::max(a, (double)i);
        t.index.push_back(i), t.weight.push_back(w);
        covered += w;
      }
      t.divisor.push_back(covered);
    } else {
      const double pos = std::clamp(((double)o + 0.5) * step - 0.5, 0.0, (double)(in_len - 1));
      const int64_t i0 = (int64_t)pos, i1 = std::min(i0 + 1, in_len - 1);
      const double f = pos - (double)i0;
      t.index.push_back(i0), t.weight.push_back(1 - f);
      t.index.push_back(i1), t.weight.push_back(f);
      t.divisor.push_back(1);
    }
  }
  t.first.push_back((int64_t)t.index.size());
  return t;
}

}  // namespace

namespace {

// 1-D Gaussian taps for offsets -radius..radius (unnormalised: the blur divides by the sum of
// the taps it uses). The centre tap is 1, so a sum is never 0.
std::vector<double> gaussian_taps(double sigma, int64_t radius) {
  std::vector<double> taps((size_t)(2 * radius + 1));
  for (int64_t k = -radius; k <= radius; ++k) {
    // (k / sigma)^2 rather than k^2 / sigma^2: an enormous sigma gives 0 here, not inf/inf.
    const double t = (double)k / sigma;
    taps[(size_t)(k + radius)] = std::exp(-0.5 * t * t);
  }
  return taps;
}

// The kernel radius for `sigma` along an axis of `length` pixels: 3 sigma, but never more than
// length - 1 (further taps would fall outside the image from every pixel), computed in double
// so that a huge or infinite sigma never reaches an integer conversion.
int64_t blur_radius(double sigma, int64_t length) {
  return (int64_t)std::min(std::ceil(3 * sigma), (double)(length - 1));
}

}  // namespace

// Separable: a horizontal pass into doubles, then a vertical pass. Taps that fall outside the
// image are left out and the rest renormalised (rather than repeating the edge pixel, which
// would weigh it many times over): with the radius clamped to the image, a huge sigma then
// gives exactly the mean of the row and column.
GrayImage gaussian_blur(const GrayImage& image, double sigma) {
  OCRT_CHECK(image.width > 0 && image.height > 0 && (int64_t)image.pixels.size() == image.width * image.height,
             "gaussian_blur: the image is empty or inconsistent (", image.width, "x", image.height, ", ",
             image.pixels.size(), " pixels)");
  OCRT_CHECK(!std::isnan(sigma), "gaussian_blur: sigma is NaN");
  if (sigma <= 0) return image;
  const int64_t w = image.width, h = image.height;
  const int64_t rx = blur_radius(sigma, w), ry = blur_radius(sigma, h);
  const std::vector<double> tx = gaussian_taps(sigma, rx), ty = gaussian_taps(sigma, ry);
  // Both passes add the taps in the same order as a per-pixel loop would (k ascending), but
  // with the pixels innermost, so each tap is one pass over contiguous memory. A pixel's
  // normaliser (the sum of its taps inside the image) depends only on its column in the row
  // pass and on its row in the column pass. The row pass's results are kept only for the rows
  // the column pass still needs (2 ry + 1 of them, in a ring): a page's whole image of doubles
  // (10 MB at 1280 x 992) was fresh memory, faulted in page by page, at every call.
  std::vector<double> norm_x((size_t)w, 0.0);
  for (int64_t x = 0; x < w; ++x)
    for (int64_t k = std::max(-rx, -x); k <= std::min(rx, w - 1 - x); ++k) norm_x[(size_t)x] += tx[(size_t)(k + rx)];
  const int64_t ring = std::min(2 * ry + 1, h);
  std::vector<double> rows((size_t)(ring * w));
  auto row_pass = [&](int64_t y) {  // row y along x, into its slot of the ring
    const uint8_t* src = image.pixels.data() + y * w;
    double* dst = rows.data() + (y % ring) * w;
    std::fill(dst, dst + w, 0.0);
    for (int64_t k = -rx; k <= rx; ++k) {
      const double t = tx[(size_t)(k + rx)];
      for (int64_t x = std::max<int64_t>(0, -k); x < std::min(w, w - k); ++x) dst[x] += t * src[x + k];
    }
    for (int64_t x = 0; x < w; ++x) dst[x] /= norm_x[(size_t)x];
  };
  GrayImage out;
  out.width = w, out.height = h;
  out.pixels.assign((size_t)(w * h), 0);
  std::vector<double> acc((size_t)w);
  int64_t done = 0;  // rows [0, done) have been through the row pass
  for (int64_t y = 0; y < h; ++y) {
    for (const int64_t last = std::min(h - 1, y + ry); done <= last; ++done) row_pass(done);
    std::fill(acc.begin(), acc.end(), 0.0);
    double norm = 0;
    for (int64_t k = std::max(-ry, -y); k <= std::min(ry, h - 1 - y); ++k) {
      const double t = ty[(size_t)(k + ry)];
      const double* src = rows.data() + ((y + k) % ring) * w;
      for (int64_t x = 0; x < w; ++x) acc[(size_t)x] += t * src[x];
      norm += t;
    }
    for (int64_t x = 0; x < w; ++x) out.pixels[(size_t)(y * w + x)] = to_pixel(acc[(size_t)x] / norm);
  }
  return out;
}

bool looks_screened(const GrayImage& sharp, const GrayImage& blurred, int64_t x0, int64_t y0, int64_t x1, int64_t y1) {
  const int64_t W = sharp.width, H = sharp.height;
  OCRT_CHECK(W >= 0 && H >= 0 && blurred.width == W && blurred.height == H &&
                 (int64_t)sharp.pixels.size() == W * H && (int64_t)blurred.pixels.size() == W * H,
             "looks_screened: the image and its blur differ in size or are inconsistent");
  OCRT_CHECK(0 <= x0 && x0 <= x1 && x1 <= W && 0 <= y0 && y0 <= y1 && y1 <= H, "looks_screened: the part [", x0, ", ",
             x1, ") x [", y0, ", ", y1, ") is not inside the ", W, "x", H, " image");
  constexpr int kGreyLo = 48, kGreyHi = 208;
  constexpr double kGreyShare = 0.75, kDetail = 12;
  if (x1 == x0 || y1 == y0) return false;
  int64_t grey = 0, detail = 0;
  for (int64_t y = y0; y < y1; ++y) {
    const uint8_t* a = sharp.pixels.data() + y * W;
    const uint8_t* b = blurred.pixels.data() + y * W;
    for (int64_t x = x0; x < x1; ++x) {
      grey += b[x] > kGreyLo && b[x] < kGreyHi;
      detail += std::abs((int)a[x] - (int)b[x]);
    }
  }
  const double n = (double)((x1 - x0) * (y1 - y0));
  return (double)grey >= kGreyShare * n && (double)detail >= kDetail * n;
}

GrayImage resize_to_height(const GrayImage& src, int64_t height) {
  OCRT_CHECK(height >= 1, "resize_to_height: height must be >= 1, got ", height);
  OCRT_CHECK(src.width >= 1 && src.height >= 1, "resize_to_height: empty image");
  if (src.height == height) return src;
  const int64_t width = std::max<int64_t>(1, std::llround((double)src.width * (double)height / (double)src.height));
  // A hostile file can be a valid image of 16 Mpixels that is one pixel high (a PNG of a few
  // KB): brought to a line's height it would take terabytes. The result, and with it the
  // double buffers below (at most 8 bytes a pixel each), is held to the decoder's default
  // budget, which no text line comes near (at height 32, 524288 pixels wide).
  OCRT_CHECK((double)width * (double)height <= (double)kDefaultMaxImagePixels, "resize_to_height: a ", src.width,
             "x", src.height, " image would become ", width, "x", height, ", more than the ", kDefaultMaxImagePixels,
             " pixels a resized line may have (is it a text line?)");
  GrayImage out;
  out.width = width, out.height = height;
  out.pixels.resize((size_t)(width * height));
  // One axis at a time: each source row the output needs is resampled along x into doubles,
  // then each output row is the weighted sum of its source rows. A sample is the average of the
  // source interval it covers (shrinking: a box filter) or the bilinear interpolation at its
  // centre (enlarging). The taps of each axis are worked out once; a source row is resampled
  // once per output row that reads it (the row shared by two neighbours is kept), so no buffer
  // of the whole image is needed.
  const ResampleTaps along_x = resample_taps(src.width, width), along_y = resample_taps(src.height, height);
  auto resample_row = [&](int64_t y, double* o) {
    const uint8_t* in = src.pixels.data() + y * src.width;
    for (int64_t x = 0; x < width; ++x) {
      double sum = 0;
      for (int64_t t = along_x.first[(size_t)x]; t < along_x.first[(size_t)x + 1]; ++t)
        sum += along_x.weight[(size_t)t] * (double)in[along_x.index[(size_t)t]];
      o[x] = sum / along_x.divisor[(size_t)x];
    }
  };
  // A page (millions of pixels) is split over the threads; a line is not worth a team.
  const bool big = src.width * src.height >= (int64_t)1 << 20;
#pragma omp parallel if (big)
  {
    std::vector<double> sum((size_t)width), row((size_t)width), last((size_t)width);
    int64_t last_y = -1;
#pragma omp for schedule(static)
    for (int64_t y = 0; y < height; ++y) {
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t t = along_y.first[(size_t)y]; t < along_y.first[(size_t)y + 1]; ++t) {
        const int64_t sy = along_y.index[(size_t)t];
        if (sy != last_y) resample_row(sy, row.data()), std::swap(row, last), last_y = sy;
        const double w = along_y.weight[(size_t)t];
        for (int64_t x = 0; x < width; ++x) sum[(size_t)x] += w * last[(size_t)x];
      }
      uint8_t* o = out.pixels.data() + y * width;
      const double divisor = along_y.divisor[(size_t)y];
      for (int64_t x = 0; x < width; ++x) o[x] = to_pixel(sum[(size_t)x] / divisor);
    }
  }
  return out;
}

Tensor pack_batch(const std::vector<GrayImage>& lines, const BatchSpec& spec, std::vector<int64_t>* widths,
                  int64_t min_width) {
  OCRT_CHECK(!lines.empty(), "pack_batch: no lines");
  OCRT_CHECK(spec.width_multiple >= 1, "pack_batch: width multiple must be >= 1");
  const int64_t H = lines[0].height;
  int64_t W = min_width;
  std::vector<int64_t> padded;
  for (size_t i = 0; i < lines.size(); ++i) {
    OCRT_CHECK(lines[i].height == H, "pack_batch: line ", i, " is ", lines[i].height, " pixels high, line 0 is ", H);
    OCRT_CHECK(lines[i].width >= 1, "pack_batch: line ", i, " is empty");
    padded.push_back(padded_width(lines[i].width, spec.width_multiple));
    W = std::max(W, padded.back());
  }
  const int64_t N = (int64_t)lines.size();
  std::vector<float> v((size_t)(N * H * W));
  const float pad = (float)(spec.pad_value * spec.scale + spec.offset);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t y = 0; y < H; ++y) {
      float* row = v.data() + (n * H + y) * W;
      const GrayImage& img = lines[(size_t)n];
      for (int64_t x = 0; x < img.width; ++x) row[x] = (float)(img.at(x, y) * spec.scale + spec.offset);
      std::fill(row + img.width, row + W, pad);
    }
  if (widths) *widths = padded;
  return Tensor::from_vector(v, {N, 1, H, W});
}

namespace {

// 3x3 box sums of a line (0 .. 9 * 255), edge pixels repeated: rows, then columns.
std::vector<int> box_sums_3x3(const GrayImage& line) {
  const int64_t W = line.width, H = line.height;
  std::vector<int> rows((size_t)(W * H)), sums((size_t)(W * H));
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x)
      rows[(size_t)(y * W + x)] = line.at(std::max<int64_t>(x - 1, 0), y) + line.at(x, y) +
                                  line.at(std::min(x + 1, W - 1), y);
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x)
      sums[(size_t)(y * W + x)] = rows[(size_t)(std::max<int64_t>(y - 1, 0) * W + x)] + rows[(size_t)(y * W + x)] +
                                  rows[(size_t)(std::min(y + 1, H - 1) * W + x)];
  return sums;
}

// The line's noise: sigma from the 25th percentile of |difference| between horizontal
// neighbours (0.4506 sigma for Gaussian noise; text edges, a minority of the pairs, barely move it).
double noise_sigma(const GrayImage& line) {
  int64_t differences[256] = {}, pairs = 0;
  for (int64_t y = 0; y < line.height; ++y)
    for (int64_t x = 1; x < line.width; ++x, ++pairs)
      ++differences[std::abs((int)line.at(x, y) - (int)line.at(x - 1, y))];
  int q25 = 0;
  for (int64_t seen = 0; pairs > 0 && q25 < 255 && (seen += differences[q25]) < (pairs + 3) / 4;) ++q25;
  return q25 / 0.4506;
}

// The value of rank size / 2 (0-based; the upper median) of box sums, each in 0 .. 9 x 255,
// by counting them: what std::nth_element finds, without sorting a copy (the whole line's sums
// went through nth_element for every line read).
constexpr int kBoxSumLevels = 9 * 255 + 1;
int box_sum_median(const std::vector<int>& v) {
  std::vector<int64_t> count(kBoxSumLevels, 0);
  for (int x : v) ++count[(size_t)x];
  const int64_t rank = (int64_t)v.size() / 2;
  int64_t seen = 0;
  int level = 0;
  while (level < kBoxSumLevels - 1 && (seen += count[(size_t)level]) <= rank) ++level;
  return level;
}

// Ink against each block's background (the median of its smoothed pixels): per pixel, 1 dark
// ink, 2 light ink, 0 neither; counts both kinds into n.
std::vector<uint8_t> classify_ink(const std::vector<int>& sums, int64_t W, int64_t H, LineNormalization& n) {
  const int threshold = 9 * n.threshold;
  const int64_t blocks = std::max<int64_t>(1, W / (2 * H));
  std::vector<uint8_t> kind((size_t)(W * H), 0);
  std::vector<int> block;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t x0 = b * W / blocks, x1 = (b + 1) * W / blocks;
    block.clear();
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = x0; x < x1; ++x) block.push_back(sums[(size_t)(y * W + x)]);
    const int background = box_sum_median(block);
    for (int64_t y = 0; y < H; ++y)
      for (int64_t x = x0; x < x1; ++x) {
        const size_t i = (size_t)(y * W + x);
        kind[i] = sums[i] <= background - threshold ? 1 : sums[i] >= background + threshold ? 2 : 0;
        n.dark_ink += kind[i] == 1;
        n.light_ink += kind[i] == 2;
      }
  }
  return kind;
}

// Polarity. The paper is the border's side: where the border's median (of the smoothed line)
// is clearly off the whole line's median, toward the light or the dark, that says which side
// the paper is on (this holds when bold or blurred ink makes up half the line and its median
// is no longer paper). Where they agree, the ink is whichever kind there is more of.
bool is_inverted(const std::vector<int>& sums, int64_t W, int64_t H, LineNormalization& n) {
  std::vector<int> border;
  for (int64_t x = 0; x < W; ++x) {
    border.push_back(sums[(size_t)x]);
    if (H > 1) border.push_back(sums[(size_t)((H - 1) * W + x)]);
  }
  for (int64_t y = 1; y + 1 < H; ++y) {
    border.push_back(sums[(size_t)(y * W)]);
    if (W > 1) border.push_back(sums[(size_t)(y * W + W - 1)]);
  }
  n.border = box_sum_median(border) / 9.0;
  n.median = box_sum_median(sums) / 9.0;
  if (std::abs(n.border - n.median) >= n.threshold / 2.0) return n.border < n.median;
  return n.light_ink > n.dark_ink;
}

// The level at quantile q of `count` values counted in a histogram.
int histogram_percentile(const int64_t (&histogram)[256], int64_t count, double q) {
  const int64_t rank = std::max<int64_t>(1, (int64_t)std::ceil(q * (double)count));  // 1-based
  int64_t seen = 0;
  int level = 0;
  while (level < 255 && (seen += histogram[level]) < rank) ++level;
  return level;
}

// Levels: the ink, the 10th percentile of the pixels where the smoothed line found ink of the
// line's own kind (a stroke's core, however thin), and the paper, the 99th percentile of all;
// stretched to 0 .. 255 when they are closer than options.stretch_below.
void stretch_levels(GrayImage& out, const std::vector<uint8_t>& kind, const LineNormalizeOptions& options,
                    LineNormalization& n) {
  int64_t ink_histogram[256] = {}, histogram[256] = {}, ink_count = 0;
  const uint8_t own = n.inverted ? 2 : 1;
  for (size_t i = 0; i < out.pixels.size(); ++i) {
    ++histogram[out.pixels[i]];
    if (kind[i] == own) ++ink_histogram[out.pixels[i]], ++ink_count;
  }
  n.lo = histogram_percentile(ink_histogram, ink_count, 0.10);
  n.hi = histogram_percentile(histogram, (int64_t)out.pixels.size(), 0.99);
  n.stretched = n.hi > n.lo && n.hi - n.lo < options.stretch_below;
  if (n.stretched) {
    const double scale = 255.0 / (double)(n.hi - n.lo);
    uint8_t level[256];  // what each of the 256 levels becomes, worked out once
    for (int v = 0; v < 256; ++v) level[v] = (uint8_t)std::clamp<long>(std::lround(((double)v - n.lo) * scale), 0, 255);
    for (auto& v : out.pixels) v = level[v];
  }
}

}  // namespace

GrayImage normalize_line(const GrayImage& line, const LineNormalizeOptions& options, LineNormalization* info) {
  OCRT_CHECK(line.width >= 1 && line.height >= 1 && (int64_t)line.pixels.size() == line.width * line.height,
             "normalize_line: the image is empty or inconsistent (", line.width, "x", line.height, ")");
  LineNormalization n;
  if (!options.enabled) {
    if (info) *info = n;
    return line;
  }
  const int64_t W = line.width, H = line.height;
  const std::vector<int> sums = box_sums_3x3(line);
  n.noise = noise_sigma(line);
  n.threshold = std::max(options.ink_threshold, (int)std::lround(2 * n.noise));
  const std::vector<uint8_t> kind = classify_ink(sums, W, H, n);
  n.blank = std::max(n.dark_ink, n.light_ink) < options.min_ink_pixels;
  if (n.blank) {
    if (info) *info = n;
    return line;
  }
  n.inverted = is_inverted(sums, W, H, n);
  GrayImage out = line;
  if (n.inverted)
    for (auto& v : out.pixels) v = (uint8_t)(255 - v);
  stretch_levels(out, kind, options, n);
  if (info) *info = n;
  return out;
}

bool is_uniform(const GrayImage& image, int tolerance) {
  if (image.pixels.empty()) return true;
  const auto [smallest, largest] = std::minmax_element(image.pixels.begin(), image.pixels.end());
  return (int)*largest - (int)*smallest <= tolerance;
}

}  // namespace ocrt
