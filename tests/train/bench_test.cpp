// `ds2 bench step` on the CPU engine (train/bench.h): a tiny model's step is timed and reported
// with its shape, and with prune.density < 1 the recurrent matrices are pruned to the final
// density before timing (the report says how many weights were kept).
#include "train/bench.h"

#include <gtest/gtest.h>

#include <string>

#include "train/config.h"

namespace ds2 {
namespace {

const char* kConfig =
    "run: {seed: 3, threads: 1, device: cpu}\n"
    "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
    "model: {conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 2,"
    " rnn_hidden: 32, rnn_type: rnn}\n"
    "optim: {name: adam, lr: 0.01}\n"
    "train: {batch_size: 3}\n";

StepBenchOptions tiny_options() {
  StepBenchOptions o;
  o.seconds = 0.5;
  o.warmup = 0;
  o.steps = 2;
  return o;
}

TEST(BenchStep, TimesTheStepAndReportsItsShape) {
  const StepBenchResult r = bench_step(parse_config(kConfig), tiny_options());
  EXPECT_EQ(r.batch, 3);
  EXPECT_EQ(r.frames, 49);  // 4000 samples: 1 + (4000 - 160) / 80 windows of 20 ms every 10 ms
  EXPECT_GT(r.ms_per_step, 0.0);
  EXPECT_NEAR(r.audio_seconds_per_s, 3 * 0.5 * 1000.0 / r.ms_per_step,
              1e-6 * r.audio_seconds_per_s);
  EXPECT_TRUE(r.model_note.empty());
  const std::string report = format_step_bench(r);
  EXPECT_NE(report.find("batch 3 x 0.5 s audio"), std::string::npos) << report;
  EXPECT_EQ(report.find("prune:"), std::string::npos) << report;
}

TEST(BenchStep, PrunesTheRecurrentMatricesFirstWhenAsked) {
  const StepBenchResult r =
      bench_step(parse_config(kConfig, {"prune.density=0.25", "prune.end_step=1"}), tiny_options());
  // 2 layers x 2 directions x 32 x 32 weights, a quarter kept.
  EXPECT_EQ(r.model_note,
            "prune: step 1, density 0.2500 (target 0.2500), 1024 of 4096 recurrent weights kept");
  EXPECT_NE(format_step_bench(r).find(r.model_note), std::string::npos);
}

}  // namespace
}  // namespace ds2
