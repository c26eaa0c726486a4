// Device pieces the single-CTA kernels share (kernels/persistent_rnn_single.cu, the clipped-ReLU
// recurrence, and kernels/persistent_gru_single.cu, the GRU forward): a group of 8 adjacent lanes
// owns some rows, each lane a slice of the columns, and a row's sum is reduced over the 8 lanes;
// their epilogues' staged chunks are walked without run-time divisions.
//
//   float v[4];                                   // 4 row sums a lane, partial over its columns
//   reduce_group_level<4, 4, 4>(v, lane);         // lane ends with v[0] whole: value
//   int value = first_group_value<4, 8>(lane);    //   number `value` of the 4
//   reduce_group_level<6, 6, 4, 3>(g, lane);      // 2 units of 3 (a GRU neuron's r, z, n): each
//   int unit = first_group_value<2, 8>(lane);     //   lane ends with g[0..3) of unit `unit`
//   for (ChunkWalk e(threadIdx.x, blockDim.x, B, H); e.i < steps; e.next(B, H)) ...
#pragma once

namespace ds2::kernels {

// Reduces v[0, VP) over lane bits O, O / 2, ..., 1: halving while more than K values are kept
// (the upper half where the level's bit is set), adding whole after. A lane ends with
// max(K, VP / (2 O)) values: with K = 1, value first_group_value<VP, 2 O>(lane) on; with K > 1
// (units of K values, VP / K of them a power of two), unit first_group_value<VP / K, 2 O>(lane).
// Recursive per level so that every index is a constant (a loop with level-dependent bounds left
// v in local memory).
template <int VP, int N, int O, int K = 1>
__device__ __forceinline__ void reduce_group_level(float (&v)[VP], int lane) {
  if constexpr (O >= 1) {
    if constexpr (N > K) {
      // Bit masks, not `upper ? v[k] : v[k + N / 2]`, which the compiler may turn into an index.
      const int upper = (lane & O) != 0 ? -1 : 0;
#pragma unroll
      for (int k = 0; k < N / 2; ++k) {
        const int lo = __float_as_int(v[k]), hi = __float_as_int(v[k + N / 2]);
        const float send = __int_as_float((lo & upper) | (hi & ~upper));
        const float keep = __int_as_float((hi & upper) | (lo & ~upper));
        v[k] = keep + __shfl_xor_sync(0xffffffffu, send, O);
      }
      reduce_group_level<VP, N / 2, O / 2, K>(v, lane);
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) v[k] += __shfl_xor_sync(0xffffffffu, v[k], O);
      reduce_group_level<VP, N, O / 2, K>(v, lane);
    }
  }
}
template <int VP, int Q>
__device__ __forceinline__ int first_group_value(int lane) {
  int index = 0;
#pragma unroll
  for (int n = VP, o = Q / 2; n > 1 && o >= 1; n >>= 1, o >>= 1)
    if (lane & o) index += n / 2;
  return index;
}

// A chunk's elements e = threadIdx.x, + blockDim.x, ... of its steps * B * H, walked as (step i,
// batch row b, column r) by adding the stride's own (i, b, r): a division by a run-time divisor
// is a chain of ~20 instructions, and three an element made the chunk loops cost 190-840 cycles
// a step (kernels/NOTES.md, session 68).
struct ChunkWalk {
  int i, b, r;     // the element
  int di, db, dr;  // the stride, blockDim.x
  __device__ ChunkWalk(int start, int stride, int B, int H)
      : i(start / (B * H)),
        b(start / H % B),
        r(start % H),
        di(stride / (B * H)),
        db(stride / H % B),
        dr(stride % H) {}
  __device__ void next(int B, int H) {
    i += di;
    b += db;
    r += dr;
    if (r >= H) {
      r -= H;
      ++b;
    }
    if (b >= B) {
      b -= B;
      ++i;
    }
  }
};

}  // namespace ds2::kernels
