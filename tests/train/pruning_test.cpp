// Gradual magnitude pruning (train/pruning.h): the schedule, which weights a mask keeps, the
// engine keeping pruned weights, gradients and Adam moments at exactly 0, and a CPU training run
// that prunes to 30% and exports dense tensors with the zeros in place.
#include "train/pruning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "support/fsdd_fixture.h"
#include "support/temp_dir.h"
#include "train/acoustic_model.h"
#include "train/checkpoint.h"
#include "train/export_model.h"
#include "train/step_engine.h"
#include "train/trainer.h"

namespace ds2 {
namespace {
namespace fs = std::filesystem;

TEST(Pruning, ScheduleFollowsTheCubicRamp) {
  PruneConfig cfg;
  cfg.density = 0.2;
  cfg.start_step = 100;
  cfg.end_step = 300;
  auto formula = [&](int64_t t) {
    const double p = std::clamp((t - 100) / 200.0, 0.0, 1.0);
    return 0.2 + 0.8 * std::pow(1 - p, 3);
  };
  for (int64_t t : {0, 50, 100, 101, 150, 200, 250, 299, 300, 301, 10000})
    EXPECT_NEAR(Pruner::density_at(cfg, t), formula(t), 1e-12) << "step " << t;
  EXPECT_EQ(Pruner::density_at(cfg, 100), 1.0);
  EXPECT_EQ(Pruner::density_at(cfg, 300), 0.2);
  EXPECT_NEAR(Pruner::density_at(cfg, 200), 0.2 + 0.8 * 0.125, 1e-15);
  cfg.density = 1;  // off: always dense
  EXPECT_EQ(Pruner::density_at(cfg, 200), 1.0);
}

ParameterStore recurrent_store() {
  ParameterStore store;
  store.add("rnn0.fwd.W", {6, 5}, Init::uniform(1));
  store.add("rnn0.fwd.U", {6, 6}, Init::uniform(1));
  store.add("rnn0.bwd.U", {9, 3}, Init::uniform(1));  // GRU-like: 3 gates x hidden 3
  store.add("fc.weight", {4, 6}, Init::uniform(1));
  store.finalize();
  Rng rng(5);
  store.initialize(rng);
  return store;
}

TEST(Pruning, UpdatesOnlyOnTheScheduleAndNeverAfter) {
  ParameterStore store = recurrent_store();
  PruneConfig cfg;
  cfg.density = 0.5;
  cfg.start_step = 10;
  cfg.end_step = 35;
  cfg.every = 10;
  Pruner pruner(cfg, store);
  std::vector<int64_t> due;
  for (int64_t t = 0; t <= 100; ++t)
    if (pruner.due(t)) due.push_back(t);
  EXPECT_EQ(due, (std::vector<int64_t>{10, 20, 30, 35}));
  cfg.density = 1;
  EXPECT_FALSE(Pruner(cfg, store).due(10));
}

// Each ".U" keeps exactly round(d * n) of its largest |w|, ties to the lower index; nothing else
// is masked.
TEST(Pruning, MaskKeepsTheLargestMagnitudesOfEachMatrix) {
  ParameterStore store = recurrent_store();
  float* v = store.values().data();
  // Ties across the keep boundary of rnn0.bwd.U.
  const ParamEntry* bwd = nullptr;
  for (const auto& e : store.parameters())
    if (e.name == "rnn0.bwd.U") bwd = &e;
  ASSERT_NE(bwd, nullptr);
  for (int64_t i = 0; i < bwd->numel; ++i) v[bwd->offset + i] = (i % 2 ? -0.5f : 0.5f);
  PruneConfig cfg;
  cfg.density = 0.3;
  cfg.start_step = 0;
  cfg.end_step = 4;
  Pruner pruner(cfg, store);
  ASSERT_EQ(pruner.masks().size(), 2u);
  EXPECT_EQ(pruner.total(), 36 + 27);
  EXPECT_EQ(pruner.kept(), 36 + 27);
  pruner.update(4, v);
  int64_t kept_total = 0;
  for (const WeightMask& m : pruner.masks()) {
    const auto expect = static_cast<int64_t>(std::llround(0.3 * m.numel));
    int64_t kept = 0;
    float smallest_kept = 1e30f, largest_pruned = -1;
    for (int64_t i = 0; i < m.numel; ++i) {
      const float a = std::fabs(v[m.offset + i]);
      if (m.mask[i])
        ++kept, smallest_kept = std::min(smallest_kept, a);
      else
        largest_pruned = std::max(largest_pruned, a);
    }
    EXPECT_EQ(kept, expect) << m.name;
    EXPECT_GE(smallest_kept, largest_pruned) << m.name;
    kept_total += kept;
  }
  EXPECT_EQ(pruner.kept(), kept_total);
  EXPECT_DOUBLE_EQ(pruner.density(), static_cast<double>(kept_total) / 63);
  // All ties: the lowest indices win.
  const WeightMask& tied = pruner.masks()[1];
  for (int64_t i = 0; i < tied.numel; ++i) EXPECT_EQ(tied.mask[i], i < 8 ? 1 : 0) << i;
  EXPECT_EQ(
      pruner.describe_update(4), "prune: step 4, density " +
                                     [&] {
                                       char b[32];
                                       std::snprintf(b, sizeof b, "%.4f", pruner.density());
                                       return std::string(b);
                                     }() +
                                     " (target 0.3000), " + std::to_string(kept_total) +
                                     " of 63 recurrent weights kept");

  // Checkpoint round trip, bit for bit, and a malformed mask named.
  Checkpoint ck;
  pruner.save(&ck);
  Pruner back(cfg, store);
  back.restore(ck);
  for (size_t k = 0; k < pruner.masks().size(); ++k)
    EXPECT_TRUE(std::equal(pruner.masks()[k].mask, pruner.masks()[k].mask + pruner.masks()[k].numel,
                           back.masks()[k].mask));
  EXPECT_EQ(back.target(), pruner.target());
  EXPECT_EQ(back.kept(), pruner.kept());
  ck.tensors[0].data[0] = 0.5f;
  ck.path = "x.ckpt";
  try {
    back.restore(ck);
    FAIL() << "a mask holding 0.5 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prune.mask.rnn0.fwd.U"), std::string::npos) << e.what();
  }
}

