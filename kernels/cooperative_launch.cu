#include "core/cuda/check.h"
#include "core/error.h"
#include "kernels/cooperative_launch.h"

namespace ds2::kernels {

void cooperative_launch(const char* kernel, const void* fn, int ctas, int threads, void* args,
                        size_t smem, cudaStream_t stream) {
  int device = 0, optin = 0;
  DS2_CUDA_CHECK(cudaGetDevice(&device));
  DS2_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  DS2_CHECK(smem <= static_cast<size_t>(optin), kernel << ": needs " << smem
                                                       << " bytes of shared memory per CTA, the "
                                                       << "GPU allows " << optin);
  DS2_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  void* params[] = {args};
  const cudaError_t err =
      cudaLaunchCooperativeKernel(fn, dim3(ctas), dim3(threads), params, smem, stream);
  if (err == cudaErrorCooperativeLaunchTooLarge) {
    (void)cudaGetLastError();
    DS2_FAIL(kernel << ": " << ctas << " CTAs of " << threads << " threads and " << smem
                    << " bytes of shared memory cannot all be resident on this GPU at once "
                    << "(cooperative launch too large); the plan did not fit this device");
  }
  DS2_CUDA_CHECK(err);
}

}  // namespace ds2::kernels
