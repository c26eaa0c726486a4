// CTC prefix beam search with optional shallow fusion of a word n-gram language model.
//
// The search keeps the `beam_width` most probable label prefixes, each with the probability of
// all alignments ending in blank and ending in its last label (so alignments that collapse to
// the same text are summed, unlike best-path decoding). With an LM, a prefix's score adds
//   lm_weight * ln P_lm(word | previous words) + word_score
// for every completed word: when the space label is emitted after a non-empty word, and at the
// end of the utterance for the last word, plus lm_weight * ln P_lm(</s> | words). Words are the
// text of the labels between spaces; a word outside the LM's vocabulary gets the LM's <unk>
// probability, or 10^unk_log10_prob when that option is set (non-zero).
//
//   ds2::BeamSearchOptions opt;
//   opt.beam_width = 32;
//   opt.lm_weight = 0.8;                       // alpha
//   opt.word_score = 1.0;                      // beta
//   opt.space_label = 1;                       // class of ' ' (alphabet class, blank = 0)
//   auto lm = std::make_shared<const ds2::ArpaLm>(ds2::ArpaLm::load("lm.arpa"));
//   ds2::PrefixBeamSearch search(opt, lm, symbols);  // symbols[k]: text of class k, k >= 1
//   std::vector<ds2::BeamHypothesis> nbest =
//       search.decode(logits, max_frames, batch, num_classes, utterance, length);
//   std::vector<int> best = nbest[0].labels;
//
// Logits are time-major [max_frames, batch, num_classes] as in greedy_decoder.h, class 0 the
// blank; log-softmax is taken internally. decode() is const and thread-safe. Results are
// deterministic: equal scores are ordered by the order in which prefixes were first reached
// (beams in rank order, classes in increasing order), so among equally probable one-frame
// prefixes the lowest class wins, as in greedy decoding.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ctc/arpa_lm.h"

namespace ds2 {

struct BeamSearchOptions {
  int beam_width = 16;          // prefixes kept after each frame (>= 1)
  double prune_log_prob = -10;  // per frame, skip labels with ln p below this (blank never)
  int top_k = 0;                // per frame, only the k most probable labels (0 = all)
  double lm_weight = 0;         // alpha: weight of ln P_lm (used only with an LM)
  double word_score = 0;        // beta: added per completed word (used only with an LM)
  int space_label = -1;         // class separating words; needed with an LM
  double unk_log10_prob = 0;    // < 0: log10 P of words outside the LM vocabulary; 0: <unk>
};

struct BeamHypothesis {
  std::vector<int> labels;  // classes 1..num_classes-1, repeats and blanks collapsed
  double acoustic = 0;      // ln of the summed probability of this prefix's alignments
  double lm = 0;            // fused LM terms (alpha * ln P + beta per word), 0 without an LM
  double score = 0;         // acoustic + lm: the ranking
};

class PrefixBeamSearch {
 public:
  // `lm` may be null (plain prefix beam search). With an LM, `symbols` gives the text of each
  // class (index = class; symbols[0], the blank, is unused) and options.space_label must name
  // a class. Throws ds2::Error on invalid options.
  explicit PrefixBeamSearch(const BeamSearchOptions& options,
                            std::shared_ptr<const ArpaLm> lm = nullptr,
                            std::vector<std::string> symbols = {});

  // Decodes utterance `utterance` of time-major logits [max_frames, batch, num_classes] over
  // its first `length` frames. Returns up to beam_width hypotheses, best first (at least one:
  // a length-0 utterance gives the empty hypothesis).
  std::vector<BeamHypothesis> decode(const float* logits, int max_frames, int batch,
                                     int num_classes, int utterance, int length) const;

  const BeamSearchOptions& options() const { return options_; }
  const ArpaLm* lm() const { return lm_.get(); }

 private:
  BeamSearchOptions options_;
  std::shared_ptr<const ArpaLm> lm_;
  std::vector<std::string> symbols_;
};

}  // namespace ds2
