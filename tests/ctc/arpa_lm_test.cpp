#include "ctc/arpa_lm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "support/temp_dir.h"

namespace ds2 {
namespace {

// A hand-written trigram model. Every expected value below is worked out from these lines.
const char* const kModel = R"(made by hand for arpa_lm_test
\data\
ngram 1=6
ngram 2=5
ngram 3=2

\1-grams:
-1.0	</s>
-99	<s>	-0.5
-1.5	<unk>
-0.6	a	-0.3
-0.7	b	-0.2
-0.9	c

\2-grams:
-0.2	<s> a	-0.1
-0.4	a b	-0.25
-0.3	b </s>
-0.5	b a
-0.8	a a

\3-grams:
-0.1	<s> a b
-0.05	a b </s>

\end\
)";

ArpaLm parse(const std::string& text, const std::string& source = "lm.arpa") {
  std::istringstream in(text);
  return ArpaLm::parse(in, source);
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ArpaLm, ReadsHeaderAndVocabulary) {
  const ArpaLm lm = parse(kModel);
  EXPECT_EQ(lm.order(), 3);
  EXPECT_EQ(lm.count(1), 6);
  EXPECT_EQ(lm.count(2), 5);
  EXPECT_EQ(lm.count(3), 2);
  EXPECT_EQ(lm.vocab_size(), 6);
  // Ids follow the order of the 1-grams.
  EXPECT_EQ(lm.eos_id(), 0);
  EXPECT_EQ(lm.bos_id(), 1);
  EXPECT_EQ(lm.unk_id(), 2);
  EXPECT_EQ(lm.word_id("a"), 3);
  EXPECT_EQ(lm.word(5), "c");
  EXPECT_EQ(lm.word_id("zebra"), lm.unk_id());
  EXPECT_FALSE(lm.has_word("zebra"));
  EXPECT_EQ(lm.context(lm.begin_state()), (std::vector<int>{lm.bos_id()}));
}

TEST(ArpaLm, ScoresWithBackoffComputedByHand) {
  const ArpaLm lm = parse(kModel);
  const int a = lm.word_id("a"), b = lm.word_id("b"), c = lm.word_id("c");
  // "<s> a b </s>": every n-gram is listed at its full order.
  ArpaLm::Scored r = lm.score(lm.begin_state(), a);
  EXPECT_NEAR(r.log10_prob, -0.2, 1e-6);  // <s> a
  const ArpaLm::State s_a = r.next;
  EXPECT_EQ(lm.context(s_a), (std::vector<int>{lm.bos_id(), a}));
  r = lm.score(s_a, b);
  EXPECT_NEAR(r.log10_prob, -0.1, 1e-6);  // <s> a b
  EXPECT_EQ(lm.context(r.next), (std::vector<int>{a, b}));
  EXPECT_NEAR(lm.end_score(r.next), -0.05, 1e-6);  // a b </s>

  // One backoff: "<s> a a" is unseen -> bo(<s> a) + P(a | a) = -0.1 - 0.8.
  r = lm.score(s_a, a);
  EXPECT_NEAR(r.log10_prob, -0.9, 1e-6);
  EXPECT_EQ(lm.context(r.next), (std::vector<int>{a, a}));
  // Two backoffs, the middle one without a listed weight: "a a c" and "a c" unseen ->
  // bo(a a) (absent: 0) + bo(a) + P(c) = 0 - 0.3 - 0.9.
  r = lm.score(r.next, c);
  EXPECT_NEAR(r.log10_prob, -1.2, 1e-6);
  EXPECT_EQ(lm.context(r.next), (std::vector<int>{c}));
  // From "<s> a": bo(<s> a) + bo(a) + P(c) = -0.1 - 0.3 - 0.9.
  EXPECT_NEAR(lm.score(s_a, c).log10_prob, -1.3, 1e-6);
  // End of sentence right after <s>: bo(<s>) + P(</s>) = -0.5 - 1.0.
  EXPECT_NEAR(lm.end_score(lm.begin_state()), -1.5, 1e-6);
  // The empty context gives unigram probabilities.
  EXPECT_NEAR(lm.score(lm.null_state(), b).log10_prob, -0.7, 1e-6);
  // "b a" is a bigram; from the context "a b" the trigram "a b a" is unseen:
  // bo(a b) + P(a | b) = -0.25 - 0.5.
  r = lm.score(lm.score(s_a, b).next, a);
  EXPECT_NEAR(r.log10_prob, -0.75, 1e-6);
}

TEST(ArpaLm, UnknownWordsScoreAsUnk) {
  const ArpaLm lm = parse(kModel);
  const ArpaLm::State s_a = lm.score(lm.begin_state(), lm.word_id("a")).next;
  // "<s> a <unk>" and "a <unk>" unseen: bo(<s> a) + bo(a) + P(<unk>) = -0.1 - 0.3 - 1.5.
  const ArpaLm::Scored r = lm.score(s_a, lm.word_id("zebra"));
  EXPECT_NEAR(r.log10_prob, -1.9, 1e-6);
  EXPECT_EQ(lm.context(r.next), (std::vector<int>{lm.unk_id()}));
}

TEST(ArpaLm, WithoutUnkAnUnknownWordHasZeroProbability) {
  std::string text = kModel;
  text.replace(text.find("-1.5\t<unk>\n"), 11, "");
  text.replace(text.find("ngram 1=6"), 9, "ngram 1=5");
  const ArpaLm lm = parse(text);
  EXPECT_EQ(lm.unk_id(), ArpaLm::kNoWord);
  EXPECT_EQ(lm.word_id("zebra"), ArpaLm::kNoWord);
  const ArpaLm::Scored r = lm.score(lm.begin_state(), ArpaLm::kNoWord);
  EXPECT_TRUE(std::isinf(r.log10_prob) && r.log10_prob < 0);
  EXPECT_EQ(r.next, lm.null_state());
  EXPECT_THROW(lm.score(lm.begin_state(), 99), Error);
}

TEST(ArpaLm, UnigramModel) {
  const ArpaLm lm =
      parse("\\data\\\nngram 1=3\n\n\\1-grams:\n-0.5 </s>\n-99 <s>\n-0.2 x\n\\end\\\n");
  EXPECT_EQ(lm.order(), 1);
  EXPECT_NEAR(lm.score(lm.begin_state(), lm.word_id("x")).log10_prob, -0.2, 1e-6);
  EXPECT_NEAR(lm.end_score(lm.begin_state()), -0.5, 1e-6);
}

TEST(ArpaLm, LoadsFromAFile) {
  TempDir dir;
  std::ofstream(dir.file("m.arpa")) << kModel;
  const ArpaLm lm = ArpaLm::load(dir.file("m.arpa"));
  EXPECT_EQ(lm.count(2), 5);
  try {
    ArpaLm::load(dir.file("missing.arpa"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              dir.file("missing.arpa") + ": cannot open language model file");
  }
}

// Replaces the first occurrence of `from` in the model text.
std::string model_with(const std::string& from, const std::string& to) {
  std::string text = kModel;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  return text;
}

TEST(ArpaLm, MalformedFilesNameFileLineAndReason) {
  // Line numbers count from the comment line (line 1); "\data\" is line 2.
  EXPECT_EQ(error_of(model_with("ngram 2=5", "ngram 2=6")),
            "lm.arpa:22: the \\2-grams: section has 5 entries, the \\data\\ header announces 6");
  EXPECT_EQ(error_of(model_with("ngram 1=6", "ngram 1=5")),
            "lm.arpa:13: more 1-grams than the 5 the \\data\\ header announces");
  EXPECT_EQ(error_of(model_with("-0.4\ta b", "-0.x\ta b")),
            "lm.arpa:17: bad log10 probability '-0.x'");
  EXPECT_EQ(error_of(model_with("a b\t-0.25", "a b\t-0.2.5")),
            "lm.arpa:17: bad log10 backoff weight '-0.2.5'");
  EXPECT_EQ(error_of(model_with("-0.5\tb a", "-0.5\tb a c d")),
            "lm.arpa:19: a 2-gram line needs a log10 probability, 2 words and an optional "
            "backoff, got 5 fields");
  EXPECT_EQ(error_of(model_with("-0.1\t<s> a b", "-0.1\t<s> a")),
            "lm.arpa:23: a 3-gram line needs a log10 probability, 3 words, got 3 fields");
  EXPECT_EQ(error_of(model_with("-0.05\ta b </s>", "-0.05\ta b </s> -0.1")),
            "lm.arpa:24: a backoff weight on a 3-gram, the highest order");
  EXPECT_EQ(error_of(model_with("-0.8\ta a", "-0.8\ta d")),
            "lm.arpa:20: word 'd' is not among the 1-grams");
  EXPECT_EQ(error_of(model_with("-0.8\ta a", "-0.8\tb a")), "lm.arpa:20: duplicate 2-gram");
  EXPECT_EQ(error_of(model_with("-0.9\tc", "-0.9\ta")), "lm.arpa:13: word 'a' listed twice");
  EXPECT_EQ(error_of(model_with("-0.7\tb", "0.7\tb")),
            "lm.arpa:12: log10 probability 0.7 is above 0");
  EXPECT_EQ(error_of(model_with("ngram 2=5", "ngram 2 5")),
            "lm.arpa:4: expected 'ngram N=COUNT' in the \\data\\ header, got 'ngram 2 5'");
  EXPECT_EQ(error_of(model_with("ngram 2=5", "ngram 3=5")),
            "lm.arpa:4: expected the count of 2-grams, got 'ngram 3='");
  // The header announces three orders, the file holds two.
  EXPECT_EQ(error_of(model_with("\\3-grams:\n-0.1\t<s> a b\n-0.05\ta b </s>\n", "")),
            "lm.arpa:23: expected \\3-grams: (the header announces order 3), got '\\end\\'");
  // The file holds more orders than the header announces.
  EXPECT_EQ(error_of(model_with("ngram 3=2\n", "")),
            "lm.arpa:15: a backoff weight on a 2-gram, the highest order");
  EXPECT_EQ(error_of("\\data\\\nngram 1=3\n\\1-grams:\n-1 </s>\n-99 <s>\n-0.1 ab\n"
                     "\\2-grams:\n-0.1 <s> ab\n\\end\\\n"),
            "lm.arpa:7: expected \\end\\ after the \\1-grams: section (the header announces "
            "order 1), got '\\2-grams:'");
  EXPECT_EQ(error_of(model_with("\\end\\\n", "")),
            "lm.arpa: ends inside the \\3-grams: section (no \\end\\ line)");
  EXPECT_EQ(error_of("just text\n"), "lm.arpa: not an ARPA file: no \\data\\ line");
  EXPECT_EQ(error_of("\\data\\\nngram 1=2\n\\1-grams:\n-0.5 </s>\n-0.2 x\n\\end\\\n"),
            "lm.arpa: no <s> among the 1-grams");
}

// The digits LM the repo ships (scripts/build-arpa.py output): readable, and every context's
// distribution sums to 1 over the vocabulary and </s> under this reader's backoff scoring.
TEST(ArpaLm, ShippedDigitsModelIsNormalized) {
  const ArpaLm lm = ArpaLm::load(std::string(DS2_SOURCE_DIR) + "/data/fsdd/digits-3gram.arpa");
  EXPECT_EQ(lm.order(), 3);
  EXPECT_EQ(lm.vocab_size(), 13);  // ten digits, <s>, </s>, <unk>
  EXPECT_NE(lm.unk_id(), ArpaLm::kNoWord);
  auto total = [&](ArpaLm::State s) {
    double sum = 0;
    for (int w = 0; w < lm.vocab_size(); ++w)
      if (w != lm.bos_id()) sum += std::pow(10.0, lm.score(s, w).log10_prob);
    return sum;
  };
  ArpaLm::State s = lm.begin_state();
  EXPECT_NEAR(total(s), 1.0, 1e-4);
  EXPECT_NEAR(total(lm.null_state()), 1.0, 1e-4);
  for (const char* w : {"three", "one", "four", "one", "five", "nine", "zebra"}) {
    s = lm.score(s, lm.word_id(w)).next;
    EXPECT_NEAR(total(s), 1.0, 1e-4) << "after " << w;
  }
  // Digits are drawn uniformly: no digit is much likelier than another after "<s> three".
  const ArpaLm::State after_three = lm.score(lm.begin_state(), lm.word_id("three")).next;
  for (const char* w : {"zero", "one", "two", "nine"})
    EXPECT_NEAR(lm.score(after_three, lm.word_id(w)).log10_prob, -1.05, 0.25) << w;
  EXPECT_LT(lm.score(after_three, lm.word_id("zebra")).log10_prob, -3.0);
}

}  // namespace
}  // namespace ds2
