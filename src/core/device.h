// Which compute devices this build and machine offer; `run.device: auto` resolves through it.
//
//   ds2::DeviceReport r = ds2::query_devices();
//   if (r.cuda_built && r.cuda_devices > 0) ...
#pragma once

#include <string>
#include <vector>

namespace ds2 {

struct DeviceReport {
  bool cuda_built = false;         // compiled with DS2_WITH_CUDA
  int cuda_devices = 0;            // visible CUDA devices (0 when none or no driver)
  std::vector<std::string> names;  // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79 GiB)"
  std::string note;                // why there are none, when there are none
};

DeviceReport query_devices();

}  // namespace ds2
