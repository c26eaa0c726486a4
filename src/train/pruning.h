// Gradual magnitude pruning of the recurrent matrices (issue 9, Zhu & Gupta 2017): every RNN
// layer's ".U" (both directions, GRU too) keeps a 0/1 mask; on the schedule of PruneConfig the
// masks are recomputed from the live weights, each matrix on its own keeping its round(d * n)
// largest |w| (ties to the lower index). The engine applies the masks to the gradients before
// and to the weights after every optimizer step, so pruned weights stay exactly 0 and the dense
// kernels keep working on the masked matrices.
//
//   Pruner pruner(cfg.prune, am.model->parameters());
//   engine->set_weight_masks(pruner.masks());             // once before reserve (sizes memory)
//   ... after optimizer step `step`:
//   if (pruner.due(step)) {
//     pruner.update(step, engine->live_weights());
//     engine->set_weight_masks(pruner.masks());
//   }
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/parameters.h"
#include "train/checkpoint.h"
#include "train/config.h"

namespace ds2 {

// A pruned region of the flat parameter buffer: mask[i] (0 or 1) belongs to values[offset + i].
struct WeightMask {
  std::string name;  // the parameter's name ("rnn0.fwd.U")
  int64_t offset = 0;
  int64_t numel = 0;
  const uint8_t* mask = nullptr;
};

// Zeroes data[offset + i] where mask[i] == 0, for every mask (the engines' CPU path, and the
// reference of kernels::apply_mask).
void apply_weight_masks(const std::vector<WeightMask>& masks, float* data);

class Pruner {
 public:
  // Masks (all ones) for every ".U" parameter of `store`, allocated here once.
  Pruner(const PruneConfig& cfg, const ParameterStore& store);

  // prune.density < 1.
  bool enabled() const { return cfg_.density < 1; }
  // The schedule's density at `step`: 1 up to start_step, the final density from end_step on.
  static double density_at(const PruneConfig& cfg, int64_t step);
  // Whether the masks are recomputed after optimizer step `step` (steps counted from 1): every
  // `every` steps from start_step, and at end_step; never after it.
  bool due(int64_t step) const;
  // Recomputes every mask from the flat live weights `values` for the density at `step`.
  void update(int64_t step, const float* values);

  const std::vector<WeightMask>& masks() const { return masks_; }
  int64_t kept() const { return kept_; }    // weights kept over all masks
  int64_t total() const { return total_; }  // weights under a mask
  double density() const { return total() > 0 ? static_cast<double>(kept()) / total() : 1.0; }
  double target() const { return target_; }  // the schedule's density at the last update
  // "prune: step N, density D (target T), K of M recurrent weights kept"
  std::string describe_update(int64_t step) const;
  // The schedule, for the training start summary.
  std::string describe_schedule() const;

  // Masks as fp32 0/1 tensors "prune.mask.<name>" and metadata "prune.target" (the checkpoint
  // format stores float32 only).
  void save(Checkpoint* ck) const;
  // Restores what save() wrote; a checkpoint without masks (a run that did not prune) leaves
  // all ones. Throws naming the checkpoint and tensor on a malformed mask.
  void restore(const Checkpoint& ck);

 private:
  PruneConfig cfg_;
  std::vector<std::vector<uint8_t>> storage_;
  std::vector<WeightMask> masks_;
  std::vector<int64_t> order_;  // scratch for update(), sized to the largest matrix
  double target_ = 1.0;
  int64_t kept_ = 0, total_ = 0;
  void count_kept();
};

}  // namespace ds2
