#include "audio/resample.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"

namespace ds2 {
namespace {

// Samples of sin(2 pi f t + phase) at `rate`.
std::vector<float> sine(int64_t n, double freq, double rate, double phase = 0.3) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(2.0 * M_PI * freq * i / rate + phase);
  return x;
}

// Compares `y` with the ideal sine away from the ends, where the filter sees zero padding.
void expect_matches_sine(const std::vector<float>& y, double freq, double rate, int64_t margin) {
  const std::vector<float> ideal = sine(y.size(), freq, rate);
  double cross = 0.0, ideal_energy = 0.0, max_error = 0.0;
  for (size_t j = margin; j + margin < y.size(); ++j) {
    cross += double(y[j]) * ideal[j];
    ideal_energy += double(ideal[j]) * ideal[j];
    max_error = std::max(max_error, std::abs(double(y[j]) - ideal[j]));
  }
  EXPECT_NEAR(cross / ideal_energy, 1.0, 1e-3) << "amplitude/phase via correlation";
  EXPECT_LT(max_error, 1e-3);  // measured ~1e-4: passband ripple of the Kaiser design
}

double interior_rms(const std::vector<float>& y, int64_t margin) {
  double energy = 0.0;
  int64_t count = 0;
  for (size_t j = margin; j + margin < y.size(); ++j, ++count) energy += double(y[j]) * y[j];
  return std::sqrt(energy / count);
}

TEST(Resample, OutputLengthIsRoundedRatio) {
  EXPECT_EQ(Resampler(8000, 16000).output_length(1000), 2000);
  EXPECT_EQ(Resampler(16000, 8000).output_length(1001), 501);   // 500.5 rounds up
  EXPECT_EQ(Resampler(44100, 16000).output_length(1000), 363);  // 362.81
  EXPECT_EQ(Resampler(110, 100).output_length(12345), 11223);   // 11222.7
  std::vector<float> x(4410, 0.25f);
  EXPECT_EQ(resample(x.data(), x.size(), 44100, 16000).size(), 1600u);
  EXPECT_EQ(resample(x.data(), 1001, 16000, 8000).size(), 501u);
  EXPECT_TRUE(resample(x.data(), 0, 16000, 8000).empty());
}

TEST(Resample, EqualRatesCopy) {
  const std::vector<float> x = sine(100, 440, 8000);
  EXPECT_EQ(resample(x.data(), x.size(), 8000, 8000), x);
}

TEST(Resample, ConstantSignalPassesUnchanged) {
  const std::vector<float> x(3000, 0.5f);
  const std::vector<float> y = resample(x.data(), x.size(), 44100, 16000);
  for (size_t j = 100; j + 100 < y.size(); ++j) ASSERT_NEAR(y[j], 0.5f, 1e-5) << j;
}

TEST(Resample, SineBelowNyquistKeepsAmplitudeAndFrequency) {
  struct Case {
    int from, to;
    double freq;  // in the same units as the rates
  };
  const Case cases[] = {
      {8000, 16000, 1000.0},  {8000, 16000, 3300.0},  {16000, 8000, 1000.0},
      {44100, 16000, 3000.0}, {16000, 44100, 6800.0}, {90, 100, 30.0},  // speed 0.9
      {110, 100, 40.0},                                                 // speed 1.1
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.from << " -> " << c.to << " at " << c.freq);
    const std::vector<float> x = sine(4000, c.freq, c.from);
    const std::vector<float> y = resample(x.data(), x.size(), c.from, c.to);
    expect_matches_sine(y, c.freq, c.to, 150);
  }
}

TEST(Resample, ManyPhaseRatioUsesDirectFilterEvaluation) {
  // 16001 -> 16000 has 16000 phases: too many to tabulate, each output computes its own filter.
  const std::vector<float> x = sine(3000, 2000.0, 16001);
  const std::vector<float> y = resample(x.data(), x.size(), 16001, 16000);
  EXPECT_EQ(y.size(), 3000u);  // 2999.81
  expect_matches_sine(y, 2000.0, 16000, 150);
}

TEST(Resample, ToneAboveNewNyquistIsRemovedWhenDownsampling) {
  struct Case {
    int from, to;
    double freq;
  };
  const Case cases[] = {
      {16000, 8000, 5000.0}, {16000, 8000, 4300.0}, {44100, 16000, 9000.0}, {110, 100, 52.0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.from << " -> " << c.to << " at " << c.freq);
    const std::vector<float> x = sine(8000, c.freq, c.from);
    const std::vector<float> y = resample(x.data(), x.size(), c.from, c.to);
    const double attenuation_db = -20.0 * std::log10(interior_rms(y, 150) / interior_rms(x, 0));
    EXPECT_GT(attenuation_db, 70.0);  // measured 84-95 dB
  }
}

TEST(Resample, NonPositiveRateIsAnError) {
  EXPECT_THROW(Resampler(0, 16000), Error);
  EXPECT_THROW(Resampler(16000, -1), Error);
  EXPECT_THROW(cached_resampler(0, 16000), Error);
  EXPECT_THROW(resample(nullptr, 0, 16000, -1), Error);
}

// The cached resampler of a pair is one object, built once a thread, and resamples exactly as a
// freshly built one (speed perturbation's 80:100 and 125:100, a file's 16000:8000).
TEST(Resample, CachedResamplerIsBuiltOnceAndMatchesAFreshOne) {
  const std::vector<float> x = sine(1001, 440.0, 8000.0);
  for (const auto& [from, to] : {std::pair{80, 100}, std::pair{125, 100}, std::pair{16000, 8000}}) {
    const Resampler& cached = cached_resampler(from, to);
    EXPECT_EQ(&cached, &cached_resampler(from, to));
    EXPECT_EQ(cached.from_rate(), from);
    EXPECT_EQ(cached.to_rate(), to);
    std::vector<float> fresh, again;
    Resampler(from, to).process(x.data(), static_cast<int64_t>(x.size()), fresh);
    cached.process(x.data(), static_cast<int64_t>(x.size()), again);
    ASSERT_EQ(fresh.size(), again.size());
    EXPECT_EQ(std::memcmp(fresh.data(), again.data(), fresh.size() * sizeof(float)), 0);
    EXPECT_EQ(resample(x.data(), static_cast<int64_t>(x.size()), from, to), fresh);
  }
  const Resampler* other_thread = nullptr;
  std::thread([&] { other_thread = &cached_resampler(80, 100); }).join();
  EXPECT_NE(other_thread, &cached_resampler(80, 100)) << "each thread keeps its own";
}

}  // namespace
}  // namespace ds2
