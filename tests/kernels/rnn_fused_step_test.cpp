// CPU reference vs CUDA for the fused bf16 clipped-ReLU step (kernels/rnn_fused_step.h): h =
// clipped ReLU(pre + h_prev U^T) on the rows valid at t, 0 on the others, in float64 from the same
// bf16 operands; h_bf16 h rounded, its padding columns 0 over poison. Shapes: H 8 (no padding),
// 37 and 129 (padded to 40 and 136, a last CTA of partial rows), 1000, 2048, 4100 (padded to
// 4104) and 6144; batch 1, 2, 3, 5 and 8, a row invalid at t.
#include "kernels/rnn_fused_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/bf16.h"
#include "core/cuda/check.h"
#include "core/cuda/device_array.h"
#include "kernels/rnn.h"
#include "support/cuda_compare.h"
#include "support/cuda_rnn_reference.h"
#include "support/device_vectors.h"

namespace ds2 {
namespace {

constexpr int kT = 2;  // the timestep run; row b is valid when kT < lengths[b]
constexpr float kClip = 20.0f;

// {rows, ld} bf16, the first `cols` columns of each row uniform in [lo, hi], the rest 0 (rows past
// `rows_valid` all 0: U's padding rows).
std::vector<uint16_t> bf16_rows(int rows, int rows_valid, int cols, int ld, Rng& rng, float lo,
                                float hi) {
  std::vector<uint16_t> v(static_cast<size_t>(rows) * ld, 0);
  for (int r = 0; r < rows_valid; ++r)
    for (int c = 0; c < cols; ++c)
      v[static_cast<size_t>(r) * ld + c] = float_to_bf16(rng.uniform(lo, hi));
  return v;
}

struct Case {
  int B, H;
};

TEST(RnnFusedStep, MatchesFloat64WithPaddedBf16Rows) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  cudaStream_t s = ctx.stream();
  const Case cases[] = {{1, 37},   {3, 8},    {8, 129},  {1, 129},  {2, 1000},
                        {8, 1000}, {3, 2048}, {5, 4100}, {1, 6144}, {8, 6144}};
  for (const Case& c : cases) {
    const int B = c.B, H = c.H, ld16 = kernels::rnn_padded_ld(H), ld_pre = H + 5;
    SCOPED_TRACE("B " + std::to_string(B) + " H " + std::to_string(H));
    ASSERT_TRUE(kernels::rnn_relu_fused_step_fits(B));
    Rng rng(1000 + 17 * B + H);
    // U scaled so that sums spread over [-clip, 2 clip]: both sides of the clip are reached.
    const float scale = 3.0f / std::sqrt(static_cast<float>(H));
    const std::vector<uint16_t> u = bf16_rows(ld16, H, H, ld16, rng, -scale, scale);
    const std::vector<uint16_t> x = bf16_rows(B, B, H, ld16, rng, 0.0f, kClip);
    const std::vector<float> pre = random_vector(int64_t{B} * ld_pre, rng, -10.0f, 25.0f);
    std::vector<int> lengths(B, 5);
    if (B > 1) lengths[1] = 1;  // invalid at kT
    std::vector<float> want(static_cast<size_t>(B) * H);
    std::vector<double> magnitude(want.size());
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < H; ++k) {
        double sum = pre[static_cast<size_t>(b) * ld_pre + k], abs_sum = std::fabs(sum);
        for (int j = 0; j < H; ++j) {
          const double p =
              static_cast<double>(bf16_to_float(x[static_cast<size_t>(b) * ld16 + j])) *
              bf16_to_float(u[static_cast<size_t>(k) * ld16 + j]);
          sum += p;
          abs_sum += std::fabs(p);
        }
        const size_t i = static_cast<size_t>(b) * H + k;
        want[i] = kT < lengths[b] ? static_cast<float>(std::fmin(std::fmax(sum, 0.0), kClip)) : 0;
        magnitude[i] = abs_sum;
      }
    auto u_d = to_device(u, s);
    auto x_d = to_device(x, s);
    auto pre_d = to_device(pre, s);
    auto len_d = to_device(lengths, s);
    auto h = to_device(std::vector<float>(want.size(), std::nanf("")), s);
    auto h16 = to_device(std::vector<uint16_t>(static_cast<size_t>(B) * ld16, 0xFFFF), s);
    kernels::rnn_relu_fused_step_forward(u_d.data(), H, x_d.data(), pre_d.data(), ld_pre, h.data(),
                                         h16.data(), B, kT, len_d.data(), kClip, s);
    const std::vector<float> got = to_host(h, s);
    const std::vector<uint16_t> got16 = to_host(h16, s);
    int valid_rows_checked = 0;
    for (int b = 0; b < B; ++b) {
      valid_rows_checked += kT < lengths[b];
      for (int k = 0; k < ld16; ++k) {
        const size_t i16 = static_cast<size_t>(b) * ld16 + k;
        if (k >= H) {
          ASSERT_EQ(got16[i16], 0) << "h_bf16 padding, row " << b << " column " << k;
          continue;
        }
        const size_t i = static_cast<size_t>(b) * H + k;
        // fp32 sums of H products in another order than float64's.
        ASSERT_NEAR(got[i], want[i], 3e-5 * magnitude[i] + 1e-6)
            << "h row " << b << " column " << k;
        ASSERT_EQ(got16[i16], float_to_bf16(got[i])) << "h_bf16 row " << b << " column " << k;
      }
    }
    EXPECT_GT(valid_rows_checked, 0);
  }
}

TEST(RnnFusedStep, RefusesBatchesPastItsTiles) {
  EXPECT_FALSE(kernels::rnn_relu_fused_step_fits(0));
  EXPECT_FALSE(kernels::rnn_relu_fused_step_fits(kernels::kRnnFusedStepMaxBatch + 1));
  EXPECT_TRUE(kernels::rnn_relu_fused_step_fits(kernels::kRnnFusedStepMaxBatch));
}

}  // namespace
}  // namespace ds2
