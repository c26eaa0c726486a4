// Band-limited resampling by a rational ratio: a Kaiser-windowed sinc low-pass, evaluated in
// polyphase form. The cutoff sits a little below half the lower of the two rates, so nothing
// above the new Nyquist frequency aliases into the output when downsampling.
//
//   std::vector<float> y = ds2::resample(x.data(), x.size(), 44100, 16000);
//
//   ds2::Resampler down(16000, 8000);          // reusable: coefficients are built once
//   down.process(x.data(), x.size(), y);       // y.size() == down.output_length(x.size())
//
// Speed perturbation by a factor s is resampling from rate s*R to R (here s = 1.1):
//   ds2::resample(x.data(), x.size(), 110, 100);   // ~x.size() / 1.1 samples
//
// Samples beyond either end of the input count as zero, so the first and last ~zero_crossings
// output samples of a downsampled signal see half a filter.
#pragma once

#include <cstdint>
#include <vector>

namespace ds2 {

struct ResamplerOptions {
  int zero_crossings = 32;   // sinc lobes on each side of the centre; filter length grows with it
  double rolloff = 0.94;     // cutoff as a fraction of the lower Nyquist frequency
  double kaiser_beta = 8.0;  // window shape: ~80 dB stopband with the transition width above
};

class Resampler {
 public:
  Resampler(int from_rate, int to_rate, const ResamplerOptions& options = {});

  // round(n * to_rate / from_rate).
  int64_t output_length(int64_t n) const;
  // Resamples `in[0..n)` into `out` (resized to output_length(n)).
  void process(const float* in, int64_t n, std::vector<float>& out) const;

  int from_rate() const { return from_rate_; }
  int to_rate() const { return to_rate_; }

 private:
  // Fills taps_ coefficients for an output instant `phase / up_` input samples past an input
  // sample, normalised to unit sum so a constant signal passes unchanged.
  void fill_phase(int64_t phase, float* coefficients) const;

  int from_rate_;
  int to_rate_;
  int64_t up_;    // to_rate / gcd: number of distinct output phases
  int64_t down_;  // from_rate / gcd: input samples advanced per `up_` outputs
  int half_taps_;
  int taps_;
  double cutoff_;      // cycles per input sample
  double half_width_;  // filter half-length in input samples
  double kaiser_beta_;
  double kaiser_norm_;
  std::vector<float> table_;  // up_ x taps_ coefficients when up_ is small enough to tabulate
};

// The resampler for a rate pair with the default options, built on this thread's first call for
// the pair and kept for its later ones (at most kMaxCachedResamplers pairs a thread; the reference
// holds until this thread's next call). Building one tabulates every phase's filter: for a
// speed-perturbation ratio (80:100) that cost more than resampling the utterance, and the loader
// built one per utterance (`ds2 bench loader configs/fsdd.yaml`, 1 thread, 2-core machine:
// 1286-1564 -> 2080-2201 audio-s/s).
const Resampler& cached_resampler(int from_rate, int to_rate);
constexpr int kMaxCachedResamplers = 256;

// One-shot convenience (a cached_resampler); returns a copy when the rates are equal.
std::vector<float> resample(const float* in, int64_t n, int from_rate, int to_rate);

}  // namespace ds2
