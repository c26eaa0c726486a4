// The cooperative launch every persistent kernel uses: all CTAs co-resident, so grid.sync() is
// safe; a grid that cannot be co-resident raises ds2::Error naming the kernel, never hangs.
//
//   Args a{...};
//   cooperative_launch("persistent RNN", reinterpret_cast<const void*>(kernel<...>), ctas,
//                      threads, &a, shared_bytes, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace ds2::kernels {

// Launches `fn`, whose only parameter is the struct at `args`, as ctas x threads with `smem` bytes
// of dynamic shared memory (its limit raised first) on `stream`.
void cooperative_launch(const char* kernel, const void* fn, int ctas, int threads, void* args,
                        size_t smem, cudaStream_t stream);

}  // namespace ds2::kernels
