#include "audio/spectrogram.h"

#include <fftw3.h>

#include <cmath>
#include <memory>
#include <mutex>

#include "core/error.h"

namespace ds2 {
namespace {

// FFTW's planner keeps global state: creating or destroying plans from two threads at once is
// undefined behaviour. Executing an existing plan is thread-safe.
std::mutex& fftw_planner_mutex() {
  static std::mutex mutex;
  return mutex;
}

struct FftwFree {
  void operator()(void* p) const { fftwf_free(p); }
};
template <typename T>
using FftwBuffer = std::unique_ptr<T[], FftwFree>;

// fftwf_malloc gives the alignment the plan was made for, which new-array execution requires.
template <typename T>
FftwBuffer<T> fftw_alloc(int count) {
  T* p = static_cast<T*>(fftwf_malloc(sizeof(T) * static_cast<size_t>(count)));
  if (!p) throw Error("out of memory allocating an FFT buffer");
  return FftwBuffer<T>(p);
}

int samples_for_ms(double ms, int rate) {
  return static_cast<int>(std::lround(ms * rate / 1000.0));
}

}  // namespace

FeatureExtractor::FeatureExtractor(const FeatureConfig& config) : config_(config) {
  DS2_CHECK(config.sample_rate > 0,
            "features.sample_rate must be positive, got " << config.sample_rate);
  DS2_CHECK(config.window_ms > 0 && config.hop_ms > 0,
            "features.window_ms and features.hop_ms must be positive, got "
                << config.window_ms << " and " << config.hop_ms);
  window_ = samples_for_ms(config.window_ms, config.sample_rate);
  hop_ = samples_for_ms(config.hop_ms, config.sample_rate);
  DS2_CHECK(config.preemphasis >= 0.0 && config.preemphasis < 1.0,
            "features.preemphasis must be in [0, 1), got " << config.preemphasis);
  DS2_CHECK(window_ >= 2, "features.window_ms=" << config.window_ms << " gives " << window_
                                                << " samples at " << config.sample_rate
                                                << " Hz; need at least 2");
  DS2_CHECK(hop_ >= 1, "features.hop_ms=" << config.hop_ms << " gives 0 samples at "
                                          << config.sample_rate << " Hz");
  num_bins_ = window_ / 2 + 1;

  double a0;
  if (config.window == "hamming") {
    a0 = 0.54;
  } else if (config.window == "hann") {
    a0 = 0.5;
  } else {
    DS2_FAIL("features.window must be 'hamming' or 'hann', got '" << config.window << "'");
  }
  window_fn_.resize(window_);
  for (int i = 0; i < window_; ++i) {
    window_fn_[i] = static_cast<float>(a0 - (1.0 - a0) * std::cos(2.0 * M_PI * i / window_));
  }

  if (config.type == "mel" || config.type == "mfcc") {
    mel_.emplace(config.n_mels, window_, config.sample_rate);
  } else {
    DS2_CHECK(config.type == "linear",
              "features.type must be 'linear', 'mel' or 'mfcc', got '" << config.type << "'");
  }
  if (config.type == "mfcc") {
    const int m_count = mel_->num_filters(), n_ceps = config.n_ceps;
    DS2_CHECK(n_ceps > 0 && n_ceps <= m_count, "features.n_ceps must be in [1, features.n_mels = "
                                                   << m_count << "], got " << n_ceps);
    dct_.resize(size_t(n_ceps) * m_count);
    for (int k = 0; k < n_ceps; ++k) {
      const double scale = std::sqrt((k == 0 ? 1.0 : 2.0) / m_count);
      for (int m = 0; m < m_count; ++m)
        dct_[size_t(k) * m_count + m] =
            static_cast<float>(scale * std::cos(M_PI * k * (m + 0.5) / m_count));
    }
  }

  auto in = fftw_alloc<float>(window_);
  auto out = fftw_alloc<fftwf_complex>(num_bins_);
  std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  plan_ = fftwf_plan_dft_r2c_1d(window_, in.get(), out.get(), FFTW_ESTIMATE);
  DS2_CHECK(plan_ != nullptr, "FFTW could not plan a " << window_ << "-point real FFT");
}

FeatureExtractor::~FeatureExtractor() {
  std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  fftwf_destroy_plan(plan_);
}

int FeatureExtractor::num_features() const {
  if (!dct_.empty()) return config_.n_ceps;
  return mel_ ? mel_->num_filters() : num_bins_;
}

int64_t FeatureExtractor::num_frames(int64_t num_samples) const {
  if (num_samples < window_) return 0;
  return 1 + (num_samples - window_) / hop_;
}

void FeatureExtractor::condition_frame(float* frame) const {
  if (config_.remove_dc) {
    double sum = 0.0;
    for (int i = 0; i < window_; ++i) sum += frame[i];
    const float mean = static_cast<float>(sum / window_);
    for (int i = 0; i < window_; ++i) frame[i] -= mean;
  }
  const float p = static_cast<float>(config_.preemphasis);
  if (p != 0.0f) {
    for (int i = window_ - 1; i > 0; --i) frame[i] -= p * frame[i - 1];
    frame[0] -= p * frame[0];
  }
}

void FeatureExtractor::compute(const float* samples, int64_t n, Tensor& out) const {
  const int64_t frames = num_frames(n);
  const int features = num_features();
  out.resize({frames, features});
  if (frames == 0) return;

  auto frame = fftw_alloc<float>(window_);
  auto spectrum = fftw_alloc<fftwf_complex>(num_bins_);
  const int bands = mel_ ? mel_->num_filters() : 0;
  std::vector<float> power(mel_ ? num_bins_ : 0), log_mel(dct_.empty() ? 0 : bands);
  for (int64_t t = 0; t < frames; ++t) {
    const float* src = samples + t * hop_;
    std::copy(src, src + window_, frame.get());
    condition_frame(frame.get());
    for (int i = 0; i < window_; ++i) frame[i] *= window_fn_[i];
    fftwf_execute_dft_r2c(plan_, frame.get(), spectrum.get());
    float* row = out.data() + t * features;
    float* dest = mel_ ? power.data() : row;
    for (int k = 0; k < num_bins_; ++k) {
      dest[k] = spectrum[k][0] * spectrum[k][0] + spectrum[k][1] * spectrum[k][1];
    }
    float* logs = dct_.empty() ? row : log_mel.data();  // where the log spectrum goes
    if (mel_) mel_->apply(power.data(), logs);
    const int n_logs = mel_ ? bands : num_bins_;
    for (int k = 0; k < n_logs; ++k) logs[k] = std::log(logs[k] + kLogPowerEpsilon);
    if (dct_.empty()) continue;
    for (int k = 0; k < features; ++k) {
      const float* basis = dct_.data() + size_t(k) * bands;
      double c = 0.0;
      for (int m = 0; m < bands; ++m) c += double(basis[m]) * logs[m];
      row[k] = static_cast<float>(c);
    }
  }
}

}  // namespace ds2
