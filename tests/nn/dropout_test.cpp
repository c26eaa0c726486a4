#include "nn/dropout.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/dropout_mask.h"
#include "core/error.h"
#include "nn/gradient_check.h"

namespace ds2 {
namespace {

using nn_testing::random_sequences;

TEST(Dropout, TrainingMasksAndScalesEvalIsIdentity) {
  Rng rng(1);
  Sequences x = random_sequences({50, 3, 40}, {50, 31, 7}, rng), y, y2, dy, dx;
  Dropout drop("d", 0.25f);
  drop.reseed(9);
  nn_testing::poison(y, x.data.shape());
  drop.forward(x, y, /*training=*/true);
  int64_t dropped = 0, valid = 0;
  for (int64_t t = 0; t < 50; ++t)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t f = 0; f < 40; ++f) {
        const int64_t i = (t * 3 + b) * 40 + f;
        if (t >= x.lengths[b]) {
          ASSERT_EQ(y.data[i], 0.0f);
          continue;
        }
        ++valid;
        if (y.data[i] == 0.0f)
          ++dropped;
        else
          ASSERT_FLOAT_EQ(y.data[i], x.data[i] / 0.75f);
      }
  EXPECT_NEAR(static_cast<double>(dropped) / valid, 0.25, 0.03);

  // The gradient passes exactly where the forward kept values, with the same scale.
  dy = random_sequences({50, 3, 40}, {50, 31, 7}, rng);
  drop.backward(x, y, dy, dx);
  for (int64_t i = 0; i < x.data.numel(); ++i) {
    const float expected = y.data[i] == 0.0f ? 0.0f : dy.data[i] / 0.75f;
    ASSERT_FLOAT_EQ(dx.data[i], expected) << i;
  }

  // Same seed, same mask; eval mode is the identity.
  drop.reseed(9);
  drop.forward(x, y2, true);
  for (int64_t i = 0; i < y.data.numel(); ++i) ASSERT_EQ(y.data[i], y2.data[i]);
  drop.forward(x, y2, false);
  for (int64_t i = 0; i < x.data.numel(); ++i) ASSERT_EQ(y2.data[i], x.data[i]);
  EXPECT_THROW(Dropout("bad", 1.0f), Error);
}

TEST(Dropout, MaskIsTheCounterHashOfSeedAndIndex) {
  // splitmix64 of (seed, index), worked out independently (Python integers): the values pin the
  // hash the GPU kernel shares, so a change to either shows here, where CI runs.
  EXPECT_EQ(counter_hash_u32(0, 0), 3793791033u);
  EXPECT_EQ(counter_hash_u32(42, 7), 3438687726u);
  EXPECT_EQ(counter_hash_u32(9223372036854775813ull, 123456789), 2301280821u);
  // (3793791033 >> 8) / 2^24 = 0.8833: kept at p 0.5, dropped at p 0.9.
  EXPECT_EQ(dropout_scale(0, 0, 0.5f), 2.0f);
  EXPECT_EQ(dropout_scale(0, 0, 0.9f), 0.0f);

  // The layer's k-th training forward since reseed(s) uses seed s + k, element by flat index.
  Rng rng(3);
  const Sequences x = random_sequences({7, 3, 11}, {7, 7, 7}, rng);
  Dropout drop("d", 0.3f);
  drop.reseed(1000);
  Sequences y;
  for (uint64_t call = 0; call < 2; ++call) {
    nn_testing::poison(y, x.data.shape());
    drop.forward(x, y, true);
    for (int64_t i = 0; i < x.data.numel(); ++i)
      ASSERT_EQ(y.data[i], x.data[i] * dropout_scale(1000 + call, static_cast<uint64_t>(i), 0.3f))
          << "call " << call << " element " << i;
  }
  EXPECT_EQ(drop.next_seed(), 1002u);
}

TEST(Dropout, RandomStateRoundTripsAndReadsTheOldGeneratorState) {
  Rng rng(4);
  const Sequences x = random_sequences({9, 2, 13}, {9, 4}, rng);
  Dropout a("d", 0.4f), b("d", 0.4f);
  a.reseed(77);
  Sequences ya, yb;
  a.forward(x, ya, true);
  EXPECT_EQ(a.next_seed(), 78u);
  // Through the checkpoint's text, the seed in decimal.
  b.reseed(dropout_seed_from_state(std::to_string(a.next_seed())));
  a.forward(x, ya, true);
  b.forward(x, yb, true);
  for (int64_t i = 0; i < x.data.numel(); ++i) ASSERT_EQ(ya.data[i], yb.data[i]) << i;
  b.reseed(dropout_seed_from_state("18446744073709551615"));  // the largest seed
  EXPECT_EQ(b.next_seed(), 18446744073709551615ull);

  // An older build wrote std::mt19937_64's state: it is read, and fixes the next seed.
  std::mt19937_64 legacy(5);
  std::ostringstream text;
  text << legacy;
  b.reseed(dropout_seed_from_state(text.str()));
  Dropout c("d", 0.4f);
  c.reseed(dropout_seed_from_state(text.str()));
  EXPECT_EQ(b.next_seed(), c.next_seed());
  for (const std::string bad : {"", "12x", "-3", "18446744073709551616", "1 2 3"})
    EXPECT_THROW(dropout_seed_from_state(bad), std::invalid_argument) << "'" << bad << "'";
}

}  // namespace
}  // namespace ds2
