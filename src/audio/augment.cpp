#include "audio/augment.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "audio/resample.h"
#include "core/error.h"

namespace ds2 {
namespace {

// Speed factors are rounded to 1/kSpeedSteps so the resampling ratio (round(s*100) : 100) has
// at most 100 phases and there are few ratios: each thread builds each ratio's filter table once
// (cached_resampler).
constexpr int kSpeedSteps = 100;

void perturb_speed(std::vector<float>& samples, const AugmentConfig& config, Rng& rng) {
  DS2_CHECK(config.speed_min > 0 && config.speed_min <= config.speed_max,
            "augment.speed_min/speed_max must satisfy 0 < min <= max, got "
                << config.speed_min << ", " << config.speed_max);
  if (config.speed_min == 1.0 && config.speed_max == 1.0) return;
  const double factor = rng.uniform(float(config.speed_min), float(config.speed_max));
  const int from = static_cast<int>(std::lround(factor * kSpeedSteps));
  if (from == kSpeedSteps) return;
  std::vector<float> out;
  cached_resampler(from, kSpeedSteps)
      .process(samples.data(), static_cast<int64_t>(samples.size()), out);
  samples.swap(out);
}

void apply_gain(std::vector<float>& samples, const AugmentConfig& config, Rng& rng) {
  if (config.gain_db <= 0.0) return;
  const double db = rng.uniform(float(-config.gain_db), float(config.gain_db));
  const float scale = static_cast<float>(std::pow(10.0, db / 20.0));
  for (float& s : samples) s *= scale;
}

void add_noise(std::vector<float>& samples, const AugmentConfig& config, Rng& rng,
               const NoiseBank* bank) {
  if (config.noise_prob <= 0.0 || samples.empty()) return;
  DS2_CHECK(config.noise_snr_min_db <= config.noise_snr_max_db,
            "augment.noise_snr_min_db must be <= noise_snr_max_db, got "
                << config.noise_snr_min_db << " > " << config.noise_snr_max_db);
  if (!rng.bernoulli(config.noise_prob)) return;
  const double snr_db = rng.uniform(float(config.noise_snr_min_db), float(config.noise_snr_max_db));
  double power = 0.0;
  for (float s : samples) power += double(s) * s;
  power /= samples.size();
  if (power == 0.0) return;
  const double noise_power = power / std::pow(10.0, snr_db / 10.0);
  if (bank == nullptr || bank->recordings.empty()) {
    std::normal_distribution<float> noise(0.0f, static_cast<float>(std::sqrt(noise_power)));
    for (float& s : samples) s += noise(rng.engine());
    return;
  }
  const auto& recording =
      bank->recordings[rng.uniform_int(0, static_cast<int64_t>(bank->recordings.size()) - 1)];
  const size_t length = recording.size(), start = rng.uniform_int(0, int64_t(length) - 1);
  // The stretch's own power sets the scale (a quiet stretch of a recording gets amplified); a
  // silent stretch adds nothing rather than dividing by zero.
  double stretch = 0.0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const double v = recording[(start + i) % length];
    stretch += v * v;
  }
  stretch /= samples.size();
  if (stretch == 0.0) return;
  const float scale = static_cast<float>(std::sqrt(noise_power / stretch));
  for (size_t i = 0; i < samples.size(); ++i) samples[i] += scale * recording[(start + i) % length];
}

// Zeroes `count` random bands of at most `max_width` consecutive indices in [0, extent); each
// band is handed to zero_band(first, width).
template <typename ZeroBand>
void mask_bands(int count, int max_width, int64_t extent, Rng& rng, ZeroBand zero_band) {
  if (count <= 0 || max_width <= 0 || extent <= 0) return;
  for (int i = 0; i < count; ++i) {
    const int64_t width = std::min<int64_t>(rng.uniform_int(0, max_width), extent);
    const int64_t first = rng.uniform_int(0, extent - width);
    zero_band(first, width);
  }
}

}  // namespace

void augment_waveform(std::vector<float>& samples, int sample_rate, const AugmentConfig& config,
                      Rng& rng, const NoiseBank* noise) {
  DS2_CHECK(sample_rate > 0, "augment_waveform: sample rate must be positive");
  perturb_speed(samples, config, rng);
  apply_gain(samples, config, rng);
  add_noise(samples, config, rng, noise);
}

void warp_frequency(Tensor& features, const AugmentConfig& config, Rng& rng) {
  if (config.freq_warp == 0.0) return;
  DS2_CHECK(config.freq_warp > 0.0 && config.freq_warp < 0.5,
            "augment.freq_warp must be in [0, 0.5), got " << config.freq_warp);
  const double alpha = rng.uniform(static_cast<float>(1.0 - config.freq_warp),
                                   static_cast<float>(1.0 + config.freq_warp));
  warp_frequency_by(features, alpha);
}

void warp_frequency_by(Tensor& features, double alpha) {
  DS2_CHECK(alpha > 0.5 && alpha < 2.0, "frequency warp factor must be in (0.5, 2), got " << alpha);
  DS2_CHECK(features.rank() == 2,
            "warp_frequency: expected {frames, features}, got " << shape_str(features.shape()));
  if (alpha == 1.0) return;
  const int64_t frames = features.dim(0), bins = features.dim(1);
  float* x = features.data();
  // Bins are rewritten in place from the top down when stretching (alpha > 1, sources lie below)
  // and from the bottom up when compressing, so every source is read before it is overwritten.
  for (int64_t t = 0; t < frames; ++t) {
    float* row = x + t * bins;
    auto source = [&](int64_t k) {
      const double pos = std::min(static_cast<double>(bins - 1), k / alpha);
      const int64_t lo = static_cast<int64_t>(pos);
      const int64_t hi = std::min(lo + 1, bins - 1);
      const float frac = static_cast<float>(pos - lo);
      return row[lo] + frac * (row[hi] - row[lo]);
    };
    if (alpha >= 1.0) {
      for (int64_t k = bins - 1; k >= 0; --k) row[k] = source(k);
    } else {
      for (int64_t k = 0; k < bins; ++k) row[k] = source(k);
    }
  }
}

void spec_augment(Tensor& features, const AugmentConfig& config, Rng& rng) {
  DS2_CHECK(features.rank() == 2,
            "spec_augment: expected {frames, features}, got " << shape_str(features.shape()));
  const int64_t frames = features.dim(0);
  const int64_t bins = features.dim(1);
  float* x = features.data();
  mask_bands(config.freq_masks, config.freq_mask_width, bins, rng,
             [&](int64_t first, int64_t width) {
               for (int64_t t = 0; t < frames; ++t) {
                 std::fill_n(x + t * bins + first, width, 0.0f);
               }
             });
  mask_bands(
      config.time_masks, config.time_mask_width, frames, rng,
      [&](int64_t first, int64_t width) { std::fill_n(x + first * bins, width * bins, 0.0f); });
}

}  // namespace ds2
