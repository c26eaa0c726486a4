// The GEMM recurrence's padded batch rows (nn/cuda/gemm_recurrence.h): which steps run them and
// the room every array then needs; and where its step kernels prefetch the next step's inputs.
// Host arithmetic only, so it runs without a GPU; the padded steps' results are
// CudaRnnLayer.*GemmRecurrenceOnPaddedRowsMatchesCpu.
#include "nn/cuda/gemm_recurrence.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>

#include "kernels/rnn.h"

namespace ds2 {
namespace {

// gemm_recurrence_gemm_rows of a pass: the forward's (backward false) or backward-data's.
int forward_rows(int rows, int gates, int hidden, bool bf16) {
  return gemm_recurrence_gemm_rows(rows, gates, hidden, bf16, false);
}
int backward_rows(int rows, int gates, int hidden, bool bf16) {
  return gemm_recurrence_gemm_rows(rows, gates, hidden, bf16, true);
}

// Both passes of bf16 clipped-ReLU steps of each of `rows` valid rows, at each hidden size, run
// `want` rows.
void expect_bf16_relu_rows(std::initializer_list<int> hiddens, std::initializer_list<int> rows,
                           int want) {
  for (const int hidden : hiddens)
    for (const int r : rows) {
      EXPECT_EQ(forward_rows(r, 1, hidden, true), want) << "H " << hidden << " rows " << r;
      EXPECT_EQ(backward_rows(r, 1, hidden, true), want) << "H " << hidden << " rows " << r;
    }
}

TEST(GemmRecurrence, Bf16ReluStepsOf24To63RowsRunSixtyFourAtH2688To4096) {
  expect_bf16_relu_rows({3072, 3066 /* padded 3072 */, 4096}, {24, 25, 33, 48, 57, 63}, 64);
  // 2688-3071: only multiples of 8, which cuBLAS's default served slower.
  for (const int rows : {24, 32, 40, 48, 56}) EXPECT_EQ(forward_rows(rows, 1, 2688, true), 64);
  for (const int rows : {25, 41, 44, 52, 57, 60})
    EXPECT_EQ(forward_rows(rows, 1, 2816, true), rows);
}

TEST(GemmRecurrence, Bf16ReluStepsOf17To24RowsRun25AtH2304To2560) {
  expect_bf16_relu_rows({2304, 2432, 2560, 2555}, {17, 20, 24}, 25);
  EXPECT_EQ(forward_rows(16, 1, 2560, true), 16);
  EXPECT_EQ(forward_rows(25, 1, 2560, true), 25);
  EXPECT_EQ(forward_rows(20, 1, 2296, true), 20);
  EXPECT_EQ(forward_rows(20, 1, 2688, true), 20);
  EXPECT_EQ(gemm_recurrence_row_capacity(20, 1, 2560, true), 25);
}

TEST(GemmRecurrence, Bf16ReluForwardStepsOf57To63RowsRun64AtH4608To4864) {
  for (const int hidden : {4608, 4864})
    for (const int rows : {57, 60, 63}) {
      EXPECT_EQ(forward_rows(rows, 1, hidden, true), 64) << hidden << " " << rows;
      EXPECT_EQ(backward_rows(rows, 1, hidden, true), rows) << hidden << " " << rows;
    }
  EXPECT_EQ(forward_rows(57, 1, 4352, true), 57);
  EXPECT_EQ(forward_rows(57, 1, 5120, true), 57);
  EXPECT_EQ(forward_rows(56, 1, 4608, true), 56);
}

TEST(GemmRecurrence, Bf16GruForwardRowsRoundUpToEightAtH1280To2304) {
  for (const int hidden : {1280, 1296, 1536, 1700, 2048, 2304}) {
    EXPECT_EQ(forward_rows(1, 3, hidden, true), 8) << hidden;
    EXPECT_EQ(forward_rows(41, 3, hidden, true), 48) << hidden;
    EXPECT_EQ(forward_rows(48, 3, hidden, true), 48) << hidden;
    EXPECT_EQ(forward_rows(57, 3, hidden, true), 64) << hidden;
    EXPECT_EQ(backward_rows(41, 3, hidden, true), 41) << hidden;  // backward-data lost at H 1296
  }
  EXPECT_EQ(forward_rows(41, 3, 1104, true), 41);  // level there
  EXPECT_EQ(forward_rows(41, 3, 2560, true), 41);  // not measured
  EXPECT_EQ(forward_rows(65, 3, 1536, true), 65);
}

TEST(GemmRecurrence, Fp32StepsRunSeventeenRowsWhereCublasServesFewerSlower) {
  // Clipped ReLU forward, H 2560-5120: N 3 as 4, N 11-16 as 17, and N 9-10 from H 3328.
  for (const int hidden : {2560, 3072, 4096, 5120}) {
    EXPECT_EQ(forward_rows(3, 1, hidden, false), 4) << hidden;
    for (const int rows : {11, 14, 16}) EXPECT_EQ(forward_rows(rows, 1, hidden, false), 17);
    for (const int rows : {1, 2, 4, 8, 17, 33, 64})
      EXPECT_EQ(forward_rows(rows, 1, hidden, false), rows) << hidden;
  }
  EXPECT_EQ(forward_rows(9, 1, 3072, false), 9);
  EXPECT_EQ(forward_rows(9, 1, 3328, false), 17);
  EXPECT_EQ(forward_rows(12, 1, 6144, false), 12);
  // Backward-data: N 2-16 at H 3840-6144; N 15-16 from 3072, 14 from 3328.
  for (const int rows : {2, 8, 13, 16}) {
    EXPECT_EQ(backward_rows(rows, 1, 4096, false), 17) << rows;
    EXPECT_EQ(backward_rows(rows, 1, 6144, false), 17) << rows;
  }
  EXPECT_EQ(backward_rows(1, 1, 4096, false), 1);
  EXPECT_EQ(backward_rows(16, 1, 8192, false), 16);
  EXPECT_EQ(backward_rows(16, 1, 3072, false), 17);
  EXPECT_EQ(backward_rows(14, 1, 3072, false), 14);
  EXPECT_EQ(backward_rows(14, 1, 3328, false), 17);
  EXPECT_EQ(backward_rows(13, 1, 3584, false), 13);
  EXPECT_EQ(backward_rows(16, 1, 2816, false), 16);
  // GRU: forward N 7-16 at H 2048-3072, backward-data N 2-16 at H 2560-3072.
  EXPECT_EQ(forward_rows(7, 3, 2048, false), 17);
  EXPECT_EQ(forward_rows(6, 3, 2048, false), 6);
  EXPECT_EQ(forward_rows(12, 3, 1536, false), 12);
  EXPECT_EQ(backward_rows(2, 3, 2560, false), 17);
  EXPECT_EQ(backward_rows(16, 3, 3072, false), 17);
  EXPECT_EQ(backward_rows(16, 3, 2048, false), 16);
}

TEST(GemmRecurrence, OtherStepsRunTheirRows) {
  for (const int rows : {1, 8, 23, 64, 65, 100}) EXPECT_EQ(forward_rows(rows, 1, 4096, true), rows);
  EXPECT_EQ(forward_rows(48, 1, 2560, true), 48);   // smaller H: N 64 was slower
  EXPECT_EQ(forward_rows(24, 1, 4097, true), 24);   // H 4608: N 64 much slower
  EXPECT_EQ(forward_rows(48, 1, 4096, false), 48);  // fp32 past 32 rows
  EXPECT_EQ(backward_rows(48, 3, 2048, true), 48);  // the bf16 GRU's backward-data
  EXPECT_EQ(forward_rows(65, 1, 3072, false), 65);
}

TEST(GemmRecurrence, RowCapacityCoversEveryStepsGemm) {
  // A batch of 30 at H 2816 pads its steps of 24 valid rows (a multiple of 8) though not its 30.
  EXPECT_EQ(gemm_recurrence_row_capacity(30, 1, 2816, true), 64);
  EXPECT_EQ(gemm_recurrence_row_capacity(30, 1, 3077, true), 64);
  EXPECT_EQ(gemm_recurrence_row_capacity(23, 1, 3077, true), 23);
  EXPECT_EQ(gemm_recurrence_row_capacity(80, 1, 3077, true), 80);
  EXPECT_EQ(gemm_recurrence_row_capacity(30, 1, 3077, false), 30);
  EXPECT_EQ(gemm_recurrence_row_capacity(30, 1, 4096, false), 30);  // its 2-16 run 17
  EXPECT_EQ(gemm_recurrence_row_capacity(8, 1, 4096, false), 17);
  EXPECT_EQ(gemm_recurrence_extra_rows(8, 1, 4096, false), 9);
  EXPECT_EQ(gemm_recurrence_row_capacity(30, 3, 3077, true), 30);
  EXPECT_EQ(gemm_recurrence_row_capacity(41, 3, 1536, true), 48);
  EXPECT_EQ(gemm_recurrence_extra_rows(3, 3, 1536, true), 5);
  for (const int gates : {1, 3})
    for (const int hidden : {37, 1536, 2048, 2560, 2688, 2816, 3077, 4096, 4608, 6144})
      for (const bool bf16 : {false, true})
        for (const int B : {1, 3, 9, 20, 24, 30, 48, 63, 64, 80}) {
          const int capacity = gemm_recurrence_row_capacity(B, gates, hidden, bf16);
          EXPECT_GE(capacity, B);
          int most = B;
          for (int rows = 0; rows <= B; ++rows)
            for (const bool backward : {false, true})
              most = std::max(most, gemm_recurrence_gemm_rows(rows, gates, hidden, bf16, backward));
          EXPECT_EQ(capacity, most) << "H " << hidden << " B " << B << (bf16 ? " bf16" : "");
          EXPECT_EQ(gemm_recurrence_extra_rows(B, gates, hidden, bf16), capacity - B);
          EXPECT_EQ(gemm_recurrence_carry_size(B, gates, hidden, bf16),
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

// The bf16 clipped ReLU's forward runs one fused kernel a step (kernels/rnn_fused_step.h) at batch
// 1-8 where U's padded side is past 4096 (H 4097 pads to 4104); fp32, the GRU's steps and larger
// batches keep the GEMM.
TEST(GemmRecurrence, Bf16ReluForwardFusesPastH4096AtBatchUpToEight) {
  for (int B = 1; B <= 8; ++B) {
    EXPECT_TRUE(gemm_recurrence_fuses_relu_forward(B, 4097, true)) << B;
    EXPECT_TRUE(gemm_recurrence_fuses_relu_forward(B, 6144, true)) << B;
    EXPECT_FALSE(gemm_recurrence_fuses_relu_forward(B, 4096, true)) << B;
    EXPECT_FALSE(gemm_recurrence_fuses_relu_forward(B, 5120, false)) << B;
  }
  EXPECT_FALSE(gemm_recurrence_fuses_relu_forward(9, 5120, true));
  EXPECT_FALSE(gemm_recurrence_fuses_relu_forward(0, 5120, true));
}

}  // namespace
}  // namespace ds2
