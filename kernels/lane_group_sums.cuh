// A step's arithmetic in the single-CTA kernels (kernels/persistent_rnn_single.cu, the clipped-ReLU
// recurrence, and kernels/persistent_gru_single.cu, the GRU forward): a group of 8 adjacent lanes
// owns some rows, each lane a slice of the columns, and a row's sum is reduced over the 8 lanes.
// Their step loop is kernels/single_cta_steps.cuh.
//
//   float v[4];                                   // 4 row sums a lane, partial over its columns
//   lane_products<2, G, 2, 8, 1, false>(w, cur, q, v);  // 2 rows times 2 batch rows of the state
//   reduce_group_level<4, 4, 4>(v, lane);         // lane ends with v[0] whole: value
//   int value = first_group_value<4, 8>(lane);    //   number `value` of the 4
//   reduce_group_level<6, 6, 4, 3>(g, lane);      // 2 units of 3 (a GRU neuron's r, z, n): each
//   int unit = first_group_value<2, 8>(lane);     //   lane ends with g[0..3) of unit `unit`
#pragma once

namespace ds2::kernels {

// A lane's partial sums of a step: R rows of U (w, its slice of columns 4 (q + Q m) + e, m < G)
// times the BT batch rows of the state `cur` ({BT, 4 G Q} floats), read as float4s so that each
// value feeds R rows. v[r BT + b], or v[b R + r] with kBatchMajor; NA accumulators a sum, for ILP.
template <int R, int G, int BT, int Q, int NA, bool kBatchMajor>
__device__ __forceinline__ void lane_products(const float (&w)[R][G][4], const float* cur, int q,
                                              float (&v)[R * BT]) {
  constexpr int HP = 4 * G * Q;
  float acc[R * BT][NA];
#pragma unroll
  for (int u = 0; u < R * BT; ++u)
#pragma unroll
    for (int n = 0; n < NA; ++n) acc[u][n] = 0.0f;
#pragma unroll
  for (int m = 0; m < G; ++m)
#pragma unroll
    for (int b = 0; b < BT; ++b) {
      const float4 hv = *reinterpret_cast<const float4*>(cur + b * HP + 4 * (q + Q * m));
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float& t = acc[kBatchMajor ? b * R + r : r * BT + b][m % NA];
        t = fmaf(w[r][m][0], hv.x, t);
        t = fmaf(w[r][m][1], hv.y, t);
        t = fmaf(w[r][m][2], hv.z, t);
        t = fmaf(w[r][m][3], hv.w, t);
      }
    }
#pragma unroll
  for (int u = 0; u < R * BT; ++u) {
    v[u] = acc[u][0];
#pragma unroll
    for (int n = 1; n < NA; ++n) v[u] += acc[u][n];
  }
}

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

}  // namespace ds2::kernels
