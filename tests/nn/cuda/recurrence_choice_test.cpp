// The measured rules between the persistent kernels and the GEMM recurrence
// (nn/cuda/recurrence_choice.h) at their edges: pure functions of the layer's shape and batch, so
// they run without a GPU. The measurements behind each edge sit beside the rule.
#include "nn/cuda/recurrence_choice.h"

#include <gtest/gtest.h>

namespace ds2 {
namespace {

TEST(RecurrenceChoice, GruFmaMaxBatchByPrecisionSizeAndDirections) {
  // bf16: the forward past 8; backward-data past 16 up to H 1024, past 8 above.
  for (int directions : {1, 2}) {
    EXPECT_EQ(gru_fma_max_batch(Precision::kBf16, 1024, directions, false), 8);
    EXPECT_EQ(gru_fma_max_batch(Precision::kBf16, 1024, directions, true), 16);
    EXPECT_EQ(gru_fma_max_batch(Precision::kBf16, 1025, directions, true), 8);
  }
  // fp32, one direction: 28 to H 768, 32 to H 1024, 40 above; both passes alike.
  for (bool backward : {false, true}) {
    EXPECT_EQ(gru_fma_max_batch(Precision::kFp32, 256, 1, backward), 28);
    EXPECT_EQ(gru_fma_max_batch(Precision::kFp32, 768, 1, backward), 28);
    EXPECT_EQ(gru_fma_max_batch(Precision::kFp32, 769, 1, backward), 32);
    EXPECT_EQ(gru_fma_max_batch(Precision::kFp32, 1024, 1, backward), 32);
    EXPECT_EQ(gru_fma_max_batch(Precision::kFp32, 1025, 1, backward), 40);
    EXPECT_EQ(gru_fma_max_batch(Precision::kFp32, 2048, 1, backward), 40);
    // Both directions: 40 to H 1024, 24 above.
    EXPECT_EQ(gru_fma_max_batch(Precision::kFp32, 1024, 2, backward), 40);
    EXPECT_EQ(gru_fma_max_batch(Precision::kFp32, 1025, 2, backward), 24);
  }
}

TEST(RecurrenceChoice, Fp32ReluOnTheFp32MathKernelTakesTheGemmRecurrencePastItsBatch) {
  // One direction: H <= 512 past batch 44, H >= 1792 past 56, in between never.
  EXPECT_FALSE(relu_fp32_math_on_gemm(512, 1, 44));
  EXPECT_TRUE(relu_fp32_math_on_gemm(512, 1, 45));
  EXPECT_TRUE(relu_fp32_math_on_gemm(256, 1, 64));
  EXPECT_FALSE(relu_fp32_math_on_gemm(513, 1, 64));
  EXPECT_FALSE(relu_fp32_math_on_gemm(1536, 1, 64));
  EXPECT_FALSE(relu_fp32_math_on_gemm(1792, 1, 56));
  EXPECT_TRUE(relu_fp32_math_on_gemm(1792, 1, 57));
  EXPECT_TRUE(relu_fp32_math_on_gemm(3072, 1, 64));
  // Both directions: H >= 1024 past batch 56.
  EXPECT_FALSE(relu_fp32_math_on_gemm(1023, 2, 64));
  EXPECT_FALSE(relu_fp32_math_on_gemm(1024, 2, 56));
  EXPECT_TRUE(relu_fp32_math_on_gemm(1024, 2, 57));
  EXPECT_TRUE(relu_fp32_math_on_gemm(2560, 2, 64));
  EXPECT_FALSE(relu_fp32_math_on_gemm(512, 2, 64));
}

TEST(RecurrenceChoice, Bf16ReluOnTensorCoresTakesTheGemmRecurrenceOnlyAtH2304To3072) {
  for (int directions : {1, 2}) {
    EXPECT_FALSE(relu_bf16_tensor_on_gemm(2303, directions, 64));
    EXPECT_FALSE(relu_bf16_tensor_on_gemm(3073, directions, 64));
    EXPECT_FALSE(relu_bf16_tensor_on_gemm(2304, directions, 56));
    EXPECT_TRUE(relu_bf16_tensor_on_gemm(2304, directions, 57));
    EXPECT_TRUE(relu_bf16_tensor_on_gemm(3072, directions, 64));
    EXPECT_FALSE(relu_bf16_tensor_on_gemm(2048, directions, 64));
  }
  // From H 2688 both directions leave it past batch 40; one direction still waits for 57.
  EXPECT_FALSE(relu_bf16_tensor_on_gemm(2688, 2, 40));
  EXPECT_TRUE(relu_bf16_tensor_on_gemm(2688, 2, 41));
  EXPECT_FALSE(relu_bf16_tensor_on_gemm(2687, 2, 41));
  EXPECT_FALSE(relu_bf16_tensor_on_gemm(2816, 1, 48));
}

}  // namespace
}  // namespace ds2
