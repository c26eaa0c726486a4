// Per-frame affine map {T, B, F} -> {T, B, K}: one GEMM over every frame of the batch.
//
//   Linear fc("fc", store, /*in_features=*/256, /*out_features=*/29);
//   fc.forward(h, logits, true);
//   fc.backward(h, logits, dlogits, dh);
//
// Parameters: "<name>.weight" {K, F} and "<name>.bias" {K}, both U(-1/sqrt(F), 1/sqrt(F)).
// Input of rank 4 ({T, B, C, F'}) is read as {T, B, C*F'}.
#pragma once

#include <string>

#include "nn/layer.h"
#include "nn/parameters.h"

namespace ds2 {

class Linear : public Layer {
 public:
  Linear(const std::string& name, ParameterStore& store, int in_features, int out_features);

  std::string name() const override { return name_; }
  std::string describe() const override;
  Shape output_frame_shape(const Shape& input_frame_shape) const override;
  void forward(const Sequences& in, Sequences& out, bool training) override;
  void backward(const Sequences& in, const Sequences& out, const Sequences& grad_out,
                Sequences& grad_in) override;

  int in_features() const { return in_features_; }
  int out_features() const { return out_features_; }
  ParamRef weight() const { return weight_; }
  ParamRef bias() const { return bias_; }

 private:
  std::string name_;
  ParameterStore& store_;
  int in_features_, out_features_;
  ParamRef weight_, bias_;
  Tensor masked_grad_;  // grad_out with padding zeroed, so padding cannot reach dW
};

}  // namespace ds2
