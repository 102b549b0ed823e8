// Model files as PyTorch users write them (issue 20): the fixtures in tests/fixtures/torch_files,
// written by torch (tools/reference/torch_files.py; manifest.json says what each one is):
// safetensors.torch.save_file with {"format": "pt"}, with no metadata, with another exporter's
// metadata, a state_dict without num_batches_tracked, and .pth checkpoints converted by
// tools/convert_torch.py. Each one loads, and the model computes the logits torch computed: in
// float64 to 1e-9 (the weights arrived exactly), in float32 within the forward-error bound of
// tests/tolerance.h. What must stay strict still fails with its message: an ocrt-looking
// metadata block of another format, a missing tensor that is not optional, an unexpected one, a
// wrong shape. And ocrt-infer reads a {"format": "pt"} file with --arch and --charset.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "gradcheck.h"
#include "models/charset.h"
#include "models/crnn.h"
#include "models/model_file.h"
#include "models/recognizer.h"
#include "runtime/json.h"
#include "runtime/safetensors.h"
#include "temp_dir.h"
#include "tolerance.h"

using namespace ocrt;
using namespace ocrt::nn;
using ocrt::testing::TempDir;

namespace {

const std::string kDir = std::string(OCRT_SOURCE_DIR) + "/tests/fixtures/torch_files/";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const Json& manifest() {
  static const Json j = parse_json(read_text(kDir + "manifest.json"));
  return j;
}

const SafetensorsFile& reference() {
  static const SafetensorsFile f = load_safetensors(kDir + "reference.safetensors");
  return f;
}

std::map<std::string, std::string> string_map(const Json& object) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : object.as_object()) out[k] = v.as_string();
  return out;
}

// A model of the manifest's model ("crnn" or "svtr"): arch, config, charset.
struct Model {
  std::string arch;
  Json config;
  std::vector<std::string> charset;
  int64_t chain_length = 0;
};

Model model_of(const std::string& name) {
  const Json& m = manifest().at("models").at(name);
  return {m.at("arch").as_string(), m.at("config"), Charset::from_file(kDir + m.at("charset").as_string()).chars(),
          m.at("chain_length").as_int()};
}

std::shared_ptr<Recognizer> build(const std::string& arch, const Json& config) {
  Generator gen(7);  // overwritten by the weights
  return make_recognizer(arch, config, gen);
}

std::vector<int64_t> widths_of(const std::string& model) {
  return reference().get(model + ".widths").to_vector<int64_t>();
}

// The model's logits against torch's: float32 within the bound, float64 to 1e-9.
void check_logits(Recognizer& model, const std::string& name, int64_t chain_length, const std::string& what) {
  const Tensor x = reference().get(name + ".x");
  const auto widths = widths_of(name);
  const Tensor& want = reference().get(name + ".logits");
  model.eval();
  NoGradGuard no_grad;
  REQUIRE(model.parameters()[0].dtype() == DType::f32);
  ocrt::testing::require_within_bound(model.forward(x, widths), want, reference().get(name + ".abs_sum"), chain_length,
                                      what + ", float32");
  model.to(DType::f64);
  ocrt::testing::require_close(model.forward(x.to(DType::f64), widths), want, 1e-9, 1e-11, what + ", float64");
  model.to(DType::f32);
}

std::vector<int64_t> batch_counts(const Module& model) {
  std::vector<int64_t> counts;
  for (const auto& [name, t] : model.named_buffers())
    if (name.size() >= 19 && name.substr(name.size() - 19) == "num_batches_tracked") counts.push_back((int64_t)t.item());
  return counts;
}

