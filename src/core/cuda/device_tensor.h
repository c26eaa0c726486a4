// DeviceTensor: the GPU twin of Tensor, a contiguous row-major float32 array with a shape whose
// storage only grows (DeviceArray), so a step at a shape seen before never allocates.
//
//   ds2::DeviceTensor x;
//   x.resize({T, B, F});
//   ds2::upload(host_tensor, x, ctx.stream());      // resizes x to host_tensor's shape
//   ds2::download(x, host_tensor, ctx.stream());    // waits for the stream, then copies back
#pragma once

#include <cuda_runtime.h>

#include "core/cuda/device_array.h"
#include "core/tensor.h"

namespace ds2 {

class DeviceTensor {
 public:
  DeviceTensor() = default;
  explicit DeviceTensor(const Shape& shape) { resize(shape); }

  // `extra`: room for that many elements past the shape's end, for code that reads past it (the
  // GEMM recurrence's padded rows, nn/cuda/gemm_recurrence.h); what they hold is unspecified.
  void resize(const Shape& shape, int64_t extra = 0) {
    shape_ = shape;
    numel_ = shape_numel(shape);
    storage_.reserve(numel_ + extra);
  }
  float* data() { return storage_.data(); }
  const float* data() const { return storage_.data(); }
  int64_t numel() const { return numel_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }

 private:
  DeviceArray<float> storage_;
  Shape shape_;
  int64_t numel_ = 0;
};

// Host -> device on `stream` (asynchronous with respect to the host only for pinned memory).
void upload(const Tensor& host, DeviceTensor& device, cudaStream_t stream);
void upload(const float* host, int64_t count, float* device, cudaStream_t stream);
// Device -> host; waits for `stream` so the host data is ready on return.
void download(const DeviceTensor& device, Tensor& host, cudaStream_t stream);
void download(const float* device, int64_t count, float* host, cudaStream_t stream);

}  // namespace ds2
