// Kaldi data directories: imports wav.scp + text as utterances, for corpora prepared by Kaldi
// recipes.
//
//   std::vector<std::string> problems;
//   std::vector<ds2::Utterance> utts = ds2::import_kaldi_dir("data/train", &problems);
//   // fill in durations from the audio headers (duration_s is kUnknownDuration here), then
//   ds2::write_manifest("data/train.jsonl", utts);
//
// Supported: wav.scp lines "<utterance-id> <audio path>" and text lines
// "<utterance-id> <transcript>". Audio paths are kept as written: Kaldi resolves relative paths
// against the directory its tools run in (the recipe folder), so run the import from there.
// Not supported, each reported as a problem naming file and line: piped commands ("sox a.sph -t
// wav - |"), standard input ("-"), archive offsets ("feats.ark:123"), and segments files (a
// directory with one yields no utterances, since its wav.scp lists recordings, not utterances).
// Durations are unknown (kUnknownDuration): this layer reads no audio.
#pragma once

#include <string>
#include <vector>

#include "data/manifest.h"

namespace ds2 {

// Returns the utterances in wav.scp order, each with its transcript from text (as written, not
// normalized), manifest = the wav.scp path and line = its wav.scp line. Utterances with a
// problem (unsupported audio, repeated id, no transcript) are skipped and reported in
// `problems` as "PATH:LINE: reason"; text entries without audio are reported too. With
// problems == nullptr the first problem throws ds2::Error. A missing wav.scp or text throws.
std::vector<Utterance> import_kaldi_dir(const std::string& dir, std::vector<std::string>* problems);

}  // namespace ds2
