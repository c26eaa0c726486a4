#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/cuda/device_query.h"
#include "core/error.h"
#include "kernels/async_copy.cuh"
#include "kernels/cooperative_launch.h"
#include "kernels/gru_cell.cuh"
#include "kernels/mma.cuh"
#include "kernels/persistent_gru.h"
#include "kernels/persistent_rnn_epilogue.cuh"
#include "kernels/persistent_rnn_fragments.cuh"
#include "kernels/persistent_rnn_mma.h"
#include "kernels/persistent_rnn_operands.h"
#include "kernels/step_barrier.cuh"
#include "kernels/tagged_exchange.cuh"

namespace ds2::kernels {
namespace {

constexpr int kWarps = kPrnnMmaWarps;
constexpr int kThreads = kPrnnMmaThreads;

// Exchange: [2 parities][k_tiles][n_tiles][32 lanes][4] B-fragment elements: bf16, published by
// a step barrier per direction, or (PrnnTiling::tagged_exchange) 32-bit words of a bf16 and the
// step that wrote it (kernels/tagged_exchange.cuh), which need no barrier.
using MmaDir = PrnnDeviceDirection<uint32_t>;  // the bf16 exchange is read through a cast

struct MmaArgs {
  // Per set (direction d, batch group g at d * batch_groups + g): operands offset to the group's
  // first batch row (the GRU's stay at the batch's first row: the kernel's gru_batch_row), and the
  // set's exchange. Sets from kPrnnMaxBf16Sets on (the fp32 split's and the GRU's only) in
  // later_set, at the end: the other kernels' parameters keep their places.
  MmaDir set[kPrnnMaxBf16Sets];
  const int* lengths;
  // B: the whole batch (rows of a timestep); group_rows: this call's rows per batch group
  // (PrnnTiling::group_rows(B)), max_batch: the most rows a set runs (its exchange's and
  // epilogue's size, PrnnTiling::group_batch()).
  int T, B, H, k_tiles, kpw, n_tiles, rows, ctas_per_dir, max_batch, batch_groups, group_rows;
  float clip;
  int backward;
  int ep_off, len_off;     // dynamic shared memory carve-up in bytes (reduction at 0)
  int lo_off;              // fp32 split from 5 k-tiles per warp: U's lo fragments
  int hi_off;              // fp16 split at 2 m-tiles, 9-10 k-tiles per warp: some hi fragments
  unsigned int* arrivals;  // step barriers: per set, CTAs arrived (0 at launch)
  // fp16 split backward-data: per direction the largest |dL/dh| (float bits), and the word raised
  // when a scaled state value leaves fp16's range (both in the workspace's control block).
  const unsigned int* grad_max;
  unsigned int* overflow;
  // GRU (PrnnTiling::gru), per direction. Forward: the hidden-side bias b_h {3H}, the gates (the
  // set's x, read through the prefetch: the input side; r, z, n written over it) and the
  // candidate {T, B, H}; the set's y is h {T, B, H}. Backward-data: the forward's gates r, z, n
  // (rows of gru_ld_gates) and candidate, read; dG written to gru_dgates {T, B, 3H}; the set's x is
  // dy, its h the forward's h, its y dpre.
  const float* gru_bias[2];
  float* gru_gates[2];
  int64_t gru_ld_gates[2];
  float* gru_candidate[2];
  float* gru_dgates[2];
  MmaDir later_set[kPrnnMaxSets - kPrnnMaxBf16Sets];
};
static_assert(kPrnnMaxBf16Sets == 4 && kPrnnMaxSets == 8, "the kernel selects 4 and 4 sets");

// Where the launch puts set `set`'s operands (the kernel selects among the same places).
MmaDir& set_operands(MmaArgs& a, int set) {
  return set < kPrnnMaxBf16Sets ? a.set[set] : a.later_set[set - kPrnnMaxBf16Sets];
}

// The kernel forms: bf16; fp32 split into two fp16 halves, 16-row m-tiles with hi and lo in
// fragments of their own; or the same split with each fragment stacking 8 rows' hi over their lo
// (8-row m-tiles: prnn_stacked_split_a_fragment).
enum class MmaForm { kBf16, kFp16Split, kStackedSplit };
// The recurrence: the clipped ReLU (forward and backward-data), or the GRU's forward or
// backward-data (the fp32 split, or bf16 sets of 8, 16 or 32 batch rows).
enum class MmaCell { kRelu, kGruForward, kGruBackward };
MmaCell cell_of(const PrnnTiling& t) {
  return !t.gru ? MmaCell::kRelu : t.gru_backward ? MmaCell::kGruBackward : MmaCell::kGruForward;
}

int k_tiles(const PrnnTiling& t) {
  return prnn_mma_k_tiles(t.inputs());
}
// 8-row n-tiles of the largest batch a set runs: the exchange holds B fragments for all of them.
int n_tiles(const PrnnTiling& t) {
  return (t.group_batch() + 7) / 8;
}
// Elements of one parity of the exchange.
int64_t exchange_elements(const PrnnTiling& t) {
  return int64_t{k_tiles(t)} * n_tiles(t) * 32 * 4;
}
struct MmaSmem {
  size_t ep_off, len_off, lo_off, hi_off, total;
};

// The fp32 split kernels keep U's lo fragments in shared memory from this many k-tiles per warp
// times m-tiles up (registers hold hi only), one 16-byte piece per lane:
// [k-tile][m-tile][warp][lane]. From 7, not 5 (session 46): `<1, 5>` and `<1, 6>` hold all of lo
// in registers (ptxas 102 and 123 registers, no spills), so no product waits for a shared-memory
// load. H200, us a step forward, two rounds: H 1408 batch 1 1.30-1.31 -> 1.24-1.25, H 1536 batch
// 1 1.27-1.30 -> 1.25-1.26, H 1152 batch 1 1.15-1.16 -> 1.13-1.14, H 1280 batch 4 1.28-1.29 ->
// 1.26-1.27.
constexpr int kSplitLoSharedFrom = 7;
// The rule, for the plan's shared-memory size and the kernel alike (kpw: k-tiles per warp).
__host__ __device__ constexpr bool split_lo_in_shared(int mt, int kpw) {
  return kpw * mt >= kSplitLoSharedFrom;
}

// The fp16 split at two m-tiles and 9-10 k-tiles per warp (H 2113-2560, one direction, on 132
// SMs) keeps its last kHiSharedTiles k-tiles' hi fragments in shared memory as well: all in
// registers (80 of them) spilled 48 bytes. Same layout as lo: [k-tile][m-tile][warp][lane].
constexpr int kHiSharedTiles = 2;
__host__ __device__ constexpr int split_hi_shared_tiles(int mt, int kpw) {
  return mt == 2 && kpw > 8 ? kHiSharedTiles : 0;
}

// Tagged kernels multiply each piece of the state as soon as its load returns, before its tags
// are known, and test all tags once after the products; a warp with a piece from step s - 3
// (rare) reads its pieces again and repeats the products. Before, a warp tested every tag first,
// so its first product waited for its last load (H200, us a step forward, two rounds,
// kernels/NOTES.md "Session 41": fp32 batch 4 H 1152 1.54 -> 1.37-1.39, H 1536 1.84-1.85 ->
// 1.57-1.60, H 2048 2.22-2.24 -> 2.14-2.15; batch 1 H 1152 1.50 -> 1.37-1.39; bf16 batch 4 H 2048
// 1.99 -> 1.72). The pieces stay in registers through the products, so where that spilled
// (ptxas: the fp16 split at two m-tiles from 7 k-tiles per warp, two m-tiles at 9-10, three
// m-tiles, 12 k-tiles per warp) the tags come first. The fp16 split's `<2, 8>` (both directions
// of H 1793-2048) without the spill, one k-tile's hi in shared memory, was slower: both
// directions of H 1920 2.35-2.38 -> 2.74-2.75. With the state in tagged fp16 halves (session
// 42) `<2, 8>` of the fp16 split no longer spilled optimistic, but was slower: both directions of
// H 1920 2.01-2.04 -> 2.16-2.21, of H 2048 2.08-2.09 -> 2.21-2.22.
__host__ __device__ constexpr bool optimistic_products(bool split, int mt, int kpw) {
  return mt == 1 ? kpw <= 10 : mt == 2 && kpw <= (split ? 6 : 8);
}

// The stacked split (three 8-row m-tiles: 24 rows a CTA where 16-row m-tiles would need 32)
// keeps the fragments of its first 5 k-tiles in registers (60 registers), the rest in shared
// memory. Optimistic products at 5 and 8 k-tiles per warp and the owners' stores after the loads
// at 5 (H200, us a step forward against neither, two rounds: both directions of H 1152 batch 4
// 1.52-1.54 -> 1.34-1.35, batch 1 1.50-1.51 -> 1.30-1.31, of H 1580 1.83-1.86 -> 1.68-1.69). At
// 6 optimistic products were slower (both directions of H 1536 1.53 -> 1.64-1.67); ptxas spilled
// `<3, 10>` optimistic (8 bytes) and `<3, 6>` with both (4).
// The GRU's backward-data at two m-tiles (16 neurons a CTA: both directions of H 529-1056, one
// of H 1057-1194) from 8 k-tiles a warp keeps 4 k-tiles' fragments in registers (ptxas: with 8,
// `<2, 8>` to `<2, 12>` spilled 20-72 bytes), at 10 (both directions of H 683-853) 1, and from
// 12 (both directions of H 854-1056) 2: with 4 `<2, 12>` spilled 8 bytes, with 3 20; with 2, 128
// registers and no spills. `<2, 10>` held 4 until the batch groups' row offset (session 52), with
// which it spilled 40 bytes at 4 and 8 at 3 or 2.
__host__ __device__ constexpr int stacked_register_tiles(int mt, int kpw, bool gru_backward) {
  const int most = gru_backward && mt >= 2 && kpw >= 8 ? (kpw >= 12   ? 2
                                                          : kpw >= 10 ? 1
                                                                      : 4)
                                                       : 16 / mt;
  return kpw < most ? kpw : most;
}
__host__ __device__ constexpr bool stacked_optimistic(int mt, int kpw) {
  return mt * kpw <= 24 && kpw != 6;
}
__host__ __device__ constexpr bool stacked_after_loads(int mt, int kpw) {
  return mt * kpw <= 15;
}

// fp32 split kernels whose warps of KPW or KPW - 1 k-tiles run their products with no test
// between k-tiles and load each shared-memory k-tile's fragments one k-tile ahead (the kernel's
// split_products). H200, us a step forward, two rounds each (session 44): stacked, H 2560 batch 1
// 2.17-2.18 -> 2.01-2.04, both directions of H 1152 batch 4 1.38-1.39 -> 1.31-1.32; 16-row `<1,
// 8>` H 2048 batch 1 1.61 -> 1.54-1.55, batch 4 1.68-1.71 -> 1.61-1.63; `<1, 4>` H 1024 batch 4
// 1.21 -> 1.18-1.19. Session 46: `<1, 10>` (one direction of H 2049-2112, 132 CTAs; three rounds)
// H 2112 batch 1 1.76 -> 1.56-1.58, H 2080 batch 1 1.75-1.77 -> 1.55-1.56, H 2112 batch 4 1.84-1.85
// -> 1.65-1.66; `<1, 5>` (one direction of H 1025-1280, both of H 1025-1056; two rounds; session
// 44 had measured it level) H 1152 batch 1 1.21-1.22 -> 1.16-1.18, batch 4 1.30-1.31 -> 1.23-1.24,
// H 1280 batch 4 1.28-1.30 -> 1.25, both directions of H 1056 batch 4 1.28-1.29 -> 1.23-1.24. Not
// taken: `<1, 6>` (H 1536 batch 1 1.30-1.32 -> 1.35 in session 44; H 1408 batch 1 1.29 -> 1.33-1.36
// in session 46), two m-tiles (both directions of H 1920 batch 4, DS2's layer, 2.00-2.01 -> 2.07).
__host__ __device__ constexpr bool split_products_ahead(bool stacked, int mt, int kpw) {
  return stacked || (mt == 1 && (kpw == 4 || kpw == 5 || kpw == 8 || kpw == 10));
}

// bf16 kernels at 10-12 k-tiles per warp whose A fragments all in registers spill (ptxas, session
// 55: three m-tiles, 36-1124 bytes; two m-tiles tagged or at 4 n-tiles a pass, and at 12) keep the
// first 2-6 k-tiles' fragments in registers (as many as run without spills) and the rest in
// shared memory, [k-tile - kept][m-tile][warp][lane], read back before each product. Then both
// directions of H 2113-2560 (three m-tiles on half the SMs), the batch groups of one direction
// there, the tagged exchange at H 2113-2560 and one direction of H 2561-3072 run on tensor cores,
// where the plans took the fp32-math kernel, one set or the step barrier. Every other bf16 kernel
// is as it was (ptxas: the same registers). H200, us a step forward (session 55, against session
// 54's plans): both directions of H 2304 batch 1 3.06 -> 2.65, batch 4 5.87 -> 2.73, batch 16
// 18.63 -> 4.90, batch 64 70.3 -> 17.7; one direction of H 2560 batch 64 11.33 -> 8.97, batch 16
// 3.68 -> 3.05, batch 1 2.63 -> 2.59; H 3072 batch 4 2.98 (on the fp32-math kernel before: H
// 2999 4.69-4.70 on an H100, session 30). Session 56: three m-tiles at 6 and 8 k-tiles spilled
// 4-268 bytes (all but `<3, 6>` untagged at one n-tile), so batch groups of 48 rows at H
// 1057-1584 (4 groups of one direction, 2 of each of both) were refused; with the same form
// (3 k-tiles kept where `<3, 6>` at two n-tiles still spilled 4 bytes with 4) they run. H200, us
// a step forward: one direction of H 1536 batch 32 2.58 -> 2.18, H 1584 batch 32 3.29 -> 2.36,
// batch 64 5.20 -> 4.20; both directions in one launch of H 1408 batch 9-16 2.35-2.49 ->
// 2.05-2.14, H 1584 batch 9-16 3.03-3.16 -> 2.22-2.37, batch 64 9.56 -> 7.20.
// The GRU's backward-data (session 60, ptxas with all fragments in registers: `<1, 8>` spilled 4
// bytes, `<1, 12>` 40, two m-tiles from 5 k-tiles 12-84; `<1, 10>`, `<2, 4>` none) keeps 6 at one
// m-tile and 8 k-tiles, and 4 at two m-tiles (no spills to 5 k-tiles; from 6 still 20-28 bytes:
// not built). `<1, 12>` (H 854-1024) spilled with 1-12 kept (4-100 bytes, also with the pieces
// loaded in two to four phases, session 61) and keeps none: 122 registers, no spills. So do
// `<1, 14>` and `<1, 16>` (H 1025-1365; 123-128 registers, none at two n-tiles or `<1, 16>` at
// four). The GRU's sets of 16 batch rows (two n-tiles; session 61, ptxas, bytes spilled by k-tiles
// kept): forward `<3, 4>` 4 12, 3 none; `<3, 5>` 2-5 8-156, 1 none; `<3, 6>` 6 244, 4 144, 2-3
// none; `<3, 8>` 1-4 4-156 (3: 8 bytes, before the step loop only: kept, session 63), 0 none; `<3,
// 2>` none with all. Backward-data `<1, 10>` 10 56, 7 12, 5 4, 6 none (the rest none with the one
// n-tile's rule). Sets of 32 rows (four n-tiles): forward
// `<3, 4>` 4 16, 1-3 none; `<3, 5>` 0-3 none (fewer than 2 kept pass 227 KB of shared memory);
// `<3, 6>` 3 48, 2 4, 1 none, 0 16 (2 or more must stay for shared memory: 2, whose 4 bytes spill
// in the prologue only, session 63); `<2, 4>`
// and `<2, 5>` none with all; `<2, 6>` 6 80, 5 52, 4 16, 3 none (session 62); backward-data `<1,
// 10>` 2-6 4-96, `<1, 12>` 2-12 8-108, 0 none; `<1, 8>` 4, `<1, 6>` and below all, none.
__host__ __device__ constexpr int bf16_register_k_tiles(int mt, int kpw, int nt, bool tags,
                                                        MmaCell cell = MmaCell::kRelu) {
  // Two n-tiles (built to 8 k-tiles) keep 3 from 4; `<3, 5>` kept 1 before session 63's
  // ptxas-try --where (with 3 it spills 8 bytes, before the step loop only).
  if (cell == MmaCell::kGruForward && nt == 2) return kpw >= 4 ? 3 : kpw;
  if (cell == MmaCell::kGruBackward && nt == 2 && kpw == 10) return 6;
  if (cell == MmaCell::kGruForward && nt == 4)
    return mt == 2 && kpw <= 5 ? kpw : kpw < 3 ? kpw : mt == 3 && kpw == 6 ? 2 : 3;
  // Four n-tiles at 10 and 12 k-tiles keep 2 (0 before; 4 and 8 bytes spilled before the step
  // loop only, ptxas-try --where, session 63).
  if (cell == MmaCell::kGruBackward && nt == 4)
    return kpw <= 6 ? kpw : kpw == 8 ? 4 : kpw == 10 || kpw == 12 ? 2 : 0;
  // One n-tile (sets of 8 rows) keeps 6 at 8 k-tiles and none from 12: all 8 and 4 (4 bytes
  // spilled before the step loop only) measured level or 1% slower at H 1194 and 1365 batch 8
  // (H200, session 64).
  if (cell == MmaCell::kGruBackward)
    return mt == 1 ? (kpw == 8 ? 6 : kpw >= 12 ? 0 : kpw) : kpw < 4 ? kpw : 4;
  const bool spills = mt == 3   ? kpw >= 8 || (kpw == 6 && (tags || nt >= 2))
                      : mt == 2 ? kpw >= 12 || (kpw == 10 && (tags || nt == 4))
                                : false;
  if (!spills) return kpw;
  if (mt == 2) return tags ? (kpw >= 12 ? 4 : 5) : 6;
  if (tags) return kpw >= 12 ? 2 : 3;
  if (nt == 4) return 2;
  return kpw == 6 && nt == 2 ? 3 : 4;
}

// The bf16 GRU backward-data kernels built (kernel_for_exchange builds these and only these), by
// m-tiles, compiled k-tiles per warp and n-tiles: 16 neurons a CTA to H 1365 (K = 3H: 16 k-tiles a
// warp; fragments in shared memory from 12), 32 to H 426 (5; past those they spilled,
// bf16_register_k_tiles); at four n-tiles not 14 (8 bytes spilled with none kept); at one and two
// n-tiles 18, 20 and 22 (H 1366-1877), 22 at one and 18-22 at two zeroed first (kZeroFirst), which
// they spill without; 24 at one (H 1878-2048, zeroed first; one register reloaded in the loop,
// prnn_mma_allowed_local_bytes; at two it spills 84 bytes). Not built, though they compile without
// spills zeroed first: 14 and 18 at four (18 measured 17.8 us a step at H 1536 batch 32 against the
// GEMM recurrence's 14.4; ptxas and H200, sessions 62-63).
__host__ __device__ constexpr bool gru_backward_bf16_built(int mt, int kpw, int nt) {
  return (nt <= 2 && ((mt == 1 && kpw <= 16) || (mt == 2 && kpw <= 5))) ||
         (nt == 4 && mt == 1 && kpw <= 16 && kpw != 14) ||
         (mt == 1 && ((nt <= 2 && kpw >= 18 && kpw <= 22) || (nt == 1 && kpw == 24)));
}

// The k-tiles per warp of the kernel that runs t (0: none): where its fragments live follows from
// them. The bf16 GRU's backward-data, whose loops are bounded by the plan's k-tiles, runs on the
// smallest of its built kernels that holds them (so 13-14 on 16's at four n-tiles, 17-22 on
// 18's, 20's and 22's at one).
int kernel_k_tiles(const PrnnTiling& t) {
  const int kpw = prnn_mma_k_tiles_per_warp(t.inputs());
  if (!(t.gru && t.gru_backward && t.bf16_weights)) return prnn_mma_kernel_k_tiles(kpw);
  for (int k : {2, 4, 5, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24})
    if (k >= kpw && gru_backward_bf16_built(t.rows_per_cta / 16, k, t.batch_tile / 8)) return k;
  return 0;
}

}  // namespace

// Both rules as the kernel that runs t applies them: to its compiled k-tiles per warp.
bool prnn_mma_lo_in_shared(const PrnnTiling& t) {
  if (!prnn_mma_half_split(t) || prnn_mma_stacked_split(t)) return false;
  return split_lo_in_shared(t.rows_per_cta / 16, kernel_k_tiles(t));
}

bool prnn_mma_hi_in_shared(const PrnnTiling& t) {
  if (!prnn_mma_half_split(t) || prnn_mma_stacked_split(t)) return false;
  return split_hi_shared_tiles(t.rows_per_cta / 16, kernel_k_tiles(t)) > 0;
}

int prnn_mma_bf16_shared_k_tiles(const PrnnTiling& t) {
  if (!t.tensor_cores || !t.bf16_weights) return 0;
  const int kpw = kernel_k_tiles(t);
  return kpw - bf16_register_k_tiles(t.rows_per_cta / 16, kpw, t.batch_tile / 8, t.tagged_exchange,
                                     cell_of(t));
}

namespace {

// Epilogue inputs an output reads each step, each [max_batch][rows] in ep's parity: x (pre or
// dL/dh) and, backward-data, h; the GRU's backward-data r, z, n, the candidate, dy and h_prev (the
// GRU forward's three gates sit in x's place). The kernel and the shared-memory size both ask here.
__host__ __device__ constexpr int epilogue_inputs(bool gru_backward) {
  return gru_backward ? 6 : 2;
}

MmaSmem mma_smem(const PrnnTiling& t) {
  MmaSmem l{};
  size_t off =
      size_t(kWarps) * t.batch_tile * prnn_mma_partial_pitch(t.rows_per_cta) * sizeof(float);
  l.ep_off = off;
  off += size_t(2) * epilogue_inputs(t.gru && t.gru_backward) * t.group_batch() * t.rows_per_cta *
         sizeof(float);  // [parity][input][b][m]
  l.len_off = off;
  off += size_t(t.group_batch()) * sizeof(int);
  off = (off + 15) / 16 * 16;
  l.lo_off = off;
  const int kpw = prnn_mma_k_tiles_per_warp(t.inputs()), mt = t.rows_per_cta / 16;
  if (prnn_mma_lo_in_shared(t)) off += size_t(kpw) * mt * kWarps * 32 * sizeof(uint4);
  off += size_t(prnn_mma_bf16_shared_k_tiles(t)) * mt * kWarps * 32 * sizeof(uint4);  // at lo_off
  l.hi_off = off;
  if (prnn_mma_hi_in_shared(t)) off += size_t(kHiSharedTiles) * mt * kWarps * 32 * sizeof(uint4);
  if (prnn_mma_stacked_split(t)) {  // the fragments past the registers' k-tiles, at lo_off
    // (which k-tiles the kernel holds in registers follows from its compiled k-tiles per warp)
    const int tiles = t.rows_per_cta / 8;
    const int in_registers =
        stacked_register_tiles(tiles, kernel_k_tiles(t), t.gru && t.gru_backward);
    off += size_t(std::max(kpw - in_registers, 0)) * tiles * kWarps * 32 * sizeof(uint4);
  }
  l.total = off;
  return l;
}

// A shared-memory load kept in program order with the exchange's (volatile) loads: the split
// kernel's lo fragments are then read after a step's pieces arrive, not held in registers
// through the wait.
__device__ __forceinline__ uint4 load_shared_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(p))));
  return v;
}

