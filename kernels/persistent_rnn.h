// Persistent clipped-ReLU RNN recurrence (version 2; bf16 plans that fit use the tensor-core kernel
// of kernels/persistent_rnn_mma.h, version 3, or its cluster form,
// kernels/persistent_rnn_cluster.h, version 4, and small fp32 layers the single-CTA form of
// kernels/persistent_rnn_single.h, through the same calls): ONE cooperative kernel runs
// all T timesteps of one or both directions of a layer. Each CTA owns `rows_per_cta` consecutive
// output neurons and keeps their rows of U (forward) or of U^T (backward-data) on chip for the
// whole launch, in fp32 or in bf16 (`bf16_weights`: half the bytes, so more rows fit; products and
// sums stay fp32): register_groups * 4 rows in registers, the rest in shared memory; layers past
// what those hold keep their last streamed_groups * 4 rows in the workspace instead and read them
// from L2 every step (version 9, "streamed rows" in kernels/NOTES.md). Thread i owns
// `chunks` 4-column pieces of every row, columns [4c, 4c + 4) for c = i + j * threads, j < chunks
// (two: half the threads, so half the reduction across them). Per step every CTA reads the previous
// step's state {B, H} from a double-buffered exchange array in the workspace (L2, ld.global.cg),
// multiplies, reduces across its threads (warp reduce-scatter, then the warps in a fixed order:
// deterministic), applies the clipped ReLU (or its derivative) and the padding mask, writes its
// slice of the output and of the exchange array, and meets the other CTAs of its direction at a
// step barrier (kernels/step_barrier.cuh); with `tagged_exchange` every exchanged value carries its
// step and readers wait for those values instead (kernels/tagged_exchange.cuh). kernels/NOTES.md
// has the designs tried and their timings.
//
// This is the kernel layer: nn/cuda/persistent_rnn.h chooses the tiling for the device (the plan)
// and is the API layers use. It computes exactly what CudaRnnLayer's GEMM recurrence computes:
//   forward:        y_t[b,k] = min(max(x_t[b,k] + sum_j y_prev[b,j] U[k,j], 0), clip)
//                   (U rounded to bf16, nearest even, first when bf16_weights)
//                   with x = pre (read only), y = h, y_prev = 0 before the first step;
//   backward-data:  y_t[b,k] = 0 < h_t[b,k] < clip ? x_t[b,k] + sum_j y_prev[b,j] U[j,k] : 0
//                   with x = dL/dh from above, y = dpre, visiting the steps in the opposite
//                   order of the forward;
//   and y_t[b,:] = 0 wherever t >= len[b] (padding).
// Row (t, b) of x, h and y is at (t * B + b) * ld.
//
//   kernels::PrnnTiling t = plan.tiling();
//   kernels::PrnnDirection d{u, pre, P, nullptr, 0, h, H, /*reverse=*/false};
//   kernels::prnn_launch(t, /*backward=*/false, &d, 1, lengths, T, B, clip, workspace, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ds2::kernels {

// Output rows reduced together (one reduce-scatter of 4 * batch_tile values per warp).
constexpr int kPrnnRowGroup = 4;
// Most row groups one CTA keeps in registers: fp32 kernels are instantiated for 0..8 groups,
// bf16 ones (half the registers per row) also for 10, 12, 14 and 16.
constexpr int kPrnnMaxRegisterGroups = 8;
constexpr int kPrnnMaxRegisterGroupsBf16 = 16;

// Sets of CTAs one launch may hold (directions times batch groups), each with its own exchange:
// the fp32 split and the bf16 GRU up to 8 (both directions of batch 16 in groups of 4 rows; one of
// batch 64 in groups of 8), the bf16 clipped ReLU up to kPrnnMaxBf16Sets (what its plans were
// measured with): PrnnTiling::max_sets().
constexpr int kPrnnMaxSets = 8;
// Streamed row groups (PrnnTiling::streamed_groups): plans take them up to this batch (two passes
// of 4 a step, each reading the streamed rows).
constexpr int kPrnnStreamedMaxBatch = 8;
constexpr int kPrnnMaxBf16Sets = 4;

