// Audio files in and out, through libsndfile (WAV, FLAC, OGG/Vorbis, AIFF, ... whatever it reads).
//
//   ds2::AudioInfo info = ds2::probe_audio("a.flac");   // header only: frames, rate, duration
//   int rate = 0;
//   std::vector<float> mono = ds2::read_audio("a.wav", &rate);  // mixed down, in [-1, 1]
//   ds2::write_audio("out.flac", mono, rate);                  // PCM16, written atomically
//
// Bad audio never crashes and never yields silently shortened data: a missing or unreadable
// file, an unknown format, a file without frames, non-finite float samples, and a truncated file
// (fewer frames decoded than the header promises, or a WAV data chunk longer than the file) all
// throw ds2::Error with one line "PATH: reason".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds2 {

struct AudioInfo {
  int64_t frames = 0;  // samples per channel
  int sample_rate = 0;
  int channels = 0;
  double duration_s = 0.0;
  std::string format;    // container, lower case: "wav", "flac", "ogg", "aiff", ...
  std::string encoding;  // sample encoding: "pcm16", "pcm24", "float32", "vorbis", ...
};

// Sample encodings write_audio can produce. FLAC stores integers only.
enum class AudioEncoding { kPcm16, kPcm24, kFloat32 };

// Reads the header only (plus, for WAV, a check of the data chunk against the file size).
AudioInfo probe_audio(const std::string& path);

// Decodes the whole file; multichannel audio is averaged down to mono. Samples are floats in
// [-1, 1] (integer formats are scaled by libsndfile; float files are clamped to that range).
// `sample_rate_out` may be null.
std::vector<float> read_audio(const std::string& path, int* sample_rate_out);

// Writes mono audio; the container comes from the extension (.wav or .flac). The file appears
// atomically: it is written to a temporary file in the same folder and then renamed, so a
// reader never sees half a file. Samples outside [-1, 1] are clipped, not wrapped.
void write_audio(const std::string& path, const std::vector<float>& mono, int sample_rate,
                 AudioEncoding encoding = AudioEncoding::kPcm16);

}  // namespace ds2
