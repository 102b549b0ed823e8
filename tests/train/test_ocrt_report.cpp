// ocrt-report as a command (train/ocrt_report.cpp): its flags through the shared parser, the
// errors for bad ones, and its --help against docs/cli.md. (The page itself: test_report.cpp.)
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "run_command.h"

using namespace ocrt::testing;

TEST_CASE("ocrt-report refuses bad flags and arguments with exit status 2", "[report][cli]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "give the run folder"},
      {"a b", "one run folder at a time (got 'a' and 'b')"},
      {"a --out", "--out: expects a value (FILE)"},
      {"a --frobnicate", "unknown option '--frobnicate' (see ocrt-report --help)"},
      {"/nonexistent-run --out=/nonexistent-run/r.html", ""},
  };
  check_refusals("ocrt-report", program("ocrt-report") + " ", 2, cases);
}

TEST_CASE("ocrt-report --help lists its flags, and docs/cli.md describes each", "[report][cli]") {
  const std::vector<std::string> flags = help_flags("ocrt-report");
  CHECK(flags == std::vector<std::string>{"--out", "--help"});
  const std::string doc = cli_doc();
  CHECK(doc.find("ocrt-report RUN_DIR [--out FILE]") != std::string::npos);
}
