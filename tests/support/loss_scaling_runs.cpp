#include "support/loss_scaling_runs.h"

#include <cstdio>

#include "support/fsdd_fixture.h"
#include "train/trainer.h"

namespace ds2::testing {
namespace fs = std::filesystem;

namespace {

// How the trainer logs a scale: the number up to 2^24, "2^k" above.
std::string scale_text(int exponent) {
  return exponent <= 24 ? std::to_string(int64_t{1} << exponent) : "2^" + std::to_string(exponent);
}

}  // namespace

void expect_bit_identical_to_unscaled(const fs::path& dir, const std::string& device) {
  const std::string manifest = write_digit_manifest(dir, "nicolas", {2, 4}, 5);
  // Everything that could break the exactness: batch norm, a conv layer, two recurrent layers,
  // dropout, augmentation, Adam, the weight average, and a clip that some steps exceed.
  auto config = [&](const std::string& name) {
    Config cfg = parse_config(
        "run: {seed: 4, threads: 1, tensorboard: false}\n"
        "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
        "augment: {speed_min: 0.9, speed_max: 1.1, time_masks: 1, freq_masks: 1}\n"
        "model: {conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 2,"
        " rnn_hidden: 24, dropout: 0.1}\n"
        "optim: {name: adam, lr: 0.003, schedule: constant, grad_clip: 40}\n"
        "train: {epochs: 6, batch_size: 4, log_every: 1, ema_decay: 0.9}\n");
    cfg.run.device = device;
    cfg.run.dir = (dir / name).string();
    cfg.data.train_manifest = manifest;
    return cfg;
  };
  const TrainSummary plain = Trainer(config("plain")).run();
  Config scaled_cfg = config("scaled");
  scaled_cfg.train.loss_scaling = "dynamic";
  scaled_cfg.train.loss_scale_init = 65536;
  scaled_cfg.train.loss_scale_growth_interval = 4;
  const TrainSummary scaled = Trainer(scaled_cfg).run();
  ASSERT_EQ(plain.steps, 6 * 3);
  ASSERT_EQ(scaled.steps, plain.steps);
  // The claim is about runs without overflow; a test whose scales overflow proves nothing.
  ASSERT_EQ(scaled.overflow_steps, 0);
  EXPECT_EQ(plain.skipped_steps, 0);
  EXPECT_EQ(scaled.skipped_steps, 0);
  EXPECT_EQ(plain.loss_scale, 1.0);
  // Growth every 4 clean steps: 2^16 -> 2^20 over 18 steps.
  EXPECT_EQ(scaled.loss_scale, std::ldexp(65536.0, static_cast<int>(scaled.steps / 4)));

  const auto a = train_records(dir / "plain"), b = train_records(dir / "scaled");
  ASSERT_EQ(a.size(), static_cast<size_t>(plain.steps));
  ASSERT_EQ(b.size(), a.size());
  int clipped = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    // The true norm (scaled norm / scale) and the loss are the plain run's, exactly.
    EXPECT_EQ(b[i]["grad_norm"].get<double>(), a[i]["grad_norm"].get<double>()) << "step " << i;
    EXPECT_EQ(b[i]["loss"].get<double>(), a[i]["loss"].get<double>()) << "step " << i;
    EXPECT_FALSE(a[i].contains("loss_scale"));
    EXPECT_EQ(b[i]["loss_scale"].get<double>(), std::ldexp(65536.0, static_cast<int>(i + 1) / 4));
    clipped += a[i]["grad_norm"].get<double>() > 40 ? 1 : 0;
  }
  // Both branches of the unscaling pass ran: unscale and clip, and unscale alone.
  EXPECT_GT(clipped, 0) << "no step was clipped";
  EXPECT_LT(clipped, static_cast<int>(a.size())) << "every step was clipped";
  std::printf("%s: %d of %zu steps clipped, loss scale 2^16 -> 2^%d\n", device.c_str(), clipped,
              a.size(), static_cast<int>(std::log2(scaled.loss_scale)));
  expect_same_tensors(dir / "plain" / "last.ckpt", dir / "scaled" / "last.ckpt");
}

