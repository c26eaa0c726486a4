#include "audio/spectrogram.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/rng.h"

namespace ds2 {
namespace {

const std::string kFixtureDir = std::string(DS2_SOURCE_DIR) + "/tests/audio/fixtures/";

// Reads a fixture written by tests/audio/make_golden.py: int32 rows, int32 cols, float32 data.
Tensor load_matrix(const std::string& name) {
  std::ifstream in(kFixtureDir + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << kFixtureDir + name;
  int32_t shape[2] = {0, 0};
  in.read(reinterpret_cast<char*>(shape), sizeof(shape));
  Tensor m({shape[0], shape[1]});
  in.read(reinterpret_cast<char*>(m.data()), sizeof(float) * m.numel());
  EXPECT_TRUE(in.good()) << "short fixture " << name;
  return m;
}

FeatureConfig config_for(int rate, const std::string& type = "linear") {
  FeatureConfig fc;
  fc.sample_rate = rate;
  fc.type = type;
  return fc;
}

std::vector<float> noise(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (float& s : x) s = rng.uniform(-0.5f, 0.5f);
  return x;
}

TEST(Spectrogram, MatchesNumpyGolden) {
  std::ifstream cases(kFixtureDir + "cases.txt");
  ASSERT_TRUE(cases.good()) << "run tests/audio/make_golden.py";
  std::string line;
  int checked = 0;
  while (std::getline(cases, line)) {
    std::istringstream fields(line);
    std::string name, input_file, expected_file;
    FeatureConfig fc;
    fields >> name >> fc.sample_rate >> fc.window_ms >> fc.hop_ms >> fc.window >> fc.type >>
        fc.n_mels >> fc.n_ceps >> input_file >> expected_file;
    ASSERT_FALSE(fields.fail()) << line;
    SCOPED_TRACE(name);
    const Tensor signal = load_matrix(input_file);
    const Tensor expected = load_matrix(expected_file);

    FeatureExtractor fx(fc);
    Tensor out;
    fx.compute(signal.data(), signal.numel(), out);
    ASSERT_EQ(out.shape(), expected.shape());
    // float32 FFT against numpy's float64: log power agrees to ~1e-4 where the bin holds energy.
    double worst = 0.0;
    for (int64_t i = 0; i < out.numel(); ++i) {
      const double tolerance = 1e-3 + 1e-4 * std::abs(expected[i]);
      worst = std::max(worst, std::abs(out[i] - expected[i]) / tolerance);
    }
    EXPECT_LE(worst, 1.0) << "worst error in units of (atol + rtol|ref|)";
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

TEST(Spectrogram, WindowHopAndFeatureCounts) {
  const FeatureExtractor fx8(config_for(8000));
  EXPECT_EQ(fx8.window_samples(), 160);
  EXPECT_EQ(fx8.hop_samples(), 80);
  EXPECT_EQ(fx8.num_features(), 81);
  const FeatureExtractor fx16(config_for(16000));
  EXPECT_EQ(fx16.window_samples(), 320);
  EXPECT_EQ(fx16.hop_samples(), 160);
  EXPECT_EQ(fx16.num_features(), 161);
  FeatureConfig odd = config_for(16000);
  odd.window_ms = 25.0;
  const FeatureExtractor fx25(odd);
  EXPECT_EQ(fx25.window_samples(), 400);
  EXPECT_EQ(fx25.num_features(), 201);
  const FeatureExtractor mel(config_for(16000, "mel"));
  EXPECT_EQ(mel.num_features(), 40);
}

TEST(Spectrogram, NumFramesDropsPartialLastFrame) {
  const FeatureExtractor fx8(config_for(8000));
  EXPECT_EQ(fx8.num_frames(0), 0);
  EXPECT_EQ(fx8.num_frames(159), 0);
  EXPECT_EQ(fx8.num_frames(160), 1);
  EXPECT_EQ(fx8.num_frames(239), 1);
  EXPECT_EQ(fx8.num_frames(240), 2);
  EXPECT_EQ(fx8.num_frames(8000), 99);
  const FeatureExtractor fx16(config_for(16000));
  EXPECT_EQ(fx16.num_frames(319), 0);
  EXPECT_EQ(fx16.num_frames(320), 1);
  EXPECT_EQ(fx16.num_frames(16000), 99);
  EXPECT_EQ(fx16.num_frames(16159), 99);
  EXPECT_EQ(fx16.num_frames(16160), 100);
}

TEST(Spectrogram, TooShortInputGivesNoFrames) {
  const FeatureExtractor fx(config_for(16000));
  const std::vector<float> x = noise(300, 1);
  Tensor out({7, 7}, 1.0f);
  fx.compute(x.data(), x.size(), out);
  EXPECT_EQ(out.shape(), (Shape{0, 161}));
}

TEST(Spectrogram, SilenceGivesLogEpsilonAndToneItsBin) {
  const FeatureExtractor fx(config_for(8000));
  std::vector<float> x(800, 0.0f);
  Tensor out;
  fx.compute(x.data(), x.size(), out);
  for (int64_t i = 0; i < out.numel(); ++i) ASSERT_FLOAT_EQ(out[i], std::log(kLogPowerEpsilon));

  // A 1 kHz tone at 8 kHz with a 160-point FFT lands exactly on bin 20; with the periodic
  // Hamming window its power is (A * 0.54 * N / 2)^2.
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * std::cos(2.0 * M_PI * 1000.0 * i / 8000);
  fx.compute(x.data(), x.size(), out);
  const double expected = std::log(std::pow(0.5 * 0.54 * 160 / 2, 2));
  EXPECT_NEAR(out[2 * 81 + 20], expected, 1e-4);
}

TEST(Spectrogram, ConcurrentComputeMatchesSerial) {
  FeatureConfig fc = config_for(16000, "mel");
  const FeatureExtractor fx(fc);
  std::vector<std::vector<float>> inputs;
  std::vector<Tensor> serial(8);
  for (int u = 0; u < 8; ++u) {
    inputs.push_back(noise(4000 + 331 * u, 100 + u));
    fx.compute(inputs[u].data(), inputs[u].size(), serial[u]);
  }
  std::vector<Tensor> parallel(8);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int rep = 0; rep < 5; ++rep) {
        for (int u = w; u < 8; u += 4) fx.compute(inputs[u].data(), inputs[u].size(), parallel[u]);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int u = 0; u < 8; ++u) {
    ASSERT_EQ(parallel[u].shape(), serial[u].shape());
    EXPECT_EQ(std::memcmp(parallel[u].data(), serial[u].data(), sizeof(float) * serial[u].numel()),
              0);
  }
}

TEST(Spectrogram, ConstructingExtractorsConcurrentlyIsSafe) {
  std::vector<std::thread> threads;
  std::vector<int> features(6);
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 20; ++rep) {
        FeatureExtractor fx(config_for(i % 2 ? 8000 : 16000));
        features[i] = fx.num_features();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(features[i], i % 2 ? 81 : 161);
}

TEST(Spectrogram, InvalidConfigIsAnError) {
  FeatureConfig fc;
  fc.window = "blackman";
  EXPECT_THROW(FeatureExtractor{fc}, Error);
  fc = FeatureConfig{};
  fc.type = "cqt";
  EXPECT_THROW(FeatureExtractor{fc}, Error);
  fc = FeatureConfig{};
  fc.type = "mfcc";
  fc.n_ceps = fc.n_mels + 1;  // more cepstra than bands
  EXPECT_THROW(FeatureExtractor{fc}, Error);
  fc = FeatureConfig{};
  fc.hop_ms = 0.0;
  EXPECT_THROW(FeatureExtractor{fc}, Error);
  fc = config_for(8000, "mel");
  fc.n_mels = 200;  // narrower than the 50 Hz bin spacing: empty filters
  EXPECT_THROW(FeatureExtractor{fc}, Error);
}

}  // namespace
}  // namespace ds2

namespace ds2 {
namespace {

// DC removal makes a constant offset invisible; pre-emphasis is the first-order difference
// filter whose power gain at frequency f is |1 - p e^{-i w}|^2.
TEST(SpectrogramConditioning, DcRemovalAndPreemphasis) {
  FeatureConfig fc;
  fc.sample_rate = 8000;
  fc.window = "hann";
  const int n = 1600;
  std::vector<float> tone(n), offset(n);
  const double f0 = 1000.0;  // an exact bin of the 160-point FFT (bin 20)
  for (int i = 0; i < n; ++i) {
    tone[i] = 0.3f * static_cast<float>(std::sin(2 * M_PI * f0 * i / 8000.0));
    offset[i] = tone[i] + 0.25f;
  }
  Tensor plain, with_dc, removed, emphasized;
  FeatureExtractor(fc).compute(tone.data(), n, plain);
  FeatureExtractor(fc).compute(offset.data(), n, with_dc);
  fc.remove_dc = true;
  FeatureExtractor(fc).compute(offset.data(), n, removed);
  EXPECT_GT(with_dc[0] - plain[0], 5.0f);              // the offset dominates bin 0 ...
  EXPECT_NEAR(removed[0 * 81 + 20], plain[20], 1e-3);  // ... and is gone after removal
  EXPECT_LT(removed[0], plain[0] + 1.0f);
  fc.remove_dc = false;
  fc.preemphasis = 0.97;
  FeatureExtractor(fc).compute(tone.data(), n, emphasized);
  const double w = 2 * M_PI * f0 / 8000.0;
  const double gain = std::log(1 - 2 * 0.97 * std::cos(w) + 0.97 * 0.97);
  for (int t = 1; t < 5; ++t) EXPECT_NEAR(emphasized[t * 81 + 20] - plain[t * 81 + 20], gain, 0.02);
  fc.preemphasis = 1.5;
  EXPECT_THROW(FeatureExtractor{fc}, Error);
}

}  // namespace
}  // namespace ds2
