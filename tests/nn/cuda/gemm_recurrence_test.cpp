// The GEMM recurrence's padded batch rows (nn/cuda/gemm_recurrence.h): which steps run them and
// the room every array then needs; and where its step kernels prefetch the next step's inputs.
// Host arithmetic only, so it runs without a GPU; the padded steps' results are
// CudaRnnLayer.Bf16GemmRecurrenceOnPaddedRowsMatchesCpu.
#include "nn/cuda/gemm_recurrence.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/rnn.h"

namespace ds2 {
namespace {

TEST(GemmRecurrence, Bf16ReluStepsOf24To63RowsRunSixtyFourAtH2688To4096) {
  for (const int rows : {24, 25, 33, 48, 57, 63}) {
    EXPECT_EQ(gemm_recurrence_gemm_rows(rows, 1, 3072, true), 64) << rows;
    EXPECT_EQ(gemm_recurrence_gemm_rows(rows, 1, 3066, true), 64) << rows << " (H16 3072)";
    EXPECT_EQ(gemm_recurrence_gemm_rows(rows, 1, 4096, true), 64) << rows;
  }
  // 2688-3071: only multiples of 8, which cuBLAS's default served slower.
  for (const int rows : {24, 32, 40, 48, 56})
    EXPECT_EQ(gemm_recurrence_gemm_rows(rows, 1, 2688, true), 64);
  for (const int rows : {25, 41, 44, 52, 57, 60})
    EXPECT_EQ(gemm_recurrence_gemm_rows(rows, 1, 2816, true), rows);
}

TEST(GemmRecurrence, OtherStepsRunTheirRows) {
  for (const int rows : {1, 8, 23, 64, 65, 100})
    EXPECT_EQ(gemm_recurrence_gemm_rows(rows, 1, 4096, true), rows);
  EXPECT_EQ(gemm_recurrence_gemm_rows(48, 1, 2560, true), 48);   // smaller H: N 64 was slower
  EXPECT_EQ(gemm_recurrence_gemm_rows(24, 1, 4097, true), 24);   // H 4608: N 64 much slower
  EXPECT_EQ(gemm_recurrence_gemm_rows(48, 1, 4096, false), 48);  // fp32 GEMMs: not measured
  EXPECT_EQ(gemm_recurrence_gemm_rows(48, 3, 4096, true), 48);   // the GRU's: mixed (session 74)
}

TEST(GemmRecurrence, RowCapacityCoversEveryStepsGemm) {
  // A batch of 30 at H 2816 pads its steps of 24 valid rows (a multiple of 8) though not its 30.
  EXPECT_EQ(gemm_recurrence_row_capacity(30, 1, 2816, true), 64);
  EXPECT_EQ(gemm_recurrence_row_capacity(30, 1, 3077, true), 64);
  EXPECT_EQ(gemm_recurrence_row_capacity(23, 1, 3077, true), 23);
  EXPECT_EQ(gemm_recurrence_row_capacity(80, 1, 3077, true), 80);
  EXPECT_EQ(gemm_recurrence_row_capacity(30, 1, 3077, false), 30);
  EXPECT_EQ(gemm_recurrence_row_capacity(30, 3, 3077, true), 30);
  for (const int hidden : {37, 2688, 2816, 3077, 4096})
    for (const bool bf16 : {false, true})
      for (const int B : {1, 20, 24, 30, 48, 63, 64, 80}) {
        const int capacity = gemm_recurrence_row_capacity(B, 1, hidden, bf16);
        EXPECT_GE(capacity, B);
        int most = B;
        for (int rows = 0; rows <= B; ++rows)
          most = std::max(most, gemm_recurrence_gemm_rows(rows, 1, hidden, bf16));
        EXPECT_EQ(capacity, most) << "H " << hidden << " B " << B << (bf16 ? " bf16" : "");
        EXPECT_EQ(gemm_recurrence_carry_size(B, 1, hidden, bf16),
                  int64_t{capacity} * kernels::rnn_padded_ld(hidden));
      }
}

TEST(GemmRecurrence, StepsPrefetchWhereUTakesAtMostHalfTheL2) {
  constexpr int64_t kH200 = int64_t{60} << 20, kH100 = int64_t{50} << 20;
  // bf16 U {H16, H16} (2 bytes an element): up to 3960 on 60 MiB (3961 pads to 3968).
  EXPECT_TRUE(gemm_recurrence_prefetches(1, 3960, true, kH200));
  EXPECT_FALSE(gemm_recurrence_prefetches(1, 3961, true, kH200));
  EXPECT_FALSE(gemm_recurrence_prefetches(1, 4608, true, kH200));  // measured level or slower
  EXPECT_TRUE(gemm_recurrence_prefetches(1, 3328, true, kH200));   // measured faster
  EXPECT_TRUE(gemm_recurrence_prefetches(1, 3616, true, kH100));
  EXPECT_FALSE(gemm_recurrence_prefetches(1, 3624, true, kH100));
  // The GRU's bf16 U {pad(3H), pad(H)}: to 2288.
  EXPECT_TRUE(gemm_recurrence_prefetches(3, 2288, true, kH200));
  EXPECT_FALSE(gemm_recurrence_prefetches(3, 2289, true, kH200));
  EXPECT_TRUE(gemm_recurrence_prefetches(3, 2048, true, kH200));  // measured faster
  // fp32 U, unpadded, 4 bytes an element: the clipped ReLU to 2804, the GRU to 1619.
  EXPECT_TRUE(gemm_recurrence_prefetches(1, 2804, false, kH200));
  EXPECT_FALSE(gemm_recurrence_prefetches(1, 2805, false, kH200));
  EXPECT_TRUE(gemm_recurrence_prefetches(3, 1619, false, kH200));
  EXPECT_FALSE(gemm_recurrence_prefetches(3, 1620, false, kH200));
}

}  // namespace
}  // namespace ds2
