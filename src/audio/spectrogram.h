// Log spectrogram features (FFTW): linear-frequency log power (Deep Speech 2), log-mel, or
// mel-frequency cepstra (MFCC).
//
//   ds2::FeatureConfig fc;                      // 16 kHz, 20 ms Hamming window, 10 ms hop
//   ds2::FeatureExtractor fx(fc);               // plan, window and filterbank built once
//   ds2::Tensor feats;
//   fx.compute(audio.data(), audio.size(), feats);   // feats: {fx.num_frames(n),
//   fx.num_features()}
//
// Definitions (tests/audio/make_golden.py computes the same with numpy):
//   window  = round(window_ms * rate / 1000) samples, hop likewise (half away from zero);
//             FFT size = window length, so linear features = window / 2 + 1.
//   frames  = 1 + (n - window) / hop when n >= window, else 0: a trailing partial frame is
//             dropped, never padded; an utterance shorter than one window yields {0, F} and the
//             caller should treat it as too short.
//   shape   = periodic Hamming 0.54 - 0.46 cos(2 pi i / N), or periodic Hann
//             0.5 - 0.5 cos(2 pi i / N), i = 0..N-1 (the DFT-even form used for spectral analysis).
//   power   = |X_k|^2 of the unnormalised DFT of the windowed frame (no pre-emphasis, no DC
//             removal, no dither).
//   linear  = log(power + 1e-10);  mel = log(MelFilterbank(power) + 1e-10);
//   mfcc    = the first n_ceps coefficients of the orthonormal DCT-II of mel:
//             c_k = s_k sum_m mel_m cos(pi k (m + 1/2) / M), s_0 = sqrt(1 / M), s_k = sqrt(2 / M)
//             (M = n_mels; no liftering). The smooth spectral envelope, without the pitch
//             harmonics that fine mel bands still resolve.
//
// compute() is const and may run concurrently on one extractor from several loader threads:
// each call executes the shared FFTW plan on its own buffers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "audio/feature_config.h"
#include "audio/mel_filterbank.h"
#include "core/tensor.h"

struct fftwf_plan_s;  // fftw3.h: typedef struct fftwf_plan_s* fftwf_plan

namespace ds2 {

// Added to the power before the log, so silent bins stay finite (log(1e-10) = -23.03).
constexpr float kLogPowerEpsilon = 1e-10f;

class FeatureExtractor {
 public:
  explicit FeatureExtractor(const FeatureConfig& config);
  ~FeatureExtractor();
  FeatureExtractor(const FeatureExtractor&) = delete;
  FeatureExtractor& operator=(const FeatureExtractor&) = delete;

  int num_features() const;
  int64_t num_frames(int64_t num_samples) const;
  int window_samples() const { return window_; }
  int hop_samples() const { return hop_; }
  int fft_size() const { return window_; }
  const FeatureConfig& config() const { return config_; }

  // Featurizes samples[0..n) into `out`, resized to {num_frames(n), num_features()}.
  void compute(const float* samples, int64_t n, Tensor& out) const;

 private:
  // Per-frame conditioning before the window, in Kaldi's order: DC removal, then pre-emphasis
  // x[i] -= p * x[i-1] (x[0] -= p * x[0]).
  void condition_frame(float* frame) const;

  FeatureConfig config_;
  int window_;
  int hop_;
  int num_bins_;  // window_ / 2 + 1
  std::vector<float> window_fn_;
  std::optional<MelFilterbank> mel_;  // set when config_.type == "mel" or "mfcc"
  std::vector<float> dct_;            // {n_ceps, n_mels} when config_.type == "mfcc"
  fftwf_plan_s* plan_ = nullptr;
};

}  // namespace ds2
