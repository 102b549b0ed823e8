// The architecture registry: one branch per model family (see recognizer.h).
#include "models/recognizer.h"

#include "models/crnn.h"
#include "models/model_file.h"
#include "models/svtr_lite.h"
#include "runtime/error.h"

namespace ocrt::nn {

namespace {
bool is_crnn(const std::string& arch) { return arch == "crnn" || arch == "crnn-s"; }
bool is_svtr(const std::string& arch) { return arch == "svtr-lite"; }
}  // namespace

Json Recognizer::input_spec() const { return default_input_spec(); }

std::vector<std::string> known_archs() { return {"crnn", "crnn-s", "svtr-lite"}; }

bool is_known_arch(const std::string& arch) {
  for (const auto& a : known_archs())
    if (a == arch) return true;
  return false;
}

std::string known_archs_str() {
  std::string s;
  for (const auto& a : known_archs()) {
    if (!s.empty()) s += ", ";
    s += a;
  }
  return s;
}

std::shared_ptr<Recognizer> make_recognizer(const std::string& arch, int64_t num_classes, Generator& gen) {
  if (is_crnn(arch)) return std::make_shared<CRNN>(CRNNConfig::preset(arch, num_classes), gen);
  if (is_svtr(arch)) return std::make_shared<SVTRLite>(SVTRLiteConfig::preset(arch, num_classes), gen);
  fail("unknown architecture '", arch, "' (expected one of ", known_archs_str(), ")");
}

std::shared_ptr<Recognizer> make_recognizer(const std::string& arch, const Json& config, Generator& gen) {
  if (is_crnn(arch)) return std::make_shared<CRNN>(CRNNConfig::from_json(config), gen);
  if (is_svtr(arch)) return std::make_shared<SVTRLite>(SVTRLiteConfig::from_json(config), gen);
  fail("unknown architecture '", arch, "' (expected one of ", known_archs_str(), ")");
}

int64_t frames_for_width(const std::string& arch, int64_t width) {
  if (is_crnn(arch)) return CRNN::frames(width);
  if (is_svtr(arch)) return SVTRLite::frames(width);
  fail("unknown architecture '", arch, "' (expected one of ", known_archs_str(), ")");
}

}  // namespace ocrt::nn