// c += A b (fp16 operands, fp32 sums), A this lane's fragment in registers, or where `shared` its
// 16-byte piece at `pieces + at` in shared memory, read in program order with the state's loads.
__device__ __forceinline__ void mma_f16_registers_or_shared(float (&c)[4], const uint32_t (&a)[4],
                                                            bool shared, const uint4* pieces,
                                                            int at, uint2 b) {
  if (shared) {
    const uint4 f = load_shared_volatile(pieces + at);
    mma_f16_16816(c[0], c[1], c[2], c[3], f.x, f.y, f.z, f.w, b.x, b.y);
  } else {
    mma_f16_16816(c[0], c[1], c[2], c[3], a[0], a[1], a[2], a[3], b.x, b.y);
  }
}

// The fp32 split's partial sum of one accumulator element: U_hi's products plus U_lo's /
// kHalfLoScale, in this lane's batch column, which holds the state's hi halves (lanes q < 2) or
// its lo halves (q >= 2, scaled down once more); then one shuffle adds lanes q and q ^ 2, so both
// hold the sum, scaled back by sum_scale (backward-data's scaled state; 1 forward).
__device__ __forceinline__ float split_column_sum(float u_hi, float u_lo, int q, float sum_scale) {
  constexpr float kInv = 1.0f / kHalfLoScale;
  const float own = (u_hi + u_lo * kInv) * ((q & 2) == 0 ? 1.0f : kInv);
  return (own + __shfl_xor_sync(0xffffffffu, own, 2)) * sum_scale;
}

