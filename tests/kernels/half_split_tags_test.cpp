// The fp16 split's tagged halves (kernels/half_split_tags.h), on the host: each half carries the
// tag in its lowest bit, never rounds to infinity below fp16's largest value, and the two halves
// together stay within 2^-20 |v| of the state value (plus 2^-33 where hi is an fp16 subnormal),
// over magnitudes from fp16 subnormals to the forward's largest clip and the backward's range.
// The kernels' results against float64 are checked on a GPU
// (tests/nn/cuda/persistent_rnn_test.cpp).
#include "kernels/half_split_tags.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/exchange_tags.h"
#include "kernels/persistent_rnn_mma.h"

namespace ds2::kernels {
namespace {

bool finite_half(uint16_t bits) {
  return (bits & 0x7c00u) != 0x7c00u;
}

TEST(HalfSplitTags, EveryHalfCarriesItsTagAndTheSumStaysWithinTwoToTheMinus20) {
  std::mt19937 rng(42);
  std::vector<float> values = {
      0.0f,     -0.0f,    1.0f,       -1.0f,     65503.0f, -65503.0f,
      65472.0f, 65500.5f, 32768.0f,   32767.99f, 32760.0f, 1e-8f,
      -3e-6f,   6.1e-5f,  6.0975e-5f, 2049.0f,   0.999f,   kPrnnHalfSplitMaxClip};
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-30, 15);
  for (int i = 0; i < 200000; ++i) {
    const float v = std::ldexp(mantissa(rng), exponent(rng)) * (i % 2 ? -1.0f : 1.0f);
    if (std::fabs(v) < 65504.0f) values.push_back(v);
  }
  int checked = 0;
  for (const float v : values)
    for (const uint32_t tag : {0u, 1u}) {
      uint16_t hi = 0, lo = 0;
      half_split_tagged_parts(v, tag, hi, lo);
      ASSERT_EQ(hi & 1u, tag) << "v " << v;
      ASSERT_EQ(lo & 1u, tag) << "v " << v;
      ASSERT_TRUE(finite_half(hi) && finite_half(lo)) << "v " << v << ": " << hi << ", " << lo;
      const double back = double{half_bits_value(hi)} + double{half_bits_value(lo)} / kHalfLoScale;
      EXPECT_LE(std::fabs(back - v), std::ldexp(std::fabs(double{v}), -20) + std::ldexp(1.0, -33))
          << "v " << v << ", tag " << tag;
      ++checked;
    }
  EXPECT_GT(checked, 300000);
}

TEST(HalfSplitTags, TheStepTagsTellEveryStepFromTheOneTwoBefore) {
  // Each half of step s must differ from the same place's half of step s - 2 in its lowest bit,
  // for the same value too (a state that did not change).
  for (int s = 2; s < 64; ++s)
    for (const float v : {0.0f, 0.5f, -7.25f, 20.0f}) {
      uint16_t hi0 = 0, lo0 = 0, hi1 = 0, lo1 = 0;
      half_split_tagged_parts(v, half_split_step_tag(s), hi0, lo0);
      half_split_tagged_parts(v, half_split_step_tag(s - 2), hi1, lo1);
      EXPECT_NE(hi0 & 1u, hi1 & 1u) << "step " << s;
      EXPECT_NE(lo0 & 1u, lo1 & 1u) << "step " << s;
    }
}

TEST(HalfSplitTags, OneUlpAtMost) {
  // half_with_tag picks between x rounded toward zero and the next fp16 up in magnitude: at most
  // one ulp from x, the lowest bit as asked.
  for (const float x : {1.0f, 1.0004883f, -2.5f, 1000.1f, 65504.0f, -65504.0f, 3e-7f}) {
    for (const uint32_t tag : {0u, 1u}) {
      const uint16_t b = half_with_tag(x, tag);
      EXPECT_EQ(b & 1u, tag);
      const float ulp = std::fabs(half_bits_value(static_cast<uint16_t>((b & 0x7fffu) | 1u)) -
                                  half_bits_value(static_cast<uint16_t>((b & 0x7fffu) & ~1u)));
      EXPECT_LE(std::fabs(half_bits_value(b) - x), ulp * 1.0001f) << "x " << x << ", tag " << tag;
      EXPECT_TRUE(finite_half(b)) << "x " << x;
    }
  }
}

}  // namespace
}  // namespace ds2::kernels
