#include "cli/gpu_report.h"

#include <iostream>

#ifdef DS2_HAVE_CUDA
#include "core/cuda/context.h"
#endif

namespace ds2::cli {

int run_gpu_report(const std::string& command, const std::function<std::string()>& report) {
#ifdef DS2_HAVE_CUDA
  std::string why;
  if (!cuda_available(&why)) {
    std::cerr << command << ": no usable GPU: " << why << std::endl;
    return 2;
  }
  std::cout << report() << std::flush;
  return 0;
#else
  (void)report;
  std::cerr << command << ": this ds2 was built without CUDA (DS2_WITH_CUDA=OFF or no nvcc); it "
            << "needs a CUDA build and a GPU" << std::endl;
  return 2;
#endif
}

}  // namespace ds2::cli
