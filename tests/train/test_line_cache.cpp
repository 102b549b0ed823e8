// The render-once cache of synthetic lines (train/line_cache.h, ocrt-train --render-cache): its
// lines are the synthetic lines of their seeds, the same files on any thread count; a stopped or
// damaged build resumes to the same files; a folder of other settings, a damaged shard and a
// charset that lacks the cached characters are refused with one-line errors naming what is
// wrong; every truncation of a shard is an error; and the loader gives each epoch a fresh
// augmentation of the same lines. Last, ocrt-train's trainer end to end with a cache.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/json.h"
#include "train/line_cache.h"
#include "train/loader.h"
#include "train/synth.h"
#include "train/trainer.h"
#include "temp_dir.h"

using namespace ocrt;
using namespace ocrt::train;
namespace fs = std::filesystem;
using ocrt::testing::TempDir;

namespace {

// Synthetic lines from the Debian fonts, or null (with a warning) where none is installed.
std::shared_ptr<SynthDataset> synth_lines(const nn::Charset& charset) {
  const auto dirs = default_font_dirs();
  if (dirs.empty()) {
    WARN("no Debian font installed (fonts-dejavu-core, fonts-liberation, ...): render cache checks skipped");
    return nullptr;
  }
  const std::vector<std::string> words = {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "Illinois",
                                          "millimetre", "a", "I", "42", "x-ray"};
  auto text = std::make_shared<const TextSource>(words, charset);
  SynthOptions o;
  o.min_chars = 2, o.max_chars = 20;
  return std::make_shared<SynthDataset>(load_fonts(dirs), text, charset, o);
}

LineCacheSpec small_spec() {
  LineCacheSpec s;
  s.lines = 37;  // 5 shards of 8, the last of 5
  s.shard_lines = 8;
  s.seed = 11;
  s.settings.set("what", "test lines");
  return s;
}

std::string file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The shards of a cache folder, by name.
std::map<std::string, std::string> shards(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".bin") out[e.path().filename().string()] = file_bytes(e.path());
  return out;
}

// The message of what f throws (empty when nothing is thrown).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("render cache: each line is the synthetic line of its seed, the same files on 1 and 3 threads",
          "[loader][render_cache]") {
  const nn::Charset charset = nn::Charset::ascii();
  auto synth = synth_lines(charset);
  if (!synth) return;
  TempDir a("cache-a"), b("cache-b");
  const LineCacheSpec spec = small_spec();
  build_line_cache(a.path.string(), *synth, spec, 1, false);
  build_line_cache(b.path.string(), *synth, spec, 3, false);
  const auto sa = shards(a.path), sb = shards(b.path);
  REQUIRE(sa.size() == 5);
  CHECK(sa == sb);
  CHECK(file_bytes(a.path / "cache.json") == file_bytes(b.path / "cache.json"));
  CachedLineDataset cached(a.path.string(), spec, charset);
  REQUIRE(cached.size() == spec.lines);
  for (int64_t i = 0; i < spec.lines; ++i) {
    INFO("line " << i);
    const LineSample want = synth->get(i, line_cache_seed(spec.seed, i));
    const LineSample got = cached.get(i, 12345);
    CHECK(got.text == want.text);
    CHECK(got.classes == want.classes);
    CHECK(got.image.width == want.image.width);
    CHECK(got.image.height == 32);
    CHECK(got.image.pixels == want.image.pixels);
  }
  // Distinct seeds, distinct lines: not one line repeated.
  std::set<std::string> texts;
  for (int64_t i = 0; i < spec.lines; ++i) texts.insert(cached.get(i, 0).text + std::to_string(cached.get(i, 0).image.width));
  CHECK(texts.size() > 30);
  CHECK_THROWS_WITH(cached.get(spec.lines, 0), Catch::Contains("outside [0, 37)"));
}

