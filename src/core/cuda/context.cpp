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

cublasHandle_t make_cublas_handle(cudaStream_t stream, void* workspace, size_t workspace_bytes) {
  cublasHandle_t h = nullptr;
  DS2_CUBLAS_CHECK(cublasCreate(&h));
  DS2_CUBLAS_CHECK(cublasSetStream(h, stream));
  DS2_CUBLAS_CHECK(cublasSetWorkspace(h, workspace, workspace_bytes));
  // Bit-reproducible fp32 results run to run: no TF32 and no atomics-based algorithms.
  DS2_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  DS2_CUBLAS_CHECK(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED));
  return h;
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
  DS2_CUDA_CHECK(cudaStreamCreateWithFlags(&weight_stream_, cudaStreamNonBlocking));
  DS2_CUDA_CHECK(cudaEventCreateWithFlags(&weight_fork_event_, cudaEventDisableTiming));
  DS2_CUDA_CHECK(cudaEventCreateWithFlags(&weight_join_event_, cudaEventDisableTiming));
  workspace_.reserve(kCublasWorkspaceBytes);
  side_workspace_.reserve(kCublasWorkspaceBytes);
  weight_workspace_.reserve(kCublasWorkspaceBytes);
  cublas_ = make_cublas_handle(stream_, workspace_.data(), kCublasWorkspaceBytes);
  weight_cublas_ =
      make_cublas_handle(weight_stream_, weight_workspace_.data(), kCublasWorkspaceBytes);
}

CudaContext::~CudaContext() {
  // Destructors must not throw: errors here are ignored (the process is tearing down anyway).
  if (cublas_) cublasDestroy(cublas_);
  if (weight_cublas_) cublasDestroy(weight_cublas_);
  if (fork_event_) cudaEventDestroy(fork_event_);
  if (join_event_) cudaEventDestroy(join_event_);
  if (weight_fork_event_) cudaEventDestroy(weight_fork_event_);
  if (weight_join_event_) cudaEventDestroy(weight_join_event_);
  if (weight_stream_) cudaStreamDestroy(weight_stream_);
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

cudaStream_t CudaContext::fork_weight_gradients() {
  if (!defer_weight_gradients_) return stream_;
  DS2_CUDA_CHECK(cudaEventRecord(weight_fork_event_, stream_));
  DS2_CUDA_CHECK(cudaStreamWaitEvent(weight_stream_, weight_fork_event_, 0));
  return weight_stream_;
}

void CudaContext::record_gradients_final(cudaEvent_t event) {
  // The weight-gradient stream runs in order and, after the fork, behind the main stream too.
  DS2_CUDA_CHECK(cudaEventRecord(event, fork_weight_gradients()));
}

float* CudaContext::weight_gradient_scratch(int64_t n) {
  weight_scratch_.reserve(n);
  return weight_scratch_.data();
}

void CudaContext::join_weight_gradients() {
  DS2_CUDA_CHECK(cudaEventRecord(weight_join_event_, weight_stream_));
  DS2_CUDA_CHECK(cudaStreamWaitEvent(stream_, weight_join_event_, 0));
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
