#include "core/cuda/device_tensor.h"

#include "core/cuda/check.h"

namespace ds2 {

void upload(const float* host, int64_t count, float* device, cudaStream_t stream) {
  if (count == 0) return;
  DS2_CUDA_CHECK(cudaMemcpyAsync(device, host, static_cast<size_t>(count) * sizeof(float),
                                 cudaMemcpyHostToDevice, stream));
}

void upload(const Tensor& host, DeviceTensor& device, cudaStream_t stream) {
  device.resize(host.shape());
  upload(host.data(), host.numel(), device.data(), stream);
}

void download(const float* device, int64_t count, float* host, cudaStream_t stream) {
  if (count > 0)
    DS2_CUDA_CHECK(cudaMemcpyAsync(host, device, static_cast<size_t>(count) * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream));
  DS2_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void download(const DeviceTensor& device, Tensor& host, cudaStream_t stream) {
  host.resize(device.shape());
  download(device.data(), device.numel(), host.data(), stream);
}

}  // namespace ds2
