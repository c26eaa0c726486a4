// CudaLookahead: the GPU twin of Lookahead (nn/lookahead.h), the lookahead (row) convolution
// after the last recurrent layer, on the kernels of kernels/lookahead.h. Same contract: output
// and input-gradient padding zero, the weight gradient accumulated.
//
//   Lookahead cpu("lookahead", store, 512, 10);
//   CudaLookahead row(ctx, params, cpu);
//   row.forward(h, y, /*training=*/true);
//   row.backward(h, y, dy, dh);
#pragma once

#include <string>

#include "nn/cuda/cuda_layer.h"
#include "nn/lookahead.h"

namespace ds2 {

class CudaLookahead : public CudaLayer {
 public:
  CudaLookahead(CudaContext& ctx, DeviceParameters& params, const Lookahead& cpu);

  std::string name() const override { return name_; }
  void forward(const DeviceSequences& in, DeviceSequences& out, bool training) override;
  void backward(const DeviceSequences& in, const DeviceSequences& out,
                const DeviceSequences& grad_out, DeviceSequences& grad_in) override;

 private:
  CudaContext& ctx_;
  DeviceParameters& params_;
  std::string name_;
  int features_, context_;
  ParamRef weight_;
};

}  // namespace ds2
