// mma.sync fragment layouts shared by the tensor-core persistent RNN kernels (version 3, which
// exchanges the state through L2, and the cluster kernel, which exchanges it through distributed
// shared memory): U's A fragments built from the fp32 weights, where a state element sits in
// an exchange kept in B-fragment order, and where a warp's partial sums go. See kernels/mma.cuh
// for the m16n8k16 fragment layout.
//
//   prnn_a_fragment(af[kk][mt], u, H, r0 + 16 * mt, kt, g, q, backward, kt < kt_end);
//   prnn_half_split_a_fragment(hi[kk][mt], lo[kk][mt], u, H, m0, kt, g, q, false, mine); // fp16
//   prnn_stacked_split_a_fragment(a[kk][mt], u, H, r0 + 8 * mt, kt, g, q, false, mine); // 8 rows
//   float* lane_out = red + warp * red_warp + prnn_partials_lane(pitch, g, q);   // once
//   prnn_store_partials(lane_out, pitch, 16 * mt, 8 * nt, acc[mt][nt]);
//   xbuf[fragment_index(b, k, n_tiles)] = float_to_bf16(h);   // then one 8-byte load per lane
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "kernels/half_split_tags.h"  // the fp16 split: U = hi + lo / kHalfLoScale
#include "kernels/mma.cuh"

namespace ds2::kernels {

// U[k][j] (or U[j][k] for backward-data, which multiplies by U^T), zero outside {H, H}.
__device__ __forceinline__ float prnn_weight(const float* __restrict__ u, int H, int k, int j,
                                             bool transpose) {
  if (k >= H || j >= H) return 0.0f;
  return transpose ? u[size_t(j) * H + k] : u[size_t(k) * H + j];
}

// Two bf16 weights (columns j, j + 1 of row k; rounded to nearest even) as one A-fragment register.
__device__ __forceinline__ uint32_t prnn_weight_pair(const float* __restrict__ u, int H, int k,
                                                     int j, bool transpose) {
  return uint32_t{float_to_bf16(prnn_weight(u, H, k, j, transpose))} |
         (uint32_t{float_to_bf16(prnn_weight(u, H, k, j + 1, transpose))} << 16);
}

// The weights of this lane's A fragment (rows k = m0 + g and, with kRowBlocks 2, k + 8; columns
// j = 16 kt + 2q, j + 1, j + 8, j + 9) as w[2 i + c]: row k + 8 (i % kRowBlocks), column
// j + 8 (i / kRowBlocks) + c; zeros when `mine` is false (a k-tile past the warp's share). One
// row block: the stacked split's fragment (prnn_stacked_split_a_fragment). A fragment wholly inside
// U loads its weights with no test between them, so they are in flight together: tested one by one
// (branches), ptxas issued them two at a time, a round trip each. The prologue that loads U was
// most of a launch's fixed ~9 us beyond an empty kernel (ncu, H 1152 batch 1, H200); this saves 2-5
// us of it a launch, most in backward-data, which reads U by columns (kernels/NOTES.md, session
// 41). The fragment helpers' batch_loads false keeps a test per weight, each weight converted as it
// is loaded, for kernels at their register limit (two or more m-tiles at 10-12 k-tiles per warp):
// there the batched form spilled, and so did the per-weight tests routed through this function
// (all 8 weights into w first; `<2, 10>` of the fp16 split 168 bytes), hence their own copy in
// each helper.
template <int kRowBlocks = 2>
__device__ __forceinline__ void prnn_fragment_weights(float (&w)[4 * kRowBlocks],
                                                      const float* __restrict__ u, int H, int k,
                                                      int j, bool transpose, bool mine) {
  if (mine && k + 8 * (kRowBlocks - 1) < H && j + 9 < H) {
#pragma unroll
    for (int i = 0; i < 2 * kRowBlocks; ++i)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const size_t row = k + 8 * (i % kRowBlocks), col = j + 8 * (i / kRowBlocks) + c;
        w[2 * i + c] = transpose ? u[col * H + row] : u[row * H + col];
      }
    return;
  }
#pragma unroll
  for (int i = 0; i < 2 * kRowBlocks; ++i)
#pragma unroll
    for (int c = 0; c < 2; ++c)
      w[2 * i + c] = mine ? prnn_weight(u, H, k + 8 * (i % kRowBlocks),
                                        j + 8 * (i / kRowBlocks) + c, transpose)
                          : 0.0f;
}

