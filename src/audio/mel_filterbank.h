// Triangular mel filterbank (HTK mel scale, mel = 2595 log10(1 + f / 700)), applied to a power
// spectrum of n_fft / 2 + 1 bins.
//
//   ds2::MelFilterbank mel(/*n_mels=*/40, /*n_fft=*/320, /*sample_rate=*/16000);
//   mel.apply(power_spectrum, mel_energies);   // 161 bins in, 40 energies out
//
// The n_mels + 2 edge frequencies are equally spaced in mel from 0 to sample_rate / 2; filter m
// rises linearly from edge m to 1 at edge m + 1 and falls to 0 at edge m + 2 (peak 1, no area
// normalisation), so between the first and the last centre the weights at a bin sum to one.
// Weights are stored sparsely, each filter as its run of non-zero bins.
#pragma once

#include <vector>

namespace ds2 {

double hz_to_mel(double hz);
double mel_to_hz(double mel);

class MelFilterbank {
 public:
  // Throws ds2::Error when a filter would cover no FFT bin (too many mels for the window).
  MelFilterbank(int n_mels, int n_fft, int sample_rate);

  int num_filters() const { return static_cast<int>(filters_.size()); }
  int num_bins() const { return num_bins_; }
  // mel_out[m] = sum_k weight(m, k) * power[k].
  void apply(const float* power, float* mel_out) const;
  // Dense lookup, for tests and inspection.
  float weight(int filter, int bin) const;

 private:
  struct Filter {
    int first_bin;
    int num_bins;
    int offset;  // into weights_
  };
  int num_bins_;
  std::vector<Filter> filters_;
  std::vector<float> weights_;
};

}  // namespace ds2
