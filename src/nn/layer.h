// Layer: one step of the acoustic model with an explicit forward and backward (no autograd).
// A layer registers its parameters in the model's ParameterStore at construction, keeps what its
// backward needs from the last forward in its own members (reused across steps, never
// reallocated once the largest batch has been seen), and accumulates (+=) parameter gradients
// into the store's flat gradient buffer. The padding of `in` and `grad_out` never changes a valid
// result (it must only be finite; normally it is zero), and layers write exact zeros to the
// padding of their outputs and input gradients.
//
//   auto layer = std::make_unique<Linear>("out", store, in_features, out_features);
//   store.finalize(); store.initialize(rng);
//   layer->forward(x, y, /*training=*/true);
//   layer->backward(x, y, dy, dx);   // dx written, dW/db accumulated
#pragma once

#include <string>

#include "core/tensor.h"
#include "nn/sequences.h"

namespace ds2 {

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string name() const = 0;
  // Per-frame feature shape of the output for a given per-frame input shape ({F} or {C, F}).
  virtual Shape output_frame_shape(const Shape& input_frame_shape) const = 0;
  // Output frames produced from `input_length` input frames (striding layers shrink time).
  virtual int output_length(int input_length) const { return input_length; }
  // Resizes `out` (data and lengths) and computes it. `training` selects batch statistics for
  // batch norm and enables dropout-like behaviour.
  virtual void forward(const Sequences& in, Sequences& out, bool training) = 0;
  // Given the forward's `in` and `out` and dL/d(out), writes dL/d(in) into `grad_in` (resized
  // like `in`) and adds parameter gradients into the store. Called only after forward(training).
  virtual void backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                        Sequences& grad_in) = 0;
  // One line of configuration for model summaries, e.g. "Conv2d 1->32 k11x41 s2x2".
  virtual std::string describe() const { return name(); }

  // The model's first layer has nobody to hand dL/d(input) to; skipping it saves a large GEMM.
  // When false, backward() still accumulates parameter gradients but leaves `grad_in` untouched.
  void set_needs_input_grad(bool needs) { needs_input_grad_ = needs; }
  bool needs_input_grad() const { return needs_input_grad_; }

 protected:
  bool needs_input_grad_ = true;
};

}  // namespace ds2
