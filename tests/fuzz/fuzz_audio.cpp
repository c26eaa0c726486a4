// Fuzz target for the audio reader (see fuzz_targets.h). libsndfile reads from a path, and
// read_audio/probe_audio inspect the file itself (size, WAV chunks), so each input is written to
// a temporary file first: one per process, rewritten for every input.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "audio/audio_io.h"
#include "core/error.h"
#include "fuzz/fuzz_targets.h"

namespace ds2::fuzz {
namespace {

void violation(const std::string& what) {
  throw PropertyViolation("audio: " + what);
}

const std::string& scratch_path() {
  static const std::string path = (std::filesystem::temp_directory_path() /
                                   ("ds2_fuzz_audio_" + std::to_string(::getpid()) + ".wav"))
                                      .string();
  return path;
}

}  // namespace

int fuzz_audio_one(const uint8_t* data, size_t size) {
  const std::string& path = scratch_path();
  struct RemoveWhenDone {
    const std::string& path;
    ~RemoveWhenDone() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  } remove_when_done{path};
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) violation("cannot write the scratch file " + path);
  }
  const std::string prefix = path + ": ";

  AudioInfo info;
  bool probed = false;
  try {
    info = probe_audio(path);
    probed = true;
    if (info.frames <= 0 || info.sample_rate <= 0 || info.channels <= 0 ||
        !std::isfinite(info.duration_s) || info.duration_s <= 0) {
      violation("probe_audio accepted an invalid header");
    }
  } catch (const Error& e) {
    check_error_message(e.what(), prefix, "audio");
  }

  try {
    int rate = 0;
    const std::vector<float> samples = read_audio(path, &rate);
    if (!probed) violation("read_audio decoded a file that probe_audio rejects");
    if (static_cast<int64_t>(samples.size()) != info.frames || rate != info.sample_rate) {
      violation("read_audio disagrees with probe_audio on frames or sample rate");
    }
    for (float s : samples) {
      if (!(s >= -1.0f && s <= 1.0f)) violation("sample outside [-1, 1]");
    }
  } catch (const Error& e) {
    check_error_message(e.what(), prefix, "audio");
  }
  return 0;
}

}  // namespace ds2::fuzz
