// The single-CTA variant of the persistent clipped-ReLU recurrence (PrnnTiling::single_cta: fp32,
// small layers at small batch), behind the entry points of kernels/persistent_rnn.h, which
// dispatch to it.
//
// Each direction runs on one CTA that holds all of U (forward) or U^T (backward-data) in
// registers, so a step exchanges nothing between CTAs: the state lives in the CTA's shared memory
// (two buffers), and one __syncthreads ends a step. A group of 8 adjacent lanes owns R rows (2 or
// 4, prnn_single_rows_per_thread), each lane a slice of the columns read as float4s, so every
// state value a lane reads feeds R rows and a row's sum is reduced over 8 lanes, not 32. The
// epilogue's inputs and outputs move between global and shared memory a chunk of steps at a time,
// so a step touches shared memory only. Products and sums are fp32; the order of the sums differs
// from the GEMM recurrence's, as every persistent kernel's does. Measured (kernels/NOTES.md,
// session 68, version 11): batch 1 H 32-192 0.24-0.60 us a step against the grid-wide split's
// 0.77-0.86 and cuDNN's 0.48-0.63; past H times the batch tile 256 one SM's products make it the
// slower, and plans take it only below.
//
// At batch 1, H 193-512 (batch 2: H 129-384; batch 3-4: H 65-192) run on a thread-block cluster
// of 8 (to H 384) or 16 such CTAs a direction, each holding its slice of the rows (all columns) and
// a whole copy of the state. A CTA pushes its new rows into every other CTA's copy with st.async,
// which counts the bytes on that CTA's mbarrier for the buffer; a CTA waits for its mbarrier's
// phase (the bytes of every other row), not for a cluster barrier. H 256-512 0.47-0.60 us a step
// against cuDNN's 0.69-0.72; batch 4 H 80-192 0.52-0.77 against the grid-wide split's 0.77-0.87
// (session 72).
//
//   PrnnTiling t = prnn_single_tiling(/*hidden=*/192, /*max_batch=*/1, /*directions=*/2);
//   if (prnn_single_kernel(t) != nullptr)   // a kernel for this H and batch (fp32)
//     prnn_single_launch(t, /*backward=*/false, dirs, lengths, T, B, clip, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/persistent_rnn.h"

namespace ds2::kernels {

// Largest hidden size the kernels are instantiated for: 6 float4 column groups a lane, 8 lanes a
// row group, 4 rows a thread (96 weights a thread at 384 threads). At 7 groups ptxas (CUDA 13,
// sm_90) spills at 448 threads.
constexpr int kPrnnSingleMaxHidden = 192;
// Largest hidden size a cluster of such CTAs runs (batch tile 1: 16 CTAs of 32 rows, 2 rows a
// thread, 16 column groups a lane; batch tile 2 stops at H 384).
constexpr int kPrnnSingleClusterMaxHidden = 512;
// At batch tile 4 (8 CTAs, 2 rows a thread): measured level with the grid-wide split at H 256 and
// slower past it (kernels/NOTES.md, session 72).
constexpr int kPrnnSingleClusterMaxHiddenBatchTile4 = 192;
// Batch rows a launch runs together at most (the batch tile: 1, 2 or 4).
constexpr int kPrnnSingleMaxBatch = 4;

// Rows a thread (2 or 4) for a layer of this H and batch tile.
int prnn_single_rows_per_thread(int hidden, int batch_tile);
// The single-CTA tiling of a layer: one CTA per direction holding all H rows, or a cluster of 8
// or 16 holding ceil(H / CTAs) rows each (see above); 8 threads a group of R rows (R =
// prnn_single_rows_per_thread), rounded up to whole warps; batch tile = max_batch (1, 2 or 4
// after rounding up).
PrnnTiling prnn_single_tiling(int hidden, int max_batch, int directions);
// The kernel instantiation for t (nullptr when t is not a single-CTA tiling this kernel runs).
const void* prnn_single_kernel(const PrnnTiling& t);
size_t prnn_single_shared_bytes(const PrnnTiling& t);
// Clusters of t.ctas_per_direction CTAs that can be resident at once (0 for one-CTA tilings).
int prnn_single_max_clusters(const PrnnTiling& t);
// Runs the recurrence (the contract of kernels/persistent_rnn.h, fp32 products); needs no
// workspace. One CTA per direction is launched cooperatively like the other persistent kernels; a
// cluster per direction through kernels/cluster_launch.h.
void prnn_single_launch(const PrnnTiling& t, bool backward, const PrnnDirection* dirs,
                        const int* lengths, int T, int B, float clip, cudaStream_t stream);

}  // namespace ds2::kernels
