// Dynamic loss scaling (train.loss_scaling=dynamic) on the CPU engine: exact against a run
// without it, overflow from an absurd start halves step by step, growth after clean steps up to
// 2^24, and the boundary at scale 1 where an overflow is a plain non-finite step.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "support/fsdd_fixture.h"
#include "support/loss_scaling_runs.h"
#include "support/run_command.h"
#include "support/temp_dir.h"
#include "train/trainer.h"

namespace ds2 {
namespace {
namespace fs = std::filesystem;
using testing::count_of;

TEST(LossScaling, WeightsBitIdenticalToARunWithoutScaling) {
  TempDir temp;
  testing::expect_bit_identical_to_unscaled(temp.path(), "cpu");
}

TEST(LossScaling, OverflowHalvesTheScaleUntilTrainingProceeds) {
  TempDir temp;
  testing::expect_overflow_halvings(temp.path(), "cpu");
}

const char* kSmall =
    "run: {seed: 4, threads: 1, device: cpu, tensorboard: false}\n"
    "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
    "model: {conv: [], rnn_layers: 1, rnn_hidden: 24}\n"
    "optim: {name: adam, lr: 0.003, schedule: constant}\n"
    "train: {epochs: 4, batch_size: 4, log_every: 1, loss_scaling: dynamic}\n";

TEST(LossScaling, GrowsAfterCleanStepsUpTo2To24) {
  TempDir temp;
  Config cfg = parse_config(kSmall, {"train.loss_scale_init=1048576",  // 2^20
                                     "train.loss_scale_growth_interval=2"});
  cfg.run.dir = (temp.path() / "run").string();
  cfg.data.train_manifest = testing::write_digit_manifest(temp.path(), "nicolas", {2, 4}, 5);
  const TrainSummary s = Trainer(cfg).run();
  ASSERT_EQ(s.steps, 4 * 3);
  ASSERT_EQ(s.overflow_steps, 0);
  const double cap = std::ldexp(1.0, 24);
  auto expected = [&](int64_t step) { return std::min(cap, std::ldexp(1.0, 20 + int(step / 2))); };
  const auto records = testing::train_records(cfg.run.dir);
  ASSERT_EQ(records.size(), 12u);
  for (const auto& r : records)
    EXPECT_EQ(r["loss_scale"].get<double>(), expected(r["step"].get<int64_t>())) << r.dump();
  EXPECT_EQ(s.loss_scale, cap);
  const std::string log = testing::train_log(cfg.run.dir);
  EXPECT_EQ(count_of(log, "loss scale: growth"), 4) << log;
  EXPECT_NE(
      log.find("loss scale: growth at step 2 after 2 clean steps, scale 1048576 -> 2097152\n"),
      std::string::npos)
      << log;
  EXPECT_NE(
      log.find("loss scale: growth at step 8 after 2 clean steps, scale 8388608 -> 16777216\n"),
      std::string::npos)
      << log;
  EXPECT_NE(log.find(" loss_scale 16777216\n"), std::string::npos) << log;
}

// Through `ds2 train` with DS2_FAULT=nan@0:2, which poisons the gradients of step 2 once (finite
// losses, NaN gradients: what an overflow looks like). Above scale 1 it is an overflow; at scale
// 1 it is the non-finite-step path. Either way the run of clean steps starts again.
TEST(LossScaling, AtScaleOneAnOverflowIsANonFiniteStep) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "nicolas", {2, 4}, 5);
  const fs::path config = temp.path() / "config.yaml";
  std::ofstream(config) << kSmall << "data: {train_manifest: " << manifest << "}\n";
  auto train = [&](const std::string& name, const std::string& init) {
    return testing::run_command("DS2_FAULT=nan@0:2 " + std::string(DS2_BINARY) + " train " +
                                testing::shell_quote(config.string()) +
                                " run.dir=" + testing::shell_quote((temp.path() / name).string()) +
                                " train.loss_scale_init=" + init +
                                " train.loss_scale_growth_interval=3");
  };
  // Scale 4: clean steps 0 and 1, the overflow halves to 2 and restarts the count, so the next
  // growth comes 3 clean steps later, after step 5 (then after 8 and 11: 16 at the end).
  auto above = train("above", "4");
  ASSERT_EQ(above.code, 0) << above.output;
  EXPECT_NE(above.output.find("loss scale: overflow at step 2, scale 4 -> 2\n"), std::string::npos)
      << above.output;
  EXPECT_NE(above.output.find("loss scale: growth at step 5 after 3 clean steps, scale 2 -> 4\n"),
            std::string::npos)
      << above.output;
  EXPECT_EQ(above.output.find("skip step"), std::string::npos) << above.output;
  EXPECT_NE(above.output.find("done: 11 steps, 4 epochs"), std::string::npos) << above.output;
  EXPECT_NE(above.output.find("skipped steps 0, overflow steps 1 (loss scale 16)"),
            std::string::npos)
      << above.output;

  // Scale 1: without the skip, growth to 2 would have come after step 3; with it, after step 5
  // (then after 8 and 11: 8 at the end).
  auto at_one = train("at-one", "1");
  ASSERT_EQ(at_one.code, 0) << at_one.output;
  EXPECT_EQ(at_one.output.find("loss scale: overflow"), std::string::npos) << at_one.output;
  EXPECT_NE(at_one.output.find("skip step 2: non-finite loss or gradient"), std::string::npos)
      << at_one.output;
  EXPECT_NE(at_one.output.find("loss scale: growth at step 5 after 3 clean steps, scale 1 -> 2\n"),
            std::string::npos)
      << at_one.output;
  EXPECT_NE(at_one.output.find("skipped steps 1, overflow steps 0 (loss scale 8)"),
            std::string::npos)
      << at_one.output;
}

}  // namespace
}  // namespace ds2
