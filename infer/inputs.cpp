// Input sources of ocrt-infer, read lazily (see inputs.h).
#include "infer/inputs.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "runtime/error.h"

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

}  // namespace

bool is_image_file_name(const std::string& path) {
  static const char* kExtensions[] = {".png", ".jpg", ".jpeg", ".bmp", ".tga", ".gif", ".pgm", ".ppm", ".pnm"};
  const std::string ext = lower_extension(path);
  return std::any_of(std::begin(kExtensions), std::end(kExtensions), [&](const char* e) { return ext == e; });
}

InputReader::InputReader(bool need_truth, std::istream* standard_input)
    : need_truth_(need_truth), stdin_(standard_input ? standard_input : &std::cin) {}

InputReader::~InputReader() = default;

void InputReader::add(const std::string& arg) {
  OCRT_CHECK(!arg.empty(), "an input path is empty");
  std::error_code ec;
  Kind kind;
  if (arg == "-") kind = Kind::stdin_paths;
  else if (fs::is_directory(arg, ec)) kind = Kind::folder;
  else if (ends_with(lower_extension(arg), ".txt") || ends_with(lower_extension(arg), ".tsv")) kind = Kind::label_file;
  else kind = Kind::image;
  if (need_truth_)
    OCRT_CHECK(kind == Kind::folder || kind == Kind::label_file, "--eval needs the true text of every line: '", arg,
               "' is ", kind == Kind::stdin_paths ? "stdin" : "an image path",
               "; give a label file (path<TAB>text) or a folder of name.png + name.gt.txt pairs");
  if (kind == Kind::label_file) OCRT_CHECK(fs::is_regular_file(arg, ec), arg, ": no such label file");
  sources_.push_back({kind, arg});
}

void InputReader::add_list(const std::string& file) {
  OCRT_CHECK(!need_truth_, "--eval needs the true text of every line: the list ", file,
             " holds only paths; give a label file (path<TAB>text) or a folder of .gt.txt pairs");
  std::error_code ec;
  OCRT_CHECK(fs::is_regular_file(file, ec), file, ": no such list file");
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

bool InputReader::open_next_source() {
  if (next_source_ == sources_.size()) return false;
  current_ = sources_[next_source_++];
  lineno_ = 0;
  file_.reset();
  folder_images_.clear();
  folder_pos_ = 0;
  const Source& s = *current_;
  if (s.kind == Kind::label_file || s.kind == Kind::list_file) {
    file_ = std::make_unique<std::ifstream>(s.path, std::ios::binary);
    OCRT_CHECK(file_->good(), s.path, ": cannot open it");
  } else if (s.kind == Kind::folder) {
    for (const auto& entry : fs::recursive_directory_iterator(s.path))
      if (entry.is_regular_file() && is_image_file_name(entry.path().string()))
        folder_images_.push_back(entry.path().string());
    std::sort(folder_images_.begin(), folder_images_.end());  // a stable order whatever the file system's
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
        out = {s.path, std::nullopt};
        current_.reset();
        return true;
      case Kind::stdin_paths:
        if (read_line(*stdin_, line)) {
          out = {line, std::nullopt};
          return true;
        }
        break;
      case Kind::list_file:
        if (read_line(*file_, line)) {
          out = {line, std::nullopt};
          return true;
        }
        break;
      case Kind::label_file:
        if (read_line(*file_, line)) {
          const size_t tab = line.find('\t');
          OCRT_CHECK(tab != std::string::npos, s.path, " line ", lineno_,
                     ": expected 'path<TAB>text', found no tab in '", line.substr(0, 80), "'");
          OCRT_CHECK(tab > 0, s.path, " line ", lineno_, ": the image path is empty");
          const fs::path rel = line.substr(0, tab);
          const fs::path base = fs::path(s.path).parent_path();
          out = {(rel.is_absolute() ? rel : base / rel).lexically_normal().string(), line.substr(tab + 1)};
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
            out = {img.string(), read_ground_truth(gt)};
            return true;
          }
          if (!need_truth_) {
            out = {img.string(), std::nullopt};
            return true;
          }
          ++skipped_;
        }
        break;
    }
    current_.reset();  // this source is used up
  }
}

}  // namespace ocrt::infer
