// Feature normalisation, per feature bin, on {frames, features} tensors (in place).
//
//   ds2::normalize_per_utterance(feats);            // features.normalize: utterance
//
//   ds2::FeatureStats stats;                        // features.normalize: global
//   for (auto& f : training_features) stats.accumulate(f);
//   ds2::apply_global_normalization(feats, stats.mean(), stats.stddev());
//
// Standard deviations are population ones (divide by the count) and are floored at
// kMinFeatureStddev, so a constant bin becomes 0 instead of NaN or a huge value.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ds2 {

constexpr double kMinFeatureStddev = 1e-5;

// Each bin gets zero mean and unit variance over the utterance's frames.
void normalize_per_utterance(Tensor& features);

// Running sums over many utterances (double precision: a training set has millions of frames).
struct FeatureStats {
  std::vector<double> sum;
  std::vector<double> sum_sq;
  int64_t count = 0;  // frames seen

  // Adds every frame of a {frames, features} tensor; the feature count must stay the same.
  void accumulate(const Tensor& features);
  // Adds another set of sums (from another thread or rank).
  void merge(const FeatureStats& other);
  std::vector<float> mean() const;
  std::vector<float> stddev() const;
};

// x = (x - mean[bin]) / stddev[bin].
void apply_global_normalization(Tensor& features, const std::vector<float>& mean,
                                const std::vector<float>& stddev);

}  // namespace ds2
