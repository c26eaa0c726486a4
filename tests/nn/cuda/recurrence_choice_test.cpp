// The measured rules between the persistent kernels and the GEMM recurrence
// (nn/cuda/recurrence_choice.h) at their edges: pure functions of the layer's shape and batch, so
// they run without a GPU. The measurements behind each edge sit beside the rule.
#include "nn/cuda/recurrence_choice.h"

#include <gtest/gtest.h>

#include <string>

namespace ds2 {
namespace {

// A layer's shape and batch, and what a rule answers for it.
struct Edge {
  int hidden, directions, batch;
  bool gemm;
};

std::string edge_name(const Edge& e) {
  return "H " + std::to_string(e.hidden) + ", " + std::to_string(e.directions) +
         " direction(s), batch " + std::to_string(e.batch);
}

TEST(RecurrenceChoice, GruFmaMaxBatchByPrecisionSizeAndDirections) {
  // bf16: the forward past 8; backward-data past 16 up to H 1024, past 8 above.
  for (int directions : {1, 2}) {
    EXPECT_EQ(gru_fma_max_batch(Precision::kBf16, 1024, directions, false), 8);
    EXPECT_EQ(gru_fma_max_batch(Precision::kBf16, 1024, directions, true), 16);
    EXPECT_EQ(gru_fma_max_batch(Precision::kBf16, 1025, directions, true), 8);
  }
  // fp32, both passes alike. One direction: 28 to H 768, 32 to H 1024, 40 above; both
  // directions: 40 to H 1024, 24 above.
  const struct {
    int hidden, directions, max_batch;
  } fp32[] = {{256, 1, 28},  {768, 1, 28},  {769, 1, 32},  {1024, 1, 32},
              {1025, 1, 40}, {2048, 1, 40}, {1024, 2, 40}, {1025, 2, 24}};
  for (bool backward : {false, true})
    for (const auto& c : fp32)
      EXPECT_EQ(gru_fma_max_batch(Precision::kFp32, c.hidden, c.directions, backward), c.max_batch)
          << "H " << c.hidden << ", " << c.directions << " direction(s), backward " << backward;
}

TEST(RecurrenceChoice, Fp32ReluOnTheFp32MathKernelTakesTheGemmRecurrencePastItsBatch) {
  // One direction: H <= 512 past batch 44, H < 1024 and H >= 1792 past 56, H 1024-1791 never.
  // Both directions: H >= 1024 past batch 56.
  for (const Edge& e : {Edge{512, 1, 44, false}, Edge{512, 1, 45, true}, Edge{256, 1, 64, true},
                        Edge{513, 1, 56, false}, Edge{513, 1, 57, true}, Edge{1023, 1, 64, true},
                        Edge{1024, 1, 64, false}, Edge{1536, 1, 64, false},
                        Edge{1791, 1, 64, false}, Edge{1792, 1, 56, false}, Edge{1792, 1, 57, true},
                        Edge{3072, 1, 64, true}, Edge{1023, 2, 64, false}, Edge{1024, 2, 56, false},
                        Edge{1024, 2, 57, true}, Edge{2560, 2, 64, true}, Edge{512, 2, 64, false}})
    EXPECT_EQ(relu_fp32_math_on_gemm(e.hidden, e.directions, e.batch), e.gemm) << edge_name(e);
}

TEST(RecurrenceChoice, Bf16ReluOnTensorCoresTakesTheGemmRecurrenceOnlyAtH2304To4096) {
  for (int d : {1, 2})
    for (const Edge& e :
         {Edge{2303, d, 64, false}, Edge{4097, d, 64, false}, Edge{2304, d, 56, false},
          Edge{2304, d, 57, true}, Edge{3072, d, 64, true}, Edge{2048, d, 64, false}})
      EXPECT_EQ(relu_bf16_tensor_on_gemm(e.hidden, e.batch), e.gemm) << edge_name(e);
  // From H 2688 both directions leave it past batch 40 (one direction since session 73's padded
  // GEMMs), past H 3072 past batch 32.
  for (const Edge& e : {Edge{2688, 2, 40, false}, Edge{2688, 2, 41, true}, Edge{2687, 2, 41, false},
                        Edge{2816, 1, 40, false}, Edge{2688, 1, 41, true}, Edge{2687, 1, 56, false},
                        Edge{3072, 1, 41, true}, Edge{3073, 1, 32, false}, Edge{3073, 1, 33, true},
                        Edge{4096, 1, 33, true}, Edge{3328, 2, 32, false}, Edge{3328, 2, 33, true},
                        Edge{4096, 2, 48, true}})
    EXPECT_EQ(relu_bf16_tensor_on_gemm(e.hidden, e.batch), e.gemm) << edge_name(e);
}

}  // namespace
}  // namespace ds2
