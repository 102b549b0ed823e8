// Greedy and prefix-beam CTC decoding (see ctc_decode.h).
//
// Greedy decoding works where the scores are: the per-frame argmax and the few log-probabilities
// it needs are computed by the ops on the scores' device (a GPU included), and only (T, N)
// values come back to the host. Beam search needs every class of every frame on the host, so it
// copies the whole (T, N, C) log-probabilities there.
#include "models/ctc_decode.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <string>

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

// Log-probabilities (T, N, C) on the host, and the checked lengths. Read where they are, in the
// tensor (whose memory the CPU allocator hands out again), not copied into a vector of their own:
// a fresh block of megabytes for every batch of lines in doubt, faulted in page by page.
struct Scores {
  Tensor lp;  // float64, contiguous
  const double* y = nullptr;
  int64_t T, N, C;
  std::vector<int64_t> lengths;
  double at(int64_t t, int64_t n, int64_t c) const { return y[(t * N + n) * C + c]; }
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
  Scores s{{}, nullptr, scores.size(0), scores.size(1), scores.size(2), checked_lengths(op, scores, lengths, blank)};
  NoGradGuard no_grad;
  s.lp = log_softmax(scores.detach().to(Device::cpu()).to(DType::f64), 2).contiguous();
  s.y = s.lp.data<double>();
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

namespace {

void check_beam_options(const BeamOptions& o) {
  OCRT_CHECK(o.beam_width >= 1, "ctc_beam_decode: beam width must be >= 1, got ", o.beam_width);
  OCRT_CHECK(o.min_prob >= 0 && o.min_prob < 1, "ctc_beam_decode: min_prob must be in [0, 1), got ", o.min_prob);
  OCRT_CHECK(std::isfinite(o.lm_weight) && std::isfinite(o.lm_bonus), "ctc_beam_decode: LM weight and bonus must be finite, got ",
             o.lm_weight, " and ", o.lm_bonus);
  OCRT_CHECK(o.lm_uniform >= 0 && o.lm_uniform < 1, "ctc_beam_decode: lm_uniform must be in [0, 1), got ", o.lm_uniform);
}

void check_lm_ids(const BeamOptions& o, int64_t classes, int64_t blank) {
  OCRT_CHECK((int64_t)o.lm_ids.size() == classes, "ctc_beam_decode: expected ", classes, " LM ids (one per class), got ",
             o.lm_ids.size());
  for (int64_t c = 0; c < classes; ++c)
    OCRT_CHECK(c == blank || (o.lm_ids[(size_t)c] >= 1 && o.lm_ids[(size_t)c] <= o.lm->vocab_size() + 1),
               "ctc_beam_decode: LM id ", o.lm_ids[(size_t)c], " of class ", c, " is outside [1, ",
               o.lm->vocab_size() + 1, "]");
}

// Prefix beam search over one sequence n of the scores. Prefixes live in a trie: a node is a
// prefix (its parent plus one label), created once with its LM state and the LM's score for
// its last label, so a prefix costs the LM one lookup however many frames it survives. The
// frames where a prefix's labels were emitted (along the best contribution seen, which decides
// them) are a linked list through `links_`.
class BeamSearch {
 public:
  BeamSearch(const Scores& s, int64_t n, const BeamOptions& o, int64_t blank)
      : s_(s), n_(n), o_(o), blank_(blank), log_min_(o.min_prob > 0 ? std::log(o.min_prob) : kNegInf),
        nodes_(storage().nodes), links_(storage().links), beams_(storage().beams), next_(storage().next),
        slot_(storage().slot), candidates_(storage().candidates), children_(storage().children) {
    nodes_.clear(), links_.clear(), beams_.clear(), next_.clear(), slot_.clear(), candidates_.clear();
    children_.assign(kFirstChildSlots, ChildSlot{});
    nodes_.push_back(Node{-1, -1, o.lm ? o.lm->start() : 0, 0.0});
    slot_.push_back(-1);
    beams_.push_back(Beam{0, 0.0, kNegInf, 0.0, -1, 0.0});
  }

  // Every frame of the sequence; false from the frame where every class had probability 0
  // (the beams then stay as they were).
  void run() {
    for (int64_t t = 0; t < s_.lengths[(size_t)n_]; ++t)
      if (!step(t)) break;
  }

  // The best prefix: its labels, the frames they were emitted at, their confidences.
  Decoded best() const {
    const Beam& best = beams_[0];  // sorted best first (or the start beam when no frame ran)
    Decoded d;
    for (int v = best.node; v > 0; v = nodes_[(size_t)v].parent) d.labels.push_back(nodes_[(size_t)v].label);
    std::reverse(d.labels.begin(), d.labels.end());
    for (int l = best.frames; l >= 0; l = links_[(size_t)l].prev) d.frames.push_back(links_[(size_t)l].frame);
    std::reverse(d.frames.begin(), d.frames.end());
    OCRT_CHECK(d.frames.size() == d.labels.size(), "ctc_beam_decode: internal error: ", d.frames.size(), " frames for ",
               d.labels.size(), " labels");
    d.log_prob = best.total();
    for (size_t k = 0; k < d.labels.size(); ++k)
      d.char_confidence.push_back(std::exp(s_.at(d.frames[k], n_, d.labels[k])));
    d.confidence = confidence_of(s_, n_, d, blank_);
    return d;
  }

