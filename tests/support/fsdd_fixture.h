// Test support: small real-speech corpora cut from the packed FSDD recordings in data/fsdd
// (CC BY-SA 4.0, see data/fsdd/ATTRIBUTION.md), written as WAV files plus a JSON-lines manifest
// in a temporary folder.
//
//   auto dir = ds2::testing::make_temp_dir("trainer");
//   std::string manifest = ds2::testing::write_digit_manifest(dir, "george", {0, 1}, /*takes=*/3);
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ds2::testing {

std::filesystem::path make_temp_dir(const std::string& tag);

// Writes one utterance per (digit, take) of `speaker` (single digits, text "zero", "one", ...),
// and returns the manifest path.
std::string write_digit_manifest(const std::filesystem::path& dir, const std::string& speaker,
                                 const std::vector<int>& digits, int takes,
                                 const std::string& name = "train.jsonl");

}  // namespace ds2::testing
