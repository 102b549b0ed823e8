// Prefix beam search with a character language model (models/ctc_decode.h, models/char_lm.h):
// the LM's probabilities are a distribution, its file round-trips and every damaged file is a
// one-line error; the LM decides between acoustically tied labellings; a zero-weight LM changes
// nothing; beam beats greedy where the best path is not the best labelling; scores stay finite
// on one-hot (0 and 1) probabilities, a single frame and empty results; per-character
// confidences.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "gradcheck.h"
#include "models/char_lm.h"
#include "models/ctc_decode.h"
#include "ops/reduce.h"
#include "runtime/threading.h"

using namespace ocrt;
using namespace ocrt::nn;
using ocrt::testing::det_uniform;

namespace {
// Log-probabilities (T, 1, C) from per-frame probability rows (a 0 becomes -inf).
Tensor from_probs(const std::vector<std::vector<double>>& rows) {
  std::vector<double> v;
  for (const auto& r : rows)
    for (double p : r) v.push_back(std::log(p));
  return Tensor::from_vector(v, {(int64_t)rows.size(), 1, (int64_t)rows[0].size()});
}

std::u32string u32(const std::string& ascii) { return std::u32string(ascii.begin(), ascii.end()); }

const std::string kText =
    "the cat sat on the mat. the dog sat on the log. then the cat and the dog ran to the mat and sat there. ";

BeamOptions with_lm(const CharLM& lm, const std::vector<std::string>& chars, int64_t width, double alpha, double beta) {
  BeamOptions o;
  o.beam_width = width;
  o.lm = &lm;
  o.lm_ids = lm_ids_for(lm, chars);
  o.lm_weight = alpha;
  o.lm_bonus = beta;
  return o;
}

// Throws, and the message is one line.
void check_one_line_error(const std::string& bytes, const std::string& why) {
  INFO(why);
  try {
    CharLM::from_bytes(bytes, "lm.bin");
    FAIL("no error");
  } catch (const std::exception& e) {
    const std::string m = e.what();
    CHECK(m.find('\n') == std::string::npos);
    CHECK(m.rfind("lm.bin: ", 0) == 0);
  }
}
}  // namespace

TEST_CASE("char LM: Witten-Bell probabilities sum to 1 in every context, pruned or not", "[decode][lm]") {
  std::u32string text;
  for (int i = 0; i < 3; ++i) text += u32(kText);
  for (int64_t min_count : {1, 2, 5}) {
    const CharLM lm = CharLM::build(text, 5, min_count);
    REQUIRE(lm.order() == 5);
    const int V = lm.vocab_size();
    for (const std::string ctx : {"", "t", "th", "the", "the ", " the c", "zzzz", "qat s"}) {
      CharLM::State s = lm.start();
      for (char c : ctx) s = lm.next(s, lm.id((char32_t)c));
      double sum = 0;
      for (int32_t id = 1; id <= V + 1; ++id) {
        const double lp = lm.log_prob(s, id);
        CHECK(std::isfinite(lp));
        sum += std::exp(lp);
      }
      INFO("min_count " << min_count << " context '" << ctx << "'");
      CHECK(sum == Approx(1.0).epsilon(1e-9));
    }
    // English-like text is far more likely than the same letters shuffled.
    CHECK(lm.bits_per_char(u32("the cat sat on the mat")) < lm.bits_per_char(u32("tmh tca ast no eht tam")));
  }
  CHECK_THROWS_WITH(CharLM::build(u32("abc"), 7), Catch::Contains("order must be in [1, 6]"));
  CHECK_THROWS_WITH(CharLM::build(U"", 3), Catch::Contains("no characters"));
}

TEST_CASE("char LM: a file round-trips, and every truncated or damaged file is a one-line error", "[decode][lm]") {
  const CharLM lm = CharLM::build(u32(kText), 4, 1);
  const std::string bytes = lm.to_bytes();
  const CharLM back = CharLM::from_bytes(bytes);
  CHECK(back.to_bytes() == bytes);
  CHECK(back.log_prob(back.next(back.start(), back.id(U't')), back.id(U'h')) ==
        lm.log_prob(lm.next(lm.start(), lm.id(U't')), lm.id(U'h')));
  // Saved and loaded through a file.
  const std::string path = "test_char_lm.tmp.bin";
  lm.save(path);
  CHECK(CharLM::load(path).to_bytes() == bytes);
  std::remove(path.c_str());
  CHECK_THROWS_WITH(CharLM::load("no/such/lm.bin"), Catch::Contains("no/such/lm.bin: cannot open"));

  for (size_t n = 0; n < bytes.size(); ++n) check_one_line_error(bytes.substr(0, n), "truncated to " + std::to_string(n));
  check_one_line_error(bytes + "x", "a byte too many");
  for (size_t i = 0; i < bytes.size(); i += 3) {
    std::string bad = bytes;
    bad[i] = (char)(bad[i] ^ 0x10);
    check_one_line_error(bad, "byte " + std::to_string(i) + " flipped");
  }
}

