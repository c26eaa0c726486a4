// Dataset: a manifest's utterances after validation, with their encoded labels. Every utterance
// that cannot be trained on is reported as "manifest:line: id: reason" and counted, never
// silently dropped; with data.fatal_bad_utterances the first one stops the run instead.
//
// The checks (shared by `ds2 validate-data` and training):
//   readable audio (decoded in full: libsndfile accepts truncated files, so the decoded length
//   is compared with the header), a positive sample rate, duration within
//   [data.min_duration_s, data.max_duration_s] and within data.duration_tolerance_s of the
//   manifest's, every character of the normalized text in the alphabet, and CTC feasibility:
//   the model's output frames must be >= label length + adjacent repeats.
//
//   ds2::DatasetChecks checks = acoustic_model.dataset_checks();   // or built by hand
//   ds2::Dataset train = ds2::load_dataset(cfg.data.train_manifest, checks, /*threads=*/2);
//   for (const auto& p : train.problems) std::cerr << p << "\n";
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/alphabet.h"
#include "data/featurizer.h"
#include "data/manifest.h"
#include "train/config.h"

namespace ds2 {

struct Example {
  Utterance utterance;
  std::vector<int> labels;  // alphabet classes 1..K-1
  double duration_s = 0;    // measured from the audio
};

struct DatasetChecks {
  const DataConfig& data;
  const Alphabet& alphabet;
  const Featurizer& featurizer;
  std::function<int(int)> output_length;  // model output frames for input feature frames
  // false: untranscribed audio (self-training's input): the text is neither read nor checked,
  // and examples have no labels; the audio checks are the same.
  bool transcribed = true;
};

struct Dataset {
  std::string manifest;
  std::vector<Example> examples;
  std::vector<std::string> problems;  // one line per bad utterance (or bad manifest line)
  int64_t total_lines = 0;            // utterances the manifest listed
  double hours() const;
};

// Checks one utterance; returns "" when it is usable (filling `example`), else the reason.
std::string check_utterance(const Utterance& utt, const DatasetChecks& checks, Example* example);
// "manifest:line: id: reason"
std::string describe_problem(const Utterance& utt, const std::string& reason);

// Reads and checks a manifest on `threads` threads. Throws on the first problem when
// checks.data.fatal_bad_utterances is set, and when no utterance at all is usable.
Dataset load_dataset(const std::string& manifest, const DatasetChecks& checks, int threads);
// The same, but a manifest without a usable utterance is returned too, with all its problems
// (for reports such as `ds2 validate-data`).
Dataset check_dataset(const std::string& manifest, const DatasetChecks& checks, int threads);

// The manifest name of audio files named on a command line, in their problems and Datasets.
inline constexpr const char* kCommandLineManifest = "<command line>";

// Utterances for audio files named on a command line: id and path are the file's path, the
// manifest is kCommandLineManifest, the line counts the paths from 1; no text, no duration.
std::vector<Utterance> command_line_utterances(const std::vector<std::string>& paths);

// Audio files named on a command line, checked as a manifest's utterances are (with
// checks.transcribed false: the audio checks only; no manifest duration to compare). Problems
// read "<command line>:N: PATH: reason", N counting the paths from 1. Unlike load_dataset, no
// usable file at all is not an error here: the caller decides.
Dataset audio_files_dataset(const std::vector<std::string>& paths, const DatasetChecks& checks,
                            int threads);

}  // namespace ds2
