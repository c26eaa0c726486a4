#include "train/self_training.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/manifest.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"
#include "train/acoustic_model.h"
#include "train/adapt_batch_norm.h"
#include "train/evaluate.h"
#include "train/transcribe.h"

namespace ds2 {
namespace {

// A new voice's recordings whose manifest says nothing true: every transcript is characters
// outside the alphabet, so a model that read them could not train on them.
std::string untranscribed_voice(const std::filesystem::path& dir) {
  const std::string path = testing::write_connected_digits(dir, "lucas", 12, 5, "voice.jsonl");
  const std::string text =
      std::regex_replace(read_file(path), std::regex("\"text\": \"[^\"]*\""), "\"text\": \"#?#\"");
  write_file_atomic(path, text);
  return path;
}

SelfTrainingOptions quick_options() {
  SelfTrainingOptions o;
  o.rounds = 2;
  o.repeat = 2;
  o.batch_size = 4;
  o.device = "cpu";
  o.overrides = {"train.epochs=2", "run.device=cpu", "train.log_every=1000"};
  return o;
}

TEST(SelfTraining, LabelsTheNewVoiceItselfAndFineTunesOnItAndTheTrainingSet) {
  TempDir dir;
  const testing::TinyModel& tiny = testing::shared_tiny_model();
  const std::string voice = untranscribed_voice(dir.path());
  {
    AcousticModel am = AcousticModel::load(tiny.checkpoint);
    EXPECT_THROW(load_dataset(voice, am.dataset_checks(), 1), Error)
        << "as transcribed data, no utterance of the voice is usable";
  }
  const std::string out = (dir.path() / "adapt").string();
  std::vector<std::string> lines;
  const std::vector<SelfTrainingRound> rounds =
      self_train(tiny.checkpoint, voice, out, quick_options(),
                 [&](const std::string& line) { lines.push_back(line); });
  ASSERT_EQ(rounds.size(), 2u);

  // Round 1's labels are what the checkpoint, its batch norm adapted to the voice (2 passes),
  // transcribes: recomputed here independently.
  AcousticModel am = AcousticModel::load(tiny.checkpoint);
  DatasetChecks checks = am.dataset_checks();
  checks.transcribed = false;
  const Dataset ds = load_dataset(voice, checks, 1);
  ASSERT_EQ(ds.examples.size(), 12u);
  adapt_batch_norm(am, ds, 2, 4, 1);
  std::vector<std::string> expected = decode_dataset(am, ds, 4, 1, nullptr);
  std::vector<std::string> kept;
  for (std::string& t : expected) {
    // As transcripts are written: words separated by single spaces.
    std::istringstream words(t);
    std::string word, joined;
    while (words >> word) joined += (joined.empty() ? "" : " ") + word;
    t = joined;
    if (!t.empty()) kept.push_back(t);
  }
  ASSERT_FALSE(kept.empty()) << "the tiny model hears some digits in a new voice";
  const std::vector<Utterance> pseudo = read_manifest(out + "/round-1/pseudo.jsonl", nullptr);
  ASSERT_EQ(pseudo.size(), kept.size());
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(pseudo[i].text, kept[i]) << i;
  EXPECT_EQ(rounds[0].labelled, static_cast<int64_t>(kept.size()));
  EXPECT_EQ(rounds[0].empty, static_cast<int64_t>(expected.size() - kept.size()));
  EXPECT_EQ(rounds[0].unusable, 0);

  // Each round trains on the training set plus `repeat` copies of its labels, every utterance
  // kept (ids made unique), from the previous round's weights.
  for (int r = 1; r <= 2; ++r) {
    const std::string round_dir = out + "/round-" + std::to_string(r);
    std::vector<std::string> problems;
    const std::vector<Utterance> mixed = read_manifest(round_dir + "/train.jsonl", &problems);
    EXPECT_TRUE(problems.empty()) << problems.front();
    EXPECT_EQ(mixed.size(), 40u + 2 * rounds[r - 1].labelled) << round_dir;
    const int64_t batches = (static_cast<int64_t>(mixed.size()) + 7) / 8;  // tiny: batch 8
    EXPECT_EQ(rounds[r - 1].training.steps, 2 * batches) << "2 epochs";
    EXPECT_TRUE(std::isfinite(rounds[r - 1].training.last_loss));
    const std::string config = read_file(round_dir + "/config.yaml");
    const std::string from = r == 1 ? tiny.checkpoint : out + "/round-1/last.ckpt";
    EXPECT_NE(config.find("init_from: " + from), std::string::npos) << config;
    EXPECT_EQ(rounds[r - 1].checkpoint, round_dir + "/last.ckpt");
  }
  EXPECT_EQ(read_file(out + "/adapted.ckpt"), read_file(out + "/round-2/last.ckpt"));
  EXPECT_NE(read_file(out + "/adapted.ckpt"), read_file(tiny.checkpoint));
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.front().find("round 1: " + std::to_string(kept.size()) + " recordings"),
            std::string::npos)
      << lines.front();
  EXPECT_NE(lines.front().find("AdaBN 2 passes;"), std::string::npos) << lines.front();
}

// A model with per-utterance batch-norm statistics has no running statistics: round 1 labels with
// the checkpoint as it is and says AdaBN was skipped, and why.
TEST(SelfTraining, PerUtteranceStatisticsModelLabelsWithoutAdaBN) {
  TempDir dir;
  const std::string train = testing::write_connected_digits(dir.path(), "george", 40);
  const std::string checkpoint =
      testing::train_tiny_model(dir.path(), train, 60, {"model.batch_norm_statistics=utterance"});
  const std::string voice = untranscribed_voice(dir.path());
  SelfTrainingOptions o = quick_options();
  o.rounds = 1;
  std::vector<std::string> lines;
  const std::vector<SelfTrainingRound> rounds =
      self_train(checkpoint, voice, (dir.path() / "adapt").string(), o,
                 [&](const std::string& line) { lines.push_back(line); });
  ASSERT_EQ(rounds.size(), 1u);
  AcousticModel am = AcousticModel::load(checkpoint);
  DatasetChecks checks = am.dataset_checks();
  checks.transcribed = false;
  int64_t heard = 0;
  for (const std::string& t : decode_dataset(am, load_dataset(voice, checks, 1), 4, 1, nullptr))
    heard += t.find_first_not_of(' ') != std::string::npos;
  EXPECT_GT(heard, 0);
  EXPECT_EQ(rounds[0].labelled, heard);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.front().find("AdaBN skipped (the model normalizes every utterance by its own "
                               "statistics);"),
            std::string::npos)
      << lines.front();
}

