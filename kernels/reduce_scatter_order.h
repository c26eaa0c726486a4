// The order of values in the fp32-math persistent kernel's warp reduce-scatter
// (kernels/persistent_rnn.cu), on the host as on the device, so that the rules that make it add
// the right values are checked on the host (tests/kernels/reduce_scatter_order_test.cpp).
//
//   const int m = reduce_scatter_mask<16>(lane);   // lane's position p holds the partial of p ^ m
//   ... one shuffle + add per kept position and level ...
//   if (reduce_scatter_stores<16>(lane)) dst[m] = v[0];
//   xout[prnn_exchange_row<16, 4>(b, k) * hpad + k] = h;  // where column k's reader wants row b
//
// A warp sums V partial values (V = 4, 8 or 16) over its 32 lanes. Halving level j (j < log2 V)
// pairs lanes l and l ^ (16 >> j): both keep positions [0, V >> (j + 1)) and add the partner's
// positions [V >> (j + 1), V >> j). Both sides add the same value there when lane l's position p
// holds value p ^ m(l), m(l) having bit V >> (j + 1) set exactly when lane bit 16 >> j is: no
// selects are needed to pick the halves. Position 0 then holds value m(l); the remaining levels
// (offsets below 32 / V) add it over the other lanes, and one lane per value stores it.
#pragma once

#include "core/bf16.h"  // DS2_HOST_DEVICE

namespace ds2::kernels {

// Halving levels: log2 V.
template <int V>
DS2_HOST_DEVICE constexpr int reduce_scatter_levels() {
  static_assert(V == 4 || V == 8 || V == 16, "V: a power of two from 4 to 16");
  return V == 16 ? 4 : V == 8 ? 3 : 2;
}

// m(lane): bit V >> (j + 1) for each lane bit 16 >> j of the halving levels (V / 8 and V / 16
// are 0 where V has fewer levels).
template <int V>
DS2_HOST_DEVICE inline int reduce_scatter_mask(int lane) {
  static_assert(reduce_scatter_levels<V>() >= 2, "V: a power of two from 4 to 16");
  return ((lane & 16) ? V / 2 : 0) | ((lane & 8) ? V / 4 : 0) | ((lane & 4) ? V / 8 : 0) |
         ((lane & 2) ? V / 16 : 0);
}

// Whether `lane` stores its value m(lane) after the reduction: the lanes whose bits below the
// halving offsets are clear, one per value.
template <int V>
DS2_HOST_DEVICE inline bool reduce_scatter_stores(int lane) {
  return (lane & (32 / V - 1)) == 0;
}

// The row of a batch tile (BT rows; V = 4 BT partial sums per row group) where the exchange
// stores batch row b of column k: the thread reading column k is lane (k / 4) mod 32 of its warp
// (a thread reads 4 columns at a time and threads come in whole warps), and it holds batch row
// i ^ (m % BT) at position i.
template <int V, int BT>
DS2_HOST_DEVICE inline int prnn_exchange_row(int b, int k) {
  return b ^ (reduce_scatter_mask<V>((k >> 2) & 31) % BT);
}

}  // namespace ds2::kernels
