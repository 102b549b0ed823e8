// Label files, folders of pairs, and the start-up check of every sample (see data.h).
#include "train/data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/error.h"
#include "runtime/image.h"
#include "runtime/interrupt.h"

namespace ocrt::train {

namespace fs = std::filesystem;

namespace {

std::string read_text_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  OCRT_CHECK(in.good(), p.string(), ": cannot open it");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return (char)std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

std::vector<Sample> read_label_file(const fs::path& file) {
  const std::string text = read_text_file(file);
  const fs::path base = file.parent_path();
  std::vector<Sample> out;
  std::istringstream in(text);
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (lineno % 4096 == 0) throw_if_interrupted("reading the label file");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    OCRT_CHECK(tab != std::string::npos, file.string(), " line ", lineno,
               ": expected 'path<TAB>text', found no tab in '", line.substr(0, 80), "'");
    OCRT_CHECK(tab > 0, file.string(), " line ", lineno, ": the image path is empty");
    const fs::path rel = line.substr(0, tab);
    out.push_back({(rel.is_absolute() ? rel : base / rel).lexically_normal().string(), line.substr(tab + 1)});
  }
  return out;
}

std::vector<Sample> read_pairs_folder(const fs::path& dir) {
  std::vector<fs::path> images;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (images.size() % 4096 == 0) throw_if_interrupted("listing a folder of samples");
    if (entry.is_regular_file() && is_image_name(entry.path())) images.push_back(entry.path());
  }
  std::sort(images.begin(), images.end());  // a stable order whatever the file system's
  std::vector<Sample> out;
  for (const fs::path& img : images) {
    if (out.size() % 1024 == 0) throw_if_interrupted("reading a folder's .gt.txt files");
    fs::path gt = img;
    gt.replace_extension(".gt.txt");
    if (!fs::exists(gt)) continue;  // an image without a label is not a sample
    std::string text = read_text_file(gt);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (!text.empty() && text.back() == '\r') text.pop_back();
    out.push_back({img.string(), text});
  }
  return out;
}

}  // namespace

std::vector<Sample> read_source(const std::string& source) {
  const fs::path p(source);
  std::error_code ec;
  OCRT_CHECK(fs::exists(p, ec), source, ": no such label file or folder");
  return fs::is_directory(p, ec) ? read_pairs_folder(p) : read_label_file(p);
}

std::vector<Sample> read_sources(const std::vector<std::string>& sources) {
  std::vector<Sample> all;
  for (const auto& s : sources) {
    auto part = read_source(s);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

const char* problem_name(Problem p) {
  switch (p) {
    case Problem::missing_image: return "image file missing";
    case Problem::bad_image: return "image cannot be decoded";
    case Problem::empty_label: return "empty label";
    case Problem::invalid_utf8: return "label is not valid UTF-8";
    case Problem::unknown_characters: return "characters not in the charset";
    case Problem::too_long_for_image: return "label too long for the image (CTC cannot align it)";
  }
  return "?";
}

int64_t frames_needed(const std::vector<int64_t>& classes) {
  int64_t n = (int64_t)classes.size();
  for (size_t i = 1; i < classes.size(); ++i) n += classes[i] == classes[i - 1];
  return n;
}

int64_t ValidationReport::bad() const {
  int64_t n = 0;
  for (const auto& [k, c] : counts) n += c;
  return n;
}

std::string ValidationReport::summary() const {
  std::ostringstream os;
  os << total << " samples, " << good.size() << " usable, " << bad() << " with problems";
  for (const auto& [kind, count] : counts) {
    os << "\n  " << count << " x " << problem_name(kind) << ", e.g.";
    for (const auto& ex : examples.at(kind)) os << "\n      " << ex;
  }
  return os.str();
}

ValidationReport validate_samples(const std::vector<Sample>& samples, const nn::Charset& charset, int64_t height,
                                  const FrameRule& frames) {
  const int64_t n = (int64_t)samples.size();
  struct Outcome {
    bool ok = false;
    Problem problem = Problem::missing_image;
    std::string detail;
    CheckedSample checked;
  };
  std::vector<Outcome> outcomes((size_t)n);
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < n; ++i) {
    if (interrupt_signal() != 0) continue;  // every thread stops at once; thrown below
    const Sample& s = samples[(size_t)i];
    Outcome& o = outcomes[(size_t)i];
    auto problem = [&](Problem p, std::string detail) {
      o.problem = p;
      o.detail = s.path + ": " + detail;
    };
    if (s.text.empty()) {
      problem(Problem::empty_label, "the label is empty");
      continue;
    }
    std::vector<int64_t> classes;
    std::vector<std::string> unknown;
    try {
      if (!charset.encode(s.text, classes, &unknown)) {
        std::string list;
        for (const auto& u : unknown) list += (list.empty() ? "'" : ", '") + u + "'";
        problem(Problem::unknown_characters, "label '" + s.text + "' has " + list);
        continue;
      }
    } catch (const Error& e) {
      problem(Problem::invalid_utf8, e.what());
      continue;
    }
    std::error_code ec;
    if (!fs::exists(s.path, ec)) {
      problem(Problem::missing_image, "no such file");
      continue;
    }
    GrayImage img;
    try {
      img = load_gray_image(s.path);  // its errors name the path
    } catch (const Error& e) {
      o.problem = Problem::bad_image;
      o.detail = e.what();
      continue;
    }
    try {
      img = resize_to_height(img, height);
    } catch (const Error& e) {
      problem(Problem::bad_image, e.what());
      continue;
    }
    const int64_t width = padded_width(img.width);
    const int64_t need = frames_needed(classes), have = frames_for_width(frames, width);
    if (need > have) {
      problem(Problem::too_long_for_image, "label of " + std::to_string(classes.size()) + " characters needs " +
                                               std::to_string(need) + " frames, the image (width " +
                                               std::to_string(width) + " at height " + std::to_string(height) +
                                               ") gives " + std::to_string(have));
      continue;
    }
    o.ok = true;
    o.checked = {s, std::move(classes), width};
  }
  throw_if_interrupted("checking the samples (decoding every image)");
  ValidationReport r;
  r.total = n;
  for (auto& o : outcomes) {
    if (o.ok) {
      r.good.push_back(std::move(o.checked));
    } else {
      ++r.counts[o.problem];
      auto& ex = r.examples[o.problem];
      if (ex.size() < 3) ex.push_back(o.detail);
    }
  }
  return r;
}

}  // namespace ocrt::train
