// CUDA builds: asks the runtime which devices are visible. A machine without a GPU or driver is
// a normal case (CI, laptops), reported in `note`, never an error.
#include <cuda_runtime.h>

#include <sstream>

#include "core/device.h"

namespace ds2 {

DeviceReport query_devices() {
  DeviceReport r;
  r.cuda_built = true;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    r.note = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    return r;
  }
  r.cuda_devices = count;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    std::ostringstream s;
    s << p.name << " (sm_" << p.major << p.minor << ", " << p.multiProcessorCount << " SMs, "
      << (p.totalGlobalMem >> 30) << " GiB)";
    r.names.push_back(s.str());
  }
  if (count == 0) r.note = "the CUDA runtime reports no devices";
  return r;
}

}  // namespace ds2
