// The C API (capi/ocrt.h) from C++, with the shipped model: it reads the sample lines exactly as
// the predictor it wraps does (same texts, same confidences to the bit); gray pixels in memory
// with a stride read as the same image from a file; a bad line fails alone and the call
// succeeds; every misuse (NULL pointers, a missing model, a device that does not exist, a
// stride below the width, an index out of range) returns NULL or NaN with a message in
// ocrt_last_error, which is per thread and cleared by the next call that works. The header as
// plain C is tests/capi/c_program.c's job.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "capi/ocrt.h"
#include "infer/predictor.h"
#include "runtime/image.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::infer;

namespace {

const std::string kSource = OCRT_SOURCE_DIR;
const std::string kModel = kSource + "/weights/crnn-en.safetensors";
const std::string kSamples = kSource + "/samples/lines/";

// samples/lines/00000i, without the extension.
std::string stem(int i) {
  char name[16];
  std::snprintf(name, sizeof name, "%06d", i);
  return kSamples + name;
}

std::string sample(int i) { return stem(i) + ".png"; }

std::string truth(int i) {
  std::ifstream in(stem(i) + ".gt.txt");
  std::string line;
  std::getline(in, line);
  return line;
}

// Owns what the C API hands out, so that a failed REQUIRE leaks nothing.
struct Model {
  ocrt_model* m;
  explicit Model(ocrt_model* m) : m(m) {}
  ~Model() { ocrt_close(m); }
};
struct Result {
  ocrt_result* r;
  explicit Result(ocrt_result* r) : r(r) {}
  ~Result() { ocrt_result_free(r); }
};

std::string last_error() { return ocrt_last_error(); }

}  // namespace

TEST_CASE("C API: the version", "[capi]") {
  CHECK(std::string(ocrt_version()) == OCRT_VERSION_STRING);
  CHECK(std::string(OCRT_VERSION_STRING) == std::to_string(OCRT_VERSION_MAJOR) + "." +
                                                std::to_string(OCRT_VERSION_MINOR) + "." +
                                                std::to_string(OCRT_VERSION_PATCH));
}

TEST_CASE("C API: the sample lines read as the predictor reads them", "[capi]") {
  std::vector<std::string> paths;
  for (int i = 0; i < 12; ++i) paths.push_back(sample(i));
  std::vector<const char*> c_paths;
  for (const auto& p : paths) c_paths.push_back(p.c_str());

  Model model(ocrt_open(kModel.c_str(), "cpu", 2));
  REQUIRE(model.m);
  CHECK(last_error().empty());
  Result result(ocrt_recognize_files(model.m, c_paths.data(), c_paths.size()));
  REQUIRE(result.r);
  REQUIRE(ocrt_result_count(result.r) == paths.size());

  // ocrt_open decodes as ocrt-infer does by default, with the LM beside the model.
  PredictorOptions options;
  options.threads = 2;
  use_auto_decoding(options, kSource + "/weights/lm-en.clm", true);
  const std::vector<LineResult> expected = Predictor(kModel, options).recognize(paths);
  for (size_t i = 0; i < paths.size(); ++i) {
    INFO(paths[i]);
    CHECK(ocrt_result_error(result.r, i) == nullptr);
    CHECK(std::string(ocrt_result_text(result.r, i)) == expected[i].text);
    CHECK(ocrt_result_confidence(result.r, i) == expected[i].confidence);  // same batches: same bits
  }
  // And the text is right where the shipped model reads the line right (it misreads 2, 3, 6).
  for (int i : {0, 1, 4, 5, 7, 8, 9, 10, 11}) CHECK(std::string(ocrt_result_text(result.r, (size_t)i)) == truth(i));
}

