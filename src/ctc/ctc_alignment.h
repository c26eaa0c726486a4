// CTC alignments: which class every output frame stands for, for the best path (greedy) or for
// the most probable path that spells a given label sequence (Viterbi forced alignment), and the
// frames each emitted label occupies. Word timings in `ds2 transcribe --format json` come from
// these.
//
//   std::vector<float> lp = ds2::log_softmax_frames(logits, T, K);   // frame-major {T, K}
//   std::vector<int> path = ds2::best_path(lp.data(), T, K);          // argmax per frame
//   std::vector<int> forced = ds2::forced_alignment(lp.data(), T, K, labels);  // {} if impossible
//   for (const ds2::LabelSpan& s : ds2::label_spans(forced)) { ... s.label, s.first, s.last ... }
//
// All inputs are frame-major ({frames, classes}, one utterance), class 0 the blank.
#pragma once

#include <vector>

namespace ds2 {

// Row-wise log-softmax of `frames` x `classes` logits.
std::vector<float> log_softmax_frames(const float* logits, int frames, int classes);

// The argmax class of every frame (ties: the lowest class, as in greedy_decoder.h).
std::vector<int> best_path(const float* scores, int frames, int classes);

// The most probable CTC path (sum of log-probabilities) over `frames` frames that collapses to
// `labels` (values 1..classes-1): one class per frame. Empty when no path exists (too few frames
// for the labels and the blanks needed between repeated labels). On equal scores a path that
// stays in its state wins over one that advances, then over one that skips a blank, so the
// result is deterministic. Memory is O(sqrt(frames) * labels), not O(frames * labels): the
// backpointers are recomputed segment by segment from stored rows, so hour-long recordings align
// in bounded memory.
std::vector<int> forced_alignment(const float* log_probs, int frames, int classes,
                                  const std::vector<int>& labels);

// One emitted label of a per-frame path: its class and the first and last frames of its run
// (repeats of the same class merged, as CTC collapses them; blanks separate runs).
struct LabelSpan {
  int label;
  int first;
  int last;
};
std::vector<LabelSpan> label_spans(const std::vector<int>& path);

}  // namespace ds2
