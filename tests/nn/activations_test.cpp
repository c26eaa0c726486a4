#include "nn/activations.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "gradient_check.h"

namespace ds2 {
namespace {

using nn_testing::check_gradients;
using nn_testing::random_sequences;

TEST(ClippedRelu, KnownValues) {
  const float x[] = {-3.0f, -0.0f, 0.5f, 1.999f, 2.0f, 7.0f};
  float y[6];
  clipped_relu(x, y, 6, 2.0f);
  const float expected[] = {0.0f, 0.0f, 0.5f, 1.999f, 2.0f, 2.0f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], expected[i]) << i;

  const float dy[] = {1, 2, 3, 4, 5, 6};
  float dx[6];
  clipped_relu_backward(y, dy, dx, 6, 2.0f);
  const float expected_dx[] = {0, 0, 3, 4, 0, 0};  // flat outside (0, clip)
  for (int i = 0; i < 6; ++i) EXPECT_EQ(dx[i], expected_dx[i]) << i;
}

// The recurrence's form adds the carried gradient before the mask, over lengths that leave a
// remainder past the vector loop's width; a masked element is +0 even where dy or the carry is
// infinite or NaN (a select, not a product with the mask), and dx may be dy.
TEST(ClippedRelu, BackwardWithCarryMatchesTheSelectElementwise) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int n : {1, 3, 4, 7, 37}) {
    SCOPED_TRACE(n);
    std::vector<float> y(n), dy(n), carry(n), dx(n, -9.0f);
    for (int i = 0; i < n; ++i) {
      y[i] = 0.75f * (i % 5) - 0.75f;  // -0.75, 0, 0.75, 1.5, 2.25 against clip 1.5
      dy[i] = i % 7 == 3 ? inf : 0.5f + i;
      carry[i] = i % 11 == 4 ? nan : -0.25f * i;
    }
    clipped_relu_backward(y.data(), dy.data(), carry.data(), dx.data(), n, 1.5f);
    for (int i = 0; i < n; ++i) {
      const float sum = dy[i] + carry[i];
      if (y[i] > 0.0f && y[i] < 1.5f) {
        if (std::isnan(sum))
          EXPECT_TRUE(std::isnan(dx[i])) << i;
        else
          EXPECT_EQ(dx[i], sum) << i;
      } else {
        EXPECT_EQ(dx[i], 0.0f) << i;
        EXPECT_FALSE(std::signbit(dx[i])) << i;
      }
    }
    std::vector<float> in_place = dy;
    clipped_relu_backward(y.data(), in_place.data(), carry.data(), in_place.data(), n, 1.5f);
    for (int i = 0; i < n; ++i)
      if (!std::isnan(dx[i])) EXPECT_EQ(in_place[i], dx[i]) << i;
  }
}

TEST(ClippedRelu, LayerZeroesPaddingAndRejectsBadClip) {
  Rng rng(1);
  ClippedReLU relu("relu", 1.0f);
  Sequences x = random_sequences({3, 2, 2, 4}, {3, 1}, rng, -2.0f, 2.0f, 0.7f);
  Sequences y;
  relu.forward(x, y, true);
  EXPECT_EQ(y.data.shape(), x.data.shape());
  EXPECT_EQ(nn_testing::nonzero_padding(y), 0);
  for (int64_t i = 0; i < 8; ++i)  // frame (0, 0)
    EXPECT_EQ(y.data[i], std::min(std::max(x.data[i], 0.0f), 1.0f));
  EXPECT_THROW(ClippedReLU("bad", 0.0f), Error);
}

TEST(ClippedRelu, GradientMatchesFiniteDifferences) {
  Rng rng(2);
  ClippedReLU relu("relu", 1.0f);
  Sequences x = random_sequences({4, 3, 5}, {4, 2, 3}, rng, -2.0f, 2.0f, 0.3f);
  // Keep every input at least 0.05 away from the kinks at 0 and 1 so no step crosses one.
  for (int64_t i = 0; i < x.data.numel(); ++i) {
    float& v = x.data[i];
    if (std::fabs(v) < 0.05f) v += 0.1f;
    if (std::fabs(v - 1.0f) < 0.05f) v += 0.1f;
  }
  ParameterStore store;
  store.finalize();
  nn_testing::GradCheckReport r =
      check_gradients(nn_testing::wrap_layer(relu, true), store, x, rng, {});
  EXPECT_TRUE(r.ok(0.0)) << r.describe();
  EXPECT_EQ(r.checked, (4 + 2 + 3) * 5);
}

}  // namespace
}  // namespace ds2
