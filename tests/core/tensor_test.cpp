#include "core/tensor.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace ds2 {

TEST(Tensor, ResizeReusesStorageWhenShrinking) {
  Tensor t({4, 3, 5}, 1.5f);
  EXPECT_EQ(t.numel(), 60);
  EXPECT_EQ(t[59], 1.5f);
  const float* before = t.data();
  t.resize({2, 3, 5});
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.data(), before);
  EXPECT_EQ(t.dim(-1), 5);
}

TEST(Tensor, NegativeDimensionIsAnError) {
  EXPECT_THROW(Tensor({2, -1}), Error);
}

}  // namespace ds2
