// Replays the fuzz corpora without libFuzzer: every file of a target's corpus (and any file
// or folder named after it) goes through that target's LLVMFuzzerTestOneInput once. Built in
// every configuration, so the ordinary and the sanitizer test suites catch a regression on an
// input the fuzzer once found (ctest -L fuzz; fuzz/CMakeLists.txt).
//
//   ocrt_fuzz_replay TARGET PATH...     exit 0 when every input was handled
//   ocrt_fuzz_replay --list             the targets this program holds
//
// A refusal (ocrt::Error, caught inside the target) is a pass; an exception that escapes is a
// failure naming the file; a crash, a sanitizer report or a broken FUZZ_EXPECT ends the
// program, after the name of the file being read has been printed.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using Target = int (*)(const uint8_t*, size_t);

#define OCRT_FUZZ_TARGET(name) extern "C" int ocrt_fuzz_##name(const uint8_t*, size_t);
#include "fuzz_targets.inc"
#undef OCRT_FUZZ_TARGET

namespace {

struct Entry {
  const char* name;
  Target fn;
};
const Entry kTargets[] = {
#define OCRT_FUZZ_TARGET(name) {#name, &ocrt_fuzz_##name},
#include "fuzz_targets.inc"
#undef OCRT_FUZZ_TARGET
};

std::vector<fs::path> files_under(const fs::path& p) {
  std::vector<fs::path> out;
  if (fs::is_directory(p)) {
    for (const auto& e : fs::recursive_directory_iterator(p))
      if (e.is_regular_file()) out.push_back(e.path());
    std::sort(out.begin(), out.end());
  } else {
    out.push_back(p);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const Entry& e : kTargets) std::printf("%s\n", e.name);
    return 0;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TARGET PATH...   (or --list)\n", argv[0]);
    return 2;
  }
  const Entry* target = nullptr;
  for (const Entry& e : kTargets)
    if (std::strcmp(e.name, argv[1]) == 0) target = &e;
  if (!target) {
    std::fprintf(stderr, "no fuzz target '%s' (--list names them)\n", argv[1]);
    return 2;
  }
  int64_t inputs = 0, failures = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int a = 2; a < argc; ++a) {
    if (!fs::exists(argv[a])) {
      std::fprintf(stderr, "%s: no such file or folder\n", argv[a]);
      return 2;
    }
    for (const fs::path& p : files_under(argv[a])) {
      std::ifstream in(p, std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::fprintf(stderr, "%s %s (%zu bytes)\n", target->name, p.string().c_str(), bytes.size());
      // libFuzzer never passes a null pointer for an empty input's data either.
      const uint8_t none = 0;
      try {
        target->fn(bytes.empty() ? &none : bytes.data(), bytes.size());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "FAIL %s: an exception escaped: %s\n", p.string().c_str(), e.what());
        ++failures;
      } catch (...) {
        std::fprintf(stderr, "FAIL %s: an exception of unknown type escaped\n", p.string().c_str());
        ++failures;
      }
      ++inputs;
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %lld inputs replayed in %.2f s, %lld failures\n", target->name, (long long)inputs, s,
              (long long)failures);
  if (inputs == 0) {
    std::fprintf(stderr, "no inputs found: an empty corpus tests nothing\n");
    return 1;
  }
  return failures ? 1 : 0;
}
