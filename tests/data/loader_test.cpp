#include "data/loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "support/fsdd_fixture.h"
#include "support/temp_dir.h"

namespace ds2 {
namespace {

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    manifest_ = testing::write_digit_manifest(dir_, "nicolas", {4, 5, 6}, 4);
    cfg_.features.sample_rate = 8000;
    cfg_.augment.speed_min = 0.9;
    cfg_.augment.speed_max = 1.1;
    cfg_.augment.noise_prob = 0.5;
    cfg_.augment.time_masks = 1;
    cfg_.augment.time_mask_width = 5;
    featurizer_ = std::make_unique<Featurizer>(cfg_.features, cfg_.augment);
    DatasetChecks checks{cfg_.data, alphabet_, *featurizer_, [](int f) { return f; }};
    dataset_ = load_dataset(manifest_, checks, 2);
  }

  // Every batch's features, copied, in delivery order.
  std::vector<Batch> run_epoch(int threads, bool augment) {
    Loader loader(dataset_, *featurizer_, threads, 3);
    loader.start_epoch(batches_, 5, 1, augment);
    std::vector<Batch> out;
    while (const Batch* b = loader.next()) out.push_back(*b);
    return out;
  }

  TempDir temp_;
  const std::filesystem::path& dir_ = temp_.path();
  std::string manifest_;
  Config cfg_;
  Alphabet alphabet_ = Alphabet::english();
  std::unique_ptr<Featurizer> featurizer_;
  Dataset dataset_;
  std::vector<std::vector<int>> batches_ = {{0, 5, 2}, {7}, {11, 1, 3, 4}, {6, 8, 9, 10}};
};

TEST_F(LoaderTest, DeliversBatchesInOrderPackedTimeMajorWithZeroPadding) {
  ASSERT_EQ(dataset_.examples.size(), 12u);
  std::vector<Batch> got = run_epoch(2, false);
  ASSERT_EQ(got.size(), batches_.size());
  Tensor expected;
  for (size_t i = 0; i < got.size(); ++i) {
    const Batch& b = got[i];
    EXPECT_EQ(b.index, static_cast<int64_t>(i));
    EXPECT_EQ(b.examples, batches_[i]);
    const int64_t T = b.features.time(), B = b.features.batch(), F = b.features.frame_size();
    for (int64_t j = 0; j < B; ++j) {
      const Example& ex = dataset_.examples[b.examples[j]];
      EXPECT_EQ(b.labels[j], ex.labels);
      featurizer_->featurize_file(ex.utterance.audio_path, nullptr, expected);
      ASSERT_EQ(b.features.lengths[j], expected.dim(0));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t f = 0; f < F; ++f) {
          const float v = b.features.data[(t * B + j) * F + f];
          if (t < expected.dim(0))
            ASSERT_EQ(v, expected[t * F + f]);
          else
            ASSERT_EQ(v, 0.0f);
        }
    }
  }
}

TEST_F(LoaderTest, AugmentationIsDeterministicWhateverTheThreadCount) {
  std::vector<Batch> a = run_epoch(1, true), b = run_epoch(3, true), plain = run_epoch(2, false);
  ASSERT_EQ(a.size(), b.size());
  bool differs_from_plain = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].features.lengths, b[i].features.lengths);
    ASSERT_EQ(a[i].features.data.numel(), b[i].features.data.numel());
    for (int64_t k = 0; k < a[i].features.data.numel(); ++k)
      ASSERT_EQ(a[i].features.data[k], b[i].features.data[k]);
    differs_from_plain |= a[i].features.lengths != plain[i].features.lengths;
  }
  EXPECT_TRUE(differs_from_plain);  // speed perturbation changed some lengths
}

TEST_F(LoaderTest, AFileLostAfterValidationIsReportedNotFatal) {
  std::filesystem::remove(dataset_.examples[5].utterance.audio_path);
  std::vector<Batch> got = run_epoch(2, false);
  ASSERT_EQ(got[0].failures.size(), 1u);
  EXPECT_NE(got[0].failures[0].find(dataset_.examples[5].utterance.id), std::string::npos);
  EXPECT_EQ(got[0].examples, (std::vector<int>{0, 2}));
  EXPECT_EQ(got[0].features.batch(), 2);
  EXPECT_TRUE(got[1].failures.empty());
}

TEST_F(LoaderTest, EpochsCanBeRestartedAndStopEarly) {
  Loader loader(dataset_, *featurizer_, 2, 2);
  loader.start_epoch(batches_, 1, 0, false);
  ASSERT_NE(loader.next(), nullptr);  // abandon the epoch after one batch
  loader.start_epoch({{3, 4}}, 1, 1, false);
  const Batch* b = loader.next();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->examples, (std::vector<int>{3, 4}));
  EXPECT_EQ(loader.next(), nullptr);
}

// Each thread fills a whole batch in a slot of its own while the trainer holds one, so the ring
// has at least threads + 1 slots whatever prefetch_batches says (with 4 slots, 12 loader threads
// once worked as 3), and a larger prefetch is kept.
TEST_F(LoaderTest, EveryThreadHasASlotToFill) {
  EXPECT_EQ(Loader(dataset_, *featurizer_, 12, 4).slots(), 13);
  EXPECT_EQ(Loader(dataset_, *featurizer_, 2, 6).slots(), 6);
  EXPECT_EQ(Loader(dataset_, *featurizer_, 1, 1).slots(), 2);
  // With the trainer holding a batch while four threads fill the others, the epoch still comes
  // out whole and in order.
  Loader loader(dataset_, *featurizer_, 4, 1);
  loader.start_epoch(batches_, 2, 0, true);
  int64_t expected = 0;
  while (const Batch* b = loader.next()) EXPECT_EQ(b->index, expected++);
  EXPECT_EQ(expected, static_cast<int64_t>(batches_.size()));
}

}  // namespace
}  // namespace ds2
