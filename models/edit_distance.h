// Levenshtein distance between two sequences (characters, class indices, ...): the number of
// insertions, deletions and substitutions that turn one into the other. CER = the summed
// distances over the summed lengths of the true texts; training (train/trainer.cpp) and
// ocrt-infer --eval (infer/report.cpp) count it the same way.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace ocrt::nn {

template <class T>
int64_t edit_distance(const std::vector<T>& a, const std::vector<T>& b) {
  // One row of the dynamic-programming table at a time.
  std::vector<int64_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = (int64_t)j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = (int64_t)i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace ocrt::nn