// MT: m-tiles per CTA, of 16 rows (rows_per_cta = 16 MT), or of 8 in the stacked split; KPW:
// k-tiles per warp held in registers (at least the plan's kpw); NT: 8-column n-tiles per batch
// pass (batch_tile = 8 NT); kTags: the tagged exchange; kForm: bf16, or fp32 split (U and the
// state each split into two fp16 halves, 4 bytes a weight, products on tensor cores; tagged, one
// n-tile of 4 batch rows: columns b and b + 4 hold row b's hi and lo), whose backward-data
// exchanges the state times a power of two (persistent_rnn_mma.h). kCell: the clipped ReLU, or the
// GRU (kernels/persistent_gru.h's contract) on the fp32 split: forward, a CTA's rows are its
// neurons' three gates and its epilogue the GRU cell; backward-data, its rows are neurons (rows of
// U^T, K = 3H) and its epilogue the cell's gradient.
template <int MT, int KPW, int NT, bool kTags, MmaForm kForm, MmaCell kCell = MmaCell::kRelu>
__global__ void __launch_bounds__(kThreads, 1) prnn_mma_kernel_t(const MmaArgs a) {
  constexpr bool kGru = kCell != MmaCell::kRelu;
  constexpr bool kGruBwd = kCell == MmaCell::kGruBackward;
  constexpr bool kSplit = kForm != MmaForm::kBf16;
  constexpr bool kStacked = kForm == MmaForm::kStackedSplit;
  constexpr int kRowsPerTile = kStacked ? 8 : 16;
  static_assert(!kSplit || (kTags && NT == 1), "fp32 split: tagged, one n-tile");
  // fp32 split: each state value travels as two fp16 halves that carry a 1-bit tag in their
  // lowest bit (no tag words), so a lane's 16-byte piece holds two k-tiles' B fragments: half the
  // loads of a 16-bit tag beside each half (H200, us a step forward, two rounds, kernels/NOTES.md
  // "Session 42": batch 4 H 2048 2.16 -> 1.70, H 2560 3.07-3.09 -> 2.52-2.53, both directions of
  // H 1920 2.32-2.34 -> 2.05-2.08; a warp issued ~5 cycles a load, whatever its bytes).
  constexpr int kPieces = kSplit ? prnn_split_pieces_per_warp(KPW) : KPW;  // a warp's loads (most)
  constexpr bool kOptimistic =
      kTags && (kStacked ? stacked_optimistic(MT, KPW) : optimistic_products(kSplit, MT, KPW));
  using Piece = std::conditional_t<kTags, uint4, uint2>;     // one lane's B-fragment elements
  constexpr int kTileRows = kSplit ? kPrnnSplitSetRows : 8;  // batch rows per n-tile
  constexpr int kPass = kTileRows * NT;                      // batch rows per pass
  // Tagged: pieces zeroed before the loads instead of a select after them, and one pass, where
  // that does not spill: it frees registers (H100, us a step: bf16 H 512 batch 4 1.27 -> 1.08,
  // H 768 batch 8 1.43 -> 1.28; fp32 split H 512 1.51 -> 1.38, H 1152 1.95 -> 1.89;
  // kernels/NOTES.md, version 6).
  // The GRU's backward-data past the k-tiles where the select after the loads spills (20 at one
  // n-tile, 16 at two) is zeroed first, which does not spill there; zeroed first at 12-16 k-tiles
  // it was slower (H200, us a step: H 1300 batch 12 5.31 -> 8.54, H 1280 batch 32 9.22 -> 15.99;
  // session 63).
  constexpr bool kGruBwdZeroFirst = kGruBwd && KPW > (NT == 1 ? 20 : 16);
  constexpr bool kZeroFirst = kTags && (kSplit || kGruBwdZeroFirst ||
                                        KPW <= (MT == 1   ? 10
                                                : MT == 2 ? 6
                                                          : 5));
  static_assert(!kSplit || kZeroFirst, "fp32 split: reads padding rows' pieces as zeros");
  extern __shared__ __align__(16) unsigned char smem[];
  float* red = reinterpret_cast<float*>(smem);            // [warps][kPass][R + 4]
  float* ep = reinterpret_cast<float*>(smem + a.ep_off);  // [2][input][max_batch][R]
  int* len_s = reinterpret_cast<int*>(smem + a.len_off);  // [B]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, q = lane & 3;
  // This CTA's set: direction di, batch group bg (rows [b0, b0 + B) of the batch: row (t, b) at
  // t * Bs + b of the set's operands, which start at row b0).
  const int set = static_cast<int>(blockIdx.x) / a.ctas_per_dir;
  const int cta = blockIdx.x - set * a.ctas_per_dir;
  // (selected, not indexed: an index into the parameters copies them all to local memory; sets
  // past kPrnnMaxBf16Sets are the fp32 split's and the GRU's only)
  const MmaDir d = (!kSplit && !kGru) || set < kPrnnMaxBf16Sets ? (set == 0   ? a.set[0]
                                                                   : set == 1 ? a.set[1]
                                                                   : set == 2 ? a.set[2]
                                                                              : a.set[3])
                                                                : (set == 4   ? a.later_set[0]
                                                                   : set == 5 ? a.later_set[1]
                                                                   : set == 6 ? a.later_set[2]
                                                                              : a.later_set[3]);
  const int di = set / a.batch_groups, b0 = (set - di * a.batch_groups) * a.group_rows;
  const int H = a.H, Bs = a.B, B = max(min(Bs - b0, a.group_rows), 0), T = a.T, ntx = a.n_tiles;
  // fp32 split: rows per CTA (16 MT) as a constant. The partial sums' and the epilogue's
  // addresses are then immediates from one register, which ptxas keeps; from the argument it
  // recomputed them on every step between the products and the exchange store (H100, fp32 split
  // batch 4 forward, us a step: H 512 1.37 -> 1.18, H 1152 1.86 -> 1.65; kernels/NOTES.md,
  // session 28). The bf16 kernels measured 0.03-0.05 slower that way (H 1152 batch 4 and 8), and
  // from 8 k-tiles per warp it spills.
  const int R = kSplit ? kRowsPerTile * MT : a.rows;
  // GRU: the CTA's neurons [k0, k0 + kGruN). Forward: local row i is gate i / kGruN of neuron
  // k0 + i % kGruN (rows from 3 kGruN hold zeros), and the exchange carries h, K = H as for the
  // ReLU. Backward-data: row i is neuron k0 + i, and the exchange carries dG, K = 3H.
  constexpr int kGruN = kGruBwd ? kRowsPerTile * MT : kGru ? kRowsPerTile * MT / 3 : 1;
  static_assert(!kGru || (kTags && (!kSplit || NT == 1)), "GRU: tagged; the split one n-tile");
  const int kt0 = warp * a.kpw, kt_end = min(kt0 + a.kpw, a.k_tiles);
  const int r0 = cta * R;
  const int pitch = prnn_mma_partial_pitch(R), red_warp = kPass * pitch;
  // This lane's partial sums. fp32 split: lanes q and q ^ 2 hold the same sums after the
  // shuffle (columns b and b + 4 added), so both store them to the same places: no branch on q
  // in the step. Pinned for the split kernel (see R): recomputed, it sat on the step's critical
  // path.
  const int pinned_partials = kSplit ? pin_in_register(prnn_partials_lane(pitch, g, q & 1)) : 0;
  // The epilogue's and the prefetch's first output o = tid, as (o / R, o % R): a division by the
  // runtime R costs ~35 dependent instructions on every step's critical path. The GRU forward's
  // outputs are neurons, kGruN a batch row (so 16 rows of 16 neurons fit 512 threads): tid_m is
  // then a neuron, whose gates' partial sums and epilogue inputs are rows tid_m + gate kGruN of
  // batch row tid_b, from own_ep on in ep.
  constexpr bool kGruForward = kGru && !kGruBwd;
  const int tid_cols = kGruForward && NT > 1 ? kGruN : R;
  const int tid_b = tid / tid_cols, tid_m = tid - tid_b * tid_cols;
  const int own_ep = kGruForward && NT > 1 ? tid_b * R + tid_m : tid;
  // This lane's B fragments in parity 0 of the exchange, and the distance between k-tiles (in
  // lane pieces: 8 bytes, 16 tagged): a step's load addresses are then one multiply-add each, not
  // a 64-bit index computation per k-tile after the barrier.
  // Tagged at one n-tile (batch <= 8): the stride is a constant and the loads' offsets from one
  // base are immediates (the GRU's sets of two or four n-tiles read it from ntx).
  const int k_stride = kTags && NT == 1 ? 32 : ntx * 32, my_k_tiles = kt_end - kt0;
  // fp32 split: this warp's pieces (persistent_rnn_mma.h, prnn_split_state_half).
  const Piece* frag_base =
      reinterpret_cast<const Piece*>(d.xbuf) +
      (kSplit ? int64_t{warp} * prnn_split_pieces_per_warp(a.kpw) * 32 : int64_t{kt0} * k_stride) +
      lane;
  const int k_padded = 16 * a.k_tiles;
  const int passes = kSplit || kZeroFirst ? 1 : (B + kPass - 1) / kPass;  // tagged: B <= kPass
  const bool bwd = a.backward != 0;
  const float clip = a.clip;
  // Epilogue input i of output tid at ep[parity * ep_parity + i * ep_h + tid] (epilogue_inputs).
  const int ep_parity = epilogue_inputs(kGruBwd) * a.max_batch * R, ep_h = a.max_batch * R;
  const int64_t xbuf_parity = int64_t{a.k_tiles} * ntx * 32 * 4;
  // fp16 split backward-data: the state travels as state_scale times its value, a power of two
  // that brings the direction's largest |dL/dh| to [2^7, 2^8) (exact both ways). A NaN or
  // infinity in dL/dh leaves no scale to choose: the caller's fp32-math rerun reproduces it.
  float state_scale = 1.0f, sum_scale = 1.0f;
  if (kSplit && bwd) {
    const float top = __uint_as_float(a.grad_max[di]);
    if (!(top <= 3.402823466e38f)) {
      if (tid == 0) *a.overflow = 1u;
    } else if (top > 0.0f) {
      const int e = min(max(kPrnnHalfSplitGradExponent - ilogbf(top), -120), 120);
      state_scale = ldexpf(1.0f, e);
      sum_scale = ldexpf(1.0f, -e);
    }
  }

  for (int i = tid; i < B; i += kThreads) len_s[i] = a.lengths[b0 + i];
  if (!kTags && cta == 0) {
    // Rows past B and columns past H are never written by a step but are read (and multiplied
    // by zero weights, or fill unused mma columns): zero them once, in both parities; the first
    // read is after a step barrier, and no step writes these places.
    uint16_t* xbuf = reinterpret_cast<uint16_t*>(d.xbuf);
    const int rows = 8 * ntx, cols = 16 * a.k_tiles;
    for (int i = tid; i < 2 * rows * cols; i += kThreads) {
      const int parity = i / (rows * cols), b = i / cols % rows, k = i % cols;
      if (b >= B || k >= H) xbuf[parity * xbuf_parity + prnn_fragment_index(b, k, ntx)] = 0;
    }
  }

  // Tagged (one pass of at most 8 batch rows, the GRU's 16 or 32): thread tid owns output o = tid
  // (batch row tid_b, row r0 + tid_m) for the whole launch, if any, so the output's addresses are
  // worked out here once: on every step they sat between the CTA barrier and the exchange store,
  // the step's critical path (~170 dependent instructions for one warp; kernels/NOTES.md, version
  // 5b). Columns [H, k_padded) of a real batch row are read too (times zero weights), so their
  // owners store tagged zeros.
  static_assert(!kTags || kPass * (kGruForward && NT > 1 ? kGruN : kRowsPerTile * MT) <= kThreads,
                "tagged: at most one output per thread");
  const int own_k = (kGru ? cta * kGruN : r0) + tid_m;
  // The first of an owner's partial sums in red. Pinned for the split kernel: ptxas recomputed it
  // from the thread index (S2R, then three dependent integer ops) between the CTA barrier and the
  // epilogue's loads of the partial sums. With the partial sums added pairwise (the epilogue),
  // H200, us a step forward, two rounds in each of two machine starts (kernels/NOTES.md "Session
  // 45"): fp32 H 2048 batch 1 1.53-1.57 -> 1.48-1.50, H 2176 batch 1 1.98 -> 1.91-1.93, H 1920
  // batch 4 1.57-1.60 -> 1.50-1.53; the pairwise sums alone were level.
  const int own_partials = kSplit ? pin_in_register(tid_b * pitch + tid_m) : tid_b * pitch + tid_m;
  // The GRU's backward-data: neuron own_k's gate gradients are state elements own_k + gate H; a
  // neuron past H owns element own_k + 2H of the padded tail [3H, k_padded) alone (all three
  // places below are that one).
  auto gru_state_at = [&](int gate) { return own_k < H ? own_k + gate * H : own_k + 2 * H; };
  const int own_at = kGruBwd ? own_k + 2 * H : own_k;  // the last state element it writes
  const bool own_state =
      kTags && tid < kPass * tid_cols && tid_b < B && own_at < k_padded && (!kGru || tid_m < kGruN);
  const bool own_y = own_state && own_k < H;
  // (bf16 GRU backward-data: gate 0's place; gates 1 and 2 in gru_half_z, gru_half_n.)
  const int own_frag =
      own_state
          ? static_cast<int>(prnn_fragment_index(tid_b, kGruBwd ? gru_state_at(0) : own_k, ntx))
          : 0;
  // fp32 split: the hi half's place in 16-bit units; lo is in column tid_b + 4 (batch rows < 4),
  // kPrnnSplitLoHalves further. The offsets in both parities pinned (H 1152 batch 4: 0.02-0.03
  // us a step). The GRU's backward-data: gate 0's here, gates 1 and 2 in gru_half_z, gru_half_n.
  const int own_half = kSplit && own_state
                           ? prnn_split_state_half(tid_b, kGruBwd ? gru_state_at(0) : own_k, a.kpw)
                           : 0;
  // (pin_in_register is a shuffle of the whole warp: every lane calls it.) bf16: fragment places.
  // (own_frag and own_half are gru_place(0) outside the GRU's backward-data; written as that one
  // lambda, GRU backward-data kernels spilled 4-40 bytes: ptxas, session 62.)
  auto gru_place = [&](int gate) {
    if (!own_state) return 0;
    return kSplit ? prnn_split_state_half(tid_b, gru_state_at(gate), a.kpw)
                  : static_cast<int>(prnn_fragment_index(tid_b, gru_state_at(gate), ntx));
  };
  const int gru_half_z = kGruBwd ? pin_in_register(gru_place(1)) : 0;
  const int gru_half_n = kGruBwd ? pin_in_register(gru_place(2)) : 0;
  const int own_out_even = kSplit ? pin_in_register(own_half) : own_frag;
  const int own_out_odd =
      kSplit ? pin_in_register(own_half + 2 * static_cast<int>(xbuf_parity)) : 0;

  // A fragments of this warp's k-tiles, every m-tile of the CTA's rows; zero past H. bf16: af;
  // fp32 split: hi in ah, lo in af or, from kSplitLoSharedFrom k-tiles x m-tiles, in shared
  // memory (lo_s), read back before each product.
  constexpr bool kLoShared = kSplit && !kStacked && split_lo_in_shared(MT, KPW);
  // Where lo is in shared memory (one m-tile: from 8 k-tiles per warp since session 46), the fp16
  // split keeps the first 4 k-tiles' lo in registers anyway (ptxas when measured: <1, 8> 120
  // registers, <1, 10> 126, no spills; session 46: 116 each), so fewer
  // shared-memory reads follow the state's arrival (H100, us a step forward: H 2048 2.25-2.30 ->
  // 2.23, H 1920 2.24 -> 2.19, H 1600 level).
  // bf16: the first kBf16Regs k-tiles' fragments in af, the rest in shared memory at lo_s
  // ([k-tile - kBf16Regs][m-tile][warp][lane]).
  constexpr int kBf16Regs = kSplit ? KPW : bf16_register_k_tiles(MT, KPW, NT, kTags, kCell);
  constexpr int kLoRegs = kStacked ? 0 : !kSplit ? kBf16Regs : !kLoShared ? KPW : MT == 1 ? 4 : 0;
  // hi in registers; stacked: the fragments of the first kHiRegs k-tiles, the rest in shared
  // memory at lo_s ([k-tile - kHiRegs][m-tile][warp][lane]).
  constexpr int kHiRegs = kStacked ? stacked_register_tiles(MT, KPW, kGruBwd)
                                   : KPW - (kSplit ? split_hi_shared_tiles(MT, KPW) : 0);
  uint4* lo_s = reinterpret_cast<uint4*>(smem + a.lo_off) + warp * 32 + lane;  // stride warps*32
  uint4* hi_s = reinterpret_cast<uint4*>(smem + a.hi_off) + warp * 32 + lane;  // k-tiles kHiRegs..
  uint32_t af[kLoRegs > 0 ? kLoRegs : 1][MT][4];
  uint32_t ah[kSplit && kHiRegs > 0 ? kHiRegs : 1][MT][4];
  // A fragment's weight loads in flight together (kernels/persistent_rnn_fragments.cuh), but not
  // at two or more m-tiles and 10-12 k-tiles per warp, where that spilled (ptxas: `<2, 10>` fp16
  // split 168 bytes, bf16 60).
  constexpr bool kBatchLoads = !(MT >= 2 && KPW >= 10);  // (the stacked helper always batches)
  // GRU: local row i's first weight in U {3H, H} (nullptr: a row of zeros), its weights
  // gru_stride apart and gru_inputs of them: forward a row of U, backward-data a column.
  auto gru_row = [&](int i) -> const float* {
    if constexpr (kGruBwd) return r0 + i < H ? d.u + r0 + i : nullptr;
    const int k = cta * kGruN + i % kGruN;
    return i < 3 * kGruN && k < H ? d.u + (size_t(i / kGruN) * H + k) * H : nullptr;
  };
  const int gru_inputs = kGruBwd ? 3 * H : H, gru_stride = kGruBwd ? H : 1;
#pragma unroll
  for (int kk = 0; kk < KPW; ++kk)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const bool mine = kt0 + kk < kt_end;
      if constexpr (!kSplit && kGru) {
        // bf16 GRU forward: the rows are gate slices of U {3H, H} (gru_row).
        uint32_t f[4];
        prnn_a_fragment_rows(f, gru_row(16 * mt + g), gru_row(16 * mt + g + 8), gru_inputs,
                             gru_stride, kt0 + kk, q, mine);
        if (kk < kBf16Regs) {
#pragma unroll
          for (int i = 0; i < 4; ++i) af[kk < kBf16Regs ? kk : 0][mt][i] = f[i];
        } else if (mine) {
          lo_s[((kk - kBf16Regs) * MT + mt) * kWarps * 32] = make_uint4(f[0], f[1], f[2], f[3]);
        }
      } else if constexpr (!kSplit) {
        if (kk < kBf16Regs) {
          prnn_a_fragment(af[kk < kBf16Regs ? kk : 0][mt], d.u, H, r0 + 16 * mt, kt0 + kk, g, q,
                          bwd, mine, kBatchLoads);
        } else {
          uint32_t f[4];
          prnn_a_fragment(f, d.u, H, r0 + 16 * mt, kt0 + kk, g, q, bwd, mine, kBatchLoads);
          if (mine)
            lo_s[((kk - kBf16Regs) * MT + mt) * kWarps * 32] = make_uint4(f[0], f[1], f[2], f[3]);
        }
      } else {
        // fp32 split: this k-tile's fragments (stacked: one, 8 rows' hi over their lo; else hi and
        // lo of 16 rows; the GRU's rows are gate slices of U {3H, H} or its columns), then where
        // they live.
        uint32_t hi[4], lo[4];
        if constexpr (kGru && kStacked)
          prnn_stacked_split_a_fragment_rows(hi, gru_row(8 * mt + g), gru_inputs, gru_stride,
                                             kt0 + kk, q, mine);
        else if constexpr (kGru)
          prnn_half_split_a_fragment_rows(hi, lo, gru_row(16 * mt + g), gru_row(16 * mt + g + 8),
                                          gru_inputs, gru_stride, kt0 + kk, q, mine);
        else if constexpr (kStacked)
          prnn_stacked_split_a_fragment(hi, d.u, H, r0 + 8 * mt, kt0 + kk, g, q, bwd, mine);
        else
          prnn_half_split_a_fragment(hi, lo, d.u, H, r0 + 16 * mt, kt0 + kk, g, q, bwd, mine,
                                     kBatchLoads);
        if (kk >= kHiRegs) {  // in shared memory (the stacked fragment at lo_s)
          if (mine) {
            if constexpr (kStacked) {
              lo_s[((kk - kHiRegs) * MT + mt) * kWarps * 32] =
                  make_uint4(hi[0], hi[1], hi[2], hi[3]);
            } else {
              hi_s[((kk - kHiRegs) * MT + mt) * kWarps * 32] =
                  make_uint4(hi[0], hi[1], hi[2], hi[3]);
              lo_s[(kk * MT + mt) * kWarps * 32] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
            }
          }
          continue;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) ah[kk < kHiRegs ? kk : 0][mt][i] = hi[i];
        if constexpr (!kStacked) {
          if (kLoShared && kk >= kLoRegs) {
            if (mine) lo_s[(kk * MT + mt) * kWarps * 32] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
          } else {
#pragma unroll
            for (int i = 0; i < 4; ++i) af[kk < kLoRegs ? kk : 0][mt][i] = lo[i];
          }
        }
      }
    }
  __syncthreads();
  const int own_len = own_y ? len_s[tid_b] : 0;
  // Tagged: bit kk set where this lane reads a piece (its warp's k-tiles, a real batch row: g, or
  // for the fp32 split g % 4, whose hi (g < 4) or lo it reads). (Warps past the last k-tile have
  // none: my_k_tiles <= 0.)
  const int lane_row = kSplit ? g & 3 : g;
  const unsigned int my_pieces = lane_row < B && my_k_tiles > 0 ? (1u << my_k_tiles) - 1u : 0u;
  // The loads: pieces (fp16 split: bit p where k-tile 2p is this lane's).
  unsigned int my_loads = my_pieces;
  if constexpr (kSplit) {
    my_loads = 0u;
#pragma unroll
    for (int p = 0; p < kPieces; ++p) my_loads |= (my_pieces >> (2 * p) & 1u) << p;
  }

  // Epilogue inputs (x, and h for backward-data) of step s, copied one step ahead into ep[s & 1].
  // GRU forward: an owner copies its neuron's three input-side gates to ep[tid + gate kGruN] (it
  // alone reads them), keeps its h and its bias in registers, and writes the gates it computes
  // over x. GRU backward-data: an owner copies its r, z, n, candidate, dy and h_prev to
  // ep[tid + input ep_h] and keeps the carry dh z in gru_h.
  float gru_h = 0.0f;
  GruTriple gru_b{0.0f, 0.0f, 0.0f};
  float* const gru_gates = kGru ? a.gru_gates[di] : nullptr;
  const int64_t gru_ld_gates = kGru ? a.gru_ld_gates[di] : 0;
  float* const gru_candidate = kGru ? a.gru_candidate[di] : nullptr;
  float* const gru_dgates = kGruBwd ? a.gru_dgates[di] : nullptr;
  // The GRU's row of frame t in every operand: its operands, the set's x, y and h among them,
  // start at the batch's first row (launch_mma), so a set's rows count from b0. Operands offset to
  // the set (as the clipped ReLU's x, y and h are) held 2-16 more registers in the GRU kernels
  // (ptxas, session 52); this holds one.
  const int row_b = kGru ? tid_b + b0 : tid_b;
  auto gru_batch_row = [&](int t) { return int64_t{t} * Bs + row_b; };
  if (kGru && !kGruBwd && own_y) {
    const float* b_h = a.gru_bias[di] + own_k;
    gru_b = GruTriple{b_h[0], b_h[H], b_h[2 * H]};
  }
  auto prefetch = [&](int s) {
    const int t = d.descending ? T - 1 - s : s;
    if constexpr (kGruBwd) {
      if (t < own_len) {
        float* const dst = ep + (s & 1) * ep_parity + tid;
        const int64_t row = gru_batch_row(t);
        const float* gates = gru_gates + row * gru_ld_gates + own_k;
#pragma unroll
        for (int gate = 0; gate < 3; ++gate) cp_async4(dst + gate * ep_h, gates + gate * H);
        cp_async4(dst + 3 * ep_h, gru_candidate + row * H + own_k);
        cp_async4(dst + 4 * ep_h, d.x + row * d.ld_x + own_k);
        // h_prev: the forward's previous frame (this pass visits the frames the other way), zero
        // before its first.
        const int tp = d.descending ? t - 1 : t + 1;
        if (tp >= 0 && tp < T)
          cp_async4(dst + 5 * ep_h, d.h + gru_batch_row(tp) * d.ld_h + own_k);
        else
          dst[5 * ep_h] = 0.0f;
      }
      cp_async_commit();
    } else if constexpr (kGru) {
      if (t < own_len) {
        float* const dst = ep + (s & 1) * ep_parity + own_ep;
        const float* x = d.x + gru_batch_row(t) * d.ld_x + own_k;
#pragma unroll
        for (int gate = 0; gate < 3; ++gate) cp_async4(dst + gate * kGruN, x + gate * H);
      }
      cp_async_commit();
    } else {
      prnn_prefetch_epilogue(ep + (s & 1) * ep_parity, ep_h, d, t, B, Bs, R, r0, H, len_s, bwd, tid,
                             tid_b, tid_m, kThreads);
    }
  };
  if (T > 0) prefetch(0);
  // Tagged, up to 6 k-tiles per warp and two m-tiles: an owner's y of step s - 1 and its
  // prefetch for step s + 1 go out after step s's loads, so the end barrier waits for the
  // exchange store only (H200, us a step forward, two rounds, kernels/NOTES.md "Session 42": fp32
  // batch 4 H 1152 1.38-1.39 -> 1.30, batch 1 1.34 -> 1.27-1.28, both directions 1.60-1.61 ->
  // 1.54; bf16 batch 4 H 1152 1.33 -> 1.27-1.29). At 8 k-tiles per warp it was level (fp32 H
  // 2048) or slower (bf16 H 2048 1.68-1.70 -> 1.77-1.79); two m-tiles from 8 spilled.
  constexpr bool kAfterLoads =
      kTags && !kGru && (kStacked ? stacked_after_loads(MT, KPW) : MT <= 2 && KPW <= 6);
  float pending_y = 0.0f;
  int64_t pending_y_at = -1;
  auto after_loads = [&](int s) {
    if constexpr (kAfterLoads) {
      if (pending_y_at >= 0) d.y[pending_y_at] = pending_y;
      pending_y_at = -1;
      if (s + 1 < T)
        prefetch(s + 1);
      else
        cp_async_commit();  // an empty group: the epilogue waits for all but the newest
    }
  };

  for (int s = 0; s < T; ++s) {
    const int t = d.descending ? T - 1 - s : s;
    // The state step s - 1 wrote, as this lane's first B fragment piece.
    const Piece* frags = frag_base + ((s + 1) & 1) * (xbuf_parity / 4);
    const int64_t xout = (s & 1) * xbuf_parity;  // this step's parity
    const uint32_t tag_in = kSplit ? half_split_step_tag(s - 1) : step_tag(s - 1);
    const uint32_t tag_out = kSplit ? half_split_step_tag(s) : step_tag(s);
    const uint32_t half_tags_in = tag_in * 0x00010001u;  // fp32 split: in both halves of a word
    const float* epx = ep + (s & 1) * ep_parity;
    // This step's epilogue inputs (other threads': after the barrier). A thread that owns its
    // output copied its own inputs and waits for them only where it reads them.
    if constexpr (!kTags) cp_async_wait_all();
    for (int pass = 0; pass < passes; ++pass) {
      // fp32 split: U's hi in acc, its lo in acc2 (summed apart: they are scaled apart). The
      // stacked split at one m-tile: the odd k-tiles' products in acc2, so two chains of
      // dependent products run side by side instead of one (added before the partial sums).
      constexpr bool kTwoChains = kStacked && MT == 1 && KPW >= 6;
      float acc[MT][NT][4], acc2[(kSplit && !kStacked) || kTwoChains ? MT : 1][NT][4];
      auto zero_accumulators = [&](int nt) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            acc[mt][nt][i] = 0.0f;
            if constexpr ((kSplit && !kStacked) || kTwoChains) acc2[mt][0][i] = 0.0f;
          }
      };
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) zero_accumulators(nt);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int ntg = pass * NT + nt;
        if (s == 0 || 8 * ntg >= B) {  // the zero state, or a tile of padding rows only
          if (nt == 0) after_loads(s);
          continue;
        }
        // The B fragments of this warp's k-tiles, straight from L2, all loads in flight at once.
        const Piece* tile_frags = frags + ntg * 32;
        // This n-tile's pieces: none in lanes of its padding rows.
        const bool tile_row = NT == 1 || kTileRows * ntg + lane_row < B;
        const unsigned int tile_pieces = tile_row ? my_pieces : 0u;
        const unsigned int tile_loads = tile_row ? my_loads : 0u;
        uint2 bf[KPW];
        uint4 w[kTags ? kPieces : 1];  // tagged: the pieces as loaded
        auto load_pieces = [&] {
          if constexpr (kTags) {
#pragma unroll
            for (int p = 0; p < kPieces; ++p)
              if (tile_loads >> p & 1u) w[p] = load_tagged(tile_frags + p * k_stride);
          }
        };
        // The tag bits of k-tile kk's state that are not step s - 1's: bf16 words (16-bit tags),
        // or the fp32 split's two words of a piece (1-bit tags in each fp16 half).
        auto tile_tags_mismatch = [&](int kk) -> uint32_t {
          if constexpr (kSplit) {
            const uint4& v = w[kk >> 1];
            return (((kk & 1 ? v.z : v.x) ^ half_tags_in) | ((kk & 1 ? v.w : v.y) ^ half_tags_in)) &
                   0x00010001u;
          } else {
            return tag_mismatch(w[kTags ? kk : 0], tag_in);
          }
        };
        // Pieces whose tags are not step s - 1's yet are read again, all of them in each round
        // (one L2 round trip per round, not per late piece).
        auto wait_for_late_pieces = [&] {
          if constexpr (kTags) {
            constexpr int kTilesPerPiece = kSplit ? 2 : 1;
            uint32_t diff = 0;
#pragma unroll
            for (int kk = 0; kk < KPW; ++kk)
              if (tile_pieces >> kk & 1u) diff |= tile_tags_mismatch(kk);
            if (diff == 0) return;
            unsigned int late = tile_pieces;
            while (true) {
#pragma unroll
              for (int kk = 0; kk < KPW; ++kk)
                if ((late >> kk & 1u) && tile_tags_mismatch(kk) == 0) late &= ~(1u << kk);
              if (late == 0) break;
#pragma unroll
              for (int p = 0; p < kPieces; ++p)
                if (late >> (kTilesPerPiece * p) & ((1u << kTilesPerPiece) - 1u))
                  w[p] = load_tagged(tile_frags + p * k_stride);
            }
          }
        };
        if constexpr (kTags) {
          // The usual case, every tag right at the first read, is one test of all pieces
          // together. Lanes of padding batch rows (never written) hold zeros.
          if constexpr (kZeroFirst) {  // zeros where nothing is read: no select after the loads
#pragma unroll
            for (int p = 0; p < kPieces; ++p) w[p] = make_uint4(0u, 0u, 0u, 0u);
          }
          load_pieces();
          if (nt == 0) after_loads(s);
          if (!kOptimistic) wait_for_late_pieces();
        }
        bool products_again = false;
        do {
          uint32_t tag_diff = 0;  // optimistic: the tags of the pieces the products used
          if constexpr (kTags) {
#pragma unroll
            for (int kk = 0; kk < KPW; ++kk) {
              if constexpr (kSplit) {
                // The fp16 halves (hi columns, then lo) as they are: the tag is part of the value.
                bf[kk] = kk & 1 ? make_uint2(w[kk >> 1].z, w[kk >> 1].w)
                                : make_uint2(w[kk >> 1].x, w[kk >> 1].y);
              } else {
                bf[kk] = kZeroFirst || tile_pieces >> kk & 1u ? tagged_fragment(w[kk])
                                                              : make_uint2(0u, 0u);
              }
            }
          } else {
            // ld.global.cg: never a stale L1 line; other CTAs wrote them before the step barrier.
#pragma unroll
            for (int kk = 0; kk < KPW; ++kk)
              if (kk < my_k_tiles) bf[kk] = __ldcg(tile_frags + kk * k_stride);
          }
          // fp32 split (split_products_ahead), a warp of KPW or KPW - 1 k-tiles (every warp but
          // perhaps the last): the products with no test between k-tiles, and each shared-memory
          // k-tile's fragments loaded one k-tile ahead (the first before the register k-tiles'
          // products). An ncu profile of H 2560 batch 1 had 15% of the warps' samples on the
          // first product of each shared-memory k-tile, waiting for the load issued just before
          // it (the test between k-tiles kept ptxas from hoisting it). Without the loads ahead
          // (no tests only) H 2560 batch 1 was slower, 2.39-2.40 us a step against 2.17-2.18
          // before and 2.01-2.04 with them. ptxas (session 46): stacked 124-128 registers, 16-row
          // (`<1, 4>`, `<1, 5>`, `<1, 8>`, `<1, 10>`) 92-116, no spills.
          auto split_products = [&](auto tiles) {
            constexpr int N = decltype(tiles)::value;
            // The first k-tile with a fragment in shared memory: hi (stacked: its one fragment)
            // past kHiRegs, lo (16-row split) past kLoRegs.
            constexpr int kFirstShared = kLoShared && kLoRegs < kHiRegs ? kLoRegs : kHiRegs;
            uint4 hs[2][MT], ls[2][MT];
            auto load_tile = [&](int kk) {
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) {
                if (kk >= kHiRegs)
                  hs[kk & 1][mt] = load_shared_volatile((kStacked ? lo_s : hi_s) +
                                                        ((kk - kHiRegs) * MT + mt) * kWarps * 32);
                if (kLoShared && kk >= kLoRegs)
                  ls[kk & 1][mt] = load_shared_volatile(lo_s + (kk * MT + mt) * kWarps * 32);
              }
            };
            if constexpr (N > kFirstShared) load_tile(kFirstShared);
#pragma unroll
            for (int kk = 0; kk < N; ++kk) {
              if (kOptimistic && (tile_pieces >> kk & 1u)) tag_diff |= tile_tags_mismatch(kk);
              if (kk >= kFirstShared && kk + 1 < N) load_tile(kk + 1);
#pragma unroll
              for (int mt = 0; mt < MT; ++mt) {
                const uint32_t(&h)[4] = ah[kk < kHiRegs ? kk : 0][mt];
                const uint4 hi = kk < kHiRegs ? make_uint4(h[0], h[1], h[2], h[3]) : hs[kk & 1][mt];
                float(&c)[4] = kTwoChains && (kk & 1) ? acc2[mt][0] : acc[mt][nt];
                // Stacked: U_hi s into accumulator rows g, U_lo s into rows g + 8; else U_hi s.
                mma_f16_16816(c[0], c[1], c[2], c[3], hi.x, hi.y, hi.z, hi.w, bf[kk].x, bf[kk].y);
                if constexpr (!kStacked) {
                  const uint32_t(&l)[4] = af[kk < kLoRegs ? kk : 0][mt];
                  const uint4 lo = kLoShared && kk >= kLoRegs ? ls[kk & 1][mt]
                                                              : make_uint4(l[0], l[1], l[2], l[3]);
                  float(&c2)[4] = acc2[mt][0];
                  mma_f16_16816(c2[0], c2[1], c2[2], c2[3], lo.x, lo.y, lo.z, lo.w, bf[kk].x,
                                bf[kk].y);
                }
              }
            }
          };
          bool products_done = false;
          if constexpr (kSplit && split_products_ahead(kStacked, MT, KPW)) {
            if (my_k_tiles == KPW) {
              split_products(std::integral_constant<int, KPW>{});
              products_done = true;
            } else if (my_k_tiles == KPW - 1) {
              split_products(std::integral_constant<int, KPW - 1>{});
              products_done = true;
            }
          }
