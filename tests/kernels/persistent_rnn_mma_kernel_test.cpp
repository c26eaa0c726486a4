// Which tensor-core kernel a tiling gets (kernels/persistent_rnn_mma.cu, prnn_mma_kernel), on the
// host: none past 16 k-tiles a warp, whatever the batch tile (a kernel of fewer k-tiles would leave
// the state's last k-tiles unread), but the bf16 GRU's backward-data to 22 at one and two n-tiles;
// and that pass at four n-tiles runs 16's kernel at 13-14 k-tiles a warp.
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

// The bf16 GRU's forward at 16 neurons a CTA (48 rows: three gates; K = H).
PrnnTiling gru_forward(int hidden, int batch_tile) {
  PrnnTiling t = bf16_tiling(hidden, batch_tile, 48, true);
  t.gru = true;
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
  // K = 3H: H 1100 13 k-tiles a warp, H 1194 14, H 1300 16, H 1400 17, H 1536 18, H 1600 19,
  // H 1706 20, H 1800 22, H 1877 22, H 1878 23.
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1100), 13);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1194), 14);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1300), 16);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1400), 17);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1536), 18);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1600), 19);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1706), 20);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1800), 22);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1877), 22);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(3 * 1878), 23);
  // One and two n-tiles (sets of 8 and 16 rows): each its own 18, 20 and 22, each for the
  // k-tiles up to it; past 22 one n-tile has 24's (below), two none.
  const void* one_tile[3] = {};
  for (const int rows : {8, 16}) {
    SCOPED_TRACE("sets of " + std::to_string(rows) + " rows");
    const void* eighteen = prnn_mma_kernel(gru_backward(1536, rows));
    const void* twenty = prnn_mma_kernel(gru_backward(1706, rows));
    const void* twenty_two = prnn_mma_kernel(gru_backward(1877, rows));
    ASSERT_NE(eighteen, nullptr);
    ASSERT_NE(twenty, nullptr);
    ASSERT_NE(twenty_two, nullptr);
    EXPECT_NE(eighteen, twenty);
    EXPECT_NE(twenty, twenty_two);
    EXPECT_EQ(prnn_mma_kernel(gru_backward(1400, rows)), eighteen);
    EXPECT_EQ(prnn_mma_kernel(gru_backward(1600, rows)), twenty);
    EXPECT_EQ(prnn_mma_kernel(gru_backward(1800, rows)), twenty_two);
    const void* past = prnn_mma_kernel(gru_backward(1878, rows));
    if (rows == 8) {
      EXPECT_NE(past, twenty_two);
      one_tile[0] = eighteen, one_tile[1] = twenty, one_tile[2] = twenty_two;
    } else {
      EXPECT_EQ(past, nullptr);
      EXPECT_NE(eighteen, one_tile[0]);
      EXPECT_NE(twenty, one_tile[1]);
      EXPECT_NE(twenty_two, one_tile[2]);
    }
  }
  // Four n-tiles: 13-14 k-tiles run 16's kernel (14's spilled), whose fragments' shared memory
  // follows its 16 k-tiles; none past 16 (18 was slower than the GEMM recurrence).
  const void* sixteen = prnn_mma_kernel(gru_backward(1300, 32));
  ASSERT_NE(sixteen, nullptr);
  EXPECT_EQ(prnn_mma_kernel(gru_backward(1100, 32)), sixteen);
  EXPECT_EQ(prnn_mma_kernel(gru_backward(1194, 32)), sixteen);
  EXPECT_EQ(prnn_mma_shared_bytes(gru_backward(1100, 32)),
            prnn_mma_shared_bytes(gru_backward(1300, 32)));
  EXPECT_EQ(prnn_mma_kernel(gru_backward(1400, 32)), nullptr);
  // Two n-tiles have 14's own kernel.
  const void* fourteen = prnn_mma_kernel(gru_backward(1100, 16));
  ASSERT_NE(fourteen, nullptr);
  EXPECT_NE(fourteen, prnn_mma_kernel(gru_backward(1300, 16)));
  // Not the GRU's forward or the clipped ReLU at that K.
  PrnnTiling forward = gru_backward(1536, 8);
  forward.gru_backward = false;
  forward.hidden = 3 * 1536;
  EXPECT_EQ(prnn_mma_kernel(forward), nullptr);
  EXPECT_EQ(prnn_mma_kernel(bf16_tiling(3 * 1536, 8, 16, true)), nullptr);
}

