// Dynamic loss scaling on the GPU engine: the scaled loss gradient, the unscaling folded into
// the clipping kernel pass and the norm read back give weights bit-identical to a run without
// scaling, and an absurd start halves step by step as the engine's own probe predicts (the
// same checks as tests/train/loss_scaling_test.cpp on the CPU).
#include <gtest/gtest.h>

#include "support/cuda_compare.h"
#include "support/loss_scaling_runs.h"
#include "support/temp_dir.h"

namespace ds2 {
namespace {

TEST(LossScalingCuda, WeightsBitIdenticalToARunWithoutScaling) {
  DS2_REQUIRE_GPU();
  TempDir temp;
  testing::expect_bit_identical_to_unscaled(temp.path(), "cuda");
}

TEST(LossScalingCuda, OverflowHalvesTheScaleUntilTrainingProceeds) {
  DS2_REQUIRE_GPU();
  TempDir temp;
  testing::expect_overflow_halvings(temp.path(), "cuda");
}

}  // namespace
}  // namespace ds2
