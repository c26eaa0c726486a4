#include "train/bench_loader.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "data/loader.h"
#include "data/loader_threads.h"
#include "train/acoustic_model.h"
#include "train/training_sampler.h"

namespace ds2 {

LoaderBenchResult bench_loader(const Config& cfg, const LoaderBenchOptions& o) {
  DS2_CHECK(o.batches >= 1, "bench loader: --batches must be at least 1, got " << o.batches);
  DS2_CHECK(o.hold_ms >= 0, "bench loader: --hold-ms must not be negative, got " << o.hold_ms);
  DS2_CHECK(!cfg.data.train_manifest.empty(), "bench loader: key 'data.train_manifest' is empty");
  AcousticModel am = AcousticModel::create(cfg);
  const int threads = loader_threads(cfg.data.loader_threads, 1);
  const Dataset train = load_dataset(cfg.data.train_manifest, am.dataset_checks(), threads);
  // Global normalization statistics only shift and scale the features: unit ones time the same.
  if (am.featurizer->needs_global_stats())
    am.featurizer->set_global_stats(std::vector<float>(am.featurizer->num_features(), 0.0f),
                                    std::vector<float>(am.featurizer->num_features(), 1.0f));
  // Epoch 1: the shuffled, length-bucketed batches training sees after SortaGrad's first epoch.
  std::vector<std::vector<int>> batches = training_sampler(cfg, train, 0, 1).epoch(1);
  if (static_cast<int64_t>(batches.size()) > o.batches) batches.resize(o.batches);

  Loader loader(train, *am.featurizer, threads, cfg.data.prefetch_batches);
  LoaderBenchResult r;
  r.manifest = cfg.data.train_manifest;
  r.threads = threads;
  r.slots = loader.slots();
  r.batch_size = cfg.train.batch_size;
  r.augment = o.augment;
  r.hold_ms = o.hold_ms;
  const auto start = std::chrono::steady_clock::now();
  loader.start_epoch(std::move(batches), static_cast<uint64_t>(cfg.run.seed), 1, o.augment);
  while (const Batch* b = loader.next()) {
    ++r.batches;
    r.utterances += static_cast<int64_t>(b->examples.size());
    r.audio_seconds += b->audio_seconds;
    if (o.hold_ms > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.hold_ms));
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.audio_seconds_per_s = r.audio_seconds / std::max(r.wall_seconds, 1e-9);
  r.utterances_per_s = static_cast<double>(r.utterances) / std::max(r.wall_seconds, 1e-9);
  return r;
}

std::string format_loader_bench(const LoaderBenchResult& r) {
  std::ostringstream out;
  out << "loader: " << r.manifest << ", " << r.threads << " threads, " << r.slots
      << " batch slots, batches of " << r.batch_size << ", "
      << (r.augment ? "augmented" : "no augmentation") << ", each batch held " << std::fixed
      << std::setprecision(1) << r.hold_ms << " ms\n";
  out << std::fixed << std::setprecision(1) << r.batches << " batches, " << r.utterances
      << " utterances, " << r.audio_seconds << " s of audio in " << std::setprecision(3)
      << r.wall_seconds << " s: " << std::setprecision(1) << r.utterances_per_s << " utt/s, "
      << r.audio_seconds_per_s << " audio-s/s";
  if (r.hold_ms > 0 && r.batches > 0)
    out << " (the holds alone allow "
        << r.audio_seconds / (1e-3 * r.hold_ms * static_cast<double>(r.batches)) << ")";
  out << "\n";
  return out.str();
}

}  // namespace ds2
