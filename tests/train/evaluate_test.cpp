#include "train/evaluate.h"

#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"

namespace ds2 {
namespace {

// Padding never changes a result: with a trained model, utterances of 1-3 digits (0.5-2.5 s,
// so every batch is padded) by the training speaker and by an unseen one (so there are errors
// to get wrong) decode to the same hypotheses, and the same counts, in batches of 1, 3 and 16.
TEST(Evaluate, BatchSizeNeverChangesAResult) {
  TempDir dir;
  AcousticModel am = AcousticModel::load(testing::shared_tiny_model().checkpoint);
  const std::string george =
      testing::write_connected_digits(dir.path(), "george", 10, 5, "g.jsonl");
  const std::string lucas = testing::write_connected_digits(dir.path(), "lucas", 10, 6, "l.jsonl");
  DatasetChecks checks = am.dataset_checks();
  Dataset ds = load_dataset(george, checks, 1);
  const Dataset other = load_dataset(lucas, checks, 1);
  ds.examples.insert(ds.examples.end(), other.examples.begin(), other.examples.end());
  ASSERT_EQ(ds.examples.size(), 20u);

  const EvalResult one = evaluate(am, ds, 1, 1);
  EXPECT_GT(one.words.errors(), 0);  // the unseen speaker is not recognized perfectly
  EXPECT_LT(one.words.rate(), 0.9);  // but the model does recognize digits
  std::cout << "batch 1: WER " << 100 * one.words.rate() << "% (S=" << one.words.substitutions
            << " D=" << one.words.deletions << " I=" << one.words.insertions
            << " N=" << one.words.reference_length << ")\n";
  for (int batch : {3, 16}) {
    const EvalResult r = evaluate(am, ds, batch, 2);
    ASSERT_EQ(r.utterances.size(), one.utterances.size());
    for (size_t i = 0; i < r.utterances.size(); ++i)
      EXPECT_EQ(r.utterances[i].hypothesis, one.utterances[i].hypothesis)
          << "batch " << batch << ", " << r.utterances[i].id;
    EXPECT_EQ(r.words.substitutions, one.words.substitutions) << batch;
    EXPECT_EQ(r.words.deletions, one.words.deletions) << batch;
    EXPECT_EQ(r.words.insertions, one.words.insertions) << batch;
    EXPECT_EQ(r.chars.errors(), one.chars.errors()) << batch;
    EXPECT_DOUBLE_EQ(r.words.rate(), one.words.rate()) << batch;
  }
}

// A model trained with per-utterance batch-norm statistics learns (its training speaker's new
// utterances come out mostly right), and, having no running statistics, still decodes every
// utterance the same in any batch.
TEST(Evaluate, PerUtteranceStatisticsModelLearnsAndDecodesAloneAsInABatch) {
  TempDir dir;
  const std::string train = testing::write_connected_digits(dir.path(), "george", 40);
  AcousticModel am = AcousticModel::load(
      testing::train_tiny_model(dir.path(), train, 60, {"model.batch_norm_statistics=utterance"}));
  EXPECT_EQ(am.config.model.batch_norm_statistics, "utterance");
  const std::string george =
      testing::write_connected_digits(dir.path(), "george", 10, 5, "g.jsonl");
  const Dataset ds = load_dataset(george, am.dataset_checks(), 1);
  const EvalResult one = evaluate(am, ds, 1, 1);
  std::cout << "per-utterance statistics, batch 1: WER " << 100 * one.words.rate() << "%\n";
  EXPECT_LT(one.words.rate(), 0.35);
  const EvalResult many = evaluate(am, ds, 7, 2);
  ASSERT_EQ(many.utterances.size(), one.utterances.size());
  for (size_t i = 0; i < many.utterances.size(); ++i)
    EXPECT_EQ(many.utterances[i].hypothesis, one.utterances[i].hypothesis) << i;
}

// The test-time warp search: one factor of 1 is plain decoding; several pick one factor per
// utterance from the list, leave the featurizer as it was, and a factor out of range is refused.
TEST(Evaluate, WarpSearchPicksAListedFactorPerUtterance) {
  TempDir dir;
  AcousticModel am = AcousticModel::load(testing::shared_tiny_model().checkpoint);
  const std::string lucas = testing::write_connected_digits(dir.path(), "lucas", 8, 7, "l.jsonl");
  DatasetChecks checks = am.dataset_checks();
  const Dataset ds = load_dataset(lucas, checks, 1);
  const TextDecoder greedy(am.alphabet);
  const EvalResult plain = evaluate(am, ds, greedy, 4, 2);
  const EvalResult one = evaluate(am, ds, greedy, std::vector<double>{1.0}, 4, 2);
  ASSERT_EQ(one.utterances.size(), plain.utterances.size());
  for (size_t i = 0; i < one.utterances.size(); ++i)
    EXPECT_EQ(one.utterances[i].hypothesis, plain.utterances[i].hypothesis);
  EXPECT_EQ(one.warps, std::vector<double>(ds.examples.size(), 1.0));

  const std::vector<double> warps = {0.9, 1.0, 1.12};
  const EvalResult searched = evaluate(am, ds, greedy, warps, 4, 2);
  ASSERT_EQ(searched.warps.size(), ds.examples.size());
  for (double w : searched.warps) EXPECT_TRUE(w == 0.9 || w == 1.0 || w == 1.12) << w;
  EXPECT_EQ(am.featurizer->frequency_warp(), 1.0);
  // Each utterance's text is what decoding at its chosen factor alone gives.
  for (double w : warps) {
    const EvalResult fixed = evaluate(am, ds, greedy, std::vector<double>{w}, 4, 2);
    for (size_t i = 0; i < ds.examples.size(); ++i)
      if (searched.warps[i] == w)
        EXPECT_EQ(searched.utterances[i].hypothesis, fixed.utterances[i].hypothesis) << i;
  }
  EXPECT_THROW(evaluate(am, ds, greedy, std::vector<double>{1.0, 0.4}, 4, 2), Error);
  EXPECT_EQ(am.featurizer->frequency_warp(), 1.0);
}

}  // namespace
}  // namespace ds2