struct PrnnTiling {
  int hidden = 0;
  int max_batch = 0;
  int directions = 1;          // directions sharing one launch (the CTAs split between them)
  int batch_tile = 4;          // batch rows per pass: 1, 2 or 4
  int rows_per_cta = 0;        // multiple of kPrnnRowGroup
  int ctas_per_direction = 0;  // ceil(hidden / rows_per_cta)
  int threads = 0;             // multiple of 32, at least ceil(hidden / 4)
  int register_groups = 0;     // row groups held in registers (<= rows_per_cta / 4)
  // fp32-math kernel: 4-column chunks each thread owns (1, or 2 with the step barrier);
  // threads >= ceil(hidden / (4 chunks)).
  int chunks = 1;
  // fp32-math kernel, two chunks a thread, step barrier: the last streamed_groups row groups of a
  // CTA (layers past what registers and shared memory hold) live in the workspace instead, copied
  // there once a launch in the kernel's layout and read back from L2 every step, a row group ahead
  // of its products (<= rows_per_cta / 4 - register_groups).
  int streamed_groups = 0;
  bool bf16_weights = false;  // U kept on chip in bf16 (rounded to nearest even), math in fp32
  // Products on tensor cores (kernels/persistent_rnn_mma.h); threads = kPrnnMmaThreads,
  // rows_per_cta a multiple of 16 (8 in the stacked fp32 split), all rows in registers. bf16: the
  // state rounded to bf16 as well, batch_tile 8, 16, 32 or 64 (batch columns per pass; 64 at one
  // m-tile per CTA). fp32: U and the state each split into two
  // fp16 halves (prnn_mma_half_split: fp32 accuracy, not rounded; gradients scaled into fp16's
  // range), tagged exchange, batch_tile = max_batch <= 4.
  bool tensor_cores = false;
  // Tensor-core plans only: the CTAs of a direction form one thread-block cluster that exchanges
  // the state through distributed shared memory and synchronizes with the cluster barrier
  // (kernels/persistent_rnn_cluster.h); batch_tile 8, max_batch <= 8.
  bool cluster = false;
  // fp32 small layers (kernels/persistent_rnn_single.h; one CTA runs H <= 192 at batch <= 4,
  // plans take it where H times the batch tile is at most 256): one CTA per direction holds all of
  // U in registers and the state in its shared memory; no exchange between CTAs, no workspace.
  // With ctas_per_direction > 1 (batch 1 at H 193-512, batch 2 at H 129-384) the CTAs of a
  // direction form a thread-block cluster, each holding its rows of U and a copy of the state,
  // and push their rows of each step into each other's shared memory.
  bool single_cta = false;
  // Grid-wide tensor-core plans only: the state exchange synchronizes through its data (each
  // bf16 travels with the step that wrote it; kernels/tagged_exchange.cuh) instead of a step
  // barrier per direction. Twice the exchange's bytes and more registers per thread.
  bool tagged_exchange = false;
  // Grid-wide tensor-core plans only (bf16, and the fp32 split's clipped ReLU and GRU): each
  // direction's CTAs form this many sets (at most kPrnnMaxSets in all), set g running batch rows [g
  // b, g b + b), b = group_rows(B), with an exchange (and step barrier) of its own. Each CTA then
  // reads only its set's state a step (bf16: even where a set's fewer SMs put more rows on each
  // CTA), and SMs a single set would leave idle work too; the fp32 split, which runs 4 rows a set,
  // so reaches batch 32 (one direction).
  int batch_groups = 1;
  // fp32 split tensor-core plans only: the GRU (kernels/persistent_rnn_mma.h) instead of the
  // clipped-ReLU recurrence: its forward (pgru_mma_forward_launch), or with gru_backward its
  // backward-data (pgru_mma_backward_launch), whose rows are neurons and whose state is the 3H
  // hidden-side gate gradients.
  bool gru = false;
  bool gru_backward = false;
  // fp32 split tensor-core plans only: the stacked split (kernels/persistent_rnn_mma.h) at an even
  // multiple of 8 rows per CTA too. An odd multiple always takes it; the GRU plans ask for it for
  // backward-data (its one form) and for the forward's 48 rows.
  bool stacked_split = false;

