// The value order of the fp32-math persistent kernel's reduce-scatter
// (kernels/reduce_scatter_order.h), on the host: a simulation of the warp's data flow (which lanes'
// partial sums each position has gathered) shows every add combines the same value from disjoint
// lanes and each value ends summed over all 32 lanes in exactly one storing lane; and the
// exchange's writer puts every batch row where the lane that reads the column expects it. The
// kernel's sums themselves are checked on a GPU (tests/nn/cuda/persistent_rnn_test.cpp).
#include "kernels/reduce_scatter_order.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ds2::kernels {
namespace {

template <int V>
void check_reduce_scatter() {
  SCOPED_TRACE("V = " + std::to_string(V));
  // value[l][p]: the value index lane l's position p holds; lanes[l][p]: the lanes summed there.
  std::array<std::array<int, V>, 32> value{};
  std::array<std::array<uint32_t, V>, 32> lanes{};
  for (int l = 0; l < 32; ++l)
    for (int p = 0; p < V; ++p) {
      value[l][p] = p ^ reduce_scatter_mask<V>(l);
      lanes[l][p] = 1u << l;
    }
  // Halving levels: v[i] += partner's v[i + half], all lanes at once.
  for (int j = 0; j < reduce_scatter_levels<V>(); ++j) {
    const int half = V >> (j + 1), offset = 16 >> j;
    const auto before = lanes;
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < half; ++i) {
        const int partner = l ^ offset;
        ASSERT_EQ(value[l][i], value[partner][i + half]) << "lane " << l << " level " << j;
        ASSERT_EQ(before[l][i] & before[partner][i + half], 0u) << "a lane counted twice";
        lanes[l][i] = before[l][i] | before[partner][i + half];
      }
  }
  // The remaining levels add position 0 symmetrically.
  for (int offset = 16 >> reduce_scatter_levels<V>(); offset >= 1; offset /= 2) {
    const auto before = lanes;
    for (int l = 0; l < 32; ++l) {
      ASSERT_EQ(value[l][0], value[l ^ offset][0]);
      ASSERT_EQ(before[l][0] & before[l ^ offset][0], 0u);
      lanes[l][0] = before[l][0] | before[l ^ offset][0];
    }
  }
  std::vector<int> stored(V, 0);
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(lanes[l][0], 0xffffffffu) << "lane " << l << " misses lanes";
    if (reduce_scatter_stores<V>(l)) ++stored[value[l][0]];
  }
  for (int v = 0; v < V; ++v) EXPECT_EQ(stored[v], 1) << "value " << v;
}

TEST(ReduceScatterOrder, EveryValueIsSummedOverTheWarpAndStoredOnce) {
  check_reduce_scatter<4>();
  check_reduce_scatter<8>();
  check_reduce_scatter<16>();
}

// Batch tiles of BT rows (V = 4 BT values per row group): thread t reads columns
// 4 (t + c threads) .. + 3 for each chunk c, and at position i it holds batch row i ^ (m % BT).
// The writer of batch row b, column k must store it in exactly that row, whatever the thread
// count (a multiple of 32) and the chunks.
template <int BT>
void check_exchange_rows() {
  constexpr int V = 4 * BT;
  for (int threads : {32, 64, 96, 288, 512})
    for (int chunks : {1, 2})
      for (int t = 0; t < threads; ++t)
        for (int c = 0; c < chunks; ++c)
          for (int j = 0; j < 4; ++j) {
            const int k = 4 * (t + c * threads) + j;
            const int perm = reduce_scatter_mask<V>(t & 31) % BT;
            std::vector<int> seen(BT, 0);
            for (int b = 0; b < BT; ++b) {
              const int row = prnn_exchange_row<V, BT>(b, k);
              ASSERT_GE(row, 0);
              ASSERT_LT(row, BT);
              ++seen[row];
              EXPECT_EQ(row ^ perm, b) << "column " << k << ", thread " << t << " of " << threads;
            }
            for (int r = 0; r < BT; ++r) EXPECT_EQ(seen[r], 1);
          }
}

TEST(ReduceScatterOrder, TheExchangeHoldsEachColumnInItsReadersOrder) {
  check_exchange_rows<1>();
  check_exchange_rows<2>();
  check_exchange_rows<4>();
}

}  // namespace
}  // namespace ds2::kernels