// Weights w0, w1 as the fp16 split's operand registers: hi = each rounded to fp16, lo = the rest
// times kHalfLoScale rounded to fp16 (w0 in the low halves). Packed pairs convert with one f16x2
// instruction; a helper returning two __half had made ptxas spill (session 36).
__device__ __forceinline__ void prnn_half_split_pair(float w0, float w1, uint32_t& hi,
                                                     uint32_t& lo) {
  const float h0 = __half2float(__float2half_rn(w0)), h1 = __half2float(__float2half_rn(w1));
  hi = pack_f16x2(h0, h1);
  lo = pack_f16x2((w0 - h0) * kHalfLoScale, (w1 - h1) * kHalfLoScale);
}

// The A fragment (kernels/mma.cuh layout) of U, or U^T for backward-data, for output rows
// [m0, m0 + 16) and k-tile kt, in bf16 (rounded to nearest even); zeros when `mine` is false.
__device__ __forceinline__ void prnn_a_fragment(uint32_t (&a)[4], const float* __restrict__ u,
                                                int H, int m0, int kt, int g, int q, bool transpose,
                                                bool mine, bool batch_loads = true) {
  const int k = m0 + g, j = 16 * kt + 2 * q;
  if (!batch_loads) {  // one test per weight
#pragma unroll
    for (int i = 0; i < 4; ++i)
      a[i] = mine ? prnn_weight_pair(u, H, k + 8 * (i & 1), j + 8 * (i >> 1), transpose) : 0u;
    return;
  }
  float w[8];
  prnn_fragment_weights(w, u, H, k, j, transpose, mine);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    a[i] = uint32_t{float_to_bf16(w[2 * i])} | (uint32_t{float_to_bf16(w[2 * i + 1])} << 16);
}

// The A fragments of hi and lo, in prnn_a_fragment's layout (fp16 instead of bf16), both rounded
// to nearest (prnn_half_split_pair). The state's halves are rounded otherwise (each carries a
// step tag in its lowest bit: half_split_tagged_parts).
__device__ __forceinline__ void prnn_half_split_a_fragment(uint32_t (&hi)[4], uint32_t (&lo)[4],
                                                           const float* __restrict__ u, int H,
                                                           int m0, int kt, int g, int q,
                                                           bool transpose, bool mine,
                                                           bool batch_loads = true) {
  const int k = m0 + g, j = 16 * kt + 2 * q;
  float w[8];
  if (batch_loads) prnn_fragment_weights(w, u, H, k, j, transpose, mine);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = k + 8 * (i & 1), col = j + 8 * (i >> 1);
    const float w0 = batch_loads ? w[2 * i] : mine ? prnn_weight(u, H, row, col, transpose) : 0.0f;
    const float w1 = batch_loads ? w[2 * i + 1]
                     : mine      ? prnn_weight(u, H, row, col + 1, transpose)
                                 : 0.0f;
    prnn_half_split_pair(w0, w1, hi[i], lo[i]);
  }
}

// The stacked split's A fragment: 8 output rows [m0, m0 + 8) of k-tile kt, their hi halves as
// fragment rows 0-7 and their lo halves as rows 8-15 (a0 = hi of row m0 + g, columns j, j + 1;
// a1 = lo of the same; a2, a3 the same at columns j + 8, j + 9). One product then gives U_hi s
// in accumulator rows g and U_lo s in rows g + 8 of the same lane, so a CTA holds rows in
// multiples of 8 instead of 16 (kernels/NOTES.md, session 43). Zeros when `mine` is false.
__device__ __forceinline__ void prnn_stacked_split_a_fragment(uint32_t (&a)[4],
                                                              const float* __restrict__ u, int H,
                                                              int m0, int kt, int g, int q,
                                                              bool transpose, bool mine) {
  float w[4];  // row m0 + g, columns j, j + 1, j + 8, j + 9
  prnn_fragment_weights<1>(w, u, H, m0 + g, 16 * kt + 2 * q, transpose, mine);
  prnn_half_split_pair(w[0], w[1], a[0], a[1]);
  prnn_half_split_pair(w[2], w[3], a[2], a[3]);
}

