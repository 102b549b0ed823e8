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
#include <string>
#include <unordered_map>

#include "models/char_lm.h"

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
        d.char_confidence.push_back(std::exp(best_lp[at(t, n)]));
        emitted += d.char_confidence.back();
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

std::vector<int32_t> lm_ids_for(const CharLM& lm, const std::vector<std::string>& charset_chars) {
  std::vector<int32_t> ids{0};  // the blank
  for (const std::string& ch : charset_chars) ids.push_back(lm.id_utf8(ch));
  return ids;
}

std::vector<Decoded> ctc_beam_decode(const Tensor& scores, int64_t beam_width, const std::vector<int64_t>& lengths,
                                     int64_t blank) {
  BeamOptions o;
  o.beam_width = beam_width;
  return ctc_beam_decode(scores, o, lengths, blank);
}

std::vector<Decoded> ctc_beam_decode(const Tensor& scores, const BeamOptions& o, const std::vector<int64_t>& lengths,
                                     int64_t blank) {
  OCRT_CHECK(o.beam_width >= 1, "ctc_beam_decode: beam width must be >= 1, got ", o.beam_width);
  OCRT_CHECK(o.min_prob >= 0 && o.min_prob < 1, "ctc_beam_decode: min_prob must be in [0, 1), got ", o.min_prob);
  OCRT_CHECK(std::isfinite(o.lm_weight) && std::isfinite(o.lm_bonus), "ctc_beam_decode: LM weight and bonus must be finite, got ",
             o.lm_weight, " and ", o.lm_bonus);
  if (o.beam_width == 1 && o.lm == nullptr) return ctc_greedy_decode(scores, lengths, blank);  // see the header
  const Scores s = prepare("ctc_beam_decode", scores, lengths, blank);
  for (double y : s.y) OCRT_CHECK(!std::isnan(y), "ctc_beam_decode: the scores hold NaN");
  if (o.lm != nullptr) {
    OCRT_CHECK((int64_t)o.lm_ids.size() == s.C, "ctc_beam_decode: expected ", s.C, " LM ids (one per class), got ",
               o.lm_ids.size());
    for (int64_t c = 0; c < s.C; ++c)
      OCRT_CHECK(c == blank || (o.lm_ids[(size_t)c] >= 1 && o.lm_ids[(size_t)c] <= o.lm->vocab_size() + 1),
                 "ctc_beam_decode: LM id ", o.lm_ids[(size_t)c], " of class ", c, " is outside [1, ",
                 o.lm->vocab_size() + 1, "]");
  }
  const double log_min = o.min_prob > 0 ? std::log(o.min_prob) : kNegInf;

  // Prefixes live in a trie: a node is a prefix (its parent plus one label), created once with
  // its LM state and the LM's score for its last label, so a prefix costs the LM one lookup
  // however many frames it survives. The frames where a prefix's labels were emitted (along the
  // best contribution seen, which decides them) are a linked list through `links`.
  struct Node {
    int parent;
    int64_t label;
    CharLM::State state;
    double lm;  // alpha * log P_LM(label | parent) + beta
  };
  struct Link {
    int64_t frame;
    int prev;
  };
  struct Beam {
    int node;
    double pb = kNegInf, pnb = kNegInf;  // ending in a blank / in the last label
    double best_path = kNegInf;
    int frames = -1;  // head of the prefix's frame list in `links`
    double total() const { return lse(pb, pnb); }
  };
  std::vector<Decoded> out((size_t)s.N);
  for (int64_t n = 0; n < s.N; ++n) {
    std::vector<Node> nodes{{-1, -1, o.lm ? o.lm->start() : 0, 0.0}};
    std::unordered_map<uint64_t, int> children;  // node * C + label -> child node
    std::vector<Link> links;
    std::vector<Beam> beams{Beam{0, 0.0, kNegInf, 0.0, -1}};
    auto child = [&](int node, int64_t c) {
      const auto [it, inserted] = children.try_emplace((uint64_t)node * (uint64_t)s.C + (uint64_t)c, (int)nodes.size());
      if (inserted) {
        Node ch{node, c, 0, 0.0};
        if (o.lm != nullptr) {
          const int32_t id = o.lm_ids[(size_t)c];
          ch.state = o.lm->next(nodes[(size_t)node].state, id);
          ch.lm = o.lm_weight * o.lm->log_prob(nodes[(size_t)node].state, id) + o.lm_bonus;
        }
        nodes.push_back(ch);
      }
      return it->second;
    };
    std::vector<int64_t> candidates;
    for (int64_t t = 0; t < s.lengths[(size_t)n]; ++t) {
      // The classes tried at this frame: those above min_prob, and always the best one.
      candidates.clear();
      int64_t arg = 0;
      for (int64_t c = 0; c < s.C; ++c) {
        if (s.at(t, n, c) > s.at(t, n, arg)) arg = c;
        if (c != blank && s.at(t, n, c) >= log_min && s.at(t, n, c) > kNegInf) candidates.push_back(c);
      }
      if (arg != blank && s.at(t, n, arg) < log_min) candidates.push_back(arg);
      std::vector<Beam> next;
      std::unordered_map<int, size_t> where;  // node -> index in next
      auto extend = [&](int node, const Beam& from, double p, bool blank_end, int64_t frame) {
        if (p == kNegInf) return;  // a path of probability 0 changes nothing
        const auto [it, inserted] = where.try_emplace(node, next.size());
        if (inserted) next.push_back(Beam{node});
        Beam& b = next[it->second];
        if (blank_end) b.pb = lse(b.pb, p);
        else b.pnb = lse(b.pnb, p);
        if (p > b.best_path) {
          b.best_path = p;
          b.frames = from.frames;
          if (frame >= 0) {
            links.push_back({frame, from.frames});
            b.frames = (int)links.size() - 1;
          }
        }
      };
      for (const Beam& b : beams) {
        const double total = b.total();
        extend(b.node, b, total + s.at(t, n, blank), true, -1);
        for (int64_t c : candidates) {
          const double y = s.at(t, n, c);
          const int longer = child(b.node, c);
          const double lm = nodes[(size_t)longer].lm;
          if (nodes[(size_t)b.node].label == c) {
            extend(b.node, b, b.pnb + y, false, -1);     // the repeat collapses into the same label
            extend(longer, b, b.pb + y + lm, false, t);  // a blank in between: a new label
          } else {
            extend(longer, b, total + y + lm, false, t);
          }
        }
      }
      if (next.empty()) break;  // every class had probability 0: keep what we have
      // Keep the beam_width most likely prefixes (ties broken by node, which is deterministic).
      const size_t keep = std::min(next.size(), (size_t)o.beam_width);
      std::partial_sort(next.begin(), next.begin() + (ptrdiff_t)keep, next.end(), [](const Beam& a, const Beam& b) {
        const double ta = a.total(), tb = b.total();
        return ta != tb ? ta > tb : a.node < b.node;
      });
      next.resize(keep);
      beams = std::move(next);
    }
    const Beam& best = beams[0];  // sorted best first (or the start beam when no frame ran)
    Decoded& d = out[(size_t)n];
    for (int v = best.node; v > 0; v = nodes[(size_t)v].parent) d.labels.push_back(nodes[(size_t)v].label);
    std::reverse(d.labels.begin(), d.labels.end());
    for (int l = best.frames; l >= 0; l = links[(size_t)l].prev) d.frames.push_back(links[(size_t)l].frame);
    std::reverse(d.frames.begin(), d.frames.end());
    OCRT_CHECK(d.frames.size() == d.labels.size(), "ctc_beam_decode: internal error: ", d.frames.size(), " frames for ",
               d.labels.size(), " labels");
    d.log_prob = best.total();
    for (size_t k = 0; k < d.labels.size(); ++k) d.char_confidence.push_back(std::exp(s.at(d.frames[k], n, d.labels[k])));
    d.confidence = confidence_of(s, n, d, blank);
  }
  return out;
}

}  // namespace ocrt::nn
