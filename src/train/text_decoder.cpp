#include "train/text_decoder.h"

#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "ctc/greedy_decoder.h"

namespace ds2 {

namespace {

// Class -> text, index = class (the blank, class 0, is "").
std::vector<std::string> class_texts(const Alphabet& alphabet) {
  std::vector<std::string> texts = {""};
  texts.insert(texts.end(), alphabet.symbols().begin(), alphabet.symbols().end());
  return texts;
}

int space_class(const Alphabet& alphabet) {
  for (int k = 1; k <= alphabet.size(); ++k)
    if (alphabet.symbol(k) == " ") return k;
  return -1;
}

}  // namespace

int effective_beam_width(const DecodeConfig& config) {
  if (config.beam_width > 0) return config.beam_width;
  return config.lm_path.empty() ? 1 : 32;
}

TextDecoder::TextDecoder(const Alphabet& alphabet) : alphabet_(alphabet) {
  config_.beam_width = 1;
}

TextDecoder::TextDecoder(const Alphabet& alphabet, const DecodeConfig& config)
    : alphabet_(alphabet), config_(config) {
  config_.beam_width = effective_beam_width(config);
  if (!config_.lm_path.empty()) {
    DS2_CHECK(space_class(alphabet_) > 0,
              "decode.lm_path: a word LM needs a space in the alphabet (words are separated by "
              "spaces)");
    // A checkpoint keeps the path as resolved when it was trained (relative to that folder).
    DS2_CHECK(std::filesystem::is_regular_file(config_.lm_path),
              config_.lm_path << ": cannot open language model file (decode.lm_path; --lm PATH "
                                 "replaces it, --greedy decodes without it)");
    lm_ = std::make_shared<const ArpaLm>(ArpaLm::load(config_.lm_path));
    DS2_CHECK(lm_->unk_id() != ArpaLm::kNoWord || config_.unk_log10_prob < 0,
              config_.lm_path << ": the LM has no <unk>; set decode.unk_log10_prob (< 0) to score "
                                 "words outside its vocabulary");
  }
  *this = with_lm_weights(config_.lm_weight, config_.word_score);
}

TextDecoder TextDecoder::with_lm_weights(double lm_weight, double word_score) const {
  TextDecoder d = *this;
  d.config_.lm_weight = lm_weight;
  d.config_.word_score = word_score;
  d.search_ = nullptr;
  if (!lm_ && config_.beam_width <= 1) return d;
  BeamSearchOptions opt;
  opt.beam_width = config_.beam_width;
  opt.top_k = config_.top_k;
  opt.prune_log_prob = config_.prune;
  opt.lm_weight = lm_weight;
  opt.word_score = word_score;
  opt.unk_log10_prob = config_.unk_log10_prob;
  opt.space_label = space_class(alphabet_);
  d.search_ = std::make_shared<const PrefixBeamSearch>(opt, lm_, class_texts(alphabet_));
  return d;
}

std::string TextDecoder::decode(const float* logits, int max_frames, int batch, int num_classes,
                                int utterance, int length) const {
  if (!search_) {
    std::vector<int> labels;
    greedy_decode_utterance(logits, max_frames, batch, num_classes, utterance, length, &labels);
    return alphabet_.decode(labels);
  }
  const std::vector<BeamHypothesis> nbest =
      search_->decode(logits, max_frames, batch, num_classes, utterance, length);
  return alphabet_.decode(nbest.front().labels);
}

std::string TextDecoder::describe() const {
  if (!search_) return "greedy";
  std::ostringstream out;
  out << "beam " << config_.beam_width;
  if (lm_)
    out << " + LM " << config_.lm_path << " (alpha " << config_.lm_weight << ", beta "
        << config_.word_score << ")";
  return out.str();
}

}  // namespace ds2
