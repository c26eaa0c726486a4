// Data-parallel training on the CPU backend, launched as a user would (mpirun -np N ds2 train):
// the loss curve of 1, 2 and 4 ranks at one global batch agrees, ranks keep identical weights,
// and a rank that dies or hangs, or runs another configuration, ends the job with a message
// naming it. Skips where the build has no MPI or mpirun is missing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/device.h"
#include "support/fsdd_fixture.h"
#include "support/mpi_session_dir.h"
#include "support/run_command.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"

namespace ds2 {
namespace {
namespace fs = std::filesystem;
using testing::run_command;
using testing::shell_quote;

// No batch norm (whose statistics would come from each rank's share of the batch), no dropout and
// no augmentation: the ranks' summed gradients then equal one rank's up to summation order.
const char* kConfig =
    "run: {seed: 3, threads: 1, device: cpu, tensorboard: false}\n"
    "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
    "model: {conv: [], rnn_layers: 2, rnn_hidden: 32, rnn_batch_norm: false, dropout: 0}\n"
    "optim: {name: adam, lr: 0.003, schedule: constant}\n"
    "train: {epochs: 20, batch_size: 16, max_steps: 20, log_every: 1, eval_every: 0}\n"
    "dist: {check_every: 5, bucket_mb: 0.02}\n";

class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef DS2_HAVE_MPI
    GTEST_SKIP() << "this ds2 was built without MPI";
#endif
    if (run_command("mpirun --version").code != 0) GTEST_SKIP() << "mpirun is not installed";
    manifest_ = testing::write_digit_manifest(temp_.path(), "jackson", {0, 1, 2, 3, 4, 5}, 6);
    config_ = (temp_.path() / "dp.yaml").string();
    std::ofstream(config_) << kConfig << "data: {train_manifest: " << manifest_ << "}\n";
  }

  // `ds2 train` on `ranks` ranks (plain, without mpirun, for 1) into temp/NAME.
  testing::CommandResult train(int ranks, const std::string& name, const std::string& extra = "",
                               const std::string& env = "") {
    return run_command(env + " " + (ranks > 1 ? mpirun(ranks) : "") + DS2_BINARY + " train " +
                       shell_quote(config_) + " run.dir=" + shell_quote(dir(name)) + " " + extra);
  }

  // mpirun as CI can run it (root, more ranks than cores), in this test's own session folder;
  // `ranks` > 0 adds the rank count (0: the caller gives -np per program).
  std::string mpirun(int ranks = 0) const {
    return mpi_.env() + " mpirun --allow-run-as-root --oversubscribe " +
           (ranks > 0
                ? "--mca btl_vader_single_copy_mechanism none -np " + std::to_string(ranks) + " "
                : std::string());
  }

  void expect_same_curve(const std::string& device, std::vector<int> rank_counts, double tolerance);
  void expect_same_overflows(const std::string& device);

  std::string dir(const std::string& name) const {
    return (temp_.path() / name).string();
  }

  std::vector<double> losses(const std::string& name) const {
    std::vector<double> out;
    std::ifstream in(fs::path(dir(name)) / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j["event"] == "train") out.push_back(j["loss"].get<double>());
    }
    return out;
  }

  TempDir temp_;
  testing::MpiSessionDir mpi_;
  std::string manifest_, config_;
};

// 1 rank against 2 and 4 at global batch 16 on `device`; the largest relative loss difference
// allowed is `tolerance`.
void DataParallel::expect_same_curve(const std::string& device, std::vector<int> rank_counts,
                                     double tolerance) {
  const std::string where = "run.device=" + device;
  auto one = train(1, device + "1", where);
  ASSERT_EQ(one.code, 0) << one.output;
  const std::vector<double> base = losses(device + "1");
  ASSERT_EQ(base.size(), 20u);
  for (int ranks : rank_counts) {
    const std::string name = device + std::to_string(ranks);
    auto r = train(ranks, name, where);
    // dist.check_every=5 compares every rank's weight hash with rank 0's (an error otherwise).
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("data-parallel: " + std::to_string(ranks) + " ranks"),
              std::string::npos)
        << r.output;
    const std::vector<double> curve = losses(name);
    ASSERT_EQ(curve.size(), base.size()) << name;
    double worst = 0;
    for (size_t i = 0; i < base.size(); ++i)
      worst = std::max(worst, std::abs(curve[i] - base[i]) / std::abs(base[i]));
    std::cout << device << ", " << ranks << " ranks: largest relative loss difference to 1 rank "
              << worst << "\n";
    EXPECT_LT(worst, tolerance) << ranks << " ranks";
    // The run learned: the loss fell.
    EXPECT_LT(curve.back(), 0.8 * curve.front());
  }
}

