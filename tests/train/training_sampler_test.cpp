#include "train/training_sampler.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace ds2 {
namespace {

Dataset dataset_of(const std::vector<std::string>& speakers) {
  Dataset ds;
  for (size_t i = 0; i < speakers.size(); ++i) {
    Example ex;
    ex.utterance.id = "u" + std::to_string(i);
    ex.utterance.manifest = "m.jsonl";
    ex.utterance.line = static_cast<int>(i) + 1;
    ex.utterance.speaker = speakers[i];
    ex.duration_s = 1.0 + 0.1 * static_cast<double>(i % 7);
    ds.examples.push_back(ex);
  }
  return ds;
}

TEST(TrainingSampler, SpeakerBatchesHoldOneSpeakerAndNeedEverySpeaker) {
  Config cfg = parse_config("train: {batch_size: 4}\n");
  std::vector<std::string> speakers;
  for (int i = 0; i < 30; ++i) speakers.push_back(i % 3 == 0 ? "ann" : (i % 3 == 1 ? "bo" : "cy"));
  const Dataset ds = dataset_of(speakers);
  EXPECT_EQ(training_sampler(cfg, ds, 0, 1).batches_per_epoch(), 8) << "30 utterances, batch 4";
  bool mixed = false;
  for (const auto& b : training_sampler(cfg, ds, 0, 1).epoch(1))
    for (int i : b) mixed |= speakers[i] != speakers[b.front()];
  EXPECT_TRUE(mixed) << "without data.speaker_batches batches mix speakers";

  cfg = parse_config("train: {batch_size: 4}\ndata: {speaker_batches: true}\n");
  const BatchSampler s = training_sampler(cfg, ds, 0, 1);
  EXPECT_EQ(s.batches_per_epoch(), 9) << "10 utterances of each speaker: 3 batches each";
  for (const auto& b : s.epoch(1))
    for (int i : b) EXPECT_EQ(speakers[i], speakers[b.front()]);

  speakers[4] = "";
  try {
    training_sampler(cfg, dataset_of(speakers), 0, 1);
    ADD_FAILURE() << "an utterance without a speaker was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "m.jsonl:5: u4: no \"speaker\" (data.speaker_batches is on)");
  }
}

}  // namespace
}  // namespace ds2
