// The trainer's data-parallel steps that involve every rank: startup consistency (same resolved
// config and parameter layout as rank 0, rank 0's initial weights and feature statistics
// everywhere), the resume checkpoint read once and shared, dev evaluation split over the ranks,
// and the debug check that all ranks hold identical weights. Each is a no-op or a plain local
// call with one rank.
//
//   dist::World& world = dist::World::get();
//   check_same_config(world, cfg);           // throws on a rank whose config differs, naming the
//   key share_initial_state(world, am);          // rank 0's weights, batch-norm buffers,
//   statistics EvalResult r = evaluate_across_ranks(world, am, dev, batch, threads);
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "data/dataset.h"
#include "dist/world.h"
#include "train/acoustic_model.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/evaluate.h"
#include "train/step_engine.h"

namespace ds2 {

// Every rank compares its resolved config with rank 0's, key by key; a rank that differs throws
// naming the first differing key.
void check_same_config(dist::World& world, const Config& cfg);

// Checks the parameter layout (names and shapes) against rank 0's by hash (another ds2 version
// would differ), then sends rank 0's parameters, batch-norm buffers and global feature
// statistics to every rank.
void share_initial_state(dist::World& world, AcousticModel& am);

// The checkpoint at rank 0's `path` (none when it has none), read once by rank 0 and sent to
// every rank as file bytes, so nodes need not share a filesystem. With one rank, a plain load.
std::optional<Checkpoint> load_shared_checkpoint(dist::World& world,
                                                 const std::optional<std::string>& path);

// Each rank decodes every size()-th utterance of `dev` and the error counts are summed, so every
// rank returns the whole set's WER/CER (the per-utterance results stay local).
EvalResult evaluate_across_ranks(dist::World& world, AcousticModel& am, const Dataset& dev,
                                 int batch_size, int threads);

// Throws naming the step and the first rank whose live weights differ from rank 0's.
void check_identical_weights(dist::World& world, StepEngine& engine, int64_t step);

}  // namespace ds2
