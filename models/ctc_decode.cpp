// Greedy and prefix-beam CTC decoding (see ctc_decode.h).
#include "models/ctc_decode.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "ops/reduce.h"

namespace ocrt::nn {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double lse(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

// Log-probabilities (T, N, C) as a host vector, and the checked lengths.
struct Scores {
  std::vector<double> y;
  int64_t T, N, C;
  std::vector<int64_t> lengths;
  double at(int64_t t, int64_t n, int64_t c) const { return y[(size_t)((t * N + n) * C + c)]; }
};

Scores prepare(const char* op, const Tensor& scores, const std::vector<int64_t>& lengths, int64_t blank) {
  OCRT_CHECK(scores.defined() && scores.dim() == 3, op, ": expected scores (T, N, C), got ",
             scores.defined() ? shape_str(scores.shape()) : std::string("undefined"));
  OCRT_CHECK(is_floating(scores.dtype()), op, ": expected float scores, got ", dtype_name(scores.dtype()));
  Scores s{{}, scores.size(0), scores.size(1), scores.size(2), lengths};
  OCRT_CHECK(blank >= 0 && blank < s.C, op, ": blank ", blank, " is not a class of [0, ", s.C, ")");
  if (s.lengths.empty()) s.lengths.assign((size_t)s.N, s.T);
  OCRT_CHECK((int64_t)s.lengths.size() == s.N, op, ": expected ", s.N, " lengths, got ", s.lengths.size());
  for (size_t n = 0; n < s.lengths.size(); ++n)
    OCRT_CHECK(s.lengths[n] >= 0 && s.lengths[n] <= s.T, op, ": length ", s.lengths[n], " of sample ", n,
               " is outside [0, ", s.T, "]");
  NoGradGuard no_grad;
  s.y = log_softmax(scores.detach().to(Device::cpu()).to(DType::f64), 2).to_vector<double>();
  return s;
}

double confidence_of(const Scores& s, int64_t n, const Decoded& d, int64_t blank) {
  if (d.labels.empty()) {
    const int64_t T = s.lengths[(size_t)n];
    if (T == 0) return 1.0;
    double sum = 0;
    for (int64_t t = 0; t < T; ++t) sum += std::exp(s.at(t, n, blank));
    return sum / (double)T;
  }
  double sum = 0;
  for (size_t k = 0; k < d.labels.size(); ++k) sum += std::exp(s.at(d.frames[k], n, d.labels[k]));
  return sum / (double)d.labels.size();
}

}  // namespace

std::vector<Decoded> ctc_greedy_decode(const Tensor& scores, const std::vector<int64_t>& lengths, int64_t blank) {
  const Scores s = prepare("ctc_greedy_decode", scores, lengths, blank);
  std::vector<Decoded> out((size_t)s.N);
  for (int64_t n = 0; n < s.N; ++n) {
    Decoded& d = out[(size_t)n];
    int64_t prev = blank;
    for (int64_t t = 0; t < s.lengths[(size_t)n]; ++t) {
      int64_t best = 0;
      for (int64_t c = 1; c < s.C; ++c)
        if (s.at(t, n, c) > s.at(t, n, best)) best = c;
      d.log_prob += s.at(t, n, best);
      if (best != blank && best != prev) {
        d.labels.push_back(best);
        d.frames.push_back(t);
      }
      prev = best;
    }
    d.confidence = confidence_of(s, n, d, blank);
  }
  return out;
}

std::vector<Decoded> ctc_beam_decode(const Tensor& scores, int64_t beam_width, const std::vector<int64_t>& lengths,
                                     int64_t blank) {
  OCRT_CHECK(beam_width >= 1, "ctc_beam_decode: beam width must be >= 1, got ", beam_width);
  if (beam_width == 1) return ctc_greedy_decode(scores, lengths, blank);  // see the header
  const Scores s = prepare("ctc_beam_decode", scores, lengths, blank);
  // A prefix's probability of ending (so far) in a blank and in its last label, and the frames
  // where its labels were emitted along its most likely path.
  struct Beam {
    double pb = kNegInf, pnb = kNegInf;
    std::vector<int64_t> frames;
    double best_path = kNegInf;  // the best single contribution, which decides `frames`
    double total() const { return lse(pb, pnb); }
  };
  using Beams = std::map<std::vector<int64_t>, Beam>;
  std::vector<Decoded> out((size_t)s.N);
  for (int64_t n = 0; n < s.N; ++n) {
    Beams beams;
    beams[{}] = Beam{0.0, kNegInf, {}, 0.0};
    for (int64_t t = 0; t < s.lengths[(size_t)n]; ++t) {
      Beams next;
      auto extend = [&](const std::vector<int64_t>& prefix, const Beam& from, double p, bool blank_end, int64_t frame) {
        Beam& b = next[prefix];
        if (blank_end) b.pb = lse(b.pb, p);
        else b.pnb = lse(b.pnb, p);
        if (p > b.best_path) {
          b.best_path = p;
          b.frames = from.frames;
          if (frame >= 0) b.frames.push_back(frame);
        }
      };
      for (const auto& [prefix, b] : beams) {
        const double total = b.total();
        extend(prefix, b, total + s.at(t, n, blank), true, -1);
        for (int64_t c = 0; c < s.C; ++c) {
          if (c == blank) continue;
          const double y = s.at(t, n, c);
          std::vector<int64_t> longer = prefix;
          longer.push_back(c);
          if (!prefix.empty() && prefix.back() == c) {
            extend(prefix, b, b.pnb + y, false, -1);  // the repeat collapses into the same label
            extend(longer, b, b.pb + y, false, t);     // a blank in between: a new label
          } else {
            extend(longer, b, total + y, false, t);
          }
        }
      }
      // Keep the beam_width most likely prefixes (ties broken by the prefix, for determinism).
      std::vector<std::pair<double, const std::vector<int64_t>*>> ranked;
      for (const auto& [prefix, b] : next) ranked.emplace_back(b.total(), &prefix);
      const size_t keep = std::min(ranked.size(), (size_t)beam_width);
      std::partial_sort(ranked.begin(), ranked.begin() + (ptrdiff_t)keep, ranked.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : *a.second < *b.second;
      });
      Beams kept;
      for (size_t k = 0; k < keep; ++k) kept[*ranked[k].second] = next[*ranked[k].second];
      beams = std::move(kept);
    }
    const std::vector<int64_t>* best = nullptr;
    double best_p = kNegInf;
    for (const auto& [prefix, b] : beams)
      if (best == nullptr || b.total() > best_p) best = &prefix, best_p = b.total();
    Decoded& d = out[(size_t)n];
    d.labels = *best;
    d.frames = beams[*best].frames;
    d.log_prob = best_p;
    d.confidence = confidence_of(s, n, d, blank);
  }
  return out;
}

}  // namespace ocrt::nn
