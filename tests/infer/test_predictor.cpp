// The predictor and ocrt-infer's pieces, with a small randomly initialised crnn-s saved as a
// model file and tiny line images written as PNGs: results in input order with several
// workers; the same text and logits from one worker and two; batching by width changes no
// line's logits; bad lines get their own errors while the others are read; bad model files
// fail at construction; the TSV and JSON-lines formats; --eval's numbers; the logits file;
// the input readers. Kept small: CI has two cores.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "infer/inputs.h"
#include "infer/predictor.h"
#include "models/crnn.h"
#include "models/model_file.h"
#include "models/recognizer.h"
#include "infer/report.h"
#include "runtime/json.h"
#include "runtime/precision.h"
#include "runtime/safetensors.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::infer;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  // One folder per process (ctest runs test cases as separate processes in parallel), removed
  // when the process exits.
  return ocrt::testing::process_temp_dir("infer");
}

std::string temp(const std::string& name) { return (temp_dir() / name).string(); }

void write_bytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

const std::vector<std::string> kChars{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};

// A random crnn-s for the ten characters a..j, as a self-contained model file (written once).
const std::string& model_file() {
  static const std::string path = [] {
    Generator gen(11);
    nn::CRNN model(nn::CRNNConfig::preset("crnn-s", (int64_t)kChars.size() + 1), gen);
    nn::ModelInfo info;
    info.arch = "crnn-s";
    info.config = model.config.to_json();
    info.charset = kChars;
    info.input = nn::default_input_spec();
    const std::string p = temp("crnn-s.safetensors");
    nn::save_model_file(p, model, info);
    return p;
  }();
  return path;
}

// A gray "line": dark blobs on white, different for every seed.
GrayImage line_image(int64_t width, int64_t height, uint32_t seed) {
  GrayImage img;
  img.width = width, img.height = height;
  img.pixels.assign((size_t)(width * height), 255);
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t x = 0; x < width; ++x) {
    s = s * 1664525u + 1013904223u;
    if ((s >> 28) < 7) continue;  // a gap between strokes
    const int64_t top = height / 4 + (int64_t)((s >> 8) % (uint32_t)(height / 4 + 1));
    for (int64_t y = top; y < height - height / 4; ++y) img.pixels[(size_t)(y * width + x)] = (uint8_t)(s >> 20);
  }
  return img;
}

// Writes line images of the given widths (32 high, a few 48 high to exercise resizing).
std::vector<std::string> write_lines(const std::string& prefix, const std::vector<int64_t>& widths) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < widths.size(); ++i) {
    const std::string p = temp(prefix + std::to_string(i) + ".png");
    save_gray_png(p, line_image(widths[i], i % 3 == 2 ? 48 : 32, (uint32_t)i + 1));
    paths.push_back(p);
  }
  return paths;
}

PredictorOptions options(std::vector<Device> devices, int64_t batch) {
  PredictorOptions o;
  o.devices = std::move(devices);
  o.batch = batch;
  o.threads = 2;
  o.keep_logits = true;
  return o;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, (double)std::abs(x[i] - y[i]));
  return d;
}

// Two predictors' results for the same lines: every line read, the same text, confidence and
// logits (up to float rounding: their batches may differ).
void check_same_reading(const std::vector<LineResult>& a, const std::vector<LineResult>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("line " << i);
    REQUIRE(a[i].ok());
    REQUIRE(b[i].ok());
    CHECK(a[i].text == b[i].text);
    CHECK(a[i].confidence == Approx(b[i].confidence).margin(1e-6));
    CHECK(max_abs_diff(a[i].logits, b[i].logits) <= 1e-5);
  }
}

}  // namespace

TEST_CASE("results come back in input order with two workers", "[infer]") {
  const std::vector<int64_t> widths{90, 20, 64, 33, 120, 12, 48, 75, 28};
  const auto paths = write_lines("order", widths);
  Predictor p(model_file(), options({Device::cpu(), Device::cpu()}, 2));
  std::vector<int64_t> indices;
  std::vector<LineResult> results;
  size_t next = 0;
  RunStats stats = p.run(
      [&](LineInput& in) {
        if (next == paths.size()) return false;
        in.name = paths[next++];
        return true;
      },
      [&](int64_t i, LineResult&& r) {
        indices.push_back(i);
        results.push_back(std::move(r));
      });
  REQUIRE(results.size() == paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    CHECK(indices[i] == (int64_t)i);
    CHECK(results[i].name == paths[i]);
    CHECK(results[i].ok());
    CHECK((results[i].worker == 0 || results[i].worker == 1));
    CHECK(results[i].logits.size(0) == nn::CRNN::frames(results[i].width));
  }
  CHECK(stats.lines == (int64_t)paths.size());
  CHECK(stats.failed == 0);
  REQUIRE(stats.workers.size() == 2);
  CHECK(stats.workers[0].lines + stats.workers[1].lines == (int64_t)paths.size());
  // 9 lines in batches of at most 2 (plan_batches may leave a line alone rather than pad it)
  const int64_t batches = stats.workers[0].batches + stats.workers[1].batches;
  CHECK((batches >= 5 && batches <= 9));
  CHECK_THAT(stats.summary(), Catch::Contains("9 lines (0 failed)") && Catch::Contains("worker 1 (cpu)"));
}