TEST_F(DataParallel, LossCurveOfOneTwoAndFourRanksAgrees) {
  // Only the order of the gradient sums differs.
  expect_same_curve("cpu", {2, 4}, 1e-4);
}

TEST_F(DataParallel, GpuLossCurveOfOneTwoAndFourRanksAgrees) {
  const DeviceReport devices = query_devices();
  if (devices.cuda_devices < 2) GTEST_SKIP() << "needs 2 GPUs or more";
  std::vector<int> counts = {2};
  if (devices.cuda_devices >= 4) counts.push_back(4);
  // cuBLAS picks other kernels for other batch shapes, so sums differ a little more than on the
  // CPU; NCCL moves the gradients between GPUs.
  expect_same_curve("cuda", counts, 1e-3);
}

TEST_F(DataParallel, Bf16ReductionStaysCloseToFp32) {
  auto fp32 = train(2, "fp32");
  ASSERT_EQ(fp32.code, 0) << fp32.output;
  auto bf16 = train(2, "bf16", "dist.reduce_dtype=bf16");
  ASSERT_EQ(bf16.code, 0) << bf16.output;
  const std::vector<double> a = losses("fp32"), b = losses("bf16");
  ASSERT_EQ(a.size(), b.size());
  EXPECT_DOUBLE_EQ(a.front(), b.front());  // the first loss comes before any reduction
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / a[i]);
  std::cout << "bf16: largest relative loss difference to fp32 " << worst << "\n";
  EXPECT_GT(worst, 0.0);  // bf16 did round the gradients
  EXPECT_LT(worst, 0.05);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

TEST_F(DataParallel, ADeadRankEndsTheJobNamingIt) {
  const auto start = std::chrono::steady_clock::now();
  auto r = train(2, "dead", "dist.timeout_s=60", "DS2_FAULT=kill@1:3");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_LT(seconds_since(start), 50.0);  // mpirun notices the death; no timeout needed
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(host_name()), std::string::npos) << r.output;
}

TEST_F(DataParallel, AHungRankIsAbortedByTheWatchdog) {
  const auto start = std::chrono::steady_clock::now();
  auto r = train(2, "hung", "dist.timeout_s=2", "DS2_FAULT=hang@1:3");
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_LT(seconds_since(start), 50.0);
  EXPECT_NE(r.output.find("rank 0 on " + host_name() +
                          "): error: collective 'loss reduction' at step 3 did not finish "
                          "within 2 s (dist.timeout_s)"),
            std::string::npos)
      << r.output;
}

// A NaN in one rank's gradients reaches every rank through the allreduce: all skip that step, the
// run goes on, and the weights stay finite and identical everywhere (checked every step).
TEST_F(DataParallel, ANaNGradientOnOneRankSkipsTheStepOnEveryRank) {
  for (int ranks : {1, 2}) {
    const std::string name = "nan" + std::to_string(ranks);
    auto r = train(ranks, name, "dist.check_every=1",
                   "DS2_FAULT=nan@" + std::to_string(ranks - 1) + ":5");
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("skip step 5: non-finite loss or gradient"), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("done: 20 steps,"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("skipped steps 1,"), std::string::npos) << r.output;
    const std::vector<double> curve = losses(name);
    ASSERT_EQ(curve.size(), 20u);
    for (double loss : curve) EXPECT_TRUE(std::isfinite(loss));
    const Checkpoint ck = load_checkpoint((fs::path(dir(name)) / "last.ckpt").string());
    for (const NamedTensor& t : ck.tensors)
      for (float v : t.data) ASSERT_TRUE(std::isfinite(v)) << t.name;
  }
}

