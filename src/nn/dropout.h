// Dropout after a layer (inverted: kept values are scaled by 1/(1-p) in training, so inference
// is the identity). The k-th training forward since reseed(s) draws its mask from seed s + k with
// the counter-based hash of core/dropout_mask.h, the GPU layer's (CudaDropout) hash, so both
// backends draw the same masks from the same seed, and the layer's random state is one number.
//
//   Dropout drop("rnn0.dropout", 0.1f);
//   drop.reseed(42);
//   drop.forward(x, y, /*training=*/true);   // y = x * mask / 0.9, mask from seed 42
//   drop.backward(x, y, dy, dx);             // dx = dy * mask / 0.9
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/layer.h"

namespace ds2 {

class Dropout : public Layer {
 public:
  Dropout(const std::string& name, float probability);

  std::string name() const override { return name_; }
  std::string describe() const override;
  Shape output_frame_shape(const Shape& input_frame_shape) const override {
    return input_frame_shape;
  }
  void forward(const Sequences& in, Sequences& out, bool training) override;
  void backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                Sequences& grad_in) override;
  void reseed(uint64_t seed) {
    base_seed_ = seed;
    calls_ = 0;
  }
  // The seed the next training forward will use.
  uint64_t next_seed() const { return base_seed_ + calls_; }
  // The random state for checkpoints: next_seed() in decimal, as the GPU engine writes it. Reading
  // accepts that, and (from checkpoints of builds that drew masks from std::mt19937_64) that
  // generator's state, from which it derives a fresh seed; anything else throws
  // std::invalid_argument.
  std::string rng_state() const;
  void set_rng_state(const std::string& state);
  float probability() const { return probability_; }

 private:
  std::string name_;
  float probability_;
  uint64_t base_seed_ = 0, calls_ = 0;
  Tensor scale_;  // per element: 0 or 1/(1-p), from the last training forward
};

}  // namespace ds2