#pragma unroll
          for (int kk = 0; kk < KPW; ++kk) {
            if (products_done || kk >= my_k_tiles) break;
            // Optimistic: piece kk's tags tested beside its own products (in their basic block), so
            // no product waits for another piece's load.
            if (kOptimistic && (tile_pieces >> kk & 1u)) tag_diff |= tile_tags_mismatch(kk);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              const int tile_at = ((kk - kHiRegs) * MT + mt) * kWarps * 32;  // past kHiRegs
              if constexpr (kStacked) {
                // One product: U_hi s into accumulator rows g, U_lo s into rows g + 8.
                mma_f16_registers_or_shared(kTwoChains && (kk & 1) ? acc2[mt][0] : acc[mt][nt],
                                            ah[kk < kHiRegs ? kk : 0][mt], kk >= kHiRegs, lo_s,
                                            tile_at, bf[kk]);
              } else if constexpr (kSplit) {
                // Both halves of the state in one n-tile (columns b, b + 4), times U's hi and lo.
                mma_f16_registers_or_shared(acc[mt][nt], ah[kk < kHiRegs ? kk : 0][mt],
                                            kk >= kHiRegs, hi_s, tile_at, bf[kk]);
                mma_f16_registers_or_shared(acc2[mt][0], af[kk < kLoRegs ? kk : 0][mt],
                                            kLoShared && kk >= kLoRegs, lo_s,
                                            (kk * MT + mt) * kWarps * 32, bf[kk]);
              } else if (kk < kBf16Regs) {
                const uint32_t(&frag)[4] = af[kk < kBf16Regs ? kk : 0][mt];
                mma_bf16_16816(acc[mt][nt][0], acc[mt][nt][1], acc[mt][nt][2], acc[mt][nt][3],
                               frag[0], frag[1], frag[2], frag[3], bf[kk].x, bf[kk].y);
              } else {
                const uint4 f =
                    load_shared_volatile(lo_s + ((kk - kBf16Regs) * MT + mt) * kWarps * 32);
                mma_bf16_16816(acc[mt][nt][0], acc[mt][nt][1], acc[mt][nt][2], acc[mt][nt][3], f.x,
                               f.y, f.z, f.w, bf[kk].x, bf[kk].y);
              }
            }
          }
          products_again = false;
          if constexpr (kOptimistic) {
            if (!__all_sync(0xffffffffu, tag_diff == 0)) {
              // Rare: some piece was early. Read them all again (w is not kept through the
              // products).
              load_pieces();
              wait_for_late_pieces();
              zero_accumulators(nt);
              products_again = true;
            }
          }
        } while (products_again);
      }
      // Partial sums of this warp's k range, as [batch column][row]. fp32 split: column b + 4
      // (lo) added onto column b; lanes q and q ^ 2 store the same sums (columns 2 (q & 1) + 0, 1).
      float* const partials_lane =
          red + warp * red_warp + (kSplit ? pinned_partials : prnn_partials_lane(pitch, g, q));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          if constexpr (kStacked) {
            // Rows g: U_hi's products in c0, c1 and U_lo's in c2, c3 (columns 2q, 2q + 1).
            if constexpr (kTwoChains) {
#pragma unroll
              for (int i = 0; i < 4; ++i) acc[mt][nt][i] += acc2[mt][0][i];
            }
            const float(&v)[4] = acc[mt][nt];
            partials_lane[8 * mt] = split_column_sum(v[0], v[2], q, sum_scale);
            partials_lane[pitch + 8 * mt] = split_column_sum(v[1], v[3], q, sum_scale);
          } else if constexpr (kSplit) {
            float c[4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
              c[i] = split_column_sum(acc[mt][nt][i], acc2[mt][0][i], q, sum_scale);
            prnn_store_partials(partials_lane, pitch, 16 * mt, 0, c);
          } else {
            prnn_store_partials(partials_lane, pitch, 16 * mt, 8 * nt, acc[mt][nt]);
          }
        }
      __syncthreads();

      if constexpr (kTags) {
        // The exchange store first: the next step of every CTA waits for it, not for y.
        if constexpr (kGruBwd) {
          if (own_state) {
            cp_async_wait_all();
            GruGrads c{0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            if (t < own_len) {
              // dL/dh: from above, plus the later frame's direct path and its gates through U.
              const float dh =
                  epx[tid + 4 * ep_h] +
                  (gru_h + prnn_sum_partials<kWarps>(red + own_partials, red_warp, kWarps));
              c = gru_cell_backward(dh, epx[tid], epx[tid + ep_h], epx[tid + 2 * ep_h],
                                    epx[tid + 3 * ep_h], epx[tid + 5 * ep_h]);
            }
            if constexpr (kSplit) {
              uint16_t* const hi = reinterpret_cast<uint16_t*>(d.xbuf) +
                                   (s & 1 ? 2 * static_cast<int>(xbuf_parity) : 0);
              const float dg[3] = {c.dr * state_scale, c.dz * state_scale, c.dgn * state_scale};
              const int at[3] = {own_half, gru_half_z, gru_half_n};
#pragma unroll
              for (int gate = 0; gate < 3; ++gate) {
                store_half_split_tagged(hi + at[gate], hi + at[gate] + kPrnnSplitLoHalves, dg[gate],
                                        tag_out);
                if (!(fabsf(dg[gate]) < 65504.0f)) *a.overflow = 1u;
              }
            } else {
              // bf16 (fp32's exponent range): dG rounded as it goes, unscaled.
              store_tagged(d.xbuf + xout + own_frag, c.dr, tag_out);
              store_tagged(d.xbuf + xout + gru_half_z, c.dz, tag_out);
              store_tagged(d.xbuf + xout + gru_half_n, c.dgn, tag_out);
            }
            if (own_y) {
              const int64_t row = gru_batch_row(t);
              float* const dpre = d.y + row * d.ld_y + own_k;
              dpre[0] = c.dr;
              dpre[H] = c.dz;
              dpre[2 * H] = c.dn;
              float* const dgates = gru_dgates + row * 3 * H + own_k;
              dgates[0] = c.dr;
              dgates[H] = c.dz;
              dgates[2 * H] = c.dgn;
            }
            gru_h = c.dh_prev;
          }
          continue;
        }
        if constexpr (kGru) {
          if (own_state) {
            cp_async_wait_all();
            float h = 0.0f;
            GruGates cell{};
            if (t < own_len) {
              const float* p = red + own_partials;
              cell = gru_cell_forward_fast(
                  {epx[own_ep], epx[own_ep + kGruN], epx[own_ep + 2 * kGruN]},
                  {prnn_sum_partials<kWarps>(p, red_warp, kWarps),
                   prnn_sum_partials<kWarps>(p + kGruN, red_warp, kWarps),
                   prnn_sum_partials<kWarps>(p + 2 * kGruN, red_warp, kWarps)},
                  gru_b, gru_h);
              h = cell.h;
            }
            if constexpr (kSplit) {
              uint16_t* const hi =
                  reinterpret_cast<uint16_t*>(d.xbuf) + (s & 1 ? own_out_odd : own_out_even);
              store_half_split_tagged(hi, hi + kPrnnSplitLoHalves, h, tag_out);
            } else {
              store_tagged(d.xbuf + xout + own_frag, h, tag_out);
            }
            if (own_y) {
              const int64_t row = gru_batch_row(t);
              if (t < own_len) {
                float* const gates = gru_gates + row * d.ld_x + own_k;
                gates[0] = cell.r;
                gates[H] = cell.z;
                gates[2 * H] = cell.n;
                gru_candidate[row * H + own_k] = cell.hn;
              }
              d.y[row * d.ld_y + own_k] = h;
            }
            gru_h = h;
          }
          continue;
        }
        if (own_state) {
          if constexpr (kAfterLoads)
            cp_async_wait_newest_pending();
          else
            cp_async_wait_all();
          float out = 0.0f;  // the inputs from the prefetch are at ep[... + tid]
          if (t < own_len)
            out = prnn_cell_from_partials<(kSplit ? kWarps : 0)>(
                red + own_partials, red_warp, kWarps, epx[tid], bwd ? epx[ep_h + tid] : 0.0f, bwd,
                clip);
          if constexpr (kSplit) {
            const float scaled = out * state_scale;
            uint16_t* const hi =
                reinterpret_cast<uint16_t*>(d.xbuf) + (s & 1 ? own_out_odd : own_out_even);
            store_half_split_tagged(hi, hi + kPrnnSplitLoHalves, scaled, tag_out);
            // Below fp16's largest finite value (the forward's clipped state stays there), hi
            // and lo keep their tags without rounding to infinity.
            if (bwd && !(fabsf(scaled) < 65504.0f)) *a.overflow = 1u;
          } else {
            store_tagged(d.xbuf + xout + own_frag, out, tag_out);
          }
          if (own_y) {
            if constexpr (kAfterLoads) {
              pending_y = out;
              pending_y_at = (int64_t{t} * Bs + tid_b) * d.ld_y + own_k;
            } else {
              d.y[(int64_t{t} * Bs + tid_b) * d.ld_y + own_k] = out;
            }
          }
        }
        continue;
      }
      // Warps summed in order, then the cell (clipped ReLU or its derivative) and the padding.
      int bl = tid_b, m = tid_m;
      for (int o = tid; o < kPass * R; o += kThreads) {
        if (o != tid) bl = o / R, m = o - bl * R;
        const int b = pass * kPass + bl, k = r0 + m;
        if (k >= H || b >= B) continue;
        const float out = t < len_s[b] ? prnn_cell_from_partials(
                                             red + bl * pitch + m, red_warp, kWarps, epx[b * R + m],
                                             bwd ? epx[ep_h + b * R + m] : 0.0f, bwd, clip)
                                       : 0.0f;
        d.y[(int64_t{t} * Bs + b) * d.ld_y + k] = out;
        reinterpret_cast<uint16_t*>(d.xbuf)[xout + prnn_fragment_index(b, k, ntx)] =
            float_to_bf16(out);
      }
      if (pass + 1 < passes) __syncthreads();  // the next pass reuses red
    }
    if (s + 1 < T) {
      // Publishes this step's exchange writes to step s + 1's readers in every CTA of the set
      // (sets share nothing; tags: they wait for the values), and orders this CTA's reads of red
      // before their overwrites. The next step's epilogue inputs are copied while the CTA waits.
      end_step<kTags>(a.arrivals + set, static_cast<unsigned int>(s + 1) * a.ctas_per_dir, [&] {
        if constexpr (!kAfterLoads) prefetch(s + 1);
      });
    }
  }
  if (pending_y_at >= 0) d.y[pending_y_at] = pending_y;
}

