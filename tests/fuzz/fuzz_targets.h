// Fuzz targets for the parsers that read untrusted input: the YAML config (file text and dotted
// overrides), JSON-lines manifests and audio files. Each `fuzz_*_one` runs one input through the
// same entry points the trainer uses and checks what those promise:
//   - a bad input ends in ds2::Error, caught here, with a one-line message;
//   - a good input gives a result that holds together (a config whose resolved YAML loads back to
//     itself, manifest entries with unique ids and finite durations, audio samples in [-1, 1]).
// Any other exception escaping a target is a bug; PropertyViolation names the broken promise.
// The functions are shared by two builds: the libFuzzer binaries (libfuzzer_main.cpp, built with
// -DDS2_BUILD_FUZZERS=ON and clang) and the corpus replay in ds2_tests (fuzz_corpus_test.cpp).
//
//   const std::string yaml = "optim:\n  lr: 0.01\n";
//   ds2::fuzz::fuzz_config_one(reinterpret_cast<const uint8_t*>(yaml.data()), yaml.size());
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds2::fuzz {

class PropertyViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// The input is the text of a YAML config file: parse_config(text).
int fuzz_config_one(const uint8_t* data, size_t size);
// Each line of the input is one "key.path=value" override, applied to a small valid config.
int fuzz_override_one(const uint8_t* data, size_t size);
// The input is the text of a JSON-lines manifest: read_manifest on it, with and without a list
// of problems.
int fuzz_manifest_one(const uint8_t* data, size_t size);
// The input is the bytes of an audio file (written to a temporary file): probe_audio and
// read_audio.
int fuzz_audio_one(const uint8_t* data, size_t size);

struct FuzzTarget {
  const char* name;  // also the folder of its corpus: tests/fuzz/corpus/<name>/
  int (*one)(const uint8_t* data, size_t size);
};

// Every target above, in the order listed.
const std::vector<FuzzTarget>& fuzz_targets();

// Throws PropertyViolation unless `message` is one non-empty line that starts with `prefix`.
void check_error_message(const std::string& message, const std::string& prefix, const char* target);

}  // namespace ds2::fuzz