// With keep 0.5, round 1 trains on the more confident half of what it labelled: the same labels,
// the same order, and no dropped recording more confident than a kept one.
TEST(SelfTraining, KeepsTheRecordingsTheModelIsMostConfidentOf) {
  TempDir dir;
  const testing::TinyModel& tiny = testing::shared_tiny_model();
  const std::string voice = untranscribed_voice(dir.path());
  SelfTrainingOptions o = quick_options();
  o.rounds = 1;
  o.keep = 0.5;
  const std::string out = (dir.path() / "half").string();
  const std::vector<SelfTrainingRound> rounds =
      self_train(tiny.checkpoint, voice, out, o, [](const std::string&) {});
  ASSERT_EQ(rounds.size(), 1u);

  AcousticModel am = AcousticModel::load(tiny.checkpoint);
  DatasetChecks checks = am.dataset_checks();
  checks.transcribed = false;
  const Dataset ds = load_dataset(voice, checks, 1);
  adapt_batch_norm(am, ds, 2, 4, 1);
  const TextDecoder greedy(am.alphabet);
  TranscribeOptions to;
  to.word_timings = true;
  std::map<std::string, std::pair<std::string, double>> heard;  // path -> (text, confidence)
  std::vector<std::string> paths;
  for (const Example& e : ds.examples) paths.push_back(e.utterance.audio_path);
  Transcriber(am, greedy, to).run(paths, [&](const Transcript& t) {
    if (!t.text.empty()) heard[t.path] = {t.text, t.confidence};
  });
  const std::vector<Utterance> kept = read_manifest(out + "/round-1/pseudo.jsonl", nullptr);
  ASSERT_EQ(kept.size(), (heard.size() + 1) / 2);
  EXPECT_EQ(rounds[0].labelled, static_cast<int64_t>(kept.size()));
  EXPECT_EQ(rounds[0].unsure, static_cast<int64_t>(heard.size() - kept.size()));
  double least_kept = 1.0;
  for (const Utterance& u : kept) {
    ASSERT_TRUE(heard.count(u.audio_path)) << u.audio_path;
    EXPECT_EQ(u.text, heard[u.audio_path].first);
    least_kept = std::min(least_kept, heard[u.audio_path].second);
    heard.erase(u.audio_path);
  }
  for (const auto& [path, dropped] : heard)
    EXPECT_LE(dropped.second, least_kept) << path << " was dropped but is more confident";
}

TEST(SelfTraining, RejectsOverridesOfTheKeysEachRoundSetsAndNonsenseCounts) {
  TempDir dir;
  const testing::TinyModel& tiny = testing::shared_tiny_model();
  const std::string voice = untranscribed_voice(dir.path());
  const auto quiet = [](const std::string&) {};
  for (const std::string& key : kSelfTrainingKeys) {
    SelfTrainingOptions o = quick_options();
    o.overrides.push_back(key + "=x");
    try {
      self_train(tiny.checkpoint, voice, (dir.path() / "a").string(), o, quiet);
      ADD_FAILURE() << key << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + key + "'"), std::string::npos) << e.what();
    }
  }
  SelfTrainingOptions o = quick_options();
  o.rounds = 0;
  EXPECT_THROW(self_train(tiny.checkpoint, voice, (dir.path() / "b").string(), o, quiet), Error);
  o = quick_options();
  o.keep = 0;
  EXPECT_THROW(self_train(tiny.checkpoint, voice, (dir.path() / "d").string(), o, quiet), Error);
  o = quick_options();
  o.repeat = 0;
  EXPECT_THROW(self_train(tiny.checkpoint, voice, (dir.path() / "c").string(), o, quiet), Error);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "a")) << "nothing written before the checks";
}

}  // namespace
}  // namespace ds2