void expect_overflow_halvings(const fs::path& dir, const std::string& device) {
  // The largest scale a float holds: with the mean loss's gradients (at most 1 per logit) even
  // 2^120 leaves this small model's gradients below the float limit.
  const int kStart = 127;
  // One utterance, no dropout, no augmentation: every step sees the same batch and a skipped
  // step changes nothing, so the probe below predicts the run's first update.
  const std::string manifest = write_digit_manifest(dir, "george", {7}, 1);
  Config cfg = parse_config(
      "run: {seed: 2, threads: 1, tensorboard: false}\n"
      "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
      "model: {conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 2,"
      " rnn_hidden: 24}\n"
      "optim: {name: adam, lr: 0.003, schedule: constant}\n"
      "train: {epochs: 500, max_steps: 4, batch_size: 1, log_every: 1, eval_every: 1000,"
      " loss_scaling: dynamic, loss_scale_growth_interval: 2}\n");
  cfg.run.device = device;
  cfg.run.dir = (dir / "run").string();
  cfg.data.train_manifest = manifest;
  cfg.train.loss_scale_init = std::ldexp(1.0, kStart);
  // Overflow steps do not count as non-finite steps: more of them than this in a row must not
  // stop the run.
  cfg.train.max_consecutive_skips = 2;

  const int halvings = halvings_until_finite(cfg, kStart);
  std::printf("%s: gradients at loss scale 2^%d are finite after %d halvings (2^%d)\n",
              device.c_str(), kStart, halvings, kStart - halvings);
  ASSERT_GT(halvings, cfg.train.max_consecutive_skips)
      << "2^" << kStart << " overflowed too little";
  ASSERT_LT(halvings, kStart);

  const TrainSummary s = Trainer(cfg).run();
  EXPECT_EQ(s.steps, 4);
  EXPECT_EQ(s.skipped_steps, 0);
  const std::string log = train_log(cfg.run.dir);
  // Exactly the probe's halvings before the first update, one a step, each logged.
  EXPECT_EQ(count_of(log, "loss scale: overflow at step 0,"), halvings) << log;
  for (int i = 0; i < halvings; ++i)
    EXPECT_NE(log.find("loss scale: overflow at step 0, scale " + scale_text(kStart - i) + " -> " +
                       scale_text(kStart - 1 - i) + "\n"),
              std::string::npos)
        << "halving " << i;
  // Later steps may overflow again at the edge (the weights moved); each of those halves the
  // scale too. Growth (every 2 clean steps) stops at 2^24, far below, so nothing else moves it.
  EXPECT_EQ(count_of(log, "loss scale: overflow at step"), s.overflow_steps);
  EXPECT_GE(s.overflow_steps, halvings);
  EXPECT_EQ(count_of(log, "loss scale: growth"), 0);
  EXPECT_EQ(s.loss_scale, std::ldexp(1.0, kStart - static_cast<int>(s.overflow_steps)));
  const auto records = train_records(cfg.run.dir);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records.front()["loss_scale"].get<double>(), std::ldexp(1.0, kStart - halvings));
  EXPECT_EQ(records.back()["loss_scale"].get<double>(), s.loss_scale);
  const int final_exponent = kStart - static_cast<int>(s.overflow_steps);
  EXPECT_NE(log.find("skipped steps 0, overflow steps " + std::to_string(s.overflow_steps) +
                     " (loss scale " + scale_text(final_exponent) + ")"),
            std::string::npos)
      << log;
  const Checkpoint ck = load_checkpoint((fs::path(cfg.run.dir) / "last.ckpt").string());
  char exact[400];
  std::snprintf(exact, sizeof exact, "%.0f", s.loss_scale);
  EXPECT_EQ(ck.meta("train.loss_scale"), exact);
  EXPECT_EQ(ck.meta("train.overflow_steps"), std::to_string(s.overflow_steps));
  for (const NamedTensor& t : ck.tensors)
    for (float v : t.data) ASSERT_TRUE(std::isfinite(v)) << t.name;
}

}  // namespace ds2::testing
