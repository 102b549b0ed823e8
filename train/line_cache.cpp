// The render-once cache of synthetic lines (see line_cache.h).
#include "train/line_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/error.h"
#include "runtime/files.h"
#include "runtime/interrupt.h"
#include "runtime/rng.h"
#include "runtime/text.h"
#include "runtime/threading.h"

namespace ocrt::train {

namespace fs = std::filesystem;

namespace {

// Shard layout, little-endian (docs/formats.md, "Render cache"):
//   "OCRTLNS1"  u32 version (1)  u32 height  u64 count
//   count x { u32 width  u32 text bytes  text (UTF-8)  width x height pixels (u8, row-major) }
//   u64 FNV-1a of every byte before it
constexpr char kMagic[8] = {'O', 'C', 'R', 'T', 'L', 'N', 'S', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8;
constexpr int64_t kMaxHeight = 1024;
constexpr const char* kFormat = "ocrt-render-cache";
// A counter value no loader stream uses (train/loader.cpp's are positions and ~0 - k, k < 3).
constexpr uint64_t kCacheStream = ~0ull - 16;

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void put(std::string& b, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b.push_back((char)(uint8_t)(v >> (8 * i)));
}

uint64_t get(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

std::string shard_name(int64_t k) {
  char b[32];
  std::snprintf(b, sizeof b, "lines-%05lld.bin", (long long)k);
  return b;
}

int64_t shard_count(const LineCacheSpec& s) { return (s.lines + s.shard_lines - 1) / s.shard_lines; }

void check_spec(const LineCacheSpec& s) {
  OCRT_CHECK(s.lines >= 1 && s.lines <= (int64_t)1e9, "render cache: lines must be in [1, 1e9], got ", s.lines);
  OCRT_CHECK(s.shard_lines >= 1 && s.shard_lines <= (1 << 20), "render cache: shard_lines must be in [1, 2^20], got ",
             s.shard_lines);
  OCRT_CHECK(s.height >= 1 && s.height <= kMaxHeight, "render cache: height must be in [1, ", kMaxHeight, "], got ",
             s.height);
  OCRT_CHECK(s.settings.is_object(), "render cache: the settings must be a JSON object");
}

// What cache.json says: the format, the spec's numbers and its settings.
Json manifest(const LineCacheSpec& s) {
  Json j = Json::object();
  j.set("format", kFormat);
  j.set("version", (int64_t)kVersion);
  j.set("lines", s.lines);
  j.set("shard_lines", s.shard_lines);
  j.set("height", s.height);
  j.set("seed", std::to_string(s.seed));
  j.set("settings", s.settings);
  return j;
}

std::string read_small_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  OCRT_CHECK(f.good(), path, ": cannot open: ", std::strerror(errno));
  std::string s;
  char buf[4096];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) {
    s.append(buf, (size_t)f.gcount());
    OCRT_CHECK(s.size() <= (1u << 20), path, ": more than 1 MiB: not a render cache's cache.json");
  }
  return s;
}

// The differences between a stored manifest and the wanted one, as "key: stored vs wanted".
std::string differences(const Json& stored, const Json& wanted) {
  std::string out;
  auto note = [&](const std::string& key, const Json* a, const Json* b) {
    if (!out.empty()) out += "; ";
    out += key + ": " + (a ? a->dump() : std::string("(none)")) + " vs " + (b ? b->dump() : std::string("(none)"));
  };
  const Json* sa = stored.is_object() ? stored.find("settings") : nullptr;
  const Json* wa = wanted.find("settings");
  for (const auto& [key, v] : wanted.as_object()) {
    if (key == "settings") continue;
    const Json* s = stored.is_object() ? stored.find(key) : nullptr;
    if (!s || !(*s == v)) note(key, s, &v);
  }
  if (sa && sa->is_object()) {
    for (const auto& [key, v] : wa->as_object()) {
      const Json* s = sa->find(key);
      if (!s || !(*s == v)) note(key, s, &v);
    }
    for (const auto& [key, v] : sa->as_object())
      if (!wa->find(key)) note(key, &v, nullptr);
  } else if (!sa || !(*sa == *wa)) {
    note("settings", sa, wa);
  }
  return out;
}

// Makes `dir` hold this spec's cache.json, or throws when it holds another's.
void claim_folder(const std::string& dir, const LineCacheSpec& spec) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  OCRT_CHECK(!ec && fs::is_directory(dir), "render cache: cannot create the folder '", dir, "': ", ec.message());
  const std::string path = (fs::path(dir) / "cache.json").string();
  const Json want = manifest(spec);
  if (fs::exists(path)) {
    Json have;
    try {
      have = parse_json(read_small_file(path));
    } catch (const std::exception& e) {
      fail("render cache '", dir, "': cache.json is not readable (", e.what(),
           "); remove the folder or give --render-cache another one");
    }
    const std::string diff = differences(have, want);
    OCRT_CHECK(diff.empty(), "render cache '", dir, "' holds lines of other settings (", diff,
               "); remove the folder or give --render-cache another one");
    return;
  }
  // Files of our own kind are allowed: another builder of the same cache (a replica in another
  // process) may be writing its cache.json and shards at this moment.
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool ours = name.rfind("cache.json.tmp.", 0) == 0 ||
                      (name.rfind("lines-", 0) == 0 && name.find(".bin") != std::string::npos);
    OCRT_CHECK(ours, "render cache: '", dir, "' is not empty and holds no cache.json: not a render cache (give an "
               "empty or new folder; it holds ", name, ")");
  }
  write_file_atomic(path, want.dump(2) + "\n");
}