TEST_CASE("one worker and two workers read every line the same", "[infer]") {
  const auto paths = write_lines("workers", {40, 72, 16, 100, 56, 24});
  Predictor one(model_file(), options({Device::cpu()}, 2));
  Predictor two(model_file(), options({Device::cpu(), Device::cpu()}, 2));
  check_same_reading(one.recognize(paths), two.recognize(paths));
}

TEST_CASE("cpu_workers splits the CPU into workers that read every line as one worker does", "[infer]") {
  CHECK(auto_cpu_workers(2) == 2);
  CHECK(auto_cpu_workers(16) == kAutoCpuWorkers);
  CHECK(auto_cpu_workers(1) == 1);

  const auto paths = write_lines("cpuworkers", {40, 72, 16, 100, 56, 24, 88});
  PredictorOptions one_options = options({Device::cpu()}, 2);
  one_options.cpu_workers = 1;
  Predictor one(model_file(), one_options);
  Predictor by_default(model_file(), options({Device::cpu()}, 2));  // auto: one worker a thread
  PredictorOptions split_options = options({Device::cpu()}, 2);
  split_options.cpu_workers = 2;
  Predictor split(model_file(), split_options);
  PredictorOptions capped = options({Device::cpu()}, 2);
  capped.cpu_workers = 5;  // more than the 2 threads: one a thread
  Predictor two(model_file(), capped);
  auto workers_of = [&](Predictor& p) {
    size_t next = 0;
    return p.run(
                [&](LineInput& in) {
                  if (next == paths.size()) return false;
                  in.name = paths[next++];
                  return true;
                },
                [](int64_t, LineResult&&) {})
        .workers.size();
  };
  CHECK(workers_of(one) == 1);
  CHECK(workers_of(by_default) == 2);
  CHECK(workers_of(split) == 2);
  CHECK(workers_of(two) == 2);
  // Workers that split the CPU share one model and get the lines in the batches one worker gets
  // (never a batch split between them by their timing): the same bits, run after run.
  for (int run = 0; run < 3; ++run) {
    const auto a = one.recognize(paths), b = split.recognize(paths);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("run " << run << ", line " << i);
      REQUIRE((a[i].ok() && b[i].ok()));
      CHECK(a[i].text == b[i].text);
      CHECK(a[i].confidence == b[i].confidence);
      REQUIRE(a[i].chars.size() == b[i].chars.size());
      for (size_t k = 0; k < a[i].chars.size(); ++k) CHECK(a[i].chars[k].confidence == b[i].chars[k].confidence);
    }
  }

  PredictorOptions bad = options({Device::cpu()}, 2);
  bad.cpu_workers = -1;
  CHECK_THROWS_WITH(Predictor(model_file(), bad), Catch::Contains("CPU workers must be >= 1"));
}

TEST_CASE("threads lent to a CPU worker run its batches on more threads and change no line's result", "[infer]") {
  const auto paths = write_lines("lent", {40, 72, 16, 100, 56});
  PredictorOptions own = options({Device::cpu()}, 2);
  own.threads = 1;  // one worker of one thread, as in a page lane
  Predictor alone(model_file(), own);
  std::atomic<int> asked{0};
  PredictorOptions lending = own;
  lending.borrow_threads = [&] {
    ++asked;
    return 1;  // one more thread for every batch (what an idle page lane lends)
  };
  Predictor helped(model_file(), lending);
  std::vector<LineResult> b;
  size_t next = 0;
  const RunStats stats = helped.run(
      [&](LineInput& in) {
        if (next == paths.size()) return false;
        in.name = paths[next++];
        return true;
      },
      [&](int64_t, LineResult&& r) { b.push_back(std::move(r)); });
  const auto a = alone.recognize(paths);
  REQUIRE(stats.workers.size() == 1);
  CHECK(stats.workers[0].batches > 0);
  CHECK(asked == stats.workers[0].batches);
  CHECK(stats.workers[0].batches_on_all_threads == stats.workers[0].batches);  // each on 2 threads
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("line " << i);
    REQUIRE((a[i].ok() && b[i].ok()));
    CHECK(a[i].text == b[i].text);
    CHECK(a[i].confidence == b[i].confidence);
  }
}

TEST_CASE("a run's first chunk is two batches: results come back in input order, as from one chunk", "[infer]") {
  // Batch 2 on one worker: the first chunk is 4 lines, the next 1024 (here the other 5), so the
  // workers start while the main thread decodes the rest. The same lines read as one chunk
  // (chunk_lines set) give the same results, each at its own index.
  const auto paths = write_lines("firstchunk", {40, 120, 16, 88, 64, 200, 24, 52, 136});
  Predictor split(model_file(), options({Device::cpu()}, 2));
  PredictorOptions whole_options = options({Device::cpu()}, 2);
  whole_options.chunk_lines = 1024;
  Predictor whole(model_file(), whole_options);
  const auto a = split.recognize(paths), b = whole.recognize(paths);
  REQUIRE(a.size() == paths.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("line " << i);
    REQUIRE(a[i].ok());
    CHECK(a[i].name == paths[i]);
    CHECK(a[i].text == b[i].text);
    CHECK(max_abs_diff(a[i].logits, b[i].logits) <= 1e-5);
  }
}

