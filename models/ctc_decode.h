// CTC decoding: turning per-frame class scores into label sequences.
//
// greedy (best path): the most likely class at every frame, repeats collapsed, blanks dropped.
// beam (prefix beam search): keeps the `beam_width` most likely label prefixes, each with the
// probability of ending in a blank and in a non-blank, so that all alignments of a prefix are
// summed (greedy follows only one). A beam of width 1 can follow only one path, so width 1 is
// defined as greedy decoding (a one-prefix beam that sums paths can drift from the best path on
// flat distributions; best path is what a width-1 beam means in the usual definition).
//
// Confidence of a result: the mean, over its characters, of the probability of that character
// at the frame where it was emitted (the first frame of its run); for an empty result, the mean
// probability of the blank over the frames. It lies in [0, 1]; 1 means every character was
// certain where it appeared.
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace ocrt::nn {

struct Decoded {
  std::vector<int64_t> labels;  // class indices, blanks removed
  std::vector<int64_t> frames;  // for each label, the frame where it was emitted
  double confidence = 0;        // see above
  double log_prob = 0;          // greedy: of the best path; beam: of the best prefix (all its paths)
};

// scores (T, N, C): logits or log-probabilities (a log_softmax over C is applied, which leaves
// log-probabilities unchanged), any float dtype, on any device (the argmax runs there; only
// (T, N) values come to the host). lengths: frames per sample (empty: all T).
std::vector<Decoded> ctc_greedy_decode(const Tensor& scores, const std::vector<int64_t>& lengths = {},
                                       int64_t blank = 0);
std::vector<Decoded> ctc_beam_decode(const Tensor& scores, int64_t beam_width, const std::vector<int64_t>& lengths = {},
                                     int64_t blank = 0);

}  // namespace ocrt::nn
