// Greedy and prefix-beam CTC decoding (see ctc_decode.h).
//
// Greedy decoding works where the scores are: the per-frame argmax and the few log-probabilities
// it needs are computed by the ops on the scores' device (a GPU included), and only (T, N)
// values come back to the host. Beam search needs every class of every frame on the host, so it
// copies the whole (T, N, C) log-probabilities there.
#include "models/ctc_decode.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "ops/index.h"
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

// Checks the arguments; returns the frames per sample (all T when `lengths` is empty).
std::vector<int64_t> checked_lengths(const char* op, const Tensor& scores, const std::vector<int64_t>& lengths,
                                     int64_t blank) {
  OCRT_CHECK(scores.defined() && scores.dim() == 3, op, ": expected scores (T, N, C), got ",
             scores.defined() ? shape_str(scores.shape()) : std::string("undefined"));
  OCRT_CHECK(is_floating(scores.dtype()), op, ": expected float scores, got ", dtype_name(scores.dtype()));
  const int64_t T = scores.size(0), N = scores.size(1), C = scores.size(2);
  OCRT_CHECK(blank >= 0 && blank < C, op, ": blank ", blank, " is not a class of [0, ", C, ")");
  std::vector<int64_t> out = lengths;
  if (out.empty()) out.assign((size_t)N, T);
  OCRT_CHECK((int64_t)out.size() == N, op, ": expected ", N, " lengths, got ", out.size());
  for (size_t n = 0; n < out.size(); ++n)
    OCRT_CHECK(out[n] >= 0 && out[n] <= T, op, ": length ", out[n], " of sample ", n, " is outside [0, ", T, "]");
  return out;
}

Scores prepare(const char* op, const Tensor& scores, const std::vector<int64_t>& lengths, int64_t blank) {
  Scores s{{}, scores.size(0), scores.size(1), scores.size(2), checked_lengths(op, scores, lengths, blank)};
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
  const std::vector<int64_t> len = checked_lengths("ctc_greedy_decode", scores, lengths, blank);
  const int64_t T = scores.size(0), N = scores.size(1);
  // Per frame (T, N): the best class, its log-probability, and the blank's log-probability (the
  // confidence of an empty result). The argmax is taken on the scores themselves (log_softmax
  // subtracts the same constant from a whole frame, so it is the same class, and no rounding of
  // that subtraction can make two classes tie); the first class wins a tie.
  std::vector<int64_t> best;
  std::vector<double> best_lp, blank_lp;
  if (T * N > 0) {
    NoGradGuard no_grad;
    const Tensor x = scores.detach();
    const Tensor lp = log_softmax(x.to(DType::f64), 2);
    const Tensor idx = argmax(x, 2, /*keepdim=*/true);
    best = idx.to_vector<int64_t>();
    best_lp = gather(lp, 2, idx).to_vector<double>();
    blank_lp = lp.narrow(2, blank, 1).to_vector<double>();
  }
  auto at = [&](int64_t t, int64_t n) { return (size_t)(t * N + n); };

  std::vector<Decoded> out((size_t)N);
  for (int64_t n = 0; n < N; ++n) {
    Decoded& d = out[(size_t)n];
    const int64_t frames = len[(size_t)n];
    int64_t prev = blank;
    double emitted = 0;  // sum of the emitted characters' probabilities
    for (int64_t t = 0; t < frames; ++t) {
      const int64_t c = best[at(t, n)];
      d.log_prob += best_lp[at(t, n)];
      if (c != blank && c != prev) {
        d.labels.push_back(c);
        d.frames.push_back(t);
        emitted += std::exp(best_lp[at(t, n)]);
      }
      prev = c;
    }
    // The confidence as in confidence_of(): a character's probability where it was emitted is
    // its frame's best.
    if (!d.labels.empty()) {
      d.confidence = emitted / (double)d.labels.size();
    } else if (frames == 0) {
      d.confidence = 1.0;
    } else {
      double sum = 0;
      for (int64_t t = 0; t < frames; ++t) sum += std::exp(blank_lp[at(t, n)]);
      d.confidence = sum / (double)frames;
    }
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
