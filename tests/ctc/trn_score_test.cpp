#include "ctc/trn_score.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.h"

namespace ds2 {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TrnScore, ParsesTextAndTheTrailingId) {
  const auto utts =
      parse_trn("the cat (spk-1)\n\n   \n (spk-2)\r\nsay (a) word (spk-3)  \n", "r.trn");
  ASSERT_EQ(utts.size(), 3u);
  EXPECT_EQ(utts[0].id, "spk-1");
  EXPECT_EQ(utts[0].text, "the cat ");
  EXPECT_EQ(utts[0].line, 1);
  EXPECT_EQ(utts[1].id, "spk-2");
  EXPECT_EQ(utts[1].text, " ");
  EXPECT_EQ(utts[1].line, 4);
  EXPECT_EQ(utts[2].id, "spk-3");
  EXPECT_EQ(utts[2].text, "say (a) word ");
  EXPECT_EQ(error_of([] { parse_trn("ok (a-1)\nno id here\n", "h.trn"); }),
            "h.trn:2: a trn line must end in \"(utterance-id)\"");
  EXPECT_EQ(error_of([] { parse_trn("words ()\n", "h.trn"); }),
            "h.trn:1: empty utterance id \"()\"");
}

TEST(TrnScore, MatchesById_FoldsCase_SumsCounts) {
  const auto ref = parse_trn("the cat sat (a-1)\none two three (a-2)\n (b-1)\n", "r.trn");
  // Hypotheses in another order; "The CAT" matches "the cat".
  const auto hyp = parse_trn("x y (b-1)\n (a-2)\nThe CAT sat down (a-1)\n", "h.trn");
  const TrnScore s = score_trn(ref, hyp);
  ASSERT_EQ(s.utterances.size(), 3u);
  EXPECT_EQ(s.utterances[0].id, "a-1");
  EXPECT_EQ(s.utterances[0].words.correct, 3);
  EXPECT_EQ(s.utterances[0].words.insertions, 1);
  EXPECT_EQ(s.utterances[1].words.deletions, 3);
  EXPECT_EQ(s.utterances[2].words.insertions, 2);
  EXPECT_EQ(s.words.correct, 3);
  EXPECT_EQ(s.words.substitutions, 0);
  EXPECT_EQ(s.words.deletions, 3);
  EXPECT_EQ(s.words.insertions, 3);
  EXPECT_EQ(s.words.reference_length, 6);
  EXPECT_DOUBLE_EQ(s.words.rate(), 1.0);
  EXPECT_EQ(s.utterances_with_errors, 3);
}

TEST(TrnScore, EveryUtteranceNeedsBothSidesOnce) {
  const auto ref = parse_trn("a (u-1)\nb (u-2)\n", "r.trn");
  EXPECT_EQ(error_of([&] { score_trn(ref, parse_trn("a (u-1)\n", "h.trn")); }),
            "r.trn:2: utterance 'u-2' has no hypothesis in h.trn");
  EXPECT_EQ(error_of([&] { score_trn(ref, parse_trn("a (u-1)\nb (u-2)\nc (u-3)\n", "h.trn")); }),
            "h.trn:3: utterance 'u-3' has no reference in r.trn");
  EXPECT_EQ(error_of([&] { score_trn(ref, parse_trn("a (u-1)\nb (u-2)\nc (u-1)\n", "h.trn")); }),
            "h.trn:3: utterance id 'u-1' appears again (first at line 1)");
}

}  // namespace
}  // namespace ds2
