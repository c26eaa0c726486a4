#include "core/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace ds2 {
namespace {

TEST(Bf16, ExactValuesRoundTrip) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 0.15625f, 65536.0f, -1572864.0f})
    EXPECT_EQ(bf16_to_float(float_to_bf16(v)), v) << v;
}

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  // Just above the halfway point rounds up.
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256 + 1.0f / 65536)), 1.0f + 1.0f / 128);
  // Half a unit in the last place: relative error at most 2^-8 (8 significant bits).
  for (float v = -1000.0f; v < 1000.0f; v += 0.731f)
    EXPECT_LE(std::abs(bf16_to_float(float_to_bf16(v)) - v), std::abs(v) / 256) << v;
}

TEST(Bf16, KeepsInfinitiesAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bf16_to_float(float_to_bf16(inf)), inf);
  EXPECT_EQ(bf16_to_float(float_to_bf16(-inf)), -inf);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  // The largest floats overflow to infinity rather than wrapping.
  EXPECT_EQ(bf16_to_float(float_to_bf16(std::numeric_limits<float>::max())), inf);
}

}  // namespace
}  // namespace ds2
