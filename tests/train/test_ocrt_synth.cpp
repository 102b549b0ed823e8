// ocrt-synth as a command (train/ocrt_synth.cpp): its numbers are read strictly and
// range-checked before any font is loaded, the error naming the flag; its --help lists the
// flags docs/cli.md describes. (What it renders: test_synth.cpp.)
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.h"
#include "runtime/image.h"
#include "runtime/json.h"
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
      {"--spacing 2:1", "--spacing: LO must be <= HI, got 2:1"},
      {"--spacing 5", "--spacing: must be in [0, 4], got 5"},
      {"--tracking 0:0.6", "--tracking: must be in"},
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

TEST_CASE("ocrt-synth --pages writes pages with their truth, and checks its page flags", "[cli]") {
  TempDir dir("synth-pages");
  const fs::path out = dir.path / "pages";
  std::string output;
  const std::string cmd = program("ocrt-synth") + " --pages --count 2 --dpi 60 --layouts table,form --seed 5 --out " +
                          out.string();
  REQUIRE(run_command(cmd, &output) == 0);
  CHECK(output.find("wrote 2 pages") != std::string::npos);
  for (const char* name : {"000000", "000001"}) {
    INFO(name);
    CHECK(fs::file_size(out / (std::string(name) + ".png")) > 1000);
    std::ifstream in(out / (std::string(name) + ".json"));
    std::stringstream text;
    text << in.rdbuf();
    const ocrt::Json j = ocrt::parse_json(text.str());
    const std::string layout = j.at("layout").as_string();
    CHECK((layout == "table" || layout == "form"));
    CHECK(j.at("dpi").as_number() == Approx(60));
    REQUIRE(j.at("lines").size() > 3);
    CHECK(j.at("lines")[0].at("points").size() == 4);
  }
  // The same seed, the same pages.
  const fs::path again = dir.path / "again";
  REQUIRE(run_command(program("ocrt-synth") + " --pages --count 2 --dpi 60 --layouts table,form --seed 5 --out " +
                      again.string()) == 0);
  std::ifstream a(out / "000001.json"), b(again / "000001.json");
  std::stringstream sa, sb;
  sa << a.rdbuf(), sb << b.rdbuf();
  CHECK(sa.str() == sb.str());

  const std::string bin = program("ocrt-synth") + " --out " + (dir.path / "bad").string() + " ";
  check_refusals("ocrt-synth", bin, 1,
                 {{"--pages --layouts poster", "--layouts: unknown page layout 'poster'"},
                  {"--pages --dpi 40", "--dpi: must be in [50, 600], got 40"},
                  {"--pages --dpi 300:200", "--dpi: LO (300) must not exceed HI (200)"},
                  {"--pages --degrade jpeg", "--degrade: pages take none or scan"},
                  {"--pages --numbered 1.5", "--numbered: must be in [0, 1], got 1.5"},
                  {"--dpi 100", "--dpi, --layouts and --numbered: only with --pages"},
                  {"--numbered 0.5", "--dpi, --layouts and --numbered: only with --pages"}});
  CHECK_FALSE(fs::exists(dir.path / "bad"));
}

TEST_CASE("ocrt-synth --height 4 writes lines ocrt-infer reads (at least 8 pixels high)", "[cli]") {
  TempDir dir("synth-tiny");
  const fs::path out = dir.path / "lines";
  std::string output;
  const int rc = run_command(program("ocrt-synth") + " --out " + out.string() + " --count 12 --height 4 --seed 3", &output);
  INFO(output);
  if (rc != 0 && output.find("font") != std::string::npos) {
    WARN("no Debian font installed: skipped");
    return;
  }
  REQUIRE(rc == 0);
  // Every line is read (none refused as too small): ocrt-infer's exit status is 0 only then.
  CHECK(run_command(program("ocrt-infer") + " --threads 1 " + out.string(), &output) == 0);
  CHECK_THAT(output, Catch::Contains("12 lines (0 failed)"));
}

TEST_CASE("ocrt-synth --spacing and --tracking set the type's spacing and leave the lines' other draws alone", "[cli]") {
  TempDir dir("synth-spacing");
  std::string output;
  auto synth = [&](const std::string& name, const std::string& flags) {
    const fs::path out = dir.path / name;
    const int rc = run_command(program("ocrt-synth") + " --out " + out.string() + " --count 10 --seed 9 " + flags, &output);
    INFO(output);
    return rc == 0 ? out : fs::path();
  };
  const fs::path plain = synth("plain", ""), tight = synth("tight", "--spacing 0.3"), wide = synth("wide", "--tracking 0.1");
  if (plain.empty() && output.find("font") != std::string::npos) {
    WARN("no Debian font installed: skipped");
    return;
  }
  REQUIRE_FALSE(plain.empty());
  REQUIRE_FALSE(tight.empty());
  REQUIRE_FALSE(wide.empty());
  auto read = [](const fs::path& p) {
    std::stringstream s;
    s << std::ifstream(p).rdbuf();
    return s.str();
  };
  // A fixed value draws nothing: the same texts (and fonts and heights) as without the flag.
  REQUIRE(read(tight / "labels.txt") == read(plain / "labels.txt"));
  REQUIRE(read(wide / "labels.txt") == read(plain / "labels.txt"));
  std::istringstream labels(read(plain / "labels.txt"));
  std::string line;
  int64_t spaced = 0, narrower = 0, lines = 0, wider = 0;
  while (std::getline(labels, line)) {
    const std::string name = line.substr(0, line.find('\t')), text = line.substr(line.find('\t') + 1);
    const int64_t w = ocrt::load_gray_image((plain / name).string()).width;
    ++lines;
    wider += ocrt::load_gray_image((wide / name).string()).width > w;
    if (text.find(' ') == std::string::npos) continue;
    ++spaced;
    narrower += ocrt::load_gray_image((tight / name).string()).width < w;
  }
  REQUIRE(spaced > 0);
  CHECK(narrower == spaced);
  CHECK(wider == lines);
}
