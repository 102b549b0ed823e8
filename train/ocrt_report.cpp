// ocrt-report: writes the training report of a run folder (train/report.h) as one
// self-contained HTML page. ocrt-train writes the same page into its --out folder as it goes;
// this is for any run folder, copied from elsewhere, older, or still running (docs/cli.md).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/cli.h"
#include "runtime/error.h"
#include "train/report.h"

using namespace ocrt;

namespace {

cli::Parser report_flags(std::string& out) {
  cli::Parser p("ocrt-report", R"(usage: ocrt-report RUN_DIR [--out FILE]

Writes one self-contained HTML page (no scripts, nothing fetched) about the ocrt-train run in
RUN_DIR: charts of the training loss, validation CER, learning rate and lines per second by
step and by wall time, the worst validation lines of the latest evaluation (RUN_DIR/worst/) with
their images, truth and reading, and the run's settings and summary.
)");
  p.add(cli::text("--out", "FILE", out, "where to write the page (default: RUN_DIR/report.html), atomically"));
  p.note("  --help                 this text\n\n"
         "Exit status: 0 when the page was written, 2 when it could not be (no such folder, a bad flag,\n"
         "an unwritable FILE). Missing or damaged files in RUN_DIR are noted on the page, not errors.");
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, out;
  try {
    const std::vector<std::string> dirs = report_flags(out).parse(argc, argv);
    OCRT_CHECK(dirs.size() <= 1, "one run folder at a time (got '", dirs[0], "' and '", dirs[1], "')");
    if (!dirs.empty()) dir = dirs[0];
    OCRT_CHECK(!dir.empty(), "give the run folder (the --out of ocrt-train); see ocrt-report --help");
    if (out.empty()) out = (std::filesystem::path(dir) / "report.html").string();
    const train::RunRecord run = train::write_report(dir, out);
    std::fprintf(stderr, "ocrt-report: wrote %s (%zu training points, %zu evaluations, %zu worst lines%s)\n",
                 out.c_str(), run.train.size(), run.evals.size(), run.worst.size(),
                 run.notes.empty() ? "" : "; see the notes at its end");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ocrt-report: %s\n", e.what());
    return 2;
  }
}