TEST_CASE("render cache: a build stopped or damaged resumes to the same files, and a finished one renders nothing",
          "[loader][render_cache]") {
  const nn::Charset charset = nn::Charset::ascii();
  auto synth = synth_lines(charset);
  if (!synth) return;
  TempDir a("cache-resume");
  const LineCacheSpec spec = small_spec();
  build_line_cache(a.path.string(), *synth, spec, 2, false);
  const auto whole = shards(a.path);
  // Shard 1 gone (a build stopped before it), shard 3 cut short and shard 4 with a flipped byte
  // (a crash while writing, a bad disk): only these are rendered again.
  fs::remove(a.path / "lines-00001.bin");
  fs::resize_file(a.path / "lines-00003.bin", fs::file_size(a.path / "lines-00003.bin") / 2);
  {
    std::fstream f(a.path / "lines-00004.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x5a');
  }
  const auto kept = fs::last_write_time(a.path / "lines-00000.bin");
  build_line_cache(a.path.string(), *synth, spec, 2, false);
  CHECK(shards(a.path) == whole);
  CHECK(fs::last_write_time(a.path / "lines-00000.bin") == kept);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(a.path)) CHECK(e.path().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("render cache: a shard checked whole once in a process is not checksummed again until its file changes",
          "[loader][render_cache]") {
  const nn::Charset charset = nn::Charset::ascii();
  auto synth = synth_lines(charset);
  if (!synth) return;
  TempDir a("cache-checked");
  const LineCacheSpec spec = small_spec();
  build_line_cache(a.path.string(), *synth, spec, 2, false);  // renders every shard
  uint64_t total = 0;
  for (const auto& [name, bytes] : shards(a.path)) total += bytes.size();
  // Shards this build wrote are read whole by the first open, and by no open after it.
  uint64_t before = line_cache_bytes_checksummed();
  CachedLineDataset first(a.path.string(), spec, charset);
  CHECK(line_cache_bytes_checksummed() - before == total);
  before = line_cache_bytes_checksummed();
  CachedLineDataset second(a.path.string(), spec, charset);
  CHECK(line_cache_bytes_checksummed() == before);
  CHECK(second.get(3, 0).text == first.get(3, 0).text);
  // A build of a finished cache checks every shard whole; the open after it reads none again.
  before = line_cache_bytes_checksummed();
  build_line_cache(a.path.string(), *synth, spec, 2, false);
  CHECK(line_cache_bytes_checksummed() - before == total);
  before = line_cache_bytes_checksummed();
  CachedLineDataset third(a.path.string(), spec, charset);
  CHECK(line_cache_bytes_checksummed() == before);
  // A shard written again (the same bytes, a later time) or replaced (renamed into place: another
  // file) is checked again, and only it.
  const fs::path two = a.path / "lines-00002.bin", three = a.path / "lines-00003.bin";
  const std::string bytes2 = file_bytes(two), bytes3 = file_bytes(three);
  {
    std::ofstream(two, std::ios::binary) << bytes2;
  }
  fs::last_write_time(two, fs::last_write_time(two) + std::chrono::seconds(2));
  {
    std::ofstream(a.path / "replacement", std::ios::binary) << bytes3;
  }
  fs::rename(a.path / "replacement", three);
  before = line_cache_bytes_checksummed();
  CachedLineDataset fourth(a.path.string(), spec, charset);
  CHECK(line_cache_bytes_checksummed() - before == bytes2.size() + bytes3.size());
  // A damaged file in place of a checked one is still found.
  std::string bad = bytes2;
  bad[bad.size() / 2] ^= 0x20;
  {
    std::ofstream(a.path / "replacement", std::ios::binary) << bad;
  }
  fs::rename(a.path / "replacement", two);
  CHECK_THROWS_WITH(CachedLineDataset(a.path.string(), spec, charset), Catch::Contains("checksum mismatch"));
}

TEST_CASE("render cache: builders at once in one folder (the replicas of a run) all get the same cache",
          "[loader][render_cache]") {
  const nn::Charset charset = nn::Charset::ascii();
  auto synth = synth_lines(charset);
  if (!synth) return;
  TempDir a("cache-together"), b("cache-alone");
  const LineCacheSpec spec = small_spec();
  std::vector<std::string> errors(3);
  std::vector<std::thread> builders;
  for (int k = 0; k < 3; ++k)
    builders.emplace_back([&, k] { errors[(size_t)k] = error_of([&] { build_line_cache(a.path.string(), *synth, spec, 2, false); }); });
  for (auto& t : builders) t.join();
  for (const std::string& e : errors) CHECK(e == "");
  build_line_cache(b.path.string(), *synth, spec, 1, false);
  CHECK(shards(a.path) == shards(b.path));
  // A folder holding a shard of ours being written (another process's build) is not foreign.
  TempDir c("cache-midway");
  fs::copy_file(b.path / "lines-00002.bin", c.path / "lines-00002.bin.tmp.99.0");
  build_line_cache(c.path.string(), *synth, spec, 2, false);
  CachedLineDataset opened(c.path.string(), spec, charset);
  CHECK(opened.size() == spec.lines);
}

TEST_CASE("render cache: a folder of other settings, or of other files, is refused naming what differs",
          "[loader][render_cache]") {
  const nn::Charset charset = nn::Charset::ascii();
  auto synth = synth_lines(charset);
  if (!synth) return;
  TempDir a("cache-other");
  LineCacheSpec spec = small_spec();
  spec.lines = 9;
  build_line_cache(a.path.string(), *synth, spec, 1, false);
  LineCacheSpec other = spec;
  other.settings.set("what", "other lines");
  other.lines = 10;
  const std::string e = error_of([&] { build_line_cache(a.path.string(), *synth, other, 1, false); });
  CHECK(e.find("holds lines of other settings") != std::string::npos);
  CHECK(e.find("lines: 9 vs 10") != std::string::npos);
  CHECK(e.find("what: \"test lines\" vs \"other lines\"") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
  CHECK_THROWS_WITH(CachedLineDataset(a.path.string(), other, charset), Catch::Contains("other settings"));
  // A folder with other files in it and no cache.json is not taken over.
  TempDir c("cache-foreign");
  std::ofstream(c.path / "notes.txt") << "mine\n";
  CHECK_THROWS_WITH(build_line_cache(c.path.string(), *synth, spec, 1, false),
                    Catch::Contains("not empty and holds no cache.json"));
  CHECK(fs::exists(c.path / "notes.txt"));
  CHECK_THROWS_WITH(CachedLineDataset(c.path.string(), spec, charset), Catch::Contains("no cache.json"));
}

TEST_CASE("render cache: a damaged shard, a missing one and a foreign charset fail at open, naming the file",
          "[loader][render_cache]") {
  const nn::Charset charset = nn::Charset::ascii();
  auto synth = synth_lines(charset);
  if (!synth) return;
  TempDir a("cache-damaged");
  const LineCacheSpec spec = small_spec();
  build_line_cache(a.path.string(), *synth, spec, 2, false);
  // Characters the charset lacks: the cache was made for another charset. A charset of digits
  // and a few letters cannot hold this cache's words.
  const std::string charset_path = (a.path / "digits.txt").string();
  {
    std::ofstream f(charset_path);
    for (const char* c : {"0", "1", "2", "x"}) f << c << "\n";
  }
  const std::string e = error_of([&] { CachedLineDataset(a.path.string(), spec, nn::Charset::from_file(charset_path)); });
  CHECK(e.find("lines-00000.bin: line") != std::string::npos);
  CHECK(e.find("outside the charset") != std::string::npos);
  fs::remove(charset_path);
  const fs::path shard = a.path / "lines-00002.bin";
  const std::string bytes = file_bytes(shard);
  {
    std::ofstream(shard, std::ios::binary) << bytes.substr(0, bytes.size() - 1);
  }
  const std::string cut = error_of([&] { CachedLineDataset(a.path.string(), spec, charset); });
  CHECK(cut.find(shard.string()) != std::string::npos);
  CHECK(cut.find("checksum mismatch") != std::string::npos);
  CHECK(cut.find('\n') == std::string::npos);
  fs::remove(shard);
  CHECK_THROWS_WITH(CachedLineDataset(a.path.string(), spec, charset), Catch::Contains("the render cache is incomplete"));
}

TEST_CASE("render cache: a shard reads back as written, and every cut or bad field is an error", "[render_cache]") {
  std::vector<LineSample> lines(3);
  for (size_t k = 0; k < lines.size(); ++k) {
    lines[k].image.height = 4;
    lines[k].image.width = 3 + (int64_t)k;
    for (int64_t p = 0; p < lines[k].image.width * 4; ++p) lines[k].image.pixels.push_back((uint8_t)(p * 37 + k));
    lines[k].text = k == 1 ? "\xc3\xa9t\xc3\xa9" : "ab" + std::to_string(k);
  }
  const std::string s = encode_line_shard(lines, 4);
  const auto* d = reinterpret_cast<const uint8_t*>(s.data());
  const auto back = decode_line_shard(d, s.size(), 4, "s.bin");
  REQUIRE(back.size() == 3);
  for (size_t k = 0; k < 3; ++k) {
    CHECK(back[k].text == lines[k].text);
    CHECK(back[k].width == lines[k].image.width);
    CHECK(std::vector<uint8_t>(back[k].pixels, back[k].pixels + back[k].width * 4) == lines[k].image.pixels);
  }
  for (size_t n = 0; n < s.size(); ++n) {
    INFO("cut to " << n << " bytes");
    CHECK_THROWS_WITH(decode_line_shard(d, n, 4, "s.bin"), Catch::StartsWith("s.bin: "));
  }
  CHECK_THROWS_WITH(decode_line_shard(d, s.size(), 5, "s.bin"), Catch::Contains("lines of height 4 where 5"));
  std::string bad = s;
  bad[0] = 'X';
  CHECK_THROWS_WITH(decode_line_shard(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), 4, "s.bin"),
                    Catch::Contains("no OCRTLNS1 magic"));
  // Lines the format cannot hold are refused when writing.
  std::vector<LineSample> empty_text = {lines[0]};
  empty_text[0].text.clear();
  CHECK_THROWS_WITH(encode_line_shard(empty_text, 4), Catch::Contains("text of 0 bytes"));
  CHECK_THROWS_WITH(encode_line_shard(lines, 5), Catch::Contains("height 4 in a cache of height 5"));
}

TEST_CASE("render cache: the loader reads the same lines every epoch, each with a fresh augmentation",
          "[loader][render_cache]") {
  const nn::Charset charset = nn::Charset::ascii();
  auto synth = synth_lines(charset);
  if (!synth) return;
  TempDir a("cache-epochs");
  LineCacheSpec spec = small_spec();
  spec.lines = 12;
  build_line_cache(a.path.string(), *synth, spec, 2, false);
  auto cached = std::make_shared<CachedLineDataset>(a.path.string(), spec, charset);
  LoaderOptions o;
  o.batch = 4, o.workers = 2, o.seed = 5, o.shuffle = false, o.augment = true;
  Loader loader(cached, o);
  std::vector<Batch> batches;
  for (int i = 0; i < 6; ++i) batches.push_back(loader.next());  // two epochs of 3 batches
  int differ = 0;
  for (int i = 0; i < 3; ++i) {
    CHECK(batches[(size_t)i].texts == batches[(size_t)i + 3].texts);  // the same lines, in file order
    CHECK(batches[(size_t)i].ids == batches[(size_t)i + 3].ids);
    const auto x = batches[(size_t)i].images.to_vector<float>(), y = batches[(size_t)i + 3].images.to_vector<float>();
    differ += x != y;
  }
  CHECK(differ >= 2);  // augmented afresh (an augmentation may leave a batch as it was by chance)
  // And the same steps again from another loader: the same batches.
  Loader again(cached, o);
  for (int i = 0; i < 6; ++i) {
    const Batch b = again.next();
    CHECK(b.texts == batches[(size_t)i].texts);
    CHECK(b.images.to_vector<float>() == batches[(size_t)i].images.to_vector<float>());
  }
}

TEST_CASE("render cache: ocrt-train builds it once, reads from it, and refuses it where it cannot apply",
          "[train][render_cache]") {
  if (default_font_dirs().empty()) {
    WARN("no Debian font installed: skipped");
    return;
  }
  TempDir out("cache-train"), cache("cache-train-lines");
  TrainConfig c;
  c.arch = "crnn-s";
  c.train = {"synth"};
  c.synth.size = 24;
  c.synth.max_chars = 12;
  c.render_cache = (cache.path / "lines").string();
  c.out = (out.path / "run").string();
  c.batch = 4, c.steps = 3, c.workers = 1, c.eval_every = 1000, c.save_every = 1000, c.log_every = 1000;
  TrainResult r = run_training(c);
  CHECK(r.steps == 3);
  REQUIRE(fs::exists(fs::path(c.render_cache) / "cache.json"));
  const auto first = fs::last_write_time(fs::path(c.render_cache) / "lines-00000.bin");
  const Json manifest = parse_json(file_bytes(fs::path(c.render_cache) / "cache.json"));
  CHECK(manifest.at("lines").as_int() == 24);
  CHECK(manifest.at("settings").at("arch").as_string() == "crnn-s");
  // A second run (another seed: the cache serves it too) reads the same shards.
  c.out = (out.path / "run2").string();
  c.seed = 7;
  run_training(c);
  CHECK(fs::last_write_time(fs::path(c.render_cache) / "lines-00000.bin") == first);
  // Other lines per epoch: the cache of 24 is not silently reused.
  c.out = (out.path / "run3").string();
  c.synth.size = 25;
  CHECK_THROWS_WITH(run_training(c), Catch::Contains("lines: 24 vs 25"));
  // Only for synthetic recogniser lines.
  TrainConfig files = c;
  files.train = {out.path.string()};
  CHECK_THROWS_WITH(files.validate(), Catch::Contains("--render-cache: only for a recogniser trained on synthetic"));
}
