// The GRU forward at batch 1 to H 384, batch 2 to H 320 and batch 3-4 to H 192 (fp32) on one CTA
// or a thread-block cluster per direction, which holds all of U {3H, H} in registers: the
// single-CTA form of the clipped-ReLU recurrence (kernels/persistent_rnn_single.h) with a neuron's
// three gate rows where that kernel has its rows. The contract is kernels/persistent_gru.h's
// forward (PgruDirection; gates overwritten with r, z, n, candidate = U_n h_prev + b_hn, h; frames
// t >= len get h = 0 and their gates and candidate untouched); backward-data stays on the plan's
// other kernels.
//
// CTA c of a direction owns neurons [c NC, (c + 1) NC) (NC = neurons_per_cta); a group of 8
// adjacent lanes owns one neuron's rows r, z, n, each lane a slice of the columns read as float4s,
// so every state value a lane reads feeds 3 rows; the group's sums are reduced over its 8 lanes
// and every lane of it ends with the neuron's three (one batch row's; at batch tile 2 half the
// lanes hold each row's, at 4 a quarter), so the cell runs where the sums are. Each CTA keeps a
// whole copy of the state in shared memory; in a cluster a CTA pushes its neurons' new h into every
// other CTA's copy with st.async counted on that CTA's mbarrier (kernels/cluster_sync.cuh), as the
// ReLU clusters do. The gates' inputs and the outputs move between global and shared memory a chunk
// of steps at a time. The cell is gru_cell_forward_fast (kernels/gru_cell.cuh), as the tensor-core
// forward's.
//
//   PgruSingleTiling t = pgru_single_tiling(/*hidden=*/256, /*max_batch=*/1, /*directions=*/2);
//   if (pgru_single_kernel(t) != nullptr && pgru_single_kernel_info(t).max_clusters >=
//   t.directions)
//     pgru_single_forward_launch(t, dirs, lengths, T, B, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/persistent_gru.h"

namespace ds2::kernels {

// Largest hidden size instantiated: 12 float4 column groups a lane (144 weights a thread).
constexpr int kPgruSingleMaxHidden = 384;
// Largest at batch tile 2: past it the tensor-core forward was the faster (H200, us a step, this
// kernel / that one: H 320 1.05 / 1.08, H 384 1.15 / 1.10).
constexpr int kPgruSingleMaxHiddenBatchTile2 = 320;
// Largest at batch tile 4 (batch 3-4): past it this kernel was level with the tensor-core forward
// or slower (H200, us a step at batch 4, this kernel / that one: H 192 0.91 / 1.10; H 200-240
// 1.21-1.28 / about 1.1, H 248-256 1.09-1.10 / 1.12; H 320 1.61 / 1.21).
constexpr int kPgruSingleMaxHiddenBatchTile4 = 192;
// Batch rows a launch runs together at most (the batch tile: 1, 2 or 4).
constexpr int kPgruSingleMaxBatch = 4;

struct PgruSingleTiling {
  int hidden = 0;
  int max_batch = 0;
  int directions = 1;
  int batch_tile = 1;          // 1, 2 or 4: pgru_single_batch_tile(max_batch)
  int ctas_per_direction = 0;  // 1, or a cluster of 2-16
  int neurons_per_cta = 0;
  int threads = 0;  // 8 a neuron, rounded up to whole warps

  int ctas() const { return directions * ctas_per_direction; }
};

// The batch rows a launch of max_batch runs together, and the largest H instantiated for them.
int pgru_single_batch_tile(int max_batch);
int pgru_single_max_hidden(int batch_tile);
// The tiling of a layer: `ctas` CTAs a direction, or 0 for the measured choice (see the .cu).
PgruSingleTiling pgru_single_tiling(int hidden, int max_batch, int directions, int ctas = 0);
// The kernel instantiation for t (nullptr where none is built: H past pgru_single_max_hidden,
// batch past kPgruSingleMaxBatch, or a CTA count not instantiated for its H).
const void* pgru_single_kernel(const PgruSingleTiling& t);
size_t pgru_single_shared_bytes(const PgruSingleTiling& t);
// Resources of t's kernel on the current device (its shared memory limit raised first); for a
// cluster tiling, the clusters that can be resident at once in max_clusters.
PrnnKernelInfo pgru_single_kernel_info(const PgruSingleTiling& t);
// Runs the forward of t.directions directions (dirs[0 .. t.directions)) on `stream`; B <=
// t.max_batch device lengths; no workspace. T == 0 or B == 0 does nothing.
void pgru_single_forward_launch(const PgruSingleTiling& t, const PgruDirection* dirs,
                                const int* lengths, int T, int B, cudaStream_t stream);

}  // namespace ds2::kernels
