// Test support: connected-digit recordings spliced from the FSDD fixture (see fsdd_fixture.h)
// and a tiny acoustic model trained on them in a few seconds, for tests of evaluation and
// transcription that need a model which actually recognizes something.
//
//   ds2::TempDir dir;
//   std::string manifest = ds2::testing::write_connected_digits(dir.path(), "george", 30);
//   std::string ckpt = ds2::testing::train_tiny_model(dir.path(), manifest);  // best.ckpt
//   const ds2::testing::TinyModel& shared = ds2::testing::shared_tiny_model();  // trained once
//   ds2::testing::Spliced long_one = ds2::testing::splice_digits(dir.path(), "george", 180.0,
//                                                                "long.wav");
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace ds2::testing {

// Digits the tiny model learns (from the first takes of each speaker).
inline constexpr int kTinyDigits[] = {1, 2, 7};
inline constexpr int kTinyTakes = 8;

// Writes `count` utterances of 1-3 digits of `speaker` (from kTinyDigits, takes < kTinyTakes)
// joined by short pauses of faint noise, text "one seven", as NAME-STEM_SPEAKER_I.wav, plus
// `name` (a manifest). The choice is deterministic for a given `seed`.
std::string write_connected_digits(const std::filesystem::path& dir, const std::string& speaker,
                                   int count, int seed = 1,
                                   const std::string& name = "connected.jsonl");

// Trains the tiny model (32 log-mel bands, one 8-channel conv, one recurrent layer of 48 units)
// on `manifest` for `epochs` epochs in dir/run and returns dir/run/best.ckpt. `overrides`
// ("key.path=value") change the recipe.
std::string train_tiny_model(const std::filesystem::path& dir, const std::string& manifest,
                             int epochs = 60, const std::vector<std::string>& overrides = {});

// The tiny model trained once per test process on write_connected_digits(dir, "george", 40)
// (the first caller pays the few seconds), in a scratch folder removed at exit; suites that only
// read the model share it, and may write their own, distinctly named files into `dir`.
struct TinyModel {
  TempDir dir;
  std::string manifest;
  std::string checkpoint;
};
TinyModel& shared_tiny_model();

// A recording of at least `seconds` seconds: kTinyDigits recordings of `speaker` one after the
// other (cycling through takes), separated by pauses; `text` is what it says.
struct Spliced {
  std::string path;
  std::string text;
  double seconds = 0;
  int words = 0;
};
Spliced splice_digits(const std::filesystem::path& dir, const std::string& speaker, double seconds,
                      const std::string& name, int seed = 7);

}  // namespace ds2::testing
