// Deterministic random numbers: every random decision in ds2 draws from an Rng seeded from the
// config, so a run is reproducible and its state can be checkpointed.
//
//   ds2::Rng rng(seed);
//   float u = rng.uniform(-a, a);
//   int k = rng.uniform_int(0, n - 1);
#pragma once

#include <cstdint>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ds2 {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : engine_(seed) {}
  float uniform(float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(engine_);
  }
  float normal(float mean, float stddev) {
    return std::normal_distribution<float>(mean, stddev)(engine_);
  }
  // Inclusive bounds.
  int64_t uniform_int(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  bool bernoulli(double p) { return std::bernoulli_distribution(p)(engine_); }
  std::mt19937_64& engine() { return engine_; }
  // The engine's full state as text (for checkpoints), and back: a restored Rng continues the
  // same stream.
  std::string state() const {
    std::ostringstream out;
    out << engine_;
    return out.str();
  }
  void set_state(const std::string& state) {
    std::istringstream in(state);
    in >> engine_;
    if (!in) throw std::invalid_argument("bad random-number-generator state");
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace ds2
