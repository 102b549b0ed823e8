// Running the built programs from tests: a command's exit status and everything it printed,
// the checks that a program refuses bad command lines, and the flags its --help lists (to check
// them against docs/cli.md).
#pragma once
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace ocrt::testing {

// Runs `cmd` through the shell; returns its exit status (-1 if it did not exit) and puts its
// stdout and stderr, interleaved, in *output.
inline int run_command(const std::string& cmd, std::string* output = nullptr) {
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::string out;
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A built program's path: OCRT_BINARY_DIR/name.
inline std::string program(const std::string& name) { return std::string(OCRT_BINARY_DIR) + "/" + name; }

// The flags `name --help` lists: every "--flag" that starts a line after two spaces.
inline std::vector<std::string> help_flags(const std::string& name) {
  std::string help;
  run_command(program(name) + " --help", &help);
  std::vector<std::string> flags;
  const std::regex row(R"(^  (--[a-z0-9-]+))");
  std::istringstream lines(help);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line))
    if (std::regex_search(line, m, row)) flags.push_back(m[1]);
  return flags;
}

// docs/cli.md, whole.
inline std::string cli_doc() {
  std::ifstream f(std::string(OCRT_SOURCE_DIR) + "/docs/cli.md");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The flags `name --help` lists that docs/cli.md does not describe (as "`--flag").
inline std::vector<std::string> undocumented_flags(const std::string& name) {
  const std::string doc = cli_doc();
  std::vector<std::string> missing;
  for (const std::string& flag : help_flags(name))
    if (doc.find("`" + flag) == std::string::npos) missing.push_back(flag);
  return missing;
}

// For each (arguments, error) case: `command arguments` exits with `status` and says
// "<name>: <error>..." first.
inline void check_refusals(const std::string& name, const std::string& command, int status,
                           const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [args, error] : cases) {
    INFO(command << args);
    std::string said;
    CHECK(run_command(command + args, &said) == status);
    CHECK_THAT(said, Catch::StartsWith(name + ": " + error));
  }
}

}  // namespace ocrt::testing