TEST_CASE("C API: ocrt_open_decoding names the decoding, and auto finds the LM beside the model", "[capi]") {
  std::vector<std::string> paths;
  for (int i = 0; i < 12; ++i) paths.push_back(sample(i));
  std::vector<const char*> c_paths;
  for (const auto& p : paths) c_paths.push_back(p.c_str());
  const std::string lm = kSource + "/weights/lm-en.clm";
  // What the predictor reads with the same options, line by line against the C API's.
  const auto same = [&](ocrt_model* m, PredictorOptions options, const std::string& what) {
    INFO(what);
    REQUIRE(m);
    Result result(ocrt_recognize_files(m, c_paths.data(), c_paths.size()));
    REQUIRE(result.r);
    options.threads = 2;
    const std::vector<LineResult> expected = Predictor(kModel, options).recognize(paths);
    for (size_t i = 0; i < paths.size(); ++i) {
      INFO(paths[i]);
      CHECK(std::string(ocrt_result_text(result.r, i)) == expected[i].text);
      CHECK(ocrt_result_confidence(result.r, i) == expected[i].confidence);
    }
  };
  PredictorOptions greedy, beam, with_lm, auto_lm;
  beam.decoder = Decoder::beam;
  with_lm.decoder = Decoder::beam;
  with_lm.lm_path = lm;
  use_auto_decoding(auto_lm, lm, false);
  {
    Model m(ocrt_open_decoding(kModel.c_str(), "cpu", 2, "greedy", nullptr));
    same(m.m, greedy, "greedy");
  }
  {
    Model m(ocrt_open_decoding(kModel.c_str(), "cpu", 2, "beam", nullptr));
    same(m.m, beam, "beam");
  }
  {
    Model m(ocrt_open_decoding(kModel.c_str(), "cpu", 2, "beam", lm.c_str()));
    same(m.m, with_lm, "beam + LM");
  }
  {
    Model m(ocrt_open_decoding(kModel.c_str(), "cpu", 2, nullptr, lm.c_str()));
    same(m.m, auto_lm, "auto with an LM named");
  }
  // A model file in a folder without lm-en.clm: auto is greedy.
  ocrt::testing::TempDir dir("capi-decoding");
  const std::string alone = (dir.path / "crnn-en.safetensors").string();
  std::filesystem::copy_file(kModel, alone);
  {
    Model m(ocrt_open_decoding(alone.c_str(), "cpu", 2, "auto", nullptr));
    same(m.m, greedy, "auto without an LM beside the model");
  }
  // Refusals: another decoder name, an LM with greedy decoding, an LM that does not load.
  CHECK(ocrt_open_decoding(kModel.c_str(), "cpu", 2, "viterbi", nullptr) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("ocrt_open_decoding") &&
                               Catch::Contains("decoder must be auto, greedy or beam, got 'viterbi'"));
  CHECK(ocrt_open_decoding(kModel.c_str(), "cpu", 2, "greedy", lm.c_str()) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("a language model is used by beam search only"));
  CHECK(ocrt_open_decoding(kModel.c_str(), "cpu", 2, "beam", kModel.c_str()) == nullptr);
  CHECK_FALSE(last_error().empty());
}

TEST_CASE("C API: gray pixels in memory read as the image file does", "[capi]") {
  Model model(ocrt_open(kModel.c_str(), nullptr, 2));  // NULL device: the CPU
  REQUIRE(model.m);
  const std::string path = sample(7);
  Result from_file(ocrt_recognize_file(model.m, path.c_str()));
  REQUIRE(from_file.r);
  REQUIRE(ocrt_result_error(from_file.r, 0) == nullptr);
  CHECK(std::string(ocrt_result_text(from_file.r, 0)) == truth(7));

  // The same pixels, rows 13 bytes apart more than the width, the gap black: a reader that
  // ignored the stride would see black bars and read something else.
  const GrayImage img = load_gray_image(path);
  const int width = (int)img.width, height = (int)img.height, stride = width + 13;
  std::vector<uint8_t> buffer((size_t)stride * (size_t)height, 0);
  for (int y = 0; y < height; ++y)
    std::memcpy(&buffer[(size_t)y * stride], &img.pixels[(size_t)y * width], (size_t)width);

  Result from_memory(ocrt_recognize_gray(model.m, buffer.data(), width, height, stride));
  REQUIRE(from_memory.r);
  REQUIRE(ocrt_result_count(from_memory.r) == 1);
  CHECK(ocrt_result_error(from_memory.r, 0) == nullptr);
  CHECK(std::string(ocrt_result_text(from_memory.r, 0)) == ocrt_result_text(from_file.r, 0));
  CHECK(ocrt_result_confidence(from_memory.r, 0) == ocrt_result_confidence(from_file.r, 0));

  // A batch: the line, a white page (blank: "" with confidence 1, no model run) and a 0x0
  // image (a line that fails on its own, named by its index).
  const std::vector<uint8_t> white(64 * 32, 255);
  const ocrt_image images[] = {{buffer.data(), width, height, stride}, {white.data(), 64, 32, 64}, {nullptr, 0, 0, 0}};
  Result batch(ocrt_recognize_grays(model.m, images, 3));
  REQUIRE(batch.r);
  REQUIRE(ocrt_result_count(batch.r) == 3);
  CHECK(std::string(ocrt_result_text(batch.r, 0)) == truth(7));
  CHECK(ocrt_result_error(batch.r, 1) == nullptr);
  CHECK(std::string(ocrt_result_text(batch.r, 1)).empty());
  CHECK(ocrt_result_confidence(batch.r, 1) == 1.0);
  REQUIRE(ocrt_result_error(batch.r, 2) != nullptr);
  CHECK_THAT(ocrt_result_error(batch.r, 2), Catch::StartsWith("image 2:"));
  CHECK(std::string(ocrt_result_text(batch.r, 2)).empty());
  CHECK(ocrt_result_confidence(batch.r, 2) == 0.0);
  CHECK(last_error().empty());  // bad lines do not fail the call
}

