// CTC decoding: turning per-frame class scores into label sequences.
//
// greedy (best path): the most likely class at every frame, repeats collapsed, blanks dropped.
// beam (prefix beam search): keeps the `beam_width` most likely label prefixes, each with the
// probability of ending in a blank and in a non-blank, so that all alignments of a prefix are
// summed (greedy follows only one). A beam of width 1 can follow only one path, so width 1 is
// defined as greedy decoding (a one-prefix beam that sums paths can drift from the best path on
// flat distributions; best path is what a width-1 beam means in the usual definition).
//
// With a character language model (models/char_lm.h), every label the beam emits adds
// alpha * log P_LM(label | the prefix's last characters) + beta to the prefix's score (the
// "shallow fusion" of Hannun et al. 2014, "First-pass large vocabulary continuous speech
// recognition using bi-directional recurrent DNNs"): alpha weighs the LM against the model,
// beta pays a bonus per character so that the LM's cost per character does not favour
// dropping characters. A repeat that collapses into the same label adds nothing. With an LM,
// width 1 runs the beam (the LM can change even a single path's choice).
//
// Classes whose probability at a frame is below `min_prob` are not tried as extensions there
// (the frame's best class always is). With the default 1e-3 such a class starts 6.9 nats behind
// a frame's best class of probability near 1, more than one character of the LM can give back
// at ocrt-infer's alpha 0.3 (0.3 x 9.2 nats with lm_uniform 0.01); and most of a beam's time
// went to the many classes between 1e-6 (the default before) and 1e-3: on the 12 real scans
// of bench/results/pages.md the int8 page path read the same words at 1e-3 in 12% less time,
// and on the 3000 validation lines the beam made the same 737 edits (bench/results/decode.md).
//
// Confidence of a result: the mean, over its characters, of the probability of that character
// at the frame where it was emitted (the first frame of its run); for an empty result, the mean
// probability of the blank over the frames. It lies in [0, 1]; 1 means every character was
// certain where it appeared.
#pragma once
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace ocrt::nn {

struct Decoded {
  std::vector<int64_t> labels;  // class indices, blanks removed
  std::vector<int64_t> frames;  // for each label, the frame where it was emitted
  std::vector<double> char_confidence;  // for each label, its probability at that frame
  double confidence = 0;        // see above
  double log_prob = 0;          // greedy: of the best path; beam: of the best prefix (all its paths),
                                // plus the LM's alpha * log P + beta per label when there is one
};

class CharLM;

struct BeamOptions {
  int64_t beam_width = 10;
  const CharLM* lm = nullptr;        // optional; not owned
  std::vector<int32_t> lm_ids;       // with lm: class -> the LM's symbol id (size C; blank's ignored)
  double lm_weight = 0.3;            // alpha (ocrt-infer's default, bench/results/accuracy.md)
  double lm_bonus = 1.0;             // beta, per emitted label
  // The LM's probability mixed with a uniform one over its symbols: (1 - u) P_LM + u / (V + 1).
  // It bounds how unlikely the LM can call a character (rare symbols, as "{" in prose) and so how
  // much the LM can overrule the model where the model is sure. 0: the LM as it is.
  double lm_uniform = 0.0;
  double min_prob = 1e-3;            // see above
};

// lm_ids for a charset (class k + 1 is charset[k]): CharLM::id_utf8 of each character.
std::vector<int32_t> lm_ids_for(const CharLM& lm, const std::vector<std::string>& charset_chars);

// scores (T, N, C): logits or log-probabilities (a log_softmax over C is applied, which leaves
// log-probabilities unchanged), any float dtype, on any device (the argmax runs there; only
// (T, N) values come to the host). lengths: frames per sample (empty: all T).
std::vector<Decoded> ctc_greedy_decode(const Tensor& scores, const std::vector<int64_t>& lengths = {},
                                       int64_t blank = 0);
std::vector<Decoded> ctc_beam_decode(const Tensor& scores, int64_t beam_width, const std::vector<int64_t>& lengths = {},
                                     int64_t blank = 0);
std::vector<Decoded> ctc_beam_decode(const Tensor& scores, const BeamOptions& options,
                                     const std::vector<int64_t>& lengths = {}, int64_t blank = 0);

}  // namespace ocrt::nn
