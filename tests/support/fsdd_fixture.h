// Test support: small real-speech corpora cut from the packed FSDD recordings in data/fsdd
// (CC BY-SA 4.0, see data/fsdd/ATTRIBUTION.md), written as WAV files plus a JSON-lines manifest
// in a temporary folder.
//
//   ds2::TempDir dir;
//   std::string manifest = ds2::testing::write_digit_manifest(dir.path(), "george", {0, 1}, 3);
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ds2::testing {

// Writes one utterance per (digit, take) of `speaker` (single digits, text "zero", "one", ...),
// and returns the manifest path.
std::string write_digit_manifest(const std::filesystem::path& dir, const std::string& speaker,
                                 const std::vector<int>& digits, int takes,
                                 const std::string& name = "train.jsonl");

}  // namespace ds2::testing
