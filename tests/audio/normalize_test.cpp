#include "audio/normalize.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/rng.h"

namespace ds2 {
namespace {

Tensor random_features(int64_t frames, int64_t bins, uint64_t seed) {
  Rng rng(seed);
  Tensor t({frames, bins});
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = rng.normal(-12.0f + (i % bins), 2.0f);
  return t;
}

TEST(Normalize, PerUtteranceKnownValues) {
  // Column 0: 1, 2, 3 -> mean 2, population stddev sqrt(2/3). Column 1 is constant.
  Tensor t({3, 2});
  const float values[] = {1, 5, 2, 5, 3, 5};
  std::copy(values, values + 6, t.data());
  normalize_per_utterance(t);
  const float z = static_cast<float>(1.0 / std::sqrt(2.0 / 3.0));
  EXPECT_FLOAT_EQ(t[0], -z);
  EXPECT_FLOAT_EQ(t[2], 0.0f);
  EXPECT_FLOAT_EQ(t[4], z);
  for (int i : {1, 3, 5}) EXPECT_EQ(t[i], 0.0f);
}

TEST(Normalize, PerUtteranceGivesZeroMeanUnitVariancePerBin) {
  Tensor t = random_features(200, 7, 3);
  normalize_per_utterance(t);
  for (int k = 0; k < 7; ++k) {
    double sum = 0.0, sum_sq = 0.0;
    for (int f = 0; f < 200; ++f) {
      sum += t[f * 7 + k];
      sum_sq += t[f * 7 + k] * t[f * 7 + k];
    }
    EXPECT_NEAR(sum / 200, 0.0, 1e-5);
    EXPECT_NEAR(sum_sq / 200, 1.0, 1e-4);
  }
}

TEST(Normalize, EmptyUtteranceIsLeftAlone) {
  Tensor t({0, 5});
  normalize_per_utterance(t);
  EXPECT_EQ(t.shape(), (Shape{0, 5}));
}

TEST(Normalize, GlobalStatsEqualStatsOfConcatenation) {
  const Tensor a = random_features(50, 4, 1);
  const Tensor b = random_features(30, 4, 2);
  FeatureStats stats;
  stats.accumulate(a);
  stats.accumulate(b);
  EXPECT_EQ(stats.count, 80);

  // The same statistics computed directly over all 80 frames.
  for (int k = 0; k < 4; ++k) {
    double sum = 0.0;
    for (int f = 0; f < 50; ++f) sum += a[f * 4 + k];
    for (int f = 0; f < 30; ++f) sum += b[f * 4 + k];
    const double mean = sum / 80;
    double var = 0.0;
    for (int f = 0; f < 50; ++f) var += std::pow(a[f * 4 + k] - mean, 2);
    for (int f = 0; f < 30; ++f) var += std::pow(b[f * 4 + k] - mean, 2);
    EXPECT_NEAR(stats.mean()[k], mean, 1e-5);
    EXPECT_NEAR(stats.stddev()[k], std::sqrt(var / 80), 1e-5);
  }

  FeatureStats first, second;
  first.accumulate(a);
  second.accumulate(b);
  first.merge(second);
  EXPECT_EQ(first.mean(), stats.mean());
  EXPECT_EQ(first.count, 80);
}

TEST(Normalize, ApplyGlobalNormalization) {
  Tensor t({2, 3});
  const float values[] = {1, 2, 3, 4, 5, 6};
  std::copy(values, values + 6, t.data());
  apply_global_normalization(t, {1, 0, 4}, {2, 1, 0.5});
  const float expected[] = {0, 2, -2, 1.5f, 5, 4};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(t[i], expected[i]) << i;
}

TEST(Normalize, MismatchedFeatureCountsAreErrors) {
  FeatureStats stats;
  EXPECT_THROW(stats.mean(), Error);
  stats.accumulate(Tensor({2, 3}));
  EXPECT_THROW(stats.accumulate(Tensor({2, 4})), Error);
  Tensor t({2, 3});
  EXPECT_THROW(apply_global_normalization(t, {0, 0}, {1, 1}), Error);
  Tensor rank3({2, 3, 4});
  EXPECT_THROW(normalize_per_utterance(rank3), Error);
}

}  // namespace
}  // namespace ds2
