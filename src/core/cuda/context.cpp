#include "core/cuda/context.h"

#include <sstream>

#include "core/cuda/check.h"

namespace ds2 {

const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "unknown cuBLAS status";
  }
}

CudaContext::CudaContext(int device) : device_(device) {
  std::string why;
  DS2_CHECK(cuda_available(&why), "cannot use the GPU: " << why);
  DS2_CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp p{};
  DS2_CUDA_CHECK(cudaGetDeviceProperties(&p, device_));
  sm_count_ = p.multiProcessorCount;
  std::ostringstream d;
  d << p.name << " (sm_" << p.major << p.minor << ", " << p.multiProcessorCount << " SMs)";
  description_ = d.str();
  DS2_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  DS2_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
  DS2_CUDA_CHECK(cudaEventCreateWithFlags(&fork_event_, cudaEventDisableTiming));
  DS2_CUDA_CHECK(cudaEventCreateWithFlags(&join_event_, cudaEventDisableTiming));
  DS2_CUBLAS_CHECK(cublasCreate(&cublas_));
  DS2_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  workspace_.reserve(kCublasWorkspaceBytes);
  side_workspace_.reserve(kCublasWorkspaceBytes);
  DS2_CUBLAS_CHECK(cublasSetWorkspace(cublas_, workspace_.data(), kCublasWorkspaceBytes));
  // Bit-reproducible fp32 results run to run: no TF32 and no atomics-based algorithms.
  DS2_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  DS2_CUBLAS_CHECK(cublasSetAtomicsMode(cublas_, CUBLAS_ATOMICS_NOT_ALLOWED));
}

CudaContext::~CudaContext() {
  // Destructors must not throw: errors here are ignored (the process is tearing down anyway).
  if (cublas_) cublasDestroy(cublas_);
  if (fork_event_) cudaEventDestroy(fork_event_);
  if (join_event_) cudaEventDestroy(join_event_);
  if (side_stream_) cudaStreamDestroy(side_stream_);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaContext::fork_to_side() {
  DS2_CUDA_CHECK(cudaEventRecord(fork_event_, stream_));
  DS2_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, fork_event_, 0));
}

void CudaContext::join_from_side() {
  DS2_CUDA_CHECK(cudaEventRecord(join_event_, side_stream_));
  DS2_CUDA_CHECK(cudaStreamWaitEvent(stream_, join_event_, 0));
}

void CudaContext::synchronize() {
  DS2_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

bool cuda_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return false;
  }
  if (count == 0) {
    if (why) *why = "the CUDA runtime reports no devices";
    return false;
  }
  return true;
}

}  // namespace ds2
