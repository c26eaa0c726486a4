#include "data/sampler.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "core/error.h"

namespace ds2 {

BatchSampler::BatchSampler(std::vector<double> durations, int batch_size, bool sortagrad,
                           uint64_t seed, int rank, int world_size, int bucket_batches)
    : durations_(std::move(durations)),
      batch_size_(batch_size),
      sortagrad_(sortagrad),
      seed_(seed),
      rank_(rank),
      world_size_(world_size),
      bucket_batches_(bucket_batches) {
  DS2_CHECK(batch_size_ > 0, "batch size must be positive");
  DS2_CHECK(world_size_ > 0 && rank_ >= 0 && rank_ < world_size_,
            "bad rank " << rank_ << "/" << world_size_);
  DS2_CHECK(batch_size_ >= world_size_,
            "global batch " << batch_size_ << " is smaller than the " << world_size_ << " ranks");
}

void BatchSampler::set_groups(std::vector<int> groups) {
  DS2_CHECK(groups.empty() || groups.size() == durations_.size(),
            groups.size() << " group ids for " << durations_.size() << " utterances");
  groups_ = std::move(groups);
}

int BatchSampler::batches_per_epoch() const {
  // The same for every epoch (with groups too): counted on the first, once per run.
  return static_cast<int>(epoch(0).size());
}

std::vector<std::vector<int>> BatchSampler::batches_of(std::vector<int> order, bool sorted_epoch,
                                                       std::mt19937_64& rng) const {
  if (!sorted_epoch) {
    const size_t bucket = static_cast<size_t>(batch_size_) * bucket_batches_;
    for (size_t start = 0; start < order.size(); start += bucket) {
      const size_t end = std::min(order.size(), start + bucket);
      std::shuffle(order.begin() + start, order.begin() + end, rng);
    }
  }
  std::vector<std::vector<int>> global;
  for (size_t start = 0; start < order.size(); start += batch_size_) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(batch_size_));
    global.emplace_back(order.begin() + start, order.begin() + end);
  }
  return global;
}

std::vector<std::vector<int>> BatchSampler::epoch(int epoch) const {
  std::vector<int> order(durations_.size());
  std::iota(order.begin(), order.end(), 0);
  // Stable sort keeps ties in manifest order, so the result does not depend on the library.
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return durations_[a] < durations_[b]; });
  std::mt19937_64 rng(seed_ * 1000003ull + static_cast<uint64_t>(epoch));
  const bool sorted_epoch = sortagrad_ && epoch == 0;
  std::vector<std::vector<int>> global;
  if (groups_.empty()) {
    global = batches_of(std::move(order), sorted_epoch, rng);
  } else {
    std::map<int, std::vector<int>> by_group;  // each in order of duration
    for (int i : order) by_group[groups_[i]].push_back(i);
    for (auto& [group, members] : by_group) {
      std::vector<std::vector<int>> batches = batches_of(std::move(members), sorted_epoch, rng);
      global.insert(global.end(), batches.begin(), batches.end());
    }
    if (sorted_epoch)
      std::stable_sort(global.begin(), global.end(), [&](const auto& a, const auto& b) {
        return durations_[a.front()] < durations_[b.front()];
      });
  }
  if (!sorted_epoch) std::shuffle(global.begin(), global.end(), rng);
  std::vector<std::vector<int>> mine;
  mine.reserve(global.size());
  for (const auto& batch : global) {
    // Contiguous slices, so a rank's share of a batch has similar durations too.
    const size_t n = batch.size(), per = (n + world_size_ - 1) / world_size_;
    const size_t begin = std::min(n, per * rank_), end = std::min(n, begin + per);
    mine.emplace_back(batch.begin() + begin, batch.begin() + end);
  }
  return mine;
}

}  // namespace ds2
