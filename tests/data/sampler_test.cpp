#include "data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/error.h"

namespace ds2 {
namespace {

std::vector<double> durations(int n) {
  std::vector<double> d;
  for (int i = 0; i < n; ++i) d.push_back(1.0 + ((i * 37) % 101) / 10.0);
  return d;
}

TEST(BatchSampler, FirstEpochIsSortedByDuration) {
  const auto d = durations(50);
  BatchSampler s(d, 8, true, 7);
  auto batches = s.epoch(0);
  ASSERT_EQ(batches.size(), 7u);
  EXPECT_EQ(s.batches_per_epoch(), 7);
  double prev = 0;
  for (const auto& b : batches)
    for (int i : b) {
      EXPECT_GE(d[i], prev);
      prev = d[i];
    }
  EXPECT_EQ(batches.back().size(), 2u);
}

TEST(BatchSampler, LaterEpochsShuffleDeterministicallyAndCoverEverything) {
  const auto d = durations(100);
  BatchSampler s(d, 8, true, 7, 0, 1, 2);
  auto e1 = s.epoch(1), e1again = BatchSampler(d, 8, true, 7, 0, 1, 2).epoch(1);
  EXPECT_EQ(e1, e1again);
  EXPECT_NE(e1, s.epoch(2));
  EXPECT_NE(e1, BatchSampler(d, 8, true, 8, 0, 1, 2).epoch(1));
  std::multiset<int> seen;
  for (const auto& b : e1) seen.insert(b.begin(), b.end());
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), 100u);
  // Length bucketing: each batch comes from one bucket of 16 neighbours in duration order, so
  // its spread is bounded by that bucket's.
  for (const auto& b : e1) {
    auto [lo, hi] =
        std::minmax_element(b.begin(), b.end(), [&](int x, int y) { return d[x] < d[y]; });
    EXPECT_LT(d[*hi] - d[*lo], 2.5);
  }
  // Without SortaGrad the first epoch is shuffled too.
  EXPECT_NE(BatchSampler(d, 8, false, 7).epoch(0), BatchSampler(d, 8, true, 7).epoch(0));
}

TEST(BatchSampler, RanksTakeDisjointSlicesOfTheSameGlobalBatches) {
  const auto d = durations(64);
  BatchSampler whole(d, 8, true, 3), r0(d, 8, true, 3, 0, 2), r1(d, 8, true, 3, 1, 2);
  auto g = whole.epoch(1), a = r0.epoch(1), b = r1.epoch(1);
  ASSERT_EQ(a.size(), g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    std::vector<int> joined = a[i];
    joined.insert(joined.end(), b[i].begin(), b[i].end());
    EXPECT_EQ(joined, g[i]);
    EXPECT_EQ(a[i].size(), 4u);
  }
}

// With groups (speakers), every batch holds one group: 3 groups of 21, 10 and 33 utterances at
// batch 8 give 3 + 2 + 5 batches covering each utterance once, the first epoch ordered by each
// batch's shortest utterance, later epochs shuffled deterministically.
TEST(BatchSampler, GroupsNeverShareABatch) {
  const auto d = durations(64);
  std::vector<int> groups(64);
  for (int i = 0; i < 64; ++i) groups[i] = i < 21 ? 7 : (i < 31 ? -2 : 40);
  BatchSampler s(d, 8, true, 5);
  s.set_groups(groups);
  EXPECT_EQ(s.batches_per_epoch(), 10);
  for (int epoch : {0, 1, 2}) {
    const auto batches = s.epoch(epoch);
    ASSERT_EQ(batches.size(), 10u) << epoch;
    std::multiset<int> seen;
    for (const auto& b : batches) {
      ASSERT_FALSE(b.empty());
      for (int i : b) {
        EXPECT_EQ(groups[i], groups[b.front()]) << "epoch " << epoch;
        seen.insert(i);
      }
    }
    EXPECT_EQ(seen.size(), 64u);
    EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), 64u);
    if (epoch == 0) {
      for (size_t k = 1; k < batches.size(); ++k)
        EXPECT_LE(d[batches[k - 1].front()], d[batches[k].front()]);
    }
  }
  BatchSampler again(d, 8, true, 5);
  again.set_groups(groups);
  EXPECT_EQ(again.epoch(2), s.epoch(2));
  EXPECT_NE(s.epoch(1), s.epoch(2));
  EXPECT_THROW(s.set_groups({1, 2}), Error);
}

}  // namespace
}  // namespace ds2
