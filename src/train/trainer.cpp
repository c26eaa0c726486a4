#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "audio/normalize.h"
#include "core/atomic_file.h"
#include "core/blas.h"
#include "core/device.h"
#include "core/error.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "train/acoustic_model.h"
#include "train/evaluate.h"
#include "train/optimizer.h"
#include "train/step_engine.h"
#include "train/tensorboard_writer.h"

namespace ds2 {
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string scientific(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

// Global feature statistics over (up to) the first 1000 training utterances.
void compute_global_stats(AcousticModel& am, const Dataset& train) {
  FeatureStats stats;
  Tensor feats;
  const size_t n = std::min<size_t>(train.examples.size(), 1000);
  for (size_t i = 0; i < n; ++i) {
    am.featurizer->raw_features(am.featurizer->load_samples(train.examples[i].utterance.audio_path),
                                feats);
    stats.accumulate(feats);
  }
  am.featurizer->set_global_stats(stats.mean(), stats.stddev());
}

void write_problems(const std::string& path, const std::vector<std::string>& train,
                    const std::vector<std::string>& dev) {
  std::string text;
  for (const auto& p : train) text += p + "\n";
  for (const auto& p : dev) text += p + "\n";
  write_file_atomic(path, text);
}

}  // namespace

Trainer::Trainer(Config config) : config_(std::move(config)) {}

void Trainer::log(const std::string& line, bool console) {
  if (console) progress_.print(line);
  if (log_file_) log_file_ << line << std::endl;
}

TrainSummary Trainer::run() {
  const auto start = std::chrono::steady_clock::now();
  const Config& cfg = config_;
  DS2_CHECK(!cfg.data.train_manifest.empty(),
            cfg.source << ": key 'data.train_manifest' is required");
  fs::create_directories(cfg.run.dir);
  write_file_atomic((fs::path(cfg.run.dir) / "config.yaml").string(), cfg.resolved_yaml);
  log_file_.open(fs::path(cfg.run.dir) / "train.log", std::ios::app);
  std::ofstream metrics(fs::path(cfg.run.dir) / "metrics.jsonl", std::ios::app);
  set_blas_threads(cfg.run.threads);
  AcousticModel am = AcousticModel::create(cfg);
  Model& model = *am.model;
  log("model: " + model.summary());
  const bool use_ema = cfg.train.ema_decay > 0;
  std::unique_ptr<StepEngine> engine = make_step_engine(cfg, am, use_ema);
  const DeviceReport devices = query_devices();
  log("device: " + engine->describe() + "; CUDA devices visible: " +
      (devices.cuda_devices > 0 ? std::to_string(devices.cuda_devices)
                                : "none (" + devices.note + ")"));
  std::unique_ptr<TensorBoardWriter> tb;
  if (cfg.run.tensorboard) {
    tb = std::make_unique<TensorBoardWriter>((fs::path(cfg.run.dir) / "tb").string());
    log("tensorboard: " + tb->path() + " (tensorboard --logdir " + cfg.run.dir + ")");
  }

  DatasetChecks checks = am.dataset_checks();
  const int threads = std::max(1, cfg.data.loader_threads);
  Dataset train = load_dataset(cfg.data.train_manifest, checks, threads);
  Dataset dev;
  const bool have_dev = !cfg.data.dev_manifest.empty();
  if (have_dev) dev = load_dataset(cfg.data.dev_manifest, checks, threads);
  TrainSummary summary;
  summary.invalid_utterances = static_cast<int64_t>(train.problems.size() + dev.problems.size());
  log("data: train " + std::to_string(train.examples.size()) + " utterances (" +
      fixed(train.hours(), 2) + " h), dev " + std::to_string(dev.examples.size()) +
      ", skipped by validation " + std::to_string(summary.invalid_utterances));
  if (summary.invalid_utterances > 0) {
    const std::string path = (fs::path(cfg.run.dir) / "data_problems.txt").string();
    write_problems(path, train.problems, dev.problems);
    for (size_t i = 0; i < std::min<size_t>(5, train.problems.size()); ++i)
      log("skip: " + train.problems[i]);
    log("all " + std::to_string(summary.invalid_utterances) + " problems: " + path);
  }
  if (am.featurizer->needs_global_stats()) {
    compute_global_stats(am, train);
    log("features: global normalization statistics from the training set");
  }

  std::vector<double> durations;
  for (const auto& ex : train.examples) durations.push_back(ex.duration_s);
  BatchSampler sampler(durations, cfg.train.batch_size, cfg.train.sortagrad,
                       static_cast<uint64_t>(cfg.run.seed));
  const int64_t steps_per_epoch = sampler.batches_per_epoch();
  int64_t total_steps = steps_per_epoch * cfg.train.epochs;
  if (cfg.train.max_steps > 0) total_steps = std::min<int64_t>(total_steps, cfg.train.max_steps);
  Loader loader(train, *am.featurizer, threads, cfg.data.prefetch_batches);
  {
    // Every buffer of the step at its final size before the loop: the longest utterance after
    // the slowest speed perturbation, the longest label, a full batch.
    double longest = 0;
    size_t longest_label = 1;
    for (const auto& ex : train.examples) {
      longest = std::max(longest, ex.duration_s);
      longest_label = std::max(longest_label, ex.labels.size());
    }
    const double stretch = 1.0 / std::min(1.0, cfg.augment.speed_min);
    const int frames = static_cast<int>(am.featurizer->frames_for_duration(longest * stretch)) + 2;
    engine->reserve(synthetic_batch(cfg.train.batch_size, frames, am.featurizer->num_features(),
                                    static_cast<int>(longest_label), model.num_classes(),
                                    static_cast<uint64_t>(cfg.run.seed)));
  }

  std::vector<double> losses;
  double best_wer = std::numeric_limits<double>::infinity();
  int64_t step = 0, consecutive_skips = 0;
  double window_loss = 0, window_audio = 0;
  int64_t window_steps = 0, window_utts = 0;
  auto window_start = std::chrono::steady_clock::now();
  std::vector<std::string> step_checkpoints;

  // Weight averaging: evaluation and checkpoints use the averaged weights, which generalize
  // better than the last step's; the early-step ramp keeps the average from being dominated by
  // the random initialization.
  auto update_ema = [&] {
    const double d = std::min(cfg.train.ema_decay, (1.0 + step) / (10.0 + step));
    engine->update_average(static_cast<float>(d), static_cast<float>(1.0 - d));
  };

  auto save = [&](const std::string& name, int epoch) {
    Checkpoint ck = am.to_checkpoint();
    ck.metadata["step"] = std::to_string(step);
    ck.metadata["epoch"] = std::to_string(epoch);
    const std::string path = (fs::path(cfg.run.dir) / name).string();
    save_checkpoint(path, ck);
    return path;
  };
  // Dev WER/CER (when there is a dev set), last.ckpt, best.ckpt and optionally step-N.ckpt.
  auto evaluate_and_save = [&](int epoch, bool step_checkpoint) {
    engine->begin_host_view(/*averaged=*/use_ema);
    if (have_dev) {
      EvalResult r = evaluate(am, dev, cfg.train.batch_size, threads);
      const double wer = r.words.rate(), cer = r.chars.rate();
      log("eval step " + std::to_string(step) + " epoch " + std::to_string(epoch) + ": dev WER " +
          fixed(100 * wer, 2) + "% CER " + fixed(100 * cer, 2) + "% (" +
          std::to_string(r.words.reference_length) + " words, " + fixed(r.wall_seconds, 1) + " s)");
      metrics << nlohmann::json{{"event", "eval"},
                                {"step", step},
                                {"epoch", epoch},
                                {"wer", wer},
                                {"cer", cer}}
                     .dump()
              << std::endl;
      if (tb) tb->add_scalars(step, {{"eval/wer", wer}, {"eval/cer", cer}});
      if (wer < best_wer) {
        best_wer = wer;
        summary.best_dev_wer = wer;
        summary.best_dev_cer = cer;
        save("best.ckpt", epoch);
      }
    }
    save("last.ckpt", epoch);
    if (step_checkpoint) {
      step_checkpoints.push_back(save("step-" + std::to_string(step) + ".ckpt", epoch));
      while (static_cast<int>(step_checkpoints.size()) > cfg.train.keep_checkpoints) {
        fs::remove(step_checkpoints.front());
        step_checkpoints.erase(step_checkpoints.begin());
      }
    }
    engine->end_host_view();
  };

  const auto loop_start = std::chrono::steady_clock::now();  // for the progress line's ETA
  const int64_t loop_first_step = step;
  if (tb) tb->add_session_start(step);  // TensorBoard drops what a resumed run logs again
  bool done = false;
  for (int epoch = 0; epoch < cfg.train.epochs && !done; ++epoch) {
    loader.start_epoch(sampler.epoch(epoch), static_cast<uint64_t>(cfg.run.seed), epoch,
                       /*augment=*/true);
    while (const Batch* batch = loader.next()) {
      for (const auto& f : batch->failures) log("skip: " + f);
      summary.skipped_utterances += static_cast<int64_t>(batch->failures.size());
      if (batch->examples.empty()) continue;
      const double lr = learning_rate(cfg.optim, step, total_steps, steps_per_epoch);

      engine->forward_loss(*batch, &losses);
      // Utterances made infeasible by speed perturbation have +inf loss and zero gradient: they
      // are counted and left out of the mean. NaN means the step is numerically broken.
      double loss_sum = 0;
      int finite = 0;
      bool broken = false;
      for (size_t i = 0; i < losses.size(); ++i) {
        if (std::isfinite(losses[i])) {
          loss_sum += losses[i], ++finite;
        } else if (std::isinf(losses[i]) && losses[i] > 0) {
          ++summary.skipped_utterances;
          log("skip: " + describe_problem(train.examples[batch->examples[i]].utterance,
                                          "CTC-infeasible after augmentation"));
        } else {
          broken = true;
        }
      }
      double norm = 0;
      if (!broken && finite > 0) {
        norm = engine->backward(1.0f / static_cast<float>(finite), cfg.optim.grad_clip);
        broken = !std::isfinite(norm);
      }
      if (broken || finite == 0) {
        ++summary.skipped_steps;
        ++consecutive_skips;
        std::string ids;
        for (int ex : batch->examples) ids += " " + train.examples[ex].utterance.id;
        log("skip step " + std::to_string(step) +
            ": non-finite loss or gradient; utterances:" + ids);
        DS2_CHECK(consecutive_skips < cfg.train.max_consecutive_skips,
                  "stopping: " << consecutive_skips
                               << " consecutive steps had a non-finite loss or gradient "
                                  "(train.max_consecutive_skips); the last batch was:"
                               << ids);
        continue;
      }
      consecutive_skips = 0;
      engine->optimizer_step(lr);
      ++step;
      if (use_ema) update_ema();
      const double mean_loss = loss_sum / finite;
      window_loss += mean_loss, ++window_steps;
      window_utts += static_cast<int64_t>(batch->examples.size());
      window_audio += batch->audio_seconds;
      summary.audio_seconds += batch->audio_seconds;
      if (progress_.enabled()) {
        const double dt = seconds_since(window_start);
        const double eta =
            (total_steps - step) * seconds_since(loop_start) / (step - loop_first_step);
        progress_.update({step, total_steps, epoch, window_loss / window_steps, window_utts / dt,
                          window_audio / dt, eta});
      }
      if (step % cfg.train.log_every == 0 || step == total_steps) {
        const double dt = seconds_since(window_start);
        const double avg = window_loss / window_steps;
        if (summary.first_loss == 0) summary.first_loss = avg;
        summary.last_loss = avg;
        log("step " + std::to_string(step) + "/" + std::to_string(total_steps) + " epoch " +
                std::to_string(epoch) + " loss " + fixed(avg, 3) + " lr " + scientific(lr) +
                " grad_norm " + fixed(norm, 1) + " utt/s " + fixed(window_utts / dt, 1) +
                " audio_s/s " + fixed(window_audio / dt, 1),
            /*console=*/!progress_.enabled());
        metrics << nlohmann::json{{"event", "train"},
                                  {"step", step},
                                  {"epoch", epoch},
                                  {"loss", avg},
                                  {"lr", lr},
                                  {"grad_norm", norm},
                                  {"utt_per_s", window_utts / dt},
                                  {"audio_s_per_s", window_audio / dt}}
                       .dump()
                << std::endl;
        if (tb)
          tb->add_scalars(step, {{"train/loss", avg},
                                 {"train/lr", lr},
                                 {"train/grad_norm", norm},
                                 {"train/utt_per_s", window_utts / dt},
                                 {"train/audio_s_per_s", window_audio / dt}});
        window_loss = window_audio = 0;
        window_steps = window_utts = 0;
        window_start = std::chrono::steady_clock::now();
      }
      if (cfg.train.eval_every > 0 && step % cfg.train.eval_every == 0)
        evaluate_and_save(epoch, /*step_checkpoint=*/true);
      if (step >= total_steps) {
        done = true;
        break;
      }
    }
    summary.epochs = epoch + 1;
    const bool evaluated_now = cfg.train.eval_every > 0 && step % cfg.train.eval_every == 0;
    if (cfg.train.eval_every == 0 || (done && !evaluated_now))
      evaluate_and_save(epoch, /*step_checkpoint=*/false);
  }
  progress_.finish();
  summary.steps = step;
  summary.wall_seconds = seconds_since(start);
  summary.loop_device_allocations = engine->allocations_since_reserve();
  if (summary.loop_device_allocations >= 0)
    log("device allocations inside the training loop: " +
        std::to_string(summary.loop_device_allocations));
  log("done: " + std::to_string(step) + " steps, " + std::to_string(summary.epochs) + " epochs, " +
      fixed(summary.wall_seconds, 1) + " s, skipped steps " +
      std::to_string(summary.skipped_steps) + ", skipped utterances " +
      std::to_string(summary.skipped_utterances + summary.invalid_utterances) +
      (have_dev ? ", best dev WER " + fixed(100 * summary.best_dev_wer, 2) + "%" : ""));
  return summary;
}

}  // namespace ds2
