// Character n-gram language model: counting, Witten-Bell scoring and the "ocrt-clm" file format
// (see char_lm.h and docs/formats.md).
#include "models/char_lm.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include "models/charset.h"
#include "runtime/error.h"
#include "runtime/files.h"

namespace ocrt::nn {

namespace {

constexpr char kMagic[8] = {'o', 'c', 'r', 't', '-', 'c', 'l', 'm'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kSymbolMask = (1u << CharLM::kBits) - 1;

int key_length(uint64_t key) { return (std::bit_width(key) + CharLM::kBits - 1) / CharLM::kBits; }
uint64_t low_symbols(int k) { return k >= 6 ? ~0ull >> 4 : (1ull << (CharLM::kBits * k)) - 1; }

uint64_t fnv1a(const char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
  return h;
}

// Little-endian writer and bounds-checked reader.
void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back((char)((v >> (8 * i)) & 0xFF));
}

struct Reader {
  const std::string& b;
  size_t pos;
  const std::string& what;
  uint64_t get(int bytes, const char* field) {
    OCRT_CHECK(b.size() - pos >= (size_t)bytes, what, ": truncated (the file ends inside ", field, " at byte ", pos, ")");
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= (uint64_t)(unsigned char)b[pos + (size_t)i] << (8 * i);
    pos += (size_t)bytes;
    return v;
  }
  // A record count, checked against the bytes left before anything is allocated for it.
  uint64_t count(const char* field, size_t record_bytes) {
    const uint64_t n = get(8, field);
    OCRT_CHECK(n <= (b.size() - pos) / record_bytes, what, ": truncated or corrupt (", field, " says ", n,
               " records of ", record_bytes, " bytes, but only ", b.size() - pos, " bytes follow)");
    return n;
  }
};

// Hash slots for sorted unique keys: slot -> index into the key array, -1 empty.
std::vector<int64_t> make_slots(const std::vector<uint64_t>& keys) {
  size_t size = 16;
  while (size < 2 * keys.size()) size *= 2;
  std::vector<int64_t> slots(size, -1);
  for (size_t i = 0; i < keys.size(); ++i) {
    size_t s = (size_t)((keys[i] * 0x9E3779B97F4A7C15ull) >> 17) & (size - 1);
    while (slots[s] >= 0) s = (s + 1) & (size - 1);
    slots[s] = (int64_t)i;
  }
  return slots;
}

int64_t lookup(const std::vector<int64_t>& slots, const std::vector<uint64_t>& keys, uint64_t key) {
  const size_t mask = slots.size() - 1;
  for (size_t s = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & mask;; s = (s + 1) & mask) {
    const int64_t i = slots[s];
    if (i < 0) return -1;
    if (keys[(size_t)i] == key) return i;
  }
}

}  // namespace

CharLM CharLM::build(const std::u32string& text, int order, int64_t min_count) {
  OCRT_CHECK(order >= 1 && order <= kMaxOrder, "char LM: order must be in [1, ", kMaxOrder, "], got ", order);
  OCRT_CHECK(min_count >= 1, "char LM: min_count must be >= 1, got ", min_count);
  OCRT_CHECK(!text.empty(), "char LM: the corpus holds no characters");
  OCRT_CHECK(text.size() < (1ull << 32), "char LM: the corpus is too large (", text.size(), " characters; at most 2^32 - 1)");
  // Vocabulary: the kMaxVocab most frequent characters (ties: the smaller code point).
  std::unordered_map<char32_t, uint64_t> freq;
  for (char32_t c : text) ++freq[c];
  std::vector<std::pair<uint64_t, char32_t>> by_freq;
  for (const auto& [c, n] : freq) by_freq.emplace_back(n, c);
  std::sort(by_freq.begin(), by_freq.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (by_freq.size() > (size_t)kMaxVocab) by_freq.resize((size_t)kMaxVocab);
  CharLM lm;
  lm.order_ = order;
  for (const auto& [n, c] : by_freq) lm.vocab_.push_back(c);
  std::sort(lm.vocab_.begin(), lm.vocab_.end());

  // Every n-gram, orders 1..order, keyed as in the header.
  std::unordered_map<uint64_t, uint64_t> counts;
  uint64_t key = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    key = ((key << kBits) | (uint64_t)lm.id(text[i])) & low_symbols(order);
    for (int n = 1; n <= order && (size_t)n <= i + 1; ++n) ++counts[key & low_symbols(n)];
  }
  // Context statistics from all n-grams (before pruning), then the pruned n-gram table.
  std::unordered_map<uint64_t, Context> ctx;
  std::vector<std::pair<uint64_t, uint32_t>> kept;
  for (const auto& [k, n] : counts) {
    Context& c = ctx[k >> kBits];
    c.total += n;
    c.types += 1;
    if (key_length(k) < 3 || (int64_t)n >= min_count) kept.emplace_back(k, (uint32_t)n);
  }
  std::sort(kept.begin(), kept.end());
  for (const auto& [k, n] : kept) {
    lm.ngram_keys_.push_back(k);
    lm.ngram_counts_.push_back(n);
  }
  // Contexts that keep at least one follower (the others are "never seen": P(w|h) = P(w|h')).
  std::vector<uint64_t> ctx_keys;
  for (const auto& [k, n] : kept) ctx_keys.push_back(k >> kBits);
  std::sort(ctx_keys.begin(), ctx_keys.end());
  ctx_keys.erase(std::unique(ctx_keys.begin(), ctx_keys.end()), ctx_keys.end());
  for (uint64_t k : ctx_keys) {
    lm.context_keys_.push_back(k);
    lm.contexts_.push_back(ctx[k]);
  }
  lm.finish("char LM");
  return lm;
}

void CharLM::finish(const std::string& what) {
  const uint64_t max_id = (uint64_t)vocab_.size() + 1;
  auto valid_key = [&](uint64_t key, int min_len, int max_len) {
    const int len = key_length(key);
    if (len < min_len || len > max_len) return false;
    for (int i = 0; i < len; ++i) {
      const uint64_t id = (key >> (kBits * i)) & kSymbolMask;
      if (id < 1 || id > max_id) return false;
    }
    return true;
  };
  for (size_t i = 0; i < context_keys_.size(); ++i) {
    OCRT_CHECK(valid_key(context_keys_[i], 0, order_ - 1), what, ": context ", i, " has an invalid key");
    OCRT_CHECK(i == 0 || context_keys_[i] > context_keys_[i - 1], what, ": context keys are not strictly increasing at ", i);
    const Context& c = contexts_[i];
    OCRT_CHECK(c.types >= 1 && c.total >= c.types, what, ": context ", i, " has counts total ", c.total, " < types ", c.types);
  }
  OCRT_CHECK(!context_keys_.empty() && context_keys_[0] == 0, what, ": the empty context (the unigram counts) is missing");
  context_slots_ = make_slots(context_keys_);
  std::vector<uint64_t> kept_sum(contexts_.size(), 0), kept_types(contexts_.size(), 0);
  for (size_t i = 0; i < ngram_keys_.size(); ++i) {
    OCRT_CHECK(valid_key(ngram_keys_[i], 1, order_), what, ": n-gram ", i, " has an invalid key");
    OCRT_CHECK(i == 0 || ngram_keys_[i] > ngram_keys_[i - 1], what, ": n-gram keys are not strictly increasing at ", i);
    OCRT_CHECK(ngram_counts_[i] >= 1, what, ": n-gram ", i, " has count 0");
    const int64_t c = find_context(ngram_keys_[i] >> kBits);
    OCRT_CHECK(c >= 0, what, ": n-gram ", i, " has no context record");
    kept_sum[(size_t)c] += ngram_counts_[i];
    kept_types[(size_t)c] += 1;
  }
  for (size_t i = 0; i < contexts_.size(); ++i) {
    Context& c = contexts_[i];
    OCRT_CHECK(kept_sum[i] >= 1 && kept_sum[i] <= c.total && kept_types[i] <= c.types, what, ": context ", i,
               " does not match its n-grams (total ", c.total, ", types ", c.types, "; n-grams sum ", kept_sum[i],
               " over ", kept_types[i], ")");
    const double denom = (double)c.total + (double)c.types;
    c.denom = denom;
    c.gamma = ((double)(c.total - kept_sum[i]) + (double)c.types) / denom;
  }
  ngram_slots_ = make_slots(ngram_keys_);
  static std::atomic<uint64_t> models{0};
  serial_ = ++models;
}

int64_t CharLM::find_ngram(uint64_t key) const { return lookup(ngram_slots_, ngram_keys_, key); }
int64_t CharLM::find_context(uint64_t key) const { return lookup(context_slots_, context_keys_, key); }

int32_t CharLM::id(char32_t c) const {
  const auto it = std::lower_bound(vocab_.begin(), vocab_.end(), c);
  if (it != vocab_.end() && *it == c) return (int32_t)(it - vocab_.begin()) + 1;
  return (int32_t)vocab_.size() + 1;
}

int32_t CharLM::id_utf8(const std::string& ch) const {
  const std::vector<std::string> cps = utf8_chars(ch, "character");
  if (cps.size() != 1) return (int32_t)vocab_.size() + 1;
  const auto* s = reinterpret_cast<const unsigned char*>(cps[0].data());
  const size_t n = cps[0].size();
  char32_t cp = n == 1 ? s[0] : n == 2 ? (s[0] & 0x1F) : n == 3 ? (s[0] & 0x0F) : (s[0] & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (s[k] & 0x3F);
  return id(cp);
}

CharLM::State CharLM::next(State s, int32_t id) const {
  return ((s << kBits) | (uint64_t)id) & low_symbols(order_ - 1);
}

double CharLM::log_prob(State s, int32_t w) const {
  // From the empty context up: p <- c(hw) / (c(h) + T(h)) + gamma(h) p. A context never seen
  // ends the climb (every longer one holds it as a suffix, so was never seen either).
  double p = 1.0 / ((double)vocab_.size() + 1.0);
  const int len = key_length(s);
  for (int k = 0; k <= len && k < order_; ++k) {
    const uint64_t h = s & low_symbols(k);
    const int64_t c = find_context(h);
    if (c < 0) break;
    const int64_t g = find_ngram((h << kBits) | (uint64_t)w);
    const Context& ctx = contexts_[(size_t)c];
    p = (g >= 0 ? (double)ngram_counts_[(size_t)g] : 0.0) / ctx.denom + ctx.gamma * p;
  }
  return std::log(p);
}

double CharLM::bits_per_char(const std::u32string& text) const {
  if (text.empty()) return 0;
  double sum = 0;
  State s = start();
  for (char32_t c : text) {
    const int32_t i = id(c);
    sum += log_prob(s, i);
    s = next(s, i);
  }
  return -sum / std::log(2.0) / (double)text.size();
}

std::string CharLM::to_bytes() const {
  std::string b(kMagic, sizeof kMagic);
  put(b, kVersion, 4);
  put(b, (uint64_t)order_, 4);
  put(b, vocab_.size(), 4);
  for (char32_t c : vocab_) put(b, c, 4);
  put(b, context_keys_.size(), 8);
  for (size_t i = 0; i < context_keys_.size(); ++i) {
    put(b, context_keys_[i], 8);
    put(b, contexts_[i].total, 8);
    put(b, contexts_[i].types, 4);
  }
  put(b, ngram_keys_.size(), 8);
  for (size_t i = 0; i < ngram_keys_.size(); ++i) {
    put(b, ngram_keys_[i], 8);
    put(b, ngram_counts_[i], 4);
  }
  put(b, fnv1a(b.data(), b.size()), 8);
  return b;
}

CharLM CharLM::from_bytes(const std::string& b, const std::string& what) {
  OCRT_CHECK(b.size() >= sizeof kMagic && std::memcmp(b.data(), kMagic, sizeof kMagic) == 0, what,
             ": not an ocrt character language model (no 'ocrt-clm' header)");
  Reader r{b, sizeof kMagic, what};
  const uint64_t version = r.get(4, "the version");
  OCRT_CHECK(version == kVersion, what, ": format version ", version, " is not supported (this build reads ", kVersion, ")");
  // The checksum first: a flipped bit anywhere is then one clear error, not a strange model.
  OCRT_CHECK(b.size() >= sizeof kMagic + 8 + 4 * 3, what, ": truncated (", b.size(), " bytes)");
  uint64_t stored = 0;
  for (int i = 0; i < 8; ++i) stored |= (uint64_t)(unsigned char)b[b.size() - 8 + (size_t)i] << (8 * i);
  OCRT_CHECK(stored == fnv1a(b.data(), b.size() - 8), what, ": checksum mismatch (the file is truncated or corrupt)");
  const std::string body = b.substr(0, b.size() - 8);
  Reader in{body, r.pos, what};
  CharLM lm;
  const uint64_t order = in.get(4, "the order");
  OCRT_CHECK(order >= 1 && order <= (uint64_t)kMaxOrder, what, ": order ", order, " is outside [1, ", kMaxOrder, "]");
  lm.order_ = (int)order;
  const uint64_t V = in.get(4, "the vocabulary size");
  OCRT_CHECK(V >= 1 && V <= (uint64_t)kMaxVocab, what, ": vocabulary size ", V, " is outside [1, ", kMaxVocab, "]");
  for (uint64_t i = 0; i < V; ++i) {
    const uint64_t c = in.get(4, "the vocabulary");
    OCRT_CHECK(c >= 1 && c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF), what, ": vocabulary entry ", i, " (", c,
               ") is not a Unicode scalar value");
    OCRT_CHECK(lm.vocab_.empty() || c > lm.vocab_.back(), what, ": vocabulary is not strictly increasing at entry ", i);
    lm.vocab_.push_back((char32_t)c);
  }
  const uint64_t nc = in.count("the context count", 20);
  lm.context_keys_.reserve(nc);
  lm.contexts_.reserve(nc);
  for (uint64_t i = 0; i < nc; ++i) {
    lm.context_keys_.push_back(in.get(8, "a context"));
    Context c;
    c.total = in.get(8, "a context");
    c.types = (uint32_t)in.get(4, "a context");
    lm.contexts_.push_back(c);
  }
  const uint64_t nn = in.count("the n-gram count", 12);
  lm.ngram_keys_.reserve(nn);
  lm.ngram_counts_.reserve(nn);
  for (uint64_t i = 0; i < nn; ++i) {
    lm.ngram_keys_.push_back(in.get(8, "an n-gram"));
    lm.ngram_counts_.push_back((uint32_t)in.get(4, "an n-gram"));
  }
  OCRT_CHECK(in.pos == body.size(), what, ": ", body.size() - in.pos, " unexpected bytes after the n-grams");
  lm.finish(what + ": corrupt");
  return lm;
}

void CharLM::save(const std::string& path) const { write_file_atomic(path, to_bytes()); }

CharLM CharLM::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  OCRT_CHECK(f.good(), path, ": cannot open the language model: ", std::strerror(errno));
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  OCRT_CHECK(size >= 0 && size <= (std::streamoff)(2ll << 30), path, ": not a language model (size ", (long long)size,
             " bytes; at most 2 GiB)");
  f.seekg(0);
  std::string bytes((size_t)size, '\0');
  f.read(bytes.data(), size);
  OCRT_CHECK(f.gcount() == size, path, ": could not read the whole file");
  return from_bytes(bytes, path);
}

}  // namespace ocrt::nn
