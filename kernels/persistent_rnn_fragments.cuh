// mma.sync fragment layouts shared by the tensor-core persistent RNN kernels (version 3, which
// exchanges the state through L2, and the cluster kernel, which exchanges it through distributed
// shared memory): U's A fragments built from the fp32 weights, where a state element sits in
// an exchange kept in B-fragment order, and where a warp's partial sums go. See kernels/mma.cuh
// for the m16n8k16 fragment layout.
//
//   prnn_a_fragment(af[kk][mt], u, H, r0 + 16 * mt, kt, g, q, backward, kt < kt_end);
//   prnn_store_partials(red + warp * red_warp, pitch, 16 * mt, 8 * nt, g, q, acc[mt][nt]);
//   xbuf[fragment_index(b, k, n_tiles)] = float_to_bf16(h);   // then one 8-byte load per lane
#pragma once

#include <cstdint>

#include "core/bf16.h"

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

// The A fragment (kernels/mma.cuh layout) of U, or U^T for backward-data, for output rows
// [m0, m0 + 16) and k-tile kt; zeros when `mine` is false (a k-tile past the warp's share).
__device__ __forceinline__ void prnn_a_fragment(uint32_t (&a)[4], const float* __restrict__ u,
                                                int H, int m0, int kt, int g, int q, bool transpose,
                                                bool mine) {
  const int k = m0 + g, j = 16 * kt + 2 * q;
  a[0] = mine ? prnn_weight_pair(u, H, k, j, transpose) : 0u;
  a[1] = mine ? prnn_weight_pair(u, H, k + 8, j, transpose) : 0u;
  a[2] = mine ? prnn_weight_pair(u, H, k, j + 8, transpose) : 0u;
  a[3] = mine ? prnn_weight_pair(u, H, k + 8, j + 8, transpose) : 0u;
}

// Stores a warp's accumulator fragment c (rows m0 + g and m0 + g + 8, batch columns n0 + 2q and
// n0 + 2q + 1) into a [batch column][row] array of row pitch `pitch`.
__device__ __forceinline__ void prnn_store_partials(float* __restrict__ out, int pitch, int m0,
                                                    int n0, int g, int q, const float (&c)[4]) {
  const int m = m0 + g, n = n0 + 2 * q;
  out[n * pitch + m] = c[0];
  out[(n + 1) * pitch + m] = c[1];
  out[n * pitch + m + 8] = c[2];
  out[(n + 1) * pitch + m + 8] = c[3];
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