// Pruning masks are computed on every rank from its own copy of the weights, with no exchange:
// dist.check_every=1 proves the weights (masked after every update) stay identical across ranks.
TEST_F(DataParallel, PruningMasksAgreeOnEveryRank) {
  auto r = train(2, "prune2",
                 "prune.density=0.3 prune.start_step=2 prune.end_step=14 prune.every=4 "
                 "dist.check_every=1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("pruning: on, 4 recurrent matrices"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("prune: step 14, density"), std::string::npos) << r.output;
  const Checkpoint ck = load_checkpoint((fs::path(dir("prune2")) / "last.ckpt").string());
  for (const char* name : {"rnn0.fwd.U", "rnn0.bwd.U", "rnn1.fwd.U", "rnn1.bwd.U"}) {
    const NamedTensor* mask = ck.find(std::string("prune.mask.") + name);
    const NamedTensor* w = ck.find(name);
    ASSERT_TRUE(mask && w) << name;
    int64_t kept = 0;
    for (size_t i = 0; i < mask->data.size(); ++i) {
      kept += mask->data[i] == 1.0f;
      if (mask->data[i] == 0.0f) ASSERT_EQ(w->data[i], 0.0f) << name << "[" << i << "]";
    }
    EXPECT_EQ(kept, std::llround(0.3 * 32 * 32)) << name;
  }
}

// Global batches do not depend on the rank count: a run checkpointed by 2 ranks continues on 1
// (and the other way round) from the same position, saying so.
TEST_F(DataParallel, ResumesOnAnotherRankCount) {
  auto first = train(2, "switch", "train.max_steps=10 train.eval_every=5");
  ASSERT_EQ(first.code, 0) << first.output;
  auto second = train(1, "switch", "train.eval_every=5");
  ASSERT_EQ(second.code, 0) << second.output;
  EXPECT_NE(second.output.find("resume: the checkpoint was written by 2 ranks, this run has 1"),
            std::string::npos)
      << second.output;
  EXPECT_NE(second.output.find("at step 10"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("done: 20 steps"), std::string::npos) << second.output;
  // The resumed curve continues the uninterrupted one (1 rank all along) to within summation order.
  auto straight = train(1, "straight", "train.eval_every=5");
  ASSERT_EQ(straight.code, 0) << straight.output;
  const std::vector<double> a = losses("switch"), b = losses("straight");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * b[i]) << "step " << i + 1;
}

// Dynamic loss scaling decides on the norm of the allreduced gradients, which is the same on
// every rank: all ranks skip the same overflowing steps and hold the same scale. Global batch 7
// over 36 utterances leaves a last batch of 1 in every epoch, so rank 1 joins that step's
// allreduce without data (backward_without_data) and must unscale as rank 0 does; the scale
// never gets near 1 here (2^127 halves a few times; growth stops at 2^24), and the weights are
// compared every step.
void DataParallel::expect_same_overflows(const std::string& device) {
  const std::string extra =
      "run.device=" + device +
      " train.loss_scaling=dynamic train.loss_scale_init=1.7014118346046923e+38"
      " train.loss_scale_growth_interval=2 train.batch_size=7 dist.check_every=1";
  // "overflow steps N (loss scale 2^E)" of the summary line, as {N, E}.
  auto overflows = [](const std::string& output) {
    const size_t at = output.find("overflow steps ");
    EXPECT_NE(at, std::string::npos) << output;
    int n = -1, e = -1;
    if (at != std::string::npos)
      std::sscanf(output.c_str() + at, "overflow steps %d (loss scale 2^%d)", &n, &e);
    return std::make_pair(n, e);
  };
  auto one = train(1, device + "-scale1", extra);
  ASSERT_EQ(one.code, 0) << one.output;
  auto two = train(2, device + "-scale2", extra);
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_NE(two.output.find("loss scale: overflow at step 0, scale 2^127 -> 2^126"),
            std::string::npos)
      << two.output;
  EXPECT_NE(two.output.find("done: 20 steps,"), std::string::npos) << two.output;
  const auto [n2, e2] = overflows(two.output);
  std::cout << device << ": " << n2 << " overflow steps on 1 and 2 ranks\n";
  EXPECT_GT(n2, 0);
  EXPECT_EQ(e2, 127 - n2);
  // One rank overflows on the same steps: its sums differ from two ranks' only in order, a
  // relative 1e-7, against a factor of 2 between neighbouring scales.
  EXPECT_EQ(overflows(one.output), overflows(two.output)) << one.output << two.output;
}

TEST_F(DataParallel, LossScaleOverflowsAreDecidedAlikeOnEveryRank) {
  expect_same_overflows("cpu");
}

TEST_F(DataParallel, GpuLossScaleOverflowsAreDecidedAlikeOnEveryRank) {
  if (query_devices().cuda_devices < 2) GTEST_SKIP() << "needs 2 GPUs or more";
  expect_same_overflows("cuda");
}

TEST_F(DataParallel, ARankWithAnotherConfigIsRefusedNamingTheKey) {
  const std::string cmd = mpirun() + "-np 1 " + std::string(DS2_BINARY) + " train " +
                          shell_quote(config_) + " run.dir=" + shell_quote(dir("mismatch")) +
                          " : -np 1 " + DS2_BINARY + " train " + shell_quote(config_) +
                          " run.dir=" + shell_quote(dir("mismatch")) + " optim.lr=0.01";
  auto r = run_command(cmd);
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 1 on " + host_name() + ": key 'optim.lr' is 0.01"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace ds2
