#include "train/trainer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/fsdd_fixture.h"
#include "support/temp_dir.h"
#include "train/acoustic_model.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"

namespace ds2 {
namespace {

// A small model for the three-digit manifest in `dir`, 40 epochs of 3 steps, with `overrides`.
Config three_digits_run(const std::filesystem::path& dir, const std::string& manifest,
                        const std::vector<std::string>& overrides) {
  Config cfg = parse_config(
      "run: {seed: 3, threads: 2}\n"
      "features: {sample_rate: 8000, type: mel, n_mels: 32}\n"
      "model: {conv: [{channels: 8, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 1,"
      " rnn_hidden: 48}\n"
      "optim: {lr: 0.003, schedule: constant}\n"
      "train: {epochs: 40, batch_size: 8, log_every: 3}\n",
      overrides);
  cfg.run.dir = (dir / "run").string();
  cfg.data.train_manifest = manifest;
  cfg.data.dev_manifest = manifest;
  return cfg;
}

// A small model on real recordings of three digits: the loss must fall well below its start
// and the checkpoint must round-trip into the same transcriptions.
TEST(Trainer, LossFallsOnRealSpeechAndCheckpointRoundTrips) {
  TempDir temp;
  const std::filesystem::path& dir = temp.path();
  const std::string manifest = testing::write_digit_manifest(dir, "george", {1, 2, 7}, 8);
  Config cfg = three_digits_run(dir, manifest, {});
  cfg.train.eval_every = 0;
  TrainSummary s = Trainer(cfg).run();
  EXPECT_EQ(s.steps, 40 * 3);
  EXPECT_EQ(s.skipped_steps, 0);
  EXPECT_GT(s.first_loss, 5.0);
  EXPECT_LT(s.last_loss, 0.5 * s.first_loss);
  ASSERT_TRUE(std::filesystem::exists(dir / "run" / "best.ckpt"));
  ASSERT_TRUE(std::filesystem::exists(dir / "run" / "config.yaml"));
  EXPECT_GE(s.best_dev_wer, 0.0);
  EXPECT_LT(s.best_dev_wer, 0.5);  // it learned something about these three words

  // The checkpoint rebuilds the same model: evaluating it reproduces the recorded best WER.
  AcousticModel am = AcousticModel::load((dir / "run" / "best.ckpt").string());
  DatasetChecks checks = am.dataset_checks();
  Dataset ds = load_dataset(manifest, checks, 2);
  EvalResult r = evaluate(am, ds, 5, 2);
  EXPECT_DOUBLE_EQ(r.words.rate(), s.best_dev_wer);
  // Batch size never changes a result.
  EXPECT_DOUBLE_EQ(evaluate(am, ds, 1, 1).words.rate(), r.words.rate());
}

// A unidirectional model with a lookahead convolution (model.lookahead) trains, and its
// checkpoint, lookahead weights included, rebuilds the same model.
TEST(Trainer, UnidirectionalModelWithLookaheadLearnsAndRoundTrips) {
  TempDir temp;
  const std::filesystem::path& dir = temp.path();
  const std::string manifest = testing::write_digit_manifest(dir, "george", {1, 2, 7}, 8);
  const Config cfg = three_digits_run(
      dir, manifest,
      {"run.seed=4", "model.rnn_layers=2", "model.bidirectional=false",
       "model.rnn_batch_norm=false", "model.rnn_residual=true", "model.lookahead=4"});
  TrainSummary s = Trainer(cfg).run();
  EXPECT_EQ(s.skipped_steps, 0);
  EXPECT_LT(s.last_loss, 0.5 * s.first_loss);
  AcousticModel am = AcousticModel::load((dir / "run" / "best.ckpt").string());
  bool has_lookahead = false;
  for (const NamedTensor& t : am.to_checkpoint().tensors)
    has_lookahead = has_lookahead || (t.name == "lookahead.weight" && t.data.size() == 5 * 48);
  EXPECT_TRUE(has_lookahead);
  Dataset ds = load_dataset(manifest, am.dataset_checks(), 2);
  EXPECT_DOUBLE_EQ(evaluate(am, ds, 5, 2).words.rate(), s.best_dev_wer);
}

// train.init_from starts a new run from a checkpoint's weights (fine-tuning): its first loss is
// the trained model's, not a fresh one's; a checkpoint of another model shape is refused naming
// the key that differs.
TEST(Trainer, InitFromStartsANewRunFromACheckpoint) {
  TempDir temp;
  const std::filesystem::path& dir = temp.path();
  const std::string manifest = testing::write_digit_manifest(dir, "nicolas", {4, 6}, 8);
  const std::string yaml =
      "run: {seed: 5, threads: 2}\n"
      "features: {sample_rate: 8000, type: mel, n_mels: 24}\n"
      "model: {conv: [{channels: 8, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 1,"
      " rnn_hidden: 32}\n"
      "optim: {lr: 0.003, schedule: constant}\n"
      "train: {epochs: 25, batch_size: 8}\n";
  Config first = parse_config(yaml);
  first.run.dir = (dir / "first").string();
  first.data.train_manifest = manifest;
  first.data.dev_manifest = manifest;
  const TrainSummary a = Trainer(first).run();
  ASSERT_LT(a.last_loss, 0.5 * a.first_loss);

  Config second = parse_config(yaml);
  second.run.dir = (dir / "second").string();
  second.data.train_manifest = manifest;
  second.train.epochs = 1;
  second.run.seed = 6;  // another seed: the weights must come from the checkpoint regardless
  second.train.init_from = (dir / "first" / "last.ckpt").string();
  const TrainSummary b = Trainer(second).run();
  EXPECT_EQ(b.steps, 2);  // a fresh schedule, not the first run's step count
  EXPECT_LT(b.first_loss, 0.5 * a.first_loss);
  EXPECT_LT(b.first_loss, 2.0 * a.last_loss + 1.0);
  std::ifstream log(dir / "second" / "train.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("init: weights and statistics from " + second.train.init_from),
            std::string::npos)
      << text;

  Config wider = parse_config(yaml);
  wider.run.dir = (dir / "wider").string();
  wider.data.train_manifest = manifest;
  wider.model.rnn_hidden = 48;
  wider.train.init_from = second.train.init_from;
  try {
    Trainer(wider).run();
    FAIL() << "a checkpoint of another width was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.init_from"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model.rnn_hidden"), std::string::npos) << e.what();
  }
}

// augment.noise_manifest, written relative to the config file, mixes recordings into the training
// audio (here other speakers' digits as babble) and the run says where its noise came from.
TEST(Trainer, MixesNoiseFromANoiseManifest) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "lucas", {3, 5}, 4);
  std::filesystem::create_directories(temp.path() / "noise");
  testing::write_digit_manifest(temp.path() / "noise", "nicolas", {1, 9}, 2, "noise.jsonl");
  const std::string config = (temp.path() / "noisy.yaml").string();
  std::ofstream(config) << "features: {sample_rate: 8000}\n"
                           "augment: {noise_prob: 1.0, noise_snr_min_db: 5, noise_snr_max_db: 15,"
                           " noise_manifest: noise/noise.jsonl}\n"
                           "model: {conv: [], rnn_layers: 1, rnn_hidden: 16}\n"
                           "train: {epochs: 1, batch_size: 4}\n"
                           "run: {tensorboard: false}\n";
  Config cfg = load_config(config);
  EXPECT_EQ(cfg.augment.noise_manifest, (temp.path() / "noise" / "noise.jsonl").string());
  cfg.run.dir = (temp.path() / "run").string();
  cfg.data.train_manifest = manifest;
  TrainSummary s = Trainer(cfg).run();
  EXPECT_EQ(s.steps, 2);
  EXPECT_EQ(s.skipped_steps, 0);
  std::ifstream log(temp.path() / "run" / "train.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("augment: noise from " + cfg.augment.noise_manifest), std::string::npos)
      << text;

  // A manifest whose recording is missing stops the run naming the file.
  std::ofstream(temp.path() / "noise" / "bad.jsonl") << "{\"audio_filepath\": \"gone.wav\"}\n";
  cfg.augment.noise_manifest = (temp.path() / "noise" / "bad.jsonl").string();
  cfg.run.dir = (temp.path() / "run2").string();
  try {
    Trainer(cfg).run();
    FAIL() << "a missing noise recording was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gone.wav"), std::string::npos) << e.what();
  }
}