TEST_CASE("batching lines by width changes no line's result", "[infer]") {
  // Widths far apart, so that a narrow line shares its batch with much wider ones.
  const auto paths = write_lines("batching", {16, 200, 44, 28, 136, 60, 12, 84});
  Predictor single(model_file(), options({Device::cpu()}, 1));
  Predictor batched(model_file(), options({Device::cpu()}, 8));
  const auto a = single.recognize(paths), b = batched.recognize(paths);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("line " << i << " width " << a[i].width);
    REQUIRE(a[i].ok());
    CHECK(a[i].text == b[i].text);
    CHECK(max_abs_diff(a[i].logits, b[i].logits) <= 1e-5);
  }
  // The margin past the widest line is what makes this hold: the same line alone, padded by
  // hand with far more white, gives the same logits.
  nn::ModelFile f = nn::load_model_file(model_file());
  Generator gen(0);
  nn::CRNN model(nn::CRNNConfig::from_json(f.info->config), gen);
  model.load_state_dict(f.weights);
  model.eval();
  NoGradGuard no_grad;
  GrayImage img = resize_to_height(load_gray_image(paths[2]), 32);
  std::vector<int64_t> w;
  Tensor x = pack_batch({img}, BatchSpec{}, &w);
  Tensor wide = Tensor::ones({1, 1, 32, w[0] + 400});  // white is 1.0 after normalisation
  wide.narrow(3, 0, w[0]).copy_(x);
  const Tensor ref = model.forward(wide, w).select(1, 0).narrow(0, 0, nn::CRNN::frames(w[0]));
  CHECK(max_abs_diff(ref, a[2].logits) <= 1e-5);
}

TEST_CASE("svtr-lite: batching changes no line's result, with no white margin past the widest line", "[infer][svtr]") {
  // SVTR-lite never looks past a line's own width (its right context is 0), so the predictor
  // adds no margin for it; lines of very different widths still read the same in one batch.
  const std::string path = temp("svtr-lite.safetensors");
  {
    Generator gen(12);
    auto model = nn::make_recognizer("svtr-lite", (int64_t)kChars.size() + 1, gen);
    CHECK(model->right_context() == 0);
    nn::ModelInfo info;
    info.arch = "svtr-lite";
    info.config = model->config_json();
    info.charset = kChars;
    info.input = nn::default_input_spec();
    nn::save_model_file(path, *model, info);
  }
  const auto paths = write_lines("svtr-batching", {16, 200, 44, 28, 136, 60});
  Predictor single(path, options({Device::cpu()}, 1));
  Predictor batched(path, options({Device::cpu()}, 6));
  const auto a = single.recognize(paths), b = batched.recognize(paths);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("line " << i << " width " << a[i].width);
    REQUIRE(a[i].ok());
    CHECK(a[i].text == b[i].text);
    CHECK(max_abs_diff(a[i].logits, b[i].logits) <= 1e-4);
  }
}

TEST_CASE("a bad line gets its own error and the others are still read", "[infer]") {
  const auto good = write_lines("bad_neighbours", {40, 64});
  const std::string empty = temp("empty.png"), corrupt = temp("corrupt.png"), tiny = temp("tiny.png");
  write_bytes(empty, "");
  write_bytes(corrupt, "\x89PNG\r\n\x1a\nthis is not really a png");
  GrayImage speck;  // too small, and not blank: a dark speck on white (a 1x1 image is blank)
  speck.width = 6, speck.height = 6;
  speck.pixels.assign(36, 255);
  speck.pixels[14] = 0;
  save_gray_png(tiny, speck);
  std::vector<LineInput> in{{good[0], {}},
                            {temp("missing.png"), {}},
                            {empty, {}},
                            {corrupt, {}},
                            {tiny, {}},
                            {"wide", line_image(100000, 32, 4)},
                            {"tall", line_image(32, 100000, 5)},
                            {"zero", GrayImage{}},
                            {good[1], {}}};
  Predictor p(model_file(), options({Device::cpu(), Device::cpu()}, 4));
  const auto r = p.recognize(in);
  REQUIRE(r.size() == in.size());
  CHECK(r[0].ok());
  CHECK(r[8].ok());
  CHECK_THAT(r[1].error, Catch::Contains("missing.png") && Catch::Contains("no such file"));
  CHECK_THAT(r[2].error, Catch::Contains("empty"));
  CHECK_THAT(r[3].error, Catch::Contains("corrupt.png"));
  CHECK_THAT(r[4].error, Catch::Contains("too small") && Catch::Contains("6x6"));
  CHECK_THAT(r[5].error, Catch::Contains("too wide") && Catch::Contains("100000x32"));
  CHECK_THAT(r[6].error, Catch::Contains("too narrow") && Catch::Contains("32x100000"));
  CHECK_THAT(r[7].error, Catch::Contains("empty or inconsistent"));
  for (int i = 1; i <= 7; ++i) CHECK(r[(size_t)i].text.empty());
  // The good lines read as they do on their own.
  const auto alone = p.recognize(good);
  CHECK(alone[0].text == r[0].text);
  CHECK(alone[1].text == r[8].text);
}