// A shard's file mapped read-only, with its identity (device, inode, size, modification time).
struct MappedShard {
  const uint8_t* data = nullptr;
  size_t size = 0;
  struct stat st{};
  MappedShard() = default;
  MappedShard(const MappedShard&) = delete;
  MappedShard& operator=(const MappedShard&) = delete;
  ~MappedShard() {
    if (data) ::munmap((void*)data, size);
  }
};

// Maps `path`; false (and *error says why) when it cannot be opened, read or mapped.
bool map_shard(const std::string& path, MappedShard& m, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = std::string("cannot open (") + std::strerror(errno) + ")";
    return false;
  }
  bool ok = ::fstat(fd, &m.st) == 0;
  if (!ok) *error = std::string("cannot read its size: ") + std::strerror(errno);
  if (ok && m.st.st_size <= 0) ok = false, *error = "cannot map (empty file)";
  if (ok) {
    void* p = ::mmap(nullptr, (size_t)m.st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) ok = false, *error = std::string("cannot map (") + std::strerror(errno) + ")";
    else m.data = (const uint8_t*)p, m.size = (size_t)m.st.st_size;
  }
  ::close(fd);
  return ok;
}

// The shards this process has read whole and found sound (checksum included), by path and file
// identity: the cache opened right after build_line_cache checked it, or opened by every replica
// of a run, does not read every byte of every shard again (a 200,000-line cache is 1.5 GB). A
// file replaced since (another inode: shards are renamed into place) or rewritten (another size
// or modification time) is checked again.
struct FileIdentity {
  dev_t dev;
  ino_t ino;
  off_t size;
  int64_t mtime_ns;
  bool operator==(const FileIdentity&) const = default;
};

FileIdentity identity(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_size, (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec};
}

std::mutex checked_mu;
std::map<std::string, FileIdentity> checked_shards;
std::atomic<uint64_t> bytes_checksummed{0};

void remember_checked(const std::string& path, const struct stat& st) {
  std::lock_guard<std::mutex> lock(checked_mu);
  checked_shards[path] = identity(st);
}

bool checked_before(const std::string& path, const struct stat& st) {
  std::lock_guard<std::mutex> lock(checked_mu);
  const auto it = checked_shards.find(path);
  return it != checked_shards.end() && it->second == identity(st);
}

// Whether shard k is on disk whole and of this spec (its header and checksum).
bool shard_done(const std::string& path, const LineCacheSpec& spec, int64_t k) {
  MappedShard m;
  std::string error;
  if (!map_shard(path, m, &error)) return false;
  try {
    const auto lines = decode_line_shard(m.data, m.size, spec.height, path);
    const int64_t want = std::min(spec.shard_lines, spec.lines - k * spec.shard_lines);
    if ((int64_t)lines.size() != want) return false;
  } catch (const std::exception&) {
    return false;  // a damaged or foreign file: rendered again
  }
  remember_checked(path, m.st);
  return true;
}

}  // namespace

uint64_t line_cache_bytes_checksummed() { return bytes_checksummed.load(); }

uint64_t line_cache_seed(uint64_t seed, int64_t index) {
  const Philox4x32 r = philox4x32_10(seed, (uint64_t)index, kCacheStream);
  return ((uint64_t)r.v[0] << 32) | r.v[1];
}

std::string encode_line_shard(const std::vector<LineSample>& lines, int64_t height) {
  OCRT_CHECK(height >= 1 && height <= kMaxHeight, "render cache: height must be in [1, ", kMaxHeight, "], got ", height);
  std::string b(kMagic, sizeof kMagic);
  put(b, kVersion, 4);
  put(b, (uint64_t)height, 4);
  put(b, lines.size(), 8);
  for (const LineSample& s : lines) {
    OCRT_CHECK(s.image.height == height, "render cache: a line of height ", s.image.height, " in a cache of height ",
               height);
    OCRT_CHECK(s.image.width >= 1 && s.image.width <= kMaxCachedLineWidth &&
                   (int64_t)s.image.pixels.size() == s.image.width * height,
               "render cache: a line of width ", s.image.width, " (at most ", kMaxCachedLineWidth, ")");
    OCRT_CHECK(!s.text.empty() && (int64_t)s.text.size() <= kMaxCachedTextBytes, "render cache: a line's text of ",
               s.text.size(), " bytes (1 to ", kMaxCachedTextBytes, ")");
    put(b, (uint64_t)s.image.width, 4);
    put(b, s.text.size(), 4);
    b += s.text;
    b.append((const char*)s.image.pixels.data(), s.image.pixels.size());
  }
  put(b, fnv1a((const uint8_t*)b.data(), b.size()), 8);
  return b;
}

