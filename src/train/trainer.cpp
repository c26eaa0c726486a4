#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "audio/normalize.h"
#include "core/atomic_file.h"
#include "core/cpu_threads.h"
#include "core/device.h"
#include "core/error.h"
#include "data/loader.h"
#include "data/loader_threads.h"
#include "data/manifest.h"
#include "data/sampler.h"
#include "dist/fault_injection.h"
#include "dist/world.h"
#include "train/acoustic_model.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"
#include "train/evaluate.h"
#include "train/loss_scaler.h"
#include "train/optimizer.h"
#include "train/pruning.h"
#include "train/step_engine.h"
#include "train/tensorboard_writer.h"
#include "train/training_sampler.h"

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

// The path of the checkpoint RUN/latest names, when run.resume allows and there is one.
std::optional<std::string> find_resume_checkpoint(const Config& cfg) {
  const fs::path latest = fs::path(cfg.run.dir) / "latest";
  if (cfg.run.resume == "never" || !fs::exists(latest)) {
    DS2_CHECK(cfg.run.resume != "required",
              cfg.source << ": key 'run.resume' is required, but " << cfg.run.dir
                         << " has no checkpoint to resume from (no 'latest' file)");
    return std::nullopt;
  }
  std::string name = read_file(latest.string());
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
  DS2_CHECK(!name.empty() && name.find('/') == std::string::npos,
            latest.string() << ": does not name a checkpoint file");
  return (fs::path(cfg.run.dir) / name).string();
}

// The keys that shape the network and its input: a checkpoint's weights only fit a run whose
// values for these are the checkpoint's.
bool shapes_weights(const std::string& key) {
  return key.rfind("model.", 0) == 0 || key.rfind("features.", 0) == 0 || key == "data.alphabet" ||
         key == "data.digits";
}

// Refuses a resume whose model, features, alphabet or seed differ from the checkpoint's (naming
// the first differing key) and logs the keys that may change (learning rate, steps, ...).
void check_resume_config(const Checkpoint& ck, const Config& now,
                         const std::function<void(const std::string&)>& log) {
  const Config then = parse_config(ck.meta("config"));
  const auto a = config_values(then), b = config_values(now);
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i].second == b[i].second) continue;
    const std::string& key = a[i].first;
    DS2_CHECK(!shapes_weights(key) && key != "run.seed",
              ck.path << ": cannot resume: key '" << key << "' was " << a[i].second
                      << " in the checkpoint and is " << b[i].second
                      << " now; use a new run.dir (or run.resume=never)");
    if (key != "run.resume" && key != "run.device" && key != "run.dir")
      log("resume: changed " + key + ": " + a[i].second + " -> " + b[i].second);
  }
  // Global batches do not depend on the rank count, so a run may resume on more or fewer ranks.
  const std::string ranks = std::to_string(dist::World::get().size());
  if (ck.meta("train.world_size") != ranks)
    log("resume: the checkpoint was written by " + ck.meta("train.world_size") +
        " ranks, this run has " + ranks);
}

void resume_from(const Checkpoint& ck, const Config& cfg, AcousticModel& am, StepEngine& engine,
                 const std::function<void(const std::string&)>& log) {
  check_resume_config(ck, cfg, log);
  am.load_weights(ck);  // batch-norm statistics (and the averaged weights, replaced below)
  engine.load_state(ck);
}

// train.init_from: the checkpoint's weights, batch-norm and feature statistics into a new
// model, before an engine copies them; refused when its model, features or alphabet differ.
void init_from_checkpoint(const Config& cfg, AcousticModel& am,
                          const std::function<void(const std::string&)>& log) {
  const Checkpoint ck = load_checkpoint(cfg.train.init_from);
  const auto a = config_values(parse_config(ck.meta("config"))), b = config_values(cfg);
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    DS2_CHECK(a[i].second == b[i].second || !shapes_weights(a[i].first),
              cfg.source << ": key 'train.init_from': " << ck.path << " was trained with "
                         << a[i].first << " = " << a[i].second << ", this run has " << b[i].second);
  am.load_feature_stats(ck);
  am.load_weights(ck);
  log("init: weights and statistics from " + ck.path + " (its step " +
      (ck.metadata.count("train.step") ? ck.meta("train.step") : std::string("?")) +
      "); optimizer and schedule start fresh");
}

