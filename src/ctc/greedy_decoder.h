// Best-path (greedy) CTC decoding: the most likely class at every valid frame, repeats merged,
// blanks (class 0) dropped. Argmax is the same on logits and on probabilities, so it takes the
// model's raw output.
//
//   std::vector<std::vector<int>> hyps = ds2::greedy_decode(model_out);  // Sequences {T, B, K}
//   std::string text = alphabet.decode(hyps[0]);
//
//   // per utterance, reusing the output's storage:
//   ds2::greedy_decode_utterance(logits, T, B, K, b, lengths[b], &hyp);
#pragma once

#include <vector>

#include "nn/sequences.h"

namespace ds2 {

// Decodes utterance `utterance` of time-major logits [max_frames, batch, alphabet_size] over its
// first `length` frames into `labels` (cleared first; values 1..alphabet_size-1). On equal
// scores the lowest class index wins, so the result is deterministic.
void greedy_decode_utterance(const float* logits, int max_frames, int batch, int alphabet_size,
                             int utterance, int length, std::vector<int>* labels);

// Decodes every utterance of `logits` (data {T, B, K}, lengths = valid frames).
std::vector<std::vector<int>> greedy_decode(const Sequences& logits);

}  // namespace ds2
