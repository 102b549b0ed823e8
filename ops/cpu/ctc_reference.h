// The plain reference for CTC: the definition itself, a sum over every alignment. A path
// chooses one class per frame; it collapses to a label sequence by merging repeats and then
// dropping blanks; p(l | x) is the sum of the probabilities of the paths that collapse to l.
// With C classes and T frames that is C^T paths, so it is only for tiny cases, but it shares
// nothing with the alpha/beta recursions of ops/cpu/ctc.cpp and ops/cuda/ctc.cu, which are
// tested against it (tests/ops/test_ctc.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ocrt::reference {

// One sample: lp (T,C) log-probabilities, row-major. Returns -log p(target | x) (+inf when no
// path collapses to the target). When grad (T,C) is given it receives the loss's gradient with
// respect to lp as PyTorch defines it: exp(lp[t][c]) minus the posterior probability that
// frame t emits class c given the target (0 everywhere when the loss is infinite).
inline double ctc_loss_all_paths(const std::vector<double>& lp, int64_t T, int64_t C,
                                 const std::vector<int64_t>& target, int64_t blank, std::vector<double>* grad = nullptr) {
  double p = 0;                                           // p(target | x)
  std::vector<double> mass((size_t)(T * C), 0.0);         // mass[t][c]: paths through class c at t
  std::vector<int64_t> path((size_t)T, 0), collapsed;
  int64_t paths = 1;
  for (int64_t t = 0; t < T; ++t) paths *= C;
  for (int64_t code = 0; code < paths; ++code) {
    int64_t rest = code;
    double logp = 0;
    for (int64_t t = 0; t < T; ++t, rest /= C) {
      path[(size_t)t] = rest % C;
      logp += lp[(size_t)(t * C + path[(size_t)t])];
    }
    collapsed.clear();
    for (int64_t t = 0; t < T; ++t)
      if (path[(size_t)t] != blank && (t == 0 || path[(size_t)t] != path[(size_t)(t - 1)]))
        collapsed.push_back(path[(size_t)t]);
    if (collapsed != target) continue;
    p += std::exp(logp);
    for (int64_t t = 0; t < T; ++t) mass[(size_t)(t * C + path[(size_t)t])] += std::exp(logp);
  }
  if (grad) {
    grad->assign((size_t)(T * C), 0.0);
    if (p > 0)
      for (int64_t i = 0; i < T * C; ++i) (*grad)[(size_t)i] = std::exp(lp[(size_t)i]) - mass[(size_t)i] / p;
  }
  return p > 0 ? -std::log(p) : std::numeric_limits<double>::infinity();
}

}  // namespace ocrt::reference
