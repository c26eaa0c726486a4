// The tensor-core variant of the persistent RNN recurrence (PrnnTiling::tensor_cores), behind the
// entry points of kernels/persistent_rnn.h, which dispatch to it. bf16 plans as described below;
// fp32 plans (4 batch rows a set, tagged exchange only) split U and the state into two fp16 halves
// (hi, lo; two m16n8k16 fp16 products per 16 rows and k-tile, or one per 8 rows in the stacked
// split below; 4 bytes a weight; the state's halves sit in B columns b and b + 4 of one n-tile):
// fp32 accuracy (kernels/NOTES.md, versions 7 and 8, with the gradients scaled by a power of two
// in backward-data; session 42: the fp16 split at every fp32 size, the tf32 split it replaced at
// H <= 1024 was slower).
//
// U (forward) or U^T (backward-data) is rounded to bf16 and held in registers as mma.sync A
// fragments for the whole launch; every step each warp reads the previous state, rounded to bf16,
// straight from L2 as mma.sync B fragments (the exchange array is stored in fragment order, one
// coalesced load per fragment) and multiplies with mma.sync m16n8k16 (fp32 accumulation). The K
// dimension is split over kPrnnMmaWarps warps in a way that depends on H only (warp w: k-tiles [w
// kpw, w kpw + kpw), kpw = ceil(ceil(H / 16) / warps)), and the warps' partial sums are added in
// warp order (the fp32 split: pairwise, neighbours first): deterministic, and identical for every
// tensor-core plan of the same H and precision. Batch rows go
// through in passes of batch_tile (8, 16, 32 or 64) columns of n-tiles; with batch groups
// (PrnnTiling::batch_groups) each set of CTAs runs its own slice of the batch, with its own
// exchange, so the sets never wait for each other. A step's state is published
// by a barrier per direction, or (t.tagged_exchange) each value carries its step and readers wait
// for those values only (kernels/tagged_exchange.cuh). Contract: persistent_rnn.h's,
// with the state rounded to bf16 before each product too (what the GEMM recurrence computes in
// bf16: cuBLAS rounds both operands).
//
//   PrnnTiling t = ...;  t.tensor_cores = true;  t.bf16_weights = true;  // or false: fp32 split
//   if (prnn_mma_kernel(t)) prnn_mma_launch(t, false, dirs, lengths, T, B, clip, ws, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/persistent_rnn.h"

