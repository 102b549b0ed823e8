// A character n-gram language model for CTC beam search (models/ctc_decode.h): the probability
// of the next character given the last order-1 characters, learnt from a text corpus by
// counting. `ocrt-lm` builds one into a file; `ocrt-infer --lm FILE` decodes with it.
//
// Smoothing: interpolated Witten-Bell (Witten and Bell 1991; Chen and Goodman 1998, sec. 2.4).
// With h a context of k characters, h' the same without its oldest character, c(hw) the count
// of h followed by w, c(h) = sum_w c(hw) and T(h) the number of distinct w seen after h:
//
//     P(w | h) = (c(hw) + T(h) P(w | h')) / (c(h) + T(h))        (h seen as a context)
//     P(w | h) = P(w | h')                                        (h never seen)
//     P(w | empty context) interpolates the unigram counts with the uniform 1 / (V + 1)
//
// so every character, seen or not, gets a probability > 0 and each P(. | h) sums to 1. Why
// Witten-Bell rather than Kneser-Ney or stupid backoff: it is a true distribution (stupid
// backoff's scores are not, which makes its weight against the model's log-probabilities
// harder to reason about); it needs only counts and the number of distinct followers, no
// discounts to estimate; and over a vocabulary of a hundred-odd characters, where most
// contexts are seen with several followers, its estimates are close to Kneser-Ney's (the gap
// between the two is largest for word models with huge vocabularies). docs/formats.md has the
// file format and bench/results/decode.md its measured effect.
//
// Pruning: n-grams of order >= 3 seen fewer than `min_count` times are dropped from the file,
// but each context keeps its original c(h) and T(h); the mass of its dropped followers goes to
// the lower order (gamma(h) below), so the distribution still sums to 1.
//
// Symbols: the V most frequent characters of the corpus (V <= kMaxVocab) get ids 1..V; every
// other character is id V + 1 ("other"). A context is packed into a 64-bit key, 10 bits per
// symbol, the newest in the lowest bits; ids are never 0, so a key's length is implicit and the
// empty context is key 0.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ocrt::nn {

class CharLM {
 public:
  static constexpr int kMaxOrder = 6;
  static constexpr int kMaxVocab = 1022;  // ids 1..V and V + 1 must fit in 10 bits
  static constexpr int kBits = 10;
  using State = uint64_t;  // the last (up to order - 1) symbols, packed as above

  // Counts the n-grams of `text` (code points; the caller has normalised it) up to `order`.
  // Throws for an order outside [1, kMaxOrder], min_count < 1, or text with no characters.
  static CharLM build(const std::u32string& text, int order, int64_t min_count = 2);

  // The file format of docs/formats.md ("ocrt-clm", version 1). save writes atomically; load
  // checks every field, count and key and throws a one-line error naming the file.
  void save(const std::string& path) const;
  static CharLM load(const std::string& path);
  static CharLM from_bytes(const std::string& bytes, const std::string& what = "language model");
  std::string to_bytes() const;

  int order() const { return order_; }
  int vocab_size() const { return (int)vocab_.size(); }     // V (without "other")
  const std::vector<char32_t>& vocab() const { return vocab_; }
  int64_t ngrams() const { return (int64_t)ngram_keys_.size(); }  // kept n-grams, all orders

  int32_t id(char32_t c) const;      // 1..V, or V + 1 for a character outside the vocabulary
  // The id of a character given as UTF-8 (a charset entry); "other" unless it is one code point.
  int32_t id_utf8(const std::string& ch) const;

  State start() const { return 0; }  // no context (the start of a line)
  State next(State s, int32_t id) const;          // s followed by id, keeping order - 1 symbols
  double log_prob(State s, int32_t id) const;      // natural log of P(id | s), finite
  // A number no other model built or loaded in this process has (copies share it, as they
  // share every count): what a cache of log_prob's answers is keyed by.
  uint64_t serial() const { return serial_; }
  // Average log2 P per character of `text` read from the start: the cross-entropy in bits.
  double bits_per_char(const std::u32string& text) const;

 private:
  struct Context {
    uint64_t total = 0;   // c(h)
    uint32_t types = 0;   // T(h)
    double denom = 0;     // log(c(h) + T(h))            (derived on load)
    double gamma = 0;     // log((c(h) - kept(h) + T(h)) / (c(h) + T(h)))  (derived on load)
  };
  // Open-addressing lookups in sorted key arrays' companion hash tables.
  int64_t find_ngram(uint64_t key) const;
  int64_t find_context(uint64_t key) const;
  void finish(const std::string& what);  // builds the hash tables and the derived fields; checks consistency

  int order_ = 0;
  uint64_t serial_ = 0;  // set by finish()
  std::vector<char32_t> vocab_;  // id - 1 -> code point, sorted by code point
  std::vector<uint64_t> ngram_keys_;
  std::vector<uint32_t> ngram_counts_;
  std::vector<uint64_t> context_keys_;
  std::vector<Context> contexts_;
  std::vector<int64_t> ngram_slots_, context_slots_;  // hash slot -> index, -1 empty
};

}  // namespace ocrt::nn
