// The per-step epilogue the tensor-core persistent RNN kernels share (version 3 and the cluster
// kernel): loading a step's epilogue inputs ahead of time, and turning the warps' partial sums of
// an output into the cell's output.
//
//   prnn_prefetch_epilogue(ep_next, ep_h, d, t, B, B, R, r0, H, len_s, backward, tid, tid / R,
//                          tid % R, threads);
//   out = prnn_cell_from_partials(red + b * pitch + m, red_warp, warps, x, h, backward, clip);
//   sum = prnn_sum_partials<16>(red + b * pitch + m, red_warp, 16);   // the sum alone (GRU)
#pragma once

#include <cstdint>

#include "kernels/async_copy.cuh"
#include "kernels/clipped_relu.cuh"

namespace ds2::kernels {

// Copies (cp.async, one commit group) step t's epilogue inputs of the CTA's rows [r0, r0 + R):
// x (pre or dL/dh) into dst[b * R + m] and, for backward-data, h into dst[h_offset + b * R + m],
// for the B batch rows; padded frames (t >= len[b]) and rows past H are not read. Row (t, b) is
// at t * batch_stride + b (batch_stride > B where the CTAs run a slice of the batch).
// (tid_b, tid_m) = (tid / R, tid % R), worked out once by the caller.
template <class Dir>
__device__ __forceinline__ void prnn_prefetch_epilogue(float* dst, int h_offset, const Dir& d,
                                                       int t, int B, int batch_stride, int R,
                                                       int r0, int H, const int* len, bool backward,
                                                       int tid, int tid_b, int tid_m, int threads) {
  int b = tid_b, m = tid_m;
  for (int o = tid; o < B * R; o += threads) {
    if (o != tid) b = o / R, m = o - b * R;
    const int k = r0 + m;
    if (k >= H || t >= len[b]) continue;
    const int64_t row = int64_t{t} * batch_stride + b;
    cp_async4(dst + o, d.x + row * d.ld_x + k);
    if (backward) cp_async4(dst + h_offset + o, d.h + row * d.ld_h + k);
  }
  cp_async_commit();
}

// The `warps` partial sums of one output at partial[w * warp_stride], added in warp order
// (deterministic, the same for every plan of a hidden size and kernel kind), or with kPairwise > 0
// (= warps, known at compile time) pairwise, neighbours first: a tree of log2(warps) adds where
// the warp order is a chain of `warps` dependent adds on the step's critical path (the fp32
// split).
template <int kPairwise = 0>
__device__ __forceinline__ float prnn_sum_partials(const float* partial, int warp_stride,
                                                   int warps) {
  if constexpr (kPairwise > 0) {
    float v[kPairwise];
#pragma unroll
    for (int w = 0; w < kPairwise; ++w) v[w] = partial[w * warp_stride];
#pragma unroll
    for (int width = 1; width < kPairwise; width *= 2)
#pragma unroll
      for (int w = 0; w + width < kPairwise; w += 2 * width) v[w] += v[w + width];
    return v[0];
  } else {
    float sum = 0.0f;
#pragma unroll 16
    for (int w = 0; w < warps; ++w) sum += partial[w * warp_stride];
    return sum;
  }
}

// One output of a step: its partial sums added (prnn_sum_partials), then the clipped ReLU of
// x + sum (forward) or its gradient given the forward's h (backward-data).
template <int kPairwise = 0>
__device__ __forceinline__ float prnn_cell_from_partials(const float* partial, int warp_stride,
                                                         int warps, float x, float h, bool backward,
                                                         float clip) {
  const float sum = prnn_sum_partials<kPairwise>(partial, warp_stride, warps);
  return backward ? clipped_relu_grad(h, x + sum, clip) : clipped_relu(x + sum, clip);
}

}  // namespace ds2::kernels
