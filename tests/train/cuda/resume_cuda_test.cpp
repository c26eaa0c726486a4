// Exact resume on the GPU engine: optimizer moments, weight average, live weights and dropout
// seeds come back from the checkpoint, so a stopped and resumed run matches an uninterrupted one
// bit for bit (every CUDA op of the step is deterministic: fixed-order reductions, no atomics).
#include <gtest/gtest.h>

#include <filesystem>

#include "support/checkpoint_compare.h"
#include "support/cuda_compare.h"
#include "support/fsdd_fixture.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace ds2 {
namespace {
namespace fs = std::filesystem;

Config gpu_config(const fs::path& run, const std::string& manifest) {
  Config cfg = parse_config(
      "run: {seed: 4, device: cuda}\n"
      "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
      "augment: {speed_min: 0.9, speed_max: 1.1, time_masks: 1}\n"
      "model: {conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 2,"
      " rnn_hidden: 24, dropout: 0.1}\n"
      "optim: {name: adam, lr: 0.003, schedule: constant}\n"
      "train: {epochs: 4, batch_size: 4, log_every: 1, eval_every: 2, ema_decay: 0.9}\n");
  cfg.run.dir = run.string();
  cfg.data.train_manifest = manifest;
  cfg.data.dev_manifest = manifest;
  return cfg;
}

TEST(ResumeCuda, StoppedRunContinuesBitForBit) {
  DS2_REQUIRE_GPU();
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "nicolas", {2, 4}, 5);
  TrainSummary full = Trainer(gpu_config(temp.path() / "full", manifest)).run();
  Config first = gpu_config(temp.path() / "split", manifest);
  first.train.max_steps = 5;
  Trainer(first).run();
  Config second = gpu_config(temp.path() / "split", manifest);
  second.run.resume = "required";
  TrainSummary rest = Trainer(second).run();
  EXPECT_EQ(rest.steps, full.steps);
  testing::expect_same_tensors(temp.path() / "full" / "last.ckpt",
                               temp.path() / "split" / "last.ckpt");
}

}  // namespace
}  // namespace ds2
