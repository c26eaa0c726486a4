// The single-CTA variant of the persistent clipped-ReLU recurrence (PrnnTiling::single_cta: fp32,
// small layers at small batch), behind the entry points of kernels/persistent_rnn.h, which
// dispatch to it.
//
// Each direction runs on one CTA that holds all of U (forward) or U^T (backward-data) in
// registers, so a step exchanges nothing between CTAs: the state lives in the CTA's shared memory
// (two buffers), and one __syncthreads ends a step. Warp w owns rows [w KC, w KC + KC) and lane l
// the columns l + 32 j (j < KC), KC = ceil(H / 32) (so at most 32 warps); each lane's partial sums
// are reduce-scattered across the warp. The epilogue's inputs and outputs move between global and
// shared memory a chunk of steps at a time, so a step touches shared memory only. Products and sums
// are fp32; the order of the sums differs from the GEMM recurrence's, as every persistent kernel's
// does. Measured (kernels/NOTES.md, session 67): batch 1 H 32-128 0.45-0.74 us a step against the
// grid-wide split's 0.83-0.86; past H times the batch tile 128 one SM's products and reductions
// make it the slower, and plans take it only below.
//
//   PrnnTiling t = prnn_single_tiling(/*hidden=*/192, /*max_batch=*/1, /*directions=*/2);
//   if (prnn_single_kernel(t) != nullptr)   // a kernel for this H and batch (fp32)
//     prnn_single_launch(t, /*backward=*/false, dirs, lengths, T, B, clip, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/persistent_rnn.h"

namespace ds2::kernels {

// Largest columns a lane (and rows a warp) the kernels are instantiated for: H <= 32 * 6 = 192.
// At 1024 threads a thread has 64 registers; ptxas (CUDA 13, sm_90) fits 6 columns a lane at
// batch 1-2 and 5 at batch 4 without spills, and spills at 6 with batch 4 and at 7 (plans refuse
// a kernel that spills, so H 161-192 runs here at batch 1-2 only).
constexpr int kPrnnSingleMaxColumnsPerLane = 6;
// Batch rows a launch runs together at most (the batch tile: 1, 2 or 4).
constexpr int kPrnnSingleMaxBatch = 4;

// The single-CTA tiling of a layer: one CTA per direction holding all H rows, 32 ceil(H / KC)
// threads, KC = ceil(H / 32); batch tile = max_batch (1, 2 or 4 after rounding up).
PrnnTiling prnn_single_tiling(int hidden, int max_batch, int directions);
// The kernel instantiation for t (nullptr when t is not a single-CTA tiling this kernel runs).
const void* prnn_single_kernel(const PrnnTiling& t);
size_t prnn_single_shared_bytes(const PrnnTiling& t);
// Runs the recurrence (the contract of kernels/persistent_rnn.h, fp32 products); needs no
// workspace. One CTA per direction, launched cooperatively like the other persistent kernels.
void prnn_single_launch(const PrnnTiling& t, bool backward, const PrnnDirection* dirs,
                        const int* lengths, int T, int B, float clip, cudaStream_t stream);

}  // namespace ds2::kernels
