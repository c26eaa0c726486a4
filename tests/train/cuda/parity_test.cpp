// End-to-end parity of the CPU and CUDA engines: the same small model, data and seed trained for
// 20 steps on each; the per-step training losses must agree. The model's arithmetic differs only
// in summation order (cuBLAS vs OpenBLAS, reductions), so the curves may drift apart slowly; the
// stated tolerance is 0.5% of the loss (+0.01) at every step. (On an H200 the two curves agreed to
// every printed digit, 3 decimals, over all 20 steps.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "support/cuda_compare.h"
#include "support/fsdd_fixture.h"
#include "support/temp_dir.h"
#include "train/trainer.h"

namespace ds2 {
namespace {

std::vector<double> train_losses(const std::filesystem::path& dir, const std::string& manifest,
                                 const std::string& device, TrainSummary* summary,
                                 const std::string& precision = "fp32",
                                 const std::string& statistics = "batch") {
  Config cfg = parse_config(
      "run: {seed: 5, threads: 2}\n"
      "features: {sample_rate: 8000, type: mel, n_mels: 20}\n"
      "augment: {speed_min: 0.9, speed_max: 1.1, freq_masks: 1, time_masks: 1}\n"
      "model: {conv: [{channels: 6, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 2,"
      " rnn_hidden: 40}\n"
      "optim: {name: adam, lr: 0.002, schedule: constant, grad_clip: 5}\n"
      "train: {epochs: 10, max_steps: 20, batch_size: 5, log_every: 1, ema_decay: 0.99}\n");
  cfg.model.batch_norm_statistics = statistics;
  cfg.run.dir = (dir / (device + precision + statistics)).string();
  cfg.run.device = device;
  cfg.train.precision = precision;
  cfg.data.train_manifest = manifest;
  cfg.data.dev_manifest = manifest;
  *summary = Trainer(cfg).run();
  std::vector<double> losses;
  std::ifstream metrics(dir / (device + precision + statistics) / "metrics.jsonl");
  std::string line;
  while (std::getline(metrics, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "train") losses.push_back(j["loss"].get<double>());
  }
  return losses;
}

// Trains on both engines with these batch-norm statistics and compares.
void expect_engines_agree(const std::string& statistics) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "lucas", {3, 5, 9}, 5);
  TrainSummary cpu_summary, gpu_summary;
  const auto cpu = train_losses(temp.path(), manifest, "cpu", &cpu_summary, "fp32", statistics);
  const auto gpu = train_losses(temp.path(), manifest, "cuda", &gpu_summary, "fp32", statistics);
  ASSERT_EQ(cpu.size(), 20u);
  ASSERT_EQ(gpu.size(), 20u);
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_NEAR(gpu[i], cpu[i], 0.005 * cpu[i] + 0.01) << "step " << i + 1;
  // It trained: the loss fell on both.
  EXPECT_LT(cpu.back(), cpu.front());
  EXPECT_LT(gpu.back(), gpu.front());
  EXPECT_EQ(gpu_summary.skipped_steps, cpu_summary.skipped_steps);
  // Every device buffer was sized up front: no cudaMalloc inside the loop.
  EXPECT_EQ(gpu_summary.loop_device_allocations, 0);
  EXPECT_EQ(cpu_summary.loop_device_allocations, -1);
  // The dev evaluation (weights averaged on the device, decoded on the host) agrees too.
  EXPECT_NEAR(gpu_summary.best_dev_cer, cpu_summary.best_dev_cer, 0.05);
}

TEST(EngineParity, CpuAndCudaLossCurvesAgreeOver20Steps) {
  DS2_REQUIRE_GPU();
  expect_engines_agree("batch");
}

// The same with per-utterance batch-norm statistics (every batch norm normalizes each utterance
// by its own frames, in training and in the dev evaluation).
TEST(EngineParity, PerUtteranceStatisticsCurvesAgree) {
  DS2_REQUIRE_GPU();
  expect_engines_agree("utterance");
}

// Mixed precision (bf16 GEMM operands and persistent weights, fp32 accumulation and master
// weights) follows the fp32 curve within what bf16 rounding of operands explains: 5% of the loss
// (+0.05) at every step over 20 steps, and it trains. The CPU backend refuses bf16 by name.
TEST(EngineParity, Bf16MixedPrecisionFollowsTheFp32Curve) {
  DS2_REQUIRE_GPU();
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "lucas", {3, 5, 9}, 5);
  TrainSummary fp32_summary, bf16_summary;
  const auto fp32 = train_losses(temp.path(), manifest, "cuda", &fp32_summary);
  const auto bf16 = train_losses(temp.path(), manifest, "cuda", &bf16_summary, "bf16");
  ASSERT_EQ(fp32.size(), 20u);
  ASSERT_EQ(bf16.size(), 20u);
  for (size_t i = 0; i < fp32.size(); ++i)
    EXPECT_NEAR(bf16[i], fp32[i], 0.05 * fp32[i] + 0.05) << "step " << i + 1;
  EXPECT_LT(bf16.back(), bf16.front());
  EXPECT_EQ(bf16_summary.loop_device_allocations, 0);
  TrainSummary cpu_summary;
  try {
    train_losses(temp.path(), manifest, "cpu", &cpu_summary, "bf16");
    ADD_FAILURE() << "the CPU backend accepted train.precision bf16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.precision"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ds2