namespace ds2::kernels {

constexpr int kPrnnMmaWarps = 16;
constexpr int kPrnnMmaThreads = 32 * kPrnnMmaWarps;

// The K split every tensor-core kernel uses (version 3 and the cluster kernel alike, so their
// sums agree bit for bit): 16-wide k-tiles of H, and warp w takes k-tiles [w kpw, w kpw + kpw).
__host__ __device__ constexpr int prnn_mma_k_tiles(int hidden) {
  return (hidden + 15) / 16;
}
// The state elements a step's readers take: H padded to whole k-tiles. With the tagged exchange
// each needs an owning CTA (which writes zeros past H), or its readers wait for it forever.
__host__ __device__ constexpr int prnn_mma_padded_rows(int hidden) {
  return 16 * prnn_mma_k_tiles(hidden);
}
__host__ __device__ constexpr int prnn_mma_k_tiles_per_warp(int hidden) {
  return (prnn_mma_k_tiles(hidden) + kPrnnMmaWarps - 1) / kPrnnMmaWarps;
}
// The k-tiles per warp of the kernel that runs a plan of kpw (prnn_mma_k_tiles_per_warp): the
// smallest of 2, 4, 5, 6, 8, 10, 12, 14 and 16 that holds kpw (0 past 16: no kernel; 14 is the
// GRU's backward-data's and, with 16, bf16's at two m-tiles: one direction of H 3073-4096). The
// kernel decides at compile time from this count where its fragments live, so the host's layout
// (shared-memory size, the plan's description) decides from it too, not from kpw.
__host__ __device__ constexpr int prnn_mma_kernel_k_tiles(int kpw) {
  return kpw <= 2    ? 2
         : kpw <= 4  ? 4
         : kpw <= 6  ? kpw
         : kpw <= 8  ? 8
         : kpw <= 10 ? 10
         : kpw <= 12 ? 12
         : kpw <= 14 ? 14
         : kpw <= 16 ? 16
                     : 0;
}
// The fp32 split's state exchange, each parity: [warp][piece][lane] 16-byte pieces, a piece
// holding two of the warp's k-tiles (k-tile 2p in its .x, .y words, 2p + 1 in .z, .w); each word
// is the two fp16 halves of B-fragment rows (2q, 2q + 1) or (2q + 8, 2q + 9) of column g (lane =
// 4 g + q): batch rows 0-3 carry their hi halves in lanes 0-15, their lo halves in lanes 16-31.
// A warp then loads ceil(kpw / 2) pieces a step instead of kpw (kernels/NOTES.md, session 42).
__host__ __device__ constexpr int prnn_split_pieces_per_warp(int kpw) {
  return (kpw + 1) / 2;
}
// Batch row b's hi half of state element k, in 16-bit units from its parity's start (kpw: the
// plan's k-tiles per warp); the lo half is kPrnnSplitLoHalves further (16 lanes).
__host__ __device__ constexpr int prnn_split_state_half(int b, int k, int kpw) {
  const int kt = k >> 4, warp = kt / kpw, j = kt - warp * kpw, kk = k & 15;
  const int piece = warp * prnn_split_pieces_per_warp(kpw) + (j >> 1);
  const int lane = b * 4 + ((kk & 7) >> 1);
  return ((piece * 32 + lane) * 4 + (j & 1) * 2 + (kk >> 3)) * 2 + (kk & 1);
}
constexpr int kPrnnSplitLoHalves = 16 * 4 * 2;
// Batch rows one set of the fp32 split's CTAs runs: one n-tile, each row's hi and lo halves in
// columns b and b + 4. Past it a plan takes batch groups (PrnnTiling::batch_groups), this many
// rows a group at most.
constexpr int kPrnnSplitSetRows = 4;
__host__ __device__ constexpr int prnn_split_batch_groups(int max_batch) {
  return (max_batch + kPrnnSplitSetRows - 1) / kPrnnSplitSetRows;
}
// Row pitch (floats) of a batch column of the warps' partial sums for `rows` output rows: + 4
// puts the stores of a warp's accumulator fragments (rows g, columns 2q) on 32 distinct banks.
__host__ __device__ constexpr int prnn_mma_partial_pitch(int rows) {
  return rows + 4;
}

// fp32 tilings on tensor cores split U and the state into two fp16 halves: 4 bytes a weight, so
// both directions of H 1920 fit. fp16's range holds the forward's clipped state (clip <=
// kPrnnHalfSplitMaxClip). Gradients have no such bound: backward-data first finds each
// direction's largest |dL/dh| (over the frames inside the lengths) and exchanges the state times
// a power of two that brings it to [2^7, 2^8), leaving 2^8 of headroom for growth through U^T
// and 2^-44 of the largest as the finest step kept; the products are scaled back exactly. Should
// a scaled value still leave fp16's range (or dL/dh hold a NaN or infinity), the launch raises
// the word at prnn_mma_overflow_flag() and the caller reruns backward-data on the fp32-math
// kernel (prnn_launch's run_if; nn/cuda/persistent_rnn.h does).
constexpr float kPrnnHalfSplitMaxClip = 32768.0f;
constexpr int kPrnnHalfSplitGradExponent = 7;
bool prnn_mma_half_split(const PrnnTiling& t);
// The fp16 split's overflow word in `workspace` (0 after a backward-data launch whose scaled
// state stayed within fp16's range).
const unsigned int* prnn_mma_overflow_flag(const PrnnTiling& t, const void* workspace);
// The largest |dL/dh| of each direction that the fp16 split's last backward-data launch scaled by
// (float bits, [direction]; frames inside the lengths only), in `workspace`.
const unsigned int* prnn_mma_grad_max_words(const PrnnTiling& t, const void* workspace);
// The stacked split: an fp32 split tiling of an odd multiple of 8 rows per CTA, or of any multiple
// where the plan asks for it (PrnnTiling::stacked_split), whose A fragments
// hold 8 rows' hi halves over their lo halves (kernels/persistent_rnn_fragments.cuh,
// prnn_stacked_split_a_fragment), so a CTA's rows are a multiple of 8. The plan takes it where
// 16-row m-tiles would put more rows on a CTA: one direction of H 2113-2560 (24 rows a CTA instead
// of 32 on 132 SMs), both directions of H 1057-1584.
bool prnn_mma_stacked_split(const PrnnTiling& t);
// Rows of U in one m-tile of t's fragments: 8 in the stacked split, else 16.
int prnn_mma_tile_rows(const PrnnTiling& t);
// Whether an fp32 split tiling keeps U's lo halves in shared memory (registers hold hi only).
bool prnn_mma_lo_in_shared(const PrnnTiling& t);
// Whether an fp16 split tiling keeps some of U's hi halves in shared memory too (two m-tiles,
// 9-10 k-tiles per warp).
bool prnn_mma_hi_in_shared(const PrnnTiling& t);
// The k-tiles per warp whose A fragments a bf16 tiling keeps in shared memory (0: all in
// registers; more only where those spilled: 10-12 k-tiles per warp, H 2049-3072, and three
// m-tiles at 6-8, the 48-row batch groups of H 1057-1584).
int prnn_mma_bf16_shared_k_tiles(const PrnnTiling& t);

// The kernel instantiation for t (nullptr when none: the m-tiles or the k-tiles per warp
// or the batch tile outside what is instantiated).
const void* prnn_mma_kernel(const PrnnTiling& t);
// Local memory (bytes a thread) a plan may take t's kernel with (plans refuse kernels that spill),
// each case measured: bf16 GRU kernels that store a register or two before loading their
// fragments and reload them before the first step (nvdisasm, sessions 63-64), and backward-data's
// `<1, 24>` (H 1878-2048 in sets of 8 rows), whose one spilled register is reloaded in the loop.
// 0 for every other tiling, the fp32-math kernel's included.
size_t prnn_mma_allowed_local_bytes(const PrnnTiling& t);
size_t prnn_mma_shared_bytes(const PrnnTiling& t);
size_t prnn_mma_workspace_bytes(const PrnnTiling& t);
void prnn_mma_launch(const PrnnTiling& t, bool backward, const PrnnDirection* dirs,
                     const int* lengths, int T, int B, float clip, void* workspace,
                     cudaStream_t stream);

// The GRU on the fp32 split (PrnnTiling::gru; kernels/persistent_gru.h's contract and operands),
// tagged exchange, 4 batch rows a set (past batch 4 in batch groups, as the clipped ReLU's).
// - Forward: each CTA owns pgru_mma_neurons(t) = rows_per_cta / 3 neurons (16 rows: 5, stacked
//   24: 8, 32: 10, stacked 48: 16) and holds their gates' rows of U {3H, H} (r, z, n; the rest of
//   its rows zeros). The exchange carries h as the ReLU forward's; the GRU cell runs in the
//   epilogue with approximate exp and reciprocal (kernels/gru_cell.cuh, gru_cell_forward_fast:
//   ~1e-6 relative, as close as the fp16 halves' products).
// - Backward-data (t.gru_backward): each CTA owns rows_per_cta neurons (stacked 8 or 16) and
//   holds their columns of U (rows of U^T {H, 3H}); the exchange carries dG = (dr, dz, dn r) of
//   the step before, K = 3H (PrnnTiling::inputs), scaled by a power of two as the ReLU's
//   backward-data state is, with the same overflow word for the caller's fp32-math rerun
//   (pgru_launch's run_if). Neurons past H own the padded tail [3H, 16 ceil(3H / 16)) and write
//   zeros there.
// Either way ctas_per_direction x neurons must cover prnn_mma_state_owners(t).
int pgru_mma_neurons(const PrnnTiling& t);
// The owners a tagged tiling's CTAs of one direction must provide, rows or (GRU) neurons: H
// padded to whole k-tiles, or H plus the padded tail past 3H in the GRU's backward-data.
int prnn_mma_state_owners(const PrnnTiling& t);
struct PgruDirection;
void pgru_mma_forward_launch(const PrnnTiling& t, const PgruDirection* dirs, const int* lengths,
                             int T, int B, void* workspace, cudaStream_t stream);
void pgru_mma_backward_launch(const PrnnTiling& t, const PgruDirection* dirs, const int* lengths,
                              int T, int B, void* workspace, cudaStream_t stream);

}  // namespace ds2::kernels