// Mixed precision is a CUDA feature: the CPU backend refuses it by key instead of training in fp32
// while the config says bf16.
TEST(Trainer, CpuBackendRefusesBf16Precision) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "lucas", {3}, 2);
  Config cfg = parse_config(
      "features: {sample_rate: 8000}\nmodel: {conv: [], rnn_layers: 1, rnn_hidden: 8}\n"
      "train: {epochs: 1, batch_size: 2, precision: bf16}\nrun: {device: cpu, tensorboard: "
      "false}\n");
  cfg.run.dir = (temp.path() / "run").string();
  cfg.data.train_manifest = manifest;
  try {
    Trainer(cfg).run();
    FAIL() << "the CPU backend accepted train.precision bf16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("key 'train.precision': bf16 needs the CUDA backend"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_config("train: {precision: fp16}\n"), Error);
}

}  // namespace
}  // namespace ds2

namespace ds2 {
namespace {

// Global feature statistics are computed from the training set, stored in the checkpoint and
// used again when the checkpoint is loaded.
TEST(Trainer, GlobalNormalizationStatisticsTravelWithTheCheckpoint) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "yweweler", {0, 8}, 5);
  Config cfg = parse_config(
      "features: {sample_rate: 8000, normalize: global}\n"
      "model: {conv: [], rnn_layers: 1, rnn_hidden: 16, bidirectional: false}\n"
      "train: {epochs: 2, batch_size: 4}\n");
  cfg.run.dir = (temp.path() / "run").string();
  cfg.data.train_manifest = manifest;
  cfg.data.dev_manifest = manifest;
  TrainSummary s = Trainer(cfg).run();
  EXPECT_EQ(s.steps, 2 * 3);
  Checkpoint ck = load_checkpoint((temp.path() / "run" / "best.ckpt").string());
  ASSERT_TRUE(ck.metadata.count("feature_mean"));
  AcousticModel am = AcousticModel::load((temp.path() / "run" / "best.ckpt").string());
  ASSERT_EQ(static_cast<int>(am.featurizer->global_mean().size()), am.featurizer->num_features());
  // Log power of real speech has a mean far from zero and a spread of several nats per bin.
  EXPECT_LT(am.featurizer->global_mean()[10], -1.0f);
  EXPECT_GT(am.featurizer->global_stddev()[10], 0.5f);
  DatasetChecks checks = am.dataset_checks();
  Dataset ds = load_dataset(manifest, checks, 1);
  EXPECT_DOUBLE_EQ(evaluate(am, ds, 3, 1).words.rate(), s.best_dev_wer);
}

}  // namespace
}  // namespace ds2
