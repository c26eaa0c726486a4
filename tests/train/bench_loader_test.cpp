// `ds2 bench loader` (train/bench_loader.h): the training manifest's batches come through the
// real loader, every utterance once, with the audio they hold, at the rate the wall clock gave;
// a hold per batch (a stand-in training step) is reported with the rate the holds alone allow.
#include "train/bench_loader.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"

namespace ds2 {
namespace {

TEST(BenchLoader, DeliversTheManifestsBatchesAndTimesThem) {
  TempDir dir;
  const std::string manifest = testing::write_connected_digits(dir.path(), "george", 12, 4);
  const Config cfg = parse_config(
      "run: {seed: 2, device: cpu}\n"
      "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
      "augment: {speed_min: 0.9, speed_max: 1.1, noise_prob: 0.5}\n"
      "model: {conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 1,"
      " rnn_hidden: 16}\n"
      "train: {batch_size: 5}\n",
      {"data.train_manifest=" + manifest, "data.loader_threads=2", "data.prefetch_batches=1"});
  LoaderBenchOptions o;
  o.hold_ms = 2;
  const LoaderBenchResult r = bench_loader(cfg, o);
  EXPECT_EQ(r.batches, 3);  // 12 utterances in batches of 5
  EXPECT_EQ(r.utterances, 12);
  EXPECT_EQ(r.threads, 2);
  EXPECT_EQ(r.slots, 3);  // every thread a slot, and the one the trainer holds
  EXPECT_GT(r.audio_seconds, 12 * 0.3);
  EXPECT_NEAR(r.audio_seconds_per_s, r.audio_seconds / r.wall_seconds,
              1e-9 * r.audio_seconds_per_s);
  EXPECT_GE(r.wall_seconds, 3 * 0.002);
  const std::string report = format_loader_bench(r);
  EXPECT_NE(report.find("3 batches, 12 utterances"), std::string::npos) << report;
  EXPECT_NE(report.find("each batch held 2.0 ms"), std::string::npos) << report;
  EXPECT_NE(report.find("the holds alone allow"), std::string::npos) << report;

  o.batches = 2;
  EXPECT_EQ(bench_loader(cfg, o).batches, 2);
  o.batches = 0;
  EXPECT_THROW(bench_loader(cfg, o), Error);
}

}  // namespace
}  // namespace ds2
