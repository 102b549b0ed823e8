// Reads text-line images with ocrt's shipped model and prints what each says, one output line
// per image: a program built against the installed package (examples/CMakeLists.txt).
//   read_line [--model FILE] IMAGE...
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "infer/predictor.h"

int main(int argc, char** argv) {
  std::string model = OCRT_SHIPPED_MODEL;
  std::vector<std::string> images;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--model" && i + 1 < argc) model = argv[++i];
    else images.push_back(argv[i]);
  }
  if (images.empty()) {
    std::fprintf(stderr, "usage: read_line [--model FILE] IMAGE...\n");
    return 2;
  }
  try {
    ocrt::infer::PredictorOptions options;  // the CPU, every processor
    // ocrt-infer's default decoding, with the language model installed beside the shipped model
    // (greedy decoding where there is none, or where it does not know the model's characters).
    const std::filesystem::path lm = std::filesystem::path(model).parent_path() / "lm-en.clm";
    if (std::filesystem::is_regular_file(lm)) ocrt::infer::use_auto_decoding(options, lm.string(), true);
    ocrt::infer::Predictor predictor(model, options);  // checks the model
    int failed = 0;
    for (const ocrt::infer::LineResult& line : predictor.recognize(images)) {
      if (!line.ok()) {
        std::fprintf(stderr, "read_line: %s\n", line.error.c_str());
        ++failed;
      }
      std::printf("%s\n", line.text.c_str());  // "" for a line that failed: one output line each
    }
    return failed ? 1 : 0;
  } catch (const std::exception& e) {  // the model file or the device
    std::fprintf(stderr, "read_line: %s\n", e.what());
    return 2;
  }
}