// Each direction's largest |x| (x = dL/dh) over the frames t < lengths[b], as float bits into
// top[direction] (0 before; bits compare as the values do, a NaN above infinity). Grid: (any,
// directions) of kGradMaxThreads: warp w of a direction takes rows w, w + warps, ... of {T, B}
// and reads a row 16 bytes a lane where the rows allow (x 16-byte aligned, ld_x and H multiples
// of 4), four loads in flight; one atomicMax a block. The first form (a row per block, one 4-byte
// load in flight a thread, an atomicMax a warp) took 8-18 us a call (H200: H 192-1152, batch 4,
// T 50-256), beside a recurrence of 60-330 us.
constexpr int kGradMaxThreads = 256;
__device__ __forceinline__ unsigned int abs_bits(float v) {
  return __float_as_uint(fabsf(v));
}
__global__ void __launch_bounds__(kGradMaxThreads)
    prnn_grad_max_kernel(const MmaDir d0, const MmaDir d1, const int* lengths, int T, int B, int H,
                         unsigned int* top) {
  constexpr int kWarpsPerBlock = kGradMaxThreads / 32;
  const MmaDir& d = blockIdx.y ? d1 : d0;
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t{gridDim.x} * kWarpsPerBlock;
  const bool by_16_bytes =
      (reinterpret_cast<uintptr_t>(d.x) & 15u) == 0 && d.ld_x % 4 == 0 && H % 4 == 0;
  unsigned int m = 0u;
  for (int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32; row < int64_t{T} * B;
       row += warps) {
    const int t = static_cast<int>(row / B), b = static_cast<int>(row % B);
    if (t >= lengths[b]) continue;
    const float* x = d.x + row * d.ld_x;
    if (by_16_bytes) {
      const float4* x4 = reinterpret_cast<const float4*>(x);
#pragma unroll 4
      for (int k = lane; k < H / 4; k += 32) {
        const float4 v = __ldg(x4 + k);
        m = max(m, max(max(abs_bits(v.x), abs_bits(v.y)), max(abs_bits(v.z), abs_bits(v.w))));
      }
    } else {
#pragma unroll 4
      for (int k = lane; k < H; k += 32) m = max(m, abs_bits(__ldg(x + k)));
    }
  }
  for (int o = 16; o > 0; o /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  __shared__ unsigned int warp_max[kWarpsPerBlock];
  if (lane == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarpsPerBlock; ++w) m = max(m, warp_max[w]);
    if (m != 0u) atomicMax(top + blockIdx.y, m);
  }
}

