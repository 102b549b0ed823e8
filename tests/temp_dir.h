// Temporary folders for tests, none of which outlives its process:
//   TempDir          a fresh folder for one test, removed when the test ends;
//   process_temp_dir a folder for the helpers that hand out paths to several tests of one
//                    process (ctest runs each test case as its own process), removed at exit.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

namespace ocrt::testing {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name) {
    path = std::filesystem::temp_directory_path() / ("ocrt-test-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// /tmp/ocrt-test-<pid>/<name>, made on first use; the whole /tmp/ocrt-test-<pid> goes when the
// process exits normally.
inline std::filesystem::path process_temp_dir(const std::string& name) {
  struct Root {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("ocrt-test-" + std::to_string(::getpid()));
    ~Root() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static Root root;
  const std::filesystem::path dir = root.path / name;
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace ocrt::testing
