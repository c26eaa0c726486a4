// Launch-shape arithmetic the kernel files share.
//
//   const int blocks = kernels::grid_stride_blocks(n, kThreads);   // for a grid-stride loop
//   kernel<<<blocks, kThreads, 0, stream>>>(..., n);
//   const int tiles = kernels::ceil_div(rows, kRowsPerTile);
//   if (kernels::aligned_to(p, 16)) ...                              // float4 accesses allowed
#pragma once

#include <cstdint>

namespace ds2::kernels {

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Blocks of `threads` for a grid-stride loop over n elements: enough for one element per thread,
// at least 1 and at most 65535 x 32 (the loop covers the rest).
constexpr int grid_stride_blocks(int64_t n, int threads) {
  const int64_t b = ceil_div(n, threads);
  constexpr int64_t kMax = int64_t{65535} * 32;
  return static_cast<int>(b < 1 ? 1 : (b < kMax ? b : kMax));
}

// Whether p may be accessed `bytes` at a time (a power of two): the vector-width kernels' check.
inline bool aligned_to(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace ds2::kernels