// The tagged exchange only at one n-tile per pass (batch <= 8), where the plan takes it: wider
// passes measured slower than the barrier (kernels/NOTES.md, version 5), so they are not
// instantiated.
// The fp32 split kernels only tagged, at one n-tile, at one or two m-tiles and at most 10
// k-tiles per warp, where they do not spill (ptxas, sm_90, registers: one m-tile at 2, 4, 5, 6,
// 8, 10 k-tiles per warp 70-128; two m-tiles up to 126, at 10 128 with two k-tiles' hi in shared
// memory; kernels/NOTES.md "Session 42").
// The GRU's fp32 split (its bf16 forms below). Forward: one m-tile at up to 4 k-tiles per warp (16
// rows, 5 neurons a CTA: H <= 660 on 132 SMs), two at up to 5 (10 neurons; `<2, 6>` spilled 16
// bytes, ptxas at session 59's 8e85e2c and since, so no plan took it), stacked at 4-5 (8 neurons)
// and six stacked m-tiles at up to 4 (48 rows, 16 neurons: both directions of H 661-1024; ptxas
// 121-125 registers, no spills, where the 16-row split's three m-tiles spilled 8-12 bytes).
// Backward-data (K = 3H: 12 k-tiles a warp at H 1024): the stacked split at one m-tile (8 neurons
// a CTA: one direction of H <= 1056 on 132 SMs, both of H <= 528) and two (16 neurons: one
// direction of H 1057-1194, both of H 529-1056) at every k-tiles per warp, and only it at 14
// (ptxas: `<1, 14>` 121 registers with all 14 k-tiles' fragments in registers, `<2, 14>` 128 with
// 2; no spills).
template <int MT, int KPW, int NT>
const void* kernel_for_exchange(bool tags, MmaForm form, MmaCell cell) {
  constexpr MmaForm kBf16 = MmaForm::kBf16, kSplit = MmaForm::kFp16Split;
  constexpr MmaForm kStacked = MmaForm::kStackedSplit;
  constexpr MmaCell kGruFwd = MmaCell::kGruForward, kGruBwd = MmaCell::kGruBackward;
  if (cell == kGruFwd) {
    if constexpr (NT == 1 && ((MT == 1 && KPW <= 4) || (MT == 2 && KPW <= 5)))
      if (tags && form == kSplit)
        return reinterpret_cast<const void*>(prnn_mma_kernel_t<MT, KPW, 1, true, kSplit, kGruFwd>);
    if constexpr (NT == 1 && ((MT == 3 && (KPW == 4 || KPW == 5)) || (MT == 6 && KPW <= 4)))
      if (tags && form == kStacked)
        return reinterpret_cast<const void*>(
            prnn_mma_kernel_t<MT, KPW, 1, true, kStacked, kGruFwd>);
    // bf16 (sets of 8 batch rows): 5, 10 or 16 neurons a CTA, to H 2048 (ptxas, session 59: 79-128
    // registers, no spills, but `<2, 8>`, which spilled 108 bytes and is left out).
    if constexpr (NT == 1 && MT <= 3 && KPW <= 8 && !(MT == 2 && KPW == 8))
      if (tags && form == kBf16)
        return reinterpret_cast<const void*>(prnn_mma_kernel_t<MT, KPW, 1, true, kBf16, kGruFwd>);
    // bf16, sets of 16 or 32 batch rows (two or four n-tiles): 16 neurons a CTA, where sets of 8
    // need more CTAs than the SMs (H 1024 batch 32, H 768 batch 24, H 512 batch 64 on 132; 32 rows:
    // H 1024 batch 64 and H 1025-1056 at batch 33-64, and one set of H 1321-1536, whose `<3, 6>`
    // spills 4 bytes in its prologue only: prnn_mma_allowed_local_bytes); sets of 32 at 10
    // neurons a CTA, one set of H 1057-1320.
    if constexpr ((MT == 3 && ((NT == 2 && KPW <= 8) || (NT == 4 && KPW <= 6))) ||
                  (MT == 2 && NT == 4 && (KPW == 5 || KPW == 6)))
      if (tags && form == kBf16)
        return reinterpret_cast<const void*>(prnn_mma_kernel_t<MT, KPW, NT, true, kBf16, kGruFwd>);
    return nullptr;
  }
  if (cell == kGruBwd) {
    if constexpr (NT == 1 && MT <= 2 && KPW <= 14)
      if (tags && form == kStacked)
        return reinterpret_cast<const void*>(
            prnn_mma_kernel_t<MT, KPW, 1, true, kStacked, kGruBwd>);
    // bf16 (sets of 8, 16 or 32 batch rows): gru_backward_bf16_built.
    if constexpr (gru_backward_bf16_built(MT, KPW, NT))
      if (tags && form == kBf16)
        return reinterpret_cast<const void*>(prnn_mma_kernel_t<MT, KPW, NT, true, kBf16, kGruBwd>);
    return nullptr;
  }
  if constexpr (MT == 2 && (KPW == 14 || KPW == 16)) {
    // bf16 only: one direction of H 3073-4096 (two m-tiles on up to 128 CTAs). Only the forms
    // that run: passes of 64 columns leave no shared memory for the fragments, and at 16 k-tiles
    // the tagged and 32-column forms spill (ptxas, session 59: 4 and 12 bytes).
    constexpr int kWidestTiles = KPW == 14 ? 4 : 2;
    if (form != kBf16) return nullptr;
    if constexpr (NT <= kWidestTiles)
      if (!tags) return reinterpret_cast<const void*>(prnn_mma_kernel_t<MT, KPW, NT, false, kBf16>);
    if constexpr (NT == 1 && KPW == 14)
      if (tags) return reinterpret_cast<const void*>(prnn_mma_kernel_t<MT, KPW, 1, true, kBf16>);
    return nullptr;
  } else if constexpr (MT > 3 || KPW > 12) {  // the GRU forward's 48 stacked rows; bwd-data's 14
    return nullptr;
  } else {
    if (form == kSplit) {
      if constexpr (NT == 1 && MT <= 2 && KPW <= 10)
        if (tags) return reinterpret_cast<const void*>(prnn_mma_kernel_t<MT, KPW, 1, true, kSplit>);
      return nullptr;
    }
    if (form == kStacked) {
      if constexpr (NT == 1 && MT == 3 && KPW >= 5 && KPW <= 10)
        if (tags)
          return reinterpret_cast<const void*>(prnn_mma_kernel_t<MT, KPW, 1, true, kStacked>);
      return nullptr;
    }
    if (!tags) return reinterpret_cast<const void*>(prnn_mma_kernel_t<MT, KPW, NT, false, kBf16>);
    if constexpr (NT == 1)
      return reinterpret_cast<const void*>(prnn_mma_kernel_t<MT, KPW, 1, true, kBf16>);
    return nullptr;
  }
}

