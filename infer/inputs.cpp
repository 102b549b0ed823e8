// Input sources of ocrt-infer, read lazily, and lines told from pages (see inputs.h).
#include "infer/inputs.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>

#include "runtime/error.h"
#include "runtime/stb.h"
#include "runtime/text.h"
#include "runtime/tiff.h"

namespace ocrt::infer {

namespace fs = std::filesystem;

namespace {

std::string lower_extension(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return (char)std::tolower(c); });
  return ext;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The text of a .gt.txt file: one trailing newline (\n or \r\n) stripped, as in training.
std::string read_ground_truth(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  OCRT_CHECK(in.good(), p.string(), ": cannot open it");
  std::ostringstream os;
  os << in.rdbuf();
  std::string text = os.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  return text;
}

// /dev/stdin and the other names of a descriptor are a stream even when the descriptor is a
// regular file (ocrt-infer /dev/stdin < labels.txt): it has no name to tell its kind by.
bool is_stream_path(const std::string& path) {
  for (const char* prefix : {"/dev/stdin", "/dev/fd/", "/proc/self/fd/"})
    if (path.rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace

bool is_image_file_name(const std::string& path) {
  static const char* kExtensions[] = {".png", ".jpg", ".jpeg", ".bmp", ".tga", ".gif",
                                      ".pgm", ".ppm", ".pnm", ".tif", ".tiff"};
  const std::string ext = lower_extension(path);
  return std::any_of(std::begin(kExtensions), std::end(kExtensions), [&](const char* e) { return ext == e; });
}

InputReader::InputReader(bool need_truth, std::istream* standard_input, bool pages)
    : need_truth_(need_truth), pages_(pages), stdin_(standard_input ? standard_input : &std::cin) {}

InputReader::~InputReader() = default;

void InputReader::add(const std::string& arg) {
  OCRT_CHECK(!arg.empty(), "an input path is empty");
  std::error_code ec;
  Kind kind;
  const fs::file_status status = fs::status(arg, ec);
  const bool named_labels = ends_with(lower_extension(arg), ".txt") || ends_with(lower_extension(arg), ".tsv");
  if (arg == "-") kind = Kind::stdin_paths;
  else if (fs::is_directory(status)) kind = Kind::folder;
  else if (named_labels) kind = Kind::label_file;
  else if (is_stream_path(arg) || (fs::exists(status) && !fs::is_regular_file(status))) kind = Kind::stream;
  else kind = Kind::image;
  if (need_truth_ && !pages_)
    OCRT_CHECK(kind == Kind::folder || kind == Kind::label_file || kind == Kind::stream, "--eval needs the true text of every line: '", arg,
               "' is ", kind == Kind::stdin_paths ? "stdin" : "an image path",
               "; give a label file (path<TAB>text) or a folder of name.png + name.gt.txt pairs");
  if (kind == Kind::label_file)
    OCRT_CHECK(fs::exists(status) && !fs::is_directory(status), arg, ": no such label file");
  sources_.push_back({kind, arg});
}

void InputReader::add_list(const std::string& file) {
  OCRT_CHECK(!need_truth_ || pages_, "--eval needs the true text of every line: the list ", file,
             " holds only paths; give a label file (path<TAB>text) or a folder of .gt.txt pairs");
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  OCRT_CHECK(fs::exists(status), file, ": no such list file");
  OCRT_CHECK(!fs::is_directory(status), file, ": is a folder; --list takes a file of image paths (give a folder "
             "without --list)");
  sources_.push_back({Kind::list_file, file});
}

bool InputReader::read_line(std::istream& in, std::string& line) {
  while (std::getline(in, line)) {
    ++lineno_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) return true;
  }
  return false;
}

std::vector<std::string> folder_image_files(const std::string& dir) {
  std::vector<std::string> images;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && is_image_file_name(entry.path().string())) images.push_back(entry.path().string());
  std::sort(images.begin(), images.end());
  return images;
}

bool InputReader::open_next_source() {
  if (next_source_ == sources_.size()) return false;
  current_ = sources_[next_source_++];
  lineno_ = 0;
  file_.reset();
  folder_images_.clear();
  folder_pos_ = 0;
  const Source& s = *current_;
  stream_labels_ = -1;
  if (s.kind == Kind::label_file || s.kind == Kind::list_file || s.kind == Kind::stream) {
    file_ = std::make_unique<std::ifstream>(s.path, std::ios::binary);
    OCRT_CHECK(file_->good(), s.path, ": cannot open it");
  } else if (s.kind == Kind::folder) {
    folder_images_ = folder_image_files(s.path);
    if (folder_images_.empty())
      notes_.push_back(s.path + ": the folder holds no image (.png .jpg .jpeg .bmp .tga .gif .pgm .ppm .pnm "
                       ".tif .tiff, in it or below)");
  }
  return true;
}

bool InputReader::next(InputLine& out) {
  for (;;) {
    if (!current_ && !open_next_source()) return false;
    const Source& s = *current_;
    std::string line;
    switch (s.kind) {
      case Kind::image:
        out = {s.path, std::nullopt, ""};
        current_.reset();
        return true;
      case Kind::stdin_paths:
        if (read_line(*stdin_, line)) {
          out = {line, std::nullopt, ""};
          return true;
        }
        break;
      case Kind::list_file:
        if (read_line(*file_, line)) {
          out = {line, std::nullopt, ""};
          return true;
        }
        break;
      case Kind::label_file:
        if (read_line(*file_, line)) {
          out = label_line(line, fs::path(s.path).parent_path().string());
          return true;
        }
        break;
      case Kind::stream:
        if (read_line(*file_, line)) {
          if (stream_labels_ < 0) {
            if (line.find('\0') != std::string::npos || valid_utf8(line) != line) {
              // An image sent through a pipe: not read (a line's decoder wants a file).
              out = {s.path, std::nullopt, s.path + ": holds binary data, not lines of text (to read an image, give its "
                                           "file's path)"};
              current_.reset();
              return true;
            }
            stream_labels_ = line.find('\t') != std::string::npos;
          }
          if (stream_labels_) out = label_line(line, "");
          else if (need_truth_ && !pages_)
            out = {where(), std::nullopt,
                   where() + ": --eval needs 'path<TAB>text' lines; this one is '" + line.substr(0, 80) + "'"};
          else out = {line, std::nullopt, ""};
          return true;
        }
        break;
      case Kind::folder:
        while (folder_pos_ < folder_images_.size()) {
          fs::path img = folder_images_[folder_pos_++];
          fs::path gt = img;
          gt.replace_extension(".gt.txt");
          std::error_code ec;
          if (fs::exists(gt, ec)) {
            out = {img.string(), read_ground_truth(gt), ""};
            return true;
          }
          if (!need_truth_ || (pages_ && (!page_truth_file(img.string()).empty() ||
                                          !page_truth_file(img.string(), 1).empty()))) {
            out = {img.string(), std::nullopt, ""};
            return true;
          }
          ++skipped_;
        }
        break;
    }
    current_.reset();  // this source is used up
  }
}

std::string InputReader::where() const { return current_->path + " line " + std::to_string(lineno_); }

InputLine InputReader::label_line(const std::string& line, const std::string& base) const {
  const size_t tab = line.find('\t');
  if (tab == std::string::npos)
    return {where(), std::nullopt, where() + ": expected 'path<TAB>text', found no tab in '" + line.substr(0, 80) + "'"};
  if (tab == 0) return {where(), std::nullopt, where() + ": the image path is empty"};
  const fs::path rel = line.substr(0, tab);
  return {(rel.is_absolute() || base.empty() ? rel : fs::path(base) / rel).lexically_normal().string(),
          line.substr(tab + 1), ""};
}

// ---- lines and pages

namespace {

// The first `limit` bytes of a file (all of it when limit < 0); false when it cannot be read.
bool read_bytes(const std::string& path, std::string& out, int64_t limit = -1) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return false;
  if (limit < 0) {
    out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    out.resize((size_t)limit);
    in.read(out.data(), limit);
    out.resize((size_t)in.gcount());
  }
  return !in.bad();
}

bool named_tiff(const std::string& path) {
  const std::string ext = lower_extension(path);
  return ext == ".tif" || ext == ".tiff";
}

std::string size_reason(int64_t w, int64_t h) {
  return "it is " + std::to_string(w) + "x" + std::to_string(h) + " pixels: more than " +
         std::to_string(kPageMinHeight) + " high and less than 6 times as wide as high";
}

}  // namespace

