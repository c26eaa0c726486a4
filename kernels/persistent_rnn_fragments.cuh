// mma.sync fragment layouts shared by the tensor-core persistent RNN kernels (version 3, which
// exchanges the state through L2, and the cluster kernel, which exchanges it through distributed
// shared memory): U's A fragments built from the fp32 weights, and where a state element sits in
// an exchange kept in B-fragment order. See kernels/mma.cuh for the m16n8k16 fragment layout.
//
//   af[0] = weight_pair(u, H, row, col, transpose);           // rows k, columns j and j + 1
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

// Where state element (batch row b, column k) sits in an exchange of B fragments: in the fragment
// of k-tile k / 16 and n-tile b / 8, lane 4 (b % 8) + (k % 8) / 2, register (k % 16) / 8, half
// k % 2 (PTX ISA m16n8k16 layout). A warp then reads a whole fragment as one coalesced 256-byte
// load, [k-tile][n-tile][32 lanes][4 bf16].
__device__ __forceinline__ int64_t prnn_fragment_index(int b, int k, int n_tiles) {
  const int kk = k & 15, lane = (b & 7) * 4 + ((kk & 7) >> 1);
  return ((int64_t{k >> 4} * n_tiles + (b >> 3)) * 32 + lane) * 4 + (kk >> 3) * 2 + (kk & 1);
}

}  // namespace ds2::kernels