// kpw: the kernel's compiled k-tiles per warp (kernel_k_tiles; 0: none that large).
template <int MT, int NT>
const void* kernel_for_kpw(int kpw, bool tags, MmaForm form, MmaCell cell = MmaCell::kRelu) {
  switch (kpw) {
    case 2:
      return kernel_for_exchange<MT, 2, NT>(tags, form, cell);
    case 4:
      return kernel_for_exchange<MT, 4, NT>(tags, form, cell);
    case 5:
      return kernel_for_exchange<MT, 5, NT>(tags, form, cell);
    case 6:
      return kernel_for_exchange<MT, 6, NT>(tags, form, cell);
    case 8:
      return kernel_for_exchange<MT, 8, NT>(tags, form, cell);
    case 10:
      return kernel_for_exchange<MT, 10, NT>(tags, form, cell);
    case 12:
      return kernel_for_exchange<MT, 12, NT>(tags, form, cell);
    case 14:
      return kernel_for_exchange<MT, 14, NT>(tags, form, cell);
    case 16:
      return kernel_for_exchange<MT, 16, NT>(tags, form, cell);
    case 18:
      return kernel_for_exchange<MT, 18, NT>(tags, form, cell);
    case 20:
      return kernel_for_exchange<MT, 20, NT>(tags, form, cell);
    case 22:
      return kernel_for_exchange<MT, 22, NT>(tags, form, cell);
    case 24:
      return kernel_for_exchange<MT, 24, NT>(tags, form, cell);
    default:
      return nullptr;
  }
}

template <int NT>
const void* kernel_for_mt(int mt, int kpw, bool tags, MmaForm form, MmaCell cell = MmaCell::kRelu) {
  switch (mt) {
    case 1:
      return kernel_for_kpw<1, NT>(kpw, tags, form, cell);
    case 2:
      return kernel_for_kpw<2, NT>(kpw, tags, form, cell);
    case 3:
      return kernel_for_kpw<3, NT>(kpw, tags, form, cell);
    case 6:
      return kernel_for_kpw<6, NT>(kpw, tags, form, cell);
    default:
      return nullptr;
  }
}

}  // namespace

int pgru_mma_neurons(const PrnnTiling& t) {
  return t.gru_backward ? t.rows_per_cta : t.rows_per_cta / 3;
}

int prnn_mma_state_owners(const PrnnTiling& t) {
  if (!(t.gru && t.gru_backward)) return prnn_mma_padded_rows(t.hidden);
  return t.hidden + (prnn_mma_padded_rows(3 * t.hidden) - 3 * t.hidden);
}

bool prnn_mma_half_split(const PrnnTiling& t) {
  return t.tensor_cores && !t.bf16_weights;
}

bool prnn_mma_stacked_split(const PrnnTiling& t) {
  return prnn_mma_half_split(t) && (t.rows_per_cta % 16 == 8 || t.stacked_split);
}

int prnn_mma_tile_rows(const PrnnTiling& t) {
  return prnn_mma_stacked_split(t) ? 8 : 16;
}

