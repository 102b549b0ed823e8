// The C API (capi/ocrt.h) over the predictor. Everything here is translation: C arguments to a
// PredictorOptions and LineInputs, LineResults to C strings, and every exception to a message
// in a thread-local string, because an exception that unwinds into C code (or into Python's
// ctypes) is undefined behaviour, not an error the caller can see.
#include "capi/ocrt.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <limits>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "infer/predictor.h"
#include "runtime/cpu_allocator.h"
#include "runtime/device.h"
#include "runtime/error.h"

// The header states the version for programs compiled against it; the build states it for the
// library. They are the same number written twice, so the build refuses to let them drift.
static_assert(std::string_view(OCRT_VERSION_STRING) == OCRT_PROJECT_VERSION,
              "capi/ocrt.h's OCRT_VERSION_STRING must equal project(ocrt VERSION ...) in CMakeLists.txt");

using ocrt::infer::LineInput;
using ocrt::infer::LineResult;
using ocrt::infer::Predictor;

struct ocrt_model {
  std::unique_ptr<Predictor> predictor;
};

struct ocrt_result {
  std::vector<LineResult> lines;
};

namespace {

thread_local std::string t_error;
// Set when even the message could not be stored: ocrt_last_error must not come back empty
// after a failure, and must not allocate to say so.
thread_local bool t_out_of_memory = false;

void clear_error() noexcept {
  t_error.clear();
  t_out_of_memory = false;
}

void set_error(const char* function, const char* message) noexcept {
  try {
    t_error.assign(function).append(": ").append(message);
    t_out_of_memory = false;
  } catch (...) {
    t_error.clear();
    t_out_of_memory = true;
  }
}

// Runs f, turning any exception into the thread's last error and `failed` into the return
// value. Each entry point clears the last error first, so that "" means the last call worked.
template <class T, class F>
T guarded(const char* function, T failed, F&& f) noexcept {
  clear_error();
  try {
    return f();
  } catch (const std::bad_alloc&) {
    set_error(function, "out of memory");
  } catch (const std::exception& e) {
    set_error(function, e.what());
  } catch (...) {
    set_error(function, "an unknown C++ exception");
  }
  return failed;
}

// "cpu", "cuda:N", or a comma-separated list; cpu may repeat (ocrt-infer --devices does the
// same: CPU workers share the CPU threads), a GPU twice the Predictor refuses.
std::vector<ocrt::Device> parse_devices(const std::string& text) {
  std::vector<ocrt::Device> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    ocrt::Device d = ocrt::Device::parse(item);
    ocrt::validate(d);  // names the devices that exist when this one does not
    out.push_back(d);
  }
  OCRT_CHECK(!out.empty(), "empty device list '", text, "': expected e.g. cpu, cuda:0 or cuda:0,cpu");
  return out;
}

ocrt_result* run(ocrt_model* model, const std::vector<LineInput>& lines) {
  auto result = std::make_unique<ocrt_result>();
  if (!lines.empty()) result->lines = model->predictor->recognize(lines);
  return result.release();
}

ocrt::GrayImage copy_gray(const ocrt_image& image, size_t index) {
  OCRT_CHECK(image.width >= 0 && image.height >= 0, "image ", index, " has a negative size (", image.width, "x",
             image.height, ")");
  OCRT_CHECK(image.stride >= image.width, "image ", index, ": stride ", image.stride, " is less than its width ",
             image.width);
  OCRT_CHECK(image.pixels || image.width == 0 || image.height == 0, "image ", index, ": pixels is NULL");
  ocrt::GrayImage g;
  g.width = image.width;
  g.height = image.height;
  g.pixels.resize((size_t)image.width * (size_t)image.height);
  if (g.pixels.empty()) return g;  // the Predictor gives a zero-sized line its own error
  for (int64_t y = 0; y < image.height; ++y) {
    const uint8_t* row = image.pixels + y * (int64_t)image.stride;
    std::copy(row, row + image.width, g.pixels.begin() + y * image.width);
  }
  return g;
}

// Line i of a result, or an error naming what is wrong with the request.
const LineResult& line_of(const ocrt_result* result, size_t i) {
  OCRT_CHECK(result, "result is NULL");
  OCRT_CHECK(i < result->lines.size(), "no line ", i, " in a result of ", result->lines.size(), " lines");
  return result->lines[i];
}

}  // namespace