 private:
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
    int frames = -1;  // head of the prefix's frame list in `links_`
    double sum = 0;   // total(), kept once a step's extensions are all in (the sort's key)
    double total() const { return lse(pb, pnb); }
  };

  // The prefix `node` + label c (made, with its LM score, the first time it is asked for). The
  // children are found through one open-addressing table keyed by (node, label) for the whole
  // trie: a prefix that survives many frames is asked for the children of every frame's
  // candidates, and walking a list of them (as before) took half of the search's time.
  int child(int node, int64_t c) {
    const uint64_t key = (((uint64_t)node << 32) | (uint64_t)c) + 1;  // 0 marks an empty slot
    size_t mask = children_.size() - 1;
    size_t at = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
    for (; children_[at].key != 0; at = (at + 1) & mask)
      if (children_[at].key == key) return children_[at].child;
    Node ch{node, c, 0, 0.0};
    if (o_.lm != nullptr) {
      const int32_t id = o_.lm_ids[(size_t)c];
      const CharLM::State parent_state = nodes_[(size_t)node].state;
      ch.state = o_.lm->next(parent_state, id);
      ch.lm = o_.lm_weight * lm_log_prob(parent_state, id) + o_.lm_bonus;
    }
    const int k = (int)nodes_.size();
    nodes_.push_back(ch);
    slot_.push_back(-1);
    children_[at] = {key, k};
    if (2 * nodes_.size() > children_.size()) grow_children();
    return k;
  }

