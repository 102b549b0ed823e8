// The one check of a model file's metadata (models/model_check.h): each way a file can differ
// from what its reader expects is refused with words naming the source; a file that fits builds.
#include <catch2/catch.hpp>

#include "models/model_check.h"
#include "runtime/rng.h"

using namespace ocrt;
using namespace ocrt::nn;

namespace {

const std::vector<std::string> kChars = {"a", "b", "c"};

ModelInfo recognizer_info(const std::string& arch = "crnn-s") {
  Generator gen(1);
  ModelInfo info;
  info.arch = arch;
  info.config = make_recognizer(arch, (int64_t)kChars.size() + 1, gen)->config_json();
  info.charset = kChars;
  info.input = default_input_spec();
  return info;
}

ModelInfo detector_info() {
  Generator gen(1);
  ModelInfo info;
  info.arch = "dbnet";
  info.config = make_detector("dbnet", gen)->config_json();
  info.input = detector_input_spec();
  return info;
}

constexpr auto kRecognizer = ModelExpectation::Kind::recognizer;
constexpr auto kDetector = ModelExpectation::Kind::detector;

}  // namespace

TEST_CASE("check_model_info accepts a recogniser that fits and refuses each mismatch", "[model_check]") {
  const ModelInfo good = recognizer_info();
  CHECK_NOTHROW(check_model_info(good, "m.safetensors", {kRecognizer, "", "", nullptr}));
  CHECK_NOTHROW(check_model_info(good, "m.safetensors", {kRecognizer, "crnn-s", "", &kChars}));

  CHECK_THROWS_WITH(check_model_info(good, "m.safetensors", {kRecognizer, "crnn", "", nullptr}),
                    Catch::Contains("m.safetensors holds a 'crnn-s' model, but 'crnn' was asked for"));
  CHECK_THROWS_WITH(check_model_info(good, "--init: m.safetensors", {kRecognizer, "crnn", "--arch", nullptr}),
                    Catch::Contains("--init: m.safetensors holds a 'crnn-s' model, but --arch is crnn"));
  const std::vector<std::string> other = {"a", "b", "d"};
  CHECK_THROWS_WITH(check_model_info(good, "--init: m.safetensors", {kRecognizer, "", "", &other}),
                    Catch::Contains("--init: m.safetensors was trained with another charset"));

  ModelInfo unknown = good;
  unknown.arch = "transformer-xl";
  CHECK_THROWS_WITH(check_model_info(unknown, "m.safetensors", {kRecognizer, "", "", nullptr}),
                    Catch::Contains("architecture is 'transformer-xl', which this build does not know"));

  ModelInfo classes = good;
  classes.charset.push_back("e");  // 4 characters, but the config still says 4 classes
  CHECK_THROWS_WITH(check_model_info(classes, "m.safetensors", {kRecognizer, "", "", nullptr}),
                    Catch::Contains("the model has 4 classes but its charset 4 characters"));

  ModelInfo no_classes = good;
  no_classes.config = Json::object();
  CHECK_THROWS_WITH(check_model_info(no_classes, "m.safetensors", {kRecognizer, "", "", nullptr}),
                    Catch::Contains("config has no 'num_classes'"));

  // A detector where a recogniser is expected, and the other way round.
  CHECK_THROWS_WITH(check_model_info(detector_info(), "d.safetensors", {kRecognizer, "", "", nullptr}),
                    Catch::Contains("'dbnet', which this build does not know"));
  CHECK_THROWS_WITH(check_model_info(good, "m.safetensors", {kDetector, "", "", nullptr}),
                    Catch::Contains("holds a 'crnn-s' model, which is not a text detector"));
}

TEST_CASE("check_model_info accepts a detector that fits and refuses other input", "[model_check]") {
  const ModelInfo good = detector_info();
  CHECK_NOTHROW(check_model_info(good, "d.safetensors", {kDetector, "", "", nullptr}));
  CHECK_NOTHROW(check_model_info(good, "d.safetensors", {kDetector, "dbnet", "", nullptr}));
  ModelInfo no_spec = good;
  no_spec.input = Json::object();  // older files: nothing said, the default assumed
  CHECK_NOTHROW(check_model_info(no_spec, "d.safetensors", {kDetector, "", "", nullptr}));
  ModelInfo scaled = good;
  scaled.input.set("scale", 1.0 / 255);
  CHECK_THROWS_WITH(check_model_info(scaled, "d.safetensors", {kDetector, "", "", nullptr}),
                    Catch::Contains("d.safetensors: the detector's input spec has scale"));
}

TEST_CASE("build_recognizer and build_detector load weights that fit and name the file when they do not",
          "[model_check]") {
  Generator gen(2);
  auto source = make_recognizer("crnn-s", 4, gen);
  const ModelInfo info = recognizer_info();
  auto built = build_recognizer(info.arch, info.config, source->state_dict(), "m.safetensors");
  CHECK_FALSE(built->is_training());
  CHECK(built->state_dict().at("fc.weight").to_vector<float>() == source->state_dict().at("fc.weight").to_vector<float>());
  CHECK(built->input_spec() == default_input_spec());

  // crnn weights for a crnn-s config: refused with the file's name and the class count.
  auto crnn = make_recognizer("crnn", 4, gen);
  CHECK_THROWS_WITH(build_recognizer(info.arch, info.config, crnn->state_dict(), "m.safetensors"),
                    Catch::Contains("m.safetensors: the weights do not fit a 'crnn-s' model with 4 classes"));

  const ModelInfo det = detector_info();
  auto det_source = make_detector("dbnet", gen);
  auto det_built = build_detector(det.arch, det.config, det_source->state_dict(), "d.safetensors");
  CHECK_FALSE(det_built->is_training());
  CHECK_THROWS_WITH(build_detector(det.arch, det.config, source->state_dict(), "d.safetensors"),
                    Catch::Contains("d.safetensors: the weights do not fit its 'dbnet' model"));
}
