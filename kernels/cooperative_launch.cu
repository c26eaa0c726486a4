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

PrnnKernelInfo cooperative_kernel_info(const void* fn, int threads, size_t smem) {
  int device = 0, optin = 0;
  DS2_CUDA_CHECK(cudaGetDevice(&device));
  DS2_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  PrnnKernelInfo info;
  cudaFuncAttributes attr{};
  DS2_CUDA_CHECK(cudaFuncGetAttributes(&attr, fn));
  info.registers = attr.numRegs;
  info.local_bytes = attr.localSizeBytes;
  info.max_threads = attr.maxThreadsPerBlock;
  if (smem > static_cast<size_t>(optin) || threads > attr.maxThreadsPerBlock) return info;
  DS2_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, threads, smem) != cudaSuccess) {
    (void)cudaGetLastError();  // an unlaunchable configuration: report "does not fit"
    blocks = 0;
  }
  info.blocks_per_sm = blocks;
  return info;
}

}  // namespace ds2::kernels
