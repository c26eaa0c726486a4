// Evaluation and transcription with greedy CTC decoding. Batches are formed in order of
// duration (less padding); padding never changes a result, so the numbers do not depend on the
// batch size.
//
//   ds2::EvalResult r = ds2::evaluate(am, dev_set, /*batch_size=*/16, /*threads=*/2);
//   printf("WER %.2f%%\n", 100 * r.words.rate());
//   auto texts = ds2::transcribe_files(am, {"a.wav"}, 8, 2);
#pragma once

#include <string>
#include <vector>

#include "ctc/error_rate.h"
#include "data/dataset.h"
#include "train/acoustic_model.h"

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
};

EvalResult evaluate(AcousticModel& am, const Dataset& dataset, int batch_size, int threads);

// Transcribes audio files (any format libsndfile reads, any rate, any channel count). Failures
// throw naming the file.
std::vector<std::string> transcribe_files(AcousticModel& am, const std::vector<std::string>& paths,
                                          int batch_size, int threads);

// Runs the model over `dataset` in batches and returns the decoded text per example (dataset
// order); a failed utterance gets no text and its reason in `failures`.
std::vector<std::string> decode_dataset(AcousticModel& am, const Dataset& dataset, int batch_size,
                                        int threads, std::vector<std::string>* failures);

}  // namespace ds2
