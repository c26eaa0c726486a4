#include "nn/linear.h"

#include <gtest/gtest.h>

#include "gradient_check.h"

namespace ds2 {
namespace {

using nn_testing::random_sequences;

TEST(Linear, KnownValuesAndZeroPadding) {
  ParameterStore store;
  Linear fc("fc", store, 2, 3);
  store.finalize();
  const float w[] = {1, 2, 3, 4, 5, 6};  // {3, 2}
  const float b[] = {0.5f, -1, 0};
  std::copy(w, w + 6, store.values().data());
  std::copy(b, b + 3, store.values().data() + 6);
  EXPECT_EQ(store.parameters()[0].name, "fc.weight");
  EXPECT_EQ(store.parameters()[1].name, "fc.bias");

  Sequences x;
  x.data.resize({2, 2, 2});
  const float xv[] = {1, -1, 2, 0.5f, 3, 3, 9, 9};  // frame (1, 1) is padding
  std::copy(xv, xv + 8, x.data.data());
  x.lengths = {2, 1};
  Sequences y;
  nn_testing::poison(y, {2, 2, 3});
  fc.forward(x, y, false);
  ASSERT_EQ(y.data.shape(), (Shape{2, 2, 3}));
  const float expected[] = {-0.5f, -2, -1, 3.5f, 7, 13, 9.5f, 20, 33, 0, 0, 0};
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(y.data[i], expected[i]) << i;
}

TEST(Linear, GradientMatchesFiniteDifferences) {
  Rng rng(3);
  ParameterStore store;
  Linear fc("fc", store, 6, 4);
  store.finalize();
  store.initialize(rng);
  Sequences x = random_sequences({5, 3, 6}, {5, 2, 4}, rng, -1.0f, 1.0f, 2.5f);
  nn_testing::GradCheckReport r =
      nn_testing::check_gradients(nn_testing::wrap_layer(fc, true), store, x, rng, {});
  EXPECT_TRUE(r.ok(0.0)) << r.describe();
}

TEST(Linear, AcceptsFourDimensionalFramesAsFlatFeatures) {
  Rng rng(4);
  ParameterStore store;
  Linear fc("fc", store, 6, 2);
  store.finalize();
  store.initialize(rng);
  Sequences x4 = random_sequences({3, 2, 2, 3}, {3, 2}, rng);
  Sequences x3;
  x3.data = Tensor({3, 2, 6});
  std::copy(x4.data.data(), x4.data.data() + x4.data.numel(), x3.data.data());
  x3.lengths = x4.lengths;
  Sequences y4, y3;
  fc.forward(x4, y4, false);
  fc.forward(x3, y3, false);
  for (int64_t i = 0; i < y3.data.numel(); ++i) EXPECT_EQ(y4.data[i], y3.data[i]);
}

}  // namespace
}  // namespace ds2
