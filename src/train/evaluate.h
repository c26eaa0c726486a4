// Evaluation and transcription. Batches are formed in order of duration (less padding); padding
// never changes a result, so the numbers do not depend on the batch size. Without a decoder the
// output is decoded greedily on the calling thread; with a beam-search TextDecoder, utterances
// are decoded on `threads` worker threads while the model computes the next batch, each on its
// own, so results do not depend on the thread count either.
//
//   ds2::EvalResult r = ds2::evaluate(am, dev_set, /*batch_size=*/16, /*threads=*/2);
//   printf("WER %.2f%%\n", 100 * r.words.rate());
//   auto texts = ds2::transcribe_files(am, {"a.wav"}, 8, 2);
//   ds2::TextDecoder lm_decoder(am.alphabet, am.config.decode);
//   ds2::EvalResult fused = ds2::evaluate(am, dev_set, lm_decoder, 16, 2);
//
//   // tuning: the network runs once, decoding many times
//   auto logits = ds2::dataset_logits(am, dev_set, 16, 2, &failures);
//   auto texts = ds2::decode_logits(logits, lm_decoder.with_lm_weights(0.8, 1.5), 2);
//   ds2::EvalResult r2 = ds2::score_texts(am, dev_set, texts);
#pragma once

#include <string>
#include <vector>

#include "ctc/error_rate.h"
#include "data/dataset.h"
#include "train/acoustic_model.h"
#include "train/text_decoder.h"

namespace ds2 {

struct UtteranceResult {
  std::string id;
  std::string reference;
  std::string hypothesis;
  ErrorCounts words;
};

struct EvalResult {
  ErrorCounts words;
  ErrorCounts chars;
  std::vector<UtteranceResult> utterances;  // in dataset order
  std::vector<std::string> failures;        // utterances that could not be loaded
  double audio_seconds = 0;
  double wall_seconds = 0;
  std::vector<double> warps;  // with a warp search: the frequency warp chosen per utterance
};

// Greedy decoding.
EvalResult evaluate(AcousticModel& am, const Dataset& dataset, int batch_size, int threads);
EvalResult evaluate(AcousticModel& am, const Dataset& dataset, const TextDecoder& decoder,
                    int batch_size, int threads);
// With a test-time search over frequency warps (vocal tract length, per utterance, no
// transcripts): the network runs once per factor in `warps` (Featurizer::set_frequency_warp) and
// each utterance is decoded from the factor whose best path the model is surest of (the path's
// confidence as transcribe.h defines it; a tie goes to the factor nearest 1).
EvalResult evaluate(AcousticModel& am, const Dataset& dataset, const TextDecoder& decoder,
                    const std::vector<double>& warps, int batch_size, int threads);

// Transcribes audio files (any format libsndfile reads, any rate, any channel count). Failures
// throw naming the file.
std::vector<std::string> transcribe_files(AcousticModel& am, const std::vector<std::string>& paths,
                                          int batch_size, int threads);
std::vector<std::string> transcribe_files(AcousticModel& am, const std::vector<std::string>& paths,
                                          const TextDecoder& decoder, int batch_size, int threads);

// Runs the model over `dataset` in batches and returns the decoded text per example (dataset
// order); a failed utterance gets no text and its reason in `failures`.
std::vector<std::string> decode_dataset(AcousticModel& am, const Dataset& dataset, int batch_size,
                                        int threads, std::vector<std::string>* failures);
std::vector<std::string> decode_dataset(AcousticModel& am, const Dataset& dataset,
                                        const TextDecoder& decoder, int batch_size, int threads,
                                        std::vector<std::string>* failures);

// The model's output for one utterance: `frames` x `classes` logits, frame-major.
struct UtteranceLogits {
  int frames = 0;
  int classes = 0;
  std::vector<float> data;
};

// Runs the model over `dataset` and keeps every utterance's logits (dataset order; a failed
// utterance has 0 frames and its reason in `failures`).
std::vector<UtteranceLogits> dataset_logits(AcousticModel& am, const Dataset& dataset,
                                            int batch_size, int threads,
                                            std::vector<std::string>* failures);
// Decodes stored logits on `threads` worker threads (dataset order).
std::vector<std::string> decode_logits(const std::vector<UtteranceLogits>& logits,
                                       const TextDecoder& decoder, int threads);

// Word and character errors of `texts` (one per example, dataset order) against the dataset's
// normalized transcripts; fills everything in EvalResult except failures and wall_seconds.
EvalResult score_texts(const AcousticModel& am, const Dataset& dataset,
                       const std::vector<std::string>& texts);

}  // namespace ds2
