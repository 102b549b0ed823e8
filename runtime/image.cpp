// Image decoding, gray conversion, resizing and batching (see image.h).
#include "runtime/image.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

#include "runtime/stb.h"

namespace ocrt {

namespace {

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

GrayImage decode_gray_image(const void* data, size_t size, const std::string& name) {
  OCRT_CHECK(size > 0, name, ": the image file is empty");
  OCRT_CHECK(size <= (size_t)INT32_MAX, name, ": the image file is too large (", size, " bytes)");
  const auto* bytes = static_cast<const stbi_uc*>(data);
  int w = 0, h = 0, channels = 0;
  OCRT_CHECK(stbi_info_from_memory(bytes, (int)size, &w, &h, &channels), name,
             ": not an image ocrt can decode (", stbi_failure_reason(), ")");
  OCRT_CHECK(w > 0 && h > 0, name, ": the image has zero size (", w, "x", h, ")");
  OCRT_CHECK((int64_t)w * h <= (int64_t)1 << 28, name, ": the image is too large (", w, "x", h, ")");
  const bool sixteen = stbi_is_16_bit_from_memory(bytes, (int)size);
  GrayImage out;
  out.width = w, out.height = h;
  out.pixels.resize((size_t)w * h);
  double v[4];
  if (sixteen) {
    stbi_us* p = stbi_load_16_from_memory(bytes, (int)size, &w, &h, &channels, 0);
    OCRT_CHECK(p != nullptr, name, ": cannot decode the image (", stbi_failure_reason(), ")");
    for (size_t i = 0; i < out.pixels.size(); ++i) {
      for (int c = 0; c < channels; ++c) v[c] = p[i * channels + c];
      out.pixels[i] = (uint8_t)std::lround(to_gray(v, channels, 65535.0) * 255.0 / 65535.0);
    }
    stbi_image_free(p);
  } else {
    stbi_uc* p = stbi_load_from_memory(bytes, (int)size, &w, &h, &channels, 0);
    OCRT_CHECK(p != nullptr, name, ": cannot decode the image (", stbi_failure_reason(), ")");
    for (size_t i = 0; i < out.pixels.size(); ++i) {
      for (int c = 0; c < channels; ++c) v[c] = p[i * channels + c];
      out.pixels[i] = (uint8_t)std::clamp<long>(std::lround(to_gray(v, channels, 255.0)), 0, 255);
    }
    stbi_image_free(p);
  }
  return out;
}

GrayImage load_gray_image(const std::string& path) {
  std::error_code ec;
  OCRT_CHECK(std::filesystem::exists(path, ec), path, ": no such file");
  OCRT_CHECK(!std::filesystem::is_directory(path, ec), path, ": is a directory, not an image");
  std::ifstream in(path, std::ios::binary);
  OCRT_CHECK(in.good(), path, ": cannot open it");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return decode_gray_image(bytes.data(), bytes.size(), path);
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

GrayImage resize_to_height(const GrayImage& src, int64_t height) {
  OCRT_CHECK(height >= 1, "resize_to_height: height must be >= 1, got ", height);
  OCRT_CHECK(src.width >= 1 && src.height >= 1, "resize_to_height: empty image");
  if (src.height == height) return src;
  const int64_t width = std::max<int64_t>(1, std::llround((double)src.width * (double)height / (double)src.height));
  GrayImage out;
  out.width = width, out.height = height;
  out.pixels.resize((size_t)(width * height));
  const double sx = (double)src.width / (double)width, sy = (double)src.height / (double)height;
  // One axis at a time into a float buffer: each output sample is either the average of the
  // source interval it covers (shrinking) or the bilinear interpolation at its centre.
  auto resample = [](const std::vector<double>& in, int64_t in_len, int64_t stride, int64_t lines,
                     int64_t line_stride_in, int64_t out_len, double scale, std::vector<double>& out,
                     int64_t out_stride, int64_t line_stride_out) {
    for (int64_t l = 0; l < lines; ++l)
      for (int64_t o = 0; o < out_len; ++o) {
        double value;
        if (scale >= 1) {  // box filter over [o*scale, (o+1)*scale)
          const double a = o * scale, b = std::min((double)in_len, (o + 1) * scale);
          double sum = 0, weight = 0;
          for (int64_t i = (int64_t)a; i < (int64_t)std::ceil(b); ++i) {
            const double wgt = std::min(b, (double)i + 1) - std::max(a, (double)i);
            sum += wgt * in[(size_t)(l * line_stride_in + i * stride)];
            weight += wgt;
          }
          value = sum / weight;
        } else {  // bilinear at the output sample's centre, clamped at the edges
          const double pos = std::clamp((o + 0.5) * scale - 0.5, 0.0, (double)(in_len - 1));
          const int64_t i0 = (int64_t)pos, i1 = std::min(i0 + 1, in_len - 1);
          const double f = pos - (double)i0;
          value = (1 - f) * in[(size_t)(l * line_stride_in + i0 * stride)] + f * in[(size_t)(l * line_stride_in + i1 * stride)];
        }
        out[(size_t)(l * line_stride_out + o * out_stride)] = value;
      }
  };
  std::vector<double> a(src.pixels.begin(), src.pixels.end());
  std::vector<double> b((size_t)(width * src.height)), c((size_t)(width * height));
  resample(a, src.width, 1, src.height, src.width, width, sx, b, 1, width);  // rows
  resample(b, src.height, width, width, 1, height, sy, c, width, 1);          // columns
  for (size_t i = 0; i < c.size(); ++i) out.pixels[i] = (uint8_t)std::clamp<long>(std::lround(c[i]), 0, 255);
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

}  // namespace ocrt
