// Arithmetic the fp32-math persistent kernels share (the clipped-ReLU kernel,
// kernels/persistent_rnn.cu, and the GRU one, kernels/persistent_gru.cu): 4-column dot products
// on fp32 or bf16 weights, and the select-free warp reduce-scatter of
// kernels/reduce_scatter_order.h.
//
//   float acc[16];                                   // 4 rows x 4 batch rows, lane-permuted
//   row_group_products<4, 4, 1>(w + g * 4, hv, acc); // acc[r * 4 + b] = w[r] . hv[b]
//   reduce_scatter_store<16>(acc, red + warp * 16, lane, reduce_scatter_mask<16>(lane));
#pragma once

#include <cstdint>

#include "kernels/reduce_scatter_order.h"

namespace ds2::kernels {

__device__ __forceinline__ float dot4(const float4 w, const float4 h) {
  return fmaf(w.w, h.w, fmaf(w.z, h.z, fmaf(w.y, h.y, w.x * h.x)));
}
// acc + the dot product, the columns in the same order as dot4.
__device__ __forceinline__ float dot4_add(const float4 w, const float4 h, float acc) {
  return fmaf(w.w, h.w, fmaf(w.z, h.z, fmaf(w.y, h.y, fmaf(w.x, h.x, acc))));
}
// Four bf16 weights (two per word, the lower column in the low half): widening a bf16 to fp32 is
// a shift or a mask, so the products and sums stay fp32.
// The widening is volatile asm so the compiler cannot hoist it out of the step loop: weights
// are loop invariant, and widened once they would take the fp32 registers bf16 exists to save.
__device__ __forceinline__ void widen_bf16x2(uint32_t packed, float& lo, float& hi) {
  asm volatile("{\n\tshl.b32 %0, %2, 16;\n\tand.b32 %1, %2, 0xFFFF0000;\n\t}"
               : "=f"(lo), "=f"(hi)
               : "r"(packed));
}
__device__ __forceinline__ float4 widen_bf16x4(const uint2 w) {
  float4 f;
  widen_bf16x2(w.x, f.x, f.y);
  widen_bf16x2(w.y, f.z, f.w);
  return f;
}
__device__ __forceinline__ float dot4(const uint2 w, const float4 h) {
  return dot4(widen_bf16x4(w), h);
}
__device__ __forceinline__ float dot4_add(const uint2 w, const float4 h, float acc) {
  return dot4_add(widen_bf16x4(w), h, acc);
}

// The partial sums of one row group: acc[r * BT + b] = sum over c < CH of w[r * CH + c] .
// hv[c * BT + b], for R rows (a thread's chunks of each, fp32 float4 or bf16 uint2) and BT batch
// rows of the state; the chunks added in order.
template <int R, int BT, int CH, class Chunk>
__device__ __forceinline__ void row_group_products(const Chunk* w, const float4 (&hv)[BT * CH],
                                                   float (&acc)[R * BT]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int b = 0; b < BT; ++b) {
      acc[r * BT + b] = dot4(w[r * CH], hv[b]);
#pragma unroll
      for (int c = 1; c < CH; ++c)
        acc[r * BT + b] = dot4_add(w[r * CH + c], hv[c * BT + b], acc[r * BT + b]);
    }
}

// Halving level K (offset 16 >> K) and the ones after it; one template per level, so every index
// is a constant (loops with level-dependent bounds left the array in local memory).
template <int V, int K>
__device__ __forceinline__ void reduce_scatter_halve(float (&v)[V]) {
  if constexpr ((V >> (K + 1)) >= 1) {
    constexpr int half = V >> (K + 1);
#pragma unroll
    for (int i = 0; i < half; ++i) v[i] += __shfl_xor_sync(0xffffffffu, v[i + half], 16 >> K);
    reduce_scatter_halve<V, K + 1>(v);
  }
}
// Warp reduce-scatter of V (4, 8 or 16) partial sums without selects, in the value order of
// kernels/reduce_scatter_order.h: one shuffle and one add per kept value and level (the select form
// took two selects more), then one lane per value stores it to dst[mask]. Each add is own +
// partner's, so the order is fixed (deterministic, the same for every V).
template <int V>
__device__ __forceinline__ void reduce_scatter_store(float (&v)[V], float* dst, int lane,
                                                     int mask) {
  reduce_scatter_halve<V, 0>(v);
#pragma unroll
  for (int k = reduce_scatter_levels<V>(); k < 5; ++k)
    v[0] += __shfl_xor_sync(0xffffffffu, v[0], 16 >> k);
  if (reduce_scatter_stores<V>(lane)) dst[mask] = v[0];
}