std::vector<ShardLine> decode_line_shard(const uint8_t* data, size_t size, int64_t height, const std::string& what,
                                         bool verify_checksum) {
  OCRT_CHECK(size >= kHeaderBytes + 8, what, ": not a render cache shard (", size, " bytes)");
  OCRT_CHECK(std::memcmp(data, kMagic, sizeof kMagic) == 0, what, ": not a render cache shard (no OCRTLNS1 magic)");
  // The checksum first: a flipped bit anywhere is then one clear error.
  if (verify_checksum) {
    OCRT_CHECK(get(data + size - 8, 8) == fnv1a(data, size - 8), what,
               ": checksum mismatch (the file is truncated or damaged)");
    bytes_checksummed += size;
  }
  const uint64_t version = get(data + 8, 4), h = get(data + 12, 4), count = get(data + 16, 8);
  OCRT_CHECK(version == kVersion, what, ": render cache shard version ", version, " (this program reads ", kVersion, ")");
  OCRT_CHECK((int64_t)h == height, what, ": lines of height ", h, " where ", height, " is wanted");
  const size_t end = size - 8;
  // Each line takes at least 8 + 1 + height bytes: a count beyond that cannot be right.
  OCRT_CHECK(count <= (end - kHeaderBytes) / (9 + (uint64_t)height), what, ": ", count,
             " lines cannot fit in its size");
  std::vector<ShardLine> out;
  out.reserve((size_t)count);
  size_t pos = kHeaderBytes;
  for (uint64_t i = 0; i < count; ++i) {
    OCRT_CHECK(end - pos >= 8, what, ": line ", i, " is cut short");
    const uint64_t width = get(data + pos, 4), text_bytes = get(data + pos + 4, 4);
    pos += 8;
    OCRT_CHECK(width >= 1 && width <= (uint64_t)kMaxCachedLineWidth, what, ": line ", i, " has width ", width,
               " (1 to ", kMaxCachedLineWidth, ")");
    OCRT_CHECK(text_bytes >= 1 && text_bytes <= (uint64_t)kMaxCachedTextBytes, what, ": line ", i, " has a text of ",
               text_bytes, " bytes (1 to ", kMaxCachedTextBytes, ")");
    const uint64_t pixels = width * (uint64_t)height;
    OCRT_CHECK(end - pos >= text_bytes + pixels, what, ": line ", i, " is cut short");
    ShardLine l;
    l.width = (int64_t)width;
    l.text.assign((const char*)data + pos, (size_t)text_bytes);
    OCRT_CHECK(valid_utf8(l.text) == l.text, what, ": line ", i, "'s text is not UTF-8");
    pos += text_bytes;
    l.pixels = data + pos;
    pos += pixels;
    out.push_back(std::move(l));
  }
  OCRT_CHECK(pos == end, what, ": ", end - pos, " unexpected bytes after its ", count, " lines");
  return out;
}