TEST_CASE("blank lines read as empty text without the model, at any size, and light-on-dark lines are inverted", "[infer]") {
  auto flat = [](int64_t w, int64_t h, uint8_t v) {
    GrayImage img;
    img.width = w, img.height = h;
    img.pixels.assign((size_t)(w * h), v);
    return img;
  };
  GrayImage noisy = flat(300, 40, 220);
  uint32_t s = 7;
  for (auto& v : noisy.pixels) {  // paper texture: +-6 levels
    s = s * 1664525u + 1013904223u;
    v = (uint8_t)(v - 6 + (int)((s >> 24) % 13));
  }
  const GrayImage line = line_image(120, 32, 9);
  GrayImage negative = line;
  for (auto& v : negative.pixels) v = (uint8_t)(255 - v);
  const std::vector<LineInput> in{{"white", flat(400, 32, 255)}, {"gray", flat(200, 48, 128)}, {"noisy", noisy},
                                  {"1x1", flat(1, 1, 90)},       {"huge", flat(100000, 32, 250)},
                                  {"line", line},                {"negative", negative}};
  Predictor p(model_file(), options({Device::cpu()}, 4));
  const auto r = p.recognize(in);
  REQUIRE(r.size() == in.size());
  for (size_t i = 0; i < 5; ++i) {
    INFO(r[i].name << ": " << r[i].error);
    CHECK(r[i].ok());
    CHECK(r[i].text.empty());
    CHECK(r[i].confidence == 1.0);
    CHECK(r[i].worker == -1);  // no model ran
    CHECK(r[i].chars.empty());
    CHECK_FALSE(r[i].logits.defined());
  }
  // The line and its negative give the model the same input, so the same logits.
  REQUIRE(r[5].ok());
  REQUIRE(r[6].ok());
  CHECK(r[6].text == r[5].text);
  CHECK(max_abs_diff(r[5].logits, r[6].logits) == 0);
  // In tsv and jsonl a blank line is present with empty text.
  CHECK(format_line(r[0], {Format::tsv, false}) == "white\t\t1.0000\t\n");
  CHECK(format_line(r[3], {Format::jsonl, false}) == "{\"path\":\"1x1\",\"text\":\"\",\"confidence\":1}\n");
  // --plain-preprocess: the model reads them all, as training's preprocessing gives them.
  PredictorOptions plain = options({Device::cpu()}, 4);
  plain.normalize.enabled = false;
  Predictor q(model_file(), plain);
  const auto raw = q.recognize(in);
  CHECK(raw[0].worker >= 0);  // read by the model (a blank line's worker is -1)
  CHECK(raw[5].text == r[5].text);
  CHECK_THAT(raw[3].error, Catch::Contains("too small"));
  CHECK_THAT(raw[4].error, Catch::Contains("too wide"));
}

