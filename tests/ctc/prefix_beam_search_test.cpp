#include "ctc/prefix_beam_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "core/error.h"
#include "ctc/greedy_decoder.h"

namespace ds2 {
namespace {

// Logits of one utterance (batch 1) whose softmax is exactly `probs[t]` at frame t.
std::vector<float> logits_of(const std::vector<std::vector<double>>& probs) {
  std::vector<float> out;
  for (const auto& frame : probs)
    for (double p : frame) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

std::vector<BeamHypothesis> decode(const PrefixBeamSearch& search,
                                   const std::vector<std::vector<double>>& probs) {
  const std::vector<float> logits = logits_of(probs);
  const int T = static_cast<int>(probs.size());
  const int K = T ? static_cast<int>(probs[0].size()) : 3;
  return search.decode(logits.data(), T, 1, K, 0, T);
}

std::vector<int> greedy(const std::vector<std::vector<double>>& probs) {
  const std::vector<float> logits = logits_of(probs);
  const int T = static_cast<int>(probs.size());
  std::vector<int> labels;
  greedy_decode_utterance(logits.data(), T, 1, static_cast<int>(probs[0].size()), 0, T, &labels);
  return labels;
}

BeamSearchOptions wide() {
  BeamSearchOptions opt;
  opt.beam_width = 8;
  opt.prune_log_prob = -1e9;
  return opt;
}

TEST(BeamSearch, SummingAlignmentsBeatsTheBestPath) {
  // Two frames, P(blank) = 0.6, P(a) = 0.4 each. The best path is "blank blank" (0.36): greedy
  // says "". But "a" has three alignments: a a, a _, _ a = 0.16 + 0.24 + 0.24 = 0.64.
  const std::vector<std::vector<double>> probs = {{0.6, 0.4}, {0.6, 0.4}};
  EXPECT_TRUE(greedy(probs).empty());
  const auto nbest = decode(PrefixBeamSearch(wide()), probs);
  ASSERT_EQ(nbest.size(), 2u);
  EXPECT_EQ(nbest[0].labels, (std::vector<int>{1}));
  EXPECT_NEAR(nbest[0].acoustic, std::log(0.64), 1e-6);
  EXPECT_NEAR(nbest[0].score, std::log(0.64), 1e-6);
  EXPECT_EQ(nbest[0].lm, 0);
  EXPECT_TRUE(nbest[1].labels.empty());
  EXPECT_NEAR(nbest[1].acoustic, std::log(0.36), 1e-6);
}

TEST(BeamSearch, RepeatsNeedABlankBetweenThem) {
  // Three frames a, blank, a: "a a" (0.9 * 0.9 * 0.9 plus nothing else) vs "a" which needs a
  // label at the middle frame to merge: here the blank dominates, so "a a" wins.
  const std::vector<std::vector<double>> probs = {
      {0.05, 0.9, 0.05}, {0.9, 0.05, 0.05}, {0.05, 0.9, 0.05}};
  const auto nbest = decode(PrefixBeamSearch(wide()), probs);
  EXPECT_EQ(nbest[0].labels, (std::vector<int>{1, 1}));
  EXPECT_NEAR(nbest[0].acoustic, std::log(0.9 * 0.9 * 0.9), 1e-6);
  // "a" = a a a + a a _ + _ a a + a _ _ ... every alignment with the a's contiguous.
  double p_a = 0;
  const double pa[3] = {0.9, 0.05, 0.9}, pb[3] = {0.05, 0.9, 0.05};
  for (int first = 0; first < 3; ++first)
    for (int last = first; last < 3; ++last) {
      double p = 1;
      for (int t = 0; t < 3; ++t) p *= (t >= first && t <= last) ? pa[t] : pb[t];
      p_a += p;
    }
  bool found = false;
  for (const auto& h : nbest)
    if (h.labels == std::vector<int>{1}) {
      EXPECT_NEAR(h.acoustic, std::log(p_a), 1e-6);
      found = true;
    }
  EXPECT_TRUE(found);
}

TEST(BeamSearch, MatchesGreedyOnPeakedDistributions) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> cls(0, 5);
  std::normal_distribution<float> noise(0, 1);
  for (int trial = 0; trial < 20; ++trial) {
    const int T = 30, K = 6;
    std::vector<float> logits(T * K);
    for (int t = 0; t < T; ++t) {
      for (int k = 0; k < K; ++k) logits[t * K + k] = noise(rng);
      logits[t * K + cls(rng)] += 12;  // one class takes nearly all the mass
    }
    std::vector<int> expected;
    greedy_decode_utterance(logits.data(), T, 1, K, 0, T, &expected);
    const auto nbest = PrefixBeamSearch(wide()).decode(logits.data(), T, 1, K, 0, T);
    EXPECT_EQ(nbest[0].labels, expected) << "trial " << trial;
  }
}

TEST(BeamSearch, LongUtterancesKeepTheirPrefixes) {
  // 6000 frames with every label tried at every frame: hundreds of thousands of prefixes are
  // created, most pruned at once; the surviving prefixes must keep their full label history.
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> cls(0, 7);
  std::normal_distribution<float> noise(0, 1);
  const int T = 6000, K = 8;
  std::vector<float> logits(T * K);
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < K; ++k) logits[t * K + k] = noise(rng);
    logits[t * K + cls(rng)] += 12;
  }
  std::vector<int> expected;
  greedy_decode_utterance(logits.data(), T, 1, K, 0, T, &expected);
  ASSERT_GT(expected.size(), 3000u);
  const auto nbest = PrefixBeamSearch(wide()).decode(logits.data(), T, 1, K, 0, T);
  EXPECT_EQ(nbest[0].labels, expected);
}

