// Persistent GRU recurrence: ONE cooperative kernel runs all T timesteps of one or both directions
// of a GRU layer, each CTA keeping its slice of the recurrent weights on chip (registers, the rest
// in shared memory) for the whole launch, as the clipped-ReLU kernel does
// (kernels/persistent_rnn.h, whose fp32-math design this follows: 4-column pieces per thread, the
// warp reduce-scatter of kernels/persistent_rnn_math.cuh, a step barrier per direction). CTA c owns
// the neurons [c n, c n + n) (n = neurons_per_cta):
//   forward:       the 3n rows of U {3H, H} for gates r, z, n of those neurons (K = H inputs, the
//                  state h_prev), so each CTA finishes its neurons' cell without more exchange;
//   backward-data: the n columns of U for those neurons (K = 3H inputs, the hidden-side gate
//                  gradients dG of the step before), so both passes hold 3 n H weights per CTA.
// The state goes through a double-buffered exchange array in the workspace (L2, ld.global.cg).
// Layers past what registers and shared memory hold keep a pass's last row groups in the workspace
// and read them from L2 every step (PgruPass::streamed_groups; forward 2 chunks, backward-data 6),
// as the clipped-ReLU kernel does.
// At batch <= 4 the plan (nn/cuda/persistent_gru.h) runs both passes on tensor cores instead where
// they fit: kernels/persistent_rnn_mma.h, pgru_mma_forward_launch and pgru_mma_backward_launch,
// the same contract and operands.
// The cell is kernels/gru_cell.cuh. Contract: exactly what CudaRnnLayer's GEMM recurrence computes
// for one direction (kernels/rnn.h: rnn_gru_step_forward / rnn_gru_step_backward plus the per-step
// GEMMs), with row (t, b) of every array at (t * B + b) * ld:
//   forward:        reads a = gates[t] (the input side, 3H columns), writes over it r, z, n, and
//                   candidate[t] = U_n h_prev + b_hn, h[t] (ld H); h_prev = 0 before the first
//                   step;
//   backward-data:  reads r, z, n from gates, candidate, h (the forward's), dy (dL/dh from
//                   above), visiting the steps in the opposite order, and writes
//                   dpre[t] = (dr, dz, dn) and dgates[t] = (dr, dz, dn r) (ld 3H);
//   frames t >= len[b] get h = 0 (forward; gates and candidate untouched) and dpre = dgates = 0.
//
//   kernels::PgruDirection d{u, b_h, pre, P, cand, h};
//   kernels::pgru_launch(tiling, /*backward=*/false, &d, lengths, T, B, workspace, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/persistent_rnn.h"

namespace ds2::kernels {

// One pass's thread layout (forward or backward-data).
struct PgruPass {
  int threads = 0;  // multiple of 32
  int chunks = 1;   // 4-column pieces of the pass's input per thread (threads*4*chunks >= K)
  int register_groups = 0;  // row groups (of kPrnnRowGroup rows) in registers, the rest in shared
  // Past what registers and shared memory hold (forward 2 chunks, backward-data 6): the CTA's last
  // row groups kept in the workspace and read from L2 every pass, as the clipped-ReLU kernel's
  // PrnnTiling::streamed_groups
  int streamed_groups = 0;
};

struct PgruTiling {
  int hidden = 0;
  int max_batch = 0;
  int directions = 1;       // directions sharing one launch (the CTAs split between them)
  int batch_tile = 4;       // batch rows per pass over the weights: 1, 2 or 4
  int neurons_per_cta = 0;  // multiple of kPrnnRowGroup
  int ctas_per_direction = 0;
  PgruPass forward, backward;

  const PgruPass& pass(bool bwd) const { return bwd ? backward : forward; }
  // Output rows of one CTA in a pass, and the inputs each row multiplies.
  int rows(bool bwd) const { return bwd ? neurons_per_cta : 3 * neurons_per_cta; }
  int inputs(bool bwd) const { return bwd ? 3 * hidden : hidden; }
};

// Whether a kernel is instantiated for the pass's batch tile, chunks and register groups.
bool pgru_has_kernel(const PgruTiling& t, bool backward);
size_t pgru_shared_bytes(const PgruTiling& t, bool backward);
// Workspace of one launch of either pass: the exchange arrays, the barrier counters and the
// streamed rows of the pass that streams the most.
size_t pgru_workspace_bytes(const PgruTiling& t);
// Resources of the pass's kernel on the current device (its shared memory limit raised first).
PrnnKernelInfo pgru_kernel_info(const PgruTiling& t, bool backward);

// One direction's operands (see the contract above); dy, dpre, dgates are backward-data only.
struct PgruDirection {
  const float* u = nullptr;       // U {3H, H} row-major, gates r, z, n
  const float* bias_h = nullptr;  // b_h {3H}
  float* gates = nullptr;         // {T, B, ld_gates}, this direction's 3H columns
  int64_t ld_gates = 0;
  float* candidate = nullptr;  // {T, B, H}
  float* h = nullptr;          // {T, B, H}
  const float* dy = nullptr;   // {T, B, ld_dy}
  int64_t ld_dy = 0;
  float* dpre = nullptr;  // {T, B, ld_dpre}, this direction's 3H columns
  int64_t ld_dpre = 0;
  float* dgates = nullptr;  // {T, B, 3H}
  bool reverse = false;     // the layer's backward-in-time direction
};

// Runs t.directions directions with one cooperative launch of directions * ctas_per_direction
// CTAs on `stream`; B <= t.max_batch device lengths; `workspace` of pgru_workspace_bytes(t) (any
// contents). Throws ds2::Error when the grid cannot be co-resident. T == 0 or B == 0 does nothing.
// `run_if`: a device word read when the kernel starts; while it is 0 the launch computes nothing
// (the tensor-core backward-data reruns here this way when its scaled gradients overflowed).
void pgru_launch(const PgruTiling& t, bool backward, const PgruDirection* dirs, const int* lengths,
                 int T, int B, void* workspace, cudaStream_t stream,
                 const unsigned int* run_if = nullptr);

}  // namespace ds2::kernels
