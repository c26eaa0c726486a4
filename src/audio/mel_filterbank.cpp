#include "audio/mel_filterbank.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ds2 {

double hz_to_mel(double hz) {
  return 2595.0 * std::log10(1.0 + hz / 700.0);
}

double mel_to_hz(double mel) {
  return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
}

MelFilterbank::MelFilterbank(int n_mels, int n_fft, int sample_rate) : num_bins_(n_fft / 2 + 1) {
  DS2_CHECK(n_mels >= 1, "features.n_mels must be >= 1, got " << n_mels);
  DS2_CHECK(
      n_fft >= 2 && sample_rate > 0,
      "mel filterbank needs n_fft >= 2 and a positive rate, got " << n_fft << ", " << sample_rate);
  const double max_mel = hz_to_mel(sample_rate / 2.0);
  std::vector<double> edges(n_mels + 2);
  for (int i = 0; i < n_mels + 2; ++i) edges[i] = mel_to_hz(max_mel * i / (n_mels + 1));
  const double bin_hz = double(sample_rate) / n_fft;

  filters_.reserve(n_mels);
  for (int m = 0; m < n_mels; ++m) {
    const double left = edges[m], centre = edges[m + 1], right = edges[m + 2];
    Filter filter{-1, 0, static_cast<int>(weights_.size())};
    for (int k = 0; k < num_bins_; ++k) {
      const double f = k * bin_hz;
      const double rising = (f - left) / (centre - left);
      const double falling = (right - f) / (right - centre);
      const double w = std::min(rising, falling);
      if (w <= 0.0) {
        if (filter.first_bin >= 0) break;  // past the triangle
        continue;
      }
      if (filter.first_bin < 0) filter.first_bin = k;
      weights_.push_back(static_cast<float>(w));
      ++filter.num_bins;
    }
    DS2_CHECK(filter.num_bins > 0, "mel filter " << m << " of " << n_mels << " (" << left << "-"
                                                 << right << " Hz) covers no FFT bin of a " << n_fft
                                                 << "-point FFT at " << sample_rate
                                                 << " Hz; use fewer mel bands or a longer window");
    filters_.push_back(filter);
  }
}

void MelFilterbank::apply(const float* power, float* mel_out) const {
  for (const Filter& filter : filters_) {
    const float* w = weights_.data() + filter.offset;
    const float* p = power + filter.first_bin;
    float sum = 0.0f;
    for (int i = 0; i < filter.num_bins; ++i) sum += w[i] * p[i];
    *mel_out++ = sum;
  }
}

float MelFilterbank::weight(int filter, int bin) const {
  const Filter& f = filters_.at(filter);
  if (bin < f.first_bin || bin >= f.first_bin + f.num_bins) return 0.0f;
  return weights_[f.offset + bin - f.first_bin];
}

}  // namespace ds2
