// Dropout after a layer (inverted: kept values are scaled by 1/(1-p) in training, so inference
// is the identity). The mask comes from the layer's own Rng, reseeded by Model::initialize, so
// a run is reproducible.
//
//   Dropout drop("rnn0.dropout", 0.1f);
//   drop.reseed(42);
//   drop.forward(x, y, /*training=*/true);   // y = x * mask / 0.9
//   drop.backward(x, y, dy, dx);             // dx = dy * mask / 0.9
#pragma once

#include <string>
#include <vector>

#include "core/rng.h"
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
  void reseed(uint64_t seed) { rng_ = Rng(seed); }
  // The mask generator's state, for exact resume.
  std::string rng_state() const { return rng_.state(); }
  void set_rng_state(const std::string& state) { rng_.set_state(state); }
  float probability() const { return probability_; }

 private:
  std::string name_;
  float probability_;
  Rng rng_;
  Tensor scale_;  // per element: 0 or 1/(1-p), from the last training forward
};

}  // namespace ds2
