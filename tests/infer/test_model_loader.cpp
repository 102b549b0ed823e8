// Reading a recogniser's model file as ocrt-infer and ocrt-export do (infer/model_loader.h):
// an ocrt model file stands alone; a weights-only file needs the arch and a charset file; every
// mismatch names the file and what differs.
#include <catch2/catch.hpp>

#include <fstream>

#include "infer/model_loader.h"
#include "models/crnn.h"
#include "runtime/safetensors.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::infer;

namespace {

std::string temp(const std::string& name) { return (ocrt::testing::process_temp_dir("model-loader") / name).string(); }

const std::vector<std::string> kChars{"a", "b", "c"};

std::shared_ptr<nn::Recognizer> small_model(uint64_t seed = 4) {
  Generator gen(seed);
  return nn::make_recognizer("crnn-s", (int64_t)kChars.size() + 1, gen);
}

// An ocrt model file of small_model() for kChars.
std::string model_file(const std::string& name) {
  const auto model = small_model();
  nn::ModelInfo info;
  info.arch = "crnn-s";
  info.config = model->config_json();
  info.charset = kChars;
  info.input = model->input_spec();
  info.training.set("steps", 7);
  const std::string path = temp(name);
  nn::save_model_file(path, *model, info);
  return path;
}

// The same weights without metadata (as a PyTorch export writes them).
std::string weights_only_file(const std::string& name) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [key, value] : small_model()->state_dict()) tensors.emplace_back(key, value);
  const std::string path = temp(name);
  save_safetensors(path, tensors);
  return path;
}

std::string charset_file(const std::string& name, const std::vector<std::string>& chars) {
  const std::string path = temp(name);
  std::ofstream out(path);
  for (const auto& c : chars) out << c << "\n";
  return path;
}

}  // namespace

TEST_CASE("load_model: an ocrt model file carries its arch, charset, input spec and training record",
          "[model_loader]") {
  const std::string path = model_file("full.safetensors");
  const LoadedModel m = load_model(path);
  CHECK(m.path == path);
  CHECK(m.arch == "crnn-s");
  CHECK(m.charset.chars() == kChars);
  CHECK(m.input == nn::default_input_spec());
  CHECK(m.training.at("steps").as_int() == 7);
  CHECK_FALSE(m.weights_only);
  // info() is what a model file would store again.
  const nn::ModelInfo info = m.info();
  CHECK(info.arch == "crnn-s");
  CHECK(info.charset == kChars);
  // The model built from it holds the file's weights, in eval mode.
  const auto built = build_model(m);
  CHECK_FALSE(built->is_training());
  CHECK(built->state_dict().at("fc.bias").to_vector<float>() == small_model()->state_dict().at("fc.bias").to_vector<float>());

  // The arch and charset, when given, must be the file's own.
  CHECK_NOTHROW(load_model(path, "crnn-s", charset_file("same.txt", kChars)));
  CHECK_THROWS_WITH(load_model(path, "crnn"), Catch::Contains("holds a 'crnn-s' model, but 'crnn' was asked for"));
  CHECK_THROWS_WITH(load_model(path, "", charset_file("other.txt", {"a", "b", "d"})),
                    Catch::Contains("differs from the one stored in " + path));
  CHECK_THROWS_WITH(load_model(path, "lstm-xl"), Catch::Contains("unknown architecture 'lstm-xl'"));
}

TEST_CASE("load_model: a weights-only file needs the arch and a charset file", "[model_loader]") {
  const std::string path = weights_only_file("bare.safetensors");
  CHECK_THROWS_WITH(load_model(path), Catch::Contains("holds weights only") && Catch::Contains("--charset FILE"));
  CHECK_THROWS_WITH(load_model(path, "crnn-s"), Catch::Contains("holds weights only"));
  const LoadedModel m = load_model(path, "crnn-s", charset_file("abc.txt", kChars));
  CHECK(m.weights_only);
  CHECK(m.arch == "crnn-s");
  CHECK(m.input == nn::default_input_spec());
  CHECK_NOTHROW(build_model(m));
  // A charset of another size: the preset's class count does not fit the weights.
  const LoadedModel wrong = load_model(path, "crnn-s", charset_file("abcd.txt", {"a", "b", "c", "d"}));
  CHECK_THROWS_WITH(build_model(wrong), Catch::Contains(path + ": the weights do not fit a 'crnn-s' model with 5 classes"));
  // ... and a file that is not there.
  CHECK_THROWS_WITH(load_model(temp("missing.safetensors")), Catch::Contains("cannot load the model file"));
}