// Classes: 0 blank, 1 space, 2 'a', 3 'b', 4 'c'.
const std::vector<std::string> kSymbols = {"", " ", "a", "b", "c"};

std::shared_ptr<const ArpaLm> unigram_lm() {
  std::istringstream in(
      "\\data\\\nngram 1=6\n\n\\1-grams:\n-1.0 </s>\n-99 <s>\n-3.0 <unk>\n-0.5 ab\n-2.0 ac\n"
      "-0.5 ba\n\\end\\\n");
  return std::make_shared<const ArpaLm>(ArpaLm::parse(in, "test.arpa"));
}

// Frames spelling "a {b|c} _ b {a|c}": the second letter of each word is acoustically close.
std::vector<std::vector<double>> two_words(double b1, double c1, double a2, double c2) {
  const double rest = 0.025;
  return {{rest, rest, 0.9, rest, rest},
          {1 - b1 - c1 - 0.01, 0.005, 0.005, b1, c1},
          {rest, 0.9, rest, rest, rest},
          {rest, rest, rest, 0.9, rest},
          {1 - a2 - c2 - 0.01, 0.005, a2, 0.005, c2}};
}

TEST(BeamSearch, LanguageModelDecidesBetweenAcousticallyCloseWords) {
  // Acoustics prefer "ac" (0.54 vs 0.44) for the first word: greedy and plain beam say "ac ba".
  const auto probs = two_words(0.44, 0.54, 0.9, 0.001);
  EXPECT_EQ(greedy(probs), (std::vector<int>{2, 4, 1, 3, 2}));
  EXPECT_EQ(decode(PrefixBeamSearch(wide()), probs)[0].labels, (std::vector<int>{2, 4, 1, 3, 2}));
  // The LM makes "ab" 10^1.5 times likelier than "ac"; with alpha = 1 it flips the first word.
  BeamSearchOptions opt = wide();
  opt.lm_weight = 1.0;
  opt.word_score = 0.5;
  opt.space_label = 1;
  const auto nbest = decode(PrefixBeamSearch(opt, unigram_lm(), kSymbols), probs);
  EXPECT_EQ(nbest[0].labels, (std::vector<int>{2, 3, 1, 3, 2}));
  // "ab", "ba", </s>: ln(10) * (-0.5 - 0.5 - 1.0) + 2 words * 0.5.
  EXPECT_NEAR(nbest[0].lm, std::log(10.0) * -2.0 + 1.0, 1e-6);
  EXPECT_NEAR(nbest[0].score, nbest[0].acoustic + nbest[0].lm, 1e-9);
  // A small weight leaves the acoustic winner.
  opt.lm_weight = 0.05;
  EXPECT_EQ(decode(PrefixBeamSearch(opt, unigram_lm(), kSymbols), probs)[0].labels,
            (std::vector<int>{2, 4, 1, 3, 2}));
}

TEST(BeamSearch, UnknownWordsGetUnkProbabilityOrTheConfiguredPenalty) {
  // The last word is acoustically "bc" (0.54) over "ba" (0.44); "bc" is not in the LM. It is
  // completed by the end of the utterance, not by a space.
  const auto probs = two_words(0.9, 0.001, 0.44, 0.54);
  BeamSearchOptions opt = wide();
  opt.lm_weight = 1.0;
  opt.space_label = 1;
  // <unk> has log10 P = -3: "ba" (-0.5) wins.
  auto nbest = decode(PrefixBeamSearch(opt, unigram_lm(), kSymbols), probs);
  EXPECT_EQ(nbest[0].labels, (std::vector<int>{2, 3, 1, 3, 2}));
  // A mild penalty for unknown words lets the acoustics win: "ab bc".
  opt.unk_log10_prob = -0.1;
  nbest = decode(PrefixBeamSearch(opt, unigram_lm(), kSymbols), probs);
  EXPECT_EQ(nbest[0].labels, (std::vector<int>{2, 3, 1, 3, 4}));
  EXPECT_NEAR(nbest[0].lm, std::log(10.0) * (-0.5 - 0.1 - 1.0), 1e-6);
}

