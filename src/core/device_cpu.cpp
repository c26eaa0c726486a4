// CPU-only builds: no CUDA runtime to ask.
#ifndef DS2_HAVE_CUDA
#include "core/device.h"

namespace ds2 {

DeviceReport query_devices() {
  DeviceReport r;
  r.note = "built without CUDA (DS2_WITH_CUDA=OFF or no nvcc)";
  return r;
}

}  // namespace ds2
#endif
