// Loader: worker threads read and featurize the batches of an epoch ahead of the trainer, in
// order, each thread a whole batch. A fixed ring of max(prefetch, threads + 1) batch slots is
// reused for the whole run, so every thread has a batch to fill and, once the largest batch has
// been seen, no memory is allocated for features. An utterance that fails to load
// (e.g. a file changed since validation) is dropped from its batch with the reason recorded in
// the batch, for the trainer to count and log.
//
//   ds2::Loader loader(dataset, featurizer, /*threads=*/2, /*prefetch=*/4);
//   loader.start_epoch(sampler.epoch(e), seed, e, /*augment=*/true);
//   while (const ds2::Batch* b = loader.next()) train_step(*b);
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/featurizer.h"
#include "nn/sequences.h"

namespace ds2 {

struct Batch {
  int64_t index = 0;                     // position in the epoch
  Sequences features;                    // {T, B, F}, padding zero
  std::vector<std::vector<int>> labels;  // per utterance
  std::vector<int> examples;             // dataset indices of the utterances in the batch
  std::vector<std::string> failures;     // utterances dropped while loading, with reasons
  double audio_seconds = 0;
};

class Loader {
 public:
  Loader(const Dataset& dataset, const Featurizer& featurizer, int threads, int prefetch);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts producing `batches` (dataset indices). Augmentation draws from an Rng seeded by
  // (seed, epoch, utterance), so results do not depend on thread timing.
  void start_epoch(std::vector<std::vector<int>> batches, uint64_t seed, int epoch, bool augment);
  // The next batch in order, valid until the following call; nullptr at the end of the epoch.
  const Batch* next();
  // Batch slots in the ring (prefetch, raised to threads + 1).
  int slots() const { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    Batch batch;
    bool ready = false;
    std::vector<Tensor> staged;  // per-utterance features before packing (reused)
  };
  void worker();
  void fill(Slot& slot, int64_t index);
  void stop_workers();

  const Dataset& dataset_;
  const Featurizer& featurizer_;
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::vector<int>> batches_;
  uint64_t seed_ = 0;
  int epoch_ = 0;
  bool augment_ = false;
  int64_t next_job_ = 0;  // next batch a worker will take
  int64_t released_ = 0;  // batches the trainer has finished with
  int64_t held_ = -1;     // batch the trainer holds now
  uint64_t generation_ = 0;
  bool shutdown_ = false;
  std::string fatal_;  // unexpected worker error, rethrown by next()
};

}  // namespace ds2