TEST_CASE("char LM: damage behind a valid checksum is caught by the content checks", "[decode][lm]") {
  // Rewrites a field and fixes the checksum, as a hostile file would.
  const std::string bytes = CharLM::build(u32(kText), 3, 1).to_bytes();
  auto reseal = [](std::string b) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i + 8 < b.size(); ++i) h = (h ^ (unsigned char)b[i]) * 1099511628211ull;
    for (int i = 0; i < 8; ++i) b[b.size() - 8 + (size_t)i] = (char)((h >> (8 * i)) & 0xFF);
    return b;
  };
  auto set = [&](size_t at, uint64_t v, int n) {
    std::string b = bytes;
    for (int i = 0; i < n; ++i) b[at + (size_t)i] = (char)((v >> (8 * i)) & 0xFF);
    return reseal(b);
  };
  CHECK(CharLM::from_bytes(reseal(bytes)).to_bytes() == bytes);
  const uint32_t V = (uint8_t)bytes[16] | (uint32_t)(uint8_t)bytes[17] << 8;
  const size_t contexts = 20 + 4 * (size_t)V;  // the context count's offset
  check_one_line_error(set(8, 2, 4), "version 2");
  check_one_line_error(set(12, 0, 4), "order 0");
  check_one_line_error(set(12, 9, 4), "order 9");
  check_one_line_error(set(16, 0, 4), "vocabulary size 0");
  check_one_line_error(set(16, 5000, 4), "vocabulary size 5000");
  check_one_line_error(set(20, 0xD800, 4), "a surrogate in the vocabulary");
  check_one_line_error(set(24, 0, 4), "vocabulary not increasing");
  check_one_line_error(set(contexts, 1ull << 60, 8), "a huge context count");
  check_one_line_error(set(contexts + 8, 77, 8), "the first context is not the empty one");
  check_one_line_error(set(contexts + 16, 0, 8), "a context's total 0");
  check_one_line_error(set(contexts + 16, 1, 8), "a context's total below its n-grams' sum");
  check_one_line_error(set(contexts + 24, 0, 4), "a context's types 0");
  check_one_line_error(set(contexts + 24, 1, 4), "a context's types below its n-grams' number");
  check_one_line_error(set(contexts + 24, 0xFFFFFFFFu, 4), "a context's types above its total");
  check_one_line_error(set(bytes.size() - 8 - 4, 0, 4), "an n-gram count of 0");
  check_one_line_error(set(bytes.size() - 8 - 12, (uint64_t)(V + 2), 8), "an n-gram symbol outside the vocabulary");
  check_one_line_error(set(bytes.size() - 8 - 12, 0, 8), "an n-gram key out of order");
}

