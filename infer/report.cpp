// Output formats, evaluation and the logits file of ocrt-infer (see report.h).
#include "infer/report.h"

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include <unistd.h>

#include "models/edit_distance.h"
#include "runtime/safetensors.h"

namespace ocrt::infer {

namespace {

// Rounded to `digits` decimals so that the output stays short: dividing by an exact power of
// ten gives the double nearest to, say, 0.8723, whose shortest round-trip form is "0.8723".
// A NaN or infinity (which JSON cannot hold, and the predictor turns into a line's error) is
// written as null, so that a writer never fails on a value.
Json round_to(double v, int digits) {
  if (!std::isfinite(v)) return Json(nullptr);
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

// The characters of a text, or its bytes when it is not valid UTF-8 (ground truth files may not be).
std::vector<std::string> chars_of(const std::string& text) {
  try {
    return nn::utf8_chars(text);
  } catch (const Error&) {
    std::vector<std::string> bytes;
    for (char c : text) bytes.emplace_back(1, c);
    return bytes;
  }
}

// A character for a report line: a control character as U+XXXX, the rest as they are.
std::string printable(const std::string& c) {
  if (c.size() == 1 && ((unsigned char)c[0] < 0x20 || c[0] == 0x7f)) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "U+%04X", (unsigned)(unsigned char)c[0]);
    return buf;
  }
  return c;
}

std::string tsv_field(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\t') out += "\\t";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\\') out += "\\\\";
    else out += c;
  }
  return out;
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

Format parse_format(const std::string& name) {
  if (name == "text") return Format::text;
  if (name == "tsv") return Format::tsv;
  if (name == "jsonl") return Format::jsonl;
  fail("unknown output format '", name, "' (expected text, tsv or jsonl)");
}

std::string format_line(const LineResult& r, const FormatOptions& o, const Scored* scored) {
  switch (o.format) {
    case Format::text:
      return r.text + "\n";
    case Format::tsv: {
      std::string line = tsv_field(r.name) + "\t" + tsv_field(r.text) + "\t" + (r.ok() ? fixed(r.confidence, 4) : "") +
                         "\t" + tsv_field(r.error);
      if (o.positions) {
        std::string xs;
        for (const auto& c : r.chars) {
          if (!xs.empty()) xs += ' ';
          xs += fixed(c.x, 1);
        }
        line += "\t" + xs;
      }
      return line + "\n";
    }
    case Format::jsonl: {
      Json j = Json::object();
      j.set("path", r.name);
      if (r.ok()) {
        j.set("text", r.text);
        j.set("confidence", round_to(r.confidence, 4));
        if (o.positions) {
          Json chars = Json::array();
          for (const auto& c : r.chars) {
            Json e = Json::object();
            e.set("c", c.ch);
            e.set("frame", c.frame);
            e.set("x", round_to(c.x, 1));
            e.set("p", round_to(c.confidence, 4));
            chars.push_back(std::move(e));
          }
          j.set("chars", std::move(chars));
        }
      }
      if (scored) {
        j.set("truth", scored->truth);
        j.set("distance", scored->distance);
        j.set("cer", scored->truth_chars ? round_to((double)scored->distance / (double)scored->truth_chars, 4)
                                         : (scored->distance ? 1.0 : 0.0));
      }
      if (!r.ok()) j.set("error", r.error);
      return j.dump() + "\n";
    }
  }
  return "";
}

int64_t char_count(const std::string& text) { return (int64_t)chars_of(text).size(); }

int64_t char_edit_distance(const std::string& a_text, const std::string& b_text) {
  return nn::edit_distance(chars_of(a_text), chars_of(b_text));
}

Scored Evaluation::add(const LineResult& r, const std::string& truth) {
  Scored s;
  s.truth = truth;
  const std::vector<std::string> truth_chars = chars_of(truth);  // split once, for all three uses
  s.truth_chars = (int64_t)truth_chars.size();
  s.distance = r.ok() ? nn::edit_distance(chars_of(r.text), truth_chars) : s.truth_chars;
  failed_ += !r.ok();
  exact_ += r.ok() && s.distance == 0 && r.text == truth;
  distance_ += s.distance;
  truth_chars_ += s.truth_chars;
  lines_.push_back({r.name, truth, r.text, r.error, s.distance, s.truth_chars});
  if (charset_) {
    bool outside = false;
    for (const std::string& c : truth_chars)
      if (!charset_->contains(c)) ++outside_[c], outside = true;
    outside_lines_ += outside;
  }
  return s;
}

int64_t Evaluation::outside_charset_chars() const {
  int64_t n = 0;
  for (const auto& [c, count] : outside_) n += count;
  return n;
}

double Evaluation::cer() const { return truth_chars_ ? (double)distance_ / (double)truth_chars_ : 0.0; }

