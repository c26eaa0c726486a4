// The cooperative launch every persistent kernel uses: all CTAs co-resident, so grid.sync() is
// safe; a grid that cannot be co-resident raises ds2::Error naming the kernel, never hangs.
//
//   Args a{...};
//   cooperative_launch("persistent RNN", reinterpret_cast<const void*>(kernel<...>), ctas,
//                      threads, &a, shared_bytes, stream);
//   PrnnKernelInfo info = cooperative_kernel_info(fn, threads, shared_bytes);  // for a plan
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/persistent_rnn.h"  // PrnnKernelInfo

namespace ds2::kernels {

// Launches `fn`, whose only parameter is the struct at `args`, as ctas x threads with `smem` bytes
// of dynamic shared memory (its limit raised first) on `stream`.
void cooperative_launch(const char* kernel, const void* fn, int ctas, int threads, void* args,
                        size_t smem, cudaStream_t stream);

// Registers, spills and largest CTA of `fn` on the current device, and how many CTAs of `threads`
// threads with `smem` bytes of dynamic shared memory fit on one SM (its limit raised to the
// device's opt-in first; 0 where they cannot run at all): what the plans decide "fits" from.
PrnnKernelInfo cooperative_kernel_info(const void* fn, int threads, size_t smem);

}  // namespace ds2::kernels
