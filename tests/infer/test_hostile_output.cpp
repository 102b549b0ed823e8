// ocrt-infer's outputs against hostile values and paths (issue 23, items 5 and 6): no writer
// fails on a number JSON cannot hold (a NaN or infinite confidence or position is written as
// null; the predictor turns such a line into its own error), and every output path is checked
// before the first line is read (check_output_path, called by ocrt-infer at start-up).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <unistd.h>

#include "infer/report.h"
#include "runtime/json.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::infer;

TEST_CASE("no output format fails on a NaN or infinite number", "[infer]") {
  LineResult r;
  r.name = "a.png";
  r.text = "ab";
  r.confidence = std::nan("");
  r.chars = {{"a", 1, std::numeric_limits<double>::infinity(), std::nan("")}, {"b", 3, 5.0, 0.5}};
  for (bool positions : {false, true}) {
    FormatOptions o{Format::jsonl, positions};
    std::string line;
    REQUIRE_NOTHROW(line = format_line(r, o));
    const Json j = parse_json(line);  // valid JSON
    CHECK(j.at("confidence").is_null());
    if (positions) {
      CHECK(j.at("chars")[0].at("x").is_null());
      CHECK(j.at("chars")[0].at("p").is_null());
      CHECK(j.at("chars")[1].at("x").as_number() == 5.0);
    }
    CHECK_NOTHROW(format_line(r, {Format::tsv, positions}));
    CHECK_NOTHROW(format_line(r, {Format::text, positions}));
  }
}

TEST_CASE("output paths are checked before any line is read", "[infer]") {
  ocrt::testing::TempDir dir("hostile-output");
  namespace fs = std::filesystem;
  CHECK_NOTHROW(check_output_path("--logits-out", (dir.path / "logits.safetensors").string()));
  CHECK_FALSE(fs::exists(dir.path / "logits.safetensors"));  // nothing is left behind
  CHECK(fs::is_empty(dir.path));
  CHECK_THROWS_WITH(check_output_path("--logits-out", (dir.path / "missing" / "l.safetensors").string()),
                    Catch::Contains("--logits-out") && Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(check_output_path("--logits-out", dir.path.string()), Catch::Contains("is a folder"));
  CHECK_THROWS_WITH(check_output_path("--logits-out", ""), Catch::Contains("--logits-out: the path is empty"));
  // A folder that cannot be written (unless the tests run as root, who may write anywhere).
  const fs::path locked = dir.path / "locked";
  fs::create_directories(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
  if (::geteuid() != 0)
    CHECK_THROWS_WITH(check_output_path("--logits-out", (locked / "l.safetensors").string()),
                      Catch::Contains("cannot create a file in"));
  fs::permissions(locked, fs::perms::owner_all);
}
