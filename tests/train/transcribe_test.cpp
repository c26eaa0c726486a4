#include "train/transcribe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>

#include "core/error.h"
#include "ctc/ctc_alignment.h"
#include "ctc/error_rate.h"
#include "data/manifest.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"
#include "train/evaluate.h"

namespace ds2 {
namespace {

// The tiny model shared by the test process (trained once on connected digits of one speaker).
class Transcribe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TinyModel& model = testing::shared_tiny_model();
    dir_ = &model.dir;
    manifest_ = &model.manifest;
    checkpoint_ = &model.checkpoint;
  }

  static std::vector<Transcript> run(AcousticModel& am, const TextDecoder& decoder,
                                     const TranscribeOptions& options,
                                     const std::vector<std::string>& paths) {
    std::vector<Transcript> out;
    Transcriber(am, decoder, options).run(paths, [&](const Transcript& t) { out.push_back(t); });
    return out;
  }

  // Words in order, inside the recording, each a span of positive length; their text is the
  // transcript's.
  static void expect_consistent_words(const Transcript& t) {
    std::string joined;
    double previous_end = 0;
    for (const WordTiming& w : t.words) {
      EXPECT_GE(w.start_s, previous_end) << w.word;
      EXPECT_GT(w.end_s, w.start_s) << w.word;
      EXPECT_LE(w.end_s, t.duration_s) << w.word;
      EXPECT_GT(w.confidence, 0.0);
      EXPECT_LE(w.confidence, 1.0);
      previous_end = w.end_s;
      joined += (joined.empty() ? "" : " ") + w.word;
    }
    EXPECT_EQ(joined, t.text);
    EXPECT_GT(t.confidence, 0.0);
    EXPECT_LE(t.confidence, 1.0);
  }

  static TempDir* dir_;
  static std::string* manifest_;
  static std::string* checkpoint_;
};
TempDir* Transcribe::dir_ = nullptr;
std::string* Transcribe::manifest_ = nullptr;
std::string* Transcribe::checkpoint_ = nullptr;

// A recording shorter than the window is one window: the text is exactly what evaluation's
// batched path produces, and the words follow the text.
TEST_F(Transcribe, ShortRecordingsMatchTheBatchedPath) {
  AcousticModel am = AcousticModel::load(*checkpoint_);
  std::vector<std::string> paths = manifest_audio_paths(*manifest_);
  paths.resize(12);
  const std::vector<std::string> batched = transcribe_files(am, paths, 5, 2);
  TranscribeOptions options;
  options.word_timings = true;
  options.batch_size = 3;
  const TextDecoder greedy(am.alphabet);
  const std::vector<Transcript> got = run(am, greedy, options, paths);
  ASSERT_EQ(got.size(), paths.size());
  int words = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    EXPECT_EQ(got[i].path, paths[i]);
    EXPECT_TRUE(got[i].error.empty()) << got[i].error;
    EXPECT_EQ(got[i].windows, 1);
    std::string tidy;  // the same words, single spaces
    for (const std::string& w : split_words(batched[i])) tidy += (tidy.empty() ? "" : " ") + w;
    EXPECT_EQ(got[i].text, tidy) << paths[i];
    expect_consistent_words(got[i]);
    words += static_cast<int>(got[i].words.size());
  }
  EXPECT_GT(words, 12);  // connected digits: more than one word per recording on average
}

// Windowed logits agree with the network's output over the whole recording away from the
// window edges, and the texts agree.
TEST_F(Transcribe, WindowsStitchIntoTheUnwindowedOutput) {
  AcousticModel am = AcousticModel::load(*checkpoint_);
  const testing::Spliced rec = testing::splice_digits(dir_->path(), "george", 14.0, "mid.wav");
  const std::vector<float> samples = am.featurizer->load_samples(rec.path);
  TranscribeOptions whole_opt;
  whole_opt.window_s = 0;
  TranscribeOptions windowed_opt;
  windowed_opt.window_s = 4.0;
  windowed_opt.overlap_s = 1.0;
  const TextDecoder greedy(am.alphabet);
  int windows = 0;
  const UtteranceLogits whole = Transcriber(am, greedy, whole_opt).logits(samples, &windows);
  EXPECT_EQ(windows, 1);
  const UtteranceLogits windowed = Transcriber(am, greedy, windowed_opt).logits(samples, &windows);
  EXPECT_EQ(windows, 5);  // starts at 0, 3, 6, 9 s and the last ending with the recording
  ASSERT_EQ(windowed.frames, whole.frames);
  ASSERT_EQ(windowed.classes, whole.classes);
  const std::vector<int> a = best_path(whole.data.data(), whole.frames, whole.classes);
  const std::vector<int> b = best_path(windowed.data.data(), windowed.frames, windowed.classes);
  int same = 0;
  for (int t = 0; t < whole.frames; ++t) same += a[t] == b[t];
  EXPECT_GE(same, 0.98 * whole.frames) << same << " of " << whole.frames;
  std::cout << "14 s in 4 s windows: best-path classes agree with the unwindowed output at " << same
            << " of " << whole.frames << " frames\n";
  const std::string whole_text =
      greedy.decode(whole.data.data(), whole.frames, 1, whole.classes, 0, whole.frames);
  const std::string windowed_text =
      greedy.decode(windowed.data.data(), windowed.frames, 1, windowed.classes, 0, windowed.frames);
  EXPECT_LE(word_errors(whole_text, windowed_text).errors(), 1) << whole_text << "\n"
                                                                << windowed_text;
  EXPECT_LT(word_errors(rec.text, windowed_text).rate(), 0.2) << windowed_text;
}

