// Data augmentation on waveforms (speed, gain, noise) and on features (SpecAugment masks).
// Every random choice comes from the caller's Rng, so a seed fixes the result.
//
//   ds2::Rng rng(seed);
//   ds2::augment_waveform(samples, 16000, cfg.augment, rng);   // before featurizing
//   ds2::spec_augment(features, cfg.augment, rng);             // after normalisation
//
// Waveform steps, each skipped when its setting turns it off (and then drawing nothing):
//   speed  factor s ~ U[speed_min, speed_max], rounded to 1/100; the audio is resampled from
//          rate s*R to R, so it plays s times faster and has round(n / s) samples (pitch moves
//          with it, as in Ko et al. 2015).
//   gain   g ~ U[-gain_db, gain_db] dB; samples may exceed [-1, 1] afterwards (not clipped).
//   noise  with probability noise_prob, noise at an SNR ~ U[noise_snr_min_db, noise_snr_max_db]
//          relative to the signal's mean power; a silent signal gets none. The noise is white
//          Gaussian, or with a NoiseBank (augment.noise_manifest) a stretch of a random recording
//          from a random offset (looped when shorter than the signal), scaled to that SNR.
// SpecAugment: freq_masks times, width w ~ U{0..freq_mask_width} bins, first bin
// f0 ~ U{0..F-w}, bins [f0, f0+w) of every frame set to 0; then time_masks times the same over
// frames with time_mask_width. Zero is the mean of normalised features.
#pragma once

#include <vector>

#include "audio/feature_config.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace ds2 {

// Background noise recordings at the featurizer's sample rate, none of them silent.
struct NoiseBank {
  std::vector<std::vector<float>> recordings;
};

void augment_waveform(std::vector<float>& samples, int sample_rate, const AugmentConfig& config,
                      Rng& rng, const NoiseBank* noise = nullptr);

// Vocal-tract-length-style warping of the frequency axis (after Jaitly & Hinton, 2013), on
// {frames, features} log features before normalization: with alpha ~ U[1 - freq_warp,
// 1 + freq_warp], bin k of every frame takes the linearly interpolated value at k / alpha (bins
// beyond the top take the last bin). Unlike speed perturbation it leaves timing alone. Draws
// nothing when freq_warp is 0.
void warp_frequency(Tensor& features, const AugmentConfig& config, Rng& rng);
// The same warp with a given factor (alpha > 1 moves spectral features up; 1 changes nothing).
void warp_frequency_by(Tensor& features, double alpha);

// `features` is {frames, features}.
void spec_augment(Tensor& features, const AugmentConfig& config, Rng& rng);

}  // namespace ds2