bool page_shaped(int64_t width, int64_t height) {
  return height > kPageMinHeight && (double)width < kPageMaxAspect * (double)height;
}

namespace {

constexpr int64_t kHeaderBytes = 64 * 1024;

// image_file_size from the file's first bytes, read already (more when they do not suffice).
bool size_from_head(const std::string& path, std::string& bytes, int64_t& width, int64_t& height) {
  // The header of every format stb_image reads sits in the first bytes, except a JPEG's frame
  // header, which may follow large metadata (EXIF thumbnails): then the whole file.
  if (bytes.empty()) return false;
  int w = 0, h = 0, channels = 0;
  auto info = [&] {
    return bytes.size() <= (size_t)INT32_MAX &&
           stbi_info_from_memory((const stbi_uc*)bytes.data(), (int)bytes.size(), &w, &h, &channels);
  };
  bool ok = info();
  if (!ok && (int64_t)bytes.size() == kHeaderBytes && read_bytes(path, bytes)) ok = info();
  if (!ok) return false;
  if (h < 0 && h != INT32_MIN) h = -h;  // a BMP stored top-down
  if (w <= 0 || h <= 0) return false;
  width = w, height = h;
  return true;
}

}  // namespace

bool image_file_size(const std::string& path, int64_t& width, int64_t& height) {
  std::string bytes;
  return read_bytes(path, bytes, kHeaderBytes) && size_from_head(path, bytes, width, height);
}

