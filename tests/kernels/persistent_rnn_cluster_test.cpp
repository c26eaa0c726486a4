// The host side of the cluster kernel (kernels/persistent_rnn_cluster.h): which tilings it runs,
// what shared memory a CTA needs, and that it needs no workspace. No GPU needed: nothing is
// launched. tests/nn/cuda/persistent_rnn_test.cpp runs it (bit for bit against version 3).
#include "kernels/persistent_rnn_cluster.h"

#include <gtest/gtest.h>

#include "kernels/persistent_rnn_mma.h"

namespace ds2::kernels {
namespace {

TEST(PersistentRnnCluster, RunsUpToFourTilesPerCtaAndBatchEight) {
  // 1 m-tile on 3 CTAs, 2 on 16, 4 on 16 (the largest: H 1024), one and two directions.
  for (int h : {37, 200, 512, 700, 1000, 1024})
    for (int b : {1, 4, 8})
      for (int dirs : {1, 2}) {
        const PrnnTiling t = prnn_cluster_tiling(h, b, dirs);
        EXPECT_NE(prnn_cluster_kernel(t), nullptr) << "H " << h << ", batch " << b;
        EXPECT_LE(t.ctas_per_direction, kPrnnClusterMaxCtas);
        EXPECT_EQ(prnn_workspace_bytes(t), 0u) << "the exchange lives in shared memory";
      }
  EXPECT_EQ(prnn_cluster_tiling(37, 1, 1).ctas_per_direction, 3);
  EXPECT_EQ(prnn_cluster_tiling(1024, 1, 1).ctas_per_direction, 16);
  EXPECT_EQ(prnn_cluster_tiling(1000, 8, 2).rows_per_cta, 64);  // 63 k-tiles: 4 per warp
  EXPECT_EQ(prnn_cluster_tiling(200, 8, 2).rows_per_cta, 16);
}

TEST(PersistentRnnCluster, RefusesWhatItDoesNotRun) {
  // H 1152 would need 5 m-tiles per CTA (their A fragments spill): no kernel.
  EXPECT_EQ(prnn_cluster_kernel(prnn_cluster_tiling(1152, 4, 1)), nullptr);
  PrnnTiling t = prnn_cluster_tiling(512, 4, 1);
  ASSERT_NE(prnn_cluster_kernel(t), nullptr);
  auto without = [&](auto change) {
    PrnnTiling c = t;
    change(c);
    return prnn_cluster_kernel(c);
  };
  EXPECT_EQ(without([](PrnnTiling& c) { c.cluster = false; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.bf16_weights = false; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.max_batch = 9; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.batch_tile = 16; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.threads = 256; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.ctas_per_direction = 15; }), nullptr);  // rows left out
  EXPECT_EQ(without([](PrnnTiling& c) { c.rows_per_cta = 48; }), nullptr);  // not the K split's
}

TEST(PersistentRnnCluster, SharedMemoryIsTheExchangeReductionAndEpilogue) {
  // H 1000: 63 k-tiles, 4 m-tiles (64 rows) on each of 16 CTAs.
  const PrnnTiling t = prnn_cluster_tiling(1000, 8, 1);
  const size_t exchange = 2 * 16 * 4 * 32 * 4 * 2;  // [2][ctas x 4 k-tiles][32 lanes][4] bf16
  const size_t reduction = 16 * 8 * (64 + 4) * 4;   // [16 warps][8 columns][64 rows + 4] fp32
  const size_t epilogue = 2 * 2 * 8 * 64 * 4;       // [2 steps][x | h][8][64] fp32
  const size_t lengths = 8 * 4;
  EXPECT_EQ(prnn_cluster_shared_bytes(t), exchange + reduction + epilogue + lengths);
  EXPECT_EQ(prnn_shared_bytes(t), prnn_cluster_shared_bytes(t));
}

}  // namespace
}  // namespace ds2::kernels
