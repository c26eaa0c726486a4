// DeviceParameters: the GPU copy of a ParameterStore, with the same flat layout (same offsets), so
// GPU layers address their weights with the host layer's ParamRef, the optimizer and gradient
// clipping run over one contiguous buffer, and a checkpoint is a plain download.
//
//   ds2::DeviceParameters params(ctx, model.parameters());   // uploads values and buffers
//   float* W = params.value(weight_ref);  float* dW = params.grad(weight_ref);
//   params.zero_grads();
//   params.download_to(model.parameters());                   // for evaluation / checkpoints
#pragma once

#include "core/cuda/context.h"
#include "core/cuda/device_array.h"
#include "nn/parameters.h"

namespace ds2 {

class DeviceParameters {
 public:
  DeviceParameters(const CudaContext& ctx, const ParameterStore& host);

  float* value(ParamRef ref) { return (ref.trainable ? values_ : buffers_).data() + offset(ref); }
  const float* value(ParamRef ref) const {
    return (ref.trainable ? values_ : buffers_).data() + offset(ref);
  }
  float* grad(ParamRef ref) { return grads_.data() + offset(ref); }

  float* values() { return values_.data(); }
  float* grads() { return grads_.data(); }
  float* buffers() { return buffers_.data(); }
  int64_t num_parameters() const { return num_values_; }
  int64_t num_buffers() const { return num_buffers_; }

  // Where `ref` starts in values()/grads() (or buffers()): the host store's offset.
  int64_t offset(ParamRef ref) const;

  void zero_grads();
  // Values and buffers host -> device, and device -> host (waits for the stream).
  void upload_from(const ParameterStore& host);
  void download_to(ParameterStore& host) const;
  void download_grads(Tensor& host) const;

 private:
  const CudaContext& ctx_;
  const ParameterStore& layout_;
  int64_t num_values_, num_buffers_;
  DeviceArray<float> values_, grads_, buffers_;
};

}  // namespace ds2
