// Model files: a round trip keeps weights and metadata; weights-only files load without
// metadata; corrupt metadata fails with the path and the field.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cmath>
#include <filesystem>
#include <limits>

#include "models/layers.h"
#include "models/model_file.h"
#include "models/recognizer.h"
#include "runtime/cpu_allocator.h"
#include "runtime/safetensors.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::nn;

namespace {
std::string temp_path(const std::string& name) {
  return (ocrt::testing::process_temp_dir("model-file") / name).string();
}
}  // namespace

TEST_CASE("a model file round trip keeps every tensor and the metadata", "[model_file]") {
  Generator gen(3);
  Linear lin(4, 3, true, gen);
  ModelInfo info;
  info.arch = "toy";
  info.config.set("in", 4);
  info.charset = {"a", " ", "\xc3\xa9", "\""};  // includes a space, a 2-byte character and a quote
  info.input = default_input_spec();
  info.training.set("steps", 10);
  const std::string path = temp_path("roundtrip.safetensors");
  save_model_file(path, lin, info);
  ModelFile f = load_model_file(path);
  REQUIRE(f.info.has_value());
  CHECK(f.info->arch == "toy");
  CHECK(f.info->config.at("in").as_int() == 4);
  CHECK(f.info->charset == info.charset);
  CHECK(f.info->input.at("height").as_int() == 32);
  CHECK(f.info->training.at("steps").as_int() == 10);
  REQUIRE(f.weights.size() == 2);
  CHECK(f.weights.at("weight").to_vector<float>() == lin.weight.to_vector<float>());
  Linear other(4, 3, true, gen);
  other.load_state_dict(f.weights);
  CHECK(other.bias.to_vector<float>() == lin.bias.to_vector<float>());
  std::remove(path.c_str());
}

TEST_CASE("a weights-only file loads without metadata", "[model_file]") {
  const std::string path = temp_path("weights_only.safetensors");
  save_safetensors(path, {{"weight", Tensor::ones({3, 4})}, {"bias", Tensor::zeros({3})}});
  ModelFile f = load_model_file(path);
  CHECK(!f.info.has_value());
  CHECK(f.weights.size() == 2);
  std::remove(path.c_str());
}

TEST_CASE("bad model metadata fails with the path and the field", "[model_file]") {
  const std::string path = temp_path("bad.safetensors");
  auto write = [&](std::map<std::string, std::string> meta) { save_safetensors(path, {{"w", Tensor::ones({1})}}, meta); };
  std::map<std::string, std::string> good{{"format", "ocrt-model-1"}, {"arch", "crnn"}, {"config", "{}"},
                                          {"charset", "[\"a\"]"}, {"input", "{}"}};
  write(good);
  CHECK_NOTHROW(load_model_file(path));
  auto bad = good;
  bad["format"] = "other-9";
  write(bad);
  CHECK_THROWS_WITH(load_model_file(path), Catch::Contains("unknown model file format 'other-9'"));
  bad = good;
  bad["config"] = "{not json";
  write(bad);
  CHECK_THROWS_WITH(load_model_file(path), Catch::Contains("'config' is not valid JSON") && Catch::Contains(path));
  bad = good;
  bad["charset"] = "[]";
  write(bad);
  CHECK_THROWS_WITH(load_model_file(path), Catch::Contains("'charset' must be a non-empty JSON array"));
  bad = good;
  bad.erase("input");
  write(bad);
  CHECK_THROWS_WITH(load_model_file(path), Catch::Contains("has no 'input' entry"));
  std::remove(path.c_str());
}

TEST_CASE("a model file with a NaN or infinite weight is refused, naming the tensor", "[model_file]") {
  ocrt::testing::TempDir dir("model-file-nonfinite");
  ModelInfo info;
  info.arch = "toy";
  info.charset = {"a"};
  info.input = default_input_spec();
  const double bad_values[] = {std::nan(""), std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity()};
  for (double bad : bad_values) {
    INFO(bad);
    Generator gen(3);
    Linear lin(4, 3, true, gen);
    std::vector<float> b = lin.bias.to_vector<float>();
    b[2] = (float)bad;
    {
      NoGradGuard no_grad;
      lin.bias.copy_(Tensor::from_vector(b, {3}));
    }
    const std::string path = (dir.path / "bad.safetensors").string();
    save_model_file(path, lin, info);
    CHECK_THROWS_WITH(load_model_file(path), Catch::Contains("bad.safetensors: tensor 'bias' holds a non-finite value") &&
                                                 Catch::Contains("at element 2 of 3"));
    // A weights-only file is checked the same way.
    save_safetensors(path, {{"weight", lin.weight}, {"bias", lin.bias}});
    CHECK_THROWS_WITH(load_model_file(path), Catch::Contains("tensor 'bias' holds a non-finite value"));
  }
}

TEST_CASE("a config that asks for a far larger model than its weights fails before allocating it", "[model_file]") {
  // A tiny file (one small tensor) whose config says crnn with 100,000 channels a layer: the
  // model would take hundreds of GB. The guard stops the first allocation past its budget.
  Generator gen(3);
  Linear lin(4, 3, true, gen);
  const StateDict weights = lin.state_dict();
  const CpuMemoryStats before = cpu_memory_stats();
  Json config = Json::object();
  Json channels = Json::array();
  for (int i = 0; i < 7; ++i) channels.push_back(100000);
  config.set("channels", channels);
  config.set("hidden", 100000);
  config.set("num_classes", 96);
  {
    const ModelSizeGuard guard(weights, "huge.safetensors");
    CHECK_THROWS_WITH(make_recognizer("crnn", config, gen),
                      Catch::Contains("huge.safetensors: the model's config asks for a larger model than its weights") &&
                          Catch::Contains("MiB"));
  }
  CHECK(cpu_memory_stats().peak - before.peak < (size_t(256) << 20));  // nothing large was taken
  // Outside the guard, and for a config its weights fit, nothing changes.
  const Json small = make_recognizer("crnn-s", 96, gen)->config_json();
  const auto model = make_recognizer("crnn-s", small, gen);
  {
    const ModelSizeGuard guard(model->state_dict(), "fits.safetensors");
    CHECK_NOTHROW(make_recognizer("crnn-s", small, gen));
  }
}
