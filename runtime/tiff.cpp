#include "runtime/tiff.h"

#include <tiffio.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/error.h"

namespace ocrt {

namespace {

// The file's bytes, seen by libtiff through its client procedures (read-only; no copy).
struct MemoryFile {
  const uint8_t* data;
  uint64_t size;
  uint64_t pos = 0;
};

MemoryFile& file_of(thandle_t h) { return *static_cast<MemoryFile*>(h); }

tmsize_t read_proc(thandle_t h, void* out, tmsize_t n) {
  MemoryFile& f = file_of(h);
  if (n < 0) return -1;
  const uint64_t left = f.pos < f.size ? f.size - f.pos : 0;
  const uint64_t k = std::min<uint64_t>(left, (uint64_t)n);
  std::memcpy(out, f.data + f.pos, (size_t)k);
  f.pos += k;
  return (tmsize_t)k;
}
tmsize_t write_proc(thandle_t, void*, tmsize_t) { return -1; }
toff_t seek_proc(thandle_t h, toff_t offset, int whence) {
  MemoryFile& f = file_of(h);
  const uint64_t base = whence == SEEK_CUR ? f.pos : whence == SEEK_END ? f.size : 0;
  if (offset > UINT64_MAX - base) return (toff_t)-1;
  f.pos = base + offset;  // past the end is allowed (reads there return nothing)
  return f.pos;
}
int close_proc(thandle_t) { return 0; }
toff_t size_proc(thandle_t h) { return file_of(h).size; }
int map_proc(thandle_t h, void** base, toff_t* size) {
  *base = const_cast<uint8_t*>(file_of(h).data);
  *size = file_of(h).size;
  return 1;
}
void unmap_proc(thandle_t, void*, toff_t) {}

// libtiff's first error message for this file (its warnings are not ours to print).
struct Messages {
  std::string first_error;
};
int on_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  Messages& m = *static_cast<Messages*>(user);
  if (m.first_error.empty()) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    m.first_error = (module && *module ? std::string(module) + ": " : std::string()) + buf;
  }
  return 1;  // handled: nothing goes to stderr
}
int on_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

// One libtiff handle over the bytes, closed on every path.
class TiffReader {
 public:
  TiffReader(const void* data, size_t size, const std::string& name) : file_{static_cast<const uint8_t*>(data), size} {
    OCRT_CHECK(is_tiff(data, size), name, ": not a TIFF file");
    TIFFOpenOptions* opts = TIFFOpenOptionsAlloc();
    TIFFOpenOptionsSetMaxSingleMemAlloc(opts, (tmsize_t)1 << 28);  // no single allocation over 256 MiB
    TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, &messages_);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, nullptr);
    tif_ = TIFFClientOpenExt(name.c_str(), "r", &file_, read_proc, write_proc, seek_proc, close_proc, size_proc,
                             map_proc, unmap_proc, opts);
    TIFFOpenOptionsFree(opts);
    OCRT_CHECK(tif_ != nullptr, name, ": a corrupt or truncated TIFF (", error(), ")");
  }
  ~TiffReader() {
    if (tif_) TIFFClose(tif_);
  }
  TiffReader(const TiffReader&) = delete;
  TiffReader& operator=(const TiffReader&) = delete;

  TIFF* get() const { return tif_; }
  std::string error() const { return messages_.first_error.empty() ? "libtiff gave no reason" : messages_.first_error; }

 private:
  MemoryFile file_;
  Messages messages_;
  TIFF* tif_ = nullptr;
};

}  // namespace

bool is_tiff(const void* data, size_t size) {
  if (size < 4) return false;
  const auto* b = static_cast<const uint8_t*>(data);
  const bool ii = b[0] == 'I' && b[1] == 'I' && b[3] == 0 && (b[2] == 42 || b[2] == 43);
  const bool mm = b[0] == 'M' && b[1] == 'M' && b[2] == 0 && (b[3] == 42 || b[3] == 43);
  return ii || mm;
}

int64_t tiff_page_count(const void* data, size_t size, const std::string& name) {
  const TiffReader r(data, size, name);
  return (int64_t)TIFFNumberOfDirectories(r.get());
}

GrayImage decode_tiff_page(const void* data, size_t size, const std::string& name, int64_t page, int64_t max_pixels) {
  const TiffReader r(data, size, name);
  TIFF* tif = r.get();
  const int64_t pages = (int64_t)TIFFNumberOfDirectories(tif);
  OCRT_CHECK(page >= 0 && page < pages, name, ": no page ", page + 1, " (the TIFF has ", pages, ")");
  const std::string where = pages > 1 ? name + " (page " + std::to_string(page + 1) + " of " + std::to_string(pages) + ")" : name;
  OCRT_CHECK(TIFFSetDirectory(tif, (tdir_t)page), where, ": a corrupt TIFF (", r.error(), ")");
  uint32_t w = 0, h = 0;
  OCRT_CHECK(TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w) == 1 && TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h) == 1, where,
             ": a TIFF page without its width or height");
  OCRT_CHECK(w > 0 && h > 0, where, ": the image has zero size (", w, "x", h, ")");
  const int64_t pixels = (int64_t)w * (int64_t)h;
  OCRT_CHECK(pixels <= max_pixels, where, ": the image is too large (", w, "x", h, " = ", pixels, " pixels; at most ",
             max_pixels, " are read, ocrt-infer --max-image-pixels raises it)");
  const DecodeReservation reservation(pixels);
  std::vector<uint32_t> rgba((size_t)pixels);
  // ORIENTATION_TOPLEFT: row 0 is the top of the page whatever the file stores; stop at the
  // first error (a truncated strip is an error, not a page of zeros).
  OCRT_CHECK(TIFFReadRGBAImageOriented(tif, w, h, rgba.data(), ORIENTATION_TOPLEFT, 1) == 1, where,
             ": cannot decode the TIFF page (", r.error(), ")");
  GrayImage out;
  out.width = w, out.height = h;
  out.pixels.resize((size_t)pixels);
  for (size_t i = 0; i < out.pixels.size(); ++i) {
    const uint32_t p = rgba[i];
    const double gray = 0.299 * TIFFGetR(p) + 0.587 * TIFFGetG(p) + 0.114 * TIFFGetB(p);
    const double a = TIFFGetA(p) / 255.0;  // transparent parts are white paper, as for PNGs
    out.pixels[i] = (uint8_t)std::clamp<long>(std::lround(a * gray + (1 - a) * 255.0), 0, 255);
  }
  return out;
}

}  // namespace ocrt
