// Featurizer: the whole per-utterance front-end in one place, shared by training, evaluation
// and transcription so they can never disagree: read (any libsndfile format, mixed to mono) ->
// resample to features.sample_rate -> [augment waveform] -> spectrogram -> normalize ->
// [SpecAugment].
//
//   ds2::Featurizer fz(cfg.features, cfg.augment);
//   ds2::Tensor feats;                              // {frames, fz.num_features()}
//   fz.featurize_file("a.flac", /*augment_rng=*/nullptr, feats);
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "audio/augment.h"
#include "audio/feature_config.h"
#include "audio/spectrogram.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace ds2 {

class Featurizer {
 public:
  Featurizer(const FeatureConfig& features, const AugmentConfig& augment);

  int num_features() const { return extractor_.num_features(); }
  int sample_rate() const { return features_.sample_rate; }
  // Samples between the starts of consecutive feature frames.
  int hop_samples() const { return extractor_.hop_samples(); }
  // Feature frames of `samples` samples at sample_rate().
  int64_t frames_for_samples(int64_t samples) const { return extractor_.num_frames(samples); }
  // Feature frames of `seconds` of audio (before any speed perturbation).
  int64_t frames_for_duration(double seconds) const;
  // Statistics for features.normalize == global (computed over the training set).
  void set_global_stats(std::vector<float> mean, std::vector<float> stddev);
  bool needs_global_stats() const { return features_.normalize == "global" && mean_.empty(); }
  const std::vector<float>& global_mean() const { return mean_; }
  const std::vector<float>& global_stddev() const { return stddev_; }

  // Featurizes a file into `out` {frames, features}. With an Rng, the configured augmentation
  // is applied (training); without, the result is deterministic. Throws ds2::Error "PATH: why".
  void featurize_file(const std::string& path, Rng* augment_rng, Tensor& out) const;
  // Same for samples already at sample_rate() (modified in place by augmentation).
  void featurize_samples(std::vector<float>& samples, Rng* augment_rng, Tensor& out) const;
  // Reads and resamples a file to sample_rate().
  std::vector<float> load_samples(const std::string& path) const;
  // The recordings that augmentation's noise is cut from (augment.noise_manifest), loaded at
  // sample_rate(); throws naming a file that cannot be read or is silent. Returns their seconds.
  double load_noise(const std::vector<std::string>& paths);
  // A fixed frequency warp for featurizing without augmentation (warp_frequency_by; 1 = none):
  // `ds2 eval --warps` tries several per utterance.
  void set_frequency_warp(double alpha) { warp_ = alpha; }
  double frequency_warp() const { return warp_; }
  // Log features without normalization (for computing global statistics).
  void raw_features(const std::vector<float>& samples, Tensor& out) const;

 private:
  FeatureConfig features_;
  AugmentConfig augment_;
  FeatureExtractor extractor_;
  std::vector<float> mean_, stddev_;
  NoiseBank noise_;
  double warp_ = 1.0;
};

}  // namespace ds2
