// The host side of the single-CTA GRU forward (kernels/persistent_gru_single.h): which tilings it
// runs, how its threads cover the neurons and what shared memory a CTA needs. No GPU needed:
// nothing is launched. tests/nn/cuda/persistent_gru_test.cpp runs it against float64
// (PersistentGru.SingleCtaForwardMatchesFloat64, and through the plans).
#include "kernels/persistent_gru_single.h"

#include <gtest/gtest.h>

#include <string>

namespace ds2::kernels {
namespace {

constexpr size_t kHopperSharedPerBlock = 227 * 1024;  // sm_90's opt-in limit a CTA

TEST(PersistentGruSingle, RunsEveryHiddenSizeToItsBatchTilesLimit) {
  EXPECT_EQ(pgru_single_max_hidden(1), 384);
  EXPECT_EQ(pgru_single_max_hidden(2), 320);
  EXPECT_EQ(pgru_single_max_hidden(4), 192);
  for (int b = 1; b <= kPgruSingleMaxBatch; ++b)
    for (int h = 1; h <= pgru_single_max_hidden(pgru_single_batch_tile(b)); ++h)
      for (int dirs : {1, 2}) {
        const PgruSingleTiling t = pgru_single_tiling(h, b, dirs);
        const std::string where = "H " + std::to_string(h) + ", batch " + std::to_string(b);
        ASSERT_NE(pgru_single_kernel(t), nullptr) << where;
        EXPECT_EQ(t.batch_tile, b == 3 ? 4 : b) << where;
        EXPECT_EQ(t.ctas(), dirs * t.ctas_per_direction) << where;
        // One CTA to H 32, clusters of 8 to H 128 and of 16 past it: at most 24 neurons a CTA.
        EXPECT_EQ(t.ctas_per_direction, h <= 32 ? 1 : h <= 128 ? 8 : 16) << where;
        EXPECT_LE(t.neurons_per_cta, 32) << where;
        if (h > 32) EXPECT_LE(t.neurons_per_cta, 24) << where;
        // 8 lanes a neuron: every neuron owned, no warp without neurons (a cluster's last CTAs
        // may own none: H 33 on 8 CTAs of 5).
        EXPECT_GE(t.neurons_per_cta * t.ctas_per_direction, h) << where;
        EXPECT_EQ(t.threads % 32, 0) << where;
        EXPECT_GE(t.threads, 8 * t.neurons_per_cta) << where;
        EXPECT_LT(t.threads - 32, 8 * t.neurons_per_cta) << where << ": a warp without neurons";
        EXPECT_LE(pgru_single_shared_bytes(t), kHopperSharedPerBlock) << where;
      }
}

TEST(PersistentGruSingle, RefusesWhatItDoesNotRun) {
  EXPECT_EQ(pgru_single_kernel(pgru_single_tiling(385, 1, 1)), nullptr);
  EXPECT_EQ(pgru_single_kernel(pgru_single_tiling(321, 2, 1)), nullptr);
  EXPECT_EQ(pgru_single_kernel(pgru_single_tiling(kPgruSingleMaxHiddenBatchTile4 + 1, 3, 1)),
            nullptr);
  EXPECT_EQ(pgru_single_kernel(pgru_single_tiling(64, 5, 1)), nullptr);
  // Cluster sizes other than the measured choice are not instantiated.
  EXPECT_EQ(pgru_single_kernel(pgru_single_tiling(300, 1, 1, 8)), nullptr);
  EXPECT_EQ(pgru_single_kernel(pgru_single_tiling(128, 1, 1, 4)), nullptr);
  EXPECT_EQ(pgru_single_kernel(pgru_single_tiling(64, 2, 1, 1)), nullptr);
  const PgruSingleTiling t = pgru_single_tiling(100, 2, 1);
  ASSERT_NE(pgru_single_kernel(t), nullptr);
  auto without = [&](auto change) {
    PgruSingleTiling c = t;
    change(c);
    return pgru_single_kernel(c);
  };
  EXPECT_EQ(without([](PgruSingleTiling& c) { c.batch_tile = 1; }), nullptr);
  EXPECT_EQ(without([](PgruSingleTiling& c) { c.batch_tile = 4; }), nullptr);
  EXPECT_EQ(without([](PgruSingleTiling& c) { c.max_batch = 5; }), nullptr);
  EXPECT_EQ(without([](PgruSingleTiling& c) { c.threads = 1024; }), nullptr);
  EXPECT_EQ(without([](PgruSingleTiling& c) { c.neurons_per_cta = 20; }), nullptr);
  EXPECT_EQ(without([](PgruSingleTiling& c) { c.directions = 3; }), nullptr);
}

}  // namespace
}  // namespace ds2::kernels
