// The host side of the single-CTA kernel (kernels/persistent_rnn_single.h): which tilings it runs,
// how its threads cover the rows, what shared memory a CTA needs, and that it needs no workspace.
// No GPU needed: nothing is launched. tests/nn/cuda/persistent_rnn_test.cpp runs it against
// float64 (PersistentRnn/Fp32SingleCta.KernelMatchesFloat64/*).
#include "kernels/persistent_rnn_single.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace ds2::kernels {
namespace {

constexpr size_t kHopperSharedPerBlock = 227 * 1024;  // sm_90's opt-in limit a CTA

TEST(PersistentRnnSingle, RunsEveryHiddenSizeTo192AndBatchFour) {
  for (int h = 1; h <= kPrnnSingleMaxHidden; ++h)
    for (int b = 1; b <= kPrnnSingleMaxBatch; ++b)
      for (int dirs : {1, 2}) {
        const PrnnTiling t = prnn_single_tiling(h, b, dirs);
        const std::string where = "H " + std::to_string(h) + ", batch " + std::to_string(b);
        ASSERT_NE(prnn_single_kernel(t), nullptr) << where;
        if ((t.batch_tile == 2 && h > 128) || (t.batch_tile == 4 && h > 64)) {  // a cluster (below)
          EXPECT_EQ(t.ctas_per_direction, 8) << where;
          continue;
        }
        // Groups of 8 lanes own R rows each: every row owned, no warp without rows.
        const int r = prnn_single_rows_per_thread(h, t.batch_tile);
        EXPECT_TRUE(r == 2 || r == 4) << where;
        EXPECT_EQ(t.threads % 32, 0) << where;
        EXPECT_LE(t.threads, 1024) << where;
        EXPECT_GE(t.threads / 8 * r, h) << where;
        EXPECT_LT((t.threads - 32) / 8 * r, h) << where << ": a warp without rows";
        EXPECT_EQ(t.ctas(), dirs) << where;
        EXPECT_EQ(t.batch_tile, b <= 2 ? b : 4) << where;
        EXPECT_EQ(prnn_workspace_bytes(t), 0u) << where << ": the state lives in shared memory";
        EXPECT_LE(prnn_shared_bytes(t), kHopperSharedPerBlock) << where;
      }
}

TEST(PersistentRnnSingle, RefusesWhatItDoesNotRun) {
  EXPECT_EQ(prnn_single_kernel(prnn_single_tiling(193, 3, 1)), nullptr);
  EXPECT_EQ(prnn_single_kernel(prnn_single_tiling(64, 5, 1)), nullptr);
  const PrnnTiling t = prnn_single_tiling(60, 3, 1);
  ASSERT_NE(prnn_single_kernel(t), nullptr);
  auto without = [&](auto change) {
    PrnnTiling c = t;
    change(c);
    return prnn_single_kernel(c);
  };
  EXPECT_EQ(without([](PrnnTiling& c) { c.single_cta = false; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.bf16_weights = true; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.tensor_cores = true; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.tagged_exchange = true; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.batch_tile = 2; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.threads = 1024; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.ctas_per_direction = 2; }), nullptr);
  EXPECT_EQ(without([](PrnnTiling& c) { c.streamed_groups = 1; }), nullptr);
}

TEST(PersistentRnnSingle, ClustersRunBatchOneFrom193To512BatchTwoFrom129To384BatchFourFrom65To192) {
  for (int h = kPrnnSingleMaxHidden + 1; h <= kPrnnSingleClusterMaxHidden; ++h)
    for (int dirs : {1, 2}) {
      const PrnnTiling t = prnn_single_tiling(h, 1, dirs);
      const std::string where = "H " + std::to_string(h);
      ASSERT_NE(prnn_single_kernel(t), nullptr) << where;
      const int n = t.ctas_per_direction;
      EXPECT_EQ(n, h <= 384 ? 8 : 16) << where;
      EXPECT_EQ(t.ctas(), n * dirs) << where;
      // Every row owned, every CTA owns rows, 2 rows a thread in groups of 8 lanes.
      EXPECT_GE(n * t.rows_per_cta, h) << where;
      EXPECT_LT((n - 1) * t.rows_per_cta, h) << where << ": a CTA without rows";
      EXPECT_EQ(t.threads % 32, 0) << where;
      EXPECT_GE(t.threads / 8 * 2, t.rows_per_cta) << where;
      EXPECT_LT((t.threads - 32) / 8 * 2, t.rows_per_cta) << where << ": a warp without rows";
      EXPECT_EQ(prnn_workspace_bytes(t), 0u) << where << ": the state lives in shared memory";
      EXPECT_LE(prnn_shared_bytes(t), kHopperSharedPerBlock) << where;
    }
  // Batch 2: clusters of 8 at H 129-384.
  for (int h = 129; h <= 384; ++h) {
    const PrnnTiling t = prnn_single_tiling(h, 2, 2);
    const std::string where = "H " + std::to_string(h) + ", batch 2";
    ASSERT_NE(prnn_single_kernel(t), nullptr) << where;
    EXPECT_EQ(t.ctas_per_direction, 8) << where;
    EXPECT_EQ(t.batch_tile, 2) << where;
    EXPECT_LT(7 * t.rows_per_cta, h) << where << ": a CTA without rows";
    EXPECT_LE(prnn_shared_bytes(t), kHopperSharedPerBlock) << where;
  }
  // Batch 3-4: clusters of 8 at H 65-192, every CTA owning rows.
  for (int h = 65; h <= kPrnnSingleClusterMaxHiddenBatchTile4; ++h)
    for (int b : {3, 4}) {
      const PrnnTiling t = prnn_single_tiling(h, b, 2);
      const std::string where = "H " + std::to_string(h) + ", batch " + std::to_string(b);
      ASSERT_NE(prnn_single_kernel(t), nullptr) << where;
      EXPECT_EQ(t.ctas_per_direction, 8) << where;
      EXPECT_EQ(t.batch_tile, 4) << where;
      EXPECT_GE(8 * t.rows_per_cta, h) << where;
      EXPECT_LT(7 * t.rows_per_cta, h) << where << ": a CTA without rows";
      EXPECT_GE(t.threads / 8 * 2, t.rows_per_cta) << where;
      EXPECT_LT((t.threads - 32) / 8 * 2, t.rows_per_cta) << where << ": a warp without rows";
      EXPECT_LE(prnn_shared_bytes(t), kHopperSharedPerBlock) << where;
    }
  // Larger layers at batch tiles 2 and 4, and past H 512, have no cluster form.
  EXPECT_EQ(prnn_single_kernel(prnn_single_tiling(385, 2, 1)), nullptr);
  EXPECT_EQ(prnn_single_kernel(prnn_single_tiling(193, 3, 1)), nullptr);
  EXPECT_EQ(prnn_single_kernel(prnn_single_tiling(512, 3, 1)), nullptr);
  EXPECT_EQ(prnn_single_kernel(prnn_single_tiling(kPrnnSingleClusterMaxHidden + 1, 1, 1)), nullptr);
}

TEST(PersistentRnnSingle, SharedMemoryIsTheStateAndThreeStagedChunks) {
  // H 60, batch tile 4: state rows padded to 64 floats (2 float4 column groups a lane of 8),
  // chunks of 8 steps of the CTA's 60 rows. Two state buffers, then two chunks each of x, h and
  // y.
  const PrnnTiling t = prnn_single_tiling(60, 3, 2);
  EXPECT_EQ(prnn_single_shared_bytes(t), (2 * 4 * 64 + 3 * 2 * 8 * 4 * 60) * sizeof(float));
  EXPECT_EQ(prnn_shared_bytes(t), prnn_single_shared_bytes(t));
  // Batch 1: chunks of 32 steps of one row.
  const PrnnTiling one = prnn_single_tiling(192, 1, 1);
  EXPECT_EQ(prnn_single_shared_bytes(one), (2 + 3 * 2 * 32) * 192 * sizeof(float));
  // A cluster of 16 at H 512: the whole state, this CTA's 32 rows staged, two mbarriers.
  const PrnnTiling cluster = prnn_single_tiling(512, 1, 1);
  ASSERT_EQ(cluster.rows_per_cta, 32);
  EXPECT_EQ(prnn_single_shared_bytes(cluster),
            (2 * 512 + 3 * 2 * 32 * 32) * sizeof(float) + 2 * sizeof(uint64_t));
  // A cluster of 8 at H 100, batch tile 4: state rows padded to 128 (4 column groups rounded to
  // even), this CTA's 13 rows staged 8 steps at a time.
  const PrnnTiling four = prnn_single_tiling(100, 4, 1);
  ASSERT_EQ(four.rows_per_cta, 13);
  EXPECT_EQ(prnn_single_shared_bytes(four),
            (2 * 4 * 128 + 3 * 2 * 8 * 4 * 13) * sizeof(float) + 2 * sizeof(uint64_t));
}

}  // namespace
}  // namespace ds2::kernels
