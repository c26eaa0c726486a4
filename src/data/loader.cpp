#include "data/loader.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace ds2 {

Loader::Loader(const Dataset& dataset, const Featurizer& featurizer, int threads, int prefetch)
    // A worker fills a whole batch in a slot of its own, and the trainer holds one: fewer slots
    // than threads + 1 would leave threads idle (prefetch 4 ran 12 loader threads as 3).
    : dataset_(dataset),
      featurizer_(featurizer),
      slots_(static_cast<size_t>(std::max(prefetch, std::max(1, threads) + 1))) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { worker(); });
}

Loader::~Loader() {
  stop_workers();
}

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shutdown_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void Loader::start_epoch(std::vector<std::vector<int>> batches, uint64_t seed, int epoch,
                         bool augment) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Wait for workers still filling the previous epoch's slots before reusing them.
  cv_.wait(lock, [&] {
    for (auto& s : slots_)
      if (!s.ready && s.batch.index >= released_ && s.batch.index < next_job_) return false;
    return true;
  });
  batches_ = std::move(batches);
  seed_ = seed;
  epoch_ = epoch;
  augment_ = augment;
  next_job_ = 0;
  released_ = 0;
  held_ = -1;
  ++generation_;
  for (auto& s : slots_) s.ready = false, s.batch.index = -1;
  lock.unlock();
  cv_.notify_all();
}

const Batch* Loader::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (held_ >= 0) {
    released_ = held_ + 1;
    slots_[held_ % slots_.size()].ready = false;
    held_ = -1;
    cv_.notify_all();
  }
  if (released_ >= static_cast<int64_t>(batches_.size())) return nullptr;
  Slot& slot = slots_[released_ % slots_.size()];
  cv_.wait(lock, [&] { return (slot.ready && slot.batch.index == released_) || !fatal_.empty(); });
  if (!fatal_.empty()) throw Error(fatal_);
  held_ = released_;
  return &slot.batch;
}

void Loader::worker() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [&] {
      return shutdown_ || (next_job_ < static_cast<int64_t>(batches_.size()) &&
                           next_job_ < released_ + static_cast<int64_t>(slots_.size()));
    });
    if (shutdown_) return;
    const int64_t index = next_job_++;
    Slot& slot = slots_[index % slots_.size()];
    slot.ready = false;
    slot.batch.index = index;
    const uint64_t generation = generation_;
    lock.unlock();
    std::string error;
    try {
      fill(slot, index);
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    if (!error.empty()) fatal_ = error;
    if (generation == generation_) slot.ready = true;
    cv_.notify_all();
  }
}

void Loader::fill(Slot& slot, int64_t index) {
  Batch& b = slot.batch;
  const std::vector<int>& members = batches_[index];
  b.examples.clear();
  b.labels.clear();
  b.failures.clear();
  b.audio_seconds = 0;
  // Featurize each utterance into the slot's staging tensors, then pack them time-major.
  const int F = featurizer_.num_features();
  std::vector<Tensor>& staged = slot.staged;
  staged.resize(members.size());
  size_t kept = 0;
  int64_t max_frames = 0;
  for (int ex : members) {
    const Example& example = dataset_.examples[ex];
    Rng rng(seed_ * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(epoch_) << 32) ^
            static_cast<uint64_t>(ex));
    try {
      featurizer_.featurize_file(example.utterance.audio_path, augment_ ? &rng : nullptr,
                                 staged[kept]);
    } catch (const Error& e) {
      b.failures.push_back(describe_problem(example.utterance, e.what()));
      continue;
    }
    max_frames = std::max(max_frames, staged[kept].dim(0));
    b.examples.push_back(ex);
    b.labels.push_back(example.labels);
    b.audio_seconds += example.duration_s;
    ++kept;
  }
  const int64_t B = static_cast<int64_t>(kept);
  b.features.data.resize({max_frames, B, F});
  b.features.data.fill(0.0f);
  b.features.lengths.assign(B, 0);
  for (int64_t i = 0; i < B; ++i) {
    const Tensor& f = staged[i];
    b.features.lengths[i] = static_cast<int>(f.dim(0));
    for (int64_t t = 0; t < f.dim(0); ++t)
      std::memcpy(b.features.data.data() + (t * B + i) * F, f.data() + t * F, F * sizeof(float));
  }
}

}  // namespace ds2