TEST_CASE("C API: a missing or broken image fails alone", "[capi]") {
  const auto dir = ocrt::testing::process_temp_dir("capi");
  const std::string missing = (dir / "missing.png").string();
  const std::string broken = (dir / "broken.png").string();
  std::ofstream(broken, std::ios::binary) << "\x89PNG\r\n\x1a\n this is no image";
  const std::string good = sample(0);
  const char* paths[] = {missing.c_str(), broken.c_str(), good.c_str()};

  Model model(ocrt_open(kModel.c_str(), "cpu", 2));
  REQUIRE(model.m);
  Result result(ocrt_recognize_files(model.m, paths, 3));
  REQUIRE(result.r);
  CHECK(last_error().empty());
  REQUIRE(ocrt_result_count(result.r) == 3);
  REQUIRE(ocrt_result_error(result.r, 0) != nullptr);
  CHECK_THAT(ocrt_result_error(result.r, 0), Catch::StartsWith(missing) && Catch::Contains("no such file"));
  REQUIRE(ocrt_result_error(result.r, 1) != nullptr);
  CHECK_THAT(ocrt_result_error(result.r, 1), Catch::StartsWith(broken));
  for (size_t i : {0, 1}) {
    CHECK(std::string(ocrt_result_text(result.r, i)).empty());
    CHECK(ocrt_result_confidence(result.r, i) == 0.0);
  }
  CHECK(ocrt_result_error(result.r, 2) == nullptr);
  CHECK(std::string(ocrt_result_text(result.r, 2)) == truth(0));

  // One path: the same rule.
  Result one(ocrt_recognize_file(model.m, missing.c_str()));
  REQUIRE(one.r);
  CHECK(ocrt_result_error(one.r, 0) != nullptr);
}

TEST_CASE("C API: opening fails with a message, never an exception", "[capi]") {
  CHECK(ocrt_open(nullptr, "cpu", 0) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("ocrt_open") && Catch::Contains("model_path is NULL"));

  const std::string missing = kSource + "/weights/no-such-model.safetensors";
  CHECK(ocrt_open(missing.c_str(), "cpu", 0) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains(missing));

  // A file that is not a model: one of the sample images.
  CHECK(ocrt_open(sample(0).c_str(), "cpu", 0) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains(sample(0)));

  CHECK(ocrt_open(kModel.c_str(), "gpu", 0) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("gpu"));
  CHECK(ocrt_open(kModel.c_str(), "cuda:99", 0) == nullptr);  // on no machine
  CHECK_THAT(last_error(), Catch::Contains("cuda:99") && Catch::Contains("cpu"));  // lists what exists
  CHECK(ocrt_open(kModel.c_str(), "", 0) == nullptr);
  CHECK_FALSE(last_error().empty());
  CHECK(ocrt_open(kModel.c_str(), "cpu", -1) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("threads"));

  ocrt_close(nullptr);  // allowed, and a call that works
  CHECK(last_error().empty());
}

TEST_CASE("C API: misuse of a model or a result returns NULL with a message", "[capi]") {
  const std::string good = sample(0);
  const char* path = good.c_str();
  CHECK(ocrt_recognize_file(nullptr, path) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("model is NULL"));

  Model model(ocrt_open(kModel.c_str(), "cpu", 2));
  REQUIRE(model.m);
  CHECK(ocrt_recognize_file(model.m, nullptr) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("path is NULL"));
  CHECK(ocrt_recognize_files(model.m, nullptr, 1) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("paths is NULL"));
  const char* with_null[] = {path, nullptr};
  CHECK(ocrt_recognize_files(model.m, with_null, 2) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("paths[1] is NULL"));
  CHECK(ocrt_recognize_grays(model.m, nullptr, 1) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("images is NULL"));

  const std::vector<uint8_t> pixels(64 * 32, 255);
  CHECK(ocrt_recognize_gray(model.m, nullptr, 64, 32, 64) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("pixels is NULL"));
  CHECK(ocrt_recognize_gray(model.m, pixels.data(), 64, 32, 63) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("stride 63 is less than its width 64"));
  CHECK(ocrt_recognize_gray(model.m, pixels.data(), -1, 32, 64) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("negative size"));

  // No lines: an empty result, not an error.
  Result empty(ocrt_recognize_files(model.m, nullptr, 0));
  REQUIRE(empty.r);
  CHECK(ocrt_result_count(empty.r) == 0);
  CHECK(last_error().empty());

  // Asking a result for a line it does not have.
  CHECK(ocrt_result_text(empty.r, 0) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("no line 0 in a result of 0 lines"));
  CHECK(std::isnan(ocrt_result_confidence(empty.r, 0)));
  const char* error = ocrt_result_error(empty.r, 0);
  REQUIRE(error != nullptr);  // NULL would say "line 0 was read"
  CHECK(std::string(error) == last_error());
  CHECK(ocrt_result_text(nullptr, 0) == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("result is NULL"));
  CHECK(ocrt_result_error(nullptr, 0) != nullptr);
  CHECK(ocrt_result_count(nullptr) == 0);
  ocrt_result_free(nullptr);
}

TEST_CASE("C API: the last error belongs to its thread", "[capi]") {
  CHECK(ocrt_open(nullptr, "cpu", 0) == nullptr);
  const std::string mine = last_error();
  REQUIRE_FALSE(mine.empty());
  std::string other_before, other_after;
  std::thread([&] {
    other_before = ocrt_last_error();
    ocrt_open(kModel.c_str(), "cpu", -1);
    other_after = ocrt_last_error();
  }).join();
  CHECK(other_before.empty());
  CHECK_THAT(other_after, Catch::Contains("threads"));
  CHECK(last_error() == mine);
}