  // State elements a step reads, the products' K: H, or 3H in the GRU's backward-data.
  int inputs() const { return gru && gru_backward ? 3 * hidden : hidden; }
  // Whether the kernel rounds the state to bf16 (the bf16 tensor-core kernels).
  bool state_in_bf16() const { return tensor_cores && bf16_weights; }
  // Batch rows of each set's slice of a batch of `batch` (the last slice may hold fewer).
  int group_rows(int batch) const { return (batch + batch_groups - 1) / batch_groups; }
  // The most batch rows one set of CTAs runs (max_batch without batch groups).
  int group_batch() const { return group_rows(max_batch); }
  // Sets of CTAs of the whole launch (directions times batch groups), each with its own exchange.
  int sets() const { return directions * batch_groups; }
  int max_sets() const {
    return tensor_cores && bf16_weights && !gru ? kPrnnMaxBf16Sets : kPrnnMaxSets;
  }
  // CTAs of the whole launch.
  int ctas() const { return sets() * ctas_per_direction; }
};

// Whether a kernel is instantiated for t's batch tile, precision and register groups.
bool prnn_has_kernel(const PrnnTiling& t);
// Columns of one row of the fp32-math kernel's exchange array (4 per chunk of each thread).
int prnn_padded_hidden(const PrnnTiling& t);
// Dynamic shared memory one CTA needs.
size_t prnn_shared_bytes(const PrnnTiling& t);
// Workspace of one launch (all its directions): the double-buffered state exchange, and the
// streamed row groups' weights.
size_t prnn_workspace_bytes(const PrnnTiling& t);

struct PrnnKernelInfo {
  int registers = 0;       // per thread
  size_t local_bytes = 0;  // stack frame / spills per thread (0 wanted)
  int max_threads = 0;     // the most threads per CTA the kernel can launch with
  int blocks_per_sm = 0;   // CTAs of `t.threads` threads that fit on one SM (0: none)
  int max_clusters = 0;    // cluster plans: clusters of ctas_per_direction CTAs resident at once
};
// Resources of the kernel instantiation `t` selects on the current device. Raises that kernel's
// dynamic shared memory limit to prnn_shared_bytes(t) first (when the device allows it).
PrnnKernelInfo prnn_kernel_info(const PrnnTiling& t);

// One direction's operands (see the contract above). `h` is used by backward-data only.
struct PrnnDirection {
  const float* u = nullptr;  // U {H, H}, row-major (the layer's U)
  const float* x = nullptr;  // forward: pre; backward-data: dL/dh from above
  int64_t ld_x = 0;
  const float* h = nullptr;  // backward-data: the forward's hidden states
  int64_t ld_h = 0;
  float* y = nullptr;  // forward: h; backward-data: dpre
  int64_t ld_y = 0;
  bool reverse = false;  // the layer's backward-in-time direction
  // The sparse kernel only (kernels/sparse_persistent_rnn.h): where U's kept weights sit.
  const uint32_t* layout = nullptr;
};

// The checks every launch of t makes first: the sizes, the batch against t.max_batch, lengths and
// workspace, and the tiling itself (a kernel for it; tagged tensor-core tilings owning every
// padded state element). False where T or B is 0: nothing to run.
bool prnn_launch_checks(const PrnnTiling& t, int T, int B, const int* lengths,
                        const void* workspace);

// Runs the recurrence of `t.directions` directions (dirs[0..t.directions)) on `stream` with a
// cooperative launch of t.ctas() CTAs. `lengths` are device lengths of
// B <= t.max_batch utterances; `workspace` holds prnn_workspace_bytes(t) (any contents). Throws
// ds2::Error when the grid cannot be co-resident (instead of ever hanging). T == 0 or B == 0 does
// nothing. `run_if` (fp32-math tilings only): a device word read when the kernel starts; while it
// is 0 the launch computes nothing (the fp16 split's backward-data reruns on the fp32-math kernel
// this way when its scaled gradients overflowed, without a host synchronization).
void prnn_launch(const PrnnTiling& t, bool backward, const PrnnDirection* dirs, const int* lengths,
                 int T, int B, float clip, void* workspace, cudaStream_t stream,
                 const unsigned int* run_if = nullptr);

}  // namespace ds2::kernels
