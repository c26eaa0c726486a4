// The fp32 split's state exchange layout (kernels/persistent_rnn_mma.h), on the host: where the
// owner of batch row b and element k writes its hi and lo halves (prnn_split_state_half) must be
// where the reader expects them. A warp w reads pieces [w ppw, w ppw + ppw), piece p holding its
// k-tiles 2p (words .x, .y) and 2p + 1 (.z, .w); lane 4 g + q takes B-fragment rows 2q, 2q + 1
// (its first word of a k-tile) and 2q + 8, 2q + 9 (the second) of column g, hi halves in columns
// 0-3 and lo halves in 4-7. Every place is written once and lies inside one parity of the
// exchange, for every hidden size the kernels take.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/persistent_rnn_mma.h"

namespace ds2::kernels {
namespace {

struct ReaderView {
  int k_tile, row, column;  // what the reader multiplies at this place
  int warp_k_tile;          // the k-tile's place in the reading warp's share
};

// The reader's side of a 16-bit place, decoded from the layout the kernel's loads and its
// fragment selection assume.
ReaderView reader_view(int half_index, int kpw) {
  const int piece = half_index / 256, lane = half_index / 8 % 32, word = half_index / 2 % 4;
  const int warp = piece / prnn_split_pieces_per_warp(kpw);
  const int p = piece % prnn_split_pieces_per_warp(kpw);
  const int warp_k_tile = 2 * p + word / 2;
  const int row = 8 * (word % 2) + 2 * (lane % 4) + half_index % 2;
  return {warp * kpw + warp_k_tile, row, lane / 4, warp_k_tile};
}

TEST(PersistentRnnSplitLayout, EveryHalfSitsWhereItsReaderTakesIt) {
  int checked = 0;
  for (int H = 1; H <= 3200; H += (H < 64 ? 1 : 13)) {
    const int k_tiles = prnn_mma_k_tiles(H), kpw = prnn_mma_k_tiles_per_warp(H);
    const int parity_halves = k_tiles * 32 * 4 * 2;  // one n-tile of 32-bit words, in halves
    std::vector<char> written(parity_halves, 0);
    for (int b = 0; b < 4; ++b)
      for (int k = 0; k < 16 * k_tiles; ++k)
        for (const bool lo : {false, true}) {
          const int at = prnn_split_state_half(b, k, kpw) + (lo ? kPrnnSplitLoHalves : 0);
          ASSERT_GE(at, 0) << "H " << H;
          ASSERT_LT(at, parity_halves) << "H " << H << ", b " << b << ", k " << k;
          ASSERT_EQ(written[at], 0) << "H " << H << ": two values at " << at;
          written[at] = 1;
          const ReaderView v = reader_view(at, kpw);
          ASSERT_EQ(v.k_tile, k / 16) << "H " << H << ", b " << b << ", k " << k;
          ASSERT_EQ(v.row, k % 16) << "H " << H << ", b " << b << ", k " << k;
          ASSERT_EQ(v.column, b + (lo ? 4 : 0)) << "H " << H << ", b " << b << ", k " << k;
          // the reading warp holds this k-tile's weights (its share is kpw k-tiles)
          ASSERT_LT(v.warp_k_tile, kpw) << "H " << H << ", b " << b << ", k " << k;
          ++checked;
        }
  }
  EXPECT_GT(checked, 1000000);
}

}  // namespace
}  // namespace ds2::kernels