void build_line_cache(const std::string& dir, const Dataset& source, const LineCacheSpec& spec, int threads,
                      bool verbose) {
  check_spec(spec);
  // One build at a time in a process: the replicas of `ocrt-train --devices cpu,cpu` each open
  // the cache; the first renders it, the others then find every shard there. (Builders in
  // several processes may render the same shards at once; each is renamed into place whole.)
  static std::mutex one_build;
  std::lock_guard<std::mutex> lock(one_build);
  claim_folder(dir, spec);
  const int64_t shards = shard_count(spec);
  std::vector<int64_t> todo;
  for (int64_t k = 0; k < shards; ++k)
    if (!shard_done((fs::path(dir) / shard_name(k)).string(), spec, k)) todo.push_back(k);
  if (todo.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  if (verbose)
    std::fprintf(stderr, "render cache %s: rendering %zu of %lld shards (%lld lines, %lld a shard) on %d threads\n",
                 dir.c_str(), todo.size(), (long long)shards, (long long)spec.lines, (long long)spec.shard_lines,
                 std::max(1, threads));
  std::atomic<size_t> next{0}, done{0};
  std::atomic<int64_t> lines_done{0};
  std::mutex mu;
  std::string error;
  auto work = [&] {
    limit_this_thread(1);  // one line at a time on each thread: the threads are the parallelism
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!error.empty()) return;
      }
      const size_t t = next++;
      if (t >= todo.size()) return;
      const int64_t k = todo[t];
      try {
        std::vector<LineSample> lines;
        const int64_t first = k * spec.shard_lines, last = std::min(spec.lines, first + spec.shard_lines);
        for (int64_t i = first; i < last; ++i) {
          throw_if_interrupted("rendering the render cache");
          LineSample s = source.get(i, line_cache_seed(spec.seed, i));
          OCRT_CHECK(s.image.height == spec.height, "line ", i, " rendered at height ", s.image.height, ", not ",
                     spec.height);
          lines.push_back(std::move(s));
        }
        write_file_atomic((fs::path(dir) / shard_name(k)).string(), encode_line_shard(lines, spec.height));
        const int64_t rendered = lines_done += (int64_t)lines.size();
        const size_t d = ++done;
        if (verbose && (d % 16 == 0 || d == todo.size())) {
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          std::fprintf(stderr, "render cache %s: %zu of %zu shards in %.1f s (%.0f lines/s)\n", dir.c_str(), d,
                       todo.size(), s, (double)rendered / std::max(s, 1e-9));
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (error.empty()) error = std::string("render cache '") + dir + "', shard " + std::to_string(k) + ": " + e.what();
        return;
      }
    }
  };
  const int n = (int)std::min<int64_t>(std::max(1, threads), (int64_t)todo.size());
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  OCRT_CHECK(error.empty(), error);
}

// ---------------------------------------------------------------- CachedLineDataset

struct CachedLineDataset::Mapping : MappedShard {};

CachedLineDataset::CachedLineDataset(const std::string& dir, const LineCacheSpec& spec, const nn::Charset& charset)
    : charset_(charset), height_(spec.height) {
  check_spec(spec);
  const std::string manifest_path = (fs::path(dir) / "cache.json").string();
  OCRT_CHECK(fs::exists(manifest_path), "render cache '", dir, "': no cache.json (build it first)");
  const std::string diff = differences(parse_json(read_small_file(manifest_path)), manifest(spec));
  OCRT_CHECK(diff.empty(), "render cache '", dir, "' holds lines of other settings (", diff, ")");
  const int64_t shards = shard_count(spec);
  lines_.reserve((size_t)spec.lines);
  for (int64_t k = 0; k < shards; ++k) {
    const std::string path = (fs::path(dir) / shard_name(k)).string();
    auto m = std::make_unique<Mapping>();
    std::string error;
    OCRT_CHECK(map_shard(path, *m, &error), path, ": ", error,
               error.rfind("cannot open", 0) == 0 ? ": the render cache is incomplete" : "");
    // Its checksum, unless this process has just checked this very file (build_line_cache, or
    // another replica's open): the sizes and texts are read either way.
    const bool checked = checked_before(path, m->st);
    std::vector<ShardLine> lines = decode_line_shard(m->data, m->size, height_, path, !checked);
    if (!checked) remember_checked(path, m->st);
    const int64_t want = std::min(spec.shard_lines, spec.lines - k * spec.shard_lines);
    OCRT_CHECK((int64_t)lines.size() == want, path, ": ", lines.size(), " lines where ", want, " are wanted");
    std::vector<int64_t> classes;
    for (size_t i = 0; i < lines.size(); ++i) {
      std::vector<std::string> unknown;
      OCRT_CHECK(charset.encode(lines[i].text, classes, &unknown), path, ": line ", i, " ('", lines[i].text,
                 "') has characters outside the charset (", unknown.empty() ? std::string("?") : unknown[0],
                 "): the cache was made for another charset");
      // The text's place in the mapping: just before the pixels.
      const char* text = reinterpret_cast<const char*>(lines[i].pixels) - lines[i].text.size();
      lines_.push_back({lines[i].pixels, text, (int32_t)lines[i].width, (int32_t)lines[i].text.size()});
    }
    bytes_ += (int64_t)m->size;
    maps_.push_back(std::move(m));
  }
}

CachedLineDataset::~CachedLineDataset() = default;

LineSample CachedLineDataset::get(int64_t index, uint64_t /*seed*/) const {
  OCRT_CHECK(index >= 0 && index < size(), "CachedLineDataset: index ", index, " outside [0, ", size(), ")");
  const Line& l = lines_[(size_t)index];
  LineSample s;
  s.image.width = l.width;
  s.image.height = height_;
  s.image.pixels.assign(l.pixels, l.pixels + l.width * height_);
  s.text.assign(l.text, (size_t)l.text_bytes);
  OCRT_CHECK(charset_.encode(s.text, s.classes), "CachedLineDataset: line ", index, " left the charset");  // checked at open
  s.id = "cache:" + std::to_string(index);
  return s;
}

}  // namespace ocrt::train