// The fp32 split's fragments of rows given by their first weight (nullptr: a row of zeros), whose
// weights lie `stride` apart, at columns j = 16 kt + 2q, j + 1, j + 8, j + 9 (zero from K): the
// GRU, whose CTA's rows are slices of U's three gates (forward, stride 1, K = H) or columns of U
// (backward-data's U^T, stride H, K = 3H; kernels/persistent_gru.h), not consecutive rows. The
// 16-row split's hi and lo (rows row0 and row8: fragment rows g and g + 8), or the stacked split's
// one fragment.
__device__ __forceinline__ float prnn_row_weight(const float* __restrict__ row, int K, int stride,
                                                 int j, bool mine) {
  return mine && row != nullptr && j < K ? row[size_t(j) * stride] : 0.0f;
}
__device__ __forceinline__ void prnn_half_split_a_fragment_rows(
    uint32_t (&hi)[4], uint32_t (&lo)[4], const float* row0, const float* row8, int K, int stride,
    int kt, int q, bool mine) {
  const int j = 16 * kt + 2 * q;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float* row = i & 1 ? row8 : row0;
    const int col = j + 8 * (i >> 1);
    prnn_half_split_pair(prnn_row_weight(row, K, stride, col, mine),
                         prnn_row_weight(row, K, stride, col + 1, mine), hi[i], lo[i]);
  }
}
// bf16's fragment of such rows (prnn_a_fragment's layout): rows row0 and row8 (fragment rows g
// and g + 8), each weight rounded to nearest even. (The same loop as the split's above, kept
// apart: one loop for both, taking the packing as a lambda, made the bf16 GRU forward's `<3, 8>`
// spill 8 bytes, and plans refuse kernels that spill; ptxas, session 62.)
__device__ __forceinline__ void prnn_a_fragment_rows(uint32_t (&a)[4], const float* row0,
                                                     const float* row8, int K, int stride, int kt,
                                                     int q, bool mine) {
  const int j = 16 * kt + 2 * q;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float* row = i & 1 ? row8 : row0;
    const int col = j + 8 * (i >> 1);
    a[i] = uint32_t{float_to_bf16(prnn_row_weight(row, K, stride, col, mine))} |
           (uint32_t{float_to_bf16(prnn_row_weight(row, K, stride, col + 1, mine))} << 16);
  }
}
__device__ __forceinline__ void prnn_stacked_split_a_fragment_rows(uint32_t (&a)[4],
                                                                   const float* row, int K,
                                                                   int stride, int kt, int q,
                                                                   bool mine) {
  const int j = 16 * kt + 2 * q;
  prnn_half_split_pair(prnn_row_weight(row, K, stride, j, mine),
                       prnn_row_weight(row, K, stride, j + 1, mine), a[0], a[1]);
  prnn_half_split_pair(prnn_row_weight(row, K, stride, j + 8, mine),
                       prnn_row_weight(row, K, stride, j + 9, mine), a[2], a[3]);
}

// A warp's partial sums go to a [batch column][row] array of row pitch `pitch`: this lane's
// first element (row g, column 2q), as an offset from the warp's array.
__device__ __forceinline__ int prnn_partials_lane(int pitch, int g, int q) {
  return 2 * q * pitch + g;
}

// The same value, through an identity shuffle that ptxas cannot recompute: a loop-invariant
// value computed once then stays in a register, where ptxas would otherwise rematerialize it
// from the thread index and the kernel arguments inside the loop (at a cost of a few registers).
__device__ __forceinline__ int pin_in_register(int value) {
  return __shfl_sync(0xffffffffu, value, static_cast<int>(threadIdx.x & 31));
}

// Stores a warp's accumulator fragment c (rows m0 + g and m0 + g + 8, batch columns n0 + 2q and
// n0 + 2q + 1) from this lane's first element `lane_out` (prnn_partials_lane).
__device__ __forceinline__ void prnn_store_partials(float* __restrict__ lane_out, int pitch, int m0,
                                                    int n0, const float (&c)[4]) {
  float* const p = lane_out + n0 * pitch + m0;
  p[0] = c[0];
  p[pitch] = c[1];
  p[8] = c[2];
  p[pitch + 8] = c[3];
}

// Where state element (batch row b, column k) sits in an exchange of B fragments: in the fragment
// of k-tile k / 16 and n-tile b / 8, lane 4 (b % 8) + (k % 8) / 2, register (k % 16) / 8, half
// k % 2 (PTX ISA m16n8k16 layout). A warp then reads a whole fragment as one coalesced 256-byte
// load, [k-tile][n-tile][32 lanes][4 bf16].
__device__ __forceinline__ int64_t prnn_fragment_index(int b, int k, int n_tiles) {
  const int kk = k & 15, lane = (b & 7) * 4 + ((kk & 7) >> 1);
  return ((int64_t{k >> 4} * n_tiles + (b >> 3)) * 32 + lane) * 4 + (kk >> 3) * 2 + (kk & 1);
}

}  // namespace ds2::kernels
