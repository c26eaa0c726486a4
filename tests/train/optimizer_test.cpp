#include "train/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ds2 {
namespace {

TEST(Optimizer, AdamMatchesHandComputedFirstSteps) {
  OptimConfig cfg;
  cfg.name = "adam";
  auto opt = make_optimizer(cfg, 2);
  Tensor p({2}), g({2});
  p[0] = 1.0f, p[1] = -2.0f;
  g[0] = 0.5f, g[1] = -4.0f;
  opt->step(p, g, 0.1);
  // After one bias-corrected step Adam moves each weight by lr * sign(g) (up to eps).
  EXPECT_NEAR(p[0], 0.9f, 1e-6);
  EXPECT_NEAR(p[1], -1.9f, 1e-6);
  g[0] = 1.0f;
  opt->step(p, g, 0.1);
  const double m = (0.9 * 0.1 * 0.5 + 0.1 * 1.0) / (1 - 0.81);
  const double v = (0.999 * 0.001 * 0.25 + 0.001 * 1.0) / (1 - 0.999 * 0.999);
  EXPECT_NEAR(p[0], 0.9 - 0.1 * m / (std::sqrt(v) + 1e-8), 1e-5);  // float arithmetic
}

TEST(Optimizer, NesterovSgdMatchesHandComputedSteps) {
  OptimConfig cfg;
  cfg.name = "sgd";
  cfg.momentum = 0.9;
  auto opt = make_optimizer(cfg, 1);
  Tensor p({1}, 1.0f), g({1}, 2.0f);
  opt->step(p, g, 0.1);  // v = 2, p = 1 - 0.1 * (2 + 1.8)
  EXPECT_NEAR(p[0], 1.0 - 0.38, 1e-6);
  opt->step(p, g, 0.1);  // v = 3.8, p -= 0.1 * (2 + 3.42)
  EXPECT_NEAR(p[0], 0.62 - 0.542, 1e-6);
  EXPECT_EQ(opt->state().size(), 1u);
}

TEST(Optimizer, ClipGradNormScalesToTheCeiling) {
  Tensor g({2});
  g[0] = 3.0f, g[1] = 4.0f;
  EXPECT_DOUBLE_EQ(clip_grad_norm(g, 1.0), 5.0);
  EXPECT_NEAR(grad_norm(g), 1.0, 1e-6);
  EXPECT_NEAR(g[0], 0.6f, 1e-6);
  g[1] = NAN;
  EXPECT_FALSE(std::isfinite(clip_grad_norm(g, 1.0)));
}

// Gradients computed with a power-of-two loss scale, unscaled and clipped in one pass, equal
// the unscaled gradients clipped, bit for bit; the norm returned is the true one.
TEST(Optimizer, UnscaleAndClipMatchesClippingWithoutAScale) {
  Tensor g({5});
  const float values[5] = {3.1f, -4.7f, 1e-3f, 0.0f, 2.2e-20f};
  for (float loss_scale : {1.0f, 2.0f, 65536.0f, 16777216.0f, std::ldexp(1.0f, 100)}) {
    for (double max_norm : {0.0, 1.0, 5.0, 100.0}) {
      Tensor plain({5}), scaled({5});
      for (int i = 0; i < 5; ++i) plain[i] = values[i], scaled[i] = values[i] * loss_scale;
      const double norm = clip_grad_norm(plain, max_norm);
      EXPECT_EQ(unscale_and_clip(scaled, loss_scale, max_norm), norm)
          << loss_scale << " " << max_norm;
      for (int i = 0; i < 5; ++i)
        EXPECT_EQ(scaled[i], plain[i]) << loss_scale << " " << max_norm << " [" << i << "]";
    }
  }
  // Nothing to do without a scale or a clip: the factor is exactly 1 and no pass runs.
  double norm = 0;
  EXPECT_EQ(unscale_clip_factor(10.0, 1.0f, 0.0, &norm), 1.0f);
  EXPECT_EQ(norm, 10.0);
  EXPECT_EQ(unscale_clip_factor(10.0, 1.0f, 20.0, &norm), 1.0f);
  // With a scale the pass runs even when nothing is clipped.
  EXPECT_EQ(unscale_clip_factor(1024.0, 1024.0f, 20.0, &norm), 1.0f / 1024);
  EXPECT_EQ(norm, 1.0);
  EXPECT_EQ(unscale_clip_factor(40.0 * 8, 8.0f, 20.0, &norm), 0.5f / 8);
  EXPECT_EQ(norm, 40.0);
  // An overflow: a non-finite norm, and nothing scaled.
  EXPECT_EQ(unscale_clip_factor(INFINITY, 65536.0f, 20.0, &norm), 1.0f);
  EXPECT_FALSE(std::isfinite(norm));
  g[0] = INFINITY;
  EXPECT_FALSE(std::isfinite(unscale_and_clip(g, 65536.0f, 1.0)));
}

TEST(Optimizer, LearningRateSchedules) {
  OptimConfig cfg;
  cfg.lr = 1.0;
  cfg.warmup_steps = 10;
  cfg.schedule = "cosine";
  cfg.final_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(cfg, 0, 110, 10), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(cfg, 9, 110, 10), 1.0);
  EXPECT_NEAR(learning_rate(cfg, 60, 110, 10), 0.55, 1e-12);
  EXPECT_NEAR(learning_rate(cfg, 110, 110, 10), 0.1, 1e-12);
  cfg.schedule = "exponential";
  cfg.warmup_steps = 0;
  cfg.decay_per_epoch = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate(cfg, 25, 100, 10), 0.25);
}

}  // namespace
}  // namespace ds2
