#include "data/featurizer.h"

#include <gtest/gtest.h>

#include "audio/audio_io.h"
#include "core/error.h"
#include "support/temp_dir.h"

namespace ds2 {
namespace {

TEST(Featurizer, LoadsNoiseRecordingsAtItsRateAndRejectsSilentOnes) {
  TempDir dir;
  FeatureConfig features;
  features.sample_rate = 8000;
  Featurizer fz(features, AugmentConfig{});
  std::vector<float> noise(16000);
  Rng rng(1);
  for (float& s : noise) s = rng.uniform(-0.2f, 0.2f);
  write_audio(dir.file("noise.wav"), noise, 16000);  // resampled to 8 kHz on loading
  EXPECT_NEAR(fz.load_noise({dir.file("noise.wav")}), 1.0, 1e-3);

  write_audio(dir.file("silence.wav"), std::vector<float>(800, 0.0f), 8000);
  try {
    fz.load_noise({dir.file("noise.wav"), dir.file("silence.wav")});
    FAIL() << "a silent noise recording was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("silence.wav: noise recording is empty or silent"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(fz.load_noise({dir.file("missing.wav")}), Error);
  EXPECT_THROW(fz.load_noise({}), Error);
}

}  // namespace
}  // namespace ds2
