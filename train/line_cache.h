// A render-once cache of synthetic training lines (ocrt-train --render-cache DIR).
//
// Why: rendering a line (shaping, the scan simulation, the resize) costs far more than
// augmenting a ready one, and a fast GPU can train faster than the CPU renders (docs/data.md,
// "Render once"). With the cache, the lines of the synthetic set are rendered once, written to
// shards on disk, and every epoch reads them again with fresh augmentation (the loader's, drawn
// from the step as always), so the render workers only read, augment and batch.
//
//   const auto source = std::make_shared<SynthDataset>(...);
//   build_line_cache(dir, *source, spec, threads, verbose);      // renders what is missing
//   auto data = std::make_shared<CachedLineDataset>(dir, spec, charset);
//
// What a cache holds is fixed by its spec: line i is source.get(i, line_cache_seed(spec.seed,
// i)), so the same settings give the same files on any machine and any thread count, and a
// build that was stopped (Ctrl-C, a crash) resumes where it was: finished shards are kept, the
// rest are rendered. The spec's fingerprint (the settings the lines depend on) is written in
// DIR/cache.json; a folder that holds a cache of other settings is refused, naming the
// settings that differ, rather than silently training on other lines.
//
// Files (docs/formats.md, "Render cache"): DIR/cache.json, then DIR/lines-NNNNN.bin, shard k
// holding lines [k * shard_lines, min((k + 1) * shard_lines, lines)). Every shard is checked
// when the cache is opened (checksum, sizes, every text against the charset): a damaged or
// foreign file is a one-line error naming it, never a strange batch later.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/charset.h"
#include "runtime/json.h"
#include "train/loader.h"

namespace ocrt::train {

struct LineCacheSpec {
  int64_t lines = 0;           // lines in the cache (the synthetic epoch)
  int64_t shard_lines = 4096;  // lines per shard file
  int64_t height = 32;         // every line's height (the model's)
  uint64_t seed = 0;           // line i is rendered from line_cache_seed(seed, i)
  // The settings the lines depend on (fonts, text, scan simulation, sizes, charset, arch), as
  // the caller describes them; stored in cache.json and compared key by key on reuse.
  Json settings = Json::object();
};

// The seed line i of a cache is rendered from: a keyed hash, the same on every machine.
uint64_t line_cache_seed(uint64_t seed, int64_t index);

// Renders into `dir` every shard of the spec that is not there yet, on `threads` threads
// (shards are written whole, under a temporary name then renamed, so a stopped build leaves
// only complete shards). Throws when `dir` holds a cache of another spec, on a render or write
// error, and when a signal arrives (runtime/interrupt.h). verbose: progress on stderr.
void build_line_cache(const std::string& dir, const Dataset& source, const LineCacheSpec& spec, int threads,
                      bool verbose);

// The cache in `dir` (complete, of this spec) as a dataset: get(i, seed) is line i as it was
// rendered (the seed is not used: the loader's augmentation, drawn from the step, makes each
// epoch's copy of it new). Opening reads and checks every shard (the checksum only of those
// this process has not checked unchanged before: build_line_cache checks every shard it keeps).
class CachedLineDataset : public Dataset {
 public:
  CachedLineDataset(const std::string& dir, const LineCacheSpec& spec, const nn::Charset& charset);
  ~CachedLineDataset() override;
  int64_t size() const override { return (int64_t)lines_.size(); }
  LineSample get(int64_t index, uint64_t seed) const override;
  int64_t bytes() const { return bytes_; }  // the shards' total size

 private:
  // A line in a mapped shard: 24 bytes a line in memory (its text is encoded into classes
  // when it is read; a million lines kept as strings and class vectors took about 300 MB).
  struct Line {
    const uint8_t* pixels;  // width x height
    const char* text;       // UTF-8, text_bytes long
    int32_t width, text_bytes;
  };
  struct Mapping;
  std::vector<std::unique_ptr<Mapping>> maps_;
  std::vector<Line> lines_;
  nn::Charset charset_;
  int64_t height_ = 0, bytes_ = 0;
};

// One shard's bytes and their reading (exposed for tests and the fuzz target). decode checks
// everything (magic, version, counts, sizes, the checksum, UTF-8 text) and throws a one-line
// error that starts with `what`.
struct ShardLine {
  int64_t width = 0;
  std::string text;
  const uint8_t* pixels = nullptr;  // into the decoded buffer: width x height
};
std::string encode_line_shard(const std::vector<LineSample>& lines, int64_t height);
// verify_checksum false skips the checksum (a file this process has just checked whole).
std::vector<ShardLine> decode_line_shard(const uint8_t* data, size_t size, int64_t height, const std::string& what,
                                         bool verify_checksum = true);

// Bytes of shards this process has checksummed so far (tests and benchmarks: a cache opened
// after build_line_cache checked it, or opened again, is not read whole again).
uint64_t line_cache_bytes_checksummed();

// The limits a shard's lines must keep (a line wider than this is not a text line).
constexpr int64_t kMaxCachedLineWidth = 1 << 16;
constexpr int64_t kMaxCachedTextBytes = 4096;

}  // namespace ocrt::train
