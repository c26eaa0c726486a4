// The thread-block-cluster launch the cluster kernels share (kernels/persistent_rnn_cluster.cu,
// the cluster form of kernels/persistent_rnn_single.cu): clusters are scheduled whole, so a
// cluster that cannot be resident fails the launch with an error instead of hanging.
//
//   if (cluster_max_active(fn, ctas, 8, threads, smem) >= clusters_needed)  // for a plan
//     cluster_launch(fn, ctas, 8, threads, smem, &args, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace ds2::kernels {

// Launches `fn`, whose only parameter is the struct at `args`, as `ctas` CTAs of `threads` threads
// in clusters of `cluster` along x, with `smem` bytes of dynamic shared memory (its limit raised
// first; clusters past the portable 8 CTAs allowed).
void cluster_launch(const void* fn, int ctas, int cluster, int threads, size_t smem, void* args,
                    cudaStream_t stream);

// Clusters of that launch that can be resident at once on the current device (0: none).
int cluster_max_active(const void* fn, int ctas, int cluster, int threads, size_t smem);

}  // namespace ds2::kernels