double Evaluation::line_accuracy() const { return lines_.empty() ? 0.0 : (double)exact_ / (double)lines_.size(); }

Json Evaluation::summary() const {
  Json j = Json::object();
  j.set("lines", lines());
  j.set("failed", failed_);
  // No reference characters at all: a rate is undefined, whatever was read (null, not 0).
  j.set("cer", truth_chars_ ? Json(round_to(cer(), 6)) : Json());
  j.set("line_accuracy", round_to(line_accuracy(), 6));
  j.set("distance", distance_);
  j.set("truth_chars", truth_chars_);
  if (charset_) {
    Json which = Json::object();
    for (const auto& [c, n] : outside_) which.set(c, n);
    Json o = Json::object();
    o.set("chars", outside_charset_chars());
    o.set("lines", outside_lines_);
    o.set("which", which);
    j.set("outside_charset", o);
  }
  return j;
}

std::string Evaluation::report(int64_t worst) const {
  std::ostringstream os;
  os << "lines          " << lines() << (failed_ ? " (" + std::to_string(failed_) + " failed)" : "") << "\n"
     << "CER            "
     << (truth_chars_ ? fixed(100.0 * cer(), 2) + "%" : std::string("undefined: the references hold no characters"))
     << " (" << distance_ << " edits / " << truth_chars_ << " characters)\n"
     << "line accuracy  " << fixed(100.0 * line_accuracy(), 2) << "% (" << exact_ << " of " << lines()
     << " exactly right)\n";
  if (const int64_t outside_chars = outside_charset_chars(); outside_chars > 0) {
    // The most frequent first (then by code point), at most 20 named.
    std::vector<std::pair<std::string, int64_t>> which(outside_.begin(), outside_.end());
    std::stable_sort(which.begin(), which.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    os << "not in charset " << outside_chars << " reference characters in " << outside_lines_
       << " lines, which the model cannot read (counted as errors):";
    for (size_t i = 0; i < which.size() && i < 20; ++i)
      os << (i ? ", '" : " '") << printable(which[i].first) << "' x" << which[i].second;
    if (which.size() > 20) os << ", and " << which.size() - 20 << " more";
    os << "\n";
  }
  // The worst lines: highest per-line CER, then most edits; lines read exactly right are left out.
  std::vector<const Line*> order;
  for (const auto& l : lines_)
    if (l.distance > 0 || !l.error.empty()) order.push_back(&l);
  auto line_cer = [](const Line* l) { return l->truth_chars ? (double)l->distance / (double)l->truth_chars : 1.0; };
  std::stable_sort(order.begin(), order.end(), [&](const Line* a, const Line* b) {
    if (line_cer(a) != line_cer(b)) return line_cer(a) > line_cer(b);
    return a->distance > b->distance;
  });
  if (order.size() > (size_t)std::max<int64_t>(0, worst)) order.resize((size_t)std::max<int64_t>(0, worst));
  if (!order.empty()) {
    os << "worst lines (CER, edits, path):\n";
    for (const Line* l : order) {
      os << "  " << fixed(100.0 * line_cer(l), 1) << "%  " << l->distance << "  " << l->name << "\n";
      os << "      truth: " << l->truth << "\n";
      if (l->error.empty()) os << "      read:  " << l->text << "\n";
      else os << "      error: " << l->error << "\n";
    }
  }
  return os.str();
}

void write_logits_file(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& logits,
                       const nn::Charset& charset) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, int64_t> seen;
  for (const auto& [name, t] : logits) {
    // safetensors names must be unique and not "__metadata__": repeats get " #2", " #3", ...
    std::string key = name;
    const int64_t k = ++seen[name];
    if (k > 1 || name == "__metadata__") key += " #" + std::to_string(k);
    tensors.emplace_back(key, t);
  }
  Json chars = Json::array();
  for (const auto& c : charset.chars()) chars.push_back(c);
  save_safetensors(path, tensors, {{"format", "ocrt-logits-1"}, {"charset", chars.dump()}, {"blank", "0"}});
}

void check_output_path(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  OCRT_CHECK(!path.empty(), flag, ": the path is empty");
  std::error_code ec;
  OCRT_CHECK(!fs::is_directory(path, ec), flag, " ", path, ": is a folder, not a file");
  const fs::path parent = fs::path(path).parent_path();
  const fs::path folder = parent.empty() ? fs::path(".") : parent;
  OCRT_CHECK(fs::is_directory(folder, ec), flag, " ", path, ": the folder ", folder.string(), " does not exist");
  // The same temporary name as the atomic write's (runtime/safetensors.cpp), removed at once.
  const std::string probe = path + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(probe.c_str(), "wb");
  OCRT_CHECK(f != nullptr, flag, " ", path, ": cannot create a file in ", folder.string(), " (",
             std::strerror(errno), ")");
  std::fclose(f);
  std::remove(probe.c_str());
}

}  // namespace ocrt::infer
