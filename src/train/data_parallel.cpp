#include "train/data_parallel.h"

#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace ds2 {

void check_same_config(dist::World& world, const Config& cfg) {
  if (!world.distributed()) return;
  std::string yaml = cfg.resolved_yaml;
  world.broadcast(&yaml, "config check");
  const auto mine = config_values(cfg), first = config_values(parse_config(yaml, {}, "rank 0"));
  for (size_t i = 0; i < mine.size() && i < first.size(); ++i)
    DS2_CHECK(mine[i] == first[i], world.where()
                                       << ": key '" << mine[i].first << "' is " << mine[i].second
                                       << " here but " << first[i].second
                                       << " on rank 0; every rank must run the same "
                                          "configuration");
}

void share_initial_state(dist::World& world, AcousticModel& am) {
  if (!world.distributed()) return;
  // The layout is what the flat gradient buffers of all ranks must agree on.
  std::ostringstream layout;
  for (const ParamEntry& e : am.model->parameters().parameters())
    layout << e.name << shape_str(e.shape) << ";";
  const std::string text = layout.str();
  const uint64_t hash = hash_bytes(text.data(), text.size());
  const std::vector<uint64_t> all = world.allgather(hash, "parameter layout check");
  DS2_CHECK(all[world.rank()] == all[0],
            world.where() << ": the model's parameter layout differs from rank 0's (another ds2 "
                             "version?)");

  ParameterStore& store = am.model->parameters();
  world.broadcast(store.values().data(), store.values().numel(), "initial weights broadcast");
  world.broadcast(store.buffers().data(), store.buffers().numel(), "initial weights broadcast");
  std::vector<float> mean = am.featurizer->global_mean(), stddev = am.featurizer->global_stddev();
  // Only rank 0 computed them (when features.normalize is global): the others hold none.
  double sizes[1] = {static_cast<double>(mean.size())};
  world.allreduce_max(sizes, 1, "feature statistics broadcast");
  if (sizes[0] == 0) return;
  mean.resize(static_cast<size_t>(sizes[0]));
  stddev.resize(mean.size());
  world.broadcast(mean.data(), static_cast<int64_t>(mean.size()), "feature statistics broadcast");
  world.broadcast(stddev.data(), static_cast<int64_t>(stddev.size()),
                  "feature statistics broadcast");
  am.featurizer->set_global_stats(std::move(mean), std::move(stddev));
}

std::optional<Checkpoint> load_shared_checkpoint(dist::World& world,
                                                 const std::optional<std::string>& path) {
  std::string name = path.value_or("");
  world.broadcast(&name, "resume checkpoint broadcast");
  if (name.empty()) return std::nullopt;
  std::string bytes;
  if (world.rank() == 0) bytes = read_file(name);
  world.broadcast(&bytes, "resume checkpoint broadcast");
  return parse_checkpoint(bytes, name);
}

EvalResult evaluate_across_ranks(dist::World& world, AcousticModel& am, const Dataset& dev,
                                 int batch_size, int threads) {
  if (!world.distributed()) return evaluate(am, dev, batch_size, threads);
  Dataset mine;
  mine.manifest = dev.manifest;
  for (size_t i = static_cast<size_t>(world.rank()); i < dev.examples.size();
       i += static_cast<size_t>(world.size()))
    mine.examples.push_back(dev.examples[i]);
  EvalResult r = evaluate(am, mine, batch_size, threads);
  double counts[10] = {double(r.words.substitutions),    double(r.words.deletions),
                       double(r.words.insertions),       double(r.words.correct),
                       double(r.words.reference_length), double(r.chars.substitutions),
                       double(r.chars.deletions),        double(r.chars.insertions),
                       double(r.chars.correct),          double(r.chars.reference_length)};
  world.allreduce_sum(counts, 10, "dev evaluation");
  ErrorCounts* sets[2] = {&r.words, &r.chars};
  for (int s = 0; s < 2; ++s) {
    sets[s]->substitutions = static_cast<int64_t>(counts[5 * s]);
    sets[s]->deletions = static_cast<int64_t>(counts[5 * s + 1]);
    sets[s]->insertions = static_cast<int64_t>(counts[5 * s + 2]);
    sets[s]->correct = static_cast<int64_t>(counts[5 * s + 3]);
    sets[s]->reference_length = static_cast<int64_t>(counts[5 * s + 4]);
  }
  double wall[1] = {r.wall_seconds};
  world.allreduce_max(wall, 1, "dev evaluation");
  r.wall_seconds = wall[0];
  return r;
}

void check_identical_weights(dist::World& world, StepEngine& engine, int64_t step) {
  if (!world.distributed()) return;
  const std::vector<uint64_t> all = world.allgather(engine.weights_hash(), "weights check");
  for (size_t r = 1; r < all.size(); ++r)
    DS2_CHECK(all[r] == all[0], "step " << step << ": rank " << r
                                        << "'s weights differ from rank 0's (dist.check_every)");
}

}  // namespace ds2