TEST(Pruning, ConfigKeysAreValidatedByName) {
  auto message = [](const std::string& yaml) {
    try {
      parse_config(yaml);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(parse_config("").prune.density, 1.0);
  EXPECT_NE(message("prune: {density: 0}\n").find("prune.density"), std::string::npos);
  EXPECT_NE(message("prune: {density: 1.5}\n").find("prune.density"), std::string::npos);
  EXPECT_NE(message("prune: {density: 0.5, start_step: 10, end_step: 10}\n").find("prune.end_step"),
            std::string::npos);
  EXPECT_NE(message("prune: {every: 0}\n").find("prune.every"), std::string::npos);
  EXPECT_NE(message("prune: {start_step: -1}\n").find("prune.start_step"), std::string::npos);
  EXPECT_EQ(message("prune: {density: 0.5, start_step: 10, end_step: 20, every: 5}\n"), "accepted");
}

const char* kEngineConfig =
    "run: {seed: 2, threads: 1, device: cpu}\n"
    "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
    "model: {conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 2,"
    " rnn_hidden: 16, rnn_type: gru}\n"
    "optim: {name: adam, lr: 0.01, weight_decay: 0.1}\n";

// Pruned weights stay exactly 0 through Adam steps with weight decay, their gradients reach the
// optimizer as 0 and their moments stay 0; the EMA is masked too.
TEST(Pruning, CpuEngineKeepsPrunedWeightsGradientsAndMomentsAtZero) {
  Config cfg = parse_config(kEngineConfig);
  AcousticModel am = AcousticModel::create(cfg);
  auto engine = make_step_engine(cfg, am, /*use_average=*/true);
  ParameterStore& store = am.model->parameters();
  PruneConfig pc;
  pc.density = 0.25;
  pc.start_step = 0;
  pc.end_step = 1;
  Pruner pruner(pc, store);
  ASSERT_EQ(pruner.masks().size(), 4u);  // 2 layers x 2 directions
  engine->set_weight_masks(pruner.masks());
  pruner.update(1, engine->live_weights());
  engine->set_weight_masks(pruner.masks());
  const Batch batch =
      synthetic_batch(3, 40, am.featurizer->num_features(), 4, am.model->num_classes(), 7);
  std::vector<double> losses;
  for (int step = 0; step < 4; ++step) {
    engine->forward_loss(batch, &losses);
    const double norm = engine->backward(1.0f / 3, 1.0f, 0.0);
    ASSERT_TRUE(std::isfinite(norm));
    engine->optimizer_step(0.01);
    engine->update_average(0.5f, 0.5f);
    const float* w = store.values().data();
    const float* g = store.grads().data();
    for (const WeightMask& m : pruner.masks())
      for (int64_t i = 0; i < m.numel; ++i)
        if (!m.mask[i]) {
          ASSERT_EQ(w[m.offset + i], 0.0f) << m.name << "[" << i << "] step " << step;
          ASSERT_EQ(g[m.offset + i], 0.0f) << m.name << "[" << i << "] step " << step;
        }
  }
  int64_t nonzero_kept = 0;
  for (const WeightMask& m : pruner.masks())
    for (int64_t i = 0; i < m.numel; ++i)
      nonzero_kept += m.mask[i] && store.values()[m.offset + i] != 0;
  EXPECT_GT(nonzero_kept, 0);
  Checkpoint ck;
  engine->save_state(&ck);
  for (const char* name : {"train.adam.m", "train.adam.v", "train.average"}) {
    const NamedTensor* t = ck.find(name);
    ASSERT_NE(t, nullptr) << name;
    for (const WeightMask& m : pruner.masks())
      for (int64_t i = 0; i < m.numel; ++i)
        if (!m.mask[i]) ASSERT_EQ(t->data[m.offset + i], 0.0f) << name << " " << m.name << i;
  }
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A CPU run prunes to 30% over a few dozen steps: each recurrent matrix ends with round(0.3 n)
// nonzeros at most (kept weights are nonzero in practice), the loss stays finite, the log, the
// metrics and the checkpoint say so, and the export holds the dense masked matrices.
TEST(Pruning, TrainerPrunesToTheTargetDensityAndExportsDenseTensors) {
  TempDir temp;
  const std::string manifest = testing::write_digit_manifest(temp.path(), "nicolas", {2, 4}, 5);
  Config cfg = parse_config(
      "run: {seed: 4, threads: 1, device: cpu}\n"
      "features: {sample_rate: 8000, type: mel, n_mels: 16}\n"
      "model: {conv: [{channels: 4, kernel: [5, 5], stride: [2, 2]}], rnn_layers: 1,"
      " rnn_hidden: 24}\n"
      "optim: {name: adam, lr: 0.003, schedule: constant}\n"
      "train: {epochs: 10, batch_size: 4, log_every: 5, ema_decay: 0.9}\n"
      "prune: {density: 0.3, start_step: 3, end_step: 21, every: 4}\n");
  cfg.run.dir = (temp.path() / "run").string();
  cfg.data.train_manifest = manifest;
  const TrainSummary s = Trainer(cfg).run();
  ASSERT_EQ(s.steps, 30);
  EXPECT_TRUE(std::isfinite(s.last_loss));
  const int64_t n = 2 * 24 * 24;  // both directions
  EXPECT_DOUBLE_EQ(s.recurrent_density, static_cast<double>(2 * std::llround(0.3 * 24 * 24)) / n);

  const std::string log = read_text(temp.path() / "run" / "train.log");
  EXPECT_NE(log.find("pruning: on, 2 recurrent matrices"), std::string::npos) << log;
  for (int step : {3, 7, 11, 15, 19, 21})
    EXPECT_NE(log.find("prune: step " + std::to_string(step) + ", density"), std::string::npos)
        << step;
  EXPECT_EQ(log.find("prune: step 23"), std::string::npos);
  EXPECT_NE(log.find("(target 0.3000), 346 of 1152 recurrent weights kept"), std::string::npos);
  EXPECT_NE(read_text(temp.path() / "run" / "metrics.jsonl").find("\"density\""),
            std::string::npos);

  const fs::path last = temp.path() / "run" / "last.ckpt";
  const Checkpoint ck = load_checkpoint(last.string());
  for (const char* name : {"rnn0.fwd.U", "rnn0.bwd.U"}) {
    const NamedTensor* mask = ck.find(std::string("prune.mask.") + name);
    ASSERT_NE(mask, nullptr) << name;
    const NamedTensor* w = ck.find(name);  // the EMA: masked as well
    ASSERT_NE(w, nullptr);
    int64_t kept = 0;
    for (size_t i = 0; i < mask->data.size(); ++i) {
      kept += mask->data[i] == 1.0f;
      if (mask->data[i] == 0.0f) ASSERT_EQ(w->data[i], 0.0f) << name << "[" << i << "]";
    }
    EXPECT_EQ(kept, std::llround(0.3 * 24 * 24)) << name;
  }

  // The export: dense tensors of the model's shapes, zeros included, no masks or training state.
  const fs::path out = temp.path() / "model.safetensors";
  export_model(last.string(), out.string());
  const Checkpoint ex = load_checkpoint(out.string());
  for (const char* name : {"rnn0.fwd.U", "rnn0.bwd.U"}) {
    const NamedTensor* w = ex.find(name);
    ASSERT_NE(w, nullptr) << name;
    EXPECT_EQ(w->shape, ck.find(name)->shape);
    EXPECT_EQ(static_cast<int64_t>(w->data.size()), 24 * 24);
    EXPECT_TRUE(w->data == ck.find(name)->data) << name;
    EXPECT_EQ(std::count(w->data.begin(), w->data.end(), 0.0f),
              24 * 24 - std::llround(0.3 * 24 * 24))
        << name;
  }
  for (const auto& t : ex.tensors) EXPECT_NE(t.name.rfind("prune.", 0), 0u) << t.name;
}

}  // namespace
}  // namespace ds2
