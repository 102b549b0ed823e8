// Helpers shared by the fuzz targets (fuzz/<target>.cpp).
//
// Every target defines LLVMFuzzerTestOneInput, the entry point libFuzzer calls with one input.
// A target may refuse an input by throwing ocrt::Error, which it catches: that is the parser
// doing its job. Anything else is a bug that libFuzzer (or the corpus replay, replay.cpp)
// reports: a sanitizer error, a crash, another exception escaping, a hang, a huge allocation,
// or a broken promise that a target checks itself with FUZZ_EXPECT (a round trip that changes
// the value, say).
//
// The replay build compiles each target with -DLLVMFuzzerTestOneInput=ocrt_fuzz_<target>, so
// that one program can hold every target (fuzz/CMakeLists.txt).
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/error.h"

namespace ocrt::fuzz {

// Stops the run, as a crash that the fuzzer records with its input, when a promise is broken.
[[noreturn]] inline void broken(const char* what, const char* file, int line) {
  std::fprintf(stderr, "\nfuzz: broken promise at %s:%d: %s\n", file, line, what);
  std::fflush(stderr);
  std::abort();
}

// A folder of this process's own under the temp dir ($TMPDIR, scripts/fuzz.sh points it at
// /dev/shm), for targets whose parser reads only paths. Emptied, not removed, between inputs.
inline const std::filesystem::path& scratch_dir() {
  // Removed when the process ends normally, by the static's destructor (a crash leaves it for a
  // look). An atexit handler registered while the static is being built would run after the
  // static is gone, and remove nothing.
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("ocrt-fuzz-" + std::to_string(::getpid()));
    Dir() {
      std::filesystem::remove_all(path);
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

// Writes bytes to scratch_dir()/name and returns the path.
inline std::string write_scratch(const std::string& name, const void* data, size_t size) {
  const std::filesystem::path p = scratch_dir() / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), (std::streamsize)size);
  out.close();
  if (!out) broken("cannot write a scratch file", __FILE__, __LINE__);
  return p.string();
}

}  // namespace ocrt::fuzz

#define FUZZ_EXPECT(cond)                                              \
  do {                                                                 \
    if (!(cond)) ::ocrt::fuzz::broken(#cond, __FILE__, __LINE__);      \
  } while (0)
