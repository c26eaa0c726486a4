// The cluster variant of the tensor-core persistent RNN recurrence (PrnnTiling::cluster: bf16,
// batch <= 8, H up to 16 * 16 * kPrnnClusterMaxTiles = 1024), behind the entry points of
// kernels/persistent_rnn.h, which dispatch to it.
//
// The CTAs of one direction form one thread-block cluster (up to 16 CTAs, one per SM, in one GPC),
// so a step needs neither a grid barrier nor a trip through L2: each CTA computes its rows of the
// new state, pushes them (bf16, in mma B-fragment order) into the shared memory of every CTA of
// its cluster (distributed shared memory), and the cluster barrier (arrive.release /
// wait.acquire) publishes them; the next step reads all of h from its own shared memory. A
// two-direction launch is two independent clusters: no synchronization between them at all.
// The arithmetic is version 3's (kernels/persistent_rnn_mma.h): U or U^T as bf16 A fragments,
// K split over 16 warps by H alone (warp w: k-tiles [w kpw, w kpw + kpw)), warps summed in order,
// so the results are bit-identical to version 3's for the same H. Each CTA owns kpw m-tiles
// (rows_per_cta = 16 kpw), all in registers.
//
//   PrnnTiling t = prnn_cluster_tiling(/*hidden=*/768, /*max_batch=*/4, /*directions=*/2);
//   if (prnn_cluster_kernel(t) && prnn_cluster_max_active(t) >= t.directions)
//     prnn_cluster_launch(t, /*backward=*/false, dirs, lengths, T, B, clip, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/persistent_rnn.h"

namespace ds2::kernels {

constexpr int kPrnnClusterMaxCtas = 16;  // non-portable cluster size (sm_90)
constexpr int kPrnnClusterMaxTiles = 4;  // m-tiles per CTA (= k-tiles per warp), in registers
constexpr int kPrnnClusterMaxBatch = 8;  // one n-tile

// The cluster tiling of a layer: 16 kpw rows per CTA (kpw = prnn_mma_k_tiles_per_warp), as many
// CTAs per direction as that takes (whether they are few enough, and a kernel exists, is
// prnn_cluster_kernel's answer).
PrnnTiling prnn_cluster_tiling(int hidden, int max_batch, int directions);
// The kernel instantiation for t (nullptr when t is not a cluster tiling this kernel runs).
const void* prnn_cluster_kernel(const PrnnTiling& t);
size_t prnn_cluster_shared_bytes(const PrnnTiling& t);
// Clusters of t.ctas_per_direction CTAs the device can hold at once (0: none; raises the
// kernel's shared memory limit and allows a non-portable cluster size first).
int prnn_cluster_max_active(const PrnnTiling& t);
// Runs the recurrence (the contract of kernels/persistent_rnn.h, tensor-core rounding); needs no
// workspace. Throws ds2::Error when the launch fails (e.g. no cluster of this size fits).
void prnn_cluster_launch(const PrnnTiling& t, bool backward, const PrnnDirection* dirs,
                         const int* lengths, int T, int B, float clip, cudaStream_t stream);

}  // namespace ds2::kernels
