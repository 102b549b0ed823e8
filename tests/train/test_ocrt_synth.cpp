// ocrt-synth as a command (train/ocrt_synth.cpp): its numbers are read strictly and
// range-checked before any font is loaded, the error naming the flag; its --help lists the
// flags docs/cli.md describes. (What it renders: test_synth.cpp.)
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "run_command.h"
#include "temp_dir.h"

using namespace ocrt::testing;
namespace fs = std::filesystem;

TEST_CASE("ocrt-synth refuses bad numbers by their flag before any work", "[cli]") {
  TempDir dir("synth-cli");
  const fs::path out = dir.path / "lines";
  const std::string bin = program("ocrt-synth") + " --out " + out.string() + " ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--count 0", "--count: must be in [1, 100000000], got 0"},
      {"--count 1e3", "--count: expected an integer, got '1e3'"},
      {"--seed -1", "--seed: expected an integer in [0, 2^64 - 1], got '-1'"},
      {"--min-chars 0", "--min-chars: must be in [1, 1000], got 0"},
      {"--max-chars 1001", "--max-chars: must be in [1, 1000], got 1001"},
      {"--height nan", "--height: expected a finite number, got 'nan'"},
      {"--height 3", "--height: must be in [4, 512], got 3"},
      {"--height 22:1e999", "--height: expected a finite number"},
      {"--height 22:600", "--height: must be in [4, 512], got 600"},
      {"--fonts ,", "--fonts: expected one or more items separated by commas"},
      {"--count", "--count: expects a value (N)"},
      {"--frobnicate", "unknown option '--frobnicate' (see ocrt-synth --help)"},
      {"stray", "unexpected argument 'stray'"},
  };
  check_refusals("ocrt-synth", bin, 1, cases);
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("ocrt-synth --help lists its flags, and docs/cli.md describes each", "[cli]") {
  CHECK(help_flags("ocrt-synth").size() >= 14);
  CHECK(undocumented_flags("ocrt-synth").empty());
}
