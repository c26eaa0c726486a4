// TextDecoder: the model's output (CTC logits) to text, as a config's decode: section asks:
// greedy (best path) without an LM and with beam_width <= 1, else prefix beam search, with
// shallow fusion of an ARPA word LM when decode.lm_path is set. Immutable and thread-safe:
// evaluation decodes utterances on several threads with one decoder.
//
//   ds2::TextDecoder greedy(am.alphabet);                       // best path
//   ds2::DecodeConfig dc = am.config.decode;
//   dc.lm_path = "data/fsdd/digits-3gram.arpa";
//   ds2::TextDecoder fused(am.alphabet, dc);                    // loads the LM (throws on errors)
//   std::string text = fused.decode(logits, T, B, K, utterance, length);
//   ds2::TextDecoder other = fused.with_lm_weights(0.8, 2.0);  // same LM, other alpha/beta
#pragma once

#include <memory>
#include <string>

#include "ctc/arpa_lm.h"
#include "ctc/prefix_beam_search.h"
#include "data/alphabet.h"
#include "train/config.h"

namespace ds2 {

class TextDecoder {
 public:
  // Greedy decoding.
  explicit TextDecoder(const Alphabet& alphabet);
  // As `config` says; loads config.lm_path (errors name the file and line). An LM needs the
  // alphabet to hold a space (words are the text between spaces).
  TextDecoder(const Alphabet& alphabet, const DecodeConfig& config);

  // The same search and the same loaded LM with other weights (alpha, beta).
  TextDecoder with_lm_weights(double lm_weight, double word_score) const;

  // Decodes utterance `utterance` of time-major logits [max_frames, batch, num_classes] over
  // its first `length` frames.
  std::string decode(const float* logits, int max_frames, int batch, int num_classes, int utterance,
                     int length) const;

  bool greedy() const { return search_ == nullptr; }
  bool has_lm() const { return lm_ != nullptr; }
  const DecodeConfig& config() const { return config_; }
  // One line: "greedy", "beam 32", "beam 32 + LM PATH (alpha 0.5, beta 1)".
  std::string describe() const;

 private:
  Alphabet alphabet_;
  DecodeConfig config_;
  std::shared_ptr<const ArpaLm> lm_;
  std::shared_ptr<const PrefixBeamSearch> search_;  // null: greedy
};

// The beam width a config means: decode.beam_width, or for 0 the default (1 without an LM,
// 32 with one).
int effective_beam_width(const DecodeConfig& config);

}  // namespace ds2