TEST_CASE("beam search: the LM decides between labellings the model scores the same", "[decode][lm]") {
  // Classes: blank, a, b. a or b, a certain blank, a or b: "aa", "ab", "ba" and "bb" each
  // have probability exactly 1/4.
  const std::vector<std::string> chars{"a", "b"};
  const Tensor lp = from_probs({{0.0, 0.5, 0.5}, {1.0, 0.0, 0.0}, {0.0, 0.5, 0.5}});
  CHECK(ctc_beam_decode(lp, 8)[0].labels.size() == 2);
  const CharLM likes_ab = CharLM::build(u32("ab ab ab ab ab ab ab ab"), 3, 1);
  const CharLM likes_ba = CharLM::build(u32("ba ba ba ba ba ba ba ba"), 3, 1);
  const auto x = ctc_beam_decode(lp, with_lm(likes_ab, chars, 8, 1.0, 0.0));
  const auto y = ctc_beam_decode(lp, with_lm(likes_ba, chars, 8, 1.0, 0.0));
  CHECK(x[0].labels == std::vector<int64_t>{1, 2});
  CHECK(y[0].labels == std::vector<int64_t>{2, 1});
  CHECK(std::isfinite(x[0].log_prob));
  // The bonus. The model says "ab" (0.495) over "a" (0.405); an LM that has only seen a's
  // makes b after a cost about 9 nats, so "a" wins; a bonus of 10 per character brings "ab" back.
  const Tensor lp2 = from_probs({{0.1, 0.9, 0.0}, {0.45, 0.0, 0.55}});
  const CharLM only_a = CharLM::build(u32("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), 2, 1);
  CHECK(ctc_beam_decode(lp2, 4)[0].labels == std::vector<int64_t>{1, 2});
  CHECK(ctc_beam_decode(lp2, with_lm(only_a, chars, 4, 1.0, 0.0))[0].labels == std::vector<int64_t>{1});
  CHECK(ctc_beam_decode(lp2, with_lm(only_a, chars, 4, 1.0, 10.0))[0].labels == std::vector<int64_t>{1, 2});
}

TEST_CASE("beam search with an LM, wide enough for every prefix, finds the best labelling of an exhaustive search", "[decode][lm]") {
  // Every path of 5 frames over blank + 3 letters (4^5), collapsed into its labelling; a
  // labelling's score is log of its paths' summed probability + alpha x its characters' LM log
  // probabilities + beta x its length. A beam wider than the number of prefixes is exact, so it
  // must find the labelling of the highest score, with that score: the LM's part looked up
  // right for every prefix.
  const std::vector<std::string> chars{"t", "h", "e"};
  const CharLM lm = CharLM::build(u32(kText), 4, 1);
  const int64_t T = 5, C = 4;
  std::mt19937 rng(2026);
  std::uniform_real_distribution<double> u(0.05, 1.05);
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<std::vector<double>> rows((size_t)T, std::vector<double>((size_t)C));
    for (auto& r : rows) {
      double sum = 0;
      for (double& p : r) sum += (p = u(rng));
      for (double& p : r) p /= sum;
    }
    const double alpha = trial % 2 ? 1.5 : 0.5, beta = trial % 3 ? 0.0 : 0.7;
    std::map<std::vector<int64_t>, double> paths;  // labelling -> its paths' probability
    for (int64_t code = 0; code < 1024; ++code) {
      std::vector<int64_t> labels;
      double p = 1;
      int64_t prev = 0;
      for (int64_t t = 0, rest = code; t < T; ++t, rest /= C) {
        const int64_t c = rest % C;
        p *= rows[(size_t)t][(size_t)c];
        if (c != 0 && c != prev) labels.push_back(c);
        prev = c;
      }
      paths[labels] += p;
    }
    double best = -INFINITY;
    std::vector<int64_t> best_labels;
    const std::vector<int32_t> ids = lm_ids_for(lm, chars);
    for (const auto& [labels, p] : paths) {
      double score = std::log(p);
      CharLM::State st = lm.start();
      for (int64_t c : labels) {
        score += alpha * lm.log_prob(st, ids[(size_t)c]) + beta;
        st = lm.next(st, ids[(size_t)c]);
      }
      if (score > best) best = score, best_labels = labels;
    }
    BeamOptions o = with_lm(lm, chars, 4096, alpha, beta);
    o.min_prob = 0;
    const Decoded d = ctc_beam_decode(from_probs(rows), o)[0];
    INFO("trial " << trial);
    CHECK(d.labels == best_labels);
    CHECK(d.log_prob == Approx(best).epsilon(1e-9));
  }
}

TEST_CASE("beam search: a uniform share in the LM bounds how far it overrules a sure model", "[decode][lm]") {
  // The model is sure of "ab" (0.9025 against "a" at 0.0475: 2.94 nats); an LM that has only
  // seen a's makes b after a cost about 9 nats at weight 1, and "a" wins. Mixed half and half
  // with the uniform distribution over its 2 symbols (a, other), b costs at most log 4 = 1.39.
  const std::vector<std::string> chars{"a", "b"};
  const Tensor lp = from_probs({{0.05, 0.95, 0.0}, {0.05, 0.0, 0.95}});
  const CharLM only_a = CharLM::build(u32("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), 2, 1);
  BeamOptions o = with_lm(only_a, chars, 4, 1.0, 0.0);
  CHECK(ctc_beam_decode(lp, o)[0].labels == std::vector<int64_t>{1});
  o.lm_uniform = 0.5;
  const auto mixed = ctc_beam_decode(lp, o)[0];
  CHECK(mixed.labels == std::vector<int64_t>{1, 2});
  // Its score: the model's log P("ab") plus the mixed LM's log-probabilities of a and b.
  const int V = only_a.vocab_size();
  const CharLM::State s0 = only_a.start(), s1 = only_a.next(s0, only_a.id(U'a'));
  auto mix = [&](double l) { return std::log(0.5 * std::exp(l) + 0.5 / (V + 1)); };
  CHECK(mixed.log_prob == Approx(std::log(0.95 * 0.95) + mix(only_a.log_prob(s0, only_a.id(U'a'))) +
                                 mix(only_a.log_prob(s1, only_a.id(U'b')))));
  o.lm_uniform = 1.0;
  CHECK_THROWS_WITH(ctc_beam_decode(lp, o), Catch::Contains("lm_uniform must be in [0, 1)"));
  o.lm_uniform = -0.1;
  CHECK_THROWS_WITH(ctc_beam_decode(lp, o), Catch::Contains("lm_uniform must be in [0, 1)"));
}

TEST_CASE("beam search: each sequence of a batch reads as on its own, on any thread count", "[decode][lm]") {
  const CharLM lm = CharLM::build(u32(kText), 5);
  const std::vector<std::string> chars{"t", "h", "e", " ", "a", "c"};
  const int saved = num_threads();
  const Tensor logits = det_uniform({14, 9, 7}, 31, -3, 3);
  const std::vector<int64_t> lengths{14, 3, 9, 14, 1, 7, 12, 14, 5};
  for (const BeamOptions& o : {BeamOptions{}, with_lm(lm, chars, 5, 0.6, 0.5)}) {
    set_num_threads(1);
    const auto one = ctc_beam_decode(logits, o, lengths);
    set_num_threads(3);
    const auto three = ctc_beam_decode(logits, o, lengths);
    for (int64_t n = 0; n < 9; ++n) {
      INFO("sequence " << n);
      const auto alone = ctc_beam_decode(logits.narrow(1, n, 1).contiguous(), o, {lengths[(size_t)n]});
      CHECK(one[(size_t)n].labels == alone[0].labels);
      CHECK(three[(size_t)n].labels == alone[0].labels);
      CHECK(three[(size_t)n].frames == alone[0].frames);
      CHECK(three[(size_t)n].log_prob == alone[0].log_prob);
      CHECK(one[(size_t)n].log_prob == alone[0].log_prob);
    }
  }
  set_num_threads(saved);
}

namespace {
// A plain prefix beam search, the textbook way: prefixes as label vectors in a map, the LM's
// state rebuilt from a prefix's labels, every class a candidate (min_prob 0). What the trie,
// its table of children and the remembered LM answers of ctc_beam_decode must agree with.
Decoded reference_beam(const Tensor& lp3, const CharLM& lm, const std::vector<int32_t>& ids, int64_t width,
                       double alpha, double beta, double uniform) {
  const Tensor lp = log_softmax(lp3, 2).contiguous();
  const int64_t T = lp.size(0), C = lp.size(2);
  const double* y = lp.data<double>();
  auto lse = [](double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    return std::max(a, b) + std::log1p(std::exp(-std::abs(a - b)));
  };
  auto lm_score = [&](const std::vector<int64_t>& prefix, int64_t c) {
    CharLM::State st = lm.start();
    for (int64_t l : prefix) st = lm.next(st, ids[(size_t)l]);
    double l = lm.log_prob(st, ids[(size_t)c]);
    if (uniform > 0) l = std::log((1 - uniform) * std::exp(l) + uniform / (lm.vocab_size() + 1));
    return alpha * l + beta;
  };
  using Scores = std::pair<double, double>;  // ending in a blank, in the last label
  std::vector<std::pair<std::vector<int64_t>, Scores>> beams{{{}, {0.0, -INFINITY}}};
  for (int64_t t = 0; t < T; ++t) {
    std::map<std::vector<int64_t>, Scores> next;
    auto add = [&](const std::vector<int64_t>& l, double p, bool blank_end) {
      auto it = next.emplace(l, Scores{-INFINITY, -INFINITY}).first;
      double& slot = blank_end ? it->second.first : it->second.second;
      slot = lse(slot, p);
    };
    for (const auto& [l, sc] : beams) {
      const double total = lse(sc.first, sc.second);
      add(l, total + y[t * C], true);
      for (int64_t c = 1; c < C; ++c) {
        std::vector<int64_t> longer = l;
        longer.push_back(c);
        const double yc = y[t * C + c], lmc = lm_score(l, c);
        if (!l.empty() && l.back() == c) {
          add(l, sc.second + yc, false);
          add(longer, sc.first + yc + lmc, false);
        } else {
          add(longer, total + yc + lmc, false);
        }
      }
    }
    beams.assign(next.begin(), next.end());
    std::stable_sort(beams.begin(), beams.end(), [&](const auto& a, const auto& b) {
      return lse(a.second.first, a.second.second) > lse(b.second.first, b.second.second);
    });
    if ((int64_t)beams.size() > width) beams.resize((size_t)width);
  }
  Decoded d;
  d.labels = beams[0].first;
  d.log_prob = lse(beams[0].second.first, beams[0].second.second);
  return d;
}
}  // namespace

TEST_CASE("beam search with an LM on long lines agrees with a plain prefix beam search, LM after LM on one thread",
          "[decode][lm]") {
  // 240 frames over blank + 6 characters with every class a candidate: the trie grows to
  // thousands of prefixes, so the table of children is doubled several times during a line.
  // Two LMs (and two uniform shares) in turn on the same thread: the LM answers the search
  // remembers from line to line must be those of the LM and share of the line at hand.
  const std::vector<std::string> chars{"t", "h", "e", " ", "a", "c"};
  const CharLM lm5 = CharLM::build(u32(kText), 5);
  const CharLM lm3 = CharLM::build(u32("each cat ate the hat; the hat ate a cat. "), 3, 1);
  const int saved = num_threads();
  set_num_threads(1);
  struct Case {
    const CharLM* lm;
    double uniform;
    uint64_t seed;
  };
  const std::vector<Case> cases{{&lm5, 0.0, 41}, {&lm3, 0.0, 41}, {&lm5, 0.0, 41}, {&lm5, 0.2, 41},
                                {&lm3, 0.2, 42}, {&lm5, 0.0, 43}};
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& cs = cases[k];
    const Tensor logits = det_uniform({240, 1, 7}, cs.seed, -2, 2);
    BeamOptions o = with_lm(*cs.lm, chars, 8, 0.5, 0.3);
    o.lm_uniform = cs.uniform;
    o.min_prob = 0;
    const Decoded d = ctc_beam_decode(logits, o)[0];
    const Decoded ref = reference_beam(logits.to(DType::f64), *cs.lm, o.lm_ids, 8, 0.5, 0.3, cs.uniform);
    INFO("case " << k);
    CHECK(d.labels.size() > 40);
    CHECK(d.labels == ref.labels);
    CHECK(d.log_prob == Approx(ref.log_prob).epsilon(1e-12));
  }
  set_num_threads(saved);
}

TEST_CASE("beam search: an LM of weight 0 changes nothing", "[decode][lm]") {
  const CharLM lm = CharLM::build(u32(kText), 5);
  const std::vector<std::string> chars{"t", "h", "e", " "};
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Tensor logits = det_uniform({10, 2, 5}, seed, -3, 3);
    const auto plain = ctc_beam_decode(logits, 6);
    const auto zero = ctc_beam_decode(logits, with_lm(lm, chars, 6, 0.0, 0.0));
    for (size_t n = 0; n < 2; ++n) {
      INFO("seed " << seed << " sample " << n);
      CHECK(zero[n].labels == plain[n].labels);
      CHECK(zero[n].log_prob == Approx(plain[n].log_prob));
    }
  }
}

TEST_CASE("beam search: where the best path is not the best labelling, beam is right and greedy wrong", "[decode]") {
  // Three frames, classes blank, a, b, each frame blank .4, a .35, b .25. The best path is
  // blank blank blank -> "" (0.064), but "a" collects six paths (0.309).
  const Tensor lp = from_probs({{0.4, 0.35, 0.25}, {0.4, 0.35, 0.25}, {0.4, 0.35, 0.25}});
  const auto g = ctc_greedy_decode(lp);
  const auto b = ctc_beam_decode(lp, 10);
  CHECK(g[0].labels.empty());
  // P("a"): paths over {blank, a} with at least one a and a single run of a's: a__, _a_, __a,
  // aa_, _aa, aaa = 3 * .35 * .16 + 2 * .35^2 * .4 + .35^3
  const double p_a = 3 * 0.35 * 0.16 + 2 * 0.35 * 0.35 * 0.4 + 0.35 * 0.35 * 0.35;
  CHECK(b[0].labels == std::vector<int64_t>{1});
  CHECK(std::exp(b[0].log_prob) == Approx(p_a));
  CHECK(p_a > 0.064);
}

TEST_CASE("decoding stays finite on probabilities of 0 and 1, a single frame and empty results", "[decode][lm]") {
  const CharLM lm = CharLM::build(u32("abababab"), 3);
  const std::vector<std::string> chars{"a", "b"};
  // One-hot frames: a _ b b -> "ab", every probability exactly 0 or 1.
  const Tensor onehot = from_probs({{0, 1, 0}, {1, 0, 0}, {0, 0, 1}, {0, 0, 1}});
  for (const BeamOptions& o : {BeamOptions{}, with_lm(lm, chars, 10, 0.8, 1.0)}) {
    const auto b = ctc_beam_decode(onehot, o);
    CHECK(b[0].labels == std::vector<int64_t>{1, 2});
    CHECK(b[0].frames == std::vector<int64_t>{0, 2});
    CHECK(b[0].char_confidence == std::vector<double>{1.0, 1.0});
    CHECK(b[0].confidence == 1.0);
    CHECK(std::isfinite(b[0].log_prob));
  }
  const auto g = ctc_greedy_decode(onehot);
  CHECK(g[0].labels == std::vector<int64_t>{1, 2});
  CHECK(g[0].log_prob == 0.0);
  CHECK(g[0].char_confidence == std::vector<double>{1.0, 1.0});
  // T = 1.
  const Tensor one = from_probs({{0.2, 0.7, 0.1}});
  for (const BeamOptions& o : {BeamOptions{}, with_lm(lm, chars, 3, 0.5, 0.0)}) {
    const auto b = ctc_beam_decode(one, o);
    CHECK(b[0].labels == std::vector<int64_t>{1});
    CHECK(b[0].char_confidence[0] == Approx(0.7));
    CHECK(std::isfinite(b[0].log_prob));
  }
  // Empty results: all blank (certain), and no frames at all.
  const Tensor blank = from_probs({{1, 0, 0}, {1, 0, 0}});
  for (const BeamOptions& o : {BeamOptions{}, with_lm(lm, chars, 4, 0.5, 0.5)}) {
    const auto b = ctc_beam_decode(blank, o);
    CHECK(b[0].labels.empty());
    CHECK(b[0].char_confidence.empty());
    CHECK(b[0].log_prob == 0.0);
    CHECK(b[0].confidence == 1.0);
    const auto none = ctc_beam_decode(blank, o, {0});
    CHECK(none[0].labels.empty());
    CHECK(none[0].log_prob == 0.0);
  }
  // Huge logits (softmax saturates to exactly 0 and 1 in float).
  const Tensor big = Tensor::from_vector(std::vector<float>{0, 1e30f, -1e30f, 1e30f, 0, 0}, {2, 1, 3});
  const auto b = ctc_beam_decode(big, with_lm(lm, chars, 5, 0.5, 0.0));
  CHECK(b[0].labels == std::vector<int64_t>{1});
  CHECK(std::isfinite(b[0].log_prob));
}

TEST_CASE("beam options are checked", "[decode][lm]") {
  const CharLM lm = CharLM::build(u32("abab"), 2);
  const Tensor lp = det_uniform({3, 1, 3}, 1);
  BeamOptions o = with_lm(lm, {"a", "b"}, 4, 0.5, 0.0);
  o.lm_ids.pop_back();
  CHECK_THROWS_WITH(ctc_beam_decode(lp, o), Catch::Contains("expected 3 LM ids"));
  o = with_lm(lm, {"a", "b"}, 4, 0.5, 0.0);
  o.lm_ids[1] = 99;
  CHECK_THROWS_WITH(ctc_beam_decode(lp, o), Catch::Contains("LM id 99 of class 1"));
  o = with_lm(lm, {"a", "b"}, 4, std::nan(""), 0.0);
  CHECK_THROWS_WITH(ctc_beam_decode(lp, o), Catch::Contains("must be finite"));
  o = BeamOptions{};
  o.min_prob = 1.0;
  CHECK_THROWS_WITH(ctc_beam_decode(lp, o), Catch::Contains("min_prob"));
  // A charset character the LM never saw, or one of several code points, is "other".
  CHECK(lm.id_utf8("z") == lm.vocab_size() + 1);
  CHECK(lm.id_utf8("ab") == lm.vocab_size() + 1);
  CHECK(lm.id_utf8("a") == lm.id(U'a'));
}
