#include "audio/augment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"

namespace ds2 {
namespace {

std::vector<float> tone(int64_t n, double freq, int rate) {
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * std::sin(2.0 * M_PI * freq * i / rate + 0.2);
  return x;
}

double power_db(const std::vector<float>& x) {
  double p = 0.0;
  for (float s : x) p += double(s) * s;
  return 10.0 * std::log10(p / x.size());
}

AugmentConfig everything_on() {
  AugmentConfig c;
  c.speed_min = 0.9;
  c.speed_max = 1.1;
  c.gain_db = 6.0;
  c.noise_prob = 1.0;
  c.noise_snr_min_db = 10.0;
  c.noise_snr_max_db = 30.0;
  return c;
}

TEST(Augment, WaveformIsDeterministicForASeed) {
  const std::vector<float> x = tone(8000, 440.0, 16000);
  std::vector<float> a = x, b = x, c = x;
  Rng rng_a(42), rng_b(42), rng_c(43);
  augment_waveform(a, 16000, everything_on(), rng_a);
  augment_waveform(b, 16000, everything_on(), rng_b);
  augment_waveform(c, 16000, everything_on(), rng_c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Augment, DefaultConfigLeavesAudioUntouched) {
  const std::vector<float> x = tone(1000, 440.0, 16000);
  std::vector<float> y = x;
  Rng rng(1);
  augment_waveform(y, 16000, AugmentConfig{}, rng);
  EXPECT_EQ(y, x);
}

TEST(Augment, SpeedPerturbationChangesLengthAndPitch) {
  AugmentConfig c;
  c.speed_min = c.speed_max = 1.1;
  std::vector<float> y = tone(16000, 500.0, 16000);
  Rng rng(7);
  augment_waveform(y, 16000, c, rng);
  ASSERT_EQ(y.size(), 14545u);  // round(16000 / 1.1)
  // Played 1.1x faster: the 500 Hz tone is now 550 Hz with the same amplitude.
  const std::vector<float> expected = tone(y.size(), 550.0, 16000);
  for (size_t j = 200; j + 200 < y.size(); ++j) ASSERT_NEAR(y[j], expected[j], 5e-3) << j;

  c.speed_min = c.speed_max = 0.9;
  std::vector<float> slow = tone(16000, 500.0, 16000);
  augment_waveform(slow, 16000, c, rng);
  EXPECT_EQ(slow.size(), 17778u);  // round(16000 / 0.9)
}

TEST(Augment, GainStaysWithinRange) {
  AugmentConfig c;
  c.gain_db = 6.0;
  const std::vector<float> x = tone(100, 440.0, 8000);
  std::set<int> gains_seen;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::vector<float> y = x;
    Rng rng(seed);
    augment_waveform(y, 8000, c, rng);
    const double ratio = y[10] / x[10];
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], ratio * x[i], 1e-6);
    const double db = 20.0 * std::log10(ratio);
    EXPECT_GE(db, -6.0 - 1e-4);
    EXPECT_LE(db, 6.0 + 1e-4);
    gains_seen.insert(static_cast<int>(std::floor(db)));
  }
  EXPECT_GE(gains_seen.size(), 8u);  // spread over the 12 dB range, not a constant
}

TEST(Augment, NoiseHasTheRequestedSnr) {
  AugmentConfig c;
  c.noise_prob = 1.0;
  for (double snr : {5.0, 20.0}) {
    c.noise_snr_min_db = c.noise_snr_max_db = snr;
    const std::vector<float> x = tone(16000, 300.0, 16000);
    std::vector<float> y = x;
    Rng rng(11);
    augment_waveform(y, 16000, c, rng);
    std::vector<float> added(x.size());
    for (size_t i = 0; i < x.size(); ++i) added[i] = y[i] - x[i];
    EXPECT_NEAR(power_db(x) - power_db(added), snr, 0.5);
  }
}

TEST(Augment, NoiseFromABankIsALoopedRecordingAtTheRequestedSnr) {
  AugmentConfig c;
  c.noise_prob = 1.0;
  NoiseBank bank;
  Rng fill(5);
  for (int64_t length : {257, 401}) {
    std::vector<float> recording(length);
    for (float& s : recording) s = fill.uniform(-0.3f, 0.3f);
    bank.recordings.push_back(recording);
  }
  for (double snr : {5.0, 20.0}) {
    c.noise_snr_min_db = c.noise_snr_max_db = snr;
    const std::vector<float> x = tone(4000, 300.0, 16000);
    std::vector<float> y = x;
    Rng rng(12);
    augment_waveform(y, 16000, c, rng, &bank);
    std::vector<float> added(x.size());
    for (size_t i = 0; i < x.size(); ++i) added[i] = y[i] - x[i];
    // Exact (not statistical): the scale is set from the stretch actually added.
    EXPECT_NEAR(power_db(x) - power_db(added), snr, 1e-3);
    // The added signal repeats with the period of one of the recordings: it is that recording,
    // looped from some offset.
    int periodic = 0;
    for (const auto& recording : bank.recordings) {
      const size_t L = recording.size();
      bool repeats = true;
      for (size_t i = 0; i + L < added.size() && repeats; ++i)
        repeats = std::abs(added[i] - added[i + L]) < 1e-5f;
      periodic += repeats;
    }
    EXPECT_EQ(periodic, 1) << snr << " dB";
  }
  // Deterministic for a seed.
  std::vector<float> a = tone(1000, 200.0, 16000), b = a;
  Rng r1(3), r2(3);
  augment_waveform(a, 16000, c, r1, &bank);
  augment_waveform(b, 16000, c, r2, &bank);
  EXPECT_EQ(a, b);
}

