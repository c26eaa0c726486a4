// PinnedUpload: host -> device copies through a page-locked staging buffer. From pageable memory
// cudaMemcpyAsync may wait for the whole stream before copying, a host sync in the middle of a
// training step; from pinned memory it only queues. The staging buffer grows only, and is refilled
// only once the copy queued from it before has run (an event), so the caller may change or free
// its host data as soon as copy() returns.
//
//   ds2::PinnedUpload staging;
//   staging.copy(lengths.data(), lengths.size() * sizeof(int), device_lengths, ctx.stream());
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace ds2 {

class PinnedUpload {
 public:
  PinnedUpload() = default;
  ~PinnedUpload();
  PinnedUpload(const PinnedUpload&) = delete;
  PinnedUpload& operator=(const PinnedUpload&) = delete;
  PinnedUpload(PinnedUpload&& o) noexcept { swap(o); }
  PinnedUpload& operator=(PinnedUpload&& o) noexcept {
    swap(o);  // o releases what this held
    return *this;
  }

  // Queues a copy of `bytes` from `host` to `device` on `stream`.
  void copy(const void* host, size_t bytes, void* device, cudaStream_t stream);

 private:
  void swap(PinnedUpload& o) noexcept {
    std::swap(staging_, o.staging_);
    std::swap(capacity_, o.capacity_);
    std::swap(done_, o.done_);
  }
  void* staging_ = nullptr;
  size_t capacity_ = 0;
  cudaEvent_t done_ = nullptr;
};

}  // namespace ds2
