#include "audio/normalize.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ds2 {
namespace {

void check_frames_by_features(const Tensor& features, const char* what) {
  DS2_CHECK(features.rank() == 2,
            what << ": expected {frames, features}, got " << shape_str(features.shape()));
}

}  // namespace

void normalize_per_utterance(Tensor& features) {
  check_frames_by_features(features, "normalize_per_utterance");
  const int64_t frames = features.dim(0);
  const int64_t bins = features.dim(1);
  if (frames == 0) return;
  // Two passes (mean, then squared deviations) avoid the cancellation of sum_sq - sum^2 when a
  // bin's mean is large next to its spread, as with log power.
  std::vector<double> mean(bins, 0.0), var(bins, 0.0);
  float* x = features.data();
  for (int64_t t = 0; t < frames; ++t) {
    for (int64_t k = 0; k < bins; ++k) mean[k] += x[t * bins + k];
  }
  for (double& m : mean) m /= frames;
  for (int64_t t = 0; t < frames; ++t) {
    for (int64_t k = 0; k < bins; ++k) {
      const double d = x[t * bins + k] - mean[k];
      var[k] += d * d;
    }
  }
  std::vector<float> shift(bins), scale(bins);
  for (int64_t k = 0; k < bins; ++k) {
    shift[k] = static_cast<float>(mean[k]);
    scale[k] = static_cast<float>(1.0 / std::max(std::sqrt(var[k] / frames), kMinFeatureStddev));
  }
  for (int64_t t = 0; t < frames; ++t) {
    float* row = x + t * bins;
    for (int64_t k = 0; k < bins; ++k) row[k] = (row[k] - shift[k]) * scale[k];
  }
}

void FeatureStats::accumulate(const Tensor& features) {
  check_frames_by_features(features, "FeatureStats::accumulate");
  const int64_t frames = features.dim(0);
  const int64_t bins = features.dim(1);
  if (sum.empty() && count == 0) {
    sum.assign(bins, 0.0);
    sum_sq.assign(bins, 0.0);
  }
  DS2_CHECK(
      static_cast<int64_t>(sum.size()) == bins,
      "FeatureStats: " << bins << " features per frame, earlier utterances had " << sum.size());
  const float* x = features.data();
  for (int64_t t = 0; t < frames; ++t) {
    for (int64_t k = 0; k < bins; ++k) {
      const double v = x[t * bins + k];
      sum[k] += v;
      sum_sq[k] += v * v;
    }
  }
  count += frames;
}

void FeatureStats::merge(const FeatureStats& other) {
  if (other.count == 0 && other.sum.empty()) return;
  if (count == 0 && sum.empty()) {
    *this = other;
    return;
  }
  DS2_CHECK(sum.size() == other.sum.size(),
            "FeatureStats::merge: " << sum.size() << " vs " << other.sum.size() << " features");
  for (size_t k = 0; k < sum.size(); ++k) {
    sum[k] += other.sum[k];
    sum_sq[k] += other.sum_sq[k];
  }
  count += other.count;
}

std::vector<float> FeatureStats::mean() const {
  DS2_CHECK(count > 0, "FeatureStats: no frames accumulated");
  std::vector<float> m(sum.size());
  for (size_t k = 0; k < sum.size(); ++k) m[k] = static_cast<float>(sum[k] / count);
  return m;
}

std::vector<float> FeatureStats::stddev() const {
  DS2_CHECK(count > 0, "FeatureStats: no frames accumulated");
  std::vector<float> s(sum.size());
  for (size_t k = 0; k < sum.size(); ++k) {
    const double m = sum[k] / count;
    const double var = std::max(0.0, sum_sq[k] / count - m * m);
    s[k] = static_cast<float>(std::max(std::sqrt(var), kMinFeatureStddev));
  }
  return s;
}

void apply_global_normalization(Tensor& features, const std::vector<float>& mean,
                                const std::vector<float>& stddev) {
  check_frames_by_features(features, "apply_global_normalization");
  const int64_t frames = features.dim(0);
  const int64_t bins = features.dim(1);
  DS2_CHECK(
      static_cast<int64_t>(mean.size()) == bins && static_cast<int64_t>(stddev.size()) == bins,
      "apply_global_normalization: statistics have " << mean.size() << "/" << stddev.size()
                                                     << " bins, features have " << bins);
  std::vector<float> scale(bins);
  for (int64_t k = 0; k < bins; ++k) {
    DS2_CHECK(stddev[k] > 0.0f,
              "apply_global_normalization: stddev of bin " << k << " is " << stddev[k]);
    scale[k] = 1.0f / stddev[k];
  }
  float* x = features.data();
  for (int64_t t = 0; t < frames; ++t) {
    float* row = x + t * bins;
    for (int64_t k = 0; k < bins; ++k) row[k] = (row[k] - mean[k]) * scale[k];
  }
}

}  // namespace ds2
