#include "train/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "dist/world.h"
#include "train/acoustic_model.h"
#include "train/pruning.h"
#include "train/step_engine.h"

namespace ds2 {

StepBenchResult bench_step(const Config& cfg, const StepBenchOptions& o) {
  DS2_CHECK(o.seconds > 0, "bench: --seconds must be positive, got " << o.seconds);
  DS2_CHECK(o.steps > 0 && o.warmup >= 0, "bench: --steps must be positive and --warmup >= 0");
  StepBenchResult r;
  r.batch = o.batch > 0 ? o.batch : cfg.train.batch_size;
  r.seconds = o.seconds;
  dist::World& world = dist::World::get();
  world.set_timeout(cfg.dist.timeout_s);
  r.ranks = world.size();
  DS2_CHECK(r.batch % r.ranks == 0, "bench: the global batch " << r.batch << " does not split "
                                                               << "evenly over " << r.ranks
                                                               << " ranks");
  const int rank_batch = r.batch / r.ranks;
  AcousticModel am = AcousticModel::create(cfg);
  auto engine = make_step_engine(cfg, am, /*use_average=*/false, world.local_rank());
  engine->join(world, cfg.dist);
  // prune.density < 1: the recurrent matrices pruned to the final density now (by magnitude, from
  // the initial weights), so the step runs what a pruned model trains with (the sparse
  // persistent kernel where the layers choose it).
  Pruner pruner(cfg.prune, am.model->parameters());
  if (pruner.enabled()) {
    pruner.update(cfg.prune.end_step, engine->live_weights());
    engine->set_weight_masks(pruner.masks());
    r.model_note = pruner.describe_update(cfg.prune.end_step);
  }
  r.engine = engine->describe();
  r.model = std::to_string(am.model->parameters().num_parameters()) + " parameters, " +
            std::to_string(am.model->layers().size()) + " layers";
  r.frames = static_cast<int>(am.featurizer->frames_for_duration(o.seconds));
  r.output_frames = am.model->output_length(r.frames);
  // A label as long as speech of this length has, but always alignable.
  r.label_length =
      std::max(1, std::min(static_cast<int>(o.label_rate * o.seconds), r.output_frames / 2));
  Batch batch = synthetic_batch(rank_batch, r.frames, am.featurizer->num_features(), r.label_length,
                                am.model->num_classes(), static_cast<uint64_t>(cfg.run.seed));
  batch.audio_seconds = r.batch * o.seconds;  // over all ranks
  engine->reserve(batch);
  r.layers = engine->describe_layers();

  std::vector<double> losses;
  double exposed_ms = 0;
  auto step = [&] {
    engine->forward_loss(batch, &losses);
    engine->backward(1.0f / static_cast<float>(r.batch), 1.0f, cfg.optim.grad_clip);
    engine->optimizer_step(cfg.optim.lr);
  };
  for (int i = 0; i < o.warmup; ++i) step();
  engine->synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i) {
    step();
    // The exposed wait is read from events after the step's own synchronization (backward reads
    // the gradient norm back), so it costs nothing extra.
    exposed_ms += engine->exposed_comm_ms();
  }
  engine->synchronize();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.ms_per_step = 1000.0 * wall / o.steps;
  r.utterances_per_s = r.batch * o.steps / wall;
  r.audio_seconds_per_s = batch.audio_seconds * o.steps / wall;
  r.exposed_comm_ms = exposed_ms / o.steps;
  // Every rank's timing ends at the same collective, so rank 0's wall time is the job's.

  // The per-part split comes from separate steps: timing each part adds synchronization.
  engine->set_timing(true);
  for (int i = 0; i < o.steps; ++i) step();
  engine->synchronize();
  for (const auto& [part, ms] : engine->part_times()) r.part_ms[part] = ms / o.steps;
  r.layer_costs = engine->layer_costs();
  for (LayerCost& c : r.layer_costs) c.ms /= o.steps;
  engine->set_timing(false);
  r.peak_device_bytes = engine->peak_device_bytes();
  return r;
}

std::string format_step_bench(const StepBenchResult& r) {
  std::ostringstream out;
  char line[256];
  out << "engine: " << r.engine << "\n";
  out << "model: " << r.model << "\n";
  if (!r.model_note.empty()) out << r.model_note << "\n";
  out << r.layers;
  std::snprintf(line, sizeof line, "batch %d x %.1f s audio (%d frames in, %d out, labels of %d)\n",
                r.batch, r.seconds, r.frames, r.output_frames, r.label_length);
  out << line;
  if (r.ranks > 1) {
    std::snprintf(line, sizeof line, "ranks %d, %d utterances per rank\n", r.ranks,
                  r.batch / r.ranks);
    out << line;
  }
  std::snprintf(line, sizeof line, "step %.2f ms  |  %.1f utt/s  |  %.1f audio-s/s\n",
                r.ms_per_step, r.utterances_per_s, r.audio_seconds_per_s);
  out << line;
  if (r.ranks > 1) {
    std::snprintf(line, sizeof line,
                  "communication wait not hidden by backward %.2f ms per step (%.1f%% of the "
                  "step)\n",
                  r.exposed_comm_ms, 100.0 * r.exposed_comm_ms / r.ms_per_step);
    out << line;
  }
  if (r.peak_device_bytes >= 0) {
    std::snprintf(line, sizeof line, "peak device memory %.1f MiB\n",
                  r.peak_device_bytes / 1048576.0);
    out << line;
  }
  double total = 0;
  for (const auto& [part, ms] : r.part_ms) total += ms;
  if (total > 0) {
    std::vector<std::pair<double, std::string>> parts;
    for (const auto& [part, ms] : r.part_ms) parts.push_back({ms, part});
    std::sort(parts.rbegin(), parts.rend());
    out << "time per part (timed separately, per step):\n";
    for (const auto& [ms, part] : parts) {
      std::snprintf(line, sizeof line, "  %-12s %9.3f ms  %5.1f%%\n", part.c_str(), ms,
                    100.0 * ms / total);
      out << line;
    }
  }
  if (!r.layer_costs.empty()) {
    const bool device = r.layer_costs.front().device_bytes >= 0;
    out << (device ? "per layer (forward + backward per step; device memory it allocated):\n"
                   : "per layer (forward + backward per step):\n");
    for (const LayerCost& c : r.layer_costs) {
      std::snprintf(line, sizeof line, "  %-14s %9.3f ms", c.name.c_str(), c.ms);
      out << line;
      if (c.device_bytes >= 0) {
        std::snprintf(line, sizeof line, "  %9.1f MiB", c.device_bytes / 1048576.0);
        out << line;
      }
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace ds2