// Three minutes in 20 s windows: the transcript follows what was said, word times are in
// order and inside the recording.
TEST_F(Transcribe, LongRecordingInWindowsWithWordTimes) {
  AcousticModel am = AcousticModel::load(*checkpoint_);
  const testing::Spliced rec = testing::splice_digits(dir_->path(), "george", 180.0, "long.wav");
  TranscribeOptions options;  // 20 s windows, 2 s overlap
  options.word_timings = true;
  const TextDecoder greedy(am.alphabet);
  const std::vector<Transcript> got = run(am, greedy, options, {rec.path});
  ASSERT_EQ(got.size(), 1u);
  const Transcript& t = got[0];
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_NEAR(t.duration_s, rec.seconds, 1e-3);
  EXPECT_EQ(t.windows, 10);  // 0, 18, ..., 144 s, and the last one ending with the recording
  expect_consistent_words(t);
  const ErrorCounts errors = word_errors(rec.text, t.text);
  EXPECT_GT(rec.words, 200);
  EXPECT_LT(errors.rate(), 0.1) << t.text;
  // The last word ends near the end of the recording (it is followed by a pause under 0.4 s).
  ASSERT_FALSE(t.words.empty());
  EXPECT_GT(t.words.back().end_s, rec.seconds - 1.5);

  // The same recording without windows: nearly the same text.
  options.window_s = 0;
  const std::vector<Transcript> whole = run(am, greedy, options, {rec.path});
  EXPECT_EQ(whole[0].windows, 1);
  const ErrorCounts between = word_errors(whole[0].text, t.text);
  EXPECT_LE(between.errors(), 6) << whole[0].text << "\n" << t.text;
  std::cout << rec.seconds << " s, " << rec.words << " words: WER " << 100 * errors.rate()
            << "% in windows, " << 100 * word_errors(rec.text, whole[0].text).rate()
            << "% unwindowed; they differ by " << between.errors() << " words\n";
}

// With a beam search the words come from the forced alignment of the decoded text.
TEST_F(Transcribe, BeamSearchWordsFollowTheDecodedText) {
  AcousticModel am = AcousticModel::load(*checkpoint_);
  DecodeConfig dc;
  dc.beam_width = 8;
  const TextDecoder beam(am.alphabet, dc);
  ASSERT_FALSE(beam.greedy());
  std::vector<std::string> paths = manifest_audio_paths(*manifest_);
  paths.resize(6);
  TranscribeOptions options;
  options.word_timings = true;
  for (const Transcript& t : run(am, beam, options, paths)) {
    ASSERT_TRUE(t.error.empty()) << t.error;
    EXPECT_FALSE(t.words.empty()) << t.path;
    expect_consistent_words(t);
  }
}

// Unreadable recordings are reported in place, the others still transcribed, order kept.
TEST_F(Transcribe, BadRecordingsAreReportedInOrder) {
  AcousticModel am = AcousticModel::load(*checkpoint_);
  std::vector<std::string> paths = manifest_audio_paths(*manifest_);
  const std::string junk = (dir_->path() / "junk.wav").string();
  std::ofstream(junk) << "not audio";
  const std::vector<std::string> asked = {paths[0], junk, paths[1], junk + ".missing"};
  TranscribeOptions options;
  options.batch_size = 2;
  const std::vector<Transcript> got = run(am, TextDecoder(am.alphabet), options, asked);
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < asked.size(); ++i) EXPECT_EQ(got[i].path, asked[i]);
  EXPECT_TRUE(got[0].error.empty());
  EXPECT_EQ(got[1].error.rfind(junk + ": ", 0), 0u) << got[1].error;
  EXPECT_TRUE(got[2].error.empty());
  EXPECT_FALSE(got[2].text.empty());
  EXPECT_EQ(got[3].error.rfind(junk + ".missing: ", 0), 0u) << got[3].error;
}

TEST(TranscribeOptions, OverlapMustBeShorterThanTheWindow) {
  Config cfg =
      parse_config("features: {sample_rate: 8000}\nmodel: {rnn_layers: 1, rnn_hidden: 8}\n");
  AcousticModel am = AcousticModel::create(cfg);
  TranscribeOptions options;
  options.window_s = 2;
  options.overlap_s = 2;
  const TextDecoder greedy(am.alphabet);
  try {
    Transcriber tr(am, greedy, options);
    FAIL() << "accepted an overlap as long as the window";
  } catch (const Error& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "transcribe: the window overlap (2 s) must be >= 0 and shorter than the window (2 s)");
  }
  options.window_s = 20;
  options.overlap_s = 2;
  // hop 10 ms, conv time stride 2 (the default conv stack: 2 x 1): 20 ms per output frame.
  EXPECT_DOUBLE_EQ(Transcriber(am, greedy, options).output_frame_seconds(), 0.02);
}

TEST(ManifestAudioPaths, ResolvesAgainstTheManifestFolder) {
  TempDir dir;
  const std::string m = dir.file("m.jsonl");
  std::ofstream(m) << "{\"audio_filepath\": \"a.wav\"}\n\n{\"audio_filepath\": \"/x/b.flac\", "
                      "\"text\": \"hi\"}\n{\"path\": \"c.wav\"}\n";
  try {
    manifest_audio_paths(m);
    FAIL() << "accepted a line without audio_filepath";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), m + ":4: expected an object with a string 'audio_filepath'");
  }
  std::ofstream(m) << "{\"audio_filepath\": \"a.wav\"}\n\n{\"audio_filepath\": \"/x/b.flac\"}\n";
  EXPECT_EQ(manifest_audio_paths(m), (std::vector<std::string>{dir.file("a.wav"), "/x/b.flac"}));
}

}  // namespace
}  // namespace ds2