TEST_CASE("a bad model file or a mismatched arch fails at construction", "[infer]") {
  const std::string garbage = temp("garbage.safetensors");
  write_bytes(garbage, "definitely not safetensors");
  CHECK_THROWS_WITH(Predictor(garbage), Catch::Contains("cannot load the model file") && Catch::Contains(garbage));
  // A good file cut short.
  std::ifstream in(model_file(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string truncated = temp("truncated.safetensors");
  write_bytes(truncated, bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(Predictor(truncated), Catch::Contains("cannot load the model file") && Catch::Contains(truncated));
  CHECK_THROWS_WITH(Predictor(temp("nowhere.safetensors")), Catch::Contains("nowhere.safetensors"));

  PredictorOptions o;
  o.arch = "crnn";
  CHECK_THROWS_WITH(Predictor(model_file(), o), Catch::Contains("holds a 'crnn-s' model, but 'crnn' was asked for"));
  o.arch = "svtr-huge";
  CHECK_THROWS_WITH(Predictor(model_file(), o), Catch::Contains("unknown architecture 'svtr-huge'"));

  // A weights-only file (as exported from PyTorch) needs the arch and the charset.
  nn::ModelFile f = nn::load_model_file(model_file());
  std::vector<std::pair<std::string, Tensor>> tensors(f.weights.begin(), f.weights.end());
  const std::string weights_only = temp("weights_only.safetensors");
  save_safetensors(weights_only, tensors);
  CHECK_THROWS_WITH(Predictor(weights_only), Catch::Contains("weights only") && Catch::Contains("--arch"));
  const std::string charset = temp("charset.txt");
  {
    std::ofstream out(charset);
    for (const auto& c : kChars) out << c << "\n";
  }
  PredictorOptions w;
  w.arch = "crnn";
  w.charset_path = charset;
  CHECK_THROWS_WITH(Predictor(weights_only, w), Catch::Contains("do not fit a 'crnn' model"));
  w.arch = "crnn-s";
  w.keep_logits = true;
  const auto lines = write_lines("weights_only", {36});
  PredictorOptions m;
  m.keep_logits = true;
  const auto a = Predictor(weights_only, w).recognize(lines), b = Predictor(model_file(), m).recognize(lines);
  CHECK(a[0].text == b[0].text);
  CHECK(max_abs_diff(a[0].logits, b[0].logits) == 0);
}

TEST_CASE("precision: tf32 is refused on CPU workers alone, and the summary names what ran", "[infer]") {
  struct Restore {  // the precision is process-wide
    ~Restore() {
      cpu::set_matmul_precision(cpu::MatmulPrecision::f32);
      set_gpu_precision(Precision::fp32);
    }
  } restore;
  PredictorOptions o;
  o.precision = "tf32";
  CHECK_THROWS_WITH(Predictor(model_file(), o), Catch::Contains("tf32 is a GPU tensor-core format"));
  o.precision = "fp16";
  CHECK_THROWS_WITH(Predictor(model_file(), o), Catch::Contains("unknown precision 'fp16'"));
  o.precision = "int8";  // a float file
  CHECK_THROWS_WITH(Predictor(model_file(), o), Catch::Contains("--precision int8 reads an int8 model file"));
  o.precision = "fp32";
  CHECK(Predictor(model_file(), o).precision() == "fp32");
  CHECK(cpu::matmul_precision() == cpu::MatmulPrecision::f32);
  o.precision = "auto";
  // model_file() records no validation CERs: auto keeps fp32 on every CPU, and says why.
  CHECK_THAT(Predictor(model_file(), o).precision(), Catch::StartsWith("fp32 (auto: "));
  CHECK(gpu_precision() == Precision::fp32);  // auto leaves GPU workers in fp32
  if (cpu_isa() != CpuIsa::generic) {
    o.precision = "bf16";
    Predictor p(model_file(), o);
    CHECK(p.precision() == "bf16");
    CHECK(cpu::matmul_precision() == cpu::MatmulPrecision::bf16);
    CHECK(gpu_precision() == Precision::bf16);
    const auto paths = write_lines("bf16-", {40, 64});
    size_t next = 0;
    const RunStats stats = p.run(
        [&](LineInput& in) {
          if (next == paths.size()) return false;
          in.name = paths[next++];
          return true;
        },
        [&](int64_t, LineResult&& r) { CHECK(r.ok()); });
    CHECK_THAT(stats.summary(), Catch::Contains(", bf16"));
  }
}

TEST_CASE("precision auto: bf16 only where the model file validates it and the CPU multiplies bf16", "[infer]") {
  const auto record = [](const char* json) {
    Json t = Json::object();
    t.set("steps", 10.0);
    if (json) t.set("precision_cer", parse_json(json));
    return t;
  };
  std::string why;
  // Validated: within 0.05 CER points of fp32's (the margin itself included), on its own record.
  CHECK(precision_validated(record(R"({"fp32": 0.0127, "bf16": 0.0132})"), "bf16", &why));
  CHECK(why == "bf16 CER 1.32% against fp32's 1.27%");
  CHECK(precision_validated(record(R"({"fp32": 0.02, "int8": 0.0205})"), "int8"));
  CHECK(precision_validated(record(R"({"fp32": 0.0127, "bf16": 0.0100})"), "bf16"));  // better is fine
  CHECK_FALSE(precision_validated(record(R"({"fp32": 0.0127, "bf16": 0.0133})"), "bf16", &why));
  CHECK(why == "bf16 CER 1.33% against fp32's 1.27%, over 0.05 points");
  // Not validated: nothing recorded, one side missing, a value that is no CER.
  CHECK_FALSE(precision_validated(record(nullptr), "bf16", &why));
  CHECK(why == "the model file has no precision_cer record");
  CHECK_FALSE(precision_validated(record(R"({"fp32": 0.0127})"), "bf16", &why));
  CHECK(why == "the model file's precision_cer has no bf16 CER");
  CHECK_FALSE(precision_validated(record(R"({"bf16": 0.0127})"), "bf16", &why));
  CHECK(why == "the model file's precision_cer has no fp32 CER");
  CHECK_FALSE(precision_validated(record(R"({"fp32": 0.0127, "bf16": "0.0127"})"), "bf16"));
  CHECK_FALSE(precision_validated(record(R"({"fp32": 0.0127, "bf16": -1})"), "bf16"));
  CHECK_FALSE(precision_validated(Json::array(), "bf16"));
  // The path decides whether bf16 is a candidate at all.
  const Json good = record(R"({"fp32": 0.0127, "bf16": 0.0127})"), bad = record(R"({"fp32": 0.0127, "bf16": 0.02})");
  CHECK(auto_cpu_precision(CpuIsa::amx, good) == "bf16");
  CHECK(auto_cpu_precision(CpuIsa::avx512bf16, good) == "bf16");
  CHECK(auto_cpu_precision(CpuIsa::avx512, good, &why) == "fp32");
  CHECK(why == "the avx512 path has no bf16 instructions");
  CHECK(auto_cpu_precision(CpuIsa::avx2, good) == "fp32");
  CHECK(auto_cpu_precision(CpuIsa::generic, good) == "fp32");
  CHECK(auto_cpu_precision(CpuIsa::amx, bad) == "fp32");

  // Through the predictor: a model file with a record, on this CPU's path.
  struct Restore {
    ~Restore() { cpu::set_matmul_precision(cpu::MatmulPrecision::f32); }
  } restore;
  const auto file_with = [&](const char* name, const char* json) {
    nn::ModelFile m = nn::load_model_file(model_file());
    nn::ModelInfo info = *m.info;
    info.training = record(json);
    const std::string p = temp(name);
    nn::save_model_file(p, m.weights, info);
    return p;
  };
  PredictorOptions o;
  o.precision = "auto";
  const bool bf16_cpu = (int)cpu_isa() >= (int)CpuIsa::avx512bf16;
  const Predictor validated(file_with("validated.safetensors", R"({"fp32": 0.0127, "bf16": 0.0127})"), o);
  if (bf16_cpu) {
    CHECK(validated.precision() == "bf16 (auto: bf16 CER 1.27% against fp32's 1.27%)");
    CHECK(cpu::matmul_precision() == cpu::MatmulPrecision::bf16);
  } else {
    CHECK_THAT(validated.precision(), Catch::StartsWith("fp32 (auto: the ") && Catch::EndsWith("path has no bf16 instructions)"));
  }
  const Predictor over(file_with("over.safetensors", R"({"fp32": 0.0127, "bf16": 0.02})"), o);
  CHECK(over.precision() == (bf16_cpu ? "fp32 (auto: bf16 CER 2.00% against fp32's 1.27%, over 0.05 points)"
                                      : validated.precision()));
  CHECK(cpu::matmul_precision() == cpu::MatmulPrecision::f32);
}

TEST_CASE("beam decoding runs through the predictor", "[infer]") {
  const auto paths = write_lines("beam", {52, 30});
  PredictorOptions o = options({Device::cpu()}, 2);
  o.decoder = parse_decoder("beam");
  o.beam_width = 4;
  const auto r = Predictor(model_file(), o).recognize(paths);
  for (const auto& l : r) {
    REQUIRE(l.ok());
    CHECK(l.chars.size() == nn::utf8_chars(l.text).size());
    CHECK(l.confidence >= 0);
    CHECK(l.confidence <= 1);
  }
  CHECK_THROWS_WITH(parse_decoder("viterbi"), Catch::Contains("unknown decoder 'viterbi'"));
}

TEST_CASE("tsv and jsonl formats", "[infer]") {
  LineResult ok;
  ok.name = "dir/a\tb.png";
  ok.text = "say \"hi\"";
  ok.confidence = 0.87654321;
  ok.chars = {{"s", 2, 9.5}, {"a", 4, 17.5}};
  LineResult bad;
  bad.name = "x.png";
  bad.error = "x.png: no such file";
  FormatOptions text{Format::text, false}, tsv{Format::tsv, false}, jsonl{Format::jsonl, false};
  CHECK(format_line(ok, text) == "say \"hi\"\n");
  CHECK(format_line(bad, text) == "\n");
  CHECK(format_line(ok, tsv) == "dir/a\\tb.png\tsay \"hi\"\t0.8765\t\n");
  CHECK(format_line(bad, tsv) == "x.png\t\t\tx.png: no such file\n");
  CHECK(format_line(ok, jsonl) == "{\"path\":\"dir/a\\tb.png\",\"text\":\"say \\\"hi\\\"\",\"confidence\":0.8765}\n");
  CHECK(format_line(bad, jsonl) == "{\"path\":\"x.png\",\"error\":\"x.png: no such file\"}\n");
  FormatOptions positions{Format::jsonl, true};
  CHECK_THAT(format_line(ok, positions),
             Catch::Contains("\"chars\":[{\"c\":\"s\",\"frame\":2,\"x\":9.5,\"p\":0},{\"c\":\"a\",\"frame\":4,\"x\":17.5,\"p\":0}]"));
  CHECK(format_line(ok, FormatOptions{Format::tsv, true}) == "dir/a\\tb.png\tsay \"hi\"\t0.8765\t\t9.5 17.5\n");
  Scored s{"say hi", 2, 6};
  CHECK_THAT(format_line(ok, jsonl, &s), Catch::EndsWith(",\"truth\":\"say hi\",\"distance\":2,\"cer\":0.3333}\n"));
  // Every jsonl line parses back.
  CHECK(parse_json(format_line(bad, jsonl, &s)).at("error").as_string() == "x.png: no such file");
  CHECK_THROWS_WITH(parse_format("xml"), Catch::Contains("unknown output format 'xml'"));
}

TEST_CASE("eval report: counts CER in characters, line accuracy and the worst lines", "[infer]") {
  CHECK(char_edit_distance("", "") == 0);
  CHECK(char_edit_distance("kitten", "sitting") == 3);
  CHECK(char_edit_distance("caf\xc3\xa9", "cafe") == 1);  // one code point, two bytes
  CHECK(char_count("caf\xc3\xa9") == 4);
  Evaluation e;
  LineResult a, b, c;
  a.name = "a.png", a.text = "hello";
  b.name = "b.png", b.text = "wrld";
  c.name = "c.png", c.error = "c.png: no such file";
  CHECK(e.add(a, "hello").distance == 0);
  CHECK(e.add(b, "world").distance == 1);
  CHECK(e.add(c, "abc").distance == 3);  // a failed line loses all of its characters
  CHECK(e.lines() == 3);
  CHECK(e.failed() == 1);
  CHECK(e.cer() == Approx(4.0 / 13.0));
  CHECK(e.line_accuracy() == Approx(1.0 / 3.0));
  const std::string report = e.report(1);
  CHECK_THAT(report, Catch::Contains("CER            30.77%") && Catch::Contains("line accuracy  33.33%"));
  CHECK_THAT(report, Catch::Contains("c.png") && !Catch::Contains("b.png"));  // only the worst one
  CHECK(e.summary().at("failed").as_int() == 1);
}

TEST_CASE("eval report: references with no characters give no rate, not 0%", "[infer]") {
  // The issue's case: a .gt.txt that is empty and a line read with 44 characters printed
  // "CER 0.00% (44 edits / 0 characters)", a rate that contradicts its own counts.
  Evaluation e;
  LineResult a;
  a.name = "a.png", a.text = std::string(44, 'x');
  CHECK(e.add(a, "").distance == 44);
  const std::string report = e.report();
  CHECK_THAT(report, Catch::Contains("CER            undefined") && Catch::Contains("(44 edits / 0 characters)"));
  CHECK_THAT(report, !Catch::Contains("CER            0.00%"));
  CHECK(e.summary().at("cer").is_null());
  CHECK(e.summary().at("distance").as_int() == 44);
  // With any reference characters the rate is back.
  LineResult b;
  b.name = "b.png", b.text = "ab";
  e.add(b, "ab");
  CHECK(e.summary().at("cer").as_number() == Approx(22.0));
}

TEST_CASE("logits-out: writes a readable safetensors file", "[infer]") {
  const auto paths = write_lines("logits", {24, 48});
  Predictor p(model_file(), options({Device::cpu()}, 2));
  const auto r = p.recognize(std::vector<std::string>{paths[0], paths[1], paths[0]});
  std::vector<std::pair<std::string, Tensor>> logits;
  for (const auto& l : r) logits.emplace_back(l.name, l.logits);
  const std::string out = temp("logits.safetensors");
  write_logits_file(out, logits, p.charset());
  SafetensorsFile f = load_safetensors(out);
  REQUIRE(f.tensors.size() == 3);
  CHECK(f.tensors[0].first == paths[0]);
  CHECK(f.tensors[2].first == paths[0] + " #2");
  CHECK(f.get(paths[1]).shape() == Shape{nn::CRNN::frames(48), (int64_t)kChars.size() + 1});
  CHECK(max_abs_diff(f.get(paths[1]), r[1].logits) == 0);
  CHECK(f.metadata.at("format") == "ocrt-logits-1");
  CHECK(parse_json(f.metadata.at("charset")).size() == kChars.size());
}

TEST_CASE("on CPUs a batch holds at most cpu_batch_columns columns by default, and reads the same", "[infer]") {
  // The cap follows the model's first-layer channels: crnn's 64 -> 4096 columns, crnn-s's 32 ->
  // 8192, within 2048..12288.
  CHECK(cpu_batch_columns(64) == 4096);
  CHECK(cpu_batch_columns(32) == 8192);
  CHECK(cpu_batch_columns(8) == 12288);
  CHECK(cpu_batch_columns(1000) == 2048);
  CHECK(cpu_batch_columns(0) == 12288);
  // 12 lines of 1000 columns, every third 48 pixels high (668 columns at the model's height):
  // by lines alone one batch of 32 would take them all. plan_batches puts the four narrower
  // lines apart (no padding to 1000), and the default column cap for this small model (8192,
  // each line counted with the right margin of 28) splits the eight wider ones 7 and 1; with a
  // cap of 65536 they stay together.
  const auto paths = write_lines("columns", std::vector<int64_t>(12, 1000));
  auto read_all = [&](Predictor& p, std::vector<Tensor>& logits) {
    size_t next = 0;
    logits.assign(paths.size(), Tensor());
    return p.run(
        [&](LineInput& in) {
          if (next == paths.size()) return false;
          in.name = paths[next++];
          return true;
        },
        [&](int64_t i, LineResult&& r) { logits[(size_t)i] = r.logits; });
  };
  Predictor capped(model_file(), options({Device::cpu()}, 32));
  PredictorOptions wide_options = options({Device::cpu()}, 32);
  wide_options.max_batch_columns = 32 * 2048;
  Predictor wide(model_file(), wide_options);
  std::vector<Tensor> a, b;
  const RunStats sa = read_all(capped, a), sb = read_all(wide, b);
  auto batches = [](const RunStats& st) {
    int64_t n = 0;
    for (const auto& w : st.workers) n += w.batches;
    return n;
  };
  CHECK(batches(sa) == 3);
  CHECK(batches(sb) == 2);
  for (size_t i = 0; i < paths.size(); ++i) {
    REQUIRE(a[i].defined());
    // As between one worker and two above: a batch's other lines may change the order in which
    // a GEMM sums (its blocking follows the batch's columns), never what a line reads.
    CHECK(max_abs_diff(a[i], b[i]) <= 1e-5);
  }
}

namespace {

// What plan_batches minimises, for a cut given as batch sizes.
double cut_cost(const std::vector<int64_t>& widths, const std::vector<int64_t>& sizes, int64_t margin, double overhead) {
  double cost = 0;
  size_t at = 0;
  for (int64_t n : sizes) {
    at += (size_t)n;
    cost += ((double)n + overhead) * (double)(widths[at - 1] + margin);
  }
  return cost;
}

// Whether a cut covers every line once and keeps each batch within the limits.
bool cut_fits(const std::vector<int64_t>& widths, const std::vector<int64_t>& sizes, int64_t margin, int64_t max_lines,
              int64_t max_columns) {
  size_t at = 0;
  for (int64_t n : sizes) {
    if (n < 1 || at + (size_t)n > widths.size()) return false;
    at += (size_t)n;
    if (n > 1 && (n > max_lines || n * (widths[at - 1] + margin) > max_columns)) return false;
  }
  return at == widths.size();
}

}  // namespace

TEST_CASE("batches: fill_batches fills each batch, plan_batches finds the cut of least padding", "[infer]") {
  // A table's cells as a page reads them (widths at the model's height, the right margin 28):
  // filling takes all 20 into one batch 176 wide; the plan cuts where the widths jump.
  const std::vector<int64_t> cells = {80, 84, 84, 84, 84, 84, 92, 92, 92, 96, 104, 108, 108, 120, 124, 140, 140, 148, 168, 176};
  CHECK(fill_batches(cells, 28, 32, 4096) == std::vector<int64_t>{20});
  const std::vector<int64_t> plan = plan_batches(cells, 28, 32, 4096, 0.4);
  REQUIRE(plan.size() >= 2);
  CHECK(cut_fits(cells, plan, 28, 32, 4096));
  CHECK(cut_cost(cells, plan, 28, 0.4) < 0.85 * cut_cost(cells, {20}, 28, 0.4));
  // With a batch's overhead as large as the lines themselves, one batch is cheapest again.
  CHECK(plan_batches(cells, 28, 32, 4096, 20.0) == std::vector<int64_t>{20});
  // Limits: lines (32 at most) and columns (a line wider than the cap still gets a batch).
  CHECK(fill_batches(std::vector<int64_t>(70, 100), 28, 32, 1 << 20) == std::vector<int64_t>{32, 32, 6});
  CHECK(plan_batches(std::vector<int64_t>(70, 100), 28, 32, 1 << 20, 0.4).size() == 3);
  CHECK(fill_batches({100, 5000, 6000}, 28, 32, 4096) == std::vector<int64_t>{1, 1, 1});
  CHECK(plan_batches({100, 5000, 6000}, 28, 32, 4096, 0.4) == std::vector<int64_t>{1, 1, 1});
  CHECK(plan_batches({}, 28, 32, 4096, 0.4).empty());
  CHECK_THROWS_WITH(plan_batches({200, 100}, 28, 32, 4096, 0.4), Catch::Contains("narrowest first"));

  // Against every cut of small random sets: the plan is the cheapest that fits, and never
  // costs more than filling.
  std::mt19937 rng(20261130);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t L = 1 + rng() % 11;
    std::vector<int64_t> widths;
    for (size_t i = 0; i < L; ++i) widths.push_back(4 * (1 + (int64_t)(rng() % 100)));
    std::sort(widths.begin(), widths.end());
    const int64_t max_lines = 1 + (int64_t)(rng() % 6), max_columns = 200 + (int64_t)(rng() % 1500), margin = 28;
    const double overhead = (double)(rng() % 9) * 0.25;
    const std::vector<int64_t> planned = plan_batches(widths, margin, max_lines, max_columns, overhead);
    const std::vector<int64_t> filled = fill_batches(widths, margin, max_lines, max_columns);
    REQUIRE(cut_fits(widths, planned, margin, max_lines, max_columns));
    REQUIRE(cut_fits(widths, filled, margin, max_lines, max_columns));
    double least = std::numeric_limits<double>::infinity();
    for (uint32_t cuts = 0; cuts < (1u << (L - 1)); ++cuts) {  // bit k: a batch ends after line k
      std::vector<int64_t> sizes{1};
      for (size_t k = 0; k + 1 < L; ++k)
        if (cuts >> k & 1) sizes.push_back(1);
        else ++sizes.back();
      if (cut_fits(widths, sizes, margin, max_lines, max_columns))
        least = std::min(least, cut_cost(widths, sizes, margin, overhead));
    }
    const double cost = cut_cost(widths, planned, margin, overhead);
    CHECK(cost <= least * (1 + 1e-9));
    CHECK(cost <= cut_cost(widths, filled, margin, overhead) * (1 + 1e-9));
  }
}
