// Clipped ReLU, y = min(max(x, 0), clip), the DS2 activation: as a layer for the convolutional
// front-end, and as plain array helpers that other layers fuse into their own loops.
//
//   ClippedReLU relu("conv0.relu", /*clip=*/20.0f);
//   relu.forward(x, y, /*training=*/true);
//   relu.backward(x, y, dy, dx);
//
//   clipped_relu(pre, h, n, 20.0f);                 // fused use inside the RNN
//   clipped_relu_backward(h, dh, dpre, n, 20.0f);   // mask recovered from the output alone
//   clipped_relu_backward(h, dy, carry, dpre, n, 20.0f);  // the RNN's: dy + carry through the mask
#pragma once

#include <cstdint>
#include <string>

#include "nn/layer.h"

namespace ds2 {

// y[i] = min(max(x[i], 0), clip). `x` and `y` may alias.
void clipped_relu(const float* x, float* y, int64_t n, float clip);

// dx[i] = dy[i] where 0 < y[i] < clip, else 0. Uses the forward output, so the pre-activation
// need not be kept. `dy` and `dx` may alias.
void clipped_relu_backward(const float* y, const float* dy, float* dx, int64_t n, float clip);
// The recurrence's form: dx[i] = dy[i] + carry[i] where 0 < y[i] < clip, else 0 (the gradient
// from above plus the one from the next timestep). `dx` may alias `dy` or `carry`.
void clipped_relu_backward(const float* y, const float* dy, const float* carry, float* dx,
                           int64_t n, float clip);

class ClippedReLU : public Layer {
 public:
  ClippedReLU(const std::string& name, float clip);

  std::string name() const override { return name_; }
  std::string describe() const override;
  Shape output_frame_shape(const Shape& input_frame_shape) const override {
    return input_frame_shape;
  }
  void forward(const Sequences& in, Sequences& out, bool training) override;
  void backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                Sequences& grad_in) override;
  float clip() const { return clip_; }

 private:
  std::string name_;
  float clip_;
};

}  // namespace ds2
