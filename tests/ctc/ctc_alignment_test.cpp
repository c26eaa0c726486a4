#include "ctc/ctc_alignment.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "ctc/greedy_decoder.h"

namespace ds2 {
namespace {

std::vector<float> random_logits(int frames, int classes, unsigned seed, float blank_bias) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(frames) * classes);
  for (int t = 0; t < frames; ++t)
    for (int k = 0; k < classes; ++k) x[t * classes + k] = normal(rng) + (k == 0 ? blank_bias : 0);
  return x;
}

// The CTC collapse of a path: repeats merged, blanks dropped.
std::vector<int> collapse(const std::vector<int>& path) {
  std::vector<int> out;
  int previous = 0;
  for (int c : path) {
    if (c != 0 && c != previous) out.push_back(c);
    previous = c;
  }
  return out;
}

double path_score(const std::vector<float>& lp, int classes, const std::vector<int>& path) {
  double s = 0;
  for (size_t t = 0; t < path.size(); ++t) s += lp[t * classes + path[t]];
  return s;
}

TEST(CtcAlignment, LogSoftmaxRowsSumToOne) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, -50.0f, 0.0f, 50.0f};
  const std::vector<float> lp = log_softmax_frames(x.data(), 2, 3);
  EXPECT_NEAR(lp[0], 1.0 - std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-6);
  EXPECT_NEAR(lp[5], 0.0, 1e-6);  // 50 dominates its row
  for (int t = 0; t < 2; ++t) {
    double sum = 0;
    for (int k = 0; k < 3; ++k) sum += std::exp(lp[t * 3 + k]);
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

TEST(CtcAlignment, LabelSpansMergeRepeatsAndSplitAtBlanks) {
  const std::vector<LabelSpan> spans = label_spans({0, 1, 1, 0, 1, 2, 2, 0, 3});
  ASSERT_EQ(spans.size(), 4u);
  const int expected[4][3] = {{1, 1, 2}, {1, 4, 4}, {2, 5, 6}, {3, 8, 8}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(spans[i].label, expected[i][0]);
    EXPECT_EQ(spans[i].first, expected[i][1]);
    EXPECT_EQ(spans[i].last, expected[i][2]);
  }
  EXPECT_TRUE(label_spans({0, 0, 0}).empty());
}

// The argmax path is the best path overall and it spells the greedy text, so forcing the greedy
// text must give it back, frame for frame: over several segment counts of the
// memory-saving backtrack (sqrt(8 T) frames per segment).
TEST(CtcAlignment, ForcingTheGreedyTextGivesTheBestPath) {
  for (int frames : {1, 7, 50, 333, 2000}) {
    const int K = 6;
    const std::vector<float> logits = random_logits(frames, K, 100 + frames, 1.0f);
    const std::vector<float> lp = log_softmax_frames(logits.data(), frames, K);
    const std::vector<int> path = best_path(logits.data(), frames, K);
    std::vector<int> greedy;
    greedy_decode_utterance(logits.data(), frames, 1, K, 0, frames, &greedy);
    ASSERT_EQ(collapse(path), greedy);
    EXPECT_EQ(forced_alignment(lp.data(), frames, K, greedy), path) << frames << " frames";
  }
}

// Against brute force: every one of K^T paths of a small case.
TEST(CtcAlignment, ForcedAlignmentIsTheMostProbablePathForTheLabels) {
  const int T = 7, K = 3;
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const std::vector<float> logits = random_logits(T, K, seed, 0.0f);
    const std::vector<float> lp = log_softmax_frames(logits.data(), T, K);
    for (const std::vector<int>& labels : {std::vector<int>{1, 2}, std::vector<int>{2, 2},
                                           std::vector<int>{1, 2, 1, 1}, std::vector<int>{2}}) {
      double best = -std::numeric_limits<double>::infinity();
      std::vector<int> path(T);
      for (int code = 0; code < std::pow(K, T); ++code) {
        for (int t = 0, c = code; t < T; ++t, c /= K) path[t] = c % K;
        if (collapse(path) == labels) best = std::max(best, path_score(lp, K, path));
      }
      const std::vector<int> got = forced_alignment(lp.data(), T, K, labels);
      ASSERT_EQ(got.size(), static_cast<size_t>(T));
      EXPECT_EQ(collapse(got), labels);
      EXPECT_NEAR(path_score(lp, K, got), best, 1e-5) << "seed " << seed;
    }
  }
}

TEST(CtcAlignment, ImpossibleAlignmentsAreEmpty) {
  const std::vector<float> lp = log_softmax_frames(random_logits(3, 3, 9, 0).data(), 3, 3);
  // "a a" needs a blank between: 3 frames, not 2.
  EXPECT_TRUE(forced_alignment(lp.data(), 2, 3, {1, 1}).empty());
  EXPECT_EQ(forced_alignment(lp.data(), 3, 3, {1, 1}), (std::vector<int>{1, 0, 1}));
  EXPECT_TRUE(forced_alignment(lp.data(), 3, 3, {1, 2, 1, 2}).empty());
  EXPECT_EQ(forced_alignment(lp.data(), 3, 3, {}), (std::vector<int>{0, 0, 0}));
  EXPECT_THROW(forced_alignment(lp.data(), 3, 3, {3}), Error);
}

}  // namespace
}  // namespace ds2