extern "C" {

const char* ocrt_version(void) { return OCRT_VERSION_STRING; }

const char* ocrt_last_error(void) { return t_out_of_memory ? "out of memory" : t_error.c_str(); }

namespace {

ocrt_model* open_model(const char* model_path, const char* device, int threads, const char* decoder,
                       const char* lm_path) {
  OCRT_CHECK(model_path, "model_path is NULL");
  OCRT_CHECK(threads >= 0, "threads must be >= 0 (0: the default), got ", threads);
  const std::string how = decoder ? decoder : "auto";
  OCRT_CHECK(how == "auto" || how == "greedy" || how == "beam", "decoder must be auto, greedy or beam, got '", how, "'");
  ocrt::infer::PredictorOptions options;
  options.devices = parse_devices(device ? device : "cpu");
  options.threads = threads;
  if (how == "auto") {
    // ocrt-infer's default decoding; without lm_path, with the LM that ships beside the
    // shipped model (PREFIX/share/ocrt/weights/lm-en.clm) where there is one beside this model.
    const std::filesystem::path beside = std::filesystem::path(model_path).parent_path() / "lm-en.clm";
    std::error_code ec;
    if (lm_path) ocrt::infer::use_auto_decoding(options, lm_path, false);
    else if (std::filesystem::is_regular_file(beside, ec)) ocrt::infer::use_auto_decoding(options, beside.string(), true);
  } else {
    options.decoder = ocrt::infer::parse_decoder(how);
    if (lm_path) options.lm_path = lm_path;  // with greedy, the predictor refuses it
  }
  // A program that calls ocrt through this API uses it only to read lines, batch after batch
  // of changing widths: the setting ocrt-infer makes for the same reason (predictor.h,
  // "Memory"). It concerns ocrt's own CPU allocator only.
  ocrt::cpu_set_cache_trim(true);
  auto model = std::make_unique<ocrt_model>();
  model->predictor = std::make_unique<Predictor>(model_path, options);
  return model.release();
}

}  // namespace

ocrt_model* ocrt_open(const char* model_path, const char* device, int threads) {
  return guarded("ocrt_open", (ocrt_model*)nullptr,
                 [&] { return open_model(model_path, device, threads, nullptr, nullptr); });
}

ocrt_model* ocrt_open_decoding(const char* model_path, const char* device, int threads, const char* decoder,
                               const char* lm_path) {
  return guarded("ocrt_open_decoding", (ocrt_model*)nullptr,
                 [&] { return open_model(model_path, device, threads, decoder, lm_path); });
}

void ocrt_close(ocrt_model* model) {
  clear_error();
  delete model;  // ~Predictor stops and joins the workers
}

ocrt_result* ocrt_recognize_files(ocrt_model* model, const char* const* paths, size_t count) {
  return guarded("ocrt_recognize_files", (ocrt_result*)nullptr, [&] {
    OCRT_CHECK(model, "model is NULL");
    OCRT_CHECK(paths || count == 0, "paths is NULL");
    std::vector<LineInput> lines(count);
    for (size_t i = 0; i < count; ++i) {
      OCRT_CHECK(paths[i], "paths[", i, "] is NULL");
      lines[i].name = paths[i];
    }
    return run(model, lines);
  });
}

ocrt_result* ocrt_recognize_file(ocrt_model* model, const char* path) {
  return guarded("ocrt_recognize_file", (ocrt_result*)nullptr, [&] {
    OCRT_CHECK(model, "model is NULL");
    OCRT_CHECK(path, "path is NULL");
    return run(model, {LineInput{path, std::nullopt}});
  });
}

ocrt_result* ocrt_recognize_grays(ocrt_model* model, const ocrt_image* images, size_t count) {
  return guarded("ocrt_recognize_grays", (ocrt_result*)nullptr, [&] {
    OCRT_CHECK(model, "model is NULL");
    OCRT_CHECK(images || count == 0, "images is NULL");
    std::vector<LineInput> lines(count);
    for (size_t i = 0; i < count; ++i) {
      lines[i].name = "image " + std::to_string(i);
      lines[i].image = copy_gray(images[i], i);
    }
    return run(model, lines);
  });
}

ocrt_result* ocrt_recognize_gray(ocrt_model* model, const uint8_t* pixels, int width, int height, int stride) {
  return guarded("ocrt_recognize_gray", (ocrt_result*)nullptr, [&] {
    OCRT_CHECK(model, "model is NULL");
    return run(model, {LineInput{"image 0", copy_gray(ocrt_image{pixels, width, height, stride}, 0)}});
  });
}

size_t ocrt_result_count(const ocrt_result* result) {
  clear_error();
  return result ? result->lines.size() : 0;
}

const char* ocrt_result_text(const ocrt_result* result, size_t i) {
  return guarded("ocrt_result_text", (const char*)nullptr, [&] { return line_of(result, i).text.c_str(); });
}

double ocrt_result_confidence(const ocrt_result* result, size_t i) {
  return guarded("ocrt_result_confidence", std::numeric_limits<double>::quiet_NaN(),
                 [&] { return line_of(result, i).confidence; });
}

const char* ocrt_result_error(const ocrt_result* result, size_t i) {
  const char* error = guarded("ocrt_result_error", (const char*)nullptr, [&] {
    const LineResult& line = line_of(result, i);
    return line.ok() ? nullptr : line.error.c_str();
  });
  // A bad request has no line to carry its error: hand back the last error instead, so that
  // NULL always means "line i was read".
  return error || ocrt_last_error()[0] == '\0' ? error : ocrt_last_error();
}

void ocrt_result_free(ocrt_result* result) {
  clear_error();
  delete result;
}

}  // extern "C"
