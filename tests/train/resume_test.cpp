// Exact resume: a run stopped at a checkpoint, or killed at any moment, and resumed ends with
// weights bit-identical to an uninterrupted run (same machine, same thread count).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include "core/error.h"
#include "support/checkpoint_compare.h"
#include "support/fsdd_fixture.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace ds2 {
namespace {
namespace fs = std::filesystem;

const char* kConfig =
    "run: {seed: 4, threads: 1, device: cpu}\n"
    "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
    "augment: {speed_min: 0.9, speed_max: 1.1, time_masks: 1, freq_masks: 1}\n"
    "model: {conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 1,"
    " rnn_hidden: 24, dropout: 0.1}\n"
    "optim: {name: adam, lr: 0.003, warmup_steps: 3, schedule: cosine}\n"
    "train: {epochs: 8, batch_size: 4, log_every: 1, eval_every: 2, ema_decay: 0.9}\n";

Config make_config(const fs::path& run, const std::string& manifest) {
  Config cfg = parse_config(kConfig);
  cfg.run.dir = run.string();
  cfg.data.train_manifest = manifest;
  cfg.data.dev_manifest = manifest;
  return cfg;
}

void expect_same_weights(const fs::path& a, const fs::path& b) {
  testing::expect_same_tensors(a, b);
  EXPECT_EQ(load_checkpoint(a.string()).meta("train.step"),
            load_checkpoint(b.string()).meta("train.step"));
}

TEST(Resume, StoppedRunContinuesBitForBit) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "nicolas", {2, 4}, 5);
  // train.max_steps shortens the cosine schedule, so this pair of runs uses a constant one.
  Config full_cfg = make_config(temp.path() / "full", manifest);
  full_cfg.optim.schedule = "constant";
  TrainSummary full = Trainer(full_cfg).run();
  ASSERT_EQ(full.steps, 8 * 3);

  // The same run stopped after step 5 (mid-epoch; its last checkpoint is step 5's), then
  // continued by a second `train` on the same folder.
  Config first = make_config(temp.path() / "split", manifest);
  first.optim.schedule = "constant";
  first.train.max_steps = 5;
  Trainer(first).run();
  ASSERT_TRUE(fs::exists(temp.path() / "split" / "latest"));
  Config second = make_config(temp.path() / "split", manifest);
  second.optim.schedule = "constant";
  second.run.resume = "required";
  TrainSummary rest = Trainer(second).run();
  EXPECT_EQ(rest.steps, full.steps);
  expect_same_weights(temp.path() / "full" / "last.ckpt", temp.path() / "split" / "last.ckpt");
  EXPECT_DOUBLE_EQ(rest.best_dev_wer, full.best_dev_wer);
}

// With pruning, the masks and the schedule's last target are state: a resumed run that started
// from all-ones masks would let pruned weights grow back until the next update. The split (step
// 6) falls between mask updates (2, 5, 8, 11, 14), with weights already pruned.
TEST(Resume, PruningContinuesBitForBit) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "nicolas", {2, 4}, 5);
  auto config = [&](const char* name) {
    Config cfg = make_config(temp.path() / name, manifest);
    cfg.optim.schedule = "constant";
    cfg.prune.density = 0.3;
    cfg.prune.start_step = 2;
    cfg.prune.end_step = 14;
    cfg.prune.every = 3;
    return cfg;
  };
  const TrainSummary full = Trainer(config("full")).run();
  Config first = config("split");
  first.train.max_steps = 6;
  ASSERT_EQ(Trainer(first).run().steps, 6);
  const Checkpoint saved = load_checkpoint((temp.path() / "split" / "last.ckpt").string());
  ASSERT_NE(saved.find("prune.mask.rnn0.fwd.U"), nullptr);
  Config second = config("split");
  second.run.resume = "required";
  const TrainSummary rest = Trainer(second).run();
  EXPECT_EQ(rest.steps, full.steps);
  EXPECT_EQ(rest.recurrent_density, full.recurrent_density);
  EXPECT_LT(full.recurrent_density, 0.31);
  expect_same_weights(temp.path() / "full" / "last.ckpt", temp.path() / "split" / "last.ckpt");
  EXPECT_DOUBLE_EQ(rest.best_dev_wer, full.best_dev_wer);
}

// With dynamic loss scaling the scale and its run of clean steps are part of the state: a
// resumed run that restarted at loss_scale_init would overflow again where the uninterrupted run
// did not, and skip other batches. The start (2^127) overflows for a few steps, growth is asked
// for every 3 clean steps (and refused above 2^24), and the split falls after the overflows.
TEST(Resume, DynamicLossScalingContinuesBitForBit) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "nicolas", {2, 4}, 5);
  auto config = [&](const char* name) {
    Config cfg = make_config(temp.path() / name, manifest);
    cfg.optim.schedule = "constant";
    cfg.train.loss_scaling = "dynamic";
    cfg.train.loss_scale_init = std::ldexp(1.0, 127);
    cfg.train.loss_scale_growth_interval = 3;
    return cfg;
  };
  const TrainSummary full = Trainer(config("full")).run();
  ASSERT_GT(full.overflow_steps, 0);
  ASSERT_LT(full.overflow_steps, 8 * 3 - 5);

  Config first = config("split");
  first.train.max_steps = 5;
  const TrainSummary before = Trainer(first).run();
  ASSERT_EQ(before.steps, 5);
  ASSERT_GT(before.overflow_steps, 0);  // the split comes after overflows
  const Checkpoint saved = load_checkpoint((temp.path() / "split" / "last.ckpt").string());
  char scale[400];
  std::snprintf(scale, sizeof scale, "%.0f", before.loss_scale);
  EXPECT_EQ(saved.meta("train.loss_scale"), scale);
  EXPECT_EQ(saved.meta("train.overflow_steps"), std::to_string(before.overflow_steps));
  Config second = config("split");
  second.run.resume = "required";
  const TrainSummary rest = Trainer(second).run();
  EXPECT_EQ(rest.steps, full.steps);
  EXPECT_EQ(rest.overflow_steps, full.overflow_steps);
  EXPECT_EQ(rest.loss_scale, full.loss_scale);
  expect_same_weights(temp.path() / "full" / "last.ckpt", temp.path() / "split" / "last.ckpt");
  const Checkpoint a = load_checkpoint((temp.path() / "full" / "last.ckpt").string());
  const Checkpoint b = load_checkpoint((temp.path() / "split" / "last.ckpt").string());
  for (const char* key : {"train.loss_scale", "train.loss_scale_clean_steps",
                          "train.overflow_steps", "train.batches_done", "train.epoch"})
    EXPECT_EQ(a.meta(key), b.meta(key)) << key;
}

