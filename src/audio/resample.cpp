#include "audio/resample.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <utility>

#include "core/error.h"

namespace ds2 {
namespace {

// Beyond this many phases a table costs more to build than evaluating each output's filter
// directly (each phase would be used about once), and it would take megabytes.
constexpr int64_t kMaxTabulatedPhases = 4096;

// Modified Bessel function of the first kind, order 0 (power series; converges fast for the
// beta values used by a Kaiser window).
double bessel_i0(double x) {
  const double quarter_x2 = 0.25 * x * x;
  double term = 1.0;
  double sum = 1.0;
  for (int k = 1; k < 200 && term > 1e-16 * sum; ++k) {
    term *= quarter_x2 / (double(k) * k);
    sum += term;
  }
  return sum;
}

// Independent partial sums let the compiler vectorize without reassociation flags.
float dot(const float* a, const float* b, int n) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) partial[k] += a[i + k] * b[i + k];
  }
  float sum = 0.0f;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (int k = 0; k < 8; ++k) sum += partial[k];
  return sum;
}

}  // namespace

Resampler::Resampler(int from_rate, int to_rate, const ResamplerOptions& options)
    : from_rate_(from_rate), to_rate_(to_rate) {
  DS2_CHECK(from_rate > 0 && to_rate > 0,
            "resample: rates must be positive, got " << from_rate << " -> " << to_rate);
  DS2_CHECK(options.zero_crossings >= 1, "resample: zero_crossings must be >= 1");
  DS2_CHECK(options.rolloff > 0.0 && options.rolloff <= 1.0, "resample: rolloff must be in (0, 1]");
  const int64_t g = std::gcd(from_rate, to_rate);
  up_ = to_rate / g;
  down_ = from_rate / g;
  cutoff_ = 0.5 * options.rolloff * std::min(1.0, double(to_rate) / from_rate);
  half_width_ = options.zero_crossings / (2.0 * cutoff_);
  half_taps_ = static_cast<int>(std::ceil(half_width_));
  taps_ = 2 * half_taps_;
  kaiser_beta_ = options.kaiser_beta;
  kaiser_norm_ = 1.0 / bessel_i0(kaiser_beta_);
  if (up_ <= kMaxTabulatedPhases && from_rate != to_rate) {
    table_.resize(static_cast<size_t>(up_ * taps_));
    for (int64_t p = 0; p < up_; ++p) fill_phase(p, table_.data() + p * taps_);
  }
}

int64_t Resampler::output_length(int64_t n) const {
  // Exact round-half-up of n * up / down in integers.
  return (2 * n * up_ + down_) / (2 * down_);
}

void Resampler::fill_phase(int64_t phase, float* coefficients) const {
  const double frac = double(phase) / double(up_);
  double sum = 0.0;
  for (int i = 0; i < taps_; ++i) {
    // Tap i multiplies input sample (n0 - half_taps_ + 1 + i); x is its distance to the output.
    const double x = frac + (half_taps_ - 1 - i);
    double h = 0.0;
    if (std::abs(x) < half_width_) {
      const double arg = 2.0 * cutoff_ * x;
      const double sinc = arg == 0.0 ? 1.0 : std::sin(M_PI * arg) / (M_PI * arg);
      const double r = x / half_width_;
      h = 2.0 * cutoff_ * sinc * bessel_i0(kaiser_beta_ * std::sqrt(1.0 - r * r)) * kaiser_norm_;
    }
    coefficients[i] = static_cast<float>(h);
    sum += h;
  }
  const float scale = static_cast<float>(1.0 / sum);
  for (int i = 0; i < taps_; ++i) coefficients[i] *= scale;
}

void Resampler::process(const float* in, int64_t n, std::vector<float>& out) const {
  DS2_CHECK(n >= 0, "resample: negative input length " << n);
  const int64_t n_out = output_length(n);
  out.resize(static_cast<size_t>(n_out));
  if (from_rate_ == to_rate_) {
    std::copy(in, in + n, out.begin());
    return;
  }
  std::vector<float> scratch(table_.empty() ? taps_ : 0);
  for (int64_t j = 0; j < n_out; ++j) {
    // Output j sits at input time j * down_ / up_ = n0 + phase / up_.
    const int64_t position = j * down_;
    const int64_t n0 = position / up_;
    const int64_t phase = position % up_;
    const float* h;
    if (table_.empty()) {
      fill_phase(phase, scratch.data());
      h = scratch.data();
    } else {
      h = table_.data() + phase * taps_;
    }
    const int64_t first = n0 - half_taps_ + 1;
    float acc = 0.0f;
    if (first >= 0 && first + taps_ <= n) {
      acc = dot(h, in + first, taps_);
    } else {
      const int begin = static_cast<int>(std::max<int64_t>(0, -first));
      const int end = static_cast<int>(std::min<int64_t>(taps_, n - first));
      for (int i = begin; i < end; ++i) acc += h[i] * in[first + i];
    }
    out[static_cast<size_t>(j)] = acc;
  }
}

const Resampler& cached_resampler(int from_rate, int to_rate) {
  // Per thread: the loader's threads each keep their own, with no lock on the way.
  thread_local std::map<std::pair<int, int>, std::unique_ptr<const Resampler>> cache;
  const std::pair<int, int> key{from_rate, to_rate};
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  auto built = std::make_unique<const Resampler>(from_rate, to_rate);  // may throw: nothing kept
  if (static_cast<int>(cache.size()) >= kMaxCachedResamplers) cache.clear();
  return *cache.emplace(key, std::move(built)).first->second;
}

std::vector<float> resample(const float* in, int64_t n, int from_rate, int to_rate) {
  std::vector<float> out;
  if (from_rate == to_rate) {
    DS2_CHECK(from_rate > 0, "resample: rates must be positive, got " << from_rate);
    out.assign(in, in + n);
    return out;
  }
  cached_resampler(from_rate, to_rate).process(in, n, out);
  return out;
}

}  // namespace ds2
