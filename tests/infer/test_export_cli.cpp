// ocrt-export as a command: the ONNX file it writes for a small model file (read back with the
// tests' wire-format reader), the check output against the model run in this process, a
// weights-only file with and without --arch/--charset, and the errors for bad flags and check
// inputs (exit status 2 and a line naming what is wrong). ONNX Runtime's side is
// tests/onnx/check_onnx.py.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "models/crnn.h"
#include "models/model_file.h"
#include "ops/conv.h"
#include "ops/random.h"
#include "proto_reader.h"
#include "run_command.h"
#include "runtime/safetensors.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::testing;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

const std::string kBin = std::string(OCRT_BINARY_DIR) + "/ocrt-export";

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = a.contiguous().to_vector<float>(), y = b.contiguous().to_vector<float>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, (double)std::abs(x[i] - y[i]));
  return m;
}

}  // namespace

TEST_CASE("ocrt-export writes the graph and ocrt's logits for the check batches", "[infer][export]") {
  TempDir dir("export-cli");
  Generator gen(5);
  nn::CRNNConfig cfg;
  cfg.channels = {4, 6, 8, 8, 10, 10, 12};
  cfg.hidden = 6;
  cfg.num_classes = 4;
  nn::CRNN model(cfg, gen);
  model.eval();
  nn::ModelInfo info;
  info.arch = "crnn-s";  // any CRNN arch: the file's config gives the sizes
  info.config = cfg.to_json();
  info.charset = {"x", "y", "z"};
  info.input = nn::default_input_spec();
  const std::string weights = (dir.path / "m.safetensors").string();
  nn::save_model_file(weights, model, info);

  // Two batches, one with its lines' widths.
  Tensor a = uniform({2, 1, 32, 24}, -1, 1, gen), b = uniform({3, 1, 32, 40}, -1, 1, gen);
  const Tensor bw = Tensor::from_vector(std::vector<int64_t>{40, 16, 28});
  const std::string in = (dir.path / "in.safetensors").string(), out = (dir.path / "out.safetensors").string();
  save_safetensors(in, {{"a", a}, {"b", b}, {"b.widths", bw}});
  const std::string onnx = (dir.path / "m.onnx").string();
  std::string said;
  REQUIRE(run_command(kBin + " --onnx " + onnx + " --weights " + weights + " --widths-input --check-input " + in +
                          " --check-output " + out,
                      &said) == 0);
  CHECK_THAT(said, Catch::Contains("wrote " + onnx + " (crnn-s, 4 classes"));

  // The file: an ONNX model of IR 8 whose metadata names the arch and charset.
  const std::string bytes = read_file(onnx);
  CHECK(proto_one(bytes, 1).as_int() == 8);
  std::map<std::string, std::string> meta;
  for (const auto& e : proto_all(bytes, 14))
    meta[std::string(proto_one(e.bytes, 1).bytes)] = std::string(proto_one(e.bytes, 2).bytes);
  CHECK(meta.at("arch") == "crnn-s");
  CHECK(meta.at("charset") == "[\"x\",\"y\",\"z\"]");
  CHECK(meta.at("widths_input") == "true");

  // The check output: the model's logits, (T, N, C), with the widths where given.
  const SafetensorsFile logits = load_safetensors(out);
  CHECK(logits.metadata.at("format") == "ocrt-logits-check-1");
  REQUIRE(logits.tensors.size() == 2);
  NoGradGuard no_grad;
  Tensor want_a, want_b;
  {
    ConvModeScope exact(ConvMode::exact);  // as ocrt-export's check runs
    want_a = model.forward(a, {}), want_b = model.forward(b, {40, 16, 28});
  }
  CHECK(logits.get("a").shape() == Shape{7, 2, 4});
  CHECK(logits.get("b").shape() == Shape{11, 3, 4});
  CHECK(max_abs_diff(logits.get("a"), want_a) < 1e-6);
  CHECK(max_abs_diff(logits.get("b"), want_b) < 1e-6);
  CHECK(max_abs_diff(logits.get("b"), model.forward(b, {})) > 1e-3);  // the widths were used

  // The same weights without metadata need --arch and --charset, as with ocrt-infer.
  const std::string bare = (dir.path / "bare.safetensors").string(), chars = (dir.path / "chars.txt").string();
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(name, t);
  save_safetensors(bare, tensors);
  std::ofstream(chars) << "x\ny\nz\n";
  CHECK(run_command(kBin + " --onnx " + onnx + " --weights " + bare, &said) == 2);
  CHECK_THAT(said, Catch::Contains("holds weights only (no ocrt metadata)"));
  // ... and get the arch's preset sizes, which these small weights do not have.
  CHECK(run_command(kBin + " --onnx " + onnx + " --weights " + bare + " --arch crnn-s --charset " + chars, &said) == 2);
  CHECK_THAT(said, Catch::Contains("the weights do not fit a 'crnn-s' model with 4 classes"));
}