TEST(Resume, RefusesAChangedModelAndNamesTheKey) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "nicolas", {2}, 4);
  Config cfg = make_config(temp.path() / "run", manifest);
  cfg.train.max_steps = 2;
  Trainer(cfg).run();
  Config changed = make_config(temp.path() / "run", manifest);
  changed.model.rnn_hidden = 32;
  try {
    Trainer(changed).run();
    FAIL() << "resume with another model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.rnn_hidden"), std::string::npos) << e.what();
  }
  Config required = make_config(temp.path() / "empty", manifest);
  required.run.resume = "required";
  EXPECT_THROW(Trainer(required).run(), Error);
}

// The real thing: `ds2 train` killed with SIGKILL at random moments (during steps, evaluations
// and checkpoint writes alike) and started again until it finishes. `extra_config`: more YAML.
void survive_sigkills(const std::string& extra_config) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "nicolas", {2, 4}, 5);
  const fs::path config = temp.path() / "config.yaml";
  std::ofstream(config) << kConfig << extra_config << "data: {train_manifest: " << manifest
                        << ", dev_manifest: " << manifest << "}\n";
  // Runs `ds2 train` on `dir`; kills it `kill_after_s` after the start (0: lets it finish).
  // `first_checkpoint_s`, when given, gets the time at which RUN/latest first appeared.
  auto run_train = [&](const fs::path& dir, double kill_after_s, double* first_checkpoint_s) {
    const auto start = std::chrono::steady_clock::now();
    const bool had_checkpoint = fs::exists(dir / "latest");
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string dir_arg = "run.dir=" + dir.string();
      const int null_fd = ::open("/dev/null", O_WRONLY);
      dup2(null_fd, 1);
      dup2(null_fd, 2);
      execl(DS2_BINARY, DS2_BINARY, "train", config.c_str(), dir_arg.c_str(), (char*)nullptr);
      _exit(127);
    }
    int status = 0;
    for (;;) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (first_checkpoint_s && *first_checkpoint_s < 0 && !had_checkpoint &&
          fs::exists(dir / "latest"))
        *first_checkpoint_s = elapsed;
      if (waitpid(pid, &status, WNOHANG) == pid) return status;
      if (kill_after_s > 0 && elapsed >= kill_after_s) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  const auto start = std::chrono::steady_clock::now();
  double first_checkpoint_s = -1;
  const int clean = run_train(temp.path() / "full", 0, &first_checkpoint_s);
  ASSERT_TRUE(WIFEXITED(clean) && WEXITSTATUS(clean) == 0);
  const double clean_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_GT(first_checkpoint_s, 0);

  // Kill points from just before the first checkpoint of a run (start-up is most of it) to
  // a quarter of the rest; each restart resumes from the newest checkpoint, so the run creeps
  // forward between kills.
  std::mt19937 rng(7);
  int kills = 0, kills_after_a_checkpoint = 0;
  bool finished = false;
  for (int attempt = 0; attempt < 80 && !(finished && kills_after_a_checkpoint >= 2); ++attempt) {
    if (finished) {
      // The machine got faster than the clean run was (other tests ended): the run finished
      // before it was killed often enough to prove anything. Start over from nothing.
      fs::remove_all(temp.path() / "killed");
      finished = false;
      kills = kills_after_a_checkpoint = 0;
    }
    const double delay = std::uniform_real_distribution<double>(
        0.8 * first_checkpoint_s, first_checkpoint_s + (clean_s - first_checkpoint_s) / 4)(rng);
    const int status = run_train(temp.path() / "killed", delay, nullptr);
    if (WIFEXITED(status)) {
      ASSERT_EQ(WEXITSTATUS(status), 0) << "a resumed run failed";
      finished = true;
    } else {
      ++kills;
      if (fs::exists(temp.path() / "killed" / "latest")) ++kills_after_a_checkpoint;
    }
  }
  if (!finished) ASSERT_EQ(WEXITSTATUS(run_train(temp.path() / "killed", 0, nullptr)), 0);
  std::cout << "SIGKILLed " << kills << " times (" << kills_after_a_checkpoint
            << " after a checkpoint existed)\n";
  EXPECT_GE(kills_after_a_checkpoint, 2) << kills << " kills: the test proves too little";
  expect_same_weights(temp.path() / "full" / "last.ckpt", temp.path() / "killed" / "last.ckpt");
}

TEST(Resume, SurvivesSigkillAtRandomMoments) {
  survive_sigkills("");
}

// Masks are updated at steps 2, 5, ..., 14: kills land before, between and after updates.
TEST(Resume, SurvivesSigkillAtRandomMomentsWhilePruning) {
  survive_sigkills("prune: {density: 0.3, start_step: 2, end_step: 14, every: 3}\n");
}

}  // namespace
}  // namespace ds2
