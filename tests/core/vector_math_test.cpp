#include "core/vector_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace ds2 {
namespace {

// Every float from -20 to 20 in steps that hit many exponents, plus the odd count that leaves
// a scalar tail after the vector loop.
std::vector<float> sweep() {
  std::vector<float> x;
  for (double v = 1e-12; v < 20.0; v *= 1.0007) {
    x.push_back(static_cast<float>(v));
    x.push_back(static_cast<float>(-v));
  }
  for (float v : {0.0f, -0.0f, 0.62499994f, 0.625f, -0.625f, 43.9f, -43.9f, 87.0f, -87.0f})
    x.push_back(v);
  if (x.size() % 2 == 0) x.push_back(0.3f);
  return x;
}

// The largest relative error of `f` over sweep() against the float64 function `exact` (where
// that is 0, f must give exactly 0).
double worst_relative_error(void (*f)(const float*, float*, int64_t), double (*exact)(double)) {
  const std::vector<float> x = sweep();
  std::vector<float> y(x.size(), std::nanf(""));
  f(x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = exact(x[i]);
    if (want == 0) {
      EXPECT_EQ(y[i], 0.0f) << x[i];
      continue;
    }
    worst = std::max(worst, std::abs(y[i] - want) / std::abs(want));
  }
  return worst;
}

TEST(VectorMath, SigmoidWithinFloatRoundingOfFloat64) {
  EXPECT_LT(
      worst_relative_error(vector_sigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }),
      4e-7);
}

TEST(VectorMath, TanhKeepsRelativeAccuracyNearZeroAndSaturates) {
  EXPECT_LT(worst_relative_error(vector_tanh, [](double x) { return std::tanh(x); }), 4e-7);
  const float big[] = {100.0f, -100.0f, 1e30f, -1e30f};
  float out[4];
  vector_tanh(big, out, 4);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -1.0f);
  EXPECT_EQ(out[2], 1.0f);
  EXPECT_EQ(out[3], -1.0f);
}

TEST(VectorMath, SigmoidSaturatesAndKeepsNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float x[] = {200.0f, -200.0f, inf, -inf, std::nanf(""), 0.0f};
  float y[6];
  vector_sigmoid(x, y, 6);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_GE(y[1], 0.0f);
  EXPECT_LT(y[1], 1e-37f);
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_LT(y[3], 1e-37f);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[5], 0.5f);
  float t[1];
  vector_tanh(x + 4, t, 1);
  EXPECT_TRUE(std::isnan(t[0]));
}

TEST(VectorMath, InPlaceGivesTheSameValues) {
  std::vector<float> x = sweep(), y(x.size());
  vector_tanh(x.data(), y.data(), static_cast<int64_t>(x.size()));
  vector_tanh(x.data(), x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(x, y);
}

}  // namespace
}  // namespace ds2
