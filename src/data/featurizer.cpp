#include "data/featurizer.h"

#include "audio/audio_io.h"
#include "audio/augment.h"
#include "audio/normalize.h"
#include "audio/resample.h"
#include "core/error.h"

namespace ds2 {

Featurizer::Featurizer(const FeatureConfig& features, const AugmentConfig& augment)
    : features_(features), augment_(augment), extractor_(features) {}

int64_t Featurizer::frames_for_duration(double seconds) const {
  return extractor_.num_frames(static_cast<int64_t>(seconds * features_.sample_rate + 0.5));
}

void Featurizer::set_global_stats(std::vector<float> mean, std::vector<float> stddev) {
  DS2_CHECK(
      static_cast<int>(mean.size()) == num_features() &&
          static_cast<int>(stddev.size()) == num_features(),
      "global feature statistics have " << mean.size() << " bins, the features " << num_features());
  mean_ = std::move(mean);
  stddev_ = std::move(stddev);
}

std::vector<float> Featurizer::load_samples(const std::string& path) const {
  int rate = 0;
  std::vector<float> samples = read_audio(path, &rate);
  if (rate != features_.sample_rate)
    samples =
        resample(samples.data(), static_cast<int64_t>(samples.size()), rate, features_.sample_rate);
  return samples;
}

void Featurizer::raw_features(const std::vector<float>& samples, Tensor& out) const {
  extractor_.compute(samples.data(), static_cast<int64_t>(samples.size()), out);
}

void Featurizer::featurize_samples(std::vector<float>& samples, Rng* augment_rng,
                                   Tensor& out) const {
  if (augment_rng)
    augment_waveform(samples, features_.sample_rate, augment_, *augment_rng, &noise_);
  extractor_.compute(samples.data(), static_cast<int64_t>(samples.size()), out);
  if (augment_rng) {
    warp_frequency(out, augment_, *augment_rng);
  } else {
    warp_frequency_by(out, warp_);  // a no-op at 1
  }
  if (features_.normalize == "utterance") {
    normalize_per_utterance(out);
  } else if (features_.normalize == "global") {
    DS2_CHECK(!mean_.empty(), "features.normalize is global but no statistics were computed");
    apply_global_normalization(out, mean_, stddev_);
  }
  if (augment_rng) spec_augment(out, augment_, *augment_rng);
}

double Featurizer::load_noise(const std::vector<std::string>& paths) {
  NoiseBank bank;
  double seconds = 0;
  for (const std::string& path : paths) {
    std::vector<float> samples = load_samples(path);
    bool silent = true;
    for (float s : samples) silent = silent && s == 0.0f;
    DS2_CHECK(!silent, path << ": noise recording is empty or silent (augment.noise_manifest)");
    seconds += static_cast<double>(samples.size()) / features_.sample_rate;
    bank.recordings.push_back(std::move(samples));
  }
  DS2_CHECK(!bank.recordings.empty(), "augment.noise_manifest lists no recordings");
  noise_ = std::move(bank);
  return seconds;
}

void Featurizer::featurize_file(const std::string& path, Rng* augment_rng, Tensor& out) const {
  std::vector<float> samples = load_samples(path);
  featurize_samples(samples, augment_rng, out);
  DS2_CHECK(out.dim(0) > 0,
            path << ": too short for one " << features_.window_ms << " ms analysis window");
}

}  // namespace ds2