TEST_CASE("ocrt-export refuses bad flags and check inputs with exit status 2", "[infer][export]") {
  TempDir dir("export-cli-bad");
  Generator gen(6);
  nn::CRNNConfig cfg;
  cfg.channels = {4, 6, 8, 8, 10, 10, 12};
  cfg.hidden = 6;
  cfg.num_classes = 3;
  nn::CRNN model(cfg, gen);
  nn::ModelInfo info;
  info.arch = "crnn";
  info.config = cfg.to_json();
  info.charset = {"x", "y"};
  info.input = nn::default_input_spec();
  const std::string weights = (dir.path / "m.safetensors").string(), onnx = (dir.path / "m.onnx").string();
  nn::save_model_file(weights, model, info);
  const std::string base = kBin + " --onnx " + onnx + " --weights " + weights;
  std::string said;

  CHECK(run_command(kBin + " --weights " + weights, &said) == 2);
  CHECK_THAT(said, Catch::Contains("--onnx FILE is required"));
  CHECK(run_command(kBin + " --onnx " + onnx, &said) == 2);
  CHECK_THAT(said, Catch::Contains("--weights FILE is required"));
  CHECK(run_command(base + " --frobnicate", &said) == 2);
  CHECK_THAT(said, Catch::Contains("unknown option '--frobnicate'"));
  CHECK(run_command(base + " --arch svtr-lite", &said) == 2);
  CHECK_THAT(said, Catch::Contains("holds a 'crnn' model, but 'svtr-lite' was asked for"));
  CHECK(run_command(base + " --check-input x.safetensors", &said) == 2);
  CHECK_THAT(said, Catch::Contains("--check-input and --check-output go together"));

  const std::string in = (dir.path / "in.safetensors").string(), out = (dir.path / "out.safetensors").string();
  const std::string check = base + " --check-input " + in + " --check-output " + out;
  save_safetensors(in, {{"x", Tensor::zeros({1, 1, 32, 8}, DType::f64)}});
  CHECK(run_command(check, &said) == 2);
  CHECK_THAT(said, Catch::Contains("batch 'x' must be float32 N x 1 x 32 x W, got float64"));
  save_safetensors(in, {{"x", Tensor::zeros({1, 1, 32, 10})}});
  CHECK(run_command(check, &said) == 2);
  CHECK_THAT(said, Catch::Contains("batch 'x'") && Catch::Contains("multiple of 4"));
  save_safetensors(in, {{"x", Tensor::zeros({1, 1, 32, 8})}, {"y.widths", Tensor::zeros({1}, DType::i64)}});
  CHECK(run_command(check, &said) == 2);
  CHECK_THAT(said, Catch::Contains("'y.widths' has no batch 'y' beside it"));
  save_safetensors(in, {{"x", Tensor::zeros({2, 1, 32, 8})}, {"x.widths", Tensor::full({2}, 12, DType::i64)}});
  CHECK(run_command(check, &said) == 2);
  CHECK_THAT(said, Catch::Contains("width 12 of line 0 must be a multiple of 4 in [4, 8]"));
}

TEST_CASE("ocrt-export --help lists its flags, and docs/cli.md describes each", "[infer][export][cli]") {
  CHECK(help_flags("ocrt-export").size() == 8);
  CHECK(undocumented_flags("ocrt-export").empty());
}
