#include "core/vector_math.h"

#include <cstdint>
#include <cstring>

// Built with -fno-trapping-math (CMakeLists.txt): without it GCC will not turn the clamps and
// the tanh's branch into selects, and the loops stay scalar.

namespace ds2 {

namespace {

// exp(x) = 2^n * exp(f), n = round(x / ln 2), |f| <= ln 2 / 2; exp(f) by its Taylor series to
// f^7 (truncation 1.3e-8 relative). x is clamped to [-87, 88] so 2^n stays a normal float.
inline float exp_clamped(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  const float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to integer
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  // ln 2 split in two so n * ln2_hi is exact for |n| <= 128.
  const float f = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  float p = 1.0f / 5040.0f;
  p = p * f + 1.0f / 720.0f;
  p = p * f + 1.0f / 120.0f;
  p = p * f + 1.0f / 24.0f;
  p = p * f + 1.0f / 6.0f;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// tanh(x) for |x| < 0.625 as x + x^3 Q(x^2), Q fitted here (least squares in relative error,
// 8e-8 in float); beyond, 1 - 2 / (exp(2|x|) + 1) with x's sign, which loses nothing there.
inline float tanh_one(float x) {
  const float a = x < 0.0f ? -x : x;
  const float u = x * x;
  float q = -0.005731123499572277f;
  q = q * u + 0.02066466398537159f;
  q = q * u - 0.05374842509627342f;
  q = q * u + 0.13331560790538788f;
  q = q * u - 0.3333328664302826f;
  const float small = x + x * u * q;
  const float large_abs = 1.0f - 2.0f / (exp_clamped(2.0f * a) + 1.0f);
  const float large = x < 0.0f ? -large_abs : large_abs;
  return a < 0.625f ? small : large;
}

}  // namespace

void vector_sigmoid(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + exp_clamped(-x[i]));
}

void vector_tanh(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh_one(x[i]);
}

}  // namespace ds2
