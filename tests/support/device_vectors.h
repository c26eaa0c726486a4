// Host vectors to and from DeviceArray, for kernel tests that build inputs on the host and read
// outputs back (copies on the test's stream; to_host waits for it).
//
//   DeviceArray<float> d = to_device(host, stream);
//   std::vector<float> back = to_host(d, stream);   // d.capacity() values
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/device_array.h"

namespace ds2 {

template <class T>
DeviceArray<T> to_device(const std::vector<T>& host, cudaStream_t s) {
  DeviceArray<T> d(static_cast<int64_t>(host.size()));
  DS2_CUDA_CHECK(
      cudaMemcpyAsync(d.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, s));
  return d;
}

template <class T>
std::vector<T> to_host(const DeviceArray<T>& d, cudaStream_t s) {
  std::vector<T> host(d.capacity());
  DS2_CUDA_CHECK(
      cudaMemcpyAsync(host.data(), d.data(), host.size() * sizeof(T), cudaMemcpyDeviceToHost, s));
  DS2_CUDA_CHECK(cudaStreamSynchronize(s));
  return host;
}

}  // namespace ds2