TEST(BeamSearch, TiesAndRepeatedCallsAreDeterministic) {
  // One frame where 'a' and 'b' are equally likely: the lower class wins, as in greedy.
  const std::vector<std::vector<double>> tie = {{0.2, 0.4, 0.4}};
  const auto nbest = decode(PrefixBeamSearch(wide()), tie);
  EXPECT_EQ(nbest[0].labels, (std::vector<int>{1}));
  EXPECT_EQ(nbest[1].labels, (std::vector<int>{2}));
  EXPECT_EQ(nbest[0].score, nbest[1].score);
  // Same input, same output, bit for bit; utterance 1 of a time-major batch of 2 decodes like
  // the same frames alone.
  std::mt19937 rng(3);
  std::normal_distribution<float> noise(0, 2);
  const int T = 40, B = 2, K = 5;
  std::vector<float> batch(T * B * K), alone(T * K);
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < K; ++k) batch[(t * B + b) * K + k] = noise(rng);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k) alone[t * K + k] = batch[(t * B + 1) * K + k];
  BeamSearchOptions opt = wide();
  opt.beam_width = 4;
  const PrefixBeamSearch search(opt);
  const auto first = search.decode(batch.data(), T, B, K, 1, T);
  const auto again = search.decode(batch.data(), T, B, K, 1, T);
  const auto single = search.decode(alone.data(), T, 1, K, 0, T);
  ASSERT_EQ(first.size(), 4u);
  ASSERT_EQ(again.size(), first.size());
  ASSERT_EQ(single.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(again[i].labels, first[i].labels);
    EXPECT_EQ(again[i].score, first[i].score);
    EXPECT_EQ(single[i].labels, first[i].labels);
    EXPECT_EQ(single[i].score, first[i].score);
  }
  // A shorter valid length ignores the padding frames after it.
  const auto half = search.decode(batch.data(), T, B, K, 1, T / 2);
  const auto half_alone = search.decode(alone.data(), T / 2, 1, K, 0, T / 2);
  EXPECT_EQ(half[0].labels, half_alone[0].labels);
}

TEST(BeamSearch, EmptyUtterance) {
  const PrefixBeamSearch plain(wide());
  auto nbest = plain.decode(nullptr, 0, 1, 3, 0, 0);
  ASSERT_EQ(nbest.size(), 1u);
  EXPECT_TRUE(nbest[0].labels.empty());
  EXPECT_EQ(nbest[0].score, 0);
  // With an LM the empty sentence still pays P(</s> | <s>) = 10^-1.
  BeamSearchOptions opt = wide();
  opt.lm_weight = 2.0;
  opt.space_label = 1;
  const std::vector<float> logits(3 * 5, 0.f);
  nbest = PrefixBeamSearch(opt, unigram_lm(), kSymbols).decode(logits.data(), 3, 1, 5, 0, 0);
  ASSERT_EQ(nbest.size(), 1u);
  EXPECT_TRUE(nbest[0].labels.empty());
  EXPECT_NEAR(nbest[0].lm, 2.0 * std::log(10.0) * -1.0, 1e-9);
}

TEST(BeamSearch, PruningDropsUnlikelyLabels) {
  // The classic case again: with labels below ln 0.5 skipped, "a" is never proposed.
  const std::vector<std::vector<double>> probs = {{0.6, 0.4}, {0.6, 0.4}};
  BeamSearchOptions opt = wide();
  opt.prune_log_prob = std::log(0.5);
  EXPECT_TRUE(decode(PrefixBeamSearch(opt), probs)[0].labels.empty());
  // top_k = 1 keeps only the likeliest label per frame: 'b' here, never 'a'.
  opt = wide();
  opt.top_k = 1;
  const auto nbest = decode(PrefixBeamSearch(opt), {{0.1, 0.4, 0.5}, {0.1, 0.4, 0.5}});
  for (const auto& h : nbest)
    for (int label : h.labels) EXPECT_EQ(label, 2);
  // A beam of one keeps a single prefix per frame.
  opt = wide();
  opt.beam_width = 1;
  EXPECT_EQ(decode(PrefixBeamSearch(opt), probs).size(), 1u);
}

TEST(BeamSearch, InvalidOptionsAreClearErrors) {
  BeamSearchOptions opt;
  opt.beam_width = 0;
  EXPECT_THROW(PrefixBeamSearch{opt}, Error);
  opt = BeamSearchOptions();
  try {
    PrefixBeamSearch(opt, unigram_lm(), kSymbols);  // no space label
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "beam search: with a language model, space_label must name one of the 5 classes, "
              "got -1");
  }
  std::istringstream no_unk(
      "\\data\\\nngram 1=3\n\\1-grams:\n-1 </s>\n-99 <s>\n-0.1 ab\n\\end\\\n");
  auto lm = std::make_shared<const ArpaLm>(ArpaLm::parse(no_unk, "x.arpa"));
  opt.space_label = 1;
  EXPECT_THROW(PrefixBeamSearch(opt, lm, kSymbols), Error);
  opt.unk_log10_prob = -5;
  EXPECT_NO_THROW(PrefixBeamSearch(opt, lm, kSymbols));
  // Symbols must cover the classes of the logits.
  const std::vector<float> logits(4, 0.f);
  EXPECT_THROW(PrefixBeamSearch(opt, lm, kSymbols).decode(logits.data(), 1, 1, 4, 0, 1), Error);
}

}  // namespace
}  // namespace ds2