TEST(Augment, NoiseProbabilityIsRespected) {
  AugmentConfig c;
  c.noise_prob = 0.3;
  const std::vector<float> x = tone(50, 300.0, 16000);
  Rng rng(5);
  int noisy = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    std::vector<float> y = x;
    augment_waveform(y, 16000, c, rng);
    noisy += (y != x);
  }
  EXPECT_NEAR(noisy / 1000.0, 0.3, 0.05);
}

TEST(Augment, SpecAugmentZeroesExactlyTheDrawnBands) {
  AugmentConfig c;
  c.freq_masks = 1;
  c.freq_mask_width = 6;
  c.time_masks = 1;
  c.time_mask_width = 10;
  const int64_t frames = 50, bins = 20;
  std::set<int64_t> freq_widths, time_widths;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Tensor t({frames, bins}, 1.0f);
    Rng rng(seed);
    spec_augment(t, c, rng);
    // Replays the documented draws: width, then first index, frequency mask before time mask.
    Rng replay(seed);
    const int64_t fw = replay.uniform_int(0, 6), f0 = replay.uniform_int(0, bins - fw);
    const int64_t tw = replay.uniform_int(0, 10), t0 = replay.uniform_int(0, frames - tw);
    freq_widths.insert(fw);
    time_widths.insert(tw);
    int64_t zeros = 0;
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t k = 0; k < bins; ++k) {
        const bool masked = (k >= f0 && k < f0 + fw) || (f >= t0 && f < t0 + tw);
        ASSERT_EQ(t[f * bins + k], masked ? 0.0f : 1.0f) << "seed " << seed;
        zeros += masked;
      }
    }
    EXPECT_EQ(zeros, fw * frames + tw * bins - fw * tw);
  }
  EXPECT_EQ(freq_widths.size(), 7u);  // every width 0..6 occurs, none beyond
  EXPECT_EQ(time_widths.size(), 11u);
}

TEST(Augment, SpecAugmentMasksAreClampedToTheTensor) {
  AugmentConfig c;
  c.freq_masks = 3;
  c.freq_mask_width = 100;  // wider than the 8 bins
  Tensor t({4, 8}, 2.0f);
  Rng rng(3);
  spec_augment(t, c, rng);
  int zero_columns = 0;
  for (int k = 0; k < 8; ++k) {
    const bool zero = t[k] == 0.0f;
    zero_columns += zero;
    for (int f = 1; f < 4; ++f) ASSERT_EQ(t[f * 8 + k], zero ? 0.0f : 2.0f);  // whole columns
  }
  EXPECT_LE(zero_columns, 8);
  Tensor empty({0, 8});
  c.time_masks = 2;
  c.time_mask_width = 5;
  spec_augment(empty, c, rng);  // nothing to mask, nothing to break
  EXPECT_EQ(empty.numel(), 0);
}

TEST(Augment, InvalidRangesAreErrors) {
  AugmentConfig c;
  c.speed_min = 1.2;
  c.speed_max = 0.8;
  std::vector<float> x(10, 0.1f);
  Rng rng(1);
  EXPECT_THROW(augment_waveform(x, 16000, c, rng), Error);
}

}  // namespace
}  // namespace ds2

namespace ds2 {
namespace {

TEST(FrequencyWarp, MovesSpectralPeaksByTheDrawnFactor) {
  AugmentConfig cfg;
  cfg.freq_warp = 0.2;
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    Tensor f({3, 81});
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t k = 0; k < 81; ++k)
        f[t * 81 + k] = std::exp(-0.5f * (k - 30.0f) * (k - 30.0f) / 4.0f);
    Rng rng(seed), copy(seed);
    const double alpha = copy.uniform(0.8f, 1.2f);
    warp_frequency(f, cfg, rng);
    int64_t peak = 0;
    for (int64_t k = 0; k < 81; ++k)
      if (f[81 + k] > f[81 + peak]) peak = k;
    EXPECT_NEAR(peak, 30.0 * alpha, 1.0) << "alpha " << alpha;
    EXPECT_EQ(rng.engine()(), copy.engine()());  // exactly one draw
  }
}

TEST(FrequencyWarp, OffLeavesFeaturesAndRngUntouched) {
  AugmentConfig cfg;
  Tensor f({2, 5}, 1.5f);
  f[3] = -2.0f;
  Rng rng(7), copy(7);
  warp_frequency(f, cfg, rng);
  EXPECT_EQ(f[3], -2.0f);
  EXPECT_EQ(f[4], 1.5f);
  EXPECT_EQ(rng.engine()(), copy.engine()());
  cfg.freq_warp = 0.7;
  EXPECT_THROW(warp_frequency(f, cfg, rng), Error);
}

TEST(FrequencyWarp, AGivenFactorInterpolatesBinKAtKOverAlpha) {
  // A ramp (bin k holds k + 10 t) shows the mapping directly: bin k takes the value at k / alpha,
  // linearly interpolated, and bins whose source lies past the top take the top bin.
  for (double alpha : {1.25, 0.8, 1.0}) {
    Tensor f({2, 9});
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t k = 0; k < 9; ++k) f[t * 9 + k] = static_cast<float>(k + 10 * t);
    warp_frequency_by(f, alpha);
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t k = 0; k < 9; ++k)
        EXPECT_NEAR(f[t * 9 + k], std::min(8.0, k / alpha) + 10 * t, 1e-5)
            << "alpha " << alpha << " bin " << k;
  }
  Tensor f({1, 4}, 1.0f);
  EXPECT_THROW(warp_frequency_by(f, 0.5), Error);
  EXPECT_THROW(warp_frequency_by(f, 2.0), Error);
}

}  // namespace
}  // namespace ds2
