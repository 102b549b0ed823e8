// The detector's training loop (train/det_trainer.h): matching found lines to true ones, exact
// resume, training from a folder of pages with validation, and a loss that falls on a page it
// sees again and again.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "models/dbnet.h"
#include "models/model_file.h"
#include "runtime/threading.h"
#include "temp_dir.h"
#include "train/checkpoint.h"
#include "train/det_trainer.h"
#include "train/synth.h"
#include "train/synth_page.h"

using namespace ocrt;
using namespace ocrt::train;
using ocrt::testing::TempDir;
namespace fs = std::filesystem;

namespace {

Quad box(double x0, double y0, double x1, double y1) { return Quad::from_rect({x0, y0, x1, y1}); }

// A small detector run on synthetic pages: tiny crops, a few steps.
TrainConfig det_config(const fs::path& out) {
  TrainConfig c;
  c.arch = "dbnet";
  c.train = {"synth"};
  c.crop = 96;
  c.batch = 2;
  c.steps = 4;
  c.warmup = 1;
  c.save_every = 2;
  c.eval_every = 1000;
  c.log_every = 1000;
  c.out = out.string();
  return c;
}

// Writes `n` synthetic pages as ocrt-synth --pages does (NNNNNN.png + NNNNNN.json); false when
// no font is installed.
bool write_pages(const fs::path& dir, int n) {
  auto dirs = default_font_dirs();
  if (dirs.empty()) return false;
  auto fonts = load_fonts(dirs);
  if (fonts.empty()) return false;
  fonts.resize(1);
  TextSource text(TextSource::read_words("/usr/share/dict/words"), nn::Charset::ascii());
  PageSynthOptions o;
  o.min_dpi = o.max_dpi = 100;
  o.layout_weights = {1, 0, 0, 0, 0, 0};
  for (int i = 0; i < n; ++i) {
    SynthPage p = render_page(text, fonts, (uint64_t)i + 11, o);
    char name[16];
    std::snprintf(name, sizeof name, "%06d", i);
    save_gray_png((dir / (std::string(name) + ".png")).string(), p.image);
    std::ofstream(dir / (std::string(name) + ".json")) << page_truth_json(p);
  }
  return true;
}

}  // namespace

TEST_CASE("score_detection matches found lines one to one at IoU 0.5", "[det_trainer]") {
  const std::vector<Quad> truth = {box(0, 0, 100, 10), box(0, 20, 100, 30)};
  DetectionScore s = score_detection({box(2, 1, 98, 11), box(0, 20, 100, 30), box(200, 0, 300, 10)}, truth);
  CHECK(s.found == 3);
  CHECK(s.truth == 2);
  CHECK(s.matched == 2);
  CHECK(s.precision() == Approx(2.0 / 3));
  CHECK(s.recall() == 1);
  CHECK(s.f_measure() == Approx(0.8));
  // Two found boxes over one true line: only one counts. A box over two lines (a merge)
  // matches neither (its IoU with each is below 0.5).
  CHECK(score_detection({box(0, 0, 100, 10), box(1, 0, 100, 10)}, {truth[0]}).matched == 1);
  CHECK(score_detection({box(0, 0, 100, 30)}, truth).matched == 0);
  // Nothing to find and nothing found is perfect; nothing found of something is zero.
  CHECK(score_detection({}, {}).f_measure() == 1);
  CHECK(score_detection({}, truth).f_measure() == 0);
}

TEST_CASE("dbnet: stopping at a checkpoint and resuming is bit-identical to one run", "[det_trainer]") {
  if (default_font_dirs().empty()) {
    WARN("no Debian font installed: skipped");
    return;
  }
  TempDir a("det-resume-a"), b("det-resume-b");
  set_num_threads(2);
  TrainConfig c = det_config(a.path);
  run_training(c);
  TrainConfig c1 = det_config(b.path);
  c1.stop_at = 2;
  run_training(c1);
  TrainConfig c2 = det_config(b.path);
  c2.resume = true;
  const TrainResult r = run_training(c2);
  CHECK(r.steps == 4);
  Checkpoint ca = load_checkpoint(checkpoint_path(a.path.string(), 4));
  Checkpoint cb = load_checkpoint(checkpoint_path(b.path.string(), 4));
  REQUIRE(ca.model.size() == cb.model.size());
  for (auto& [name, t] : ca.model) {
    INFO(name);
    CHECK(t.to_vector<double>() == cb.model.at(name).to_vector<double>());
  }
  REQUIRE(ca.optim.size() == cb.optim.size());
  for (auto& [name, t] : ca.optim) CHECK(t.to_vector<double>() == cb.optim.at(name).to_vector<double>());
  CHECK(ca.info.arch == "dbnet");
  // A changed crop would change every sample after the checkpoint: refused.
  TrainConfig c3 = det_config(b.path);
  c3.resume = true;
  c3.steps = 6;
  c3.crop = 128;
  CHECK_THROWS_WITH(run_training(c3), Catch::Contains("--crop: 96 -> 128"));
}

TEST_CASE("dbnet: training from a folder of pages, validation, and the best model file", "[det_trainer]") {
  TempDir pages("det-pages"), out("det-folder-out");
  if (!write_pages(pages.path, 2)) {
    WARN("no Debian font installed: skipped");
    return;
  }
  set_num_threads(2);
  TrainConfig c = det_config(out.path);
  c.train = {pages.path.string()};
  c.val = {pages.path.string()};
  c.val_pages = 2;
  c.crop = 128;
  c.steps = 30;
  c.lr = 3e-3;
  c.save_every = 30;
  c.eval_every = 30;
  c.log_every = 1;
  const TrainResult r = run_training(c);
  CHECK(r.steps == 30);
  REQUIRE(!r.best_model.empty());
  nn::ModelFile f = nn::load_model_file(r.best_model);
  REQUIRE(f.info.has_value());
  CHECK(f.info->arch == "dbnet");
  CHECK(f.info->training.at("steps").as_int() == 30);
  // The loss falls on pages seen again and again (metrics.jsonl: first against last).
  std::ifstream metrics(out.path / "metrics.jsonl");
  std::string line;
  double first = -1, last = -1;
  while (std::getline(metrics, line)) {
    const Json j = parse_json(line);
    if (j.at("event").as_string() != "train") continue;
    if (first < 0) first = j.at("loss").as_number();
    last = j.at("loss").as_number();
  }
  INFO("loss " << first << " -> " << last);
  CHECK(last < 0.8 * first);
  // Folders without truth beside their images are refused by name.
  TempDir empty("det-empty");
  c.train = {empty.path.string()};
  c.out = (out.path / "again").string();
  CHECK_THROWS_WITH(run_training(c), Catch::Contains("no page image with a NAME.json truth"));
}
