// Error checks for CUDA runtime and cuBLAS calls: a failure throws ds2::Error naming the call,
// the source location and the library's own message, so the CLI prints one line and exits.
//
//   DS2_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
//   DS2_CUBLAS_CHECK(cublasSgemm(handle, ...));
//   DS2_CUDA_CHECK(cudaGetLastError());   // after a kernel launch
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/error.h"

namespace ds2 {
const char* cublas_status_name(cublasStatus_t status);
}  // namespace ds2

#define DS2_CUDA_CHECK(expr)                                                               \
  do {                                                                                     \
    const cudaError_t ds2_cuda_err_ = (expr);                                              \
    if (ds2_cuda_err_ != cudaSuccess)                                                      \
      DS2_FAIL("CUDA error at " << __FILE__ << ":" << __LINE__                             \
                                << " (" #expr "): " << cudaGetErrorString(ds2_cuda_err_)); \
  } while (0)

#define DS2_CUBLAS_CHECK(expr)                                                       \
  do {                                                                               \
    const cublasStatus_t ds2_cublas_status_ = (expr);                                \
    if (ds2_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                 \
      DS2_FAIL("cuBLAS error at " << __FILE__ << ":" << __LINE__ << " (" #expr "): " \
                                  << ::ds2::cublas_status_name(ds2_cublas_status_)); \
  } while (0)

// After a kernel launch: catches bad launch configurations at the call site.
#define DS2_CUDA_CHECK_LAUNCH() DS2_CUDA_CHECK(cudaGetLastError())