// The persistent GRU's kernel uses this; the clipped-ReLU fp32-math kernel still has the same
// loop inline: through this helper ptxas allocated its instantiations differently (batch tile 4,
// one chunk: 72 -> 80 registers with no register groups, 221 -> 222 with eight; a bf16 one 128 ->
// 100), which would need timing on the GPU before that tuned kernel takes it.
// One batch tile's products of every row group of the CTA, each warp-reduced into
// red[(g * warps + warp) * R * BT + value] (value r * BT + b, kernels/reduce_scatter_order.h):
// the first NRG groups from registers (w: [slot][chunk]), the rest from shared memory (wsm:
// [(g - NRG) * R + r][chunk][threads], loaded a group at a time).
template <int R, int BT, int NRG, int CH, class Chunk>
__device__ __forceinline__ void reduce_row_groups(const Chunk* w, const Chunk* wsm,
                                                  const float4 (&hv)[BT * CH], int groups,
                                                  float* red, int warps, int warp, int lane,
                                                  int mask, int tid, int threads) {
  constexpr int V = R * BT;
#pragma unroll
  for (int g = 0; g < NRG; ++g) {
    float acc[V];
    row_group_products<R, BT, CH>(w + g * R * CH, hv, acc);
    reduce_scatter_store<V>(acc, red + (g * warps + warp) * V, lane, mask);
  }
  for (int g = NRG; g < groups; ++g) {
    Chunk ws[R * CH];
#pragma unroll
    for (int i = 0; i < R * CH; ++i) ws[i] = wsm[((g - NRG) * R * CH + i) * threads + tid];
    float acc[V];
    row_group_products<R, BT, CH>(ws, hv, acc);
    reduce_scatter_store<V>(acc, red + (g * warps + warp) * V, lane, mask);
  }
}

// Streamed row groups (layers past what registers and shared memory hold): this thread's chunks
// of the CTA's streamed rows at wst[(row * CH + c) * threads + tid], row counted from the first
// streamed group, written by the same thread at the launch's start and read back from L2
// (ld.global.cg) every pass. They are read ahead in units of kStreamedAhead<R, CH> chunks: a whole
// row group where a row is at most 2 chunks, one row where it is wider (the GRU's backward-data, 6
// chunks: a group ahead would hold 96 registers more, and its kernels at batch tile 4 spilled).
template <int R, int CH>
constexpr int kStreamedAhead = CH > 2 ? CH : R* CH;
template <int R, int CH, class Chunk>
__device__ __forceinline__ void load_streamed_unit(const Chunk* wst, int unit,
                                                   Chunk (&wq)[kStreamedAhead<R, CH>], int tid,
                                                   int threads) {
  constexpr int A = kStreamedAhead<R, CH>;
#pragma unroll
  for (int c = 0; c < A; ++c) wq[c] = __ldcg(&wst[(int64_t{unit} * A + c) * threads + tid]);
}
// The products of streamed row groups [first, groups), reduced as reduce_row_groups does. wq holds
// the first unit on entry (loaded while the state was on its way); each next unit's loads go out
// before this unit's products, so one unit's L2 round trip hides behind the one before.
template <int R, int BT, int CH, class Chunk>
__device__ __forceinline__ void reduce_streamed_groups(const Chunk* wst,
                                                       Chunk (&wq)[kStreamedAhead<R, CH>],
                                                       const float4 (&hv)[BT * CH], int first,
                                                       int groups, float* red, int warps, int warp,
                                                       int lane, int mask, int tid, int threads) {
  constexpr int V = R * BT, A = kStreamedAhead<R, CH>, kUnits = R * CH / A;  // units a group
  const int last = (groups - first) * kUnits;
  for (int g = first; g < groups; ++g) {
    float acc[V];
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      Chunk ws[A];
#pragma unroll
      for (int c = 0; c < A; ++c) ws[c] = wq[c];
      const int next = (g - first) * kUnits + u + 1;
      if (next < last) load_streamed_unit<R, CH>(wst, next, wq, tid, threads);
      if constexpr (kUnits == 1) {
        row_group_products<R, BT, CH>(ws, hv, acc);
      } else {
        float row[BT];
        row_group_products<1, BT, CH>(ws, hv, row);
#pragma unroll
        for (int b = 0; b < BT; ++b) acc[u * BT + b] = row[b];
      }
    }
    reduce_scatter_store<V>(acc, red + (g * warps + warp) * V, lane, mask);
  }
}

}  // namespace ds2::kernels
