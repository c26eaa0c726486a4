// Batch sampler: SortaGrad (the first epoch in order of increasing duration, as in Deep Speech
// 2), then length-bucketed shuffled batches: utterances of similar duration share a batch, so
// padding stays small, while the order of batches is random. Deterministic given the seed and
// epoch, and sharded by rank: every rank sees the same global batches and takes its own slice.
//
//   ds2::BatchSampler sampler(durations, /*batch_size=*/16, /*sortagrad=*/true, seed);
//   for (const auto& batch : sampler.epoch(e)) { ... indices into `durations` ... }
#pragma once

#include <cstdint>
#include <vector>

namespace ds2 {

class BatchSampler {
 public:
  BatchSampler(std::vector<double> durations, int batch_size, bool sortagrad, uint64_t seed,
               int rank = 0, int world_size = 1, int bucket_batches = 8);
  // This rank's batches for `epoch` (0-based), as indices into the durations given.
  std::vector<std::vector<int>> epoch(int epoch) const;
  int batches_per_epoch() const;

 private:
  std::vector<double> durations_;
  int batch_size_;
  bool sortagrad_;
  uint64_t seed_;
  int rank_, world_size_, bucket_batches_;
};

}  // namespace ds2