TEST(PersistentRnnMmaKernel, Bf16GruForwardsThatSpillInTheirProloguesOnly) {
  // 48 rows (16 neurons) a CTA, 6 k-tiles a warp (H 1321-1536), one set of 32 batch rows.
  const PrnnTiling t = gru_forward(1536, 32);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(1536), 6);
  EXPECT_NE(prnn_mma_kernel(t), nullptr);
  EXPECT_EQ(prnn_mma_allowed_local_bytes(t), 8u);
  // And `<3, 8>` in sets of 16 rows (H 1537-2048), within the shared memory an SM has; no other
  // kernel: sets of 16 rows at 6 k-tiles, sets of 32 at 5, backward-data past 16 k-tiles, the
  // fp32-math kernel (the plans ask of every tiling).
  const PrnnTiling eight = gru_forward(1700, 16);
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(1700), 7);
  EXPECT_NE(prnn_mma_kernel(eight), nullptr);
  EXPECT_EQ(prnn_mma_allowed_local_bytes(eight), 8u);
  EXPECT_LE(prnn_mma_shared_bytes(eight), 227u * 1024);
  EXPECT_EQ(prnn_mma_allowed_local_bytes(gru_forward(1536, 16)), 0u);
  EXPECT_EQ(prnn_mma_allowed_local_bytes(gru_forward(1280, 32)), 0u);
  EXPECT_EQ(prnn_mma_allowed_local_bytes(gru_backward(1536, 32)), 0u);
  PrnnTiling fp32_math = t;
  fp32_math.tensor_cores = false;
  EXPECT_EQ(prnn_mma_allowed_local_bytes(fp32_math), 0u);
}

TEST(PersistentRnnMmaKernel, Bf16GruBackwardInSetsOf32KeepsFragmentsThatSpillInThePrologueOnly) {
  // K = 3H: sets of 32 rows at 10 and 12 k-tiles a warp keep 2 (H 800, 1024), at 16 none (H 1300).
  EXPECT_EQ(prnn_mma_allowed_local_bytes(gru_backward(800, 32)), 8u);
  EXPECT_EQ(prnn_mma_allowed_local_bytes(gru_backward(1024, 32)), 8u);
  EXPECT_EQ(prnn_mma_allowed_local_bytes(gru_backward(1300, 32)), 0u);
  EXPECT_LT(prnn_mma_shared_bytes(gru_backward(1024, 32)),
            prnn_mma_shared_bytes(gru_backward(1100, 32)));
  // Sets of 8 rows spill nothing: keeping more there measured no faster (session 64).
  for (const int h : {640, 1024, 1194, 1365, 1800})
    EXPECT_EQ(prnn_mma_allowed_local_bytes(gru_backward(h, 8)), 0u) << "H " << h;
}

TEST(PersistentRnnMmaKernel, Bf16GruBackwardOfH2048InSetsOf8) {
  // K = 3H: 23-24 k-tiles a warp (H 1878-2048) on 24's kernel in sets of 8 rows, its fragments all
  // in shared memory within what an SM has, its one spilled register allowed; none in sets of 16.
  for (const int h : {1900, 2048}) {
    SCOPED_TRACE("H " + std::to_string(h));
    const PrnnTiling t = gru_backward(h, 8);
    EXPECT_NE(prnn_mma_kernel(t), nullptr);
    EXPECT_EQ(prnn_mma_bf16_shared_k_tiles(t), 24);
    EXPECT_LE(prnn_mma_shared_bytes(t), 227u * 1024);
    EXPECT_EQ(prnn_mma_allowed_local_bytes(t), 8u);
    EXPECT_EQ(prnn_mma_kernel(gru_backward(h, 16)), nullptr);
  }
  EXPECT_EQ(prnn_mma_kernel(gru_backward(2100, 8)), nullptr);
}

TEST(PersistentRnnMmaKernel, Bf16GruForwardInSetsOf16AtFiveKTilesKeepsThree) {
  // H 1025-1280 at 16 neurons a CTA (48 rows), 5 k-tiles a warp, sets of 16 rows.
  PrnnTiling t = tagged_mma_tiling(1200, 16, 48, 75);
  t.bf16_weights = true;
  t.gru = true;
  t.batch_tile = 16;
  ASSERT_EQ(prnn_mma_k_tiles_per_warp(1200), 5);
  EXPECT_NE(prnn_mma_kernel(t), nullptr);
  EXPECT_EQ(prnn_mma_bf16_shared_k_tiles(t), 2);
  EXPECT_EQ(prnn_mma_allowed_local_bytes(t), 8u);
}

}  // namespace
}  // namespace ds2::kernels
