// Sparse persistent clipped-ReLU RNN recurrence (Zhu et al., "Sparse Persistent RNNs", ICLR
// 2018): the dense kernel's contract (kernels/persistent_rnn.h) for a pruned U, holding only the
// kept weights on chip. ONE cooperative kernel runs all T steps of one or both directions.
//
// Each CTA owns rows_per_cta consecutive output rows; L = lanes_per_row threads share a row, and
// each thread keeps `slots` of the row's kept weights in registers for the whole launch: the
// value (fp32, or bf16 rounded to nearest even) and its 16-bit column, where the slot came from
// the host-built layout (nn/sparse_rnn_layout.h, bank-aware order). Per step and batch tile every
// CTA stages the previous state of the tile into shared memory as {H, batch_tile}: the
// double-buffered exchange array in the workspace is kept in that layout, so staging is one
// contiguous cp.async.cg copy with every piece in flight at once. Each thread gathers h[col] of its
// slots and multiplies, the L lanes of a row sum with a fixed butterfly (deterministic), lane q
// applies the clipped ReLU (or its derivative) and the padding mask for batch row q of the tile,
// writes the output and the exchange array, and the direction's CTAs meet at the dense kernels'
// step barrier (kernels/step_barrier.cuh), the next step's epilogue inputs copied (cp.async)
// between arriving and waiting.
//
// It computes (U ⊙ mask as the layout says; weights outside the mask are never read):
//   forward:        y_t[b,k] = min(max(x_t[b,k] + sum_{j kept} y_prev[b,j] U[k,j], 0), clip)
//   backward-data:  y_t[b,k] = 0 < h_t[b,k] < clip ? x_t[b,k] + sum_{j kept} y_prev[b,j] U[j,k]
//                   : 0,  visiting the steps in the opposite order of the forward,
//   y_t[b,:] = 0 wherever t >= len[b], rows (t, b) at (t * B + b) * ld, as the dense kernel.
// The forward takes the layout of U's rows, backward-data the layout of U^T's rows (transpose).
//
//   kernels::SprnnTiling t = plan.tiling();
//   kernels::PrnnDirection d{u, pre, P, nullptr, 0, h, H, /*reverse=*/false, layout};
//   kernels::sprnn_launch(t, /*backward=*/false, &d, lengths, T, B, clip, workspace, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/persistent_rnn.h"

namespace ds2::kernels {

struct SprnnTiling {
  int hidden = 0;
  int max_batch = 0;
  int directions = 1;          // directions sharing one launch (the CTAs split between them)
  int batch_tile = 4;          // batch rows per pass: 1 or 4
  int rows_per_cta = 0;        // rows_per_cta * lanes_per_row is a multiple of 32
  int ctas_per_direction = 0;  // ceil(hidden / rows_per_cta)
  int lanes_per_row = 0;       // 8, 16 or 32
  int slots = 0;               // kept weights per thread (an instantiated count)
  bool bf16_weights = false;   // values held as bf16 (rounded to nearest even), math in fp32
  // Shared-memory copies of the staged state: 2 lets the next batch tile be copied in while the
  // current one is gathered (only useful with several tiles, and only when both fit).
  int state_buffers = 1;

  int threads() const { return rows_per_cta * lanes_per_row; }
};

// Slot counts with a kernel, ascending; the plan rounds up to one of them.
constexpr int kSprnnSlotCounts[] = {8, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128};

bool sprnn_has_kernel(const SprnnTiling& t);
// Dynamic shared memory of one CTA (staged state, epilogue inputs, lengths).
size_t sprnn_shared_bytes(const SprnnTiling& t);
// Workspace of one launch (all its directions): the double-buffered state exchange.
size_t sprnn_workspace_bytes(const SprnnTiling& t);
// Layout words of one direction and pass (nn/sparse_rnn_layout.h's words()).
int64_t sprnn_layout_words(const SprnnTiling& t);

// Registers, spills and CTAs per SM of the kernel `t` selects (as prnn_kernel_info).
PrnnKernelInfo sprnn_kernel_info(const SprnnTiling& t);

// The operands are the dense kernel's (PrnnDirection) with `layout` set: sprnn_layout_words(t)
// words of U's rows (forward) or U^T's rows (backward-data); U is read at those positions only.
// Same calling rules as prnn_launch: a cooperative launch of directions * ctas_per_direction CTAs
// on `stream`; throws ds2::Error when the grid cannot be co-resident; T == 0 or B == 0: nothing.
void sprnn_launch(const SprnnTiling& t, bool backward, const PrnnDirection* dirs,
                  const int* lengths, int T, int B, float clip, void* workspace,
                  cudaStream_t stream);

}  // namespace ds2::kernels
