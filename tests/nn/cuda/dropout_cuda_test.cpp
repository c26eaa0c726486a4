// CudaDropout against the CPU layer: both draw their masks from core/dropout_mask.h's hash, so
// from the same seed the outputs and gradients match bit for bit. Beside that, the contract on
// its own: the drop rate within tolerance, kept values scaled by exactly 1/(1-p), the backward
// using the same mask, inference and p = 0 the identity, padding exactly zero, and the seed
// schedule (reseed, then seed + k for the k-th forward).
#include "nn/cuda/dropout_cuda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "nn/gradient_check.h"
#include "support/cuda_compare.h"

namespace ds2 {
namespace {

// Valid frames in [1, 2] (never zero, so a zero output means dropped), padding nonzero.
Sequences input(const Shape& shape, const std::vector<int>& lengths, Rng& rng) {
  Sequences s = random_sequences(shape, lengths, rng, 1.0f, 2.0f);
  const int64_t T = shape[0], B = shape[1], F = s.frame_size();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b)
      if (t >= lengths[b])
        for (int64_t i = 0; i < F; ++i) s.data[(t * B + b) * F + i] = 5.0f;
  return s;
}

bool is_valid(const Sequences& s, int64_t i) {
  const int64_t row = i / s.frame_size();
  return row / s.batch() < s.lengths[row % s.batch()];
}

struct Forward {
  Tensor y, dx;
};

// One training forward and backward on the GPU; checks the per-element contract and returns the
// outputs (for mask comparisons).
Forward check_training_step(CudaContext& ctx, CudaDropout& drop, const Sequences& x,
                            const Sequences& dy, float p, double rate_tolerance) {
  DeviceSequences xd, yd, dyd, dxd;
  upload(x, xd, ctx.stream());
  upload(dy, dyd, ctx.stream());
  yd.data.resize(x.data.shape());
  poison(yd.data, ctx);
  dxd.data.resize(x.data.shape());
  poison(dxd.data, ctx);
  drop.forward(xd, yd, true);
  drop.backward(xd, yd, dyd, dxd);
  EXPECT_EQ(yd.lengths, x.lengths);
  EXPECT_EQ(dxd.lengths, x.lengths);
  Forward f{download_tensor(yd.data, ctx), download_tensor(dxd.data, ctx)};
  const float keep = 1.0f / (1.0f - p);
  int64_t valid = 0, dropped = 0;
  for (int64_t i = 0; i < x.data.numel(); ++i) {
    if (!is_valid(x, i)) {
      EXPECT_EQ(f.y[i], 0.0f) << "output padding at " << i;
      EXPECT_EQ(f.dx[i], 0.0f) << "gradient padding at " << i;
      continue;
    }
    ++valid;
    if (f.y[i] == 0.0f) {
      ++dropped;
      EXPECT_EQ(f.dx[i], 0.0f) << "gradient through a dropped element at " << i;
    } else {
      EXPECT_FLOAT_EQ(f.y[i], x.data[i] * keep) << i;
      EXPECT_FLOAT_EQ(f.dx[i], dy.data[i] * keep) << i;
    }
  }
  if (valid > 0)
    EXPECT_NEAR(static_cast<double>(dropped) / valid, p, rate_tolerance)
        << dropped << " of " << valid << " dropped";
  return f;
}

TEST(CudaDropout, TrainingMasksScalesAndBackwardUsesTheSameMask) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(1);
  for (float p : {0.1f, 0.25f, 0.5f}) {
    SCOPED_TRACE("p " + std::to_string(p));
    Dropout cpu("d", p);
    CudaDropout drop(ctx, cpu);
    EXPECT_EQ(drop.probability(), p);
    drop.reseed(9);
    // {T, B, F} with unequal lengths (0 included): about 5000 valid elements, so 4 sigma of the
    // drop rate is below 0.03.
    const Sequences x = input({50, 4, 40}, {50, 31, 0, 45}, rng);
    const Sequences dy = input({50, 4, 40}, {50, 31, 0, 45}, rng);
    check_training_step(ctx, drop, x, dy, p, 0.03);
    // {T, B, C, F}, batch 1, odd sizes; many elements for a tighter rate.
    const Sequences x4 = input({97, 1, 7, 61}, {97}, rng);
    const Sequences dy4 = input({97, 1, 7, 61}, {97}, rng);
    check_training_step(ctx, drop, x4, dy4, p, 0.012);
  }
}

