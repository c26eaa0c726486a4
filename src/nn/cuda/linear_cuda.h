// CudaLinear: the GPU twin of Linear (nn/linear.h): one cuBLAS GEMM over every frame of the batch,
// bias added on valid frames only, padding rows zero.
//
//   CudaLinear fc(ctx, params, cpu_fc);
//   fc.forward(h, logits, true);
//   fc.backward(h, logits, dlogits, dh);   // dW, db accumulated into params' gradient buffer
#pragma once

#include "nn/cuda/cuda_layer.h"
#include "nn/linear.h"

namespace ds2 {

class CudaLinear : public CudaLayer {
 public:
  CudaLinear(CudaContext& ctx, DeviceParameters& params, const Linear& reference);

  std::string name() const override { return name_; }
  void forward(const DeviceSequences& in, DeviceSequences& out, bool training) override;
  void backward(const DeviceSequences& in, const DeviceSequences& out,
                const DeviceSequences& grad_out, DeviceSequences& grad_in) override;

 private:
  CudaContext& ctx_;
  DeviceParameters& params_;
  std::string name_;
  int in_features_, out_features_;
  ParamRef weight_, bias_;
  DeviceTensor masked_grad_;  // grad_out with padding zeroed, so padding cannot reach dW
};

}  // namespace ds2
