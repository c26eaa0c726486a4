// CudaLayer: the GPU twin of Layer (nn/layer.h), with the same contract: explicit forward and
// backward, padding frames of outputs and input gradients written as exact zeros, parameter
// gradients accumulated (+=) into the flat device gradient buffer, and buffers that only grow.
// Each GPU layer is built from its CPU layer (the reference it is tested against), from which it
// takes its configuration and parameter handles; all work is queued on the context's stream.
//
//   auto gpu = std::make_unique<CudaLinear>(ctx, params, cpu_linear);
//   gpu->forward(x, y, /*training=*/true);     // DeviceSequences in, out
//   gpu->backward(x, y, dy, dx);
#pragma once

#include <string>

#include "core/cuda/context.h"
#include "nn/cuda/device_parameters.h"
#include "nn/cuda/device_sequences.h"

namespace ds2 {

class CudaLayer {
 public:
  virtual ~CudaLayer() = default;
  virtual std::string name() const = 0;
  virtual void forward(const DeviceSequences& in, DeviceSequences& out, bool training) = 0;
  virtual void backward(const DeviceSequences& in, const DeviceSequences& out,
                        const DeviceSequences& grad_out, DeviceSequences& grad_in) = 0;

  // As Layer::set_needs_input_grad: the first layer skips dL/d(input).
  void set_needs_input_grad(bool needs) { needs_input_grad_ = needs; }
  bool needs_input_grad() const { return needs_input_grad_; }

 protected:
  bool needs_input_grad_ = true;
};

}  // namespace ds2