TEST(CudaDropout, SameSeedSameMasksAsTheCpuLayer) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(5);
  struct Case {
    Shape shape;
    std::vector<int> lengths;
    float p;
    uint64_t seed;
  };
  const std::vector<Case> cases{{{50, 4, 40}, {50, 31, 0, 45}, 0.2f, 9},
                                {{97, 1, 7, 61}, {97}, 0.5f, 0xFFFFFFFFFFFFFFF0ull},
                                {{13, 3, 33}, {1, 13, 12}, 0.1f, 123456789}};
  for (const Case& c : cases) {
    SCOPED_TRACE("shape " + shape_str(c.shape) + " p " + std::to_string(c.p));
    Dropout cpu("d", c.p);
    CudaDropout gpu(ctx, cpu);
    cpu.reseed(c.seed);
    gpu.reseed(c.seed);
    for (int call = 0; call < 2; ++call) {  // the second forward: seed + 1 on both
      const Sequences x = input(c.shape, c.lengths, rng), dy = input(c.shape, c.lengths, rng);
      Sequences y, dx;
      nn_testing::poison(y, c.shape);
      nn_testing::poison(dx, c.shape);
      cpu.forward(x, y, true);
      cpu.backward(x, y, dy, dx);
      const Forward g = check_training_step(ctx, gpu, x, dy, c.p, 0.1);
      expect_close(y.data, g.y, 0, 0, "forward");
      expect_close(dx.data, g.dx, 0, 0, "backward");
      EXPECT_EQ(cpu.next_seed(), gpu.next_seed());
    }
  }
}

TEST(CudaDropout, SeedScheduleIsReproducible) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(2);
  Dropout cpu("d", 0.3f);
  CudaDropout drop(ctx, cpu);
  const Sequences x = input({20, 3, 16}, {20, 11, 17}, rng);
  const Sequences dy = input({20, 3, 16}, {20, 11, 17}, rng);
  EXPECT_EQ(drop.next_seed(), 0u);  // as the CPU layer before any reseed
  drop.reseed(42);
  const Forward a = check_training_step(ctx, drop, x, dy, 0.3f, 0.1);
  EXPECT_EQ(drop.next_seed(), 43u);
  const Forward b = check_training_step(ctx, drop, x, dy, 0.3f, 0.1);
  EXPECT_EQ(drop.next_seed(), 44u);
  drop.reseed(42);
  const Forward a2 = check_training_step(ctx, drop, x, dy, 0.3f, 0.1);
  expect_close(a.y, a2.y, 0, 0, "same seed, same output");
  expect_close(a.dx, a2.dx, 0, 0, "same seed, same gradient");
  int64_t differ = 0;
  for (int64_t i = 0; i < a.y.numel(); ++i) differ += (a.y[i] == 0.0f) != (b.y[i] == 0.0f);
  EXPECT_GT(differ, 0) << "consecutive training forwards used the same mask";

  // Inference neither uses nor advances the seed.
  DeviceSequences xd, yd;
  upload(x, xd, ctx.stream());
  drop.forward(xd, yd, false);
  EXPECT_EQ(drop.next_seed(), 43u);
}

TEST(CudaDropout, InferenceAndZeroProbabilityAreTheIdentity) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(3);
  const Shape shape{13, 3, 2, 9};
  const std::vector<int> lengths{13, 0, 6};
  const Sequences x = input(shape, lengths, rng), dy = input(shape, lengths, rng);
  // The expected outputs: the input on valid frames, zero padding.
  Sequences x_ref = x, dy_ref = dy;
  zero_padding(x_ref);
  zero_padding(dy_ref);
  for (float p : {0.0f, 0.4f}) {
    SCOPED_TRACE("p " + std::to_string(p));
    Dropout cpu("d", p);
    CudaDropout drop(ctx, cpu);
    DeviceSequences xd, yd, dyd, dxd;
    upload(x, xd, ctx.stream());
    upload(dy, dyd, ctx.stream());
    for (bool training : {false, true}) {
      if (training && p > 0.0f) continue;  // p > 0 training is the masked case above
      yd.data.resize(shape);
      poison(yd.data, ctx);
      drop.forward(xd, yd, training);
      EXPECT_EQ(yd.lengths, lengths);
      expect_close(x_ref.data, download_tensor(yd.data, ctx), 0, 0, "identity forward");
    }
    if (p == 0.0f) {
      dxd.data.resize(shape);
      poison(dxd.data, ctx);
      drop.backward(xd, yd, dyd, dxd);
      expect_close(dy_ref.data, download_tensor(dxd.data, ctx), 0, 0, "identity backward");
    } else {
      // No training forward yet: no mask to apply.
      EXPECT_THROW(drop.backward(xd, yd, dyd, dxd), Error);
    }
  }
}

TEST(CudaDropout, WithoutInputGradientLeavesGradInUntouched) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(4);
  Dropout cpu("d", 0.2f);
  CudaDropout drop(ctx, cpu);
  drop.set_needs_input_grad(false);
  const Sequences x = input({8, 2, 5}, {8, 3}, rng);
  DeviceSequences xd, yd, dxd;
  upload(x, xd, ctx.stream());
  drop.forward(xd, yd, true);
  dxd.data.resize({8, 2, 5});
  poison(dxd.data, ctx);
  drop.backward(xd, yd, yd, dxd);
  const Tensor dx = download_tensor(dxd.data, ctx);
  for (int64_t i = 0; i < dx.numel(); ++i) ASSERT_TRUE(std::isnan(dx[i])) << i;
}

}  // namespace
}  // namespace ds2
