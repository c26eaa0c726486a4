#include "core/cuda/device_query.h"

#include <map>
#include <mutex>

#include "core/cuda/check.h"

namespace ds2 {

int device_attribute(cudaDeviceAttr attr, int device) {
  int v = 0;
  DS2_CUDA_CHECK(cudaDeviceGetAttribute(&v, attr, device));
  return v;
}

std::string device_name(int device) {
  static std::mutex mutex;
  static std::map<int, std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = names.find(device);
  if (it != names.end()) return it->second;
  cudaDeviceProp prop{};
  DS2_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return names[device] = prop.name;
}

DeviceGuard::DeviceGuard(int device) {
  DS2_CUDA_CHECK(cudaGetDevice(&saved_));
  if (device != saved_) DS2_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  cudaSetDevice(saved_);
}

}  // namespace ds2
