// CTC decoding: greedy collapses repeats and drops blanks; beam width 1 equals greedy; on a
// distribution where the best path is wrong, beam search finds the most likely labelling;
// confidences and frames; argument errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "gradcheck.h"
#include "models/ctc_decode.h"
#include "ops/reduce.h"

#include <map>

using namespace ocrt;
using namespace ocrt::nn;
using ocrt::testing::det_uniform;

namespace {
// Log-probabilities (T, 1, C) from per-frame probability rows.
Tensor from_probs(const std::vector<std::vector<double>>& rows) {
  std::vector<double> v;
  for (const auto& r : rows)
    for (double p : r) v.push_back(std::log(p));
  return Tensor::from_vector(v, {(int64_t)rows.size(), 1, (int64_t)rows[0].size()});
}
}  // namespace

TEST_CASE("greedy decoding collapses repeats, drops blanks and keeps a blank-separated repeat", "[decode]") {
  // Frames argmax: a a _ a b b _ _ c   (blank = 0, a = 1, b = 2, c = 3)
  const std::vector<int64_t> path{1, 1, 0, 1, 2, 2, 0, 0, 3};
  std::vector<std::vector<double>> rows;
  for (int64_t c : path) {
    std::vector<double> r(4, 0.1);
    r[(size_t)c] = 0.7;
    rows.push_back(r);
  }
  auto d = ctc_greedy_decode(from_probs(rows));
  REQUIRE(d.size() == 1);
  CHECK(d[0].labels == std::vector<int64_t>{1, 1, 2, 3});
  CHECK(d[0].frames == std::vector<int64_t>{0, 3, 4, 8});
  CHECK(d[0].confidence == Approx(0.7));
  // With a length of 5 frames only the first five count.
  auto short_d = ctc_greedy_decode(from_probs(rows), {5});
  CHECK(short_d[0].labels == std::vector<int64_t>{1, 1, 2});
}

TEST_CASE("beam search of width 1 gives greedy's labels on random distributions", "[decode]") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Tensor logits = det_uniform({12, 3, 5}, seed, -4, 4);
    auto g = ctc_greedy_decode(logits), b = ctc_beam_decode(logits, 1);
    for (size_t n = 0; n < g.size(); ++n) {
      INFO("seed " << seed << " sample " << n);
      CHECK(b[n].labels == g[n].labels);
    }
  }
}

TEST_CASE("a wide beam agrees with greedy where every frame is confident", "[decode]") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    // One class per frame gets 0.9 of the mass: the best path is then the best labelling.
    Tensor pick = det_uniform({15, 2, 1}, seed, 0, 5);
    const auto idx = pick.to_vector<double>();
    std::vector<double> v;
    for (double x : idx)
      for (int c = 0; c < 5; ++c) v.push_back(std::log(c == (int)x ? 0.9 : 0.025));
    Tensor lp = Tensor::from_vector(v, {15, 2, 5});
    auto g = ctc_greedy_decode(lp), b = ctc_beam_decode(lp, 5);
    for (size_t n = 0; n < 2; ++n) {
      INFO("seed " << seed << " sample " << n);
      CHECK(b[n].labels == g[n].labels);
      CHECK(b[n].frames == g[n].frames);
      CHECK(b[n].confidence == Approx(g[n].confidence));
    }
  }
}

TEST_CASE("beam search finds the labelling greedy misses", "[decode]") {
  // Two frames, P(blank) = 0.6, P(a) = 0.4 each. Best path: blank blank -> "" (0.36). But "a" has
  // three paths: a a, a _, _ a = 0.16 + 0.24 + 0.24 = 0.64.
  Tensor lp = from_probs({{0.6, 0.4}, {0.6, 0.4}});
  auto g = ctc_greedy_decode(lp);
  auto b = ctc_beam_decode(lp, 4);
  CHECK(g[0].labels.empty());
  CHECK(g[0].log_prob == Approx(std::log(0.36)));
  CHECK(b[0].labels == std::vector<int64_t>{1});
  CHECK(b[0].log_prob == Approx(std::log(0.64)));
  CHECK(b[0].frames.size() == 1);
}

TEST_CASE("beam search sums all alignments of a prefix (checked against enumeration)", "[decode]") {
  // T = 4, C = 3: the most likely labelling by brute force equals the beam result with a wide beam.
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Tensor logits = det_uniform({4, 1, 3}, 100 + seed, -2, 2);
    auto b = ctc_beam_decode(logits, 50);
    const auto lp = log_softmax(logits, 2).to_vector<double>();
    std::map<std::vector<int64_t>, double> mass;
    for (int code = 0; code < 81; ++code) {
      std::vector<int64_t> labels;
      double p = 1;
      int c = code, prev = 0;
      for (int t = 0; t < 4; ++t, c /= 3) {
        p *= std::exp(lp[(size_t)(t * 3 + c % 3)]);
        if (c % 3 != 0 && c % 3 != prev) labels.push_back(c % 3);
        prev = c % 3;
      }
      mass[labels] += p;
    }
    auto best = std::max_element(mass.begin(), mass.end(), [](auto& a, auto& b) { return a.second < b.second; });
    INFO("seed " << seed);
    CHECK(b[0].labels == best->first);
    CHECK(std::exp(b[0].log_prob) == Approx(best->second).epsilon(1e-9));
  }
}

TEST_CASE("decoding checks its arguments", "[decode]") {
  Tensor lp = det_uniform({3, 2, 4}, 1);
  CHECK_THROWS_WITH(ctc_greedy_decode(det_uniform({3, 4}, 1)), Catch::Contains("expected scores (T, N, C)"));
  CHECK_THROWS_WITH(ctc_greedy_decode(lp, {3}), Catch::Contains("expected 2 lengths"));
  CHECK_THROWS_WITH(ctc_greedy_decode(lp, {3, 4}), Catch::Contains("length 4 of sample 1 is outside [0, 3]"));
  CHECK_THROWS_WITH(ctc_beam_decode(lp, 0), Catch::Contains("beam width must be >= 1"));
  CHECK_THROWS_WITH(ctc_beam_decode(lp, 2, {}, 4), Catch::Contains("blank 4 is not a class"));
  // An empty result's confidence is the mean blank probability; lengths of 0 decode to nothing.
  auto d = ctc_greedy_decode(from_probs({{0.9, 0.1}, {0.7, 0.3}}));
  CHECK(d[0].labels.empty());
  CHECK(d[0].confidence == Approx(0.8));
  CHECK(ctc_beam_decode(lp, 3, {0, 0})[1].labels.empty());
}
