#include "core/cuda/pinned_upload.h"

#include <cstring>

#include "core/cuda/check.h"

namespace ds2 {

PinnedUpload::~PinnedUpload() {
  // Errors ignored: destructors must not throw. The last copy must be done before the free.
  if (done_) {
    cudaEventSynchronize(done_);
    cudaEventDestroy(done_);
  }
  if (staging_) cudaFreeHost(staging_);
}

void PinnedUpload::copy(const void* host, size_t bytes, void* device, cudaStream_t stream) {
  if (bytes == 0) return;
  if (!done_) DS2_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  // The copy queued last time reads the staging buffer: it must have run before a refill.
  DS2_CUDA_CHECK(cudaEventSynchronize(done_));
  if (capacity_ < bytes) {
    if (staging_) DS2_CUDA_CHECK(cudaFreeHost(staging_));
    staging_ = nullptr;
    DS2_CUDA_CHECK(cudaMallocHost(&staging_, bytes));
    capacity_ = bytes;
  }
  std::memcpy(staging_, host, bytes);
  DS2_CUDA_CHECK(cudaMemcpyAsync(device, staging_, bytes, cudaMemcpyHostToDevice, stream));
  DS2_CUDA_CHECK(cudaEventRecord(done_, stream));
}

}  // namespace ds2
