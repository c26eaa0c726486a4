// CPU optimizers (src/train/optimizer.cpp) vs their CUDA kernels, over several steps.
#include "kernels/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/cuda_compare.h"
#include "train/optimizer.h"

namespace ds2 {
namespace {

// The kernels get the gradients unscaled with grad_scale beside them; the CPU optimizer gets them
// scaled first, as the CPU step engine's unscale_and_clip leaves them. offset (in floats) moves
// every device buffer off 16-byte alignment, which takes the one-float-at-a-time loop.
void run_both(const std::string& name, int64_t n, uint64_t seed, int offset = 0) {
  CudaContext ctx;
  Rng rng(seed);
  OptimConfig cfg;
  cfg.name = name;
  cfg.weight_decay = 0.01;
  cfg.momentum = 0.9;
  Tensor params({n}), grads({n});
  fill_uniform(params, rng);
  auto cpu = make_optimizer(cfg, n);
  DeviceTensor p({n + offset}), g({n + offset}), m({n + offset}), v({n + offset});
  upload(params.data(), n, p.data() + offset, ctx.stream());
  kernels::fill(m.data(), n + offset, 0.0f, ctx.stream());
  kernels::fill(v.data(), n + offset, 0.0f, ctx.stream());
  for (int step = 1; step <= 5; ++step) {
    fill_uniform(grads, rng, -0.1f, 0.1f);
    // Step 3 takes no factor; the others one whose products round.
    const float grad_scale = step == 3 ? 1.0f : 0.37f / static_cast<float>(step);
    upload(grads.data(), n, g.data() + offset, ctx.stream());
    Tensor scaled = grads;
    for (int64_t i = 0; i < n; ++i) scaled[i] *= grad_scale;
    const double lr = 1e-3 * step;
    cpu->step(params, scaled, lr);
    if (name == "adam") {
      const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(cfg.beta1, step)));
      const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(cfg.beta2, step)));
      kernels::adam_step(p.data() + offset, g.data() + offset, m.data() + offset, v.data() + offset,
                         n, static_cast<float>(lr), static_cast<float>(cfg.beta1),
                         static_cast<float>(cfg.beta2), static_cast<float>(cfg.eps),
                         static_cast<float>(1.0 - lr * cfg.weight_decay), c1, c2, grad_scale,
                         ctx.stream());
    } else {
      kernels::nesterov_sgd_step(p.data() + offset, g.data() + offset, m.data() + offset, n,
                                 static_cast<float>(lr), static_cast<float>(cfg.momentum),
                                 static_cast<float>(cfg.weight_decay), grad_scale, ctx.stream());
    }
    Tensor got({n});
    download(p.data() + offset, n, got.data(), ctx.stream());
    ctx.synchronize();
    // The same float operations in the same order: equal to the last bit.
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(params[i], got[i])
          << name << " step " << step << " element " << i << " of " << n << ", offset " << offset;
  }
}

TEST(OptimizerKernels, AdamMatchesCpu) {
  DS2_REQUIRE_GPU();
  for (int64_t n : {1, 257, 100003}) run_both("adam", n, n);
  run_both("adam", 1001, 3, /*offset=*/1);
}

TEST(OptimizerKernels, NesterovSgdMatchesCpu) {
  DS2_REQUIRE_GPU();
  for (int64_t n : {1, 257, 100003}) run_both("sgd", n, n + 1);
  run_both("sgd", 1001, 4, /*offset=*/1);
}

TEST(OptimizerKernels, AverageUpdate) {
  DS2_REQUIRE_GPU();
  CudaContext ctx;
  Rng rng(5);
  Tensor avg({1001}), p({1001});
  fill_uniform(avg, rng);
  fill_uniform(p, rng);
  Tensor ref = avg;
  for (int64_t i = 0; i < ref.numel(); ++i) ref[i] = 0.9f * ref[i] + 0.1f * p[i];
  DeviceTensor a, pd;
  upload(avg, a, ctx.stream());
  upload(p, pd, ctx.stream());
  kernels::average_update(a.data(), pd.data(), avg.numel(), 0.9f, 0.1f, ctx.stream());
  expect_close(ref, download_tensor(a, ctx), 1e-7, 1e-6, "average_update");
}

}  // namespace
}  // namespace ds2
