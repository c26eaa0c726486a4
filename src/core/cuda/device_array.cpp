#include "core/cuda/device_array.h"

#include <atomic>

#include "core/cuda/check.h"

namespace ds2 {
namespace {
std::atomic<int64_t> g_allocations{0};
std::atomic<int64_t> g_bytes{0};
std::atomic<int64_t> g_peak{0};
}  // namespace

int64_t device_allocations() {
  return g_allocations.load();
}
int64_t device_bytes_in_use() {
  return g_bytes.load();
}
int64_t device_bytes_peak() {
  return g_peak.load();
}

namespace detail {

void* device_alloc(size_t bytes) {
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    DS2_FAIL("GPU out of memory: asked for " << (bytes >> 20) << " MiB with " << (free_bytes >> 20)
                                             << " MiB free of " << (total >> 20) << " MiB ("
                                             << cudaGetErrorString(err)
                                             << "); lower train.batch_size or the model size");
  }
  ++g_allocations;
  const int64_t now = (g_bytes += static_cast<int64_t>(bytes));
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return ptr;
}

void device_free(void* ptr, size_t bytes) noexcept {
  cudaFree(ptr);
  g_bytes -= static_cast<int64_t>(bytes);
}

}  // namespace detail
}  // namespace ds2