  // Doubles the child table (kept at most half full) and puts every entry back.
  void grow_children() {
    std::vector<ChildSlot> old;
    old.swap(children_);
    children_.assign(2 * old.size(), ChildSlot{});
    const size_t mask = children_.size() - 1;
    for (const ChildSlot& e : old) {
      if (e.key == 0) continue;
      size_t at = (size_t)((e.key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
      while (children_[at].key != 0) at = (at + 1) & mask;
      children_[at] = e;
    }
  }

  // log P_LM(id | state), mixed with the uniform share. The answers are remembered by each
  // thread in a direct-mapped table across lines: a page's lines and a line's beams ask for the
  // same contexts again and again, and each fresh answer is up to a dozen lookups in the model's
  // hash tables, which are far larger than the caches (4.5 MB for the shipped LM). A remembered
  // answer is the same double, so the beams are those of the uncached search.
  double lm_log_prob(CharLM::State state, int32_t id) {
    LMMemo& m = storage().lm_memo;
    if (m.serial != o_.lm->serial() || m.uniform != o_.lm_uniform) {
      m.entries.assign(LMMemo::kSize, LMMemo::Entry{});
      m.serial = o_.lm->serial(), m.uniform = o_.lm_uniform;
    }
    // state holds at most kMaxOrder - 1 symbols of kBits, so the pair fits in 64 bits; + 1
    // keeps 0 free for "empty".
    static_assert(CharLM::kMaxOrder * CharLM::kBits < 64);
    const uint64_t key = ((state << CharLM::kBits) | (uint64_t)id) + 1;
    LMMemo::Entry& e = m.entries[(size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - LMMemo::kBits))];
    if (e.key == key) return e.log_prob;
    double lp = o_.lm->log_prob(state, id);
    if (o_.lm_uniform > 0)
      lp = std::log((1 - o_.lm_uniform) * std::exp(lp) + o_.lm_uniform / (o_.lm->vocab_size() + 1));
    e = {key, lp};
    return lp;
  }

  // The classes tried at frame t: those above min_prob, and always the best one.
  void candidates_at(int64_t t) {
    candidates_.clear();
    int64_t arg = 0;
    for (int64_t c = 0; c < s_.C; ++c) {
      if (s_.at(t, n_, c) > s_.at(t, n_, arg)) arg = c;
      if (c != blank_ && s_.at(t, n_, c) >= log_min_ && s_.at(t, n_, c) > kNegInf) candidates_.push_back(c);
    }
    if (arg != blank_ && s_.at(t, n_, arg) < log_min_) candidates_.push_back(arg);
  }

  // Adds probability p (a path from beam `from`) to prefix `node` of the next frame's beams,
  // ending in a blank or in the label; `frame` >= 0 when the path emits the prefix's last label.
  void extend(int node, const Beam& from, double p, bool blank_end, int64_t frame) {
    if (p == kNegInf) return;  // a path of probability 0 changes nothing
    int& at = slot_[(size_t)node];
    if (at < 0) {
      at = (int)next_.size();
      next_.push_back(Beam{node});
    }
    Beam& b = next_[(size_t)at];
    if (blank_end) b.pb = lse(b.pb, p);
    else b.pnb = lse(b.pnb, p);
    if (p > b.best_path) {
      b.best_path = p;
      b.frames = from.frames;
      if (frame >= 0) {
        links_.push_back({frame, from.frames});
        b.frames = (int)links_.size() - 1;
      }
    }
  }

  bool step(int64_t t) {
    candidates_at(t);
    next_.clear();
    const double y_blank = s_.at(t, n_, blank_);
    for (const Beam& b : beams_) {
      const double total = b.sum;
      extend(b.node, b, total + y_blank, true, -1);
      for (int64_t c : candidates_) {
        const double y = s_.at(t, n_, c);
        const int longer = child(b.node, c);
        const double lm = nodes_[(size_t)longer].lm;
        if (nodes_[(size_t)b.node].label == c) {
          extend(b.node, b, b.pnb + y, false, -1);     // the repeat collapses into the same label
          extend(longer, b, b.pb + y + lm, false, t);  // a blank in between: a new label
        } else {
          extend(longer, b, total + y + lm, false, t);
        }
      }
    }
    for (Beam& b : next_) slot_[(size_t)b.node] = -1, b.sum = b.total();
    if (next_.empty()) return false;
    // Keep the beam_width most likely prefixes (ties broken by node, which is deterministic).
    const size_t keep = std::min(next_.size(), (size_t)o_.beam_width);
    std::partial_sort(next_.begin(), next_.begin() + (ptrdiff_t)keep, next_.end(), [](const Beam& a, const Beam& b) {
      return a.sum != b.sum ? a.sum > b.sum : a.node < b.node;
    });
    next_.resize(keep);
    std::swap(beams_, next_);
    return true;
  }

  // The search's vectors, kept by each thread from one line to the next (one search at a time
  // on a thread): a line's trie grows to thousands of nodes, and vectors grown afresh for every
  // line were fresh pages, faulted in one by one, for every line.
  struct LMMemo {
    static constexpr int kBits = 14;  // 16384 entries, 256 KiB: within a core's L2
    static constexpr size_t kSize = size_t{1} << kBits;
    struct Entry {
      uint64_t key = 0;
      double log_prob = 0;
    };
    uint64_t serial = 0;  // the model (CharLM::serial) and uniform share the answers are for
    double uniform = -1;
    std::vector<Entry> entries;
  };
  struct ChildSlot {
    uint64_t key = 0;  // (parent node << 32 | label) + 1; 0: empty
    int child = -1;
  };
  struct Storage {
    LMMemo lm_memo;
    std::vector<ChildSlot> children;
    std::vector<Node> nodes;
    std::vector<Link> links;
    std::vector<Beam> beams, next;
    std::vector<int> slot;
    std::vector<int64_t> candidates;
  };
  static Storage& storage() {
    thread_local Storage kept;
    return kept;
  }

  const Scores& s_;
  int64_t n_;
  const BeamOptions& o_;
  int64_t blank_;
  double log_min_;
  std::vector<Node>& nodes_;
  std::vector<Link>& links_;
  std::vector<Beam>& beams_;
  std::vector<Beam>& next_;
  std::vector<int>& slot_;  // node -> its index in next_ during a step, else -1
  std::vector<int64_t>& candidates_;
  std::vector<ChildSlot>& children_;  // (node, label) -> child node; a power of two long
  static constexpr size_t kFirstChildSlots = 1024;
};

}  // namespace

std::vector<Decoded> ctc_beam_decode(const Tensor& scores, const BeamOptions& o, const std::vector<int64_t>& lengths,
                                     int64_t blank) {
  check_beam_options(o);
  if (o.beam_width == 1 && o.lm == nullptr) return ctc_greedy_decode(scores, lengths, blank);  // see the header
  const Scores s = prepare("ctc_beam_decode", scores, lengths, blank);
  for (int64_t i = 0; i < s.T * s.N * s.C; ++i) OCRT_CHECK(!std::isnan(s.y[i]), "ctc_beam_decode: the scores hold NaN");
  if (o.lm != nullptr) check_lm_ids(o, s.C, blank);
  // The lines are searched independently (the LM is only read), one per thread at a time: a
  // beam reads the same prefixes whatever the thread count.
  std::vector<Decoded> out((size_t)s.N);
  std::exception_ptr failure;
  std::mutex failure_mu;
#pragma omp parallel for schedule(dynamic, 1) if (s.N > 1)
  for (int64_t n = 0; n < s.N; ++n) {
    try {
      BeamSearch search(s, n, o, blank);
      search.run();
      out[(size_t)n] = search.best();
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mu);
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return out;
}

}  // namespace ocrt::nn
