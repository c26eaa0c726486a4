// Small device queries the kernel plans share: an attribute, the device's name (cached: the
// properties call is slow), and a guard that makes a device current for a scope.
//
//   DeviceGuard guard(device);                                  // restores the caller's device
//   int sms = device_attribute(cudaDevAttrMultiProcessorCount, device);
//   std::cerr << device_name(device) << "\n";                   // "NVIDIA H200"
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace ds2 {

int device_attribute(cudaDeviceAttr attr, int device);
std::string device_name(int device);

class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();  // errors ignored: destructors must not throw
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = 0;
};

}  // namespace ds2
