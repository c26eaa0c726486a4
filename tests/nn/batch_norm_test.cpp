#include "nn/batch_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "gradient_check.h"

namespace ds2 {
namespace {

using nn_testing::random_sequences;

struct Stats {
  std::vector<double> mean, var;  // biased variance
  std::vector<int64_t> count;
};

// Per-channel mean and biased variance over valid frames (all F positions for 4-D data), of the
// whole batch or of utterance `only` alone.
Stats reference_stats(const Sequences& x, int channels, int64_t only = -1) {
  const int64_t T = x.time(), B = x.batch(), S = x.frame_size() / channels;
  Stats s{std::vector<double>(channels), std::vector<double>(channels),
          std::vector<int64_t>(channels)};
  std::vector<std::vector<double>> values(channels);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      if (t < x.lengths[b] && (only < 0 || b == only))
        for (int c = 0; c < channels; ++c)
          for (int64_t i = 0; i < S; ++i)
            values[c].push_back(x.data[((t * B + b) * channels + c) * S + i]);
  for (int c = 0; c < channels; ++c) {
    s.count[c] = static_cast<int64_t>(values[c].size());
    for (double v : values[c]) s.mean[c] += v / s.count[c];
    for (double v : values[c]) s.var[c] += (v - s.mean[c]) * (v - s.mean[c]) / s.count[c];
  }
  return s;
}

// Expects y == gamma * (x - mean) / sqrt(var + eps) + beta on valid frames, 0 on padding (of
// every utterance, or of utterance `only`).
void expect_normalized(const Sequences& x, const Sequences& y, int channels,
                       const std::vector<double>& mean, const std::vector<double>& var,
                       const float* gamma, const float* beta, int64_t only = -1) {
  const int64_t T = x.time(), B = x.batch(), S = x.frame_size() / channels;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int c = 0; c < channels && (only < 0 || b == only); ++c)
        for (int64_t i = 0; i < S; ++i) {
          const int64_t k = ((t * B + b) * channels + c) * S + i;
          const double expected =
              t < x.lengths[b]
                  ? gamma[c] * (x.data[k] - mean[c]) / std::sqrt(var[c] + 1e-5) + beta[c]
                  : 0.0;
          EXPECT_NEAR(y.data[k], expected, 2e-5) << "t " << t << " b " << b << " c " << c;
        }
}

// Finalizes the store of the layers built on it, initializes it, and gives gamma and beta random
// values away from 1 and 0 (a wrong scale or shift shows).
void finalize_with_random_affine(ParameterStore& store, Rng& rng) {
  store.finalize();
  store.initialize(rng);
  for (int64_t i = 0; i < store.values().numel(); ++i)
    store.values()[i] = rng.uniform(0.5f, 1.5f) * (i % 2 ? 1.0f : -1.0f);
}

TEST(BatchNorm, TrainingUsesValidFramesOnlyAndUpdatesRunningStats) {
  for (bool four_d : {false, true}) {
    Rng rng(10);
    const int C = four_d ? 3 : 5;
    ParameterStore store;
    BatchNorm bn("bn", store, C, /*momentum=*/0.25f);
    finalize_with_random_affine(store, rng);
    const Shape shape = four_d ? Shape{4, 3, C, 6} : Shape{4, 3, C};
    Sequences x = random_sequences(shape, {4, 1, 2}, rng, -2.0f, 2.0f, 50.0f);
    for (int64_t i = 0; i < x.data.numel(); ++i) x.data[i] += 3.0f;  // nonzero mean
    Sequences y;
    nn_testing::poison(y, shape);
    bn.forward(x, y, /*training=*/true);
    const Stats s = reference_stats(x, C);
    expect_normalized(x, y, C, s.mean, s.var, store.values().data(), store.values().data() + C);
    const float* running = store.buffers().data();
    for (int c = 0; c < C; ++c) {
      const double n = static_cast<double>(s.count[c]);
      EXPECT_NEAR(running[c], 0.25 * s.mean[c], 1e-5);
      EXPECT_NEAR(running[C + c], 0.75 + 0.25 * s.var[c] * n / (n - 1), 1e-5);
    }
  }
}

TEST(BatchNorm, InferenceUsesRunningStats) {
  Rng rng(11);
  const int C = 4;
  ParameterStore store;
  BatchNorm bn("bn", store, C, 0.1f);
  EXPECT_EQ(store.buffer_entries()[0].name, "bn.running_mean");
  EXPECT_EQ(store.buffer_entries()[1].name, "bn.running_var");
  finalize_with_random_affine(store, rng);
  std::vector<double> mean(C), var(C);
  for (int c = 0; c < C; ++c) {
    mean[c] = store.buffers()[c] = rng.uniform(-1, 1);
    var[c] = store.buffers()[C + c] = rng.uniform(0.5f, 2.0f);
  }
  Sequences x = random_sequences({3, 2, C}, {3, 2}, rng, -1.0f, 1.0f, 4.0f);
  Sequences y;
  bn.forward(x, y, /*training=*/false);
  expect_normalized(x, y, C, mean, var, store.values().data(), store.values().data() + C);
  for (int c = 0; c < C; ++c) EXPECT_EQ(store.buffers()[c], static_cast<float>(mean[c]));
}

TEST(BatchNorm, PerUtteranceStatisticsNormalizeEachUtteranceByItsOwnFrames) {
  for (bool training : {true, false}) {
    for (bool four_d : {false, true}) {
      SCOPED_TRACE(std::string(training ? "training" : "inference") + (four_d ? " 4-D" : ""));
      Rng rng(13);
      const int C = four_d ? 3 : 5;
      ParameterStore store;
      BatchNorm bn("bn", store, C, 0.1f, NormStatistics::kUtterance);
      EXPECT_TRUE(store.buffer_entries().empty()) << "no running statistics";
      EXPECT_EQ(bn.describe(), "BatchNorm " + std::to_string(C) + " (per utterance)");
      finalize_with_random_affine(store, rng);
      const Shape shape = four_d ? Shape{5, 4, C, 6} : Shape{5, 4, C};
      Sequences x = random_sequences(shape, {5, 2, 3, 0}, rng, -2.0f, 2.0f, 50.0f);
      // A different offset and scale per utterance, as different voices and channels give.
      for (int64_t i = 0; i < x.data.numel(); ++i) {
        const int64_t b = (i / x.frame_size()) % 4;
        x.data[i] = x.data[i] * (1.0f + b) + 3.0f * b;
      }
      Sequences y;
      nn_testing::poison(y, shape);
      bn.forward(x, y, training);
      for (int64_t b = 0; b < 3; ++b) {
        const Stats s = reference_stats(x, C, b);
        expect_normalized(x, y, C, s.mean, s.var, store.values().data(), store.values().data() + C,
                          b);
      }
      for (int64_t i = 0; i < y.data.numel(); ++i)  // utterance 3 is empty: all padding
        if ((i / y.frame_size()) % 4 == 3) ASSERT_EQ(y.data[i], 0.0f);
    }
  }
}

// The point of per-utterance statistics: an utterance comes out the same whoever shares its batch.
TEST(BatchNorm, PerUtteranceOutputDoesNotDependOnBatchMates) {
  Rng rng(14);
  const int C = 4;
  ParameterStore store;
  BatchNorm bn("bn", store, C, 0.1f, NormStatistics::kUtterance);
  finalize_with_random_affine(store, rng);
  Sequences batch = random_sequences({6, 3, C}, {4, 6, 2}, rng, -1.0f, 5.0f, 9.0f);
  Sequences alone = random_sequences({4, 1, C}, {4}, rng);
  for (int64_t t = 0; t < 4; ++t)
    for (int c = 0; c < C; ++c) alone.data[t * C + c] = batch.data[(t * 3 + 0) * C + c];
  Sequences y_batch, y_alone;
  bn.forward(batch, y_batch, /*training=*/true);
  bn.forward(alone, y_alone, /*training=*/true);
  for (int64_t t = 0; t < 4; ++t)
    for (int c = 0; c < C; ++c)
      EXPECT_NEAR(y_alone.data[t * C + c], y_batch.data[(t * 3 + 0) * C + c], 1e-6)
          << "t " << t << " c " << c;
}

TEST(BatchNorm, ParsesStatisticsNames) {
  EXPECT_EQ(parse_norm_statistics("batch"), NormStatistics::kBatch);
  EXPECT_EQ(parse_norm_statistics("utterance"), NormStatistics::kUtterance);
  EXPECT_EQ(norm_statistics_name(NormStatistics::kUtterance), "utterance");
  try {
    parse_norm_statistics("utterances");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("valid: batch, utterance"), std::string::npos) << e.what();
  }
}

