#include "ctc/error_rate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ds2 {
namespace {

using Tokens = std::vector<std::string>;

void expect_counts(const ErrorCounts& c, int64_t correct, int64_t sub, int64_t del, int64_t ins) {
  EXPECT_EQ(c.correct, correct);
  EXPECT_EQ(c.substitutions, sub);
  EXPECT_EQ(c.deletions, del);
  EXPECT_EQ(c.insertions, ins);
  EXPECT_EQ(c.reference_length, correct + sub + del);
}

TEST(ErrorRate, CountsEachKindOfEdit) {
  // the cat sat on the mat -> the bat sat the mat too: cat->bat, "on" deleted, "too" inserted.
  const ErrorCounts c = word_errors("the cat sat on the mat", "the bat sat the mat too");
  expect_counts(c, 4, 1, 1, 1);
  EXPECT_DOUBLE_EQ(c.rate(), 3.0 / 6.0);
  expect_counts(word_errors("a b c", "a b c"), 3, 0, 0, 0);
  expect_counts(word_errors("a b c d", "a x c"), 2, 1, 1, 0);
}

TEST(ErrorRate, EmptyReferenceOrHypothesis) {
  const ErrorCounts all_deleted = word_errors("one two three", "");
  expect_counts(all_deleted, 0, 0, 3, 0);
  EXPECT_DOUBLE_EQ(all_deleted.rate(), 1.0);
  const ErrorCounts all_inserted = word_errors("", "one two");
  expect_counts(all_inserted, 0, 0, 0, 2);
  EXPECT_EQ(all_inserted.rate(), std::numeric_limits<double>::infinity());
  const ErrorCounts nothing = word_errors("  ", "");
  expect_counts(nothing, 0, 0, 0, 0);
  EXPECT_EQ(nothing.rate(), 0.0);
}

TEST(ErrorRate, SubstitutionCostsLessThanDeletionPlusInsertion) {
  // Weight 4 < 3 + 3: a wrong word is one substitution, not a deletion and an insertion.
  expect_counts(align_tokens({"a"}, {"b"}), 0, 1, 0, 0);
}

TEST(ErrorRate, WeightsPreferShiftingOverSubstitutingEverything) {
  // Unit-cost edit distance ties 2 substitutions with deletion+insertion; sclite's weights pick
  // D+I (cost 6 < 8) and keep the shared word correct.
  expect_counts(align_tokens({"a", "b"}, {"b", "a"}), 1, 0, 1, 1);
  // x a b vs a b c: insertion + deletion (6) beats three substitutions (12).
  expect_counts(align_tokens({"a", "b", "c"}, {"x", "a", "b"}), 2, 0, 1, 1);
}

TEST(ErrorRate, TiesResolveLikeSclite) {
  // "a a b" vs "b c c": three substitutions (12) tie with keeping "b" correct at the cost of two
  // deletions and two insertions (12). sclite prefers the diagonal move, so: S=3.
  expect_counts(align_tokens({"a", "a", "b"}, {"b", "c", "c"}), 0, 3, 0, 0);
  expect_counts(align_tokens({"a", "a", "b"}, {"b", "c", "c", "c"}), 0, 3, 0, 1);
}

// (ref, hyp) per aligned position, and (ref, hyp, count) per confusion, for whole-list checks.
using Pairs = std::vector<std::pair<std::string, std::string>>;
Pairs pairs_of(const std::vector<AlignedToken>& aligned) {
  Pairs out;
  for (const AlignedToken& t : aligned) out.emplace_back(t.ref, t.hyp);
  return out;
}
using Counted = std::vector<std::tuple<std::string, std::string, int64_t>>;
Counted counted_of(const std::vector<Confusion>& confusions) {
  Counted out;
  for (const Confusion& c : confusions) out.emplace_back(c.ref, c.hyp, c.count);
  return out;
}

TEST(ErrorRate, AlignedTokensFollowTheCountedAlignment) {
  // the cat sat on the mat -> the bat sat the mat too: cat->bat, "on" deleted, "too" inserted.
  EXPECT_EQ(pairs_of(aligned_tokens(split_words("the cat sat on the mat"),
                                    split_words("the bat sat the mat too"))),
            (Pairs{{"the", "the"},
                   {"cat", "bat"},
                   {"sat", "sat"},
                   {"on", ""},
                   {"the", "the"},
                   {"mat", "mat"},
                   {"", "too"}}));
  // The same choice among equal-cost alignments as the counts: "b" kept, "a" deleted and
  // inserted.
  EXPECT_EQ(pairs_of(aligned_tokens({"a", "b"}, {"b", "a"})),
            (Pairs{{"a", ""}, {"b", "b"}, {"", "a"}}));
  EXPECT_TRUE(aligned_tokens({}, {}).empty());
}

TEST(ErrorRate, WordConfusionsCountSubstitutionsOnly) {
  const std::vector<Confusion> c = word_confusions({
      {"two three four", "four three five"},  // two->four, four->five
      {"two two", "four"},                    // two->four, one two deleted
      {"one", "one six"},                     // six inserted
      {"four one", "five one"},               // four->five
      {"nine", "one"},                        // nine->one
  });
  // 2 each: (four, five) sorts before (two, four).
  EXPECT_EQ(counted_of(c), (Counted{{"four", "five", 2}, {"two", "four", 2}, {"nine", "one", 1}}));
  EXPECT_TRUE(word_confusions({{"a b", "a b"}}).empty());
}

TEST(ErrorRate, AddAccumulatesCorpusTotals) {
  ErrorCounts total;
  total.add(word_errors("a b c d", "a b c d"));  // 4 correct
  total.add(word_errors("e f", "e g h"));        // 1 sub, 1 ins
  expect_counts(total, 5, 1, 0, 1);
  EXPECT_DOUBLE_EQ(total.rate(), 2.0 / 6.0);
}

TEST(ErrorRate, WordsSplitOnAnyWhitespace) {
  EXPECT_EQ(split_words("  hello\tworld \n again "), (Tokens{"hello", "world", "again"}));
  expect_counts(word_errors("hello world", "\thello   world\n"), 2, 0, 0, 0);
}

TEST(ErrorRate, CharactersKeepOneSpaceBetweenWords) {
  EXPECT_EQ(split_characters("  ab  c "), (Tokens{"a", "b", " ", "c"}));
  // UTF-8: "né" is two characters, not three bytes.
  EXPECT_EQ(split_characters("n\xc3\xa9"), (Tokens{"n", "\xc3\xa9"}));
  // Spacing differences are free; a merged word costs one deletion (the space).
  expect_counts(char_errors("ab c", " ab   c"), 4, 0, 0, 0);
  expect_counts(char_errors("ab c", "abc"), 3, 0, 1, 0);
  // cat -> cut: one substitution out of three characters.
  const ErrorCounts c = char_errors("cat", "cut");
  expect_counts(c, 2, 1, 0, 0);
  EXPECT_DOUBLE_EQ(c.rate(), 1.0 / 3.0);
}

}  // namespace
}  // namespace ds2