std::string page_truth_file(const std::string& image_path, int64_t page_number) {
  fs::path base = fs::path(image_path).replace_extension();
  std::string stem = base.string();
  if (page_number > 0) stem += "-" + std::to_string(page_number);
  std::error_code ec;
  for (const char* ext : {".json", ".hocr", ".xml"})
    if (fs::is_regular_file(stem + ext, ec)) return stem + ext;
  return "";
}

ItemReader::ItemReader(InputReader& inputs, InputKind kind, int64_t max_image_pixels)
    : inputs_(inputs), kind_(kind), max_image_pixels_(max_image_pixels) {}

bool ItemReader::next(InputItem& out) {
  for (;;) {
    // The pages of a TIFF, one at a time.
    if (tiff_next_ < tiff_pages_) {
      const int64_t k = tiff_next_++;
      InputItem item;
      item.path = tiff_input_.path;
      item.pages_in_file = tiff_pages_;
      item.page_number = tiff_pages_ > 1 ? k + 1 : 0;
      item.name = tiff_pages_ > 1 ? item.path + "#" + std::to_string(k + 1) : item.path;
      if (tiff_pages_ == 1) item.truth = tiff_input_.truth;
      try {
        item.image = decode_tiff_page(tiff_bytes_.data(), tiff_bytes_.size(), item.path, k, max_image_pixels_);
      } catch (const std::exception& e) {
        item.error = e.what();
      }
      if (kind_ == InputKind::page) {
        item.page = true, item.why = "--page";
      } else if (kind_ == InputKind::automatic && !(tiff_pages_ == 1 && item.truth)) {
        if (tiff_pages_ > 1) item.page = true, item.why = "a page of a multi-page TIFF";
        else if (item.image && page_shaped(item.image->width, item.image->height))
          item.page = true, item.why = size_reason(item.image->width, item.image->height);
      }
      if (tiff_next_ == tiff_pages_) tiff_bytes_.clear(), tiff_bytes_.shrink_to_fit(), tiff_pages_ = tiff_next_ = 0;
      out = std::move(item);
      return true;
    }

    InputLine line;
    if (!inputs_.next(line)) return false;
    InputItem item;
    item.path = item.name = line.path;
    item.truth = std::move(line.truth);
    if (!line.error.empty()) {  // a malformed label line: its own error, never opened as a file
      item.error = std::move(line.error);
      item.page = kind_ == InputKind::page;
      out = std::move(item);
      return true;
    }

    // A TIFF: every page (--line reads each as a line). Looked for by content, except with
    // --line, where only files named .tif/.tiff are opened here (a list of a million PNG lines
    // is not read twice).
    std::string head;
    const bool look = kind_ != InputKind::line || named_tiff(item.path);
    const bool need_size = kind_ == InputKind::automatic && !item.truth;
    if (look && read_bytes(item.path, head, need_size ? kHeaderBytes : 8) && is_tiff(head.data(), head.size())) {
      std::string bytes;
      int64_t pages = 0;
      std::string error;
      if (!read_bytes(item.path, bytes)) error = item.path + ": cannot read it";
      else try {
          pages = tiff_page_count(bytes.data(), bytes.size(), item.path);
        } catch (const std::exception& e) {
          error = e.what();
        }
      if (error.empty() && pages > 0) {
        tiff_bytes_ = std::move(bytes);
        tiff_input_ = {item.path, item.truth, ""};
        tiff_pages_ = pages, tiff_next_ = 0;
        continue;
      }
      item.error = error.empty() ? item.path + ": the TIFF has no pages" : error;
      item.page = kind_ == InputKind::page;
      if (item.page) item.why = "--page";
      out = std::move(item);
      return true;
    }

    if (kind_ == InputKind::page) {
      item.page = true, item.why = "--page";
    } else if (need_size) {
      int64_t w = 0, h = 0;
      if (size_from_head(item.path, head, w, h) && page_shaped(w, h)) item.page = true, item.why = size_reason(w, h);
    }
    out = std::move(item);
    return true;
  }
}

}  // namespace ocrt::infer