// step-N.ckpt files already in the run folder, oldest first (kept to keep_checkpoints).
std::vector<std::string> existing_step_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name.size() > 10 &&
        name.compare(name.size() - 5, 5, ".ckpt") == 0) {
      const std::string digits = name.substr(5, name.size() - 10);
      if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos)
        found.emplace_back(std::stoll(digits), entry.path().string());
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& f : found) paths.push_back(std::move(f.second));
  return paths;
}

}  // namespace

Trainer::Trainer(Config config) : config_(std::move(config)) {}

void Trainer::log(const std::string& line, bool console) {
  if (!lead_) {
    // Other ranks report only what is theirs alone (utterances they skipped); rank 0 logs the rest.
    if (line.rfind("skip", 0) == 0)
      std::cerr << "ds2 [" << dist::World::get().where() << "]: " << line << std::endl;
    return;
  }
  if (console) progress_.print(line);
  if (log_file_) log_file_ << line << std::endl;
}

TrainSummary Trainer::run() {
  const auto start = std::chrono::steady_clock::now();
  const Config& cfg = config_;
  DS2_CHECK(!cfg.data.train_manifest.empty(),
            cfg.source << ": key 'data.train_manifest' is required");
  dist::World& world = dist::World::get();
  world.set_timeout(cfg.dist.timeout_s);
  lead_ = world.rank() == 0;
  check_same_config(world, cfg);
  std::ofstream metrics;
  if (lead_) {
    fs::create_directories(cfg.run.dir);
    write_file_atomic((fs::path(cfg.run.dir) / "config.yaml").string(), cfg.resolved_yaml);
    log_file_.open(fs::path(cfg.run.dir) / "train.log", std::ios::app);
    metrics.open(fs::path(cfg.run.dir) / "metrics.jsonl", std::ios::app);
  }
  set_cpu_threads(cfg.run.threads, world.local_size());
  AcousticModel am = AcousticModel::create(cfg);
  Model& model = *am.model;
  log("model: " + model.summary());
  // Before the engine copies the weights; a resume below replaces them all again.
  if (!cfg.train.init_from.empty())
    init_from_checkpoint(cfg, am, [&](const std::string& line) { log(line); });
  const bool use_ema = cfg.train.ema_decay > 0;
  std::unique_ptr<StepEngine> engine = make_step_engine(cfg, am, use_ema, world.local_rank());
  const DeviceReport devices = query_devices();
  log("device: " + engine->describe() + "; CUDA devices visible: " +
      (devices.cuda_devices > 0 ? std::to_string(devices.cuda_devices)
                                : "none (" + devices.note + ")"));
  if (world.distributed())
    log("data-parallel: " + std::to_string(world.size()) + " ranks, global batch " +
        std::to_string(cfg.train.batch_size) + " (" +
        std::to_string((cfg.train.batch_size + world.size() - 1) / world.size()) +
        " per rank at most), gradient allreduce in " + cfg.dist.reduce_dtype + ", " +
        gradient_buckets(model, cfg.dist).describe());
  std::unique_ptr<TensorBoardWriter> tb;
  if (cfg.run.tensorboard && lead_) {
    tb = std::make_unique<TensorBoardWriter>((fs::path(cfg.run.dir) / "tb").string());
    log("tensorboard: " + tb->path() + " (tensorboard --logdir " + cfg.run.dir + ")");
  }

  DatasetChecks checks = am.dataset_checks();
  const int threads = loader_threads(cfg.data.loader_threads, world.local_size());
  Dataset train = load_dataset(cfg.data.train_manifest, checks, threads);
  Dataset dev;
  const bool have_dev = !cfg.data.dev_manifest.empty();
  if (have_dev) dev = load_dataset(cfg.data.dev_manifest, checks, threads);
  TrainSummary summary;
  summary.invalid_utterances = static_cast<int64_t>(train.problems.size() + dev.problems.size());
  log("data: train " + std::to_string(train.examples.size()) + " utterances (" +
      fixed(train.hours(), 2) + " h), dev " + std::to_string(dev.examples.size()) +
      ", skipped by validation " + std::to_string(summary.invalid_utterances) + "; " +
      std::to_string(threads) + " loader threads");
  if (summary.invalid_utterances > 0 && lead_) {
    const std::string path = (fs::path(cfg.run.dir) / "data_problems.txt").string();
    write_problems(path, train.problems, dev.problems);
    for (size_t i = 0; i < std::min<size_t>(5, train.problems.size()); ++i)
      log("skip: " + train.problems[i]);
    log("all " + std::to_string(summary.invalid_utterances) + " problems: " + path);
  }
  if (!cfg.augment.noise_manifest.empty()) {
    const double seconds =
        am.featurizer->load_noise(manifest_audio_paths(cfg.augment.noise_manifest));
    log("augment: noise from " + cfg.augment.noise_manifest + " (" + fixed(seconds, 1) +
        " s of recordings)");
  }
  if (am.featurizer->needs_global_stats() && am.featurizer->global_mean().empty() && lead_) {
    compute_global_stats(am, train);
    log("features: global normalization statistics from the training set");
  }
  // Every rank starts from rank 0's weights and statistics, then joins the gradient exchange
  // and draws dropout masks of its own.
  share_initial_state(world, am);
  engine->join(world, cfg.dist);
  if (world.rank() > 0) engine->salt_dropout(static_cast<uint64_t>(world.rank()));

  // Pruning masks live beside the engine's weights; the engine sizes its copy of them here, before
  // reserve(), so mask updates inside the loop allocate nothing.
  Pruner pruner(cfg.prune, model.parameters());
  if (pruner.enabled()) {
    log(pruner.describe_schedule());
    engine->set_weight_masks(pruner.masks());
  }

  const BatchSampler sampler = training_sampler(cfg, train, world.rank(), world.size());
  const int rank_batch = (cfg.train.batch_size + world.size() - 1) / world.size();
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
    engine->reserve(synthetic_batch(rank_batch, frames, am.featurizer->num_features(),
                                    static_cast<int>(longest_label), model.num_classes(),
                                    static_cast<uint64_t>(cfg.run.seed)));
  }
  // How the recurrent layers run, now and whenever pruning changes which kernel runs (dense or
  // sparse persistent; the details of a plan change at every mask update and are not repeated).
  std::string kinds_logged;
  auto log_layers = [&] {
    const std::string layers = engine->describe_layers();
    std::string kinds;  // each line up to its first " (": "rnn0: sparse persistent recurrence"
    std::istringstream lines(layers);
    for (std::string line; std::getline(lines, line);)
      kinds += line.substr(0, line.find(" (")) + "\n";
    if (kinds == kinds_logged) return;
    std::istringstream again(layers);
    for (std::string line; std::getline(again, line);) log("layer " + line);
    kinds_logged = kinds;
  };
  log_layers();

  std::vector<double> losses;
  LossScaler scaler(cfg.train);
  double best_wer = std::numeric_limits<double>::infinity();
  int64_t step = 0, consecutive_skips = 0;
  // data_wait: the share of the window the training thread spent waiting for the loader.
  double window_loss = 0, window_audio = 0, window_wait = 0;
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

  // Where the run stands, for exact resume: the epoch in progress and how many of its batches
  // the loop has consumed (skipped ones included).
  int position_epoch = 0;
  int64_t batches_done = 0;
  auto save = [&](const std::string& name, int epoch) {
    Checkpoint ck = am.to_checkpoint();
    ck.metadata["step"] = std::to_string(step);
    ck.metadata["epoch"] = std::to_string(epoch);
    engine->save_state(&ck);
    ck.metadata["train.step"] = std::to_string(step);
    ck.metadata["train.epoch"] = std::to_string(position_epoch);
    ck.metadata["train.batches_done"] = std::to_string(batches_done);
    ck.metadata["train.best_wer"] = std::isfinite(best_wer) ? std::to_string(best_wer) : "inf";
    ck.metadata["train.best_cer"] = std::to_string(summary.best_dev_cer);
    ck.metadata["train.consecutive_skips"] = std::to_string(consecutive_skips);
    ck.metadata["train.skipped_steps"] = std::to_string(summary.skipped_steps);
    ck.metadata["train.skipped_utterances"] = std::to_string(summary.skipped_utterances);
    ck.metadata["train.overflow_steps"] = std::to_string(summary.overflow_steps);
    scaler.save(&ck);
    pruner.save(&ck);
    ck.metadata["train.world_size"] = std::to_string(world.size());
    const std::string path = (fs::path(cfg.run.dir) / name).string();
    save_checkpoint(path, ck);
    return path;
  };
  // RUN/latest names the newest checkpoint a resume should start from; written after it.
  auto point_latest = [&](const std::string& name) {
    if (!lead_) return;
    write_file_atomic((fs::path(cfg.run.dir) / "latest").string(), name + "\n");
  };
  // Dev WER/CER (when there is a dev set), last.ckpt, best.ckpt and optionally step-N.ckpt.
  // With several ranks, all of them evaluate (each a share of the dev set); rank 0 saves.
  auto evaluate_and_save = [&](int epoch, bool step_checkpoint) {
    engine->begin_host_view(/*averaged=*/use_ema);
    if (have_dev) {
      EvalResult r = evaluate_across_ranks(world, am, dev, cfg.train.batch_size, threads);
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
        if (lead_) save("best.ckpt", epoch);
      }
    }
    if (!lead_) {
      engine->end_host_view();
      return;
    }
    save("last.ckpt", epoch);
    if (step_checkpoint) {
      const std::string name = "step-" + std::to_string(step) + ".ckpt";
      step_checkpoints.push_back(save(name, epoch));
      point_latest(name);
      while (static_cast<int>(step_checkpoints.size()) > cfg.train.keep_checkpoints) {
        fs::remove(step_checkpoints.front());
        step_checkpoints.erase(step_checkpoints.begin());
      }
    } else {
      point_latest("last.ckpt");
    }
    engine->end_host_view();
  };

  int first_epoch = 0;
  int64_t first_epoch_skip = 0;  // batches of first_epoch already consumed before a resume
  std::optional<std::string> resume_path;
  if (lead_) resume_path = find_resume_checkpoint(cfg);
  if (auto ck = load_shared_checkpoint(world, resume_path)) {
    resume_from(*ck, cfg, am, *engine, [&](const std::string& line) { log(line); });
    if (world.rank() > 0) engine->salt_dropout(static_cast<uint64_t>(world.rank()));
    step = std::stoll(ck->meta("train.step"));
    first_epoch = std::stoi(ck->meta("train.epoch"));
    first_epoch_skip = std::stoll(ck->meta("train.batches_done"));
    const std::string& best = ck->meta("train.best_wer");
    best_wer = best == "inf" ? std::numeric_limits<double>::infinity() : std::stod(best);
    if (std::isfinite(best_wer)) {
      summary.best_dev_wer = best_wer;
      summary.best_dev_cer = std::stod(ck->meta("train.best_cer"));
    }
    consecutive_skips = std::stoll(ck->meta("train.consecutive_skips"));
    summary.skipped_steps = std::stoll(ck->meta("train.skipped_steps"));
    summary.skipped_utterances = std::stoll(ck->meta("train.skipped_utterances"));
    // Checkpoints from before loss scaling have no overflow count.
    if (ck->metadata.count("train.overflow_steps"))
      summary.overflow_steps = std::stoll(ck->meta("train.overflow_steps"));
    scaler.restore(*ck);
    pruner.restore(*ck);
    if (pruner.enabled()) engine->set_weight_masks(pruner.masks());
    if (lead_) step_checkpoints = existing_step_checkpoints(cfg.run.dir);
    if (first_epoch_skip >= steps_per_epoch) first_epoch += 1, first_epoch_skip = 0;
    log("resume: " + ck->path + " at step " + std::to_string(step) + ", epoch " +
        std::to_string(first_epoch) + ", batch " + std::to_string(first_epoch_skip) +
        " of the epoch");
  }
  const auto loop_start = std::chrono::steady_clock::now();  // for the progress line's ETA
  const int64_t loop_first_step = step;
  if (tb) tb->add_session_start(step);  // TensorBoard drops what a resumed run logs again
  bool done = step >= total_steps;
  for (int epoch = first_epoch; epoch < cfg.train.epochs && !done; ++epoch) {
    std::vector<std::vector<int>> batches = sampler.epoch(epoch);
    batches_done = epoch == first_epoch ? std::min<int64_t>(first_epoch_skip, batches.size()) : 0;
    batches.erase(batches.begin(), batches.begin() + batches_done);
    position_epoch = epoch;
    loader.start_epoch(std::move(batches), static_cast<uint64_t>(cfg.run.seed), epoch,
                       /*augment=*/true);
    while (true) {
      const auto wait_start = std::chrono::steady_clock::now();
      const Batch* batch = loader.next();
      window_wait += seconds_since(wait_start);
      if (!batch) break;
      ++batches_done;
      world.set_step(step);
      const bool poison_gradients = dist::inject_fault(world.rank(), step);
      for (const auto& f : batch->failures) log("skip: " + f);
      const double lr = learning_rate(cfg.optim, step, total_steps, steps_per_epoch);

      // This rank's share of the global batch (possibly empty: a short last batch, or failed
      // loads), then the global totals every rank decides on identically.
      const bool have_data = !batch->examples.empty();
      if (have_data) engine->forward_loss(*batch, &losses);
      // Utterances made infeasible by speed perturbation have +inf loss and zero gradient: they
      // are counted and left out of the mean. NaN means the step is numerically broken.
      double local[6] = {0,
                         0,
                         0,
                         static_cast<double>(batch->examples.size()),
                         batch->audio_seconds,
                         static_cast<double>(batch->failures.size())};
      enum { kLossSum, kFinite, kBroken, kUtterances, kAudio, kSkipped };
      for (size_t i = 0; have_data && i < losses.size(); ++i) {
        if (std::isfinite(losses[i])) {
          local[kLossSum] += losses[i], local[kFinite] += 1;
        } else if (std::isinf(losses[i]) && losses[i] > 0) {
          local[kSkipped] += 1;
          log("skip: " + describe_problem(train.examples[batch->examples[i]].utterance,
                                          "CTC-infeasible after augmentation"));
        } else {
          local[kBroken] = 1;
        }
      }
      double global[6];
      std::copy(local, local + 6, global);
      world.allreduce_sum(global, 6, "loss reduction");
      summary.skipped_utterances += static_cast<int64_t>(global[kSkipped]);
      if (global[kUtterances] == 0) continue;
      const double loss_sum = global[kLossSum];
      const int finite = static_cast<int>(global[kFinite]);
      bool broken = global[kBroken] > 0;
      double norm = 0;
      if (!broken && finite > 0) {
        // Scaled by the global count, the summed gradients are the mean over the global batch.
        const float scale = poison_gradients ? std::numeric_limits<float>::quiet_NaN()
                                             : 1.0f / static_cast<float>(finite);
        const auto loss_scale = static_cast<float>(scaler.scale());
        norm = have_data ? engine->backward(scale, loss_scale, cfg.optim.grad_clip)
                         : engine->backward_without_data(loss_scale, cfg.optim.grad_clip);
        broken = !std::isfinite(norm);
        // Finite losses, overflowing gradients: a smaller scale will do. Not a broken step, so
        // it leaves train.max_consecutive_skips alone (at scale 1 it is one).
        const double before = scaler.scale();
        if (broken && scaler.overflow()) {
          ++summary.overflow_steps;
          log("loss scale: overflow at step " + std::to_string(step) + ", scale " +
              scale_text(before) + " -> " + scale_text(scaler.scale()));
          continue;
        }
      }
      if (broken || finite == 0) {
        scaler.skipped();
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
      if (scaler.clean_step())
        log("loss scale: growth at step " + std::to_string(step) + " after " +
            std::to_string(cfg.train.loss_scale_growth_interval) + " clean steps, scale " +
            scale_text(scaler.scale() / 2) + " -> " + scale_text(scaler.scale()));
      // Masks from the weights this step left, identical on every rank (so are the weights).
      if (pruner.due(step)) {
        pruner.update(step, engine->live_weights());
        engine->set_weight_masks(pruner.masks());
        log(pruner.describe_update(step));
        log_layers();
      }
      if (use_ema) update_ema();
      const double mean_loss = loss_sum / finite;
      window_loss += mean_loss, ++window_steps;
      window_utts += static_cast<int64_t>(global[kUtterances]);
      window_audio += global[kAudio];
      summary.audio_seconds += global[kAudio];
      if (cfg.dist.check_every > 0 && step % cfg.dist.check_every == 0)
        check_identical_weights(world, *engine, step);
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
                " audio_s/s " + fixed(window_audio / dt, 1) + " data_wait " +
                fixed(100.0 * window_wait / dt, 1) + "%" +
                (scaler.dynamic() ? " loss_scale " + scale_text(scaler.scale()) : ""),
            /*console=*/!progress_.enabled());
        nlohmann::json record{{"event", "train"},
                              {"step", step},
                              {"epoch", epoch},
                              {"loss", avg},
                              {"lr", lr},
                              {"grad_norm", norm},
                              {"utt_per_s", window_utts / dt},
                              {"audio_s_per_s", window_audio / dt},
                              {"data_wait_fraction", window_wait / dt}};
        if (scaler.dynamic()) record["loss_scale"] = scaler.scale();
        if (pruner.enabled()) record["density"] = pruner.density();
        metrics << record.dump() << std::endl;
        if (tb) {
          std::vector<ScalarValue> scalars = {{"train/loss", avg},
                                              {"train/lr", lr},
                                              {"train/grad_norm", norm},
                                              {"train/utt_per_s", window_utts / dt},
                                              {"train/audio_s_per_s", window_audio / dt},
                                              {"train/data_wait_fraction", window_wait / dt}};
          if (scaler.dynamic()) scalars.push_back({"train/loss_scale", scaler.scale()});
          if (pruner.enabled()) scalars.push_back({"train/density", pruner.density()});
          tb->add_scalars(step, scalars);
        }
        window_loss = window_audio = window_wait = 0;
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
  summary.loss_scale = scaler.scale();
  summary.recurrent_density = pruner.density();
  summary.wall_seconds = seconds_since(start);
  summary.loop_device_allocations = engine->allocations_since_reserve();
  if (summary.loop_device_allocations >= 0)
    log("device allocations inside the training loop: " +
        std::to_string(summary.loop_device_allocations));
  log("done: " + std::to_string(step) + " steps, " + std::to_string(summary.epochs) + " epochs, " +
      fixed(summary.wall_seconds, 1) + " s, skipped steps " +
      std::to_string(summary.skipped_steps) +
      (scaler.dynamic() ? ", overflow steps " + std::to_string(summary.overflow_steps) +
                              " (loss scale " + scale_text(scaler.scale()) + ")"
                        : "") +
      ", skipped utterances " +
      std::to_string(summary.skipped_utterances + summary.invalid_utterances) +
      (have_dev ? ", best dev WER " + fixed(100 * summary.best_dev_wer, 2) + "%" : ""));
  return summary;
}

}  // namespace ds2
