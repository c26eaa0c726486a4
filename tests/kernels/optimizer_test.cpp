// CPU optimizers (src/train/optimizer.cpp) vs their CUDA kernels, over several steps.
#include "kernels/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/cuda_compare.h"
#include "train/optimizer.h"

namespace ds2 {
namespace {

void run_both(const std::string& name, int64_t n, uint64_t seed) {
  CudaContext ctx;
  Rng rng(seed);
  OptimConfig cfg;
  cfg.name = name;
  cfg.weight_decay = 0.01;
  cfg.momentum = 0.9;
  Tensor params({n}), grads({n});
  fill_uniform(params, rng);
  auto cpu = make_optimizer(cfg, n);
  DeviceTensor p, g, m({n}), v({n});
  upload(params, p, ctx.stream());
  kernels::fill(m.data(), n, 0.0f, ctx.stream());
  kernels::fill(v.data(), n, 0.0f, ctx.stream());
  for (int step = 1; step <= 5; ++step) {
    fill_uniform(grads, rng, -0.1f, 0.1f);
    const double lr = 1e-3 * step;
    cpu->step(params, grads, lr);
    upload(grads, g, ctx.stream());
    if (name == "adam") {
      const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(cfg.beta1, step)));
      const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(cfg.beta2, step)));
      kernels::adam_step(p.data(), g.data(), m.data(), v.data(), n, static_cast<float>(lr),
                         static_cast<float>(cfg.beta1), static_cast<float>(cfg.beta2),
                         static_cast<float>(cfg.eps),
                         static_cast<float>(1.0 - lr * cfg.weight_decay), c1, c2, ctx.stream());
    } else {
      kernels::nesterov_sgd_step(p.data(), g.data(), m.data(), n, static_cast<float>(lr),
                                 static_cast<float>(cfg.momentum),
                                 static_cast<float>(cfg.weight_decay), ctx.stream());
    }
    expect_close(params, download_tensor(p, ctx), 1e-7, 1e-6,
                 name + " step " + std::to_string(step));
  }
}

TEST(OptimizerKernels, AdamMatchesCpu) {
  DS2_REQUIRE_GPU();
  for (int64_t n : {1, 257, 100003}) run_both("adam", n, n);
}

TEST(OptimizerKernels, NesterovSgdMatchesCpu) {
  DS2_REQUIRE_GPU();
  for (int64_t n : {1, 257, 100003}) run_both("sgd", n, n + 1);
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
