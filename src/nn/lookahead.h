// Lookahead (row) convolution: Deep Speech 2's way to give a unidirectional model a little future
// context without giving up streaming. Each feature f of frame t becomes a weighted sum of the
// same feature over frames t .. t + context (frames past the utterance's end count as zero):
//   y[t, b, f] = sum_{j=0..context} W[j, f] x[t + j, b, f]
// Placed after the last recurrent layer (model.lookahead), before the output layer.
//
//   Lookahead row("lookahead", store, /*features=*/512, /*context=*/10);
//   row.forward(h, y, true);
//   row.backward(h, y, dy, dh);   // dh written, dW accumulated
//
// Parameter: "<name>.weight" {context + 1, F}, U(-1/sqrt(context + 1), 1/sqrt(context + 1)).
#pragma once

#include <string>

#include "nn/layer.h"
#include "nn/parameters.h"

namespace ds2 {

class Lookahead : public Layer {
 public:
  Lookahead(const std::string& name, ParameterStore& store, int features, int context);

  std::string name() const override { return name_; }
  std::string describe() const override;
  Shape output_frame_shape(const Shape& input_frame_shape) const override;
  void forward(const Sequences& in, Sequences& out, bool training) override;
  void backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                Sequences& grad_in) override;

  int features() const { return features_; }
  int context() const { return context_; }
  ParamRef weight() const { return weight_; }

 private:
  std::string name_;
  ParameterStore& store_;
  int features_, context_;
  ParamRef weight_;
};

}  // namespace ds2
