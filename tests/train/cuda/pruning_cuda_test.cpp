// Pruning on the GPU engine: the masks uploaded once (no cudaMalloc in the loop), pruned weights
// exactly 0 in the checkpoint, the same kept counts as the CPU engine's schedule, and a stopped
// and resumed run bit-identical to an uninterrupted one.
#include <gtest/gtest.h>

#include <cmath>
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

Config pruned_config(const fs::path& run, const std::string& manifest) {
  Config cfg = parse_config(
      "run: {seed: 4, device: cuda}\n"
      "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
      "model: {conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 2,"
      " rnn_hidden: 24, rnn_type: gru}\n"
      "optim: {name: adam, lr: 0.003, schedule: constant, weight_decay: 0.01}\n"
      "train: {epochs: 6, batch_size: 4, log_every: 1, eval_every: 3, ema_decay: 0.9}\n"
      "prune: {density: 0.3, start_step: 2, end_step: 11, every: 3}\n");
  cfg.run.dir = run.string();
  cfg.data.train_manifest = manifest;
  cfg.data.dev_manifest = manifest;
  return cfg;
}

TEST(PruningCuda, PrunedWeightsStayZeroAndResumeIsExact) {
  DS2_REQUIRE_GPU();
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "nicolas", {2, 4}, 5);
  const TrainSummary full = Trainer(pruned_config(temp.path() / "full", manifest)).run();
  ASSERT_EQ(full.steps, 18);
  EXPECT_TRUE(std::isfinite(full.last_loss));
  EXPECT_EQ(full.loop_device_allocations, 0);
  // GRU: 3 gates x 24 rows of 24 per matrix, each matrix pruned on its own.
  const int64_t n = 3 * 24 * 24;
  EXPECT_DOUBLE_EQ(full.recurrent_density, static_cast<double>(std::llround(0.3 * n)) / n);
  const Checkpoint ck = load_checkpoint((temp.path() / "full" / "last.ckpt").string());
  for (const char* name : {"rnn0.fwd.U", "rnn0.bwd.U", "rnn1.fwd.U", "rnn1.bwd.U"}) {
    const NamedTensor* mask = ck.find(std::string("prune.mask.") + name);
    const NamedTensor* w = ck.find(name);
    ASSERT_TRUE(mask && w) << name;
    for (size_t i = 0; i < mask->data.size(); ++i)
      if (mask->data[i] == 0.0f) ASSERT_EQ(w->data[i], 0.0f) << name << "[" << i << "]";
  }

  Config first = pruned_config(temp.path() / "split", manifest);
  first.train.max_steps = 7;  // between the updates at 5 and 8
  Trainer(first).run();
  Config second = pruned_config(temp.path() / "split", manifest);
  second.run.resume = "required";
  const TrainSummary rest = Trainer(second).run();
  EXPECT_EQ(rest.steps, full.steps);
  testing::expect_same_tensors(temp.path() / "full" / "last.ckpt",
                               temp.path() / "split" / "last.ckpt");
}

}  // namespace
}  // namespace ds2