// What fd 2 receives while f runs.
template <class F>
std::string capture_stderr(F&& f) {
  TempDir dir("torch-files-stderr");
  const std::string path = (dir.path / "err.txt").string();
  std::fflush(stderr);
  const int saved = ::dup(2);
  FILE* sink = std::fopen(path.c_str(), "w");
  REQUIRE(sink != nullptr);
  ::dup2(::fileno(sink), 2);
  try {
    f();
  } catch (...) {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    std::fclose(sink);
    throw;
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(sink);
  return read_text(path);
}

// The fixture's CRNN weights (from the {"format": "pt"} file), as a list to edit.
std::vector<std::pair<std::string, Tensor>> crnn_tensors() {
  const SafetensorsFile f = load_safetensors(kDir + "crnn_format_pt.safetensors");
  return f.tensors;
}

double largest_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

int run_command(const std::string& cmd, std::string* output) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::string out;
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = ::pclose(p);
  if (output) *output = out;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

TEST_CASE("torch files: the manifest lists every form the tests expect", "[model_file][torch_files]") {
  std::set<std::string> files;
  for (const Json& e : manifest().at("files").as_array()) files.insert(e.at("file").as_string());
  const std::set<std::string> expected{"crnn_format_pt.safetensors",  "crnn_no_metadata.safetensors",
                                       "crnn_foreign.safetensors",    "svtr_no_count.safetensors",
                                       "crnn_converted.safetensors",  "svtr_converted.safetensors"};
  CHECK(files == expected);
}

TEST_CASE("torch files: every form loads and computes torch's logits", "[model_file][torch_files]") {
  for (const Json& e : manifest().at("files").as_array()) {
    const std::string file = e.at("file").as_string(), name = e.at("model").as_string();
    INFO(file << ": " << e.at("form").as_string());
    const Model m = model_of(name);
    const ModelFile f = load_model_file(kDir + file, /*quiet=*/true);
    std::shared_ptr<Recognizer> model;
    if (e.at("self_contained").as_bool()) {
      // A converted file carries everything: arch, config, charset, the input spec.
      REQUIRE(f.info.has_value());
      CHECK(f.info->arch == m.arch);
      CHECK(f.info->charset == m.charset);
      CHECK(f.info->input == default_input_spec());
      CHECK(f.ignored_metadata.empty());
      model = build(f.info->arch, f.info->config);
      CHECK(model->config_json() == build(m.arch, m.config)->config_json());
    } else {
      // Weights only: the metadata, if any, was not ocrt's and is set aside.
      CHECK(!f.info.has_value());
      CHECK(f.ignored_metadata == string_map(e.at("metadata")));
      model = build(m.arch, m.config);
    }
    model->load_state_dict(f.weights);  // strict: every name and shape, optional buffers aside
    CHECK(model->num_classes() == (int64_t)m.charset.size() + 1);
    const int64_t count = e.at("num_batches_tracked").as_int();
    for (int64_t c : batch_counts(*model)) CHECK(c == count);
    check_logits(*model, name, m.chain_length, file);
  }
}

TEST_CASE("torch files: foreign metadata is ignored with a one-line note naming it", "[model_file][torch_files]") {
  const std::string pt = kDir + "crnn_format_pt.safetensors";
  const std::string err = capture_stderr([&] { load_model_file(pt); });
  CHECK(err == ignored_metadata_note(pt, {{"format", "pt"}}) + "\n");
  CHECK_THAT(err, Catch::StartsWith("note: " + pt + ": ignored metadata that is not ocrt's {\"format\":\"pt\"}"));
  // Quiet: nothing printed; no metadata at all: nothing to note.
  CHECK(capture_stderr([&] { load_model_file(pt, true); }).empty());
  CHECK(capture_stderr([&] { load_model_file(kDir + "crnn_no_metadata.safetensors"); }).empty());
  // A block with a newline in a value and more than fits a line: still one line, cut short.
  const std::string foreign = kDir + "crnn_foreign.safetensors";
  const std::string note = capture_stderr([&] { load_model_file(foreign); });
  CHECK(std::count(note.begin(), note.end(), '\n') == 1);
  CHECK_THAT(note, Catch::Contains("\"producer\":\"a-training-framework 2.1\""));
  std::map<std::string, std::string> big{{"notes", std::string(500, 'x')}};
  const std::string cut = ignored_metadata_note("m.safetensors", big);
  CHECK(cut.size() < 300);
  CHECK_THAT(cut, Catch::Contains("...; read as weights only"));
}

TEST_CASE("torch files: svtr-lite without num_batches_tracked keeps a fresh model's count and dropout",
          "[model_file][torch_files]") {
  const Model m = model_of("svtr");
  const ModelFile f = load_model_file(kDir + "svtr_no_count.safetensors", true);
  for (const auto& [name, t] : f.weights) CHECK(name.find("num_batches_tracked") == std::string::npos);
  auto without = build(m.arch, m.config);
  without->load_state_dict(f.weights);
  for (int64_t c : batch_counts(*without)) CHECK(c == 0);
  // The same weights with the counts given explicitly: 0 draws the same dropout masks (they
  // are keyed by the stem's count), another count draws others.
  auto with_count = [&](int64_t count) {
    StateDict w = f.weights;
    for (const auto& [name, t] : without->named_buffers())
      if (name.find("num_batches_tracked") != std::string::npos) w[name] = Tensor::full({}, (double)count, DType::i64);
    auto model = build(m.arch, m.config);
    model->load_state_dict(w);
    return model;
  };
  auto zero = with_count(0), other = with_count(37);
  const Tensor x = reference().get("svtr.x");
  const auto widths = widths_of("svtr");
  NoGradGuard no_grad;
  for (auto* model : {without.get(), zero.get(), other.get()}) model->train(true);
  const Tensor a = without->forward(x, widths), b = zero->forward(x, widths), c = other->forward(x, widths);
  CHECK(largest_difference(a, b) == 0);
  CHECK(largest_difference(a, c) > 0);
  for (int64_t count : batch_counts(*without)) CHECK(count == 1);  // counting from 0, one step taken
}

TEST_CASE("torch files: what is not plainly foreign, or does not fit, is still refused with today's messages",
          "[model_file][torch_files]") {
  TempDir dir("torch-files-strict");
  const std::string path = (dir.path / "m.safetensors").string();
  const auto tensors = crnn_tensors();
  const Model m = model_of("crnn");

  // Metadata that claims to be ocrt's is parsed strictly.
  const std::map<std::string, std::string> ocrt_meta{{"format", "ocrt-model-1"}, {"arch", "crnn"},
                                                     {"config", m.config.dump()}, {"charset", "[\"a\"]"},
                                                     {"input", default_input_spec().dump()}};
  auto meta = ocrt_meta;
  meta["format"] = "ocrt-model-2";
  save_safetensors(path, tensors, meta);
  CHECK_THROWS_WITH(load_model_file(path),
                    Catch::Contains("unknown model file format 'ocrt-model-2' (expected ocrt-model-1)"));
  save_safetensors(path, tensors, {{"format", "ocrt-model-2"}});
  CHECK_THROWS_WITH(load_model_file(path), Catch::Contains("unknown model file format 'ocrt-model-2'"));
  // A training checkpoint is read as its model (tests/train/test_checkpoint.cpp); one without
  // its "model" entry is refused for that.
  save_safetensors(path, tensors, {{"format", "ocrt-checkpoint-1"}});
  CHECK_THROWS_WITH(load_model_file(path), Catch::Contains("has no 'model' entry"));
  save_safetensors(path, tensors, {{"format", "pt"}, {"arch", "crnn"}});
  CHECK_THROWS_WITH(load_model_file(path), Catch::Contains("unknown model file format 'pt' (expected ocrt-model-1)"));
  save_safetensors(path, tensors, {{"arch", "crnn"}});
  CHECK_THROWS_WITH(load_model_file(path), Catch::Contains("unknown model file format '(none)'"));
  meta = ocrt_meta;
  meta.erase("arch");
  save_safetensors(path, tensors, meta);
  CHECK_THROWS_WITH(load_model_file(path), Catch::Contains("has no 'arch' entry"));

  // Tensors: only optional buffers may be missing.
  auto load = [&](const std::vector<std::pair<std::string, Tensor>>& list) {
    StateDict w(list.begin(), list.end());
    build(m.arch, m.config)->load_state_dict(w);
  };
  auto without = [&](const std::set<std::string>& names) {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& p : tensors)
      if (!names.count(p.first)) out.push_back(p);
    return out;
  };
  const auto no_counts = without({"cnn.7.num_batches_tracked", "cnn.13.num_batches_tracked", "cnn.19.num_batches_tracked"});
  CHECK_NOTHROW(load(no_counts));
  {
    // An absent count keeps the value the model has (as PyTorch 2 does), here 5 everywhere.
    auto model = build(m.arch, m.config);
    StateDict w(tensors.begin(), tensors.end());
    for (auto& [name, t] : w)
      if (name.find("num_batches_tracked") != std::string::npos) t = Tensor::full({}, 5, DType::i64);
    model->load_state_dict(w);
    model->load_state_dict(StateDict(no_counts.begin(), no_counts.end()));
    for (int64_t c : batch_counts(*model)) CHECK(c == 5);
  }
  CHECK_THROWS_WITH(load(without({"cnn.7.running_mean", "cnn.7.num_batches_tracked"})),
                    Catch::Contains("the weights do not match the model:\n  missing: cnn.7.running_mean") &&
                        !Catch::Contains("num_batches_tracked"));
  CHECK_THROWS_WITH(load(without({"rnn.weight_hh_l1_reverse"})), Catch::Contains("missing: rnn.weight_hh_l1_reverse"));
  auto extra = tensors;
  extra.emplace_back("cnn.9.num_batches_tracked", Tensor::zeros({}, DType::i64));  // not a BatchNorm there
  CHECK_THROWS_WITH(load(extra), Catch::Contains("unexpected: cnn.9.num_batches_tracked"));
  auto reshaped = tensors;
  for (auto& [name, t] : reshaped)
    if (name == "fc.bias") t = Tensor::zeros({12});
  CHECK_THROWS_WITH(load(reshaped), Catch::Contains("wrong shape: fc.bias (expected [11], got [12])"));
}

