#include "ctc/greedy_decoder.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace ds2 {
namespace {

// Builds {T, B, K} logits whose argmax at frame t of utterance b is best[b][t]; frames past
// best[b].size() are padding filled with a large score for class 1 to prove they are ignored.
Sequences make_logits(const std::vector<std::vector<int>>& best, int T, int K) {
  const int B = static_cast<int>(best.size());
  Sequences seq;
  seq.data.resize({T, B, K});
  for (int t = 0; t < T; ++t) {
    for (int b = 0; b < B; ++b) {
      float* x = seq.data.data() + (t * B + b) * K;
      for (int k = 0; k < K; ++k) x[k] = -0.1f * k;
      const bool valid = t < static_cast<int>(best[b].size());
      x[valid ? best[b][t] : 1] = valid ? 2.0f : 50.0f;
    }
  }
  for (const auto& frames : best) seq.lengths.push_back(static_cast<int>(frames.size()));
  return seq;
}

TEST(GreedyDecoder, CollapsesRepeatsAndDropsBlanks) {
  const Sequences logits = make_logits({{1, 1, 0, 1, 2, 2, 0, 3}, {0, 3, 3, 3, 0}}, 8, 4);
  const auto hyps = greedy_decode(logits);
  ASSERT_EQ(hyps.size(), 2u);
  // The blank between the two 1s keeps them apart; 2 2 merges.
  EXPECT_EQ(hyps[0], (std::vector<int>{1, 1, 2, 3}));
  // Padding frames 5..7 would add a 1 if they were read.
  EXPECT_EQ(hyps[1], (std::vector<int>{3}));
}

TEST(GreedyDecoder, AllBlankAndEmptyUtterancesDecodeToNothing) {
  const auto hyps = greedy_decode(make_logits({{0, 0, 0}, {}}, 3, 3));
  EXPECT_TRUE(hyps[0].empty());
  EXPECT_TRUE(hyps[1].empty());
}

TEST(GreedyDecoder, TiesGoToTheLowestClass) {
  // Frame 0: classes 2 and 3 tie -> 2. Frame 1: blank ties with 1 -> blank. Frame 2: all equal.
  const std::vector<float> logits = {0, 0, 1, 1, 5, 5, 0, 0, 7, 7, 7, 7};
  std::vector<int> hyp = {9, 9};  // stale contents are cleared
  greedy_decode_utterance(logits.data(), 3, 1, 4, 0, 3, &hyp);
  EXPECT_EQ(hyp, (std::vector<int>{2}));
}

TEST(GreedyDecoder, ReadsTheRightUtteranceOfATimeMajorBatch) {
  // T=2, B=2, K=3: utterance 1's frames are rows 1 and 3.
  const std::vector<float> logits = {9, 0, 0, 0, 9, 0, 9, 0, 0, 0, 0, 9};
  std::vector<int> hyp;
  greedy_decode_utterance(logits.data(), 2, 2, 3, 1, 2, &hyp);
  EXPECT_EQ(hyp, (std::vector<int>{1, 2}));
  greedy_decode_utterance(logits.data(), 2, 2, 3, 0, 2, &hyp);
  EXPECT_TRUE(hyp.empty());
}

TEST(GreedyDecoder, RejectsBadLengths) {
  const std::vector<float> logits(6, 0.0f);
  std::vector<int> hyp;
  EXPECT_THROW(greedy_decode_utterance(logits.data(), 2, 1, 3, 0, 3, &hyp), Error);
  EXPECT_THROW(greedy_decode_utterance(logits.data(), 2, 1, 3, 1, 2, &hyp), Error);
}

}  // namespace
}  // namespace ds2
