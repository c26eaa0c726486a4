// Manifests: NeMo-style JSON lines, one utterance per line.
//
//   {"audio_filepath": "audio/train/a.flac", "duration": 1.342, "text": "three seven"}
//
//   std::vector<std::string> problems;
//   std::vector<ds2::Utterance> utts = ds2::read_manifest("data/train.jsonl", &problems);
//   for (const auto& p : problems) std::cerr << p << "\n";  // "data/train.jsonl:7: ..."
//   ds2::write_manifest("runs/x/clean.jsonl", utts);
//
// Relative audio paths are relative to the manifest's folder; read_manifest resolves them so
// Utterance::audio_path can be opened from the current directory. Optional keys: "id" or
// "utterance_id" (a string); without one the id is "<audio file stem>@<line>", which is unique
// within a manifest and still says which file it is. Optional "speaker" (a string) names who
// speaks (data.speaker_batches). Other keys are ignored.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace ds2 {

// duration_s takes this value when it is not known yet (e.g. after import_kaldi_dir).
constexpr double kUnknownDuration = -1.0;

struct Utterance {
  std::string id;
  std::string audio_path;  // absolute, or relative to the current directory
  double duration_s = kUnknownDuration;
  std::string text;      // as written in the source, not normalized
  std::string speaker;   // optional: who speaks (data.speaker_batches); "" = not given
  std::string manifest;  // where it came from, for error messages
  int line = 0;          // 1-based line in `manifest`
};

// Reads a JSON-lines manifest. Blank lines are ignored. A malformed line (invalid JSON, not an
// object, missing or ill-typed key, repeated key, empty path, negative or non-finite duration,
// an id with control characters, repeated id) is skipped and
// reported in `problems` as "PATH:LINE: reason"; when `problems` is null the first one throws
// ds2::Error instead. A manifest that cannot be opened always throws.
std::vector<Utterance> read_manifest(const std::string& path, std::vector<std::string>* problems);
// The same from a stream already open: `path` names it in problems and anchors relative audio
// paths. Throws when the stream fails while reading.
std::vector<Utterance> read_manifest(std::istream& in, const std::string& path,
                                     std::vector<std::string>* problems);

// Paths of the audio files a manifest lists (its "audio_filepath" values, relative ones resolved
// against the manifest's folder); other keys are ignored, so any list of recordings (noise, files
// to transcribe) can be one. Errors name the manifest and line.
std::vector<std::string> manifest_audio_paths(const std::string& manifest);

// Writes utterances as JSON lines ("id", "audio_filepath", "duration", "text", and "speaker" when
// known), with audio paths
// made relative to the new manifest's folder when the audio is given by a relative path, so that
// read_manifest gives the same utterances back. Writes a temporary file and renames it over
// `path`, so readers never see half a manifest. Throws on an unknown (negative) duration.
void write_manifest(const std::string& path, const std::vector<Utterance>& utterances);

}  // namespace ds2