// Every utterance empty: zeros out, finite zero gradients, running statistics untouched.
TEST(BatchNorm, AllPaddingBatchLeavesRunningStatisticsAlone) {
  for (NormStatistics statistics : {NormStatistics::kBatch, NormStatistics::kUtterance}) {
    SCOPED_TRACE(norm_statistics_name(statistics));
    Rng rng(15);
    const int C = 3;
    ParameterStore store;
    BatchNorm bn("bn", store, C, 0.5f, statistics);
    finalize_with_random_affine(store, rng);
    const std::vector<float> buffers(store.buffers().data(),
                                     store.buffers().data() + store.buffers().numel());
    Sequences x = random_sequences({4, 2, C}, {0, 0}, rng, -1.0f, 1.0f, 6.0f);
    Sequences y, dx;
    nn_testing::poison(y, x.data.shape());
    bn.forward(x, y, /*training=*/true);
    for (int64_t i = 0; i < y.data.numel(); ++i) ASSERT_EQ(y.data[i], 0.0f) << i;
    EXPECT_EQ(std::vector<float>(store.buffers().data(),
                                 store.buffers().data() + store.buffers().numel()),
              buffers);
    store.zero_grads();
    bn.backward(x, y, random_sequences({4, 2, C}, {0, 0}, rng), dx);
    for (int64_t i = 0; i < dx.data.numel(); ++i) ASSERT_EQ(dx.data[i], 0.0f) << i;
    for (int64_t i = 0; i < store.grads().numel(); ++i) ASSERT_EQ(store.grads()[i], 0.0f) << i;
  }
}

