// CudaClippedReLU: the GPU twin of ClippedReLU (nn/activations.h), y = min(max(x, 0), clip) on
// every element, padding frames of the output and of the input gradient exactly zero (the input's
// padding is only promised finite). The backward recovers the mask from the output alone.
//
//   ClippedReLU cpu("conv0.relu", 20.0f);
//   CudaClippedReLU relu(ctx, cpu);
//   relu.forward(x, y, /*training=*/true);
//   relu.backward(x, y, dy, dx);     // dx = dy where 0 < y < clip, else 0
#pragma once

#include <string>

#include "nn/activations.h"
#include "nn/cuda/cuda_layer.h"

namespace ds2 {

class CudaClippedReLU : public CudaLayer {
 public:
  CudaClippedReLU(CudaContext& ctx, const ClippedReLU& cpu);

  std::string name() const override { return name_; }
  float clip() const { return clip_; }
  void forward(const DeviceSequences& in, DeviceSequences& out, bool training) override;
  void backward(const DeviceSequences& in, const DeviceSequences& out,
                const DeviceSequences& grad_out, DeviceSequences& grad_in) override;

 private:
  CudaContext& ctx_;
  std::string name_;
  float clip_;
};

}  // namespace ds2
