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

// The next mask seed a checkpoint's "train.dropout.<layer>" holds, for either engine: the decimal
// seed both write, or (from checkpoints of builds whose CPU layer drew masks from
// std::mt19937_64) a fresh seed derived from that generator's state; anything else throws
// std::invalid_argument.
uint64_t dropout_seed_from_state(const std::string& state);

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
  void reseed(uint64_t seed) { next_seed_ = seed; }
  // The seed the next training forward will use: the layer's whole random state (checkpoints
  // hold it, train/step_engine.h).
  uint64_t next_seed() const { return next_seed_; }
  float probability() const { return probability_; }

 private:
  std::string name_;
  float probability_;
  uint64_t next_seed_ = 0;
  Tensor scale_;  // per element: 0 or 1/(1-p), from the last training forward
};

}  // namespace ds2
