// ocrt-lm as a command (infer/ocrt_lm.cpp): its numbers are read strictly and range-checked,
// the error naming the flag; its --help lists the flags docs/cli.md describes. (The model
// itself: tests/models/test_ctc_beam_lm.cpp.)
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run_command.h"
#include "temp_dir.h"

using namespace ocrt::testing;
namespace fs = std::filesystem;

TEST_CASE("ocrt-lm refuses bad numbers by their flag, and takes --flag=value", "[cli]") {
  TempDir dir("lm-cli");
  const fs::path corpus = dir.path / "corpus.txt", out = dir.path / "lm.clm";
  std::ofstream(corpus) << "the quick brown fox jumps over the lazy dog\n%\nthe end\n";
  const std::string bin = program("ocrt-lm") + " --out " + out.string() + " ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--order 7", "--order: must be in [1, 6], got 7"},
      {"--order 0", "--order: must be in [1, 6], got 0"},
      {"--order 4294967301", "--order: must be in [1, 6], got 4294967301"},
      {"--order 2.5", "--order: expected an integer, got '2.5'"},
      {"--min-count 0", "--min-count: must be in [1, 1000000000000], got 0"},
      {"--min-count nan", "--min-count: expected an integer, got 'nan'"},
      {"--skip-line", "--skip-line: expects a value (TEXT)"},
      {"--frobnicate", "unknown option '--frobnicate' (see ocrt-lm --help)"},
  };
  check_refusals("ocrt-lm", bin + corpus.string() + " ", 2, cases);
  CHECK_FALSE(fs::exists(out));
  std::string said;
  CHECK(run_command(bin + "--order=3 --min-count=1 --skip-line=% " + corpus.string(), &said) == 0);
  CHECK_THAT(said, Catch::Contains("order 3, min count 1"));
  CHECK(fs::exists(out));
}

TEST_CASE("ocrt-lm --help lists its flags, and docs/cli.md describes each", "[cli]") {
  CHECK(help_flags("ocrt-lm").size() >= 5);
  CHECK(undocumented_flags("ocrt-lm").empty());
}
