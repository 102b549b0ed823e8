// CTC loss on the CPU: the alpha (forward) and beta (backward) recursions in log space, one
// sample per OpenMP task (samples are independent; each writes only its own rows).
//
// With the target l of length L extended by blanks, l' = (blank, l1, blank, l2, ..., lL,
// blank) of length S = 2L + 1, and y[t][c] the log-probabilities:
//   alpha[0][0] = y[0][blank], alpha[0][1] = y[0][l1], every other alpha[0][s] = -inf
//   alpha[t][s] = y[t][l's] + lse(alpha[t-1][s], alpha[t-1][s-1], alpha[t-1][s-2] if l's is
//                 not blank and l's != l'(s-2))
//   loss = -lse(alpha[T-1][S-1], alpha[T-1][S-2])
// and beta mirrors it from the end. Each alpha[t][s] + beta[t][s] - y[t][l's] is the log of
// the probability mass of all alignments that pass through (t, s), so the posterior of class c
// at frame t is exp(lse over {s : l's = c} of that - log p(l|x)).
//
// Everything is computed in double: log-space float64 stays exact enough for T in the
// thousands and for logits far beyond what float32 softmax outputs can represent.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/backend.h"
#include "ops/log_space.h"

namespace ocrt {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One sample's view of the inputs.
template <class T>
struct Sample {
  const T* lp;          // y[t][c] at lp[t * stride_t + c]
  int64_t stride_t, C;
  const int64_t* label;  // the L target labels
  int64_t frames, L, blank;  // frames: this sample's input length
  int64_t ext(int64_t s) const { return s % 2 == 0 ? blank : label[s / 2]; }  // l'(s)
  double y(int64_t t, int64_t s) const { return (double)lp[t * stride_t + ext(s)]; }
  // May s-2 -> s be skipped over (no blank in between needed)?
  bool can_skip(int64_t s) const { return s >= 2 && ext(s) != blank && ext(s) != ext(s - 2); }
};

// alpha (T x S, row stride S_max) for one sample; returns the loss (+inf if impossible).
template <class T>
double forward_sample(const Sample<T>& x, double* alpha, int64_t S_max) {
  const int64_t S = 2 * x.L + 1;
  if (x.frames == 0) return x.L == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  for (int64_t s = 0; s < S; ++s) alpha[s] = kNegInf;
  alpha[0] = x.y(0, 0);
  if (S > 1) alpha[1] = x.y(0, 1);
  for (int64_t t = 1; t < x.frames; ++t) {
    const double* prev = alpha + (t - 1) * S_max;
    double* cur = alpha + t * S_max;
    // Only states that can still reach the end, and that can have been reached, matter; the
    // others stay -inf. Computing all of them is simpler and the cost is the same order.
    for (int64_t s = 0; s < S; ++s) {
      double a = prev[s];
      if (s >= 1) a = lse(a, prev[s - 1]);
      if (x.can_skip(s)) a = lse(a, prev[s - 2]);
      cur[s] = a == kNegInf ? kNegInf : a + x.y(t, s);
    }
  }
  const double* last = alpha + (x.frames - 1) * S_max;
  const double log_p = S > 1 ? lse(last[S - 1], last[S - 2]) : last[0];
  return -log_p;  // +inf when no alignment exists
}

template <class T>
void ctc_forward_typed(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& offsets,
                       const std::vector<int64_t>& input_lengths, const std::vector<int64_t>& target_lengths,
                       int64_t blank, const Tensor& losses, const Tensor& alpha) {
  const int64_t N = log_probs.size(1), C = log_probs.size(2), Tmax = log_probs.size(0), S_max = alpha.size(2);
  const T* lp = log_probs.data<T>();
  const int64_t* tg = targets.data<int64_t>();
  T* out = losses.data<T>();
  double* al = alpha.data<double>();
#pragma omp parallel for schedule(dynamic, 1) if (N > 1)
  for (int64_t n = 0; n < N; ++n) {
    Sample<T> x{lp + n * C, N * C, C, tg + offsets[(size_t)n], input_lengths[(size_t)n], target_lengths[(size_t)n], blank};
    out[n] = (T)forward_sample(x, al + n * Tmax * S_max, S_max);
  }
}

template <class T>
void ctc_backward_typed(const Tensor& log_probs, const Tensor& targets, const std::vector<int64_t>& offsets,
                        const std::vector<int64_t>& input_lengths, const std::vector<int64_t>& target_lengths,
                        int64_t blank, const Tensor& losses, const Tensor& alpha, const std::vector<double>& scale,
                        const Tensor& grad) {
  const int64_t Tmax = log_probs.size(0), N = log_probs.size(1), C = log_probs.size(2), S_max = alpha.size(2);
  const T* lp = log_probs.data<T>();
  const int64_t* tg = targets.data<int64_t>();
  const T* loss = losses.data<T>();
  const double* al = alpha.data<double>();
  T* gp = grad.data<T>();
#pragma omp parallel for schedule(dynamic, 1) if (N > 1)
  for (int64_t n = 0; n < N; ++n) {
    Sample<T> x{lp + n * C, N * C, C, tg + offsets[(size_t)n], input_lengths[(size_t)n], target_lengths[(size_t)n], blank};
    auto grad_row = [&](int64_t t) { return gp + (t * N + n) * C; };
    for (int64_t t = x.frames; t < Tmax; ++t) std::fill(grad_row(t), grad_row(t) + C, T(0));
    if (x.frames == 0) continue;
    const int64_t S = 2 * x.L + 1;
    const double* alpha_n = al + n * Tmax * S_max;
    // -log p(l|x) again from alpha, in double (losses may be float32).
    const double* last = alpha_n + (x.frames - 1) * S_max;
    const double nll = -(S > 1 ? lse(last[S - 1], last[S - 2]) : last[0]);
    if (!std::isfinite(nll) || !std::isfinite((double)loss[n]) || scale[(size_t)n] == 0) {
      // No alignment exists: no gradient (PyTorch gives NaN here).
      for (int64_t t = 0; t < x.frames; ++t) std::fill(grad_row(t), grad_row(t) + C, T(0));
      continue;
    }
    std::vector<double> beta_next((size_t)S), beta((size_t)S), post((size_t)C);
    for (int64_t t = x.frames - 1; t >= 0; --t) {
      // beta[t][s], including the emission at t (as alpha does).
      for (int64_t s = 0; s < S; ++s) {
        double b;
        if (t == x.frames - 1) {
          b = s >= S - 2 ? 0.0 : kNegInf;
        } else {
          b = beta_next[(size_t)s];
          if (s + 1 < S) b = lse(b, beta_next[(size_t)(s + 1)]);
          if (s + 2 < S && x.can_skip(s + 2)) b = lse(b, beta_next[(size_t)(s + 2)]);
        }
        beta[(size_t)s] = b == kNegInf ? kNegInf : b + x.y(t, s);
      }
      // Posterior mass per class at frame t: lse over s of alpha + beta - y (y counted once).
      std::fill(post.begin(), post.end(), kNegInf);
      for (int64_t s = 0; s < S; ++s) {
        const double a = alpha_n[t * S_max + s], b = beta[(size_t)s];
        if (a == kNegInf || b == kNegInf) continue;
        const int64_t c = x.ext(s);
        post[(size_t)c] = lse(post[(size_t)c], a + b - x.y(t, s));
      }
      T* row = grad_row(t);
      const T* lrow = x.lp + t * x.stride_t;
      for (int64_t c = 0; c < C; ++c) {
        const double p = std::exp((double)lrow[c]);
        const double q = post[(size_t)c] == kNegInf ? 0.0 : std::exp(post[(size_t)c] + nll);
        row[c] = (T)(scale[(size_t)n] * (p - q));
      }
      std::swap(beta, beta_next);
    }
  }
}

}  // namespace

void register_cpu_ctc(LayerBackend& b) {
  b.ctc_loss = [](const Tensor& lp, const Tensor& tg, const std::vector<int64_t>& off, const std::vector<int64_t>& il,
                  const std::vector<int64_t>& tl, int64_t blank, const Tensor& losses, const Tensor& alpha) {
    dispatch_float(lp.dtype(), "ctc_loss",
        [&](auto zero) { ctc_forward_typed<decltype(zero)>(lp, tg, off, il, tl, blank, losses, alpha); });
  };
  b.ctc_loss_backward = [](const Tensor& lp, const Tensor& tg, const std::vector<int64_t>& off,
                           const std::vector<int64_t>& il, const std::vector<int64_t>& tl, int64_t blank,
                           const Tensor& losses, const Tensor& alpha, const std::vector<double>& scale,
                           const Tensor& grad) {
    dispatch_float(lp.dtype(), "ctc_loss backward",
        [&](auto zero) { ctc_backward_typed<decltype(zero)>(lp, tg, off, il, tl, blank, losses, alpha, scale, grad); });
  };
}

}  // namespace ocrt