const void* prnn_mma_kernel(const PrnnTiling& t) {
  if (!t.tensor_cores || t.threads != kThreads || t.rows_per_cta % prnn_mma_tile_rows(t) != 0)
    return nullptr;
  const int mt = t.rows_per_cta / prnn_mma_tile_rows(t);
  const int kpw = kernel_k_tiles(t);
  const MmaCell cell = cell_of(t);
  if (!t.bf16_weights)  // fp32 split: batch rows 4 per pass, at most one pass a set
    return t.batch_tile == kPrnnSplitSetRows && t.group_batch() <= kPrnnSplitSetRows
               ? kernel_for_mt<1>(
                     mt, kpw, t.tagged_exchange,
                     prnn_mma_stacked_split(t) ? MmaForm::kStackedSplit : MmaForm::kFp16Split, cell)
               : nullptr;
  // bf16: passes of batch_tile columns. The GRU's are tagged only, one pass of one, two or four
  // n-tiles (kernel_for_exchange builds no GRU kernel of eight).
  if (t.gru && !t.tagged_exchange) return nullptr;
  switch (t.batch_tile) {
    case 8:
      return kernel_for_mt<1>(mt, kpw, t.tagged_exchange, MmaForm::kBf16, cell);
    case 16:
      return kernel_for_mt<2>(mt, kpw, t.tagged_exchange, MmaForm::kBf16, cell);
    case 32:
      return kernel_for_mt<4>(mt, kpw, t.tagged_exchange, MmaForm::kBf16, cell);
    case 64:  // one m-tile only: wider CTAs' accumulators spill
      return mt == 1 ? kernel_for_kpw<1, 8>(kpw, t.tagged_exchange, MmaForm::kBf16, cell) : nullptr;
    default:
      return nullptr;
  }
}

size_t prnn_mma_allowed_local_bytes(const PrnnTiling& t) {
  // Each an 8-byte stack frame, 4-8 bytes spilled and reloaded before the step loop (ptxas-try
  // --where, session 63): the forward's `<3, 6>` at four n-tiles with 2 k-tiles in registers (3
  // spilled 48 bytes in the loop; fewer than 2 pass 227 KB of shared memory; H200, forward us a
  // step: H 1536 batch 32 6.07, the GEMM recurrence 10.79), `<3, 5>` at two with 3 and `<3, 8>`
  // at two with 3 (all 8 in shared memory need 256 KB); backward-data in sets of 32 rows at 10
  // and 12 (2 kept). And backward-data's `<1, 24>` at one n-tile (fragments all in shared memory),
  // whose 4 bytes are stored before the step loop and reloaded in it (an mma operand): at H
  // 2048 batch 8 5.73 us a step against the fp32-math kernel's 19.7 and cuDNN's best 16-bit 13.5
  // (H200, session 64).
  if (!(t.tensor_cores && t.bf16_weights && t.gru)) return 0;
  const int kpw = kernel_k_tiles(t);
  const bool allowed =
      t.gru_backward ? t.rows_per_cta == 16 && ((t.batch_tile == 32 && (kpw == 10 || kpw == 12)) ||
                                                (t.batch_tile == 8 && kpw == 24))
                     : t.rows_per_cta == 48 && ((t.batch_tile == 32 && kpw == 6) ||
                                                (t.batch_tile == 16 && (kpw == 5 || kpw == 8)));
  return allowed ? 8 : 0;
}

size_t prnn_mma_shared_bytes(const PrnnTiling& t) {
  return mma_smem(t).total;
}

// The exchange arrays of the sets (PrnnTiling::sets), then a barrier counter per set (without
// tags) or the fp16 split's control block: [largest |dL/dh| of direction 0, of direction 1,
// overflow, unused].
size_t exchange_bytes(const PrnnTiling& t) {
  return size_t(t.sets()) * 2 * exchange_elements(t) *
         (t.tagged_exchange ? sizeof(uint32_t) : sizeof(uint16_t));
}
constexpr int kControlWords = 4;

size_t prnn_mma_workspace_bytes(const PrnnTiling& t) {
  return exchange_bytes(t) + (!t.tagged_exchange       ? kPrnnMaxSets * sizeof(unsigned int)
                              : prnn_mma_half_split(t) ? kControlWords * sizeof(unsigned int)
                                                       : 0);
}

const unsigned int* prnn_mma_grad_max_words(const PrnnTiling& t, const void* workspace) {
  DS2_CHECK(prnn_mma_half_split(t), "persistent RNN: only the fp16 split scans dL/dh");
  return reinterpret_cast<const unsigned int*>(static_cast<const char*>(workspace) +
                                               exchange_bytes(t));
}

const unsigned int* prnn_mma_overflow_flag(const PrnnTiling& t, const void* workspace) {
  DS2_CHECK(prnn_mma_half_split(t), "persistent RNN: only the fp16 split has an overflow word");
  return prnn_mma_grad_max_words(t, workspace) + 2;
}

namespace {

// Both entry points' launch: `gru` (PrnnTiling::gru) holds the GRU forward's own operands, dirs
// then its gates as x and h as y.
void launch_mma(const PrnnTiling& t, bool backward, const PrnnDirection* dirs, const int* lengths,
                int T, int B, float clip, void* workspace, cudaStream_t stream,
                const PgruDirection* gru) {
  DS2_CHECK(t.gru == (gru != nullptr) && (!t.gru || t.gru_backward == backward),
            "persistent RNN (tensor cores): a GRU tiling runs the GRU pass it was planned for");
  const void* fn = prnn_mma_kernel(t);
  DS2_CHECK(fn != nullptr, "persistent RNN (tensor cores): no kernel for this tiling");
  const bool half = prnn_mma_half_split(t);
  DS2_CHECK(!half || backward || clip <= kPrnnHalfSplitMaxClip,
            "persistent RNN (fp16 split): relu clip " << clip << " above " << kPrnnHalfSplitMaxClip
                                                      << ", which fp16 cannot hold");
  const MmaSmem layout = mma_smem(t);
  MmaArgs a{};
  a.lengths = lengths;
  a.T = T;
  a.B = B;
  a.H = t.hidden;
  a.k_tiles = k_tiles(t);
  a.kpw = prnn_mma_k_tiles_per_warp(t.inputs());
  a.n_tiles = n_tiles(t);
  a.rows = t.rows_per_cta;
  a.ctas_per_dir = t.ctas_per_direction;
  a.max_batch = t.group_batch();
  a.batch_groups = t.batch_groups;
  a.group_rows = t.group_rows(B);
  a.clip = clip;
  a.backward = backward ? 1 : 0;
  a.ep_off = static_cast<int>(layout.ep_off);
  a.len_off = static_cast<int>(layout.len_off);
  a.lo_off = static_cast<int>(layout.lo_off);
  a.hi_off = static_cast<int>(layout.hi_off);
  char* ws = static_cast<char*>(workspace);
  const size_t set_bytes = exchange_bytes(t) / t.sets();
  for (int i = 0; i < t.sets(); ++i) {
    const int di = i / t.batch_groups, b0 = (i - di * t.batch_groups) * a.group_rows;
    MmaDir& d = set_operands(a, i);
    d = prnn_device_direction("persistent RNN (tensor cores)", dirs[di], di, backward,
                              reinterpret_cast<uint32_t*>(ws + i * set_bytes));
    // A group without rows (B below the groups' rows) reads nothing; the GRU's operands stay at
    // the batch's first row (the kernel's gru_batch_row).
    if (b0 >= B || gru != nullptr) continue;
    d.x += b0 * d.ld_x;
    d.y += b0 * d.ld_y;
    if (backward) d.h += b0 * d.ld_h;
  }
  for (int i = t.sets(); i < kPrnnMaxSets; ++i) set_operands(a, i) = a.set[0];
  for (int i = 0; gru != nullptr && i < t.directions; ++i) {
    DS2_CHECK(gru[i].candidate && gru[i].gates && (backward ? gru[i].dgates : gru[i].bias_h),
              "persistent GRU: null operand of direction " << i);
    a.gru_bias[i] = gru[i].bias_h;
    a.gru_gates[i] = gru[i].gates;
    a.gru_ld_gates[i] = gru[i].ld_gates;
    a.gru_candidate[i] = gru[i].candidate;
    a.gru_dgates[i] = gru[i].dgates;
  }
  if (t.tagged_exchange) {
    // No word of an earlier launch can pass for one of this launch's first steps: bf16 words
    // tag 0, fp16 split halves tag bit 0 (kernels/exchange_tags.h). The same zeros clear the
    // fp16 split's control block, which follows the exchange.
    static_assert(kTaggedWordFillByte == 0, "the fp16 split's control block starts at zero");
    DS2_CUDA_CHECK(cudaMemsetAsync(workspace, kTaggedWordFillByte,
                                   half ? prnn_mma_workspace_bytes(t) : exchange_bytes(t), stream));
  } else {
    a.arrivals = reinterpret_cast<unsigned int*>(ws + exchange_bytes(t));
    DS2_CUDA_CHECK(cudaMemsetAsync(a.arrivals, 0, kPrnnMaxSets * sizeof(unsigned int), stream));
  }
  if (half) {
    unsigned int* control = reinterpret_cast<unsigned int*>(ws + exchange_bytes(t));
    a.grad_max = control;
    a.overflow = control + 2;
    if (backward) {
      // A warp a row up to two CTAs of kGradMaxThreads per SM (the scan reads T B H floats
      // once: 8 MB at T 256, B 4, H 2048).
      // One scale a direction, from its whole batch: the direction's first set (batch group 0,
      // its operands at row 0) with all B rows.
      const int rows_per_block = kGradMaxThreads / 32;
      int device = 0;
      DS2_CUDA_CHECK(cudaGetDevice(&device));
      const int most = 2 * device_attribute(cudaDevAttrMultiProcessorCount, device);
      const dim3 grid(std::max(std::min((T * B + rows_per_block - 1) / rows_per_block, most), 1),
                      t.directions);
      prnn_grad_max_kernel<<<grid, kGradMaxThreads, 0, stream>>>(
          a.set[0], set_operands(a, t.directions > 1 ? t.batch_groups : 0), lengths, T, B, t.hidden,
          control);
      DS2_CUDA_CHECK(cudaGetLastError());
    }
  }
  cooperative_launch(gru ? "persistent GRU (tensor cores)" : "persistent RNN (tensor cores)", fn,
                     t.ctas(), t.threads, &a, layout.total, stream);
}

}  // namespace

void prnn_mma_launch(const PrnnTiling& t, bool backward, const PrnnDirection* dirs,
                     const int* lengths, int T, int B, float clip, void* workspace,
                     cudaStream_t stream) {
  launch_mma(t, backward, dirs, lengths, T, B, clip, workspace, stream, nullptr);
}

namespace {

// A GRU direction's operands in the kernel's terms: forward x = the gates (input side) and y = h;
// backward-data x = dy, h = the forward's h and y = dpre.
void launch_gru(const PrnnTiling& t, bool backward, const PgruDirection* dirs, const int* lengths,
                int T, int B, void* workspace, cudaStream_t stream) {
  if (!prnn_launch_checks(t, T, B, lengths, workspace)) return;
  PrnnDirection p[2];
  for (int i = 0; i < t.directions; ++i) {
    const PgruDirection& g = dirs[i];
    p[i].u = g.u;
    p[i].x = backward ? g.dy : g.gates;
    p[i].ld_x = backward ? g.ld_dy : g.ld_gates;
    p[i].h = backward ? g.h : nullptr;
    p[i].ld_h = t.hidden;
    p[i].y = backward ? g.dpre : g.h;
    p[i].ld_y = backward ? g.ld_dpre : t.hidden;
    p[i].reverse = g.reverse;
  }
  launch_mma(t, backward, p, lengths, T, B, 0.0f, workspace, stream, dirs);
}

}  // namespace

void pgru_mma_forward_launch(const PrnnTiling& t, const PgruDirection* dirs, const int* lengths,
                             int T, int B, void* workspace, cudaStream_t stream) {
  launch_gru(t, false, dirs, lengths, T, B, workspace, stream);
}

void pgru_mma_backward_launch(const PrnnTiling& t, const PgruDirection* dirs, const int* lengths,
                              int T, int B, void* workspace, cudaStream_t stream) {
  launch_gru(t, true, dirs, lengths, T, B, workspace, stream);
}

}  // namespace ds2::kernels
