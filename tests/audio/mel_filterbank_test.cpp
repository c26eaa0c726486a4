#include "audio/mel_filterbank.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace ds2 {
namespace {

TEST(MelFilterbank, HtkMelScale) {
  EXPECT_NEAR(hz_to_mel(1000.0), 1000.0, 0.02);  // the HTK scale's anchor point
  EXPECT_NEAR(hz_to_mel(700.0), 2595.0 * std::log10(2.0), 1e-9);
  for (double hz : {0.0, 123.0, 4000.0, 7999.0}) EXPECT_NEAR(mel_to_hz(hz_to_mel(hz)), hz, 1e-9);
}

TEST(MelFilterbank, TrianglesSumToOneBetweenFirstAndLastCentre) {
  const int n_mels = 40, n_fft = 320, rate = 16000;
  const MelFilterbank mel(n_mels, n_fft, rate);
  EXPECT_EQ(mel.num_filters(), n_mels);
  EXPECT_EQ(mel.num_bins(), 161);
  const double step = hz_to_mel(rate / 2.0) / (n_mels + 1);
  const double first_centre = mel_to_hz(step), last_centre = mel_to_hz(n_mels * step);
  for (int k = 0; k < mel.num_bins(); ++k) {
    const double f = k * double(rate) / n_fft;
    double total = 0.0;
    for (int m = 0; m < n_mels; ++m) {
      const float w = mel.weight(m, k);
      EXPECT_GE(w, 0.0f);
      EXPECT_LE(w, 1.0f);
      total += w;
    }
    if (f >= first_centre && f <= last_centre) EXPECT_NEAR(total, 1.0, 1e-5) << "bin " << k;
  }
}

TEST(MelFilterbank, ApplyIsTheWeightedSum) {
  const MelFilterbank mel(23, 256, 8000);
  std::vector<float> power(mel.num_bins());
  for (int k = 0; k < mel.num_bins(); ++k) power[k] = 1.0f + 0.1f * k;
  std::vector<float> out(23);
  mel.apply(power.data(), out.data());
  for (int m = 0; m < 23; ++m) {
    double expected = 0.0;
    for (int k = 0; k < mel.num_bins(); ++k) expected += mel.weight(m, k) * power[k];
    EXPECT_NEAR(out[m], expected, 1e-4 * expected) << m;
  }
}

TEST(MelFilterbank, EmptyFilterIsAnError) {
  EXPECT_THROW(MelFilterbank(100, 64, 8000), Error);
  EXPECT_THROW(MelFilterbank(0, 320, 16000), Error);
}

}  // namespace
}  // namespace ds2
