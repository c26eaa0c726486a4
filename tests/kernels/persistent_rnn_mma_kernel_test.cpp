// Which tensor-core kernel a tiling gets (kernels/persistent_rnn_mma.cu, prnn_mma_kernel), on the
// host: none past 16 k-tiles a warp, whatever the batch tile (a kernel of fewer k-tiles would leave
// the state's last k-tiles unread), but the bf16 GRU's backward-data to 22 (18 at four n-tiles),
// on the kernels of 18, 20 and 22.
#include <gtest/gtest.h>

#include <string>

#include "kernels/persistent_rnn_mma.h"
#include "support/mma_tiling.h"

namespace ds2::kernels {
namespace {

PrnnTiling bf16_tiling(int hidden, int batch_tile, int rows, bool tags) {
  PrnnTiling t = tagged_mma_tiling(hidden, batch_tile, rows, (hidden + rows - 1) / rows);
  t.batch_tile = batch_tile;
  t.bf16_weights = true;
  t.tagged_exchange = tags;
  return t;
}

// The bf16 GRU's backward-data at 16 neurons a CTA (rows are neurons, K = 3H).
PrnnTiling gru_backward(int hidden, int batch_tile) {
  PrnnTiling t = bf16_tiling(hidden, batch_tile, 16, true);
  t.gru = true;
  t.gru_backward = true;
  return t;
}

TEST(PersistentRnnMmaKernel, NoneFromSeventeenKTilesAWarp) {
  // H 4096: 16 k-tiles a warp (two m-tiles' kernels are built there); H 4097: 17.
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(4096), 16);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(4097), 17);
  EXPECT_NE(prnn_mma_kernel(bf16_tiling(4096, 8, 32, false)), nullptr);
  for (int hidden : {4097, 4224, 6000})
    for (int batch_tile : {8, 16, 32, 64})
      for (int rows : {16, 32, 48})
        for (bool tags : {false, true})
          EXPECT_EQ(prnn_mma_kernel(bf16_tiling(hidden, batch_tile, rows, tags)), nullptr)
              << "H " << hidden << ", batch tile " << batch_tile << ", " << rows << " rows, "
              << (tags ? "tagged" : "step barrier");
}

TEST(PersistentRnnMmaKernel, Bf16GruBackwardPastSixteenKTilesRunsEighteenToTwentyTwo) {
  // K = 3H: H 1194 14 k-tiles a warp, H 1400 17, H 1536 18, H 1600 19, H 1706 20, H 1800 22,
  // H 1877 22, H 1878 23.
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1194), 14);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1400), 17);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1536), 18);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1600), 19);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1706), 20);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1800), 22);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1877), 22);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1878), 23);
  for (int batch_tile : {8, 16}) {
    SCOPED_TRACE("batch tile " + std::to_string(batch_tile));
    const void* eighteen = prnn_mma_kernel(gru_backward(1536, batch_tile));
    const void* twenty = prnn_mma_kernel(gru_backward(1706, batch_tile));
    const void* twenty_two = prnn_mma_kernel(gru_backward(1877, batch_tile));
    ASSERT_NE(eighteen, nullptr);
    ASSERT_NE(twenty, nullptr);
    ASSERT_NE(twenty_two, nullptr);
    EXPECT_NE(eighteen, twenty);
    EXPECT_NE(twenty, twenty_two);
    EXPECT_EQ(prnn_mma_kernel(gru_backward(1400, batch_tile)), eighteen);
    EXPECT_EQ(prnn_mma_kernel(gru_backward(1600, batch_tile)), twenty);
    EXPECT_EQ(prnn_mma_kernel(gru_backward(1800, batch_tile)), twenty_two);
    EXPECT_EQ(prnn_mma_kernel(gru_backward(1878, batch_tile)), nullptr);
  }
  // Four n-tiles: 14's own kernel, and to 18 (20 would pass 227 KB of shared memory).
  EXPECT_NE(prnn_mma_kernel(gru_backward(1194, 32)), nullptr);
  EXPECT_NE(prnn_mma_kernel(gru_backward(1194, 32)), prnn_mma_kernel(gru_backward(1300, 32)));
  EXPECT_EQ(prnn_mma_kernel(gru_backward(1400, 32)), prnn_mma_kernel(gru_backward(1536, 32)));
  EXPECT_NE(prnn_mma_kernel(gru_backward(1536, 32)), nullptr);
  EXPECT_EQ(prnn_mma_kernel(gru_backward(1600, 32)), nullptr);
  // Not the GRU's forward or the clipped ReLU at that K.
  PrnnTiling forward = gru_backward(1536, 8);
  forward.gru_backward = false;
  forward.hidden = 3 * 1536;
  EXPECT_EQ(prnn_mma_kernel(forward), nullptr);
  EXPECT_EQ(prnn_mma_kernel(bf16_tiling(3 * 1536, 8, 16, true)), nullptr);
}

}  // namespace
}  // namespace ds2::kernels
