#include "nn/dropout.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ds2
