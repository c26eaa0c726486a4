#include "dist/bucket_plan.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace ds2::dist {
namespace {

TEST(BucketPlan, CoversTheBufferFromTheEndInWholeLayers) {
  // conv, bn, relu (no parameters), rnn0, rnn1, fc
  const std::vector<int64_t> layers = {100, 8, 0, 500, 500, 50};
  BucketPlan plan(layers, 400);
  ASSERT_EQ(plan.total(), 1158);
  const auto& b = plan.buckets();
  // From the end: fc + rnn1 (550 >= 400), rnn0 (500), then what is left: relu, bn, conv.
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].offset, 608);
  EXPECT_EQ(b[0].count, 550);
  EXPECT_EQ(b[0].lowest_layer, 4u);
  EXPECT_EQ(b[1].offset, 108);
  EXPECT_EQ(b[1].count, 500);
  EXPECT_EQ(b[1].lowest_layer, 3u);
  EXPECT_EQ(b[2].offset, 0);
  EXPECT_EQ(b[2].count, 108);
  EXPECT_EQ(b[2].lowest_layer, 0u);
  EXPECT_EQ(plan.ready_after(5).size(), 0u);
  EXPECT_EQ(plan.ready_after(4), std::vector<int>{0});
  EXPECT_EQ(plan.ready_after(3), std::vector<int>{1});
  EXPECT_EQ(plan.ready_after(2).size(), 0u);
  EXPECT_EQ(plan.ready_after(0), std::vector<int>{2});
}

TEST(BucketPlan, OneBucketWhenTheSizeExceedsTheModel) {
  BucketPlan plan({10, 0, 20}, 1 << 20);
  ASSERT_EQ(plan.buckets().size(), 1u);
  EXPECT_EQ(plan.buckets()[0].offset, 0);
  EXPECT_EQ(plan.buckets()[0].count, 30);
  EXPECT_EQ(plan.ready_after(0), std::vector<int>{0});
}

TEST(BucketPlan, TrailingLayersWithoutParametersMakeNoEmptyBucket) {
  BucketPlan plan({0, 7, 0, 0}, 1);
  ASSERT_EQ(plan.buckets().size(), 1u);
  EXPECT_EQ(plan.buckets()[0].count, 7);
  EXPECT_EQ(plan.buckets()[0].lowest_layer, 1u);
  EXPECT_NE(plan.describe().find("1 bucket"), std::string::npos);
}

TEST(BucketPlan, RejectsANonPositiveSize) {
  EXPECT_THROW(BucketPlan({1, 2}, 0), Error);
}

}  // namespace
}  // namespace ds2::dist