TEST(BatchNorm, RejectsChannelMismatch) {
  ParameterStore store;
  BatchNorm bn("bn", store, 3, 0.1f);
  store.finalize();
  Sequences x;
  x.data.resize({2, 1, 4});
  x.lengths = {2};
  Sequences y;
  EXPECT_THROW(bn.forward(x, y, true), Error);
}

TEST(BatchNorm, GradientMatchesFiniteDifferences) {
  for (NormStatistics statistics : {NormStatistics::kBatch, NormStatistics::kUtterance})
    for (bool training : {true, false}) {
      for (bool four_d : {false, true}) {
        SCOPED_TRACE(norm_statistics_name(statistics));
        Rng rng(12);
        const int C = 3;
        ParameterStore store;
        BatchNorm bn("bn", store, C, 0.1f, statistics);
        finalize_with_random_affine(store, rng);
        if (statistics == NormStatistics::kBatch) {
          store.buffers()[0] = 0.3f;  // non-trivial running statistics for the inference case
          store.buffers()[C] = 1.7f;
        }
        const Shape shape = four_d ? Shape{4, 3, C, 3} : Shape{5, 3, C};
        Sequences x =
            random_sequences(shape, {static_cast<int>(shape[0]), 2, 3}, rng, -1.0f, 1.0f, 3.0f);
        nn_testing::GradCheckOptions opt;
        nn_testing::GradCheckReport r =
            nn_testing::check_gradients(nn_testing::wrap_layer(bn, training), store, x, rng, opt);
        EXPECT_TRUE(r.ok(0.0)) << "training " << training << " 4-D " << four_d << ": "
                               << r.describe();
      }
    }
}

}  // namespace
}  // namespace ds2