TEST_CASE("torch files: ocrt-infer reads a {\"format\": \"pt\"} file with --arch and --charset",
          "[model_file][torch_files][infer]") {
  TempDir dir("torch-files-infer");
  // A crnn-s (the preset ocrt-infer builds for --arch crnn-s) saved both ways.
  const std::vector<std::string> chars{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
  Generator gen(21);
  CRNN model(CRNNConfig::preset("crnn-s", (int64_t)chars.size() + 1), gen);
  ModelInfo info;
  info.arch = "crnn-s";
  info.config = model.config.to_json();
  info.charset = chars;
  info.input = default_input_spec();
  const std::string own = (dir.path / "own.safetensors").string(), pt = (dir.path / "pt.safetensors").string();
  save_model_file(own, model, info);
  NamedTensors list;
  for (const auto& [name, t] : model.state_dict())
    if (name.find("num_batches_tracked") == std::string::npos) list.emplace_back(name, t);  // dropped, as exporters do
  save_safetensors(pt, list, {{"format", "pt"}});
  const std::string charset = (dir.path / "chars.txt").string();
  {
    std::ofstream out(charset);
    for (const auto& c : chars) out << c << "\n";
  }
  const std::string bin = std::string(OCRT_BINARY_DIR) + "/ocrt-infer --threads 1 --format tsv ";
  const std::string image = std::string(OCRT_SOURCE_DIR) + "/samples/lines/000000.png";
  const std::string err = (dir.path / "err.txt").string();
  std::string a, b, c, converted;
  REQUIRE(run_command(bin + "--weights " + own + " " + image + " 2>/dev/null", &a) == 0);
  REQUIRE(run_command(bin + "--weights " + pt + " --arch crnn-s --charset " + charset + " " + image + " 2>" + err, &b) == 0);
  CHECK(!a.empty());
  CHECK(a == b);
  CHECK_THAT(read_text(err), Catch::StartsWith(ignored_metadata_note(pt, {{"format", "pt"}}) + "\n"));
  // Without --arch and --charset the file cannot be used, and ocrt-infer says why.
  CHECK(run_command(bin + "--weights " + pt + " " + image + " 2>&1", &c) == 2);
  CHECK_THAT(c, Catch::Contains("holds weights only (no ocrt metadata)") && Catch::Contains("--arch"));
  // A converted file needs neither.
  CHECK(run_command(bin + "--weights " + kDir + "crnn_converted.safetensors " + image + " 2>/dev/null", &converted) == 0);
  CHECK_THAT(converted, Catch::StartsWith(image + "\t"));
}
