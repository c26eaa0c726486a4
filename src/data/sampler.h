// Batch sampler: SortaGrad (the first epoch in order of increasing duration, as in Deep Speech
// 2), then length-bucketed shuffled batches: utterances of similar duration share a batch, so
// padding stays small, while the order of batches is random. Deterministic given the seed and
// epoch, and sharded by rank: every rank sees the same global batches and takes its own slice.
// With groups (e.g. one per speaker: data.speaker_batches) every batch comes from one group, so
// batch statistics are one group's; batches are formed the same way within each group and then
// shuffled together (SortaGrad: ordered by their shortest utterance).
//
//   ds2::BatchSampler sampler(durations, /*batch_size=*/16, /*sortagrad=*/true, seed);
//   sampler.set_groups(speaker_of_each_utterance);  // optional
//   for (const auto& batch : sampler.epoch(e)) { ... indices into `durations` ... }
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ds2 {

class BatchSampler {
 public:
  BatchSampler(std::vector<double> durations, int batch_size, bool sortagrad, uint64_t seed,
               int rank = 0, int world_size = 1, int bucket_batches = 8);
  // One group id per utterance (any ints); empty: no grouping.
  void set_groups(std::vector<int> groups);
  // This rank's batches for `epoch` (0-based), as indices into the durations given.
  std::vector<std::vector<int>> epoch(int epoch) const;
  int batches_per_epoch() const;

 private:
  // Global batches of the utterances `order` lists (in order of duration).
  std::vector<std::vector<int>> batches_of(std::vector<int> order, bool sorted_epoch,
                                           std::mt19937_64& rng) const;
  std::vector<double> durations_;
  std::vector<int> groups_;
  int batch_size_;
  bool sortagrad_;
  uint64_t seed_;
  int rank_, world_size_, bucket_batches_;
};

}  // namespace ds2
